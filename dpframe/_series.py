"""``df["wages"].dp``: the ``.dp`` methods that make sense for one column.

Each method is :class:`~dpframe.DPAccessor`'s, on the Series as a one-column frame: the
Series shares its frame's ledger (pandas carries ``attrs`` from ``df`` to ``df["wages"]``
and on to ``to_frame()``), so every release spends the frame's budget. A Series holds no
other column: when the data has a privacy unit, a Series without the unit's column cannot
bound what one unit contributes, and every release from it is refused (release from the
frame, ``df.dp.mean("wages", ..., max_rows=...)``).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from dpframe import _results, _validation
from dpframe._accessor import DPAccessor
from dpframe._ledger import Ledger
from dpframe._typing import Bounds, PrivacyAmount, RNGLike, Where
from dpframe.errors import InvalidParameterTypeError, PrivacyUnitError

__all__ = ["DPSeriesAccessor"]


class DPSeriesAccessor:
    """Differentially private versions of pandas' Series statistics: ``series.dp``.

    Parameters
    ----------
    series : pandas.Series
        The column to release statistics of (its frame's ledger travels with it).

    See Also
    --------
    DPAccessor : The frame's accessor, with groupings and tables.

    Notes
    -----
    The guarantees are :class:`~dpframe.DPAccessor`'s: neighbouring data sets differ by
    one row; each method states its sensitivity. On data with a privacy unit a Series has
    lost the unit's column (unless it is that column), so its releases are refused with
    :class:`~dpframe.errors.PrivacyUnitError`: release from the frame, with ``max_rows``.
    Results are labelled like pandas' (an unnamed Series gives unnamed results). The
    release records the Series' name as its column, and pandas keeps a column's name
    through arithmetic and ufuncs: ``np.log(df["wage"])`` is still named ``"wage"``, so
    name what you derive (``.rename("log_wage")``) for the ledger to say what was read.

    Examples
    --------
    >>> import dpframe
    >>> from dpframe.datasets import census
    >>> df = census(1000, rng=0)
    >>> df.dp.set_budget(epsilon=1.0)
    >>> 0 <= df["Age"].dp.mean(epsilon=0.5, bounds=(0, 100)) <= 100
    True
    >>> float(df.dp.ledger.remaining.epsilon)
    0.5
    """

    def __init__(self, series: pd.Series[Any]) -> None:
        if not isinstance(series, pd.Series):
            raise InvalidParameterTypeError(
                f"the Series accessor needs a pandas Series, got {type(series).__name__}."
            )
        #: pandas' name of the Series (None when unnamed), given to the results.
        self._series_name: Hashable | None = series.name
        #: The column label of the one-column frame the releases read.
        self._name: Hashable = "values" if series.name is None else series.name
        self._frame = series.to_frame(self._name)

    @property
    def _dp(self) -> DPAccessor:
        return DPAccessor(self._frame)

    def _check_unit(self, method: str, grouped: bool = False) -> None:
        """Refuse, before anything else, a release from a Series that lost the privacy unit."""
        unit = self._dp.ledger.privacy_unit
        if unit is None or all(name in self._frame.columns for name in unit):
            return
        bounds = "max_rows=..., max_groups=..." if grouped else "max_rows=..."
        raise PrivacyUnitError(
            f"this data's privacy unit is {list(unit)!r}, and a Series holds only its own "
            f"values, not the unit's column(s), so no release from it can bound what one "
            f"unit contributes (and a release at the cost of one row would spend more than "
            f"it records). Release from the frame, which keeps the unit's column, with the "
            f"same arguments and the unit's bounds: df.dp.{method}({self._name!r}, ..., "
            f"{bounds}). Nothing was charged."
        )

    @property
    def ledger(self) -> Ledger:
        """The ledger of the data this column comes from.

        See Also
        --------
        DPAccessor.ledger : The same ledger.

        Examples
        --------
        >>> import dpframe
        >>> from dpframe.datasets import census
        >>> df = census(10, rng=0)
        >>> df.dp.set_budget(epsilon=1.0)
        >>> df["Age"].dp.ledger is df.dp.ledger
        True
        """
        return self._dp.ledger

    def count(
        self,
        *,
        epsilon: PrivacyAmount,
        where: Where = None,
        nonnegative: bool = False,
        max_rows: int | None = None,
        rng: RNGLike | None = None,
    ) -> _results.DPInt:
        """Noisy number of non-missing values, like ``Series.count()``.

        Parameters
        ----------
        epsilon : float
            Privacy budget of this call.
        where : str, bool Series or bool array, optional
            Count only the rows satisfying this condition.
        nonnegative : bool, default False
            Set a negative noisy count to 0.
        max_rows : int, optional
            Only for the privacy unit's own column (any other Series of data with a
            privacy unit is refused): the most rows one unit may contribute.
        rng : numpy Generator or seed, optional
            For teaching and tests only.

        Returns
        -------
        DPInt
            The noisy number of values that are not missing (NaN, NA, None), as pandas'
            ``Series.count()`` counts them; rows with a missing value are not counted.

        Raises
        ------
        PrivacyUnitError
            When the data has a privacy unit and this Series is not its column.

        See Also
        --------
        DPAccessor.count : Rows of a frame, missing values included.
        DPSeriesGroupBy.count : Non-missing values per group.

        Notes
        -----
        :meth:`DPAccessor.count` of the rows whose value is present (NaN is missing, also
        in an Arrow float column, where pandas counts it as a value): whether a row is
        counted depends on that row alone, so the count has sensitivity 1 and the release
        is ``epsilon``-DP (exact geometric noise).

        Examples
        --------
        >>> import numpy as np
        >>> import pandas as pd
        >>> import dpframe
        >>> df = pd.DataFrame({"wage": [3.0, np.nan, 5.0, 8.0]})
        >>> df.dp.set_budget(epsilon=100.0)
        >>> df["wage"].count()
        np.int64(3)
        >>> isinstance(df["wage"].dp.count(epsilon=50.0), int)
        True
        """
        where = _validation.where_in_caller(where)
        self._check_unit("count")
        values = self._frame[self._name]
        present = values.notna()
        if pd.api.types.is_float_dtype(values.dtype):
            # An Arrow float column keeps NaN as a value that pandas counts; dpframe's sums,
            # means and grouped counts take NaN as missing, and so does this count.
            present &= ~np.isnan(_validation.numeric_values(values, self._name))
        frame = self._frame[present]
        if where is not None and not isinstance(where, str):
            # the same checks the accessor makes (another budget's condition is refused),
            # on the Series' rows; then its kept rows
            self._dp._backend.rows(where)
            mask = _validation.where_mask(self._frame, where)
            kept = present.to_numpy() if mask is None else mask[present.to_numpy()]
            where = pd.Series(kept, index=frame.index) if isinstance(where, pd.Series) else kept
        return DPAccessor(frame).count(
            epsilon=epsilon, where=where, nonnegative=nonnegative, max_rows=max_rows, rng=rng
        )

    def sum(
        self,
        *,
        epsilon: PrivacyAmount,
        bounds: Bounds,
        where: Where = None,
        max_rows: int | None = None,
        rng: RNGLike | None = None,
    ) -> _results.DPFloat:
        """Noisy clamped sum (:meth:`DPAccessor.sum`).

        Parameters
        ----------
        epsilon : float
            Privacy budget of this call.
        bounds : (lo, hi)
            Declared range of one value.
        where : str, bool Series or bool array, optional
            Use only the rows satisfying this condition.
        max_rows : int, optional
            Only for the privacy unit's own column (any other Series of data with a
            privacy unit is refused): the most rows one unit may contribute.
        rng : numpy Generator or seed, optional
            For teaching and tests only.

        Returns
        -------
        DPFloat
            The noisy sum.

        Raises
        ------
        PrivacyUnitError
            When the data has a privacy unit and this Series is not its column.

        See Also
        --------
        DPAccessor.sum : The same release.

        Notes
        -----
        The release of :meth:`DPAccessor.sum`: ``epsilon``-DP for one row, sensitivity
        ``max(|lo|, |hi|)``.

        Examples
        --------
        >>> import dpframe
        >>> from dpframe.datasets import census
        >>> df = census(100, rng=0)
        >>> df.dp.set_budget(epsilon=1.0)
        >>> isinstance(df["Age"].dp.sum(epsilon=0.5, bounds=(0, 100)), float)
        True
        """
        where = _validation.where_in_caller(where)
        self._check_unit("sum")
        return self._dp.sum(
            self._name, epsilon=epsilon, bounds=bounds, where=where, max_rows=max_rows, rng=rng
        )

    def mean(
        self,
        *,
        epsilon: PrivacyAmount,
        bounds: Bounds,
        where: Where = None,
        max_rows: int | None = None,
        rng: RNGLike | None = None,
    ) -> _results.DPFloat:
        """Noisy mean (:meth:`DPAccessor.mean`).

        Parameters
        ----------
        epsilon : float
            Privacy budget of this call.
        bounds : (lo, hi)
            Declared range of one value.
        where : str, bool Series or bool array, optional
            Use only the rows satisfying this condition.
        max_rows : int, optional
            Only for the privacy unit's own column (any other Series of data with a
            privacy unit is refused): the most rows one unit may contribute.
        rng : numpy Generator or seed, optional
            For teaching and tests only.

        Returns
        -------
        DPFloat
            The noisy mean.

        Raises
        ------
        PrivacyUnitError
            When the data has a privacy unit and this Series is not its column.

        See Also
        --------
        DPAccessor.mean : The same release.

        Notes
        -----
        The release of :meth:`DPAccessor.mean`: ``epsilon``-DP for one row.

        Examples
        --------
        >>> import dpframe
        >>> from dpframe.datasets import census
        >>> df = census(1000, rng=0)
        >>> df.dp.set_budget(epsilon=1.0)
        >>> 30 < df["Age"].dp.mean(epsilon=0.5, bounds=(0, 100)) < 60
        True
        """
        where = _validation.where_in_caller(where)
        self._check_unit("mean")
        result = self._dp.mean(
            self._name, epsilon=epsilon, bounds=bounds, where=where, max_rows=max_rows, rng=rng
        )
        return _scalar(result)

    def var(
        self,
        *,
        epsilon: PrivacyAmount,
        bounds: Bounds,
        ddof: int = 1,
        where: Where = None,
        max_rows: int | None = None,
        rng: RNGLike | None = None,
    ) -> _results.DPFloat:
        """Noisy variance (:meth:`DPAccessor.var`).

        Parameters
        ----------
        epsilon : float
            Privacy budget of this call.
        bounds : (lo, hi)
            Declared range of one value.
        ddof : int, default 1
            Delta degrees of freedom.
        where : str, bool Series or bool array, optional
            Use only the rows satisfying this condition.
        max_rows : int, optional
            Only for the privacy unit's own column (any other Series of data with a
            privacy unit is refused): the most rows one unit may contribute.
        rng : numpy Generator or seed, optional
            For teaching and tests only.

        Returns
        -------
        DPFloat
            The noisy variance.

        Raises
        ------
        PrivacyUnitError
            When the data has a privacy unit and this Series is not its column.

        See Also
        --------
        DPAccessor.var : The same release.

        Notes
        -----
        The release of :meth:`DPAccessor.var`: ``epsilon``-DP for one row.

        Examples
        --------
        >>> import dpframe
        >>> from dpframe.datasets import census
        >>> df = census(1000, rng=0)
        >>> df.dp.set_budget(epsilon=1.0)
        >>> df["Age"].dp.var(epsilon=0.5, bounds=(0, 100)) >= 0
        True
        """
        where = _validation.where_in_caller(where)
        self._check_unit("var")
        result = self._dp.var(
            self._name, epsilon=epsilon, bounds=bounds, ddof=ddof, where=where,
            max_rows=max_rows, rng=rng,
        )  # fmt: skip
        return _scalar(result)

    def std(
        self,
        *,
        epsilon: PrivacyAmount,
        bounds: Bounds,
        ddof: int = 1,
        where: Where = None,
        max_rows: int | None = None,
        rng: RNGLike | None = None,
    ) -> _results.DPFloat:
        """Noisy standard deviation (:meth:`DPAccessor.std`).

        Parameters
        ----------
        epsilon : float
            Privacy budget of this call.
        bounds : (lo, hi)
            Declared range of one value.
        ddof : int, default 1
            Delta degrees of freedom.
        where : str, bool Series or bool array, optional
            Use only the rows satisfying this condition.
        max_rows : int, optional
            Only for the privacy unit's own column (any other Series of data with a
            privacy unit is refused): the most rows one unit may contribute.
        rng : numpy Generator or seed, optional
            For teaching and tests only.

        Returns
        -------
        DPFloat
            The noisy standard deviation.

        Raises
        ------
        PrivacyUnitError
            When the data has a privacy unit and this Series is not its column.

        See Also
        --------
        DPAccessor.std : The same release.

        Notes
        -----
        The release of :meth:`DPAccessor.std`: ``epsilon``-DP for one row.

        Examples
        --------
        >>> import dpframe
        >>> from dpframe.datasets import census
        >>> df = census(1000, rng=0)
        >>> df.dp.set_budget(epsilon=1.0)
        >>> df["Age"].dp.std(epsilon=0.5, bounds=(0, 100)) >= 0
        True
        """
        where = _validation.where_in_caller(where)
        self._check_unit("std")
        result = self._dp.std(
            self._name, epsilon=epsilon, bounds=bounds, ddof=ddof, where=where,
            max_rows=max_rows, rng=rng,
        )  # fmt: skip
        return _scalar(result)

    def quantile(
        self,
        q: float | Sequence[float] = 0.5,
        *,
        epsilon: PrivacyAmount,
        bounds: Bounds,
        candidates: Sequence[float] | None = None,
        where: Where = None,
        max_rows: int | None = None,
        rng: RNGLike | None = None,
    ) -> _results.DPFloat | pd.Series[float]:
        """Noisy quantile(s) (:meth:`DPAccessor.quantile`).

        Parameters
        ----------
        q : float or list of float, default 0.5
            Quantile(s) in [0, 1].
        epsilon : float
            Privacy budget of this call.
        bounds : (lo, hi)
            Declared range of one value.
        candidates : sequence of float, optional
            The grid the release is chosen from.
        where : str, bool Series or bool array, optional
            Use only the rows satisfying this condition.
        max_rows : int, optional
            Only for the privacy unit's own column (any other Series of data with a
            privacy unit is refused): the most rows one unit may contribute.
        rng : numpy Generator or seed, optional
            For teaching and tests only.

        Returns
        -------
        DPFloat or pandas.Series
            Like ``Series.quantile``: a Series indexed by ``q``, named like this Series.

        Raises
        ------
        PrivacyUnitError
            When the data has a privacy unit and this Series is not its column.

        See Also
        --------
        DPAccessor.quantile : The same release.

        Notes
        -----
        The release of :meth:`DPAccessor.quantile` (report-noisy-max): ``epsilon``-DP for
        one row.

        Examples
        --------
        >>> import dpframe
        >>> from dpframe.datasets import census
        >>> df = census(1000, rng=0)
        >>> df.dp.set_budget(epsilon=1.0)
        >>> list(df["Age"].dp.quantile([0.1, 0.9], epsilon=0.5, bounds=(0, 100)).index)
        [0.1, 0.9]
        """
        where = _validation.where_in_caller(where)
        self._check_unit("quantile")
        result = self._dp.quantile(
            self._name, q, epsilon=epsilon, bounds=bounds, candidates=candidates,
            where=where, max_rows=max_rows, rng=rng,
        )  # fmt: skip
        if isinstance(result, pd.Series):
            return _relabelled(result, self._series_name, result.index.name)
        return result

    def median(
        self,
        *,
        epsilon: PrivacyAmount,
        bounds: Bounds,
        candidates: Sequence[float] | None = None,
        where: Where = None,
        max_rows: int | None = None,
        rng: RNGLike | None = None,
    ) -> _results.DPFloat:
        """Noisy median (:meth:`DPAccessor.median`).

        Parameters
        ----------
        epsilon : float
            Privacy budget of this call.
        bounds : (lo, hi)
            Declared range of one value.
        candidates : sequence of float, optional
            The grid the release is chosen from.
        where : str, bool Series or bool array, optional
            Use only the rows satisfying this condition.
        max_rows : int, optional
            Only for the privacy unit's own column (any other Series of data with a
            privacy unit is refused): the most rows one unit may contribute.
        rng : numpy Generator or seed, optional
            For teaching and tests only.

        Returns
        -------
        DPFloat
            The noisy median.

        Raises
        ------
        PrivacyUnitError
            When the data has a privacy unit and this Series is not its column.

        See Also
        --------
        DPAccessor.median : The same release.

        Notes
        -----
        The release of :meth:`DPAccessor.median` (report-noisy-max): ``epsilon``-DP for
        one row.

        Examples
        --------
        >>> import dpframe
        >>> from dpframe.datasets import census
        >>> df = census(1000, rng=0)
        >>> df.dp.set_budget(epsilon=1.0)
        >>> 30 < df["Age"].dp.median(epsilon=0.5, bounds=(0, 100)) < 60
        True
        """
        where = _validation.where_in_caller(where)
        self._check_unit("median")
        result = self._dp.median(
            self._name, epsilon=epsilon, bounds=bounds, candidates=candidates, where=where,
            max_rows=max_rows, rng=rng,
        )  # fmt: skip
        return _scalar(result)

    def value_counts(
        self,
        *,
        epsilon: PrivacyAmount,
        normalize: bool = False,
        sort: bool = True,
        ascending: bool = False,
        dropna: bool = True,
        nonnegative: bool = False,
        domain: Sequence[object] | None = None,
        where: Where = None,
        max_rows: int | None = None,
        max_groups: int | None = None,
        rng: RNGLike | None = None,
    ) -> pd.Series[float]:
        """Noisy ``value_counts`` over the declared keys (:meth:`DPAccessor.value_counts`).

        Parameters
        ----------
        epsilon : float
            Privacy budget of this call.
        normalize : bool, default False
            Shares instead of counts.
        sort : bool, default True
            Sort by the noisy counts.
        ascending : bool, default False
            Sort order.
        dropna : bool, default True
            Leave out missing keys (``False``: a NaN entry for them).
        nonnegative : bool, default False
            Set negative noisy counts to 0.
        domain : sequence, optional
            The declared keys of this column, for this call.
        where : str, bool Series or bool array, optional
            Count only the rows satisfying this condition.
        max_rows : int, optional
            Only for the privacy unit's own column (any other Series of data with a
            privacy unit is refused): the most rows one unit may add to one key.
        max_groups : int, optional
            With ``max_rows``: the most keys one unit may appear under.
        rng : numpy Generator or seed, optional
            For teaching and tests only.

        Returns
        -------
        pandas.Series
            Like ``Series.value_counts()``, over every declared key; its index is named
            like this Series.

        Raises
        ------
        PrivacyUnitError
            When the data has a privacy unit and this Series is not its column.

        See Also
        --------
        DPAccessor.value_counts : The same release.

        Notes
        -----
        The release of :meth:`DPAccessor.value_counts`: one row is under one key, so the
        counts are ``epsilon``-DP together (parallel composition).

        Examples
        --------
        >>> import dpframe
        >>> from dpframe.datasets import census
        >>> df = census(1000, rng=0)
        >>> df.dp.set_budget(epsilon=1.0)
        >>> len(df["Sex"].dp.value_counts(epsilon=0.5, domain=["M", "F"]))
        2
        """
        where = _validation.where_in_caller(where)
        self._check_unit("value_counts", grouped=True)
        result = self._dp.value_counts(
            self._name, epsilon=epsilon, normalize=normalize, sort=sort, ascending=ascending,
            dropna=dropna, nonnegative=nonnegative, where=where, max_rows=max_rows,
            max_groups=max_groups, rng=rng,
            domain=None if domain is None else {self._name: domain},
        )  # fmt: skip
        return _relabelled(result, result.name, self._series_name)


def _relabelled(
    result: pd.Series[Any], name: Hashable | None, index_name: Hashable | None
) -> pd.Series[Any]:
    """``result`` named like pandas' (post-processing of labels only), metadata kept."""
    if result.name == name and result.index.name == index_name:
        return result
    info = _results.release_info(result)
    out = result.copy()
    out.name = name
    out.index = out.index.rename(index_name)
    _results._tag(out, info)
    return out


def _scalar(result: object) -> _results.DPFloat:
    if not isinstance(result, _results.DPFloat):  # pragma: no cover - no by: a scalar
        raise InvalidParameterTypeError("internal error: an ungrouped release is not a float")
    return result


pd.api.extensions.register_series_accessor("dp")(DPSeriesAccessor)
