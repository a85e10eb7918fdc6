"""The types shared by dpframe's public signatures, in one place.

Aliases rather than classes: a user passes plain Python and pandas values, and these names
only say, precisely, which ones are accepted.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Literal, TypeAlias

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "AutoBounds",
    "Bounds",
    "ColumnLabel",
    "Columns",
    "DecisionMethod",
    "Domain",
    "NoiseKind",
    "Normalize",
    "OutOfRange",
    "PrivacyAmount",
    "RNGLike",
    "Where",
]

#: One column label of a DataFrame (usually a str).
ColumnLabel: TypeAlias = Hashable
#: One column label, or a list of them (``by="Sex"`` or ``by=["Sex", "Region"]``).
Columns: TypeAlias = "ColumnLabel | Sequence[ColumnLabel]"
#: A row filter: a ``DataFrame.query``-style string, a boolean Series of the same frame,
#: or a boolean array with one entry per row.
Where: TypeAlias = "str | pd.Series[bool] | NDArray[np.bool_] | None"
#: Declared range ``(lo, hi)`` of one value, fixed without looking at the data.
Bounds: TypeAlias = tuple[float, float]
#: ``bounds="auto"``: estimate the bounds privately first, spending part of the budget.
AutoBounds: TypeAlias = Literal["auto"]
#: Declared keys of grouping columns: ``{"Sex": ["F", "M"], "Age": range(16, 96)}``.
Domain: TypeAlias = Mapping[ColumnLabel, Iterable[object]]
#: A privacy parameter (epsilon, delta, rho): exact Fractions are kept exact; a float is
#: read as the simplest fraction that rounds to it (``0.1`` is exactly 1/10).
PrivacyAmount: TypeAlias = float | int | Fraction
#: SPEC 7 randomness for teaching and tests (``None`` is the private default).
RNGLike: TypeAlias = np.random.Generator | np.random.BitGenerator | np.random.SeedSequence | int
#: ``pd.crosstab``'s ``normalize=``.
Normalize: TypeAlias = bool | Literal["all", "index", "columns", 0, 1]
#: Seed 001's threshold-decision rules.
DecisionMethod: TypeAlias = Literal["laplace", "cutoff", "generalized"]
#: The noise of a count or sum: exact geometric (pure epsilon-DP) or discrete Gaussian (zCDP).
NoiseKind: TypeAlias = Literal["geometric", "gaussian"]
#: What the truncated geometric mechanism does with results outside its bounds.
OutOfRange: TypeAlias = Literal["clamp", "resample"]
