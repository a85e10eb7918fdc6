"""Labelling noisy cells like pandas: the index of a grouping, and ``pd.crosstab``'s layout.

Post-processing only: everything here takes values that were already released.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dpframe._backends import Group

__all__ = ["crosstab_frame", "labels"]


def _level(group: Group) -> pd.Index:
    dtype = group.dtype
    if isinstance(dtype, pd.CategoricalDtype) and dtype.categories.equals(group.domain):
        level: pd.Index = pd.CategoricalIndex(group.domain, dtype=dtype, name=group.name)
        return level
    plain: pd.Index = pd.Index(group.domain, name=group.name)
    return plain


def labels(groups: Sequence[Group]) -> pd.Index:
    """The labels of the cells of ``groups``, in the order of their declared domains."""
    if len(groups) == 1:
        return _level(groups[0])
    product: pd.Index = pd.MultiIndex.from_product(
        [_level(g) for g in groups], names=[g.name for g in groups]
    )
    return product


def _long_labels(
    groups: Sequence[Group], *, repeat: int = 1, tile: int = 1
) -> list[pd.Series[Any]]:
    """One label Series per grouping column, with one entry per cell of the table."""
    sizes = [len(g.domain) for g in groups]
    out = []
    for level, group in enumerate(groups):
        later = math.prod(sizes[level + 1 :])
        codes = np.tile(np.repeat(np.arange(sizes[level]), later), math.prod(sizes[:level]))
        codes = np.tile(np.repeat(codes, repeat), tile)
        categorical = pd.Categorical.from_codes(codes, categories=group.domain)
        out.append(pd.Series(categorical, name=group.name))
    return out


def crosstab_frame(
    cells: NDArray[Any],
    rows: Sequence[Group],
    columns: Sequence[Group],
    *,
    margins: bool,
    margins_name: str,
    normalize: bool | str | int,
) -> pd.DataFrame:
    """The released table; margins and normalization exactly as ``pd.crosstab`` does them."""
    row_index, col_index = labels(rows), labels(columns)
    plain = pd.DataFrame(cells, index=row_index, columns=col_index)
    if not margins and normalize is False:
        return plain
    # Re-run pandas' own crosstab on the noisy cells (one row per cell), so margins and
    # normalization follow its exact semantics; categoricals keep the declared order.
    result = pd.crosstab(
        _long_labels(rows, repeat=len(col_index)),
        _long_labels(columns, tile=len(row_index)),
        values=cells.reshape(-1),
        aggfunc="sum",
        margins=margins,
        margins_name=margins_name,
        normalize=normalize,  # type: ignore[arg-type]
        dropna=False,
    )
    if not margins:
        result.index, result.columns = row_index, col_index
    return result
