"""Exact aggregation on declared domains: counts and clamped sums, knowing nothing of noise.

Rows are mapped to cells through *codes*: for each grouping column, the position of the
row's key in the column's declared domain, or -1 when the key is missing (NaN) or
outside the domain. Such rows belong to no cell and are left out of every table. Cells
are numbered in row-major order over the product of the domains.

The rows are processed in blocks that fit the CPU cache: for each block the cell number
of every row is built in a small scratch array and counted with ``np.bincount``, so a
10-million-row table costs little more than one pass over its code columns, and memory
stays bounded by the block size, not by the number of rows.

Sums are exact: each value is clamped into its bounds, scaled by a power of two and
rounded onto an integer grid of at most 2**32 steps per value, and the integers are
summed exactly: one float64 ``np.bincount`` (or ``sum``) per block of at most 2**21
rows, where every partial sum is an integer below 2**53 and so exact in any order; the
blocks are added in int64, flushed into Python integers every 2**29 rows, so sums of any
number of rows are exact and never refused. Float summation order, rounding and overflow
therefore cannot change a sum's sensitivity (Casacuberta et al., CCS 2022).

These kernels know nothing of pandas frames beyond reading one column's codes, and
nothing of noise; the backends call them.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dpframe.errors import DomainError

__all__ = [
    "LOG_EDGES",
    "SUM_GRID_BITS",
    "Group",
    "SumGrid",
    "count_table",
    "domain_codes",
    "log_histogram",
    "nullable_dtype",
    "sum_table",
    "sum_total",
]

# Grid for sums: a clamped value v is stored as round(v / step) with
# step = 2**(ceil(log2(max |bound|)) - SUM_GRID_BITS), so |v / step| <= 2**SUM_GRID_BITS.
SUM_GRID_BITS = 32
_BLOCK = 1 << 17  # rows per block: fits L2 as int16 keys; block sums stay below 2**49
# Largest block of a sum: 2**21 values of at most 2**32 units add up below 2**53, exactly.
_MAX_SUM_BLOCK = 1 << (53 - SUM_GRID_BITS)
# int64 running sums are moved into Python integers every this many rows (2**29 * 2**32
# = 2**61 < 2**63), so no sum can wrap, whatever the number of rows.
_FLUSH_ROWS = 1 << 29

Codes = NDArray[np.signedinteger]


def domain_codes(column: pd.Series, domain: pd.Index) -> Codes:
    """Position of each row's key in ``domain``; -1 for missing or out-of-domain keys.

    Categorical columns whose categories are the domain give their own codes (no copy,
    int8 or int16); Arrow-backed columns (pandas 3's default ``str``) are looked up in
    the domain by Arrow in one pass; others are factorized once and the few distinct
    keys mapped. A missing key declared in the domain (None or NaN) is the missing-value
    cell: rows whose key is missing get its position.
    """
    codes = _present_codes(column, domain)
    if domain.hasnans:
        missing_cell = int(np.flatnonzero(domain.isna())[0])
        codes = np.where(column.isna().to_numpy(), missing_cell, codes).astype(codes.dtype)
    return codes


def _present_codes(column: pd.Series, domain: pd.Index) -> Codes:
    dtype = column.dtype
    if isinstance(dtype, pd.CategoricalDtype) and dtype.categories.equals(domain):
        return np.asarray(column.array.codes)  # a read-only view, no copy
    values = column.array
    arrow = getattr(values, "_pa_array", None)
    if arrow is not None and not domain.hasnans:
        found = _arrow_codes(arrow, domain)
        if found is not None:
            return found
    try:
        codes, uniques = values.factorize(use_na_sentinel=True)
    except (TypeError, ValueError, NotImplementedError) as failed:  # Arrow's errors included
        raise unhashable_keys(column) from failed
    mapping = np.append(domain.get_indexer(pd.Index(uniques)), -1)
    small = np.int32 if len(domain) < 2**31 else np.int64
    return np.asarray(mapping.astype(small)[codes])  # codes == -1 picks the appended -1


def unhashable_keys(column: pd.Series) -> DomainError:
    """The refusal of a key column whose values cannot be grouped (lists, dicts)."""
    return DomainError(
        f"the values of {column.name!r} ({column.dtype}) cannot be grouped: keys must be "
        f"hashable scalars (not lists or dicts). Turn them into strings or tuples first, "
        f"e.g. df[{column.name!r}].astype(str)."
    )


def _arrow_codes(arrow: Any, domain: pd.Index) -> Codes | None:
    """``pyarrow.compute.index_in`` against the domain; None if the key types do not match."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        if pa.types.is_dictionary(arrow.type):  # a categorical read back from parquet
            arrow = pc.cast(arrow, arrow.type.value_type)
        value_set = pa.array(list(domain), type=arrow.type)
        if len(value_set) != len(domain):  # pragma: no cover - defensive
            return None
        positions = pc.fill_null(pc.index_in(arrow, value_set=value_set), -1)
    except (pa.ArrowException, TypeError, ValueError):  # types Arrow cannot match: factorize
        return None
    return np.asarray(positions.to_numpy(), dtype=np.int32)


def _blocks(n: int, cells: int, cap: int | None = None) -> Iterator[slice]:
    # At least four rows per cell in a block, so clearing bincount's output stays cheap.
    size = max(_BLOCK, 4 * cells)
    if cap is not None:
        size = min(size, cap)
    for start in range(0, n, size):
        yield slice(start, min(n, start + size))


def _key_dtype(full: int) -> type[np.signedinteger]:
    """The smallest integer type for cell numbers below ``full`` (small types are faster)."""
    if full < 2**15:
        return np.int16
    return np.int32 if full < 2**31 else np.int64


def _block_keys(
    codes: Sequence[Codes],
    sizes: Sequence[int],
    rows: slice,
    scratch: NDArray[np.signedinteger],
    shift: int,
) -> NDArray[np.signedinteger]:
    """Cell number of each row of the block, each axis shifted by one so -1 stays apart.

    The numbers index a table of shape ``[s + 1 for s in sizes]`` whose first slice on
    every axis collects the rows that belong to no cell; it is dropped at the end, which
    avoids filtering rows. Computed in place in ``scratch``.
    """
    key = scratch[: rows.stop - rows.start]
    np.copyto(key, codes[0][rows], casting="unsafe")
    for code, size in zip(codes[1:], sizes[1:], strict=True):
        key *= size + 1
        key += code[rows]
    key += shift
    return key


def _scratch(
    n: int, full: int, dtype: type[np.signedinteger] | None = None
) -> NDArray[np.signedinteger]:
    return np.empty(min(n, max(_BLOCK, 4 * full)), dtype=dtype or _key_dtype(full))


def _shift(sizes: Sequence[int]) -> int:
    """What adding one to every code adds to a cell number."""
    return sum(math.prod(s + 1 for s in sizes[i + 1 :]) for i in range(len(sizes)))


def _drop_outside(table: NDArray[Any], sizes: Sequence[int]) -> NDArray[Any]:
    shaped = table.reshape([s + 1 for s in sizes])
    return np.ascontiguousarray(shaped[tuple(slice(1, None) for _ in sizes)])


def count_table(
    codes: Sequence[Codes], sizes: Sequence[int], mask: NDArray[np.bool_] | None = None
) -> NDArray[np.int64]:
    """Exact row counts per cell, shape ``sizes`` (rows outside ``mask`` left out)."""
    full = math.prod(s + 1 for s in sizes)
    counts = np.zeros(full, dtype=np.int64)
    scratch, shift = _scratch(len(codes[0]), full), _shift(sizes)
    for rows in _blocks(len(codes[0]), full):
        keys = _block_keys(codes, sizes, rows, scratch, shift)
        if mask is not None:
            # Rows outside the mask go to key 0, a cell of no key that is dropped at the
            # end: multiplying by the flags costs a third of compressing the block.
            np.multiply(keys, mask[rows], out=keys)
        counts += np.bincount(keys, minlength=full)
    return _drop_outside(counts, sizes)


@dataclass(frozen=True)
class SumGrid:
    """The fixed-point grid of a clamped sum: values are whole multiples of ``step``.

    A plain sum adds each value clamped into ``[lo, hi]``. The parts of a mean or a
    variance (:mod:`dpframe._moments`) add a transformed value instead: the clamped value
    minus ``centre``, clamped to ``±radius``; with ``square_centre`` set, that value
    squared minus ``square_centre``, clamped to ``±square_centre``; with ``present``, 1
    for every value that is not missing (a count on a grid of step 1). ``limit`` is the
    sensitivity in grid steps when the transformation fixes it.
    """

    lo: float
    hi: float
    step: float
    centre: float = 0.0
    radius: float | None = None
    square_centre: float | None = None
    present: bool = False
    limit: int | None = None

    @classmethod
    def for_bounds(cls, lo: float, hi: float) -> SumGrid:
        largest = max(abs(lo), abs(hi))
        exponent = math.ceil(math.log2(largest)) if largest > 0 else 0
        return cls(lo, hi, math.ldexp(1.0, exponent - SUM_GRID_BITS))

    @property
    def sensitivity_units(self) -> int:
        """Most one row can move a sum, in grid steps: max |bound| rounded onto the grid."""
        if self.limit is not None:
            return self.limit
        return int(max(abs(round(self.lo / self.step)), abs(round(self.hi / self.step))))

    def units_into(
        self,
        values: NDArray[np.float64],
        out: NDArray[np.float64],
        keep: NDArray[np.bool_] | None = None,
        *,
        complete: bool = False,
    ) -> NDArray[np.float64]:
        """Each value in whole grid steps, as float64, written into ``out``.

        Values are clamped into [lo, hi] (±inf included) and rounded to the grid; NaN and
        rows outside ``keep`` become 0 steps, which leaves them out of any sum.
        ``complete`` says the caller knows there is no NaN (the scan is skipped).
        """
        units = out[: len(values)]
        if self.present:
            np.copyto(units, np.where(np.isnan(values), 0.0, 1.0))
        else:
            np.clip(values, self.lo, self.hi, out=units)
            if self.radius is not None:
                # No second clamp: the radius is at least the distance from the centre to
                # either bound, rounded up, and float subtraction is monotone, so every
                # centred value already lies within it.
                units -= self.centre
            if self.square_centre is not None:
                units *= units
                units -= self.square_centre
                np.clip(units, -self.square_centre, self.square_centre, out=units)
            units *= 1.0 / self.step  # a power of two: exact
            np.rint(units, out=units)
            if not complete:
                np.copyto(units, 0.0, where=np.isnan(units))
        if keep is not None:
            np.copyto(units, 0.0, where=~keep)
        return units


def _as_exact(running: NDArray[np.int64], flushed: NDArray[np.object_] | None) -> NDArray[Any]:
    """The int64 running sums, plus what was flushed into Python integers (if anything)."""
    return running if flushed is None else flushed + running.astype(object)


def sum_total(grid: SumGrid, values: NDArray[np.float64], mask: NDArray[np.bool_] | None) -> int:
    """Exact clamped sum in grid units (a Python int), leaving out NaN and rows outside ``mask``.

    Within a block every rounded value is an integer of magnitude at most 2**32, so
    float64 adds a block's (at most 2**17) of them exactly, in any order: all partial
    sums are integers below 2**53. Blocks are then added as Python integers.
    """
    total = 0
    buffer = np.empty(min(len(values), _BLOCK), dtype=np.float64)
    for rows in _blocks(len(values), 1):
        keep = None if mask is None else mask[rows]
        total += int(grid.units_into(values[rows], buffer, keep).sum())
    return total


def sum_table(
    grid: SumGrid,
    values: NDArray[np.float64],
    codes: Sequence[Codes],
    sizes: Sequence[int],
    mask: NDArray[np.bool_] | None = None,
) -> NDArray[Any]:
    """Exact per-cell clamped sums in grid units, shape ``sizes``.

    One float64 ``np.bincount`` per block of signed grid units: a block holds at most
    2**21 rows, so every partial sum is an integer below 2**53 and exact. The result is
    int64, or an object array of Python integers when more than 2**29 rows were added
    (so that nothing can wrap).
    """
    return sum_tables([grid], values, codes, sizes, mask)[0]


def sum_tables(
    grids: Sequence[SumGrid],
    values: NDArray[np.float64],
    codes: Sequence[Codes],
    sizes: Sequence[int],
    mask: NDArray[np.bool_] | None = None,
) -> list[NDArray[Any]]:
    """Several exact sums of one column per cell (the parts of a mean), in one pass.

    As :func:`sum_table`, each grid on its own transformation of the values; the cell
    numbers of each block are computed once for all of them. Without groupings
    (``codes`` empty) each result is a 0-d array holding the total.

    NaN (a missing value, left out of every sum) is found without a scan of its own
    where a grid sums values: a NaN unit makes its cell's float64 sum NaN (the units
    are finite otherwise), and only then is the block summed again with NaN as 0. That
    sum also tells whether a count (``present``) may count every row of the block.
    """
    if not codes:
        return [np.array(sum_total(grid, values, mask), dtype=object) for grid in grids]
    full = math.prod(s + 1 for s in sizes)
    running = [np.zeros(full, dtype=np.int64) for _ in grids]
    flushed: list[NDArray[np.object_] | None] = [None for _ in grids]
    since_flush = 0
    # np.bincount converts its input to intp on every call: with several sums per block,
    # converting once (wider keys) is cheaper.
    scratch = _scratch(len(values), full, np.intp if len(grids) > 1 else None)
    shift = _shift(sizes)
    buffer = np.empty(min(len(values), max(_BLOCK, 4 * full), _MAX_SUM_BLOCK), dtype=np.float64)
    # The sums of values first: they tell the counts whether the block holds a NaN.
    order = sorted(range(len(grids)), key=lambda i: grids[i].present)
    for rows in _blocks(len(values), full, cap=_MAX_SUM_BLOCK):
        keys = _block_keys(codes, sizes, rows, scratch, shift)
        keep = None if mask is None else mask[rows]
        block = values[rows]
        has_nan: bool | None = None  # among the kept rows; None: not known yet
        for i in order:
            grid = grids[i]
            if grid.present and keep is None:
                if has_nan is None:
                    has_nan = bool(np.isnan(block.min(initial=0.0)))  # min is NaN if any is
                if not has_nan:  # every row counts once: an integer bincount
                    running[i] += np.bincount(keys, minlength=full)
                    continue
            units = grid.units_into(block, buffer, keep, complete=has_nan is not True)
            sums = np.bincount(keys, weights=units, minlength=full)
            if has_nan is None and not grid.present:
                has_nan = bool(np.isnan(sums).any())
                if has_nan:  # sum again, with NaN as 0
                    units = grid.units_into(block, buffer, keep, complete=False)
                    sums = np.bincount(keys, weights=units, minlength=full)
            running[i] += sums.astype(np.int64)
        since_flush += rows.stop - rows.start
        if since_flush >= _FLUSH_ROWS:
            flushed = [_as_exact(r, f) for r, f in zip(running, flushed, strict=True)]
            running = [np.zeros(full, dtype=np.int64) for _ in grids]
            since_flush = 0
    return [_drop_outside(_as_exact(r, f), sizes) for r, f in zip(running, flushed, strict=True)]


# ---------------------------------------------------------------- bounds estimation

# Bins of the private bounds estimate (seed 004's ApproxBounds): [0, 1], (1, 2], (2, 4],
# ..., (2**61, 2**62], for the magnitudes of non-negative and of negative values.
LOG_EDGES = np.ldexp(1.0, np.arange(0, 63))


def log_histogram(values: NDArray[np.float64]) -> NDArray[np.int64]:
    """Counts of non-NaN ``values`` in the log-scale bins, non-negative then negative."""
    values = values[~np.isnan(values)]
    bins = np.minimum(np.searchsorted(LOG_EDGES, np.abs(values), side="left"), len(LOG_EDGES) - 1)
    negative = values < 0
    size = len(LOG_EDGES)
    return np.concatenate(
        [np.bincount(bins[~negative], minlength=size), np.bincount(bins[negative], minlength=size)]
    ).astype(np.int64)


@dataclass(frozen=True)
class Group:
    """A grouping column and its declared domain (the keys, in their declared order)."""

    name: Any
    domain: pd.Index
    dtype: Any

    def with_missing_cell(self) -> Group:
        """The same grouping with a missing-value cell (NaN) at the end, if it had none."""
        if self.domain.hasnans:
            return self
        domain = self.domain
        if domain.dtype.kind in "iu":  # integers stay exact: nullable, not float64
            nullable = nullable_dtype(domain.dtype)
            missing = pd.Index(pd.array([pd.NA], dtype=nullable))
            return Group(self.name, domain.astype(nullable).append(missing), self.dtype)
        return Group(self.name, domain.append(pd.Index([np.nan])), self.dtype)


def nullable_dtype(dtype: Any) -> Any:
    """The nullable pandas dtype of a numpy integer dtype (``Int64``...), else ``dtype``."""
    if isinstance(dtype, np.dtype) and dtype.kind in "iu":
        prefix = "UInt" if dtype.kind == "u" else "Int"
        return pd.api.types.pandas_dtype(f"{prefix}{8 * dtype.itemsize}")
    return dtype
