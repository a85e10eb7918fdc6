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
rounded (half to even) onto an integer grid of at most 2**32 steps per value, and the
integers are added in int64 by one compiled loop over the rows (``_sums.c``, which
computes each row's steps with the same double operations as numpy's ``clip``,
``multiply`` and ``rint``, in the same order); int64 tables of at most 2**29 rows are
added as Python integers, so sums of any number of rows are exact and never refused.
Float summation order, rounding and overflow therefore cannot change a sum's
sensitivity (Casacuberta et al., CCS 2022). Counts need no compiled code: they are
``np.bincount`` of the cell numbers, block by block.

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

from dpframe._backends import _sums
from dpframe.errors import DomainError, DPFrameError

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
_BLOCK = 1 << 17  # rows per block of a count: fits L2 as int16 keys
# The transformations of a grid, as the compiled kernel reads them.
_CENTRED, _SQUARED, _PRESENT = 1, 2, 4
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


def _scratch(n: int, full: int) -> NDArray[np.signedinteger]:
    return np.empty(min(n, max(_BLOCK, 4 * full)), dtype=_key_dtype(full))


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
    minus ``centre``, within ``±radius`` (which covers both bounds, so no clamp is
    needed; :meth:`spec` refuses a grid where it does not); with ``square_centre`` set, that value
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

    def spec(self) -> tuple[float, float, float, float, float, int]:
        """This grid as the compiled kernel reads it (see ``_sums.c``)."""
        if self.radius is not None and not (
            self.radius >= self.hi - self.centre and self.radius >= self.centre - self.lo
        ):
            # The kernel does not clamp to ±radius: that is exact only when the radius
            # covers both bounds (float subtraction is monotone), as moment plans make it.
            raise DPFrameError(
                f"internal error: a grid's radius {self.radius!r} does not cover its bounds "
                f"[{self.lo!r}, {self.hi!r}] around {self.centre!r}; please report"
            )
        flags = (
            (_CENTRED if self.radius is not None else 0)
            | (_SQUARED if self.square_centre is not None else 0)
            | (_PRESENT if self.present else 0)
        )
        return (
            self.lo,
            self.hi,
            1.0 / self.step,  # a power of two: exact
            self.centre,
            0.0 if self.square_centre is None else self.square_centre,
            flags,
        )


def sum_total(grid: SumGrid, values: NDArray[np.float64], mask: NDArray[np.bool_] | None) -> int:
    """Exact clamped sum in grid units (a Python int), leaving out NaN and rows outside ``mask``."""
    return int(sum_tables([grid], values, [], [], mask)[0])


def sum_table(
    grid: SumGrid,
    values: NDArray[np.float64],
    codes: Sequence[Codes],
    sizes: Sequence[int],
    mask: NDArray[np.bool_] | None = None,
) -> NDArray[Any]:
    """Exact per-cell clamped sums in grid units, shape ``sizes``.

    Each row's value in whole grid steps (an integer of magnitude at most 2**32) is
    added to its cell in int64 by the compiled kernel; the result is int64, or an object
    array of Python integers when more than 2**29 rows were added (so nothing can wrap).
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

    As :func:`sum_table`, each grid on its own transformation of the values, all of
    them in one pass of the compiled kernel over the rows. Without groupings (``codes``
    empty) each result is a 0-d array holding the total as a Python integer.
    """
    # Cell 0 holds the rows of no cell (outside the mask, or a key outside its domain);
    # without groupings the kernel's table is that cell and the total.
    full = math.prod(s + 1 for s in sizes) if codes else 2
    specs = tuple(grid.spec() for grid in grids)
    values = np.ascontiguousarray(values, dtype=np.float64)
    columns = [np.ascontiguousarray(code) for code in codes]
    keep = None if mask is None else np.ascontiguousarray(mask, dtype=np.bool_)
    tables: NDArray[Any] = np.zeros((len(grids), full), dtype=np.int64)
    # int64 tables of at most 2**29 rows (each at most 2**32 steps) cannot wrap; beyond
    # that many rows, they are added as Python integers.
    for start in range(0, len(values), _FLUSH_ROWS):
        rows = slice(start, start + _FLUSH_ROWS)
        chunk = np.zeros((len(grids), full), dtype=np.int64)
        _sums.add_sums(
            values[rows],
            tuple(code[rows] for code in columns),
            tuple(sizes),
            None if keep is None else keep[rows],
            specs,
            chunk.reshape(-1),  # a view: the kernel adds into chunk
        )
        tables = chunk if start == 0 else tables.astype(object) + chunk.astype(object)
    if not codes:
        return [np.array(int(table[1]), dtype=object) for table in tables]
    return [_drop_outside(table, sizes) for table in tables]


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
