"""ddf.dp.crosstab on 100M rows of parquet beside Dask's own groupby, same cluster, one process.

Run: ``python benchmarks/bench_dask.py`` (``--rows``, ``--partition-rows`` to change the
data set). The first run writes the data set into ``benchmarks/_data/`` (git-ignored),
one parquet file per partition, from a child process that holds one partition at a
time; later runs reuse it.

It starts a ``LocalCluster`` of 2 worker processes (1 thread each) and prints:

* the median time of ``ddf.dp.crosstab("a", "b", epsilon=1, domain=...)`` and of
  ``ddf.groupby(["a", "b"], observed=False).size().compute()`` on the same lazily read
  frame, interleaved (target: ratio <= 1.2), and the same for a crosstab of clamped
  sums beside ``groupby(...)["x"].sum()``; the first call of each is printed apart;
* the peak resident memory (RSS) of each worker, from freshly restarted workers, after
  one call on 10% of the files and after one call on all of them: if memory is bounded
  by the partition size, the two peaks are about equal however large the data set is;
  and the client's peak RSS (this process never holds a partition).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _timing  # noqa: I001 - before numpy: it pins the thread count

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
from dask.distributed import Client, LocalCluster

import dpframe  # registers .dp on pandas and (with the dask extra) Dask DataFrames

ROWS = 100_000_000
PARTITION_ROWS = 2_000_000
A_KEYS = [f"r{i:02d}" for i in range(60)]
B_KEYS = [f"c{i:02d}" for i in range(20)]
DATA_ROOT = Path(__file__).resolve().parent / "_data"
# Group keys are declared, never read from the data (issue 13): always pass domain=.
DOMAIN = {"a": A_KEYS, "b": B_KEYS}


# ---------------------------------------------------------------- the data set


def _write_partition(path: Path, index: int, rows: int) -> None:
    gen = np.random.default_rng([2026, index])
    frame = pd.DataFrame(
        {
            "a": pd.Categorical.from_codes(gen.integers(0, len(A_KEYS), rows), categories=A_KEYS),
            "b": pd.Categorical.from_codes(gen.integers(0, len(B_KEYS), rows), categories=B_KEYS),
            "x": gen.exponential(30.0, rows),
        }
    )
    frame.to_parquet(path / f"part-{index:04d}.parquet", index=False)


def _generate(path: Path, rows: int, partition_rows: int) -> None:
    """Write the files one partition at a time (run in a child process)."""
    path.mkdir(parents=True, exist_ok=True)
    for old in path.glob("*.parquet"):
        old.unlink()
    for index, start in enumerate(range(0, rows, partition_rows)):
        _write_partition(path, index, min(partition_rows, rows - start))
    manifest = {"rows": rows, "partition_rows": partition_rows, "columns": ["a", "b", "x"]}
    (path / "manifest.json").write_text(json.dumps(manifest))


def data_set(rows: int, partition_rows: int) -> Path:
    path = DATA_ROOT / f"dask_{rows}_{partition_rows}"
    manifest = path / "manifest.json"
    expected = {"rows": rows, "partition_rows": partition_rows, "columns": ["a", "b", "x"]}
    if manifest.exists() and json.loads(manifest.read_text()) == expected:
        return path
    print(f"writing {rows:,} rows as parquet files of {partition_rows:,} rows into {path} ...")
    start = time.perf_counter()
    child = multiprocessing.get_context("spawn").Process(
        target=_generate, args=(path, rows, partition_rows)
    )
    child.start()
    child.join()
    if child.exitcode != 0:
        raise SystemExit(f"data generation failed (exit code {child.exitcode})")
    print(f"  done in {time.perf_counter() - start:.0f} s")
    return path


def lazy_frame(files: list[Path]) -> Any:
    """The files, read lazily, with the declared domains of the grouping columns."""
    raw = dd.read_parquet([str(f) for f in files])
    return raw.astype({"a": pd.CategoricalDtype(A_KEYS), "b": pd.CategoricalDtype(B_KEYS)})


# ---------------------------------------------------------------- memory


def _status_mib(field: str) -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024  # the kernel reports kB
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak() -> float:
    """Reset this process's peak RSS (VmHWM) to its current RSS (Linux >= 4.0); return it."""
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")
    return _status_mib("VmRSS")


def _peak() -> float:
    return _status_mib("VmHWM")


def peak_rss(client: Client, call: Callable[[], object]) -> tuple[list[float], list[float], float]:
    """RSS of each worker before ``call()``, their peaks during it, and the client's peak (MiB)."""
    before = client.run(_reset_peak)
    _reset_peak()
    call()
    client_peak = _peak()
    peaks = client.run(_peak)
    workers = sorted(before)
    return [before[w] for w in workers], [peaks[w] for w in workers], client_peak


# ---------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=ROWS)
    parser.add_argument("--partition-rows", type=int, default=PARTITION_ROWS)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    path = data_set(args.rows, args.partition_rows)
    files = sorted(path.glob("*.parquet"))
    tenth = files[: max(1, len(files) // 10)]
    on_disk = sum(f.stat().st_size for f in files) / 2**20
    one = pd.read_parquet(files[0])
    partition_mib = float(one.memory_usage(deep=True).sum()) / 2**20
    del one

    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    )
    client = Client(cluster)
    try:
        ddf = lazy_frame(files)
        print(
            f"dask {dask.__version__}, "
            f"pandas {pd.__version__}, dpframe {dpframe.__version__}; LocalCluster: 2 worker "
            f"processes x 1 thread"
        )
        print(
            f"data: {args.rows:,} rows in {len(files)} parquet files ({on_disk:,.0f} MiB on "
            f"disk); one file in memory {partition_mib:.1f} MiB, all "
            f"{partition_mib * len(files):,.0f} MiB; {ddf.npartitions} Dask partitions"
        )

        # -------- memory: 10% of the data against all of it
        small = lazy_frame(tenth)
        rows_small = args.rows * len(tenth) // len(files)
        print("resident memory (MiB) of the 2 workers (before -> peak during one call) and the")
        print("client's peak during the call; the peaks are reset before each call")
        calls: list[tuple[str, Callable[[Any], object]]] = [
            ("dp.crosstab counts", lambda f: f.dp.crosstab("a", "b", epsilon=1.0, domain=DOMAIN)),
            (
                "dp.crosstab sums",
                lambda f: f.dp.crosstab(
                    "a",
                    "b",
                    epsilon=1.0,
                    values="x",
                    aggfunc="sum",
                    bounds=(0.0, 200.0),
                    domain=DOMAIN,
                ),
            ),
            ("groupby.size", lambda f: f.groupby(["a", "b"], observed=False).size().compute()),
            (
                "groupby.sum",
                lambda f: f.groupby(["a", "b"], observed=False)["x"].sum().compute(),
            ),
        ]
        for frame, rows in ((small, rows_small), (ddf, args.rows)):
            in_memory = partition_mib * rows / args.partition_rows
            print(f"  {rows:,} rows ({in_memory:,.0f} MiB in memory)")
            for label, call in calls:
                before, peaks, client_peak = peak_rss(client, lambda c=call, f=frame: c(f))
                workers = ", ".join(
                    f"{b:.0f} -> {p:.0f}" for b, p in zip(before, peaks, strict=True)
                )
                print(f"    {label:<20} workers {workers}   client peak {client_peak:.0f}")

        # -------- time: interleaved, public API only
        timed: dict[str, _timing.Case] = {
            "ddf.groupby(['a','b'], observed=False).size().compute()": lambda: (
                ddf.groupby(["a", "b"], observed=False).size().compute()
            ),
            "ddf.dp.crosstab('a', 'b')": lambda: ddf.dp.crosstab(
                "a", "b", epsilon=1.0, domain=DOMAIN
            ),
            "ddf.groupby(['a','b'], observed=False)['x'].sum().compute()": lambda: (
                ddf.groupby(["a", "b"], observed=False)["x"].sum().compute()
            ),
            "ddf.dp.crosstab(..., values='x', aggfunc='sum')": lambda: ddf.dp.crosstab(
                "a",
                "b",
                epsilon=1.0,
                values="x",
                aggfunc="sum",
                bounds=(0.0, 200.0),
                domain=DOMAIN,
            ),
        }
        first = {
            name: _timing.first_call_seconds(fn) for name, fn in timed.items() if ".dp." in name
        }
        medians = _timing.interleaved(timed, repeats=args.repeats)
        names = list(timed)
        print(f"time (median of {args.repeats}, interleaved, after one warm-up run)")
        for i, name in enumerate(names):
            base = medians[names[i - 1]] if i % 2 else None
            speed = f"{base / medians[name]:6.2f}x vs the line above" if base else ""
            first_call = f"   first call {first[name]:.2f} s" if name in first else ""
            print(f"  {name:<62} {medians[name]:7.2f} s {speed}{first_call}")
    finally:
        client.close()
        cluster.close()


if __name__ == "__main__":
    main()
