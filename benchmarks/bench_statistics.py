"""Means, sums, medians and describe on 10M rows, beside pandas and the bincount floor.

Run: ``python benchmarks/bench_statistics.py``. The cases of each comparison run
interleaved (one of each per round), single-threaded, in one process; medians and
ratios are printed (the machine is shared and noisy: compare ratios, not times), and
the peak resident memory each case adds (Linux VmHWM, reset through /proc/self/clear_refs:
tracemalloc misses Arrow's buffers).
The floor for a grouped sum is one ``np.bincount`` with weights on codes combined
beforehand (outside the timing).
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _timing  # noqa: F401  (sets single-threaded BLAS before numpy is imported)
import numpy as np
import pandas as pd
from bench_bounding import peak_rss_mib

import dpframe

N = 10_000_000
ROUNDS = 7


_LAST_CASES: dict[str, Callable[[], object]] = {}


def interleaved(cases: dict[str, Callable[[], object]], rounds: int = ROUNDS) -> dict[str, float]:
    """Median seconds of each case, the cases alternating within every round."""
    _LAST_CASES.clear()
    _LAST_CASES.update(cases)  # report() measures their peak memory after the timing
    for case in cases.values():  # warm up (plans, caches) outside the timing
        case()
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, case in cases.items():
            start = time.perf_counter()
            case()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def report(title: str, medians: dict[str, float], baseline: str, also: str | None = None) -> None:
    print(title)
    for name, seconds in medians.items():
        line = (
            f"  {name:<48} {seconds * 1e3:9.1f} ms   {seconds / medians[baseline]:6.2f}x {baseline}"
        )
        if also is not None:
            line += f"   {seconds / medians[also]:6.2f}x pandas"
        print(f"{line}   peak RSS +{peak_rss_mib(_LAST_CASES[name]):5.0f} MiB")


def main() -> None:
    gen = np.random.default_rng(0)
    groups = 50
    frame = pd.DataFrame(
        {
            "g": pd.Categorical.from_codes(gen.integers(0, groups, N), categories=range(groups)),
            "x": gen.gamma(2.0, 20_000.0, N),
            "age": gen.integers(16, 96, N).astype(np.float64),
        }
    )
    frame.dp.set_budget(epsilon=math.inf, domains={"g": range(groups)})
    codes = frame["g"].cat.codes.to_numpy().astype(np.intp)
    values = frame["x"].to_numpy()
    bounds = (0.0, 200_000.0)
    print(f"dpframe {dpframe.__version__}, pandas {pd.__version__}, numpy {np.__version__}")
    print(f"{N:,} rows, {groups} groups, median of {ROUNDS} interleaved rounds\n")

    report(
        "grouped sum and mean",
        interleaved(
            {
                "df.dp.sum(by=...)": lambda: frame.dp.sum("x", epsilon=1.0, bounds=bounds, by="g"),
                "df.dp.mean(by=...)": lambda: frame.dp.mean(
                    "x", epsilon=1.0, bounds=bounds, by="g"
                ),
                "np.bincount(codes, weights) [floor]": lambda: np.bincount(
                    codes, weights=values, minlength=groups
                ),
                "df.groupby('g', observed=False)['x'].mean()": lambda: frame.groupby(
                    "g", observed=False
                )["x"].mean(),
            }
        ),
        "np.bincount(codes, weights) [floor]",
        also="df.groupby('g', observed=False)['x'].mean()",
    )
    print("  targets: dp.sum and dp.mean <= 1.5x the floor and <= 0.5x pandas")
    print()
    report(
        "median",
        interleaved(
            {
                "df.dp.median (default grid of 4097)": lambda: frame.dp.median(
                    "age", epsilon=1.0, bounds=(0, 120)
                ),
                "df.dp.median (candidates=np.arange(121))": lambda: frame.dp.median(
                    "age", epsilon=1.0, bounds=(0, 120), candidates=np.arange(121)
                ),
                "Series.median()": lambda: frame["age"].median(),
            }
        ),
        "Series.median()",
    )
    print()
    report(
        "describe",
        interleaved(
            {
                "df.dp.describe (2 columns)": lambda: frame.dp.describe(
                    epsilon=1.0, bounds={"x": bounds, "age": (0, 120)}
                ),
                "df[['x', 'age']].describe()": lambda: frame[["x", "age"]].describe(),
            },
            rounds=5,
        ),
        "df[['x', 'age']].describe()",
    )


if __name__ == "__main__":
    main()
