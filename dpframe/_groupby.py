"""``df.dp.groupby(by)[column].mean(epsilon=..., bounds=...)``: private ``DataFrameGroupBy``.

A thin layer over :class:`~dpframe.DPAccessor`: every method is the accessor's method with
``by=`` (and the grouping's declared ``domain=``) filled in, so the privacy guarantee,
the ledger and the error bars are exactly those of the accessor. Groups come from the
declared domains, never from the data, and every declared group is in the result, seen
or not (pandas' ``observed=False``).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from decimal import ROUND_FLOOR, Decimal, localcontext
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dpframe import _plans, _quantiles, _results, _validation
from dpframe._backends import Group, SumGrid
from dpframe._budget import exact_text
from dpframe._composition import RefusedCostError
from dpframe._moments import Statistic
from dpframe._release import JSONValue, Release
from dpframe._typing import (
    Bounds,
    ColumnLabel,
    Columns,
    Domain,
    NoiseKind,
    PrivacyAmount,
    RNGLike,
    Where,
)
from dpframe.errors import BudgetExceededError, DPFrameError, InvalidParameterError

if TYPE_CHECKING:
    from dpframe._accessor import DPAccessor

__all__ = ["DPGroupBy", "DPSeriesGroupBy"]

#: The moments among them, as :func:`dpframe._plans.moment_release` names them.
_MOMENTS: dict[str, Statistic] = {"mean": "mean", "var": "var", "std": "std"}

#: The statistics ``agg`` knows, and whether each needs ``bounds``.
_AGGREGATIONS = {
    "count": False,
    "size": False,
    "sum": True,
    "mean": True,
    "var": True,
    "std": True,
    "median": True,
}


class DPGroupBy:
    """``df.dp.groupby(by)``: select a column with ``[column]``, or count rows with ``size``.

    Parameters
    ----------
    accessor : DPAccessor
        The ``.dp`` accessor of the frame.
    by : column name or list of names
        The grouping columns (their keys come from the declared domains).
    domain : dict, optional
        Declared keys of the grouping columns, for the calls made through this object.

    See Also
    --------
    DPSeriesGroupBy : The statistics of one column per group.

    Examples
    --------
    >>> import dpframe
    >>> from dpframe.datasets import CENSUS_DOMAINS, census
    >>> df = census(1000, rng=0)
    >>> df.dp.set_budget(epsilon=1.0, domains=CENSUS_DOMAINS)
    >>> df.dp.groupby("Sex").size(epsilon=0.5).index.tolist()
    ['M', 'F']
    """

    def __init__(self, accessor: DPAccessor, by: Columns, domain: Domain | None) -> None:
        self._accessor = accessor
        self._by = by
        self._domain = domain

    def __getitem__(self, column: ColumnLabel) -> DPSeriesGroupBy:
        if isinstance(column, list | tuple):
            raise InvalidParameterError(
                "select one column at a time, e.g. df.dp.groupby('Sex')['Earnings']: each "
                "statistic is its own release, with its own epsilon and bounds."
            )
        return DPSeriesGroupBy(self._accessor, self._by, self._domain, column)

    def count(self, *args: Any, **kwargs: Any) -> pd.DataFrame:
        """Refused: pandas' ``df.groupby(by).count()`` counts every column; select one.

        Parameters
        ----------
        *args, **kwargs
            Ignored: the call is refused whatever they are.

        Returns
        -------
        pandas.DataFrame
            Never: the call always raises.

        Raises
        ------
        InvalidParameterError
            Always, naming the two releases that answer the question.

        See Also
        --------
        DPSeriesGroupBy.count : Non-missing values of one column per group.
        size : Rows per group.

        Notes
        -----
        ``DataFrameGroupBy.count()`` counts the non-missing values of each column, and
        each column's counts would be a release of its own, with its own share of the
        budget: dpframe asks for the column, so the cost is visible in the call.

        Examples
        --------
        >>> import dpframe
        >>> from dpframe.datasets import CENSUS_DOMAINS, census
        >>> df = census(100, rng=0)
        >>> df.dp.set_budget(epsilon=1.0, domains=CENSUS_DOMAINS)
        >>> df.dp.groupby("Sex").count(epsilon=0.5)
        Traceback (most recent call last):
        ...
        dpframe.errors.InvalidParameterError: df.dp.groupby(by).count() would count ...
        """
        raise InvalidParameterError(
            "df.dp.groupby(by).count() would count the non-missing values of every column, "
            "each a release of its own; select the column, "
            f"df.dp.groupby({self._by!r})[column].count(epsilon=...), or count the rows "
            f"per group with df.dp.groupby({self._by!r}).size(epsilon=...). Nothing was "
            f"charged."
        )

    def size(
        self,
        *,
        epsilon: PrivacyAmount | None = None,
        where: Where = None,
        noise: NoiseKind = "geometric",
        rho: PrivacyAmount | None = None,
        delta: PrivacyAmount = 0.0,
        max_rows: int | None = None,
        max_groups: int | None = None,
        rng: RNGLike | None = None,
    ) -> pd.Series[int]:
        """Noisy number of rows per group, like ``DataFrameGroupBy.size()``.

        Parameters
        ----------
        epsilon : float
            Privacy budget of this call.
        where : str, bool Series or bool array, optional
            Count only the rows satisfying this condition.
        noise : {"geometric", "gaussian"}, default "geometric"
            Geometric noise (pure epsilon-DP) or discrete Gaussian noise (zCDP), as in
            :meth:`DPAccessor.count`.
        rho : float, optional
            With ``noise="gaussian"``: the zCDP cost (or give ``epsilon`` and ``delta``).
        delta : float, default 0.0
            With ``noise="gaussian"`` and ``epsilon``: the delta of the cost.
        max_rows : int, optional
            Required on a frame with a privacy unit: the most rows one unit may
            contribute to one group (rows beyond it are dropped at random).
        max_groups : int, optional
            Required on a frame with a privacy unit: the most groups one unit may
            contribute to.
        rng : numpy Generator or seed, optional
            For teaching and tests only.

        Returns
        -------
        pandas.Series
            The counts over the declared domain, unnamed like ``df.groupby(by).size()``.

        See Also
        --------
        DPAccessor.count : The same release.

        Notes
        -----
        The release of :meth:`DPAccessor.count` with ``by``: one row is in one group, so
        the whole Series is ``epsilon``-DP (or ``rho``-zCDP) for one row, or for one
        unit with ``max_rows`` and ``max_groups``.

        Examples
        --------
        >>> import dpframe
        >>> from dpframe.datasets import CENSUS_DOMAINS, census
        >>> df = census(1000, rng=0)
        >>> df.dp.set_budget(epsilon=1.0, domains=CENSUS_DOMAINS)
        >>> sizes = df.dp.groupby(["Sex", "Married"]).size(epsilon=0.5)
        >>> len(sizes), sizes.name
        (10, None)
        """
        where = _validation.where_in_caller(where)
        result = self._accessor.count(
            epsilon=epsilon,
            noise=noise,
            rho=rho,
            delta=delta,
            by=self._by,
            where=where,
            domain=self._domain,
            max_rows=max_rows,
            max_groups=max_groups,
            rng=rng,
        )
        return _renamed(result, None)


class DPSeriesGroupBy:
    """``df.dp.groupby(by)[column]``: private ``SeriesGroupBy`` statistics.

    Parameters
    ----------
    accessor : DPAccessor
        The ``.dp`` accessor of the frame.
    by : column name or list of names
        The grouping columns.
    domain : dict, optional
        Declared keys of the grouping columns.
    column : column name
        The column the statistics are of.

    See Also
    --------
    DPGroupBy : Where this comes from.

    Examples
    --------
    >>> import dpframe
    >>> from dpframe.datasets import CENSUS_DOMAINS, census
    >>> df = census(1000, rng=0)
    >>> df.dp.set_budget(epsilon=1.0, domains=CENSUS_DOMAINS)
    >>> df.dp.groupby("Sex")["Age"].mean(epsilon=0.5, bounds=(0, 100)).name
    'Age'
    """

    def __init__(
        self, accessor: DPAccessor, by: Columns, domain: Domain | None, column: ColumnLabel
    ) -> None:
        self._accessor = accessor
        self._by = by
        self._domain = domain
        self._column = column

    def _common(
        self, where: Where, max_rows: int | None, max_groups: int | None, rng: RNGLike | None
    ) -> dict[str, Any]:
        return {
            "by": self._by,
            "domain": self._domain,
            "where": where,
            "max_rows": max_rows,
            "max_groups": max_groups,
            "rng": rng,
        }

    def count(
        self,
        *,
        epsilon: PrivacyAmount,
        where: Where = None,
        max_rows: int | None = None,
        max_groups: int | None = None,
        rng: RNGLike | None = None,
    ) -> pd.Series[int]:
        """Noisy number of non-missing values per group, like ``SeriesGroupBy.count()``.

        Parameters
        ----------
        epsilon : float
            Privacy budget of this call.
        where : str, bool Series or bool array, optional
            Count only the rows satisfying this condition.
        max_rows : int, optional
            Required on a frame with a privacy unit: the most rows one unit may
            contribute to one group (rows beyond it are dropped at random).
        max_groups : int, optional
            Required on a frame with a privacy unit: the most groups one unit may
            contribute to.
        rng : numpy Generator or seed, optional
            For teaching and tests only.

        Returns
        -------
        pandas.Series
            The counts over the declared domain, named after the column.

        See Also
        --------
        DPGroupBy.size : Rows per group, missing values included.

        Examples
        --------
        >>> import dpframe
        >>> from dpframe.datasets import CENSUS_DOMAINS, census
        >>> df = census(1000, rng=0)
        >>> df.dp.set_budget(epsilon=1.0, domains=CENSUS_DOMAINS)
        >>> df.dp.groupby("Sex")["Age"].count(epsilon=0.5).name
        'Age'
        """
        where = _validation.where_in_caller(where)
        return _as_series(
            self._accessor._count_present(
                self._column, epsilon=epsilon, **self._common(where, max_rows, max_groups, rng)
            )
        )

    def size(
        self,
        *,
        epsilon: PrivacyAmount | None = None,
        where: Where = None,
        noise: NoiseKind = "geometric",
        rho: PrivacyAmount | None = None,
        delta: PrivacyAmount = 0.0,
        max_rows: int | None = None,
        max_groups: int | None = None,
        rng: RNGLike | None = None,
    ) -> pd.Series[int]:
        """Noisy number of rows per group, like ``SeriesGroupBy.size()``.

        Parameters
        ----------
        epsilon : float
            Privacy budget of this call.
        where : str, bool Series or bool array, optional
            Count only the rows satisfying this condition.
        noise : {"geometric", "gaussian"}, default "geometric"
            Geometric noise (pure epsilon-DP) or discrete Gaussian noise (zCDP), as in
            :meth:`DPAccessor.count`.
        rho : float, optional
            With ``noise="gaussian"``: the zCDP cost (or give ``epsilon`` and ``delta``).
        delta : float, default 0.0
            With ``noise="gaussian"`` and ``epsilon``: the delta of the cost.
        max_rows : int, optional
            Required on a frame with a privacy unit: the most rows one unit may
            contribute to one group (rows beyond it are dropped at random).
        max_groups : int, optional
            Required on a frame with a privacy unit: the most groups one unit may
            contribute to.
        rng : numpy Generator or seed, optional
            For teaching and tests only.

        Returns
        -------
        pandas.Series
            The counts over the declared domain, named after the column like
            ``df.groupby(by)[column].size()``.

        See Also
        --------
        count : Non-missing values per group.

        Notes
        -----
        The release of :meth:`DPAccessor.count` with ``by``: ``epsilon``-DP (or
        ``rho``-zCDP) for one row, or for one unit with ``max_rows`` and ``max_groups``.

        Examples
        --------
        >>> import dpframe
        >>> from dpframe.datasets import CENSUS_DOMAINS, census
        >>> df = census(1000, rng=0)
        >>> df.dp.set_budget(epsilon=1.0, domains=CENSUS_DOMAINS)
        >>> df.dp.groupby("Sex")["Age"].size(epsilon=0.5).name
        'Age'
        """
        where = _validation.where_in_caller(where)
        result = self._accessor.count(
            epsilon=epsilon,
            noise=noise,
            rho=rho,
            delta=delta,
            by=self._by,
            where=where,
            domain=self._domain,
            max_rows=max_rows,
            max_groups=max_groups,
            rng=rng,
        )
        return _renamed(result, self._column)

    def sum(
        self,
        *,
        epsilon: PrivacyAmount | None = None,
        bounds: Bounds,
        where: Where = None,
        noise: NoiseKind = "geometric",
        rho: PrivacyAmount | None = None,
        delta: PrivacyAmount = 0.0,
        max_rows: int | None = None,
        max_groups: int | None = None,
        rng: RNGLike | None = None,
    ) -> pd.Series[float]:
        """Noisy clamped sum per group (:meth:`DPAccessor.sum` with ``by``).

        Parameters
        ----------
        epsilon : float
            Privacy budget of this call.
        bounds : (lo, hi)
            Declared range of one value.
        where : str, bool Series or bool array, optional
            Use only the rows satisfying this condition.
        noise : {"geometric", "gaussian"}, default "geometric"
            Geometric noise (pure epsilon-DP) or discrete Gaussian noise (zCDP), as in
            :meth:`DPAccessor.count`.
        rho : float, optional
            With ``noise="gaussian"``: the zCDP cost (or give ``epsilon`` and ``delta``).
        delta : float, default 0.0
            With ``noise="gaussian"`` and ``epsilon``: the delta of the cost.
        max_rows : int, optional
            Required on a frame with a privacy unit: the most rows one unit may
            contribute to one group (rows beyond it are dropped at random).
        max_groups : int, optional
            Required on a frame with a privacy unit: the most groups one unit may
            contribute to.
        rng : numpy Generator or seed, optional
            For teaching and tests only.

        Returns
        -------
        pandas.Series
            The sums over the declared domain.

        See Also
        --------
        DPAccessor.sum : The same release.

        Examples
        --------
        >>> import dpframe
        >>> from dpframe.datasets import CENSUS_DOMAINS, census
        >>> df = census(1000, rng=0)
        >>> df.dp.set_budget(epsilon=1.0, domains=CENSUS_DOMAINS)
        >>> len(df.dp.groupby("Sex")["Age"].sum(epsilon=0.5, bounds=(0, 100)))
        2
        """
        where = _validation.where_in_caller(where)
        result = self._accessor.sum(
            self._column,
            epsilon=epsilon,
            noise=noise,
            rho=rho,
            delta=delta,
            bounds=bounds,
            **self._common(where, max_rows, max_groups, rng),
        )
        return _as_series(result)

    def mean(
        self,
        *,
        epsilon: PrivacyAmount | None = None,
        bounds: Bounds,
        where: Where = None,
        noise: NoiseKind = "geometric",
        rho: PrivacyAmount | None = None,
        delta: PrivacyAmount = 0.0,
        max_rows: int | None = None,
        max_groups: int | None = None,
        rng: RNGLike | None = None,
    ) -> pd.Series[float]:
        """Noisy mean per group (:meth:`DPAccessor.mean` with ``by``).

        Parameters
        ----------
        epsilon : float
            Privacy budget of this call.
        bounds : (lo, hi)
            Declared range of one value.
        where : str, bool Series or bool array, optional
            Use only the rows satisfying this condition.
        noise : {"geometric", "gaussian"}, default "geometric"
            Geometric noise (pure epsilon-DP) or discrete Gaussian noise (zCDP), as in
            :meth:`DPAccessor.mean`.
        rho : float, optional
            With ``noise="gaussian"``: the zCDP cost (or give ``epsilon`` and ``delta``).
        delta : float, default 0.0
            With ``noise="gaussian"`` and ``epsilon``: the delta of the cost.
        max_rows : int, optional
            Required on a frame with a privacy unit: the most rows one unit may
            contribute to one group (rows beyond it are dropped at random).
        max_groups : int, optional
            Required on a frame with a privacy unit: the most groups one unit may
            contribute to.
        rng : numpy Generator or seed, optional
            For teaching and tests only.

        Returns
        -------
        pandas.Series
            The means over the declared domain.

        See Also
        --------
        DPAccessor.mean : The same release.

        Examples
        --------
        >>> import dpframe
        >>> from dpframe.datasets import CENSUS_DOMAINS, census
        >>> df = census(1000, rng=0)
        >>> df.dp.set_budget(epsilon=1.0, domains=CENSUS_DOMAINS)
        >>> len(df.dp.groupby("Sex")["Age"].mean(epsilon=0.5, bounds=(0, 100)))
        2
        """
        where = _validation.where_in_caller(where)
        result = self._accessor.mean(
            self._column,
            epsilon=epsilon,
            noise=noise,
            rho=rho,
            delta=delta,
            bounds=bounds,
            **self._common(where, max_rows, max_groups, rng),
        )
        return _as_series(result)

    def var(
        self,
        *,
        epsilon: PrivacyAmount | None = None,
        bounds: Bounds,
        ddof: int = 1,
        where: Where = None,
        noise: NoiseKind = "geometric",
        rho: PrivacyAmount | None = None,
        delta: PrivacyAmount = 0.0,
        max_rows: int | None = None,
        max_groups: int | None = None,
        rng: RNGLike | None = None,
    ) -> pd.Series[float]:
        """Noisy variance per group (:meth:`DPAccessor.var` with ``by``).

        Parameters
        ----------
        epsilon : float
            Privacy budget of this call.
        bounds : (lo, hi)
            Declared range of one value.
        ddof : int, default 1
            Delta degrees of freedom, as in pandas.
        where : str, bool Series or bool array, optional
            Use only the rows satisfying this condition.
        noise : {"geometric", "gaussian"}, default "geometric"
            Geometric noise (pure epsilon-DP) or discrete Gaussian noise (zCDP), as in
            :meth:`DPAccessor.mean`.
        rho : float, optional
            With ``noise="gaussian"``: the zCDP cost (or give ``epsilon`` and ``delta``).
        delta : float, default 0.0
            With ``noise="gaussian"`` and ``epsilon``: the delta of the cost.
        max_rows : int, optional
            Required on a frame with a privacy unit: the most rows one unit may
            contribute to one group (rows beyond it are dropped at random).
        max_groups : int, optional
            Required on a frame with a privacy unit: the most groups one unit may
            contribute to.
        rng : numpy Generator or seed, optional
            For teaching and tests only.

        Returns
        -------
        pandas.Series
            The variances over the declared domain.

        See Also
        --------
        DPAccessor.var : The same release.

        Examples
        --------
        >>> import dpframe
        >>> from dpframe.datasets import CENSUS_DOMAINS, census
        >>> df = census(1000, rng=0)
        >>> df.dp.set_budget(epsilon=1.0, domains=CENSUS_DOMAINS)
        >>> len(df.dp.groupby("Sex")["Age"].var(epsilon=0.5, bounds=(0, 100)))
        2
        """
        where = _validation.where_in_caller(where)
        result = self._accessor.var(
            self._column,
            epsilon=epsilon,
            noise=noise,
            rho=rho,
            delta=delta,
            bounds=bounds,
            ddof=ddof,
            **self._common(where, max_rows, max_groups, rng),
        )
        return _as_series(result)

    def std(
        self,
        *,
        epsilon: PrivacyAmount | None = None,
        bounds: Bounds,
        ddof: int = 1,
        where: Where = None,
        noise: NoiseKind = "geometric",
        rho: PrivacyAmount | None = None,
        delta: PrivacyAmount = 0.0,
        max_rows: int | None = None,
        max_groups: int | None = None,
        rng: RNGLike | None = None,
    ) -> pd.Series[float]:
        """Noisy standard deviation per group (:meth:`DPAccessor.std` with ``by``).

        Parameters
        ----------
        epsilon : float
            Privacy budget of this call.
        bounds : (lo, hi)
            Declared range of one value.
        ddof : int, default 1
            Delta degrees of freedom, as in pandas.
        where : str, bool Series or bool array, optional
            Use only the rows satisfying this condition.
        noise : {"geometric", "gaussian"}, default "geometric"
            Geometric noise (pure epsilon-DP) or discrete Gaussian noise (zCDP), as in
            :meth:`DPAccessor.mean`.
        rho : float, optional
            With ``noise="gaussian"``: the zCDP cost (or give ``epsilon`` and ``delta``).
        delta : float, default 0.0
            With ``noise="gaussian"`` and ``epsilon``: the delta of the cost.
        max_rows : int, optional
            Required on a frame with a privacy unit: the most rows one unit may
            contribute to one group (rows beyond it are dropped at random).
        max_groups : int, optional
            Required on a frame with a privacy unit: the most groups one unit may
            contribute to.
        rng : numpy Generator or seed, optional
            For teaching and tests only.

        Returns
        -------
        pandas.Series
            The standard deviations over the declared domain.

        See Also
        --------
        DPAccessor.std : The same release.

        Examples
        --------
        >>> import dpframe
        >>> from dpframe.datasets import CENSUS_DOMAINS, census
        >>> df = census(1000, rng=0)
        >>> df.dp.set_budget(epsilon=1.0, domains=CENSUS_DOMAINS)
        >>> len(df.dp.groupby("Sex")["Age"].std(epsilon=0.5, bounds=(0, 100)))
        2
        """
        where = _validation.where_in_caller(where)
        result = self._accessor.std(
            self._column,
            epsilon=epsilon,
            noise=noise,
            rho=rho,
            delta=delta,
            bounds=bounds,
            ddof=ddof,
            **self._common(where, max_rows, max_groups, rng),
        )
        return _as_series(result)

    def quantile(
        self,
        q: float | Sequence[float] = 0.5,
        *,
        epsilon: PrivacyAmount,
        bounds: Bounds,
        candidates: Sequence[float] | None = None,
        where: Where = None,
        max_rows: int | None = None,
        max_groups: int | None = None,
        rng: RNGLike | None = None,
    ) -> pd.Series[float]:
        """Noisy quantile(s) per group (:meth:`DPAccessor.quantile` with ``by``).

        Parameters
        ----------
        q : float or list of float, default 0.5
            Quantile(s) in [0, 1].
        epsilon : float
            Privacy budget of this call.
        bounds : (lo, hi)
            Declared range of one value.
        candidates : sequence of float, optional
            The grid the releases are chosen from.
        where : str, bool Series or bool array, optional
            Use only the rows satisfying this condition.
        max_rows : int, optional
            Required on a frame with a privacy unit: the most rows one unit may
            contribute to one group (rows beyond it are dropped at random).
        max_groups : int, optional
            Required on a frame with a privacy unit: the most groups one unit may
            contribute to.
        rng : numpy Generator or seed, optional
            For teaching and tests only.

        Returns
        -------
        pandas.Series
            Indexed like ``SeriesGroupBy.quantile``. Unlike pandas (NaN), a group with
            no rows gets a value too, drawn uniformly from the candidates, and its rank
            bar says nothing of it: a quantile spends nothing on a count that could tell
            an empty group. Release the counts (:meth:`count`) when it matters.

        See Also
        --------
        DPAccessor.quantile : The same release.

        Examples
        --------
        >>> import dpframe
        >>> from dpframe.datasets import CENSUS_DOMAINS, census
        >>> df = census(1000, rng=0)
        >>> df.dp.set_budget(epsilon=1.0, domains=CENSUS_DOMAINS)
        >>> len(df.dp.groupby("Sex")["Age"].quantile(0.5, epsilon=0.5, bounds=(0, 100)))
        2
        """
        where = _validation.where_in_caller(where)
        result = self._accessor.quantile(
            self._column,
            q,
            epsilon=epsilon,
            bounds=bounds,
            candidates=candidates,
            **self._common(where, max_rows, max_groups, rng),
        )
        return _as_series(result)

    def median(
        self,
        *,
        epsilon: PrivacyAmount,
        bounds: Bounds,
        candidates: Sequence[float] | None = None,
        where: Where = None,
        max_rows: int | None = None,
        max_groups: int | None = None,
        rng: RNGLike | None = None,
    ) -> pd.Series[float]:
        """Noisy median per group: :meth:`quantile` at 0.5.

        Parameters
        ----------
        epsilon : float
            Privacy budget of this call.
        bounds : (lo, hi)
            Declared range of one value.
        candidates : sequence of float, optional
            The grid the releases are chosen from.
        where : str, bool Series or bool array, optional
            Use only the rows satisfying this condition.
        max_rows : int, optional
            Required on a frame with a privacy unit: the most rows one unit may
            contribute to one group (rows beyond it are dropped at random).
        max_groups : int, optional
            Required on a frame with a privacy unit: the most groups one unit may
            contribute to.
        rng : numpy Generator or seed, optional
            For teaching and tests only.

        Returns
        -------
        pandas.Series
            The medians over the declared domain; a group with no rows gets one too,
            uniform over the candidates (see :meth:`quantile`).

        See Also
        --------
        quantile : Any quantile.

        Examples
        --------
        >>> import dpframe
        >>> from dpframe.datasets import CENSUS_DOMAINS, census
        >>> df = census(1000, rng=0)
        >>> df.dp.set_budget(epsilon=1.0, domains=CENSUS_DOMAINS)
        >>> len(df.dp.groupby("Sex")["Age"].median(epsilon=0.5, bounds=(0, 100)))
        2
        """
        where = _validation.where_in_caller(where)
        return self.quantile(
            0.5,
            epsilon=epsilon,
            bounds=bounds,
            candidates=candidates,
            where=where,
            max_rows=max_rows,
            max_groups=max_groups,
            rng=rng,
        )

    @_validation.in_call_terms
    def agg(
        self,
        functions: Sequence[str],
        *,
        epsilon: PrivacyAmount | None = None,
        bounds: Bounds | None = None,
        candidates: Sequence[float] | None = None,
        where: Where = None,
        noise: NoiseKind = "geometric",
        rho: PrivacyAmount | None = None,
        delta: PrivacyAmount = 0.0,
        max_rows: int | None = None,
        max_groups: int | None = None,
        rng: RNGLike | None = None,
    ) -> pd.DataFrame:
        """Several statistics per group, like ``SeriesGroupBy.agg([...])``.

        Parameters
        ----------
        functions : list of str
            Among ``"count"``, ``"size"``, ``"sum"``, ``"mean"``, ``"var"``, ``"std"``,
            ``"median"``.
        epsilon : float
            Privacy budget of the whole call, split evenly between the statistics
            (exactly, as fractions): each is its own release on the same rows.
        bounds : (lo, hi), optional
            Declared range of one value, needed by every statistic but the counts.
        candidates : sequence of float, optional
            The grid ``"median"`` is chosen from (as in :meth:`median`).
        where : str, bool Series or bool array, optional
            Use only the rows satisfying this condition.
        noise : {"geometric", "gaussian"}, default "geometric"
            Geometric noise (pure epsilon-DP) or discrete Gaussian noise (zCDP) for every
            statistic; ``"count"`` and ``"median"`` take geometric noise only.
        rho : float, optional
            With ``noise="gaussian"``: the zCDP cost of the whole call, split evenly
            between the statistics (or give ``epsilon`` and ``delta``).
        delta : float, default 0.0
            With ``noise="gaussian"`` and ``epsilon``: the delta of the whole cost.
        max_rows : int, optional
            Required on a frame with a privacy unit: the most rows one unit may
            contribute to one group (rows beyond it are dropped at random).
        max_groups : int, optional
            Required on a frame with a privacy unit: the most groups one unit may
            contribute to.
        rng : numpy Generator or seed, optional
            For teaching and tests only (one generator serves every statistic).

        Returns
        -------
        pandas.DataFrame
            One column per statistic, one row per declared group;
            :func:`dpframe.release_info` lists each statistic's release under ``parts``.
            A mean, variance or deviation is NaN where its own noisy count is too small,
            as pandas gives NaN for an empty group; a median never is (see
            :meth:`quantile`): read it beside the group's ``"count"``.

        Raises
        ------
        InvalidParameterError, InvalidParameterTypeError
            For a bad parameter of any statistic (nothing is charged).
        BudgetExceededError
            When the statistics together do not fit in what remains (nothing is charged).

        See Also
        --------
        mean, sum : The statistics, one at a time.

        Notes
        -----
        The statistics read the same rows, so their costs add (sequential composition);
        ``epsilon`` (or ``rho``) is the total, and the call is ``epsilon``-DP (or
        ``rho``-zCDP). Every parameter of every statistic is checked, and the plan of
        each release built, before the first is drawn; then the ledger checks the
        statistics one after the other, each as its own release (on a zCDP budget each
        pure statistic of ``epsilon / k`` counts ``(epsilon / k)**2 / 2``, not the whole
        ``epsilon**2 / 2``), so a refused call charges nothing and draws nothing.

        Examples
        --------
        >>> import dpframe
        >>> from dpframe.datasets import CENSUS_DOMAINS, census
        >>> df = census(1000, rng=0)
        >>> df.dp.set_budget(epsilon=1.0, domains=CENSUS_DOMAINS)
        >>> table = df.dp.groupby("Sex")["Age"].agg(["count", "mean"], epsilon=0.5, bounds=(0, 100))
        >>> list(table.columns)
        ['count', 'mean']
        >>> df.dp.groupby("Sex")["Age"].agg(["mean", "median"], epsilon=0.6, bounds=(0, 100))
        Traceback (most recent call last):
        ...
        dpframe.errors.BudgetExceededError: agg releases 2 statistics ...
        >>> float(df.dp.ledger.remaining.epsilon)
        0.5
        """
        where = _validation.where_in_caller(where)
        names = _aggregations(functions, bounds)
        generator = _validation.rng(rng)
        plan = self._agg_plan(
            names, epsilon, bounds, candidates, where, noise, rho, delta, max_rows, max_groups,
            generator,
        )  # fmt: skip
        columns: dict[str, pd.Series[Any]] = {}
        # The ledger is held from the check to the last statistic: another thread's release
        # cannot take the budget between them (leaving the call half charged).
        with self._accessor.ledger.held():
            _check_agg_cost(self._accessor, plan)
            for name in names:
                method = getattr(self, name)
                kwargs: dict[str, Any] = {
                    "where": where,
                    "max_rows": max_rows,
                    "max_groups": max_groups,
                    "rng": generator,
                }
                if plan.gaussian:
                    kwargs.update(noise="gaussian", rho=plan.share)
                else:
                    kwargs["epsilon"] = plan.share
                if _AGGREGATIONS[name]:
                    kwargs["bounds"] = bounds
                if name == "median" and candidates is not None:
                    kwargs["candidates"] = candidates
                columns[name] = method(**kwargs)
        table = pd.DataFrame(columns)
        parts: list[JSONValue] = [_results.release_info(s) for s in columns.values()]
        share = plan.share
        measure = "rho" if plan.gaussian else "epsilon"
        info: dict[str, JSONValue] = {
            "method": "agg",
            "columns": [str(self._column)],
            "statistics": list(columns),
            measure: float(share * len(names)),
            f"{measure}_exact": str(share * len(names)),
            "split": {name: float(share) for name in columns},
            "parts": parts,
            "private": all(isinstance(p, dict) and p.get("private") is True for p in parts),
        }
        return _results.frame(table, info)

    def _agg_plan(
        self,
        names: Sequence[str],
        epsilon: PrivacyAmount | None,
        bounds: Bounds | None,
        candidates: Sequence[float] | None,
        where: Where,
        noise: NoiseKind,
        rho: PrivacyAmount | None,
        delta: PrivacyAmount,
        max_rows: int | None,
        max_groups: int | None,
        generator: np.random.Generator | None,
    ) -> _AggPlan:
        """Check every parameter of every statistic of ``agg`` and plan each release.

        The same validators and plans as the accessor's methods, run before anything is
        drawn: a statistic that would refuse its share refuses the whole call here.
        """
        accessor = self._accessor
        gaussian = accessor._gaussian(noise, epsilon, delta, rho, False, "agg")
        if gaussian is None and _validation.delta(delta):
            raise InvalidParameterError(
                "delta is the delta of a Gaussian cost given as epsilon and delta; "
                "geometric noise is pure epsilon-DP: drop delta, or pass noise='gaussian'."
            )
        geometric_only = [name for name in names if name in ("count", "median")]
        if gaussian is not None and geometric_only:
            raise InvalidParameterError(
                f"agg with noise='gaussian' cannot release {geometric_only!r}: 'count' (of "
                f"non-missing values) and 'median' (report-noisy-max) take geometric noise "
                f"only. Use 'size' for rows per group, or release {geometric_only!r} in "
                f"a call of their own with epsilon=."
            )
        checked = None if bounds is None else _validation.sum_bounds(bounds)
        grid = None
        if candidates is not None:
            if "median" not in names or checked is None:
                raise InvalidParameterError(
                    "candidates is the grid 'median' is chosen from; agg lists no median: "
                    "drop candidates."
                )
            grid, _ = _quantiles.candidate_cells(checked, candidates)
        if any(name != "size" for name in names):
            accessor._backend.numeric_column(self._column, "column")
        groups = accessor._groups(self._by, self._domain, "by")
        contribution = accessor._contribution(
            f"groupby({self._by!r})[{self._column!r}].agg", max_rows, max_groups, True
        )
        accessor._backend.rows(where)  # checks where= against the frame
        count = len(names)
        share = None if gaussian is not None else _validation.epsilon(epsilon) / count
        part_cost = None if gaussian is None else _plans.Gaussian(gaussian.rho / count, None)
        parts: list[Release] = []
        for name in names:
            try:
                parts += self._plan_part(
                    name, groups, where, generator, contribution, checked, grid, share, part_cost
                )
            except DPFrameError as refused:
                if count == 1:
                    raise
                what = "rho" if part_cost is not None else "epsilon"
                raise type(refused)(
                    f"agg splits {what} evenly between its {count} statistics; for "
                    f"{name!r}: {refused}"
                ) from None
        if part_cost is not None:
            return _AggPlan(count, part_cost.rho, gaussian=True, parts=tuple(parts))
        return _AggPlan(count, share or Fraction(0), gaussian=False, parts=tuple(parts))

    def _plan_part(
        self,
        name: str,
        groups: Sequence[Group],
        where: Where,
        generator: np.random.Generator | None,
        contribution: _plans.Contribution,
        checked: tuple[float, float] | None,
        grid: NDArray[np.float64] | None,
        share: Fraction | None,
        part_cost: _plans.Gaussian | None,
    ) -> tuple[Release, ...]:
        """Plan one statistic of ``agg`` at its share: the releases it will charge, in
        order, as charged (a refused one raises)."""
        accessor = self._accessor
        scope = accessor._scope(name, [self._column], groups, where, generator)
        if part_cost is not None:
            sums = None if checked is None else SumGrid.for_bounds(*checked)
            if name in ("size", "sum"):
                return (_plans.gaussian_release(scope, part_cost, contribution, grid=sums)[0],)
            if checked is None:  # pragma: no cover - _aggregations asks for bounds
                raise InvalidParameterError("internal error: agg without bounds")
            moment = (part_cost, contribution)
            return _plans.moment_release(
                scope, _MOMENTS[name], Fraction(0), checked, 1, moment
            ).parts
        per_row = contribution.noise_epsilon(share or Fraction(0))
        if name in ("count", "size"):
            release = _plans.count_release(scope, per_row)
        elif checked is None:  # pragma: no cover - _aggregations asks for bounds
            raise InvalidParameterError("internal error: agg without bounds")
        elif name == "sum":
            _plans.check_sum_epsilon(per_row)
            release = _plans.sum_release(scope, per_row, SumGrid.for_bounds(*checked))
        elif name == "median":
            release = _plans.quantile_release(scope, per_row, 0.5, checked, grid)
        else:
            moment_parts = _plans.moment_release(scope, _MOMENTS[name], per_row, checked, 1).parts
            return tuple(contribution.charged(part) for part in moment_parts)
        return (contribution.charged(release),)


@dataclass(frozen=True)
class _AggPlan:
    """What ``agg`` releases: ``count`` statistics, each at ``share`` (a rho if ``gaussian``)."""

    count: int
    share: Fraction
    gaussian: bool
    #: Every release the statistics will charge, in order, as charged (moments per part).
    parts: tuple[Release, ...]


def _check_agg_cost(accessor: DPAccessor, plan: _AggPlan) -> None:
    """Refuse, charging nothing, an ``agg`` whose statistics do not all fit in the budget.

    The ledger checks each statistic as a release of its own (:meth:`Ledger.transaction`),
    so price exactly that sequence: before the first zCDP release of an (epsilon,
    delta) budget, pure statistics add their epsilon; in a zCDP account (a rho budget,
    or after the first zCDP release), each pure release costs ``e**2 / 2`` for its own
    ``e`` (a mean's parts are releases of their own, as its transaction charges them);
    zCDP statistics add their rho in both cases (the first opens the account, which
    holds the sum).
    """
    ledger = accessor.ledger
    share = plan.share
    if plan.gaussian:
        ledger.check(rho=share * plan.count)
        return
    total = share * plan.count
    left = ledger.remaining
    # On a zCDP account each pure release of epsilon e counts e**2 / 2: a mean's two
    # parts of share / 2 count 2 (share / 2)**2 / 2, less than its share's share**2 / 2.
    counted_rho = sum((part.epsilon**2 / 2 for part in plan.parts), Fraction(0))
    try:
        if left.rho is None:  # basic composition (or unlimited): the epsilons add
            ledger.check(total)
        else:
            ledger.check(rho=counted_rho)
    except RefusedCostError as error:
        if left.rho is None:
            most = exact_text(left.epsilon if left.epsilon is not None else Fraction(0))
            counted = ""
        else:
            # the cost grows as epsilon**2: the largest total is total * sqrt(left / counted)
            most = _largest_epsilon_text(Fraction(left.rho) * total * total / (2 * counted_rho))
            counted = (
                f" (on a zCDP account each pure release of epsilon e counts as e**2/2, "
                f"{exact_text(counted_rho)} in all)"
            )
        raise BudgetExceededError(
            f"agg releases {plan.count} statistics at epsilon={exact_text(share)} each "
            f"(epsilon={exact_text(total)} in all){counted}, but {error.reason}. Nothing "
            f"was charged. Ask for epsilon <= {most} for the whole agg, or release fewer "
            f"statistics; a budget, once set, cannot be raised."
        ) from error


def _largest_epsilon_text(rho: Fraction) -> str:
    """``sqrt(2 * rho)`` rounded down to 6 significant digits, as text.

    With ``rho = left / c``: the largest total epsilon of pure releases whose zCDP cost
    ``c * epsilon**2`` (each a fixed fraction of the total) fits ``left``.
    """
    value = rho
    if value <= 0:
        return "0"
    with localcontext() as ctx:
        ctx.prec = 30
        ctx.rounding = ROUND_FLOOR
        root = (2 * Decimal(value.numerator) / Decimal(value.denominator)).sqrt()
        shown = root.quantize(Decimal(1).scaleb(root.adjusted() - 5), rounding=ROUND_FLOOR)
    return f"{shown.normalize():f}"


def _aggregations(functions: object, bounds: object) -> list[str]:
    if isinstance(functions, str) or not isinstance(functions, Sequence) or not functions:
        raise InvalidParameterError(
            f"agg takes a non-empty list of statistic names, e.g. ['count', 'mean'], got "
            f"{functions!r}."
        )
    unknown = [f for f in functions if not isinstance(f, str) or f not in _AGGREGATIONS]
    if unknown:
        raise InvalidParameterError(
            f"agg cannot release {unknown!r}; it knows {sorted(_AGGREGATIONS)!r} (min and max "
            f"are single values of single people: no useful private release exists)."
        )
    if len(set(functions)) != len(functions):
        raise InvalidParameterError(f"agg lists a statistic twice: {list(functions)!r}.")
    if bounds is None and any(_AGGREGATIONS[f] for f in functions):
        raise InvalidParameterError(
            "agg needs bounds=(lo, hi), the declared range of one value, for "
            f"{[f for f in functions if _AGGREGATIONS[f]]!r}."
        )
    return list(functions)


def _renamed(result: pd.Series[Any], name: Hashable | None) -> pd.Series[Any]:
    """A released Series under pandas' name, its release metadata kept (post-processing)."""
    if result.name == name:
        return result
    info = _results.release_info(result)
    out = result.copy()
    out.name = name
    _results._tag(out, info)
    return out


def _as_series(result: object) -> pd.Series[Any]:
    """A grouped release is always a Series (the accessor returns one when ``by`` is set)."""
    if not isinstance(result, pd.Series):  # pragma: no cover - by is always set here
        raise InvalidParameterError("internal error: a grouped release is not a Series")
    return result
