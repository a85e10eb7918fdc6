"""Private quantiles on 10M floats beside numpy's and pandas' exact ones, in one process.

Run: ``python benchmarks/bench_quantiles.py``. The calls are interleaved (one of each per
round) so that the machine's noise hits them alike; medians over the rounds and the
ratios to ``pd.Series.median()`` are printed. Peak memory is the real resident set (the
process's high-water mark, reset before each call through ``/proc/self/clear_refs``).
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _timing  # noqa: F401  (single-threaded BLAS, set before numpy loads)
import numpy as np
import pandas as pd

import dpframe
import dpframe.mechanisms as dpm

N = 10_000_000
ROUNDS = 9


def interleaved(cases: dict[str, Callable[[], object]], rounds: int = ROUNDS) -> dict[str, float]:
    """Median seconds of each case, the cases run in turn within every round."""
    for fn in cases.values():  # warm up (caches, the noise plan)
        fn()
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, fn in cases.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def peak_rss_mib(fn: Callable[[], object]) -> float | None:
    """Extra resident memory at the peak of ``fn()`` (None where Linux's reset is missing)."""
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")  # resets VmHWM to the current resident set
        before = _status_kib("VmHWM")
    except OSError:
        return None
    fn()
    return (_status_kib("VmHWM") - before) / 1024


def report(title: str, cases: dict[str, Callable[[], object]], baseline: str) -> None:
    seconds = interleaved(cases)
    print(title)
    for name, fn in cases.items():
        peak = peak_rss_mib(fn)
        memory = "" if peak is None else f"   peak +{peak:7.1f} MiB RSS"
        ratio = seconds[name] / seconds[baseline]
        print(f"  {name:<44} {seconds[name] * 1e3:8.1f} ms  {ratio:5.2f}x {baseline}{memory}")


def main() -> None:
    print(f"dpframe {dpframe.__version__}, pandas {pd.__version__}, numpy {np.__version__}")
    print(f"{N:,} float64 values, median of {ROUNDS} interleaved rounds")
    gen = np.random.default_rng(0)
    x = gen.normal(50_000, 20_000, N)
    s = pd.Series(x)
    bounds = (0.0, 200_000.0)
    report(
        "median (default grid of 4097 candidates)",
        {
            "dpm.quantile(x, 0.5, epsilon=1, bounds)": lambda: dpm.quantile(
                x, 0.5, epsilon=1.0, bounds=bounds
            ),
            "np.median(x)": lambda: np.median(x),
            "Series.median()": s.median,
        },
        "Series.median()",
    )
    quartiles = [0.25, 0.5, 0.75]
    report(
        "quartiles",
        {
            "dpm.quantile(x, [.25, .5, .75], ...)": lambda: dpm.quantile(
                x, quartiles, epsilon=1.0, bounds=bounds
            ),
            "np.quantile(x, [.25, .5, .75])": lambda: np.quantile(x, quartiles),
            "Series.quantile([.25, .5, .75])": lambda: s.quantile(quartiles),
        },
        "Series.quantile([.25, .5, .75])",
    )
    ages = pd.Series(gen.integers(0, 100, N).astype(np.float64))
    a = ages.to_numpy()
    report(
        "median of whole-year ages, candidates=np.arange(121)",
        {
            "dpm.quantile(ages, 0.5, candidates=...)": lambda: dpm.quantile(
                a, 0.5, epsilon=1.0, bounds=(0, 120), candidates=np.arange(121)
            ),
            "np.median(ages)": lambda: np.median(a),
            "Series.median()": ages.median,
        },
        "Series.median()",
    )
    uneven = np.concatenate([np.linspace(0, 1000, 500), np.geomspace(1001, 200_000, 500)])
    report(
        "median on an uneven grid (1000 candidates: bucket lookup table)",
        {
            "dpm.quantile(x, 0.5, candidates=uneven)": lambda: dpm.quantile(
                x, 0.5, epsilon=1.0, bounds=bounds, candidates=uneven
            ),
            "Series.median()": s.median,
        },
        "Series.median()",
    )


if __name__ == "__main__":
    main()
