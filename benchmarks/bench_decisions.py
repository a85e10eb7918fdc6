"""Threshold decisions and the rejection geometric beside numpy's non-private equivalents.

Run: ``python benchmarks/bench_decisions.py``. One process, single-threaded, medians.
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from _timing import median_seconds, row

import dpframe.mechanisms as dpm
from dpframe import _decisions
from dpframe._random import bit_source

N = 1_000_000


def main() -> None:
    gen = np.random.default_rng()
    counts = np.full(N, 100, dtype=np.int64)
    print(f"threshold decisions, n = {N:,} decisions at one count (median of 7 runs)")
    for method, delta in (("laplace", 0.0), ("generalized", 1e-3), ("cutoff", 1 - math.exp(-0.5))):
        prob = float(
            dpm.decision_probability(100, min_count=110, epsilon=0.5, delta=delta, method=method)[
                ()
            ]
        )
        base = median_seconds(lambda prob=prob: gen.random(N) < prob)
        params = _decisions.check_parameters(110, 0.5, delta, method, 0.5)
        t = median_seconds(
            lambda params=params: _decisions.sample_decisions(
                counts,
                min_count=params.min_count,
                epsilon=params.epsilon,
                delta=params.delta,
                method=params.method,
                p=params.p,
                source=bit_source(None),
            )
        )
        print(f"{method}")
        print(row("numpy rng.random(n) < p [not private]", base, N))
        print(row("dpframe exact decisions (sample_decisions)", t, N, base))

    values = np.full(N, 20, dtype=np.int64)
    p = -math.expm1(-0.1)
    base = median_seconds(lambda: gen.geometric(p, N) - gen.geometric(p, N))
    t = median_seconds(
        lambda: dpm.geometric(
            values, epsilon=Fraction(1, 10), bounds=(0, 30), out_of_range="resample"
        )
    )
    print("rejection geometric, bounds (0, 30), epsilon 0.1 (seed 002, section 2.4)")
    print(row("numpy rng.geometric(p,n) - rng.geometric(p,n) [not private]", base, N))
    print(row("dpframe geometric(out_of_range='resample')", t, N, base))


if __name__ == "__main__":
    main()
