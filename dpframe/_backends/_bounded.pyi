"""Bounded counts per cell without a row mask (compiled from ``_bounded.c``)."""

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

def partition_keys(
    units: NDArray[np.integer],
    first_unit: int,
    codes: tuple[NDArray[np.integer], ...],
    sizes: tuple[int, ...],
    mask: NDArray[np.bool_] | None,
    cell_bits: int,
    keys: NDArray[np.uint32],
    offsets: NDArray[np.int64],
    ends: NDArray[np.int64],
    room: NDArray[np.int64] | None = None,
    /,
) -> bool:
    """Write each row's 32-bit (unit, cell) key into its chunk of units; False when a
    chunk has more rows than the room given it."""

def add_bounded_counts(
    keys: NDArray[np.uint32],
    offsets: NDArray[np.int64],
    ends: NDArray[np.int64],
    cell_bits: int,
    max_rows: int,
    max_groups: int,
    table: NDArray[np.int64],
    draw: Callable[[int], NDArray[np.uint64]],
    batch: int,
    /,
) -> int:
    """Add each unit's bounded rows per cell; a unit in more than max_groups cells keeps a
    uniformly random max_groups of them, from words draw(batch) gives. Return the number of
    such units."""

def units_within(ids: NDArray[np.integer], first_unit: int, unit_count: int, limit: int, /) -> bool:
    """Whether every row has a unit and no unit has more than limit rows."""

def id_range(ids: NDArray[np.integer], /) -> tuple[int, int]:
    """The smallest and the largest of a non-empty int32 array."""
