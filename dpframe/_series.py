"""``df["wages"].dp``: the ``.dp`` methods that make sense for one column.

Each method is :class:`~dpframe.DPAccessor`'s, on the Series as a one-column frame: the
Series shares its frame's ledger (pandas carries ``attrs`` from ``df`` to ``df["wages"]``
and on to ``to_frame()``), so every release spends the frame's budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from dpframe import _results, _validation
from dpframe._accessor import DPAccessor
from dpframe._ledger import Ledger
from dpframe._typing import Bounds, PrivacyAmount, RNGLike, Where
from dpframe.errors import InvalidParameterTypeError

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
    one row; each method states its sensitivity.

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
        self._name = "values" if series.name is None else series.name
        self._frame = series.to_frame(self._name)

    @property
    def _dp(self) -> DPAccessor:
        return DPAccessor(self._frame)

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
        rng: RNGLike | None = None,
    ) -> _results.DPInt:
        """Noisy number of rows (:meth:`DPAccessor.count`).

        Parameters
        ----------
        epsilon : float
            Privacy budget of this call.
        where : str, bool Series or bool array, optional
            Count only the rows satisfying this condition.
        nonnegative : bool, default False
            Set a negative noisy count to 0.
        rng : numpy Generator or seed, optional
            For teaching and tests only.

        Returns
        -------
        DPInt
            The noisy count.

        See Also
        --------
        DPAccessor.count : The same release.

        Examples
        --------
        >>> import dpframe
        >>> from dpframe.datasets import census
        >>> df = census(100, rng=0)
        >>> df.dp.set_budget(epsilon=1.0)
        >>> isinstance(df["Age"].dp.count(epsilon=0.5), int)
        True
        """
        where = _validation.where_in_caller(where)
        return self._dp.count(epsilon=epsilon, where=where, nonnegative=nonnegative, rng=rng)

    def sum(
        self,
        *,
        epsilon: PrivacyAmount,
        bounds: Bounds,
        where: Where = None,
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
        rng : numpy Generator or seed, optional
            For teaching and tests only.

        Returns
        -------
        DPFloat
            The noisy sum.

        See Also
        --------
        DPAccessor.sum : The same release.

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
        return self._dp.sum(self._name, epsilon=epsilon, bounds=bounds, where=where, rng=rng)

    def mean(
        self,
        *,
        epsilon: PrivacyAmount,
        bounds: Bounds,
        where: Where = None,
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
        rng : numpy Generator or seed, optional
            For teaching and tests only.

        Returns
        -------
        DPFloat
            The noisy mean.

        See Also
        --------
        DPAccessor.mean : The same release.

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
        result = self._dp.mean(self._name, epsilon=epsilon, bounds=bounds, where=where, rng=rng)
        return _scalar(result)

    def var(
        self,
        *,
        epsilon: PrivacyAmount,
        bounds: Bounds,
        ddof: int = 1,
        where: Where = None,
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
        rng : numpy Generator or seed, optional
            For teaching and tests only.

        Returns
        -------
        DPFloat
            The noisy variance.

        See Also
        --------
        DPAccessor.var : The same release.

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
        result = self._dp.var(
            self._name, epsilon=epsilon, bounds=bounds, ddof=ddof, where=where, rng=rng
        )
        return _scalar(result)

    def std(
        self,
        *,
        epsilon: PrivacyAmount,
        bounds: Bounds,
        ddof: int = 1,
        where: Where = None,
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
        rng : numpy Generator or seed, optional
            For teaching and tests only.

        Returns
        -------
        DPFloat
            The noisy standard deviation.

        See Also
        --------
        DPAccessor.std : The same release.

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
        result = self._dp.std(
            self._name, epsilon=epsilon, bounds=bounds, ddof=ddof, where=where, rng=rng
        )
        return _scalar(result)

    def quantile(
        self,
        q: float | Sequence[float] = 0.5,
        *,
        epsilon: PrivacyAmount,
        bounds: Bounds,
        candidates: Sequence[float] | None = None,
        where: Where = None,
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
        rng : numpy Generator or seed, optional
            For teaching and tests only.

        Returns
        -------
        DPFloat or pandas.Series
            Like ``Series.quantile``.

        See Also
        --------
        DPAccessor.quantile : The same release.

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
        return self._dp.quantile(
            self._name, q, epsilon=epsilon, bounds=bounds, candidates=candidates,
            where=where, rng=rng,
        )  # fmt: skip

    def median(
        self,
        *,
        epsilon: PrivacyAmount,
        bounds: Bounds,
        candidates: Sequence[float] | None = None,
        where: Where = None,
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
        rng : numpy Generator or seed, optional
            For teaching and tests only.

        Returns
        -------
        DPFloat
            The noisy median.

        See Also
        --------
        DPAccessor.median : The same release.

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
        result = self._dp.median(
            self._name, epsilon=epsilon, bounds=bounds, candidates=candidates, where=where,
            rng=rng,
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
        rng : numpy Generator or seed, optional
            For teaching and tests only.

        Returns
        -------
        pandas.Series
            Like ``Series.value_counts()``, over every declared key.

        See Also
        --------
        DPAccessor.value_counts : The same release.

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
        return self._dp.value_counts(
            self._name, epsilon=epsilon, normalize=normalize, sort=sort, ascending=ascending,
            dropna=dropna, nonnegative=nonnegative, where=where, rng=rng,
            domain=None if domain is None else {self._name: domain},
        )  # fmt: skip


def _scalar(result: object) -> _results.DPFloat:
    if not isinstance(result, _results.DPFloat):  # pragma: no cover - no by: a scalar
        raise InvalidParameterTypeError("internal error: an ungrouped release is not a float")
    return result


pd.api.extensions.register_series_accessor("dp")(DPSeriesAccessor)
