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
rounded onto an integer grid, and the integers are summed exactly (float64 within
blocks small enough that every partial sum is an integer below 2**53, or float64
bincounts of 17-bit limbs, which are exact below 2**36 rows). Float summation order,
rounding and overflow therefore cannot change a sum's sensitivity (Casacuberta et al.,
CCS 2022).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dpframe import _validation
from dpframe.errors import NoiseOverflowError

__all__: list[str] = []

# Grid for sums: a clamped value v is stored as round(v / step) with
# step = 2**(ceil(log2(max |bound|)) - SUM_GRID_BITS), so |v / step| <= 2**SUM_GRID_BITS.
SUM_GRID_BITS = 32
_LIMB_BITS = 17
_LIMB_MASK = np.int64((1 << _LIMB_BITS) - 1)
# Non-negative offset added to units before splitting them into limbs.
_OFFSET = np.int64(1) << np.int64(SUM_GRID_BITS + 1)
# Most rows a sum may cover: |unit| <= 2**32, so int64 totals stay below 2**62.
MAX_SUM_ROWS = 2**30
_BLOCK = 1 << 17  # rows per block: fits L2 as int16 keys; block sums stay below 2**49

Codes = NDArray[np.signedinteger]


def domain_codes(column: pd.Series, domain: pd.Index) -> Codes:
    """Position of each row's key in ``domain``; -1 for missing or out-of-domain keys.

    Categorical columns whose categories are the domain give their own codes (no copy,
    int8 or int16); Arrow-backed columns (pandas 3's default ``str``) are looked up in
    the domain by Arrow in one pass; others are factorized once and the few distinct
    keys mapped.
    """
    dtype = column.dtype
    if isinstance(dtype, pd.CategoricalDtype) and dtype.categories.equals(domain):
        return np.asarray(column.array.codes)  # a read-only view, no copy
    values = column.array
    arrow = getattr(values, "_pa_array", None)
    if arrow is not None:
        found = _arrow_codes(arrow, domain)
        if found is not None:
            return found
    codes, uniques = values.factorize(use_na_sentinel=True)
    mapping = np.append(domain.get_indexer(pd.Index(uniques)), -1)
    small = np.int32 if len(domain) < 2**31 else np.int64
    return np.asarray(mapping.astype(small)[codes])  # codes == -1 picks the appended -1


def _arrow_codes(arrow: Any, domain: pd.Index) -> Codes | None:
    """``pyarrow.compute.index_in`` against the domain; None if the key types do not match."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        value_set = pa.array(list(domain), type=arrow.type)
    except (pa.ArrowException, TypeError, ValueError):
        return None
    if len(value_set) != len(domain):  # pragma: no cover - defensive
        return None
    positions = pc.fill_null(pc.index_in(arrow, value_set=value_set), -1)
    return np.asarray(positions.to_numpy(), dtype=np.int32)


def _blocks(n: int, cells: int) -> Iterator[slice]:
    # At least four rows per cell in a block, so clearing bincount's output stays cheap.
    size = max(_BLOCK, 4 * cells)
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


def _scratch(n: int, full: int) -> NDArray[np.signedinteger]:
    return np.empty(min(n, max(_BLOCK, 4 * full)), dtype=_key_dtype(full))


def _shift(sizes: Sequence[int]) -> int:
    """What adding one to every code adds to a cell number."""
    return sum(math.prod(s + 1 for s in sizes[i + 1 :]) for i in range(len(sizes)))


def _drop_outside(table: NDArray[np.int64], sizes: Sequence[int]) -> NDArray[np.int64]:
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
            keys = keys[mask[rows]]
        counts += np.bincount(keys, minlength=full)
    return _drop_outside(counts, sizes)


@dataclass(frozen=True)
class SumGrid:
    """The fixed-point grid of a clamped sum: values are whole multiples of ``step``."""

    lo: float
    hi: float
    step: float

    @classmethod
    def for_bounds(cls, lo: float, hi: float) -> SumGrid:
        largest = max(abs(lo), abs(hi))
        exponent = math.ceil(math.log2(largest)) if largest > 0 else 0
        return cls(lo, hi, math.ldexp(1.0, exponent - SUM_GRID_BITS))

    @property
    def sensitivity_units(self) -> int:
        """Most one row can move a sum, in grid steps: max |bound| rounded onto the grid."""
        return int(max(abs(round(self.lo / self.step)), abs(round(self.hi / self.step))))

    def to_units(self, values: NDArray[np.float64]) -> NDArray[np.int64]:
        """Clamp into [lo, hi] (±inf included), then round to whole grid steps, exactly.

        NaN becomes 0 units; callers leave NaN rows out of the sum with a mask.
        """
        clamped = np.clip(values, self.lo, self.hi)
        clamped *= 1.0 / self.step  # a power of two: exact
        np.rint(clamped, out=clamped)
        np.nan_to_num(clamped, copy=False, nan=0.0)
        return clamped.astype(np.int64)


def _usable(values: NDArray[np.float64], mask: NDArray[np.bool_] | None, rows: slice) -> Any:
    """Rows of the block that enter the sum: inside ``mask`` and not NaN (None: all)."""
    block = values[rows]
    missing = np.isnan(block)
    if mask is None:
        return ~missing if missing.any() else None
    return mask[rows] & ~missing


def _check_sum_rows(n_rows: int) -> None:
    """Refuse sums over more than MAX_SUM_ROWS rows (int64 totals of grid units could wrap)."""
    if n_rows > MAX_SUM_ROWS:
        raise NoiseOverflowError(
            f"a sum over {n_rows:,} rows could overflow int64 on dpframe's fixed-point grid "
            f"(limit {MAX_SUM_ROWS:,}); sum parts of the frame and add the releases."
        )


def sum_total(grid: SumGrid, values: NDArray[np.float64], mask: NDArray[np.bool_] | None) -> int:
    """Exact clamped sum in grid units, leaving out NaN and rows outside ``mask``.

    Within a block every rounded value is an integer of magnitude at most 2**32, so
    float64 adds a block's (at most 2**17) of them exactly, in any order: all partial
    sums are integers below 2**53. Blocks are then added as Python integers.
    """
    _check_sum_rows(len(values))
    scale = 1.0 / grid.step  # a power of two: exact
    total = 0
    buffer = np.empty(min(len(values), _BLOCK), dtype=np.float64)
    for rows in _blocks(len(values), 1):
        scaled = buffer[: rows.stop - rows.start]
        np.clip(values[rows], grid.lo, grid.hi, out=scaled)
        scaled *= scale
        np.rint(scaled, out=scaled)
        if mask is None:
            block = float(scaled.sum())
            if math.isnan(block):  # NaN rows are left out, found only when present
                block = float(np.nansum(scaled))
        else:
            block = float(np.nansum(scaled, where=mask[rows]))
        total += int(block)
    return total


def sum_table(
    grid: SumGrid,
    values: NDArray[np.float64],
    codes: Sequence[Codes],
    sizes: Sequence[int],
    mask: NDArray[np.bool_] | None = None,
) -> NDArray[np.int64]:
    """Exact per-cell clamped sums in grid units, shape ``sizes``.

    ``np.bincount`` sums float64 weights; splitting each (offset, non-negative) unit
    into 17-bit limbs keeps every partial sum below 2**53, so the float sums are exact.
    """
    _check_sum_rows(len(values))
    full = math.prod(s + 1 for s in sizes)
    total = np.zeros(full, dtype=np.int64)
    scratch, shift = _scratch(len(values), full), _shift(sizes)
    for rows in _blocks(len(values), full):
        keys = _block_keys(codes, sizes, rows, scratch, shift)
        units = grid.to_units(values[rows])
        use = _usable(values, mask, rows)
        if use is not None:
            keys, units = keys[use], units[use]
        shifted = units + _OFFSET
        for low_bit in range(0, SUM_GRID_BITS + 2 + _LIMB_BITS, _LIMB_BITS):
            limb = ((shifted >> np.int64(low_bit)) & _LIMB_MASK).astype(np.float64)
            partial = np.bincount(keys, weights=limb, minlength=full)
            total += partial.astype(np.int64) << np.int64(low_bit)
        total -= np.bincount(keys, minlength=full).astype(np.int64) * _OFFSET
    return _drop_outside(total, sizes)


# ---------------------------------------------------------------- the pandas backend

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
    """A grouping column and its declared domain."""

    name: Any
    domain: pd.Index
    dtype: Any


class PandasData:
    """Exact aggregates of an in-memory DataFrame: the accessor's only view of the rows.

    Other backends (Dask) provide the same methods; the privacy logic above them is shared.
    """

    def __init__(self, frame: pd.DataFrame) -> None:
        self.frame = frame

    def column(self, name: Any, param: str) -> Any:
        """The column ``name`` (validated: it exists, once)."""
        return _validation.column(self.frame, name, param)

    def where(self, where: Any) -> NDArray[np.bool_] | None:
        """The validated row filter."""
        return _validation.where_mask(self.frame, where)

    def numeric(self, name: Any, param: str) -> NDArray[np.float64]:
        """A numeric column as float64 (validated), missing values as NaN."""
        return _validation.numeric_values(self.column(name, param), name)

    def _codes(self, groups: Sequence[Group]) -> list[Codes]:
        return [domain_codes(self.frame[g.name], g.domain) for g in groups]

    def row_count(self, where: NDArray[np.bool_] | None) -> int:
        return len(self.frame) if where is None else int(where.sum())

    def count_table(
        self, groups: Sequence[Group], where: NDArray[np.bool_] | None
    ) -> NDArray[np.int64]:
        return count_table(self._codes(groups), [len(g.domain) for g in groups], where)

    def sum_total(
        self, values: NDArray[np.float64], grid: SumGrid, where: NDArray[np.bool_] | None
    ) -> int:
        return sum_total(grid, values, where)

    def sum_table(
        self,
        values: NDArray[np.float64],
        grid: SumGrid,
        groups: Sequence[Group],
        where: NDArray[np.bool_] | None,
    ) -> NDArray[np.int64]:
        sizes = [len(g.domain) for g in groups]
        return sum_table(grid, values, self._codes(groups), sizes, where)

    def log_histogram(
        self, values: NDArray[np.float64], where: NDArray[np.bool_] | None
    ) -> NDArray[np.int64]:
        return log_histogram(values if where is None else values[where])
