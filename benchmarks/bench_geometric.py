"""Geometric noise: dpframe beside numpy's non-private sampler, OpenDP and diffprivlib.

Run: ``python benchmarks/bench_geometric.py``. One process, one thread; for each epsilon
the cases run interleaved (medians of 7 repeats), and every speed is relative to numpy's
``rng.geometric(p, n) - rng.geometric(p, n)`` in the same run (above 1: faster). Beside
each dpframe case: the random 64-bit words it reads per value (counted on its
cryptographic source) and its first call with every cache empty (plan building
included). OpenDP and diffprivlib are timed when installed (``pip install opendp
diffprivlib "scikit-learn<1.6"`` in a throwaway environment), on fewer values, because
they loop per element.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _timing  # noqa: I001 - before numpy: it pins the thread count

import numpy as np

import dpframe.mechanisms as dpm

N = 1_000_000
PEER_N = 20_000
NUMPY = "numpy rng.geometric(p,n) - rng.geometric(p,n) [not private]"


def main() -> None:
    values = np.zeros(N, dtype=np.int64)
    gen = np.random.default_rng()
    print(f"geometric noise, n = {N:,} values")
    for epsilon in (1.0, 0.01):
        p = -math.expm1(-epsilon)
        cases: dict[str, _timing.Case] = {
            NUMPY: lambda p=p: gen.geometric(p, N) - gen.geometric(p, N),
            "dpframe geometric, unbounded": lambda e=epsilon: dpm.geometric(values, epsilon=e),
            "dpframe geometric, bounds (0, 1e6)": lambda e=epsilon: dpm.geometric(
                values, epsilon=e, bounds=(0, 10**6)
            ),
            "dpframe geometric, bounds (0, 1e6), constant time": lambda e=epsilon: dpm.geometric(
                values, epsilon=e, bounds=(0, 10**6), constant_time=True
            ),
        }
        extras = {}
        for name, fn in cases.items():
            if name.startswith("dpframe"):
                first = _timing.first_call_seconds(fn)
                words = _timing.words_per_value(fn, N)
                extras[name] = f"{words:9.3f} {first * 1e3:10.1f} ms"
        medians = _timing.interleaved(cases)
        print(f"epsilon = {epsilon}")
        print(_timing.header("numpy") + "   words/value   first call")
        for name, seconds in medians.items():
            print(_timing.row(name, seconds, N, medians[NUMPY], extras.get(name, "")))
        _peers(epsilon, medians[NUMPY])


def _peers(epsilon: float, numpy_seconds: float) -> None:
    small = np.zeros(PEER_N, dtype=np.int64)
    cases: dict[str, _timing.Case] = {}
    try:
        import opendp.prelude as dp

        dp.enable_features("contrib")
        meas = dp.m.make_laplace(
            dp.vector_domain(dp.atom_domain(T=int)), dp.l1_distance(T=int), scale=1 / epsilon
        )
        as_list = small.tolist()
        cases["OpenDP make_laplace, int vector"] = lambda: meas(as_list)
    except ImportError:
        print("  OpenDP not installed: skipped")
    try:
        from diffprivlib.mechanisms import Geometric

        mech = Geometric(epsilon=epsilon, sensitivity=1)
        cases["diffprivlib Geometric.randomise, per element"] = lambda: [
            mech.randomise(0) for _ in range(PEER_N)
        ]
    except ImportError:
        print("  diffprivlib not installed: skipped")
    if cases:
        for name, seconds in _timing.interleaved(cases, repeats=3).items():
            speed = numpy_seconds / N / (seconds / PEER_N)
            print(_timing.row(f"{name} (n = {PEER_N:,})", seconds, PEER_N) + f" {speed:7.3f}x")


if __name__ == "__main__":
    main()
