"""Threshold decisions and the rejection geometric beside their numpy equivalents.

Run: ``python benchmarks/bench_decisions.py``. One process, one thread, the cases of each
comparison interleaved, medians of 7 repeats; speeds relative to the first (numpy) line.

* Decisions (public API: ``threshold_decision`` on an array of counts, and
  ``decision_probability``): numpy's equivalents are the Laplace decision itself,
  ``counts + rng.laplace(0, 1/ε, n) >= k`` (non-private: floating-point), and the floor
  ``rng.random(n) < p`` for one known probability. ``sample_decisions`` (the private
  kernel the accessor calls) is shown too, so that figures compare with versions of
  dpframe whose public function took one count at a time.
* Rejection geometric (seed 002, section 2.4): numpy's ``rng.geometric`` difference
  (one draw per value, no rejection) and a numpy rejection loop at the same ε'.
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _timing  # noqa: I001 - before numpy: it pins the thread count

import numpy as np

import dpframe.mechanisms as dpm
from dpframe import _decisions
from dpframe._random import bit_source

N = 1_000_000
EPSILON = 0.5
MIN_COUNT = 110


def _public_array_decisions() -> bool:
    try:
        dpm.threshold_decision(np.array([1, 2]), min_count=1, epsilon=1.0)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return False
    return True


def decisions() -> None:
    gen = np.random.default_rng()
    spread = gen.integers(0, 220, N).astype(np.int64)  # counts around min_count
    one = np.full(N, 100, dtype=np.int64)
    k = MIN_COUNT  # p = 0.5: the Laplace decision's threshold is min_count itself
    public = _public_array_decisions()
    params = _decisions.check_parameters(MIN_COUNT, EPSILON, 0.0, "laplace", 0.5)
    prob = float(dpm.decision_probability(100, min_count=MIN_COUNT, epsilon=EPSILON)[()])

    def kernel(counts: np.ndarray) -> object:
        return _decisions.sample_decisions(
            counts,
            min_count=params.min_count,
            epsilon=params.epsilon,
            delta=params.delta,
            method=params.method,
            p=params.p,
            source=bit_source(None),
        )

    for label, counts in (("one count (100)", one), ("counts spread over 0..219", spread)):
        cases: dict[str, _timing.Case] = {
            "numpy counts + rng.laplace(0, 1/eps, n) >= k [not private]": lambda c=counts: (
                c + gen.laplace(0, 1 / EPSILON, N) >= k
            ),
            "numpy rng.random(n) < p, one known p [the floor]": lambda: gen.random(N) < prob,
            "dpframe sample_decisions (private kernel)": lambda c=counts: kernel(c),
        }
        if public:
            cases["dpframe threshold_decision(counts, ...) (public)"] = lambda c=counts: (
                dpm.threshold_decision(c, min_count=MIN_COUNT, epsilon=EPSILON)  # type: ignore[call-overload]
            )
        extras = {
            name: f"{_timing.words_per_value(fn, N):9.3f} "
            f"{_timing.first_call_seconds(fn) * 1e3:10.1f} ms"
            for name, fn in cases.items()
            if name.startswith("dpframe")
        }
        medians = _timing.interleaved(cases)
        base = next(iter(medians.values()))
        print(f"threshold decisions (laplace, epsilon {EPSILON}), n = {N:,}, {label}")
        print(_timing.header("numpy") + "   words/value   first call")
        for name, seconds in medians.items():
            print(_timing.row(name, seconds, N, base, extras.get(name, "")))

    # decision_probability: the exact curve at every count (public, no randomness)
    a = math.exp(-EPSILON)
    curve_cases: dict[str, _timing.Case] = {
        "numpy closed form of the Laplace curve [float]": lambda: np.where(
            spread < k, 0.5 * a ** (k - spread), 1 - 0.5 * a ** (spread - k)
        ),
        "dpframe decision_probability(counts, ...)": lambda: dpm.decision_probability(
            spread, min_count=MIN_COUNT, epsilon=EPSILON
        ),
    }
    first = _timing.first_call_seconds(curve_cases["dpframe decision_probability(counts, ...)"])
    medians = _timing.interleaved(curve_cases)
    base = next(iter(medians.values()))
    print(f"decision_probability, n = {N:,} counts spread over 0..219 (220 distinct)")
    print(_timing.header("numpy") + "   first call")
    for name, seconds in medians.items():
        extra = f"{first * 1e3:10.1f} ms" if name.startswith("dpframe") else ""
        print(_timing.row(name, seconds, N, base, extra))


def rejection() -> None:
    gen = np.random.default_rng()
    values = np.full(N, 20, dtype=np.int64)
    epsilon, bounds = Fraction(1, 10), (0, 30)
    p = -math.expm1(-float(epsilon))
    try:
        rate = float(dpm.geometric_rejection_epsilon(epsilon=epsilon, bounds=bounds))  # type: ignore[attr-defined]
    except AttributeError:  # versions before the function: the seed's epsilon'
        from dpframe import _geometric

        rate = float(_geometric.rejection_epsilon(epsilon, 30))
    q = -math.expm1(-rate)

    def numpy_rejection() -> np.ndarray:
        out = values + gen.geometric(q, N) - gen.geometric(q, N)
        bad = np.flatnonzero((out < 0) | (out > 30))
        while bad.size:
            out[bad] = values[bad] + gen.geometric(q, bad.size) - gen.geometric(q, bad.size)
            bad = bad[(out[bad] < 0) | (out[bad] > 30)]
        return out

    cases: dict[str, _timing.Case] = {
        "numpy rng.geometric(p,n) - rng.geometric(p,n), no rejection [not private]": lambda: (
            gen.geometric(p, N) - gen.geometric(p, N)
        ),
        f"numpy rejection loop at the same epsilon' = {rate:.4g} [not private]": numpy_rejection,
        "dpframe geometric(..., out_of_range='resample')": lambda: dpm.geometric(
            values, epsilon=epsilon, bounds=bounds, out_of_range="resample"
        ),
    }
    name = "dpframe geometric(..., out_of_range='resample')"
    extra = (
        f"{_timing.words_per_value(cases[name], N):9.3f} "
        f"{_timing.first_call_seconds(cases[name]) * 1e3:10.1f} ms"
    )
    medians = _timing.interleaved(cases)
    base = next(iter(medians.values()))
    print(f"rejection geometric, bounds {bounds}, epsilon 0.1, true value 20, n = {N:,}")
    print(_timing.header("numpy") + "   words/value   first call")
    for label, seconds in medians.items():
        print(_timing.row(label, seconds, N, base, extra if label == name else ""))


if __name__ == "__main__":
    decisions()
    rejection()
