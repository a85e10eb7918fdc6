"""Real-valued Laplace noise: dpframe's snapping and bounded Laplace beside numpy's sampler.

Run: ``python benchmarks/bench_laplace.py``. One process, one thread, the cases of each
epsilon interleaved; medians of 7 repeats; speed relative to numpy's non-private
``rng.laplace`` (above 1: faster). The bounded mechanism is timed with every value at an
end of the domain (its worst case: about half the proposals are rejected) and in the
middle. diffprivlib's ``Snapping`` and ``LaplaceBoundedDomain`` are timed when installed
(in a throwaway environment), on fewer values, because they loop per element.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _timing  # noqa: I001 - before numpy: it pins the thread count

import numpy as np

import dpframe.mechanisms as dpm

N = 1_000_000
PEER_N = 20_000
DOMAINS = [(0.0, 2.0), (0.0, 10.0), (-1000.0, 1000.0)]


def main() -> None:
    gen = np.random.default_rng()
    zeros = np.zeros(N)  # the input: data, built outside the timing like the others
    print(f"real-valued Laplace noise, n = {N:,} values, sensitivity 1")
    for epsilon in (1.0, 0.1):
        cases: dict[str, _timing.Case] = {
            "numpy rng.laplace(scale, n) [not private]": lambda e=epsilon: gen.laplace(
                scale=1 / e, size=N
            ),
            "dpframe laplace (snapping), bounds (-1000, 1000)": lambda e=epsilon: dpm.laplace(
                zeros, epsilon=e, sensitivity=1.0, bounds=(-1000.0, 1000.0)
            ),
        }
        for lo, hi in DOMAINS:
            for where, x in (("at an end", lo), ("mid-domain", (lo + hi) / 2)):
                values = np.full(N, x)
                cases[f"dpframe bounded_laplace, bounds ({lo:g}, {hi:g}), values {where}"] = (
                    lambda v=values, e=epsilon, b=(lo, hi): dpm.bounded_laplace(
                        v, epsilon=e, sensitivity=1.0, bounds=b
                    )
                )
        first = {
            name: _timing.first_call_seconds(fn)
            for name, fn in cases.items()
            if name.startswith("dpframe")
        }
        words = {
            name: _timing.words_per_value(fn, N, runs=1)
            for name, fn in cases.items()
            if name.startswith("dpframe")
        }
        medians = _timing.interleaved(cases)
        base = medians["numpy rng.laplace(scale, n) [not private]"]
        print(f"epsilon = {epsilon}")
        print(_timing.header("numpy") + "   words/value   first call")
        for name, seconds in medians.items():
            extra = ""
            if name in first:
                extra = f"{words[name]:9.3f} {first[name] * 1e3:10.1f} ms"
            print(_timing.row(name, seconds, N, base, extra))
        _peers(epsilon, base)


def _peers(epsilon: float, numpy_seconds: float) -> None:
    try:
        from diffprivlib.mechanisms import LaplaceBoundedDomain, Snapping
    except ImportError:
        print("  diffprivlib not installed: skipped")
        return
    snapping = Snapping(epsilon=epsilon, sensitivity=1.0, lower=-1000.0, upper=1000.0)
    bounded = LaplaceBoundedDomain(epsilon=epsilon, sensitivity=1.0, lower=0.0, upper=2.0)
    cases: dict[str, _timing.Case] = {
        "diffprivlib Snapping.randomise, per element": lambda: [
            snapping.randomise(0.0) for _ in range(PEER_N)
        ],
        "diffprivlib LaplaceBoundedDomain (0, 2), per element": lambda: [
            bounded.randomise(0.0) for _ in range(PEER_N)
        ],
    }
    for name, seconds in _timing.interleaved(cases, repeats=3).items():
        speed = numpy_seconds / N / (seconds / PEER_N)
        print(_timing.row(f"{name} (n = {PEER_N:,})", seconds, PEER_N) + f" {speed:7.3f}x")


if __name__ == "__main__":
    main()
