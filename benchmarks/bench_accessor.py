"""The .dp accessor on 10M rows beside pandas and the np.bincount floor, in one process.

Run: ``python benchmarks/bench_accessor.py``. Prints median times, ratios, and the peak
memory each call allocates (tracemalloc, which sees numpy's and pandas' buffers).
"""

from __future__ import annotations

import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
import pandas as pd
from _timing import median_seconds

import dpframe  # registers .dp

N = 10_000_000


def peak_mib(fn: Callable[[], object]) -> float:
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20


def categorical_frame(n_rows: int, n_cols: int) -> pd.DataFrame:
    gen = np.random.default_rng(0)
    return pd.DataFrame(
        {
            "a": pd.Categorical.from_codes(gen.integers(0, n_rows, N), categories=range(n_rows)),
            "b": pd.Categorical.from_codes(gen.integers(0, n_cols, N), categories=range(n_cols)),
        }
    )


def crosstab_case(n_rows: int, n_cols: int) -> None:
    df = categorical_frame(n_rows, n_cols)
    a = df["a"].cat.codes.to_numpy().astype(np.intp)
    b = df["b"].cat.codes.to_numpy().astype(np.intp)
    combined = a * n_cols + b  # the floor: one bincount on precombined codes
    t_dp = median_seconds(lambda: df.dp.crosstab("a", "b", epsilon=1.0), repeats=9)
    t_pd = median_seconds(lambda: pd.crosstab(df["a"], df["b"]), repeats=3)
    t_floor = median_seconds(lambda: np.bincount(combined, minlength=n_rows * n_cols), repeats=9)
    m_dp = peak_mib(lambda: df.dp.crosstab("a", "b", epsilon=1.0))
    m_pd = peak_mib(lambda: pd.crosstab(df["a"], df["b"]))
    print(f"crosstab, categorical {n_rows}x{n_cols}, {N:,} rows")
    print(f"  df.dp.crosstab        {t_dp * 1e3:8.1f} ms   peak {m_dp:7.1f} MiB")
    print(f"  pd.crosstab           {t_pd * 1e3:8.1f} ms   peak {m_pd:7.1f} MiB")
    print(f"  np.bincount (floor)   {t_floor * 1e3:8.1f} ms")
    print(
        f"  ratio dp/pandas {t_dp / t_pd:.3f} (target <= 0.25)   dp/floor {t_dp / t_floor:.2f}"
        " (target <= 2)"
    )

    strs = df.astype({"a": "str", "b": "str"})
    domain = {"a": [str(i) for i in range(n_rows)], "b": [str(i) for i in range(n_cols)]}
    t_dp = median_seconds(lambda: strs.dp.crosstab("a", "b", epsilon=1.0, domain=domain), repeats=3)
    t_pd = median_seconds(lambda: pd.crosstab(strs["a"], strs["b"]), repeats=3)
    m_dp = peak_mib(lambda: strs.dp.crosstab("a", "b", epsilon=1.0, domain=domain))
    m_pd = peak_mib(lambda: pd.crosstab(strs["a"], strs["b"]))
    print(f"crosstab, str columns with domain=, {n_rows}x{n_cols}")
    print(f"  df.dp.crosstab        {t_dp * 1e3:8.1f} ms   peak {m_dp:7.1f} MiB")
    print(f"  pd.crosstab           {t_pd * 1e3:8.1f} ms   peak {m_pd:7.1f} MiB")
    print(f"  ratio dp/pandas {t_dp / t_pd:.3f} (target <= 0.5)")


def sum_case() -> None:
    gen = np.random.default_rng(1)
    df = pd.DataFrame({"x": gen.normal(50_000, 20_000, N)})
    s = df["x"]
    t_dp = median_seconds(lambda: df.dp.sum("x", epsilon=1.0, bounds=(0, 200_000)), repeats=9)
    t_pd = median_seconds(lambda: s.clip(0, 200_000).sum(), repeats=9)
    m_dp = peak_mib(lambda: df.dp.sum("x", epsilon=1.0, bounds=(0, 200_000)))
    m_pd = peak_mib(lambda: s.clip(0, 200_000).sum())
    print(f"sum of {N:,} floats, bounds (0, 200000)")
    print(f"  df.dp.sum             {t_dp * 1e3:8.1f} ms   peak {m_dp:7.1f} MiB")
    print(f"  s.clip(lo, hi).sum()  {t_pd * 1e3:8.1f} ms   peak {m_pd:7.1f} MiB")
    print(f"  ratio dp/pandas {t_dp / t_pd:.2f} (target <= 2)")


def main() -> None:
    print(f"dpframe {dpframe.__version__}, pandas {pd.__version__}, numpy {np.__version__}")
    crosstab_case(5, 2)
    crosstab_case(1000, 50)
    sum_case()


if __name__ == "__main__":
    main()
