"""Exact clamped sums per cell in one pass (compiled from ``_sums.c``)."""

import numpy as np
from numpy.typing import NDArray

def add_sums(
    values: NDArray[np.float64],
    codes: tuple[NDArray[np.signedinteger], ...],
    sizes: tuple[int, ...],
    mask: NDArray[np.bool_] | None,
    grids: tuple[tuple[float, float, float, float, float, int], ...],
    out: NDArray[np.int64],
    /,
) -> None:
    """Add each row's value in whole grid steps to its cell, per grid, in int64."""
