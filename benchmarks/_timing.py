"""Shared benchmark helpers: interleaved medians, first-call cost, random words, peak RSS.

Import this module *before* numpy (the scripts do): it pins BLAS/OpenMP to one thread,
which only works before numpy loads. The machines these run on are shared and noisy, so
every figure is a median over repeats in which all the cases of a comparison run one
after the other (interleaved), never one case's repeats in a row; only ratios taken
inside one such run mean anything.
"""

from __future__ import annotations

import os
import sys

_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
if "numpy" in sys.modules:
    raise RuntimeError("import _timing before numpy: thread variables are read at import")
for _variable in _THREAD_VARIABLES:
    os.environ[_variable] = "1"

import functools  # noqa: E402
import gc  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from types import ModuleType  # noqa: E402

Case = Callable[[], object]


def interleaved(cases: dict[str, Case], repeats: int = 7, warmup: int = 1) -> dict[str, float]:
    """Median wall time of each case, the cases run in turn within every repeat."""
    for _ in range(warmup):
        for fn in cases.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in cases}
    for repeat in range(repeats):
        names = list(cases)
        # Rotate the order so that no case always runs right after the same one.
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            gc.collect()
            start = time.perf_counter()
            cases[name]()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def _dpframe_modules() -> Iterator[ModuleType]:
    for name, module in list(sys.modules.items()):
        if name == "dpframe" or name.startswith("dpframe."):
            yield module


def clear_dpframe_caches() -> None:
    """Forget every cached plan, curve and table, so the next call builds them again."""
    for module in _dpframe_modules():
        for value in vars(module).values():
            clear = getattr(value, "cache_clear", None)
            if callable(clear) and isinstance(value, functools._lru_cache_wrapper):
                clear()


def first_call_seconds(fn: Case) -> float:
    """Wall time of ``fn()`` with every dpframe cache empty (plan building included)."""
    clear_dpframe_caches()
    gc.collect()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


@contextmanager
def counting_words() -> Iterator[list[int]]:
    """Count the 64-bit words dpframe's cryptographic source hands out inside the block."""
    from dpframe import _random

    counter = [0]
    original = _random.CryptoBitSource.words

    def counting(self: _random.CryptoBitSource, n: int) -> object:
        counter[0] += n
        return original(self, n)

    _random.CryptoBitSource.words = counting  # type: ignore[method-assign]
    try:
        yield counter
    finally:
        _random.CryptoBitSource.words = original  # type: ignore[method-assign]


def words_per_value(fn: Case, n: int, runs: int = 3) -> float:
    """Random words per value of ``fn()`` (which handles ``n`` values), averaged over runs."""
    with counting_words() as counter:
        for _ in range(runs):
            fn()
    return counter[0] / (runs * n)


def peak_rss_mib() -> float:
    """This process's peak resident set size so far (VmHWM), in MiB; Linux only."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def row(label: str, seconds: float, n: int, baseline: float | None = None, extra: str = "") -> str:
    """One printed line: median time, throughput, speed relative to the baseline."""
    rate = n / seconds / 1e6
    ratio = "" if baseline is None else f"{baseline / seconds:7.2f}x"
    return f"  {label:<58} {seconds * 1e3:9.2f} ms {rate:8.2f} M/s {ratio:>8} {extra}"


def header(baseline_name: str) -> str:
    return f"  {'case':<58} {'median':>12} {'throughput':>12} {'speed vs ' + baseline_name:>8}"
