"""Shared timing helpers: medians of repeated runs, single-threaded, in one process."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable

# Single-threaded: set before numpy is imported by the benchmark scripts.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")


def median_seconds(fn: Callable[[], object], repeats: int = 7, warmup: int = 1) -> float:
    """Median wall time of ``fn()`` over ``repeats`` runs after ``warmup`` runs."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def row(label: str, seconds: float, n: int, baseline: float | None = None) -> str:
    """One printed line: median time, throughput and the ratio to the baseline's speed."""
    rate = n / seconds / 1e6
    ratio = "" if baseline is None else f"  {baseline / seconds:6.2f}x numpy's speed"
    return f"  {label:<52} {seconds * 1e3:9.1f} ms  {rate:8.2f} M/s{ratio}"
