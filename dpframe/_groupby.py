"""``df.dp.groupby(by)[column].mean(epsilon=..., bounds=...)``: private ``DataFrameGroupBy``.

A thin layer over :class:`~dpframe.DPAccessor`: every method is the accessor's method with
``by=`` (and the grouping's declared ``domain=``) filled in, so the privacy guarantee,
the ledger and the error bars are exactly those of the accessor. Groups come from the
declared domains, never from the data, and every declared group is in the result, seen
or not (pandas' ``observed=False``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from dpframe import _results, _validation
from dpframe._release import JSONValue
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
from dpframe.errors import InvalidParameterError

if TYPE_CHECKING:
    from dpframe._accessor import DPAccessor

__all__ = ["DPGroupBy", "DPSeriesGroupBy"]

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
            The counts over the declared domain.

        See Also
        --------
        DPAccessor.count : The same release.

        Examples
        --------
        >>> import dpframe
        >>> from dpframe.datasets import CENSUS_DOMAINS, census
        >>> df = census(1000, rng=0)
        >>> df.dp.set_budget(epsilon=1.0, domains=CENSUS_DOMAINS)
        >>> len(df.dp.groupby(["Sex", "Married"]).size(epsilon=0.5))
        10
        """
        where = _validation.where_in_caller(where)
        return self._accessor.count(
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
        return self._accessor._count_present(
            self._column, epsilon=epsilon, **self._common(where, max_rows, max_groups, rng)
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
            The counts over the declared domain.

        See Also
        --------
        count : Non-missing values per group.

        Examples
        --------
        >>> import dpframe
        >>> from dpframe.datasets import CENSUS_DOMAINS, census
        >>> df = census(1000, rng=0)
        >>> df.dp.set_budget(epsilon=1.0, domains=CENSUS_DOMAINS)
        >>> df.dp.groupby("Sex")["Age"].size(epsilon=0.5).name
        'count'
        """
        where = _validation.where_in_caller(where)
        return self._accessor.count(
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
            Indexed like ``SeriesGroupBy.quantile``.

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
            The medians over the declared domain.

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

    def agg(
        self,
        functions: Sequence[str],
        *,
        epsilon: PrivacyAmount,
        bounds: Bounds | None = None,
        where: Where = None,
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
        pandas.DataFrame
            One column per statistic, one row per declared group;
            :func:`dpframe.release_info` lists each statistic's release under ``parts``.

        See Also
        --------
        mean, sum : The statistics, one at a time.

        Notes
        -----
        The statistics read the same rows, so their costs add (sequential composition);
        ``epsilon`` is the total. A statistic that fails after others were released
        leaves them charged, as with separate calls.

        Examples
        --------
        >>> import dpframe
        >>> from dpframe.datasets import CENSUS_DOMAINS, census
        >>> df = census(1000, rng=0)
        >>> df.dp.set_budget(epsilon=1.0, domains=CENSUS_DOMAINS)
        >>> table = df.dp.groupby("Sex")["Age"].agg(["count", "mean"], epsilon=0.5, bounds=(0, 100))
        >>> list(table.columns)
        ['count', 'mean']
        """
        where = _validation.where_in_caller(where)
        names = _aggregations(functions, bounds)
        share = _validation.epsilon(epsilon) / len(names)
        self._accessor.ledger.check(_validation.epsilon(epsilon))  # the whole cost, up front
        columns: dict[str, pd.Series[Any]] = {}
        for name in names:
            method = getattr(self, name)
            kwargs: dict[str, Any] = {
                "epsilon": share,
                "where": where,
                "max_rows": max_rows,
                "max_groups": max_groups,
                "rng": rng,
            }
            if _AGGREGATIONS[name]:
                kwargs["bounds"] = bounds
            columns[name] = method(**kwargs)
        table = pd.DataFrame(columns)
        parts: list[JSONValue] = [_results.release_info(s) for s in columns.values()]
        info: dict[str, JSONValue] = {
            "method": "agg",
            "columns": [str(self._column)],
            "statistics": list(columns),
            "epsilon": float(share * len(names)),
            "epsilon_exact": str(share * len(names)),
            "split": {name: float(share) for name in columns},
            "parts": parts,
            "private": all(isinstance(p, dict) and p.get("private") is True for p in parts),
        }
        return _results.frame(table, info)


def _aggregations(functions: object, bounds: object) -> list[str]:
    if isinstance(functions, str) or not isinstance(functions, Sequence) or not functions:
        raise InvalidParameterError(
            f"agg takes a non-empty list of statistic names, e.g. ['count', 'mean'], got "
            f"{functions!r}."
        )
    unknown = [f for f in functions if f not in _AGGREGATIONS]
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


def _as_series(result: object) -> pd.Series[Any]:
    """A grouped release is always a Series (the accessor returns one when ``by`` is set)."""
    if not isinstance(result, pd.Series):  # pragma: no cover - by is always set here
        raise InvalidParameterError("internal error: a grouped release is not a Series")
    return result
