"""Discrete Gaussian noise: dpframe beside numpy's non-private rounded normal, and OpenDP.

Run: ``python benchmarks/bench_gaussian.py``. dpframe and numpy are called alternately in
one process (``np.rint(rng.normal(0, σ, n))``, not private and not a discrete Gaussian,
is the speed to match); medians of the interleaved runs and their ratio are printed,
with the 64-bit random words dpframe drew per value. OpenDP's ``make_gaussian`` on an
int vector (the exact CKS sampler, one value at a time) is timed when importable
(``pip install opendp`` in a throwaway environment), on fewer values.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _timing  # noqa: I001 - before numpy: it pins the thread count

import numpy as np

import dpframe.mechanisms as dpm
from dpframe import _gaussian
from dpframe._random import CryptoBitSource

N = 1_000_000
PEER_N = 20_000
SIGMAS = (1, 10, 1000, 100_000)  # the last: wide noise, thresholds per proposal
ROUNDS = 9


def interleaved(calls: list[Callable[[], object]], rounds: int = ROUNDS) -> list[float]:
    """Median seconds of each call, the calls alternating round after round (one warm-up)."""
    for call in calls:
        call()
    times: list[list[float]] = [[] for _ in calls]
    for _ in range(rounds):
        for spent, call in zip(times, calls, strict=True):
            start = time.perf_counter()
            call()
            spent.append(time.perf_counter() - start)
    return [statistics.median(spent) for spent in times]


def words_per_value(sigma: float) -> float:
    source = CryptoBitSource()
    _gaussian.gaussian_noise(_gaussian.gaussian_plan(Fraction(sigma) ** 2), N, source)
    return source.words_drawn / N


def main() -> None:
    values = np.zeros(N, dtype=np.int64)
    gen = np.random.default_rng()
    print(f"discrete Gaussian noise, n = {N:,} values (median of {ROUNDS} interleaved runs)")
    for sigma in SIGMAS:
        base, ours = interleaved(
            [
                lambda s=sigma: np.rint(gen.normal(0, s, N)),
                lambda s=sigma: dpm.discrete_gaussian(values, sigma=s),
            ]
        )
        plan = _gaussian.gaussian_plan(Fraction(sigma) ** 2)
        print(f"sigma = {sigma}")
        print(_timing.row("numpy np.rint(rng.normal(0, sigma, n)) [not private]", base, N))
        print(
            _timing.row("dpframe discrete_gaussian (exact, cryptographic)", ours, N, base)
            + f"  {words_per_value(sigma):.2f} words/value, acceptance {plan.acceptance:.3f}"
        )
        _opendp(sigma, base, ours)


def _opendp(sigma: float, numpy_seconds: float, dpframe_seconds: float) -> None:
    try:
        import opendp.prelude as dp
    except ImportError:
        print("  OpenDP not installed: skipped")
        return
    dp.enable_features("contrib")
    meas = dp.m.make_gaussian(
        dp.vector_domain(dp.atom_domain(T=int)), dp.l2_distance(T=int), scale=float(sigma)
    )
    as_list = [0] * PEER_N
    (seconds,) = interleaved([lambda: meas(as_list)], rounds=3)
    per_value = seconds / PEER_N
    print(
        _timing.row(f"OpenDP make_gaussian, int vector (n = {PEER_N:,})", seconds, PEER_N)
        + f"  {numpy_seconds / N / per_value:6.4f}x numpy's speed;"
        f" dpframe is {per_value / (dpframe_seconds / N):,.0f}x faster"
    )


if __name__ == "__main__":
    main()
