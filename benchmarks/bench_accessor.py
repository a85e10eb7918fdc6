"""The .dp accessor on 10M rows beside pandas and the np.bincount floor.

Run: ``python benchmarks/bench_accessor.py``. One thread; for each table the cases run
interleaved (medians of 7 repeats; pandas' slow crosstab 3), public API only, every
group domain declared with ``domain=`` (never read from the data). Printed per case:

* the median time and the speed relative to ``groupby(observed=False)`` in the same run
  (above 1: faster);
* the first call (nothing cached: codes, plans and tables are built);
* the real peak memory: each case runs once in a fresh subprocess, which builds the
  frame, resets its peak resident set size (Linux ``/proc/self/clear_refs``) and reads
  ``VmHWM`` after the call. This counts every buffer (numpy, pandas, Arrow), which
  ``tracemalloc`` misses.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _timing  # noqa: I001 - before numpy: it pins the thread count

import numpy as np
import pandas as pd

import dpframe  # registers .dp

N = 10_000_000
SHAPES = [(5, 2), (1000, 50)]


def frame(rows: int, cols: int, strings: bool) -> tuple[pd.DataFrame, dict[str, list[object]]]:
    gen = np.random.default_rng(0)
    a = gen.integers(0, rows, N)
    b = gen.integers(0, cols, N)
    df = pd.DataFrame(
        {
            "a": pd.Categorical.from_codes(a, categories=range(rows)),
            "b": pd.Categorical.from_codes(b, categories=range(cols)),
            "x": gen.exponential(30.0, N),
        }
    )
    if strings:
        df = df.astype({"a": "str", "b": "str"})
        return df, {"a": [str(i) for i in range(rows)], "b": [str(i) for i in range(cols)]}
    return df, {"a": list(range(rows)), "b": list(range(cols))}


def cases(df: pd.DataFrame, domain: dict[str, list[object]]) -> dict[str, Callable[[], object]]:
    """Name -> call; the first case of each group is the baseline the others are held to."""
    sum_bounds = (0.0, 200.0)
    return {
        "groupby(['a','b'], observed=False).size().unstack()": lambda: (
            df.groupby(["a", "b"], observed=False).size().unstack()
        ),
        "pd.crosstab(df.a, df.b)": lambda: pd.crosstab(df["a"], df["b"]),
        "df.dp.crosstab('a', 'b')": lambda: df.dp.crosstab("a", "b", epsilon=1.0, domain=domain),
        "groupby(['a','b'], observed=False)['x'].sum().unstack()": lambda: (
            df.groupby(["a", "b"], observed=False)["x"].sum().unstack()
        ),
        "df.dp.crosstab('a', 'b', values='x', aggfunc='sum')": lambda: df.dp.crosstab(
            "a", "b", epsilon=1.0, values="x", aggfunc="sum", bounds=sum_bounds, domain=domain
        ),
        "groupby('a', observed=False)['x'].sum()": lambda: df.groupby("a", observed=False)[
            "x"
        ].sum(),
        "df.dp.sum('x', by='a')": lambda: df.dp.sum(
            "x", epsilon=1.0, bounds=sum_bounds, by="a", domain={"a": domain["a"]}
        ),
        "df['x'].clip(lo, hi).sum()": lambda: df["x"].clip(*sum_bounds).sum(),
        "df.dp.sum('x')": lambda: df.dp.sum("x", epsilon=1.0, bounds=sum_bounds),
    }


BASELINES = {
    "pd.crosstab(df.a, df.b)": "groupby(['a','b'], observed=False).size().unstack()",
    "df.dp.crosstab('a', 'b')": "groupby(['a','b'], observed=False).size().unstack()",
    "df.dp.crosstab('a', 'b', values='x', aggfunc='sum')": (
        "groupby(['a','b'], observed=False)['x'].sum().unstack()"
    ),
    "df.dp.sum('x', by='a')": "groupby('a', observed=False)['x'].sum()",
    "df.dp.sum('x')": "df['x'].clip(lo, hi).sum()",
}


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")


def measure_memory(rows: int, cols: int, strings: bool, name: str) -> None:
    """Subprocess entry point: print the peak RSS one call of ``name`` adds, in MiB."""
    df, domain = frame(rows, cols, strings)
    call = cases(df, domain)[name]
    with open("/proc/self/status") as status:
        before = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    _reset_peak()
    call()
    peak = _timing.peak_rss_mib()
    print(json.dumps({"before": before / 1024, "peak": peak}))


def memory(rows: int, cols: int, strings: bool, name: str) -> str:
    args = [sys.executable, __file__, "--memory", str(rows), str(cols), str(int(strings)), name]
    done = subprocess.run(args, capture_output=True, text=True, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return f"{result['peak'] - result['before']:8.0f} MiB"


def main() -> None:
    print(f"dpframe {dpframe.__version__}, pandas {pd.__version__}, numpy {np.__version__}")
    print(f"{N:,} rows; peak = extra resident memory of one call, measured in a fresh process")
    for strings in (False, True):
        for rows, cols in SHAPES:
            df, domain = frame(rows, cols, strings)
            table = cases(df, domain)
            slow = {"pd.crosstab(df.a, df.b)"}
            fast = {name: fn for name, fn in table.items() if name not in slow}
            first = {
                name: _timing.first_call_seconds(fn)
                for name, fn in table.items()
                if name.startswith("df.dp")
            }
            medians = _timing.interleaved(fast)
            medians.update(_timing.interleaved({n: table[n] for n in slow}, repeats=3))
            kind = "str columns" if strings else "categorical columns"
            print(f"{kind}, {rows} x {cols} keys, every domain declared with domain=")
            print(
                f"  {'case':<58} {'median':>12} {'speed vs baseline':>18} {'first call':>12} "
                f"{'peak':>12}"
            )
            for name in table:
                base = BASELINES.get(name)
                speed = f"{medians[base] / medians[name]:17.2f}x" if base else f"{'(baseline)':>18}"
                first_call = f"{first[name] * 1e3:9.1f} ms" if name in first else " " * 12
                peak = memory(rows, cols, strings, name)
                print(f"  {name:<58} {medians[name] * 1e3:9.1f} ms {speed} {first_call} {peak}")
            del df, table, fast


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--memory":
        measure_memory(int(sys.argv[2]), int(sys.argv[3]), bool(int(sys.argv[4])), sys.argv[5])
    else:
        main()
