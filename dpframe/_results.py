"""The values the accessor returns, and :func:`release_info`, which reads their metadata.

A released number is a :class:`DPInt`, :class:`DPFloat` or :class:`DPBool`: an ``int``,
``float`` or truth value in every other respect, carrying its release's metadata in
``.dp``. Arithmetic on it gives a plain number, which carries nothing.

A released Series or DataFrame carries its metadata in ``attrs["dpframe.release"]``,
together with a fingerprint of exactly the labels and values that were released.
pandas copies ``attrs`` to whatever is derived from the result (``table * 100``,
``table.iloc[:2]``, ``sums / counts``); :func:`release_info` recomputes the fingerprint
and refuses a value that is not the one released, because the release's error bars do
not describe it. Both the metadata and the fingerprint are plain JSON, so results can
be written to parquet and read back.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Hashable
from typing import Any, overload

import pandas as pd
from numpy.typing import NDArray

from dpframe._release import JSONValue
from dpframe.errors import NotAReleaseError

__all__ = ["DPBool", "DPFloat", "DPInt", "release_info"]

#: The ``attrs`` key of a released Series or DataFrame.
RELEASE_KEY = "dpframe.release"


class DPInt(int):
    """An ``int`` released by dpframe; ``.dp`` holds the release's metadata.

    Parameters
    ----------
    value : int
        The released integer.
    metadata : dict, optional
        The release's metadata (what :func:`release_info` returns). Without it (as
        ``statistics.mean`` or ``from_bytes`` build a derived value), the result is a
        plain number: a value computed from releases is not a release.

    Examples
    --------
    >>> from dpframe import DPInt
    >>> n = DPInt(12, {"method": "count"})
    >>> n + 1, n.dp["method"]
    (13, 'count')
    """

    dp: dict[str, JSONValue]

    def __new__(cls, value: int, metadata: dict[str, JSONValue] | None = None) -> DPInt:
        if metadata is None:
            # Called with a value alone (statistics.mean, DPInt.from_bytes... build their
            # result as type(x)(value)): a value computed from releases is not a release.
            return int(value)  # type: ignore[return-value]
        self = super().__new__(cls, value)
        self.dp = metadata
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (DPInt, (int(self), self.dp))


class DPFloat(float):
    """A ``float`` released by dpframe; ``.dp`` holds the release's metadata.

    Parameters
    ----------
    value : float
        The released number.
    metadata : dict, optional
        The release's metadata (what :func:`release_info` returns). Without it (as
        ``statistics.mean`` or ``from_bytes`` build a derived value), the result is a
        plain number: a value computed from releases is not a release.

    Examples
    --------
    >>> from dpframe import DPFloat
    >>> total = DPFloat(2.5, {"method": "sum"})
    >>> total * 2, total.dp["method"]
    (5.0, 'sum')
    """

    dp: dict[str, JSONValue]

    def __new__(cls, value: float, metadata: dict[str, JSONValue] | None = None) -> DPFloat:
        if metadata is None:
            # Called with a value alone (statistics.mean, DPFloat.from_bytes... build their
            # result as type(x)(value)): a value computed from releases is not a release.
            return float(value)  # type: ignore[return-value]
        self = super().__new__(cls, value)
        self.dp = metadata
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (DPFloat, (float(self), self.dp))


class DPBool(int):
    """A decision released by dpframe: behaves as ``True`` or ``False``, with ``.dp`` metadata.

    Python's ``bool`` cannot be subclassed, so this is an ``int`` equal to 1 or 0 that
    prints, compares and tests as ``True`` or ``False`` (``if decision:``,
    ``decision == True``); only ``isinstance(decision, bool)`` and ``decision is True``
    differ. ``bool(decision)`` gives a plain ``bool``.

    Parameters
    ----------
    value : bool
        The released decision.
    metadata : dict
        The release's metadata (what :func:`release_info` returns).

    Examples
    --------
    >>> from dpframe import DPBool
    >>> decision = DPBool(True, {"method": "threshold_decision"})
    >>> decision, bool(decision), decision == True
    (True, True, True)
    """

    dp: dict[str, JSONValue]

    def __new__(cls, value: bool, metadata: dict[str, JSONValue]) -> DPBool:
        self = super().__new__(cls, 1 if value else 0)
        self.dp = metadata
        return self

    def __repr__(self) -> str:
        return "True" if self else "False"

    __str__ = __repr__

    def __reduce__(self) -> tuple[Any, ...]:
        return (DPBool, (bool(self), self.dp))


def _fingerprint(result: pd.Series[Any] | pd.DataFrame) -> str:
    """A hash of exactly what a result shows: its type, shape, dtypes, labels and values."""
    digest = hashlib.sha256()
    digest.update(f"{type(result).__name__}{result.shape}".encode())
    if isinstance(result, pd.DataFrame):
        digest.update(repr(list(result.dtypes.astype(str))).encode())
        digest.update(repr(list(result.columns.names)).encode())
        digest.update(pd.util.hash_pandas_object(result.columns).to_numpy().tobytes())
    else:
        digest.update(f"{result.dtype}{result.name!r}".encode())
    digest.update(repr(list(result.index.names)).encode())
    digest.update(pd.util.hash_pandas_object(result.index).to_numpy().tobytes())
    digest.update(pd.util.hash_pandas_object(result, index=False).to_numpy().tobytes())
    return digest.hexdigest()


class _ReleaseTag(dict[str, Any]):
    """What ``attrs["dpframe.release"]`` holds: the metadata and the fingerprint, as JSON.

    Never changed after it is made, so pandas' deep copy of ``attrs`` on every derived
    object (a table's per-cell error bars can be large) returns the tag itself.
    """

    def __copy__(self) -> _ReleaseTag:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> _ReleaseTag:
        return self


def _tag(result: pd.Series[Any] | pd.DataFrame, metadata: dict[str, JSONValue]) -> None:
    result.attrs[RELEASE_KEY] = _ReleaseTag(metadata=metadata, fingerprint=_fingerprint(result))


def integer(value: int, metadata: dict[str, JSONValue]) -> DPInt:
    """A released ``int``."""
    return DPInt(int(value), metadata)


def real(value: float, metadata: dict[str, JSONValue]) -> DPFloat:
    """A released ``float``."""
    return DPFloat(float(value), metadata)


def decision(value: bool, metadata: dict[str, JSONValue]) -> DPBool:
    """A released decision."""
    return DPBool(bool(value), metadata)


def series(
    values: NDArray[Any], index: pd.Index, name: Hashable, metadata: dict[str, JSONValue]
) -> pd.Series[Any]:
    """A released Series over a declared domain."""
    out = pd.Series(values, index=index, name=name)
    _tag(out, metadata)
    return out


def frame(table: pd.DataFrame, metadata: dict[str, JSONValue]) -> pd.DataFrame:
    """A released DataFrame."""
    _tag(table, metadata)
    return table


_NOT_A_RELEASE = (
    "release_info needs a value returned by a df.dp method (count, sum, crosstab, "
    "threshold_decision, ...), kept as it was returned."
)


@overload
def release_info(result: DPInt | DPFloat | DPBool) -> dict[str, JSONValue]: ...
@overload
def release_info(result: pd.Series[Any] | pd.DataFrame) -> dict[str, JSONValue]: ...
def release_info(result: object) -> dict[str, JSONValue]:
    """The metadata of a dpframe release: what was released, how, at what cost, how accurate.

    Parameters
    ----------
    result : DPInt, DPFloat, DPBool, pandas.Series or pandas.DataFrame
        A value returned by a ``df.dp`` method, as it was returned.

    Returns
    -------
    dict
        A copy of the metadata, JSON-serializable: ``method``, ``columns``, ``where``,
        ``by``, ``mechanism``, ``epsilon`` and ``delta`` (floats, with exact
        ``epsilon_exact`` / ``delta_exact`` strings: the whole cost of the call),
        ``sensitivity``, ``noise_scale``, ``bounds``, ``alpha``, ``noise_error_bound``
        (the ``1 - alpha`` half-width of the noise of every released cell: a number, or
        nested lists shaped like the result), ``error_bound_covers`` (what that bar
        covers: the noise, never clamping bias), ``private``, ``post_processing``, and
        ``parts`` when the call released more than once.

    Raises
    ------
    NotAReleaseError
        For anything else, including values derived from a release by arithmetic,
        slicing or reindexing: the release's error bars do not describe them.

    See Also
    --------
    DPAccessor.count, DPAccessor.sum, DPAccessor.crosstab : Methods that return releases.

    Examples
    --------
    >>> import dpframe
    >>> from dpframe.datasets import census
    >>> df = census(200, rng=3)
    >>> df.dp.set_budget(epsilon=1.0)
    >>> n = df.dp.count(epsilon=0.5)
    >>> dpframe.release_info(n)["mechanism"]
    'geometric'
    >>> dpframe.release_info(n + 1)
    Traceback (most recent call last):
    ...
    dpframe.errors.NotAReleaseError: int is not a dpframe release. ...
    """
    if isinstance(result, DPInt | DPFloat | DPBool):
        return copy.deepcopy(result.dp)
    if isinstance(result, pd.Series | pd.DataFrame):
        tag = result.attrs.get(RELEASE_KEY)
        if isinstance(tag, dict) and isinstance(tag.get("metadata"), dict):
            if tag.get("fingerprint") == _fingerprint(result):
                info: dict[str, JSONValue] = copy.deepcopy(tag["metadata"])
                return info
            raise NotAReleaseError(
                f"This {type(result).__name__} was derived from a dpframe release (by "
                f"arithmetic, slicing, reindexing or a change of labels or dtype), so that "
                f"release's metadata and error bars do not describe it. "
                f"{_NOT_A_RELEASE} To keep a part of a table, call release_info on the "
                f"whole table and select the same way from its error bars (noise_error_bound or "
                f"noise_interval, and for agg, under parts, each statistic's)."
            )
    raise NotAReleaseError(f"{type(result).__name__} is not a dpframe release. {_NOT_A_RELEASE}")
