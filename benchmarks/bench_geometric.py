"""Geometric noise: dpframe beside numpy's non-private sampler, OpenDP and diffprivlib.

Run: ``python benchmarks/bench_geometric.py``. Prints medians and ratios; the peers are
timed only when installed (``pip install opendp diffprivlib "scikit-learn<1.6"`` in a
throwaway environment), on fewer values because they loop per element.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from _timing import median_seconds, row

import dpframe.mechanisms as dpm

N = 1_000_000
PEER_N = 20_000


def main() -> None:
    values = np.zeros(N, dtype=np.int64)
    gen = np.random.default_rng()
    print(f"geometric noise, n = {N:,} values (median of 7 runs, one process, one thread)")
    for epsilon in (1.0, 0.01):
        p = -math.expm1(-epsilon)
        base = median_seconds(lambda p=p: gen.geometric(p, N) - gen.geometric(p, N))
        print(f"epsilon = {epsilon}")
        print(row("numpy rng.geometric(p,n) - rng.geometric(p,n) [not private]", base, N))
        t = median_seconds(lambda e=epsilon: dpm.geometric(values, epsilon=e))
        print(row("dpframe geometric, unbounded", t, N, base))
        t = median_seconds(lambda e=epsilon: dpm.geometric(values, epsilon=e, bounds=(0, 10**6)))
        print(row("dpframe geometric, bounds (0, 1e6)", t, N, base))
        t = median_seconds(
            lambda e=epsilon: dpm.geometric(
                values, epsilon=e, bounds=(0, 10**6), constant_time=True
            )
        )
        print(row("dpframe geometric, bounds (0, 1e6), constant time", t, N, base))
        _peers(epsilon, base)


def _peers(epsilon: float, numpy_seconds: float) -> None:
    small = np.zeros(PEER_N, dtype=np.int64)
    try:
        import opendp.prelude as dp

        dp.enable_features("contrib")
        meas = dp.m.make_laplace(
            dp.vector_domain(dp.atom_domain(T=int)), dp.l1_distance(T=int), scale=1 / epsilon
        )
        as_list = small.tolist()
        t = median_seconds(lambda: meas(as_list), repeats=3)
        print(
            row(f"OpenDP make_laplace, int vector (n = {PEER_N:,})", t, PEER_N, None)
            + f"  {numpy_seconds / N / (t / PEER_N):6.3f}x numpy's speed"
        )
    except ImportError:
        print("  OpenDP not installed: skipped")
    try:
        from diffprivlib.mechanisms import Geometric

        mech = Geometric(epsilon=epsilon, sensitivity=1)
        t = median_seconds(lambda: [mech.randomise(0) for _ in range(PEER_N)], repeats=3)
        print(
            row(f"diffprivlib Geometric.randomise, per element (n = {PEER_N:,})", t, PEER_N)
            + f"  {numpy_seconds / N / (t / PEER_N):6.3f}x numpy's speed"
        )
    except ImportError:
        print("  diffprivlib not installed: skipped")


if __name__ == "__main__":
    main()
