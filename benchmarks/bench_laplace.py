"""Real-valued Laplace noise: dpframe's snapping and bounded Laplace beside numpy's sampler.

Run: ``python benchmarks/bench_laplace.py``. Prints medians and ratios to numpy's
non-private ``rng.laplace``; diffprivlib's ``Snapping`` and ``LaplaceBoundedDomain`` are
timed only when installed (in a throwaway environment), on fewer values because they
loop per element.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from _timing import median_seconds, row

from dpframe._laplace import bounded_laplace, laplace

N = 1_000_000
PEER_N = 20_000
BOUNDS = (-1000.0, 1000.0)
NARROW = (0.0, 2.0)  # noise wider than the domain: bounded Laplace proposes uniformly


def main() -> None:
    values = np.zeros(N)
    gen = np.random.default_rng()
    print(
        f"real-valued Laplace noise, n = {N:,} values (median of 7 runs, one process, one thread)"
    )
    for epsilon in (1.0, 0.1):
        base = median_seconds(lambda e=epsilon: gen.laplace(scale=1 / e, size=N))
        print(f"epsilon = {epsilon}, sensitivity = 1")
        print(row("numpy rng.laplace(scale, n) [not private]", base, N))
        t = median_seconds(
            lambda e=epsilon: laplace(values, epsilon=e, sensitivity=1.0, bounds=BOUNDS)
        )
        print(row(f"dpframe laplace (snapping), bounds {BOUNDS}", t, N, base))
        t = median_seconds(
            lambda e=epsilon: bounded_laplace(values, epsilon=e, sensitivity=1.0, bounds=BOUNDS)
        )
        print(row(f"dpframe bounded_laplace, bounds {BOUNDS}", t, N, base))
        t = median_seconds(
            lambda e=epsilon: bounded_laplace(values, epsilon=e, sensitivity=1.0, bounds=NARROW),
            repeats=3,
        )
        print(row(f"dpframe bounded_laplace, bounds {NARROW}", t, N, base))
        _peers(epsilon, base)


def _peers(epsilon: float, numpy_seconds: float) -> None:
    try:
        from diffprivlib.mechanisms import LaplaceBoundedDomain, Snapping
    except ImportError:
        print("  diffprivlib not installed: skipped")
        return
    snapping = Snapping(epsilon=epsilon, sensitivity=1.0, lower=BOUNDS[0], upper=BOUNDS[1])
    t = median_seconds(lambda: [snapping.randomise(0.0) for _ in range(PEER_N)], repeats=3)
    print(
        row(f"diffprivlib Snapping.randomise, per element (n = {PEER_N:,})", t, PEER_N)
        + f"  {numpy_seconds / N / (t / PEER_N):6.3f}x numpy's speed"
    )
    bounded = LaplaceBoundedDomain(
        epsilon=epsilon, sensitivity=1.0, lower=BOUNDS[0], upper=BOUNDS[1]
    )
    t = median_seconds(lambda: [bounded.randomise(0.0) for _ in range(PEER_N)], repeats=3)
    print(
        row(f"diffprivlib LaplaceBoundedDomain, per element (n = {PEER_N:,})", t, PEER_N)
        + f"  {numpy_seconds / N / (t / PEER_N):6.3f}x numpy's speed"
    )


if __name__ == "__main__":
    main()
