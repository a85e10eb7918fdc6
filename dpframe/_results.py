"""Wrapping released values: every result the accessor returns is built here.

A release carries its metadata as a JSON-serializable dict: in ``result.attrs["dp"]``
for a Series or DataFrame, and in ``result.dp`` for a scalar (``DPInt`` / ``DPFloat``,
which are ``int`` / ``float`` in every other respect). :func:`release_info` reads it
from either.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

__all__ = ["DPFloat", "DPInt", "release_info"]


class DPInt(int):
    """An ``int`` released by dpframe; ``.dp`` holds the release's metadata."""

    dp: dict[str, Any]

    def __new__(cls, value: int, metadata: dict[str, Any]) -> DPInt:
        self = super().__new__(cls, value)
        self.dp = metadata
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (DPInt, (int(self), self.dp))


class DPFloat(float):
    """A ``float`` released by dpframe; ``.dp`` holds the release's metadata."""

    dp: dict[str, Any]

    def __new__(cls, value: float, metadata: dict[str, Any]) -> DPFloat:
        self = super().__new__(cls, value)
        self.dp = metadata
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (DPFloat, (float(self), self.dp))


def release_info(result: Any) -> dict[str, Any]:
    """The metadata of a dpframe release (mechanism, epsilon, delta, noise scale, error bars).

    Parameters
    ----------
    result : DPInt, DPFloat, pandas.Series or pandas.DataFrame
        A value returned by ``df.dp.count``, ``df.dp.sum`` or ``df.dp.crosstab``.

    Returns
    -------
    dict
        JSON-serializable: ``method``, ``columns``, ``mechanism``, ``epsilon``,
        ``delta`` (floats, with exact ``epsilon_exact`` / ``delta_exact`` strings),
        ``sensitivity``, ``noise_scale``, ``alpha``, ``error_bound`` (the 95% half-width
        of every released cell, a number or nested lists shaped like the result),
        ``private`` and the post-processing applied.

    Examples
    --------
    >>> import dpframe
    >>> from dpframe.datasets import census
    >>> df = census(200, seed=3)
    >>> n = df.dp.count(epsilon=1.0)
    >>> dpframe.release_info(n)["mechanism"]
    'geometric'
    """
    if isinstance(result, DPInt | DPFloat):
        return result.dp
    if isinstance(result, pd.Series | pd.DataFrame) and "dp" in result.attrs:
        info: dict[str, Any] = result.attrs["dp"]
        return info
    raise TypeError(
        f"{type(result).__name__} carries no dpframe release metadata; pass a value returned "
        f"by df.dp.count, df.dp.sum or df.dp.crosstab."
    )


@dataclass
class Release:
    """What one release consists of, before it is wrapped."""

    method: str
    columns: list[str]
    mechanism: str
    epsilon: Fraction
    delta: Fraction
    sensitivity: float
    noise_scale: float | None
    private: bool
    alpha: float = 0.05
    error_bound: Any = None
    post_processing: list[str] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)

    def metadata(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "columns": list(self.columns),
            "mechanism": self.mechanism,
            "epsilon": float(self.epsilon),
            "epsilon_exact": str(self.epsilon),  # "1/2", "1/11": exact
            "delta": float(self.delta),
            "delta_exact": str(self.delta),
            "sensitivity": self.sensitivity,
            "noise_scale": self.noise_scale,
            "alpha": self.alpha,
            "error_bound": _jsonable(self.error_bound),
            "private": self.private,
            "post_processing": list(self.post_processing),
            **{k: _jsonable(v) for k, v in self.notes.items()},
        }


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Fraction):
        return float(value)
    return value


def scalar(value: float | int, release: Release, *, integer: bool) -> DPInt | DPFloat:
    """A released number."""
    if integer:
        return DPInt(int(value), release.metadata())
    return DPFloat(float(value), release.metadata())


def series(values: NDArray[Any], index: pd.Index, name: str, release: Release) -> pd.Series:
    """A released Series over a declared domain."""
    out = pd.Series(values, index=index, name=name)
    out.attrs["dp"] = release.metadata()
    return out


def frame(table: pd.DataFrame, release: Release) -> pd.DataFrame:
    """A released DataFrame (a crosstab)."""
    table.attrs["dp"] = release.metadata()
    return table
