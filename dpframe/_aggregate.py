"""Exact aggregation on declared domains: counts and clamped sums, knowing nothing of noise.

Rows are mapped to cells through *codes*: for each grouping column, the position of the
row's key in the column's declared domain, or -1 when the key is missing (NaN) or
outside the domain. Such rows belong to no cell and are left out of every table. Cells
are numbered in row-major order over the product of the domains, so a table of shape
``(len(domain_1), len(domain_2), ...)`` comes out of a single ``np.bincount``.

Sums are exact: each value is clamped into its bounds, scaled by a power of two and
rounded onto an integer grid, and the integers are summed exactly (int64, or float64
bincounts of 17-bit limbs, which are exact below 2**36 rows). Float summation order,
rounding and overflow therefore cannot change a sum's sensitivity (Casacuberta et al.,
CCS 2022).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import NDArray

__all__: list[str] = []

# Grid for sums: a clamped value v is stored as round(v / step) with
# step = 2**(ceil(log2(max |bound|)) - SUM_GRID_BITS), so |v / step| <= 2**SUM_GRID_BITS.
SUM_GRID_BITS = 32
_LIMB_BITS = 17


def domain_codes(column: pd.Series, domain: pd.Index) -> NDArray[np.intp]:
    """Position of each row's key in ``domain``; -1 for missing or out-of-domain keys."""
    dtype = column.dtype
    if isinstance(dtype, pd.CategoricalDtype) and dtype.categories.equals(domain):
        return np.asarray(column.cat.codes.to_numpy(), dtype=np.intp)
    # Factorize first (fast, one pass over the rows), then map the few distinct keys.
    codes, uniques = pd.factorize(column, use_na_sentinel=True)
    mapping = np.append(domain.get_indexer(pd.Index(uniques)), -1)
    return np.asarray(mapping[codes], dtype=np.intp)  # codes == -1 picks the appended -1


def cell_keys(codes: Sequence[NDArray[np.intp]], sizes: Sequence[int]) -> NDArray[np.intp]:
    """Row-major cell number of each row, shifted by one per axis so that -1 stays apart.

    The result indexes a table of shape ``[s + 1 for s in sizes]`` whose first slice on
    every axis collects the rows that belong to no cell; :func:`count_table` drops it.
    This avoids filtering the rows before counting.
    """
    key = np.array(codes[0], dtype=np.intp, copy=True)
    key += 1
    for code, size in zip(codes[1:], sizes[1:], strict=True):
        key *= size + 1
        key += code
        key += 1
    return key


def _drop_outside(table: NDArray[np.int64], sizes: Sequence[int]) -> NDArray[np.int64]:
    shaped = table.reshape([s + 1 for s in sizes])
    return np.ascontiguousarray(shaped[tuple(slice(1, None) for _ in sizes)])


def count_table(
    keys: NDArray[np.intp], sizes: Sequence[int], mask: NDArray[np.bool_] | None = None
) -> NDArray[np.int64]:
    """Exact row counts per cell, shape ``sizes``, from :func:`cell_keys`."""
    if mask is not None:
        keys = keys[mask]
    full = math.prod(s + 1 for s in sizes)
    return _drop_outside(np.bincount(keys, minlength=full).astype(np.int64), sizes)


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
        """Clamp into [lo, hi] (±inf included), then round to whole grid steps, exactly."""
        clamped = np.clip(values, self.lo, self.hi)
        clamped *= 1.0 / self.step  # a power of two: exact
        np.rint(clamped, out=clamped)
        return clamped.astype(np.int64)


def sum_total(units: NDArray[np.int64], mask: NDArray[np.bool_] | None = None) -> int:
    """Exact sum of grid units (int64 cannot overflow: |unit| <= 2**32, rows < 2**31)."""
    return int(units[mask].sum() if mask is not None else units.sum())


def sum_table(
    keys: NDArray[np.intp],
    units: NDArray[np.int64],
    sizes: Sequence[int],
    mask: NDArray[np.bool_] | None = None,
) -> NDArray[np.int64]:
    """Exact per-cell sums of grid units, shape ``sizes``.

    ``np.bincount`` sums float64 weights; splitting each unit into 17-bit limbs keeps
    every partial sum below 2**53, so the float sums are exact integers.
    """
    if mask is not None:
        keys, units = keys[mask], units[mask]
    full = math.prod(s + 1 for s in sizes)
    offset = np.int64(1) << np.int64(SUM_GRID_BITS + 1)  # makes every unit non-negative
    shifted = units + offset
    total = np.zeros(full, dtype=np.int64)
    low_mask = np.int64((1 << _LIMB_BITS) - 1)
    for shift in range(0, SUM_GRID_BITS + 2 + _LIMB_BITS, _LIMB_BITS):
        limb = ((shifted >> np.int64(shift)) & low_mask).astype(np.float64)
        partial = np.bincount(keys, weights=limb, minlength=full)
        total += partial.astype(np.int64) << np.int64(shift)
    rows = np.bincount(keys, minlength=full).astype(np.int64)
    total -= rows * offset
    return _drop_outside(total, sizes)
