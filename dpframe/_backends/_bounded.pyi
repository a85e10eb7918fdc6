"""Bounded counts per cell without a row mask (compiled from ``_bounded.c``)."""

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
    /,
) -> None:
    """Write each row's 32-bit (unit, cell) key into its chunk of units."""

def add_bounded_counts(
    keys: NDArray[np.uint32],
    offsets: NDArray[np.int64],
    ends: NDArray[np.int64],
    cell_bits: int,
    max_rows: int,
    max_groups: int,
    table: NDArray[np.int64],
    pending_starts: NDArray[np.int64],
    pending_stops: NDArray[np.int64],
    pending_cells: NDArray[np.int64],
    /,
) -> int:
    """Add each unit's bounded rows per cell; set aside units in more than max_groups cells."""

def add_chosen_pairs(
    keys: NDArray[np.uint32],
    cell_bits: int,
    max_rows: int,
    max_groups: int,
    pending_starts: NDArray[np.int64],
    pending_stops: NDArray[np.int64],
    pending_cells: NDArray[np.int64],
    first: int,
    words: NDArray[np.uint64],
    chosen: NDArray[np.uint8],
    table: NDArray[np.int64],
    /,
) -> tuple[int, int]:
    """Choose the cells each set-aside unit keeps and add their bounded rows; return the
    units done and the 32-bit halves of words used."""
