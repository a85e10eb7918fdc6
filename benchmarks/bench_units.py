"""``df.dp.crosstab`` with a privacy unit on 10M rows and 1M units, beside the same crosstab
without a unit and beside pandas' do-it-yourself bounding.

Run: ``python benchmarks/bench_units.py``. The frame is :func:`bench_bounding.panel`'s
(1M units with 1 to 50 rows, rows in random order; occupation: 1000 keys, year: 50), as
Categorical columns with declared domains. Timed interleaved in one process (medians of
rounds, each round running every contender once), all through public calls:

* ``df.dp.crosstab("occupation", "year")`` on a frame without a unit (the baseline);
* the same on a frame whose ledger declares ``privacy_unit="unit"``, for several
  ``(max_rows, max_groups)``: it turns the unit column into codes and counts every
  unit's bounded rows (all rows, when :func:`keeps_every_row` says no unit can exceed
  the bounds; else :func:`bounded_count_table`: 32-bit (unit, cell) keys sorted a chunk
  of units at a time, and the cells of the units over ``max_groups`` drawn), then draws
  the noise;
* pandas: ``groupby("unit").head(max_rows)`` (which bounds rows per unit only, not per
  cell nor cells per unit), then ``groupby([...], observed=False).size()`` (the fair
  table baseline) or ``pd.crosstab``; no noise;

and, to show where the time of a bounded table goes, two numpy steps that any exact
bounding on these rows performs at least once, timed beside the unit-free crosstab:
``np.sort`` of 10M int64 keys packing (unit, cell, row) (grouping rows by unit and cell;
numpy has no faster exact grouping of 10M rows into 50M (unit, cell) pairs) and one
``np.bincount`` of the unit codes (the rows of each unit);

and the peak resident memory each call adds (Linux VmHWM, reset through
/proc/self/clear_refs).
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _timing  # noqa: F401  (single-threaded numpy)
import numpy as np
import pandas as pd
from bench_bounding import N_ROWS, N_UNITS, SIZES, interleaved, panel, peak_rss_mib

import dpframe  # noqa: F401  (registers .dp)

ROUNDS = 5
SETTINGS = [(1, 50), (2, 10), (50, 50)]  # (max_rows, max_groups)


def print_bounding_steps(
    units: np.ndarray, occupation: np.ndarray, year: np.ndarray, no_unit: Callable[[], object]
) -> None:
    """Time two numpy steps of any exact bounding of these rows beside the unit-free crosstab."""
    cells = occupation.astype(np.int64) * SIZES[1] + year
    packed = (units.astype(np.int64) << 46) | (cells << 24) | np.arange(len(units))
    unit_codes = units.astype(np.intp)
    floors = interleaved(
        {
            "dp.crosstab, no unit": no_unit,
            "np.sort(packed (unit, cell, row) keys)": lambda: np.sort(packed),
            "np.bincount(unit codes)": lambda: np.bincount(unit_codes, minlength=N_UNITS),
        },
        ROUNDS,
    )
    print("\nsteps of any exact bounding, beside the unit-free crosstab")
    for name, seconds in floors.items():
        ratio = seconds / floors["dp.crosstab, no unit"]
        print(f"  {name:<40} {seconds * 1e3:8.1f} ms  {ratio:6.2f}x no unit")


def main() -> None:
    rng = np.random.default_rng(2026)
    units, occupation, year = panel(rng)
    domains = {"occupation": range(SIZES[0]), "year": range(SIZES[1])}
    columns = {
        "unit": units,
        "occupation": pd.Categorical.from_codes(occupation, categories=range(SIZES[0])),
        "year": pd.Categorical.from_codes(year, categories=range(SIZES[1])),
    }
    per_row = pd.DataFrame(columns)
    per_row.dp.set_budget(epsilon=math.inf, domains=domains)
    per_unit = pd.DataFrame(columns)
    per_unit.dp.set_budget(epsilon=math.inf, domains=domains, privacy_unit="unit")
    print(
        f"numpy {np.__version__}, pandas {pd.__version__}; {N_ROWS:,} rows, {N_UNITS:,} units, "
        f"{SIZES[0]}x{SIZES[1]} cells; medians of {ROUNDS} interleaved rounds; load average "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )

    def no_unit() -> object:
        return per_row.dp.crosstab("occupation", "year", epsilon=1.0)

    print_bounding_steps(units, occupation, year, no_unit)

    for max_rows, max_groups in SETTINGS:

        def with_unit(max_rows: int = max_rows, max_groups: int = max_groups) -> object:
            return per_unit.dp.crosstab(
                "occupation", "year", epsilon=1.0, max_rows=max_rows, max_groups=max_groups
            )

        def head_groupby(max_rows: int = max_rows) -> object:
            head = per_row.groupby("unit", sort=False).head(max_rows)
            return head.groupby(["occupation", "year"], observed=False).size()

        def head_crosstab(max_rows: int = max_rows) -> object:
            head = per_row.groupby("unit", sort=False).head(max_rows)
            return pd.crosstab(head["occupation"], head["year"], dropna=False)

        contenders = {
            "dp.crosstab, no unit": no_unit,
            "dp.crosstab, privacy unit": with_unit,
            f"pandas head({max_rows}) + groupby.size": head_groupby,
            f"pandas head({max_rows}) + pd.crosstab": head_crosstab,
        }
        medians = interleaved(contenders, ROUNDS)
        base = medians["dp.crosstab, no unit"]
        print(f"\nmax_rows={max_rows}, max_groups={max_groups}")
        for name, seconds in medians.items():
            print(f"  {name:<40} {seconds * 1e3:8.1f} ms  {seconds / base:6.2f}x no unit")
        print(
            f"  peak RSS added: with unit {peak_rss_mib(with_unit):.0f} MiB, no unit "
            f"{peak_rss_mib(no_unit):.0f} MiB, pandas head + groupby "
            f"{peak_rss_mib(head_groupby):.0f} MiB"
        )
        print(
            f"  target: privacy unit <= 3x no unit: "
            f"{medians['dp.crosstab, privacy unit'] / base:.2f}x"
        )


if __name__ == "__main__":
    main()
