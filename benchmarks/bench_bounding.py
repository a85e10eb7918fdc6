"""Contribution bounding on 10M rows and 1M units, beside the unit-free count table and pandas.

Run: ``python benchmarks/bench_bounding.py``. A panel-like frame: 1M units with 1 to 50
rows each (P(k) proportional to k**-1.07, about 10 on average: most rows belong to the
larger units), rows in random unit order; a 1000 x 50 table (a unit's "occupation" is
mostly its own, its "year" drawn per row). For several (max_rows, max_groups) it times,
interleaved in one process (medians of rounds, each round running every contender once):

* ``count_table``: the unit-free exact crosstab kernel on the same codes (the baseline);
* ``mask``: :func:`contribution_mask` alone, and ``mask + count_table``, the exact
  crosstab with a privacy unit (what a unit-protected ``df.dp.crosstab`` aggregates);
* pandas' ``groupby(unit).head(max_rows)``, the usual do-it-yourself bounding (rows per
  unit only, neither per cell nor cells per unit), then the same count table.

and the peak resident memory each adds above what was resident before (Linux VmHWM,
reset through /proc/self/clear_refs; tracemalloc would miss allocations outside numpy).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _timing  # noqa: F401  (single-threaded numpy)
import numpy as np
import pandas as pd

from dpframe._backends.bounding import contribution_mask
from dpframe._backends.kernels import count_table
from dpframe._random import bit_source

N_ROWS = 10_000_000
N_UNITS = 1_000_000
SIZES = (1000, 50)
ROUNDS = 5
SETTINGS = [(50, 50), (2, 10), (1, 50), (1, 5)]  # (max_rows, max_groups)


def panel(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unit codes (int32, as from pandas.factorize) and the two grouping columns' codes."""
    k = np.arange(1, 51)
    p = k**-1.07
    counts = rng.choice(k, size=N_UNITS, p=p / p.sum())
    while (excess := int(counts.sum()) - N_ROWS) != 0:  # exactly N_ROWS rows, each 1..50
        step = -1 if excess > 0 else 1
        touched = rng.integers(0, N_UNITS, abs(excess))
        np.add.at(counts, touched, step)
        np.clip(counts, 1, 50, out=counts)
    units = np.repeat(np.arange(N_UNITS, dtype=np.int32), counts)
    rng.shuffle(units)
    home = rng.integers(0, SIZES[0], N_UNITS).astype(np.int16)
    occupation = home[units]
    elsewhere = rng.random(N_ROWS) < 0.1
    occupation[elsewhere] = rng.integers(0, SIZES[0], int(elsewhere.sum()))
    year = rng.integers(0, SIZES[1], N_ROWS).astype(np.int8)
    return units, occupation, year


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(field)  # pragma: no cover


def peak_rss_mib(fn: Callable[[], object]) -> float:
    """Peak resident memory ``fn`` adds above what was resident when it started."""
    Path("/proc/self/clear_refs").write_text("5")  # reset the high-water mark
    before = _status("VmRSS")
    fn()
    return (_status("VmHWM") - before) / 2**20


def interleaved(contenders: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """Median seconds of each contender; every round runs each once, in turn."""
    for fn in contenders.values():
        fn()  # warm up
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: float(np.median(t)) for name, t in times.items()}


def main() -> None:
    rng = np.random.default_rng(2026)
    units, occupation, year = panel(rng)
    cells = occupation.astype(np.int32) * SIZES[1] + year
    codes = [occupation, year]
    frame = pd.DataFrame({"unit": units, "occupation": occupation, "year": year})
    per_unit = np.bincount(units)
    print(
        f"numpy {np.__version__}, pandas {pd.__version__}; {N_ROWS:,} rows, {N_UNITS:,} units "
        f"(rows per unit: median {int(np.median(per_unit))}, max {per_unit.max()}), "
        f"{SIZES[0]}x{SIZES[1]} cells; medians of {ROUNDS} interleaved rounds; load average "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )

    def unit_free() -> object:
        return count_table(codes, SIZES)

    def pandas_head(max_rows: int) -> Callable[[], object]:
        def run() -> object:
            head = frame.groupby("unit", sort=False).head(max_rows)
            return count_table([head["occupation"].to_numpy(), head["year"].to_numpy()], SIZES)

        return run

    for max_rows, max_groups in SETTINGS:

        def mask(max_rows: int = max_rows, max_groups: int = max_groups) -> np.ndarray:
            return contribution_mask(
                units, cells, max_rows=max_rows, max_groups=max_groups, source=bit_source(None)
            )

        def bounded(mask: Callable[[], np.ndarray] = mask) -> object:
            return count_table(codes, SIZES, mask())

        kept = mask()
        contenders = {
            "count_table (no unit)": unit_free,
            "contribution_mask": mask,
            "mask + count_table": bounded,
        }
        if (max_rows, max_groups) in {(1, 5), (2, 10)}:  # pandas takes seconds: two settings
            contenders[f"pandas groupby(unit).head({max_rows}) + count"] = pandas_head(max_rows)
        medians = interleaved(contenders, ROUNDS)
        print(
            f"\nmax_rows={max_rows}, max_groups={max_groups}: keeps {kept.mean():.1%} of rows "
            f"({(per_unit > min(max_rows, max_groups)).mean():.1%} of units checked)"
        )
        base = medians["count_table (no unit)"]
        for name, seconds in medians.items():
            print(f"  {name:<44} {seconds * 1e3:8.1f} ms  {seconds / base:6.2f}x count_table")
        print(
            f"  peak RSS added: mask {peak_rss_mib(mask):.0f} MiB, count_table "
            f"{peak_rss_mib(unit_free):.0f} MiB (the codes: {units.nbytes / 2**20:.0f} MiB of "
            f"unit codes, {cells.nbytes / 2**20:.0f} MiB of cell numbers)"
        )
        print(
            f"  target: mask + count_table <= 3x count_table: "
            f"{medians['mask + count_table'] / base:.2f}x"
        )


if __name__ == "__main__":
    main()
