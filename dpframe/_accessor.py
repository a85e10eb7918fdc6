"""The ``.dp`` accessor: drop-in differentially private pandas, one thin method per release.

Every method reads top to bottom, in the same five steps:

1. **validate** every argument (:mod:`dpframe._validation`, and the frame's schema through
   its backend, :mod:`dpframe._backends`), and build the release's plan
   (:mod:`dpframe._plans`: cost, error bars), before anything else;
2. open a **ledger transaction** (:meth:`dpframe.Ledger.transaction`): the whole cost is
   checked on entry, so a refused call charges nothing and draws nothing;
3. **aggregate** exactly on the declared domains (the backend's ``Rows``);
4. **add noise** with a public mechanism of :mod:`dpframe.mechanisms` (the only place
   noise is drawn), and tell the transaction (``spending.drawn(...)``), which charges
   every drawn part on exit;
5. **wrap** the result with its metadata (:mod:`dpframe._results`, :mod:`dpframe._tables`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Literal, overload

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from dpframe import (
    _attrs,
    _decisions,
    _moments,
    _plans,
    _quantiles,
    _results,
    _tables,
    _validation,
    mechanisms,
)
from dpframe._backends import Backend, Group, Rows, SumGrid, backend_for
from dpframe._budget import budget_rho
from dpframe._groupby import DPGroupBy
from dpframe._ledger import Ledger, encode_key
from dpframe._moments import Statistic
from dpframe._release import JSONValue, Release, call_metadata
from dpframe._typing import (
    AutoBounds,
    Bounds,
    ColumnLabel,
    Columns,
    DecisionMethod,
    Domain,
    NoiseKind,
    Normalize,
    PrivacyAmount,
    RNGLike,
    Where,
)
from dpframe.errors import (
    DomainError,
    InvalidParameterError,
    InvalidParameterTypeError,
    LedgerConflictError,
    PrivacyUnitError,
)

if TYPE_CHECKING:
    import dask.dataframe as dd

__all__ = ["DPAccessor", "dp"]


def _noisy_parts(
    moment: _plans.MomentRelease,
    exact: Sequence[NDArray[Any]],
    rng: np.random.Generator | None,
) -> list[NDArray[np.float64]]:
    """Each part of a moment (count, centred sums) plus its geometric noise, in its units."""
    return [
        _noisy_units(np.asarray(table).reshape(-1), grid, rng, epsilon=part.epsilon)
        if part.rho is None
        else _noisy_units(
            np.asarray(table).reshape(-1), grid, rng, rho=part.rho, squared=part.sensitivity_squared
        )
        for part, grid, table in zip(moment.plan.parts, moment.grids, exact, strict=True)
    ]


def _where_text(where: Where) -> str | None:
    """How the filter is recorded: the expression, or what kind of mask it was."""
    if where is None or isinstance(where, str):
        return where
    if isinstance(where, pd.Series) or type(where).__name__ == "Series":  # Dask's too
        return "a boolean Series"
    return "a boolean array"


def _exact_sums(
    rows: Rows, column: ColumnLabel, grid: SumGrid, groups: Sequence[Group]
) -> NDArray[Any]:
    """Exact grid sums, flat: one per cell of ``groups``, or one."""
    if groups:
        return rows.sum_table(column, grid, groups).reshape(-1)
    return np.array([rows.sum(column, grid)], dtype=object)


def _sum_result(
    noisy: NDArray[np.float64],
    groups: Sequence[Group],
    chosen: slice | NDArray[np.bool_],
    column: ColumnLabel,
    info: dict[str, JSONValue],
) -> _results.DPFloat | pd.Series[Any]:
    """A released sum: a float, or a Series over the groups' (chosen) keys."""
    if not groups:
        return _results.real(float(noisy[0]), info)
    return _results.series(noisy, _tables.released_labels(groups, chosen), column, info)


def _noisy_units(
    exact: NDArray[Any],
    grid: SumGrid,
    rng: np.random.Generator | None,
    *,
    epsilon: Fraction | None = None,
    rho: Fraction | None = None,
    squared: int = 1,
) -> NDArray[np.float64]:
    """Exact grid sums plus noise, in the column's units (floats).

    Geometric noise at ``epsilon`` (L1 sensitivity ``grid.sensitivity_units`` steps), or
    discrete Gaussian noise at ``rho`` with squared L2 sensitivity ``squared`` steps². The
    noise is drawn for zeros and added to the exact integers afterwards, so sums of any
    size (Python integers past int64) are released without refusal.
    """
    zeros = np.zeros(exact.shape, dtype=np.int64)
    if rho is not None:
        noise = mechanisms.discrete_gaussian(zeros, rho=rho, sensitivity_squared=squared, rng=rng)
    elif epsilon is not None:
        noise = mechanisms.geometric(
            zeros, epsilon=epsilon, sensitivity=grid.sensitivity_units, rng=rng
        )
    else:  # pragma: no cover - every caller passes one
        raise InvalidParameterError("internal error: noise without a cost")
    # int64 exact sums stay below 2**62 and the noise below 2**62: the sum cannot wrap.
    noisy = exact + noise if exact.dtype == np.int64 else exact + noise.astype(object)
    return np.asarray(noisy.astype(np.float64) * grid.step)


class DPAccessor:
    """Differentially private versions of pandas aggregations: ``df.dp``.

    ``import dpframe`` registers this accessor on every pandas DataFrame (and on Dask
    DataFrames as soon as ``dask.dataframe`` is imported). For code checked with mypy,
    :func:`dpframe.dp` returns the same object with full type information.

    Every release spends privacy budget from the frame's :class:`~dpframe.Ledger`, which
    belongs to the data: frames derived from this one (copies, filters, column
    selections, ...) spend the same budget. A frame whose data has no budget is refused:
    call :meth:`set_budget` first.

    Parameters
    ----------
    frame : pandas.DataFrame or dask.dataframe.DataFrame
        The data to release from.

    See Also
    --------
    dp : The same accessor, typed for mypy.
    release_info : The metadata of a release.

    Notes
    -----
    Neighbouring data sets differ by one row, added or removed; each row is assumed to
    belong to a different person (see the README's threat model). With a privacy unit
    (``set_budget(..., privacy_unit="person_id")``) they differ by all the rows of one
    unit instead: every release then takes ``max_rows`` (and, when grouped,
    ``max_groups``), keeps at most that many rows per unit at random, and draws each
    mechanism at ``epsilon / (max_rows * max_groups)`` per row, which is ``epsilon``-DP
    per unit. Every method states its sensitivity and mechanism in its own Notes.

    Examples
    --------
    >>> import dpframe
    >>> from dpframe.datasets import CENSUS_DOMAINS, census
    >>> df = census(1000, rng=0)
    >>> df.dp.set_budget(epsilon=1.0, domains=CENSUS_DOMAINS)
    >>> table = df.dp.crosstab("Occupation", "Sex", epsilon=0.5)
    >>> table.shape
    (5, 2)
    >>> float(df.dp.ledger.remaining.epsilon)
    0.5
    """

    def __init__(self, frame: pd.DataFrame | dd.DataFrame) -> None:
        self._frame = frame
        self._backend: Backend = backend_for(frame)

    # ------------------------------------------------------------ the budget

    @property
    def ledger(self) -> Ledger:
        """The ledger of this frame's data: total, spent, remaining and the history of releases.

        See Also
        --------
        set_budget : Set the total budget.

        Examples
        --------
        >>> import dpframe
        >>> from dpframe.datasets import census
        >>> df = census(100, rng=0)
        >>> df.dp.set_budget(epsilon=1.0)
        >>> _ = df.dp.count(epsilon=0.25)
        >>> df.dp.ledger.remaining
        Budget(epsilon=0.75, delta=0)
        """
        return self._backend.ledger

    def set_budget(
        self,
        epsilon: PrivacyAmount | None = None,
        delta: PrivacyAmount | None = None,
        *,
        rho: PrivacyAmount | None = None,
        domains: Domain | None = None,
        privacy_unit: Columns | None = None,
    ) -> None:
        """Set the total privacy budget (epsilon, delta) for this frame's data.

        Parameters
        ----------
        epsilon : float or Fraction
            The total privacy-loss budget, > 0; ``math.inf`` for an explicitly unlimited
            budget (for teaching and exploration).
        delta : float or Fraction, optional
            The total failure-probability budget in ``[0, 1)``; default 0 (or unlimited
            when ``epsilon`` is ``math.inf``).
        rho : float or Fraction, optional
            Instead of ``epsilon`` and ``delta``: a zero-concentrated DP (zCDP) budget
            (see :meth:`Ledger.set_budget` for how releases of each kind are counted).
        domains : dict, optional
            The declared keys of grouping columns, once for the data set (its code book):
            ``{"Sex": ["F", "M"], "Age": range(16, 96)}``. Any ordered list-like is
            accepted (``df["k"].cat.categories`` asserts that a Categorical's categories
            come from a code book, not from the data). Keys are checked against each
            column's dtype. Frames derived from this one inherit them with the ledger.
        privacy_unit : column name or list of names, optional
            The columns that identify the protected entity (a person, a household, a
            firm). Neighbouring data sets then differ by *all* the rows of one unit, and
            every release bounds each unit's contribution with ``max_rows`` and
            ``max_groups``. None (the default): each row is a different person. The unit
            belongs to the data's ledger: frames derived from this one inherit it, and a
            frame that lost the unit's columns cannot release. It cannot change after
            the first release.

        See Also
        --------
        Ledger.set_budget : The rules (a budget can be lowered, never raised).

        Notes
        -----
        Until a budget is set, every release is refused. A budget can be lowered but never
        raised, and never set below what was already spent. Declared domains cannot be
        changed afterwards (a code book does not change between releases). Without a
        privacy unit, each row of a frame released from is assumed to belong to a
        different person; the ledger notes whether this frame's index labels are unique,
        and frames derived from it that repeat labels are refused. With one, merges,
        concatenations and explodes that repeat a unit's rows are fine: each release
        bounds every unit's rows afresh.

        Examples
        --------
        >>> import dpframe
        >>> from dpframe.datasets import OCCUPATIONS, SEXES, census
        >>> df = census(100, rng=0)
        >>> df.dp.set_budget(epsilon=1.0, delta=1e-6, domains={"Sex": SEXES})
        >>> df.dp.ledger.total
        Budget(epsilon=1, delta=0.000001)
        >>> list(df.dp.ledger.domains["Sex"])
        ['M', 'F']
        """
        if rho is None:  # refuse a bad budget before declaring anything
            _validation.budget(epsilon, delta)
        else:
            budget_rho(rho)
        declared = self._declared_domains(domains)
        unit = None
        if privacy_unit is not None:
            unit = tuple(
                _validation.column_names(privacy_unit, "privacy_unit", self._frame.columns)
            )
            self._backend.check_columns(unit, "privacy_unit")
        elif self.ledger.privacy_unit is None:  # a unit declared before is kept
            self._backend.check_rows_apart()
        # One step: a refused budget (one that would raise the total) declares nothing.
        self.ledger._budget_and_declarations(
            epsilon,
            delta,
            rho,
            declared,
            row_labels=self._backend.row_labels,
            privacy_unit=unit,
            row_count=self._backend.row_count,
        )

    def _declared_domains(self, domains: Domain | None) -> dict[ColumnLabel, pd.Index]:
        if domains is None:
            return {}
        if not isinstance(domains, Mapping):
            raise InvalidParameterTypeError(
                f"domains must be a dict mapping column names to lists of keys, got "
                f'{type(domains).__name__}. Example: domains={{"Sex": ["F", "M"]}}.'
            )
        dtypes = self._backend.check_columns(domains.keys(), "domains")
        declared = {}
        for name, keys in domains.items():
            index = _validation.domain_keys(keys, name)
            declared[name] = _validation.declared_domain(dtypes[name], name, {name: index}, {})
            for key in declared[name]:
                encode_key(key)  # refuse, now, keys that could not be saved with the ledger
        return declared

    # ------------------------------------------------------------ combining with other frames

    def merge(self, right: pd.DataFrame | pd.Series[Any], **kwargs: Any) -> pd.DataFrame:
        """``DataFrame.merge`` that keeps this frame's ledger and never duplicates its rows.

        pandas drops ``attrs`` (and so the ledger) when one side of a merge has none, as a
        public code table does; this merge re-attaches the ledger to the result.

        Parameters
        ----------
        right : pandas.DataFrame or named pandas.Series
            The frame to merge with: a public table (no ledger), or a frame of the same
            data (same ledger; then the merge must be one-to-one).
        **kwargs
            Passed to :meth:`pandas.DataFrame.merge` (``on``, ``how``, ``suffixes``...).
            ``validate`` defaults to ``"many_to_one"``: each row of this frame matches at
            most one row of ``right``, so every person keeps at most one row; merges that
            can repeat this frame's rows (``"one_to_many"``, ``"many_to_many"``,
            ``how="cross"``) are refused.

        Returns
        -------
        pandas.DataFrame
            The merged frame, spending this frame's budget.

        Raises
        ------
        LedgerConflictError
            When ``right`` spends a different budget.
        PrivacyUnitError
            When the merge could give a person several rows.

        See Also
        --------
        join : The same for ``DataFrame.join``.

        Notes
        -----
        Releases assume each row belongs to a different person. A many-to-one merge with
        a public table keeps that. Merging the data with (a part of) itself needs a
        privacy unit: without one, dpframe cannot tell a merge on a person's id (each
        row meets its own) from one on a spouse's id (a row takes another person's
        values), and refuses both. With a privacy unit, every
        merge may repeat a unit's rows (each release bounds them), but a merge with the
        same data must join on the unit's columns (``on=["person_id", ...]``): on other
        keys a row would carry another unit's values, which no bound on this unit limits.

        Examples
        --------
        >>> import pandas as pd
        >>> import dpframe
        >>> from dpframe.datasets import census
        >>> df = census(100, rng=0)
        >>> df.dp.set_budget(epsilon=1.0)
        >>> codes = pd.DataFrame({"Sex": ["M", "F"], "label": ["male", "female"]})
        >>> merged = df.dp.merge(codes.astype({"Sex": df["Sex"].dtype}), on="Sex")
        >>> merged.dp.ledger is df.dp.ledger
        True
        """
        frame, ledger = self._pandas_frame("merge"), self.ledger
        if ledger.privacy_unit is not None:  # a unit's repeated rows are bounded per release
            if _same_ledger(ledger, right):
                _check_unit_self_merge(ledger.privacy_unit, kwargs)
            merged = frame.merge(right, **kwargs)
            _attrs.attach(merged, ledger)
            return merged
        if kwargs.get("how") == "cross":
            raise PrivacyUnitError(
                'how="cross" pairs every row with every row of the other frame, so each person '
                "would have many rows. Merge on keys instead (on=...)."
            )
        if _same_ledger(ledger, right):
            raise _self_merge_without_unit("merge")
        _refuse_rows_of_nobody(kwargs.get("how"), "merge")
        validate = _merge_validate(kwargs.pop("validate", None))
        try:
            merged = frame.merge(right, validate=validate, **kwargs)
        except pd.errors.MergeError:
            # pandas' message lists the duplicated keys (ids, values): none is shown.
            raise PrivacyUnitError(
                f"the merge keys repeat (pandas' validate={validate!r} check failed): a row of "
                f"this frame could match several rows, and one person would get several rows. "
                f"Make the keys unique first (e.g. drop_duplicates(subset=...)). {_PANEL_HINT}"
            ) from None
        _attrs.attach(merged, ledger)
        return merged

    def join(self, other: pd.DataFrame | pd.Series[Any], **kwargs: Any) -> pd.DataFrame:
        """``DataFrame.join`` that keeps this frame's ledger and never duplicates its rows.

        Parameters
        ----------
        other : pandas.DataFrame or named pandas.Series
            One frame to join (a list is refused: join them one at a time).
        **kwargs
            Passed to :meth:`pandas.DataFrame.join` (``on``, ``how``, ``lsuffix``...);
            ``validate`` is checked as in :meth:`merge`.

        Returns
        -------
        pandas.DataFrame
            The joined frame, spending this frame's budget.

        See Also
        --------
        merge : The rules, and what pandas does without them.

        Notes
        -----
        As for :meth:`merge`: the join may not give a person several rows.

        Examples
        --------
        >>> import pandas as pd
        >>> import dpframe
        >>> df = pd.DataFrame({"region": ["N", "S", "N"], "x": [1.0, 2.0, 3.0]})
        >>> df.dp.set_budget(epsilon=1.0)
        >>> names = pd.DataFrame({"name": ["North", "South"]}, index=["N", "S"])
        >>> df.dp.join(names, on="region").dp.ledger is df.dp.ledger
        True
        """
        frame, ledger = self._pandas_frame("join"), self.ledger
        given: object = other  # checked at run time, whatever the annotation says
        if isinstance(given, list | tuple):
            raise InvalidParameterTypeError(
                "df.dp.join takes one frame at a time, so that each join can be checked; "
                "chain the calls: df.dp.join(a).dp.join(b)."
            )
        same_data = _same_ledger(ledger, other)
        if ledger.privacy_unit is not None:  # a unit's repeated rows are bounded per release
            if same_data:
                raise PrivacyUnitError(
                    "joining this frame with a frame of the same data on the index could put "
                    "another unit's values in this unit's rows; use df.dp.merge(other, "
                    f"on={list(ledger.privacy_unit)!r} + [...]), which pairs rows of one unit."
                )
            joined = frame.join(other, **kwargs)
            _attrs.attach(joined, ledger)
            return joined
        if kwargs.get("how") == "cross":
            raise PrivacyUnitError('how="cross" would give each person many rows.')
        if same_data:
            raise _self_merge_without_unit("join")
        _refuse_rows_of_nobody(kwargs.get("how"), "join")
        validate = _merge_validate(kwargs.pop("validate", None))
        try:
            joined = frame.join(other, validate=validate, **kwargs)
        except pd.errors.MergeError:
            # pandas' message lists the duplicated keys (ids, values): none is shown.
            raise PrivacyUnitError(
                f"the join keys repeat (pandas' validate={validate!r} check failed): a row of "
                f"this frame could match several rows, and one person would get several rows. "
                f"{_PANEL_HINT}"
            ) from None
        _attrs.attach(joined, ledger)
        return joined

    def _pandas_frame(self, method: str) -> pd.DataFrame:
        if not isinstance(self._frame, pd.DataFrame):
            raise InvalidParameterTypeError(
                f"df.dp.{method} is for pandas DataFrames; on a Dask DataFrame use "
                f"ddf.{method}(...), which keeps the ledger through Dask's metadata."
            )
        return self._frame

    # ------------------------------------------------------------ shared steps

    def _groups(self, columns: Columns, domain: Domain | None, param: str) -> list[Group]:
        """The groupings of ``columns``; ``domain=`` may only name the call's groupings."""
        # Data without a budget is refused first: a domain error would suggest set_budget on
        # a frame that may have lost a budgeted ledger on the way (a merge, a concat).
        self.ledger.require_budget()
        keys = _validation.column_names(columns, param, self._frame.columns)
        names = [self._backend.column_label(key, param) for key in keys]
        checked = _validation.check_domain_columns(domain, names)
        return [self._backend.group(name, checked, param) for name in names]

    def _groups_of(self, by: Columns | None, domain: Domain | None) -> list[Group]:
        """The groupings of ``by`` (none without it: then ``domain=`` must name nothing)."""
        if by is None:
            _validation.check_domain_columns(domain, [])  # a forgotten by=?
            return []
        return self._groups(by, domain, "by")

    @staticmethod
    def _scope(
        method: str,
        columns: Sequence[ColumnLabel],
        groups: Sequence[Group],
        where: Where,
        rng: np.random.Generator | None,
    ) -> _plans.Scope:
        return _plans.Scope(
            method=method,
            columns=tuple(str(c) for c in [*columns, *(g.name for g in groups)]),
            where=_where_text(where),
            by=tuple(str(g.name) for g in groups),
            private=rng is None,
        )

    def _contribution(
        self, method: str, max_rows: int | None, max_groups: int | None, grouped: bool
    ) -> _plans.Contribution:
        """The call's contribution bounds, checked against the ledger's privacy unit."""
        # A frame that lost its ledger (a merge with a plain frame) also lost its unit: say
        # so, rather than suggest declaring a unit, which would set a second budget.
        self.ledger.require_budget()
        unit = self.ledger.privacy_unit
        if unit is not None:
            missing = [name for name in unit if name not in self._frame.columns]
            if missing:
                # Dask's index has a name, not names
                index_names = getattr(self._frame.index, "names", [self._frame.index.name])
                in_index = [name for name in missing if name in index_names]
                fix = (
                    f"it is in the index: release from df.reset_index(), which makes "
                    f"{in_index!r} columns again."
                    if in_index
                    else f'select them with the others, df[["person_id", "wage"]]; a Series '
                    f'has lost them: use df.dp.{method}(...) rather than df["wage"].dp.{method}.'
                )
                raise PrivacyUnitError(
                    f"this data's privacy unit is {list(unit)!r}, but this frame lacks "
                    f"{missing!r} as columns, so no release can bound what one unit "
                    f"contributes. Release from a frame that keeps the unit's columns: {fix}"
                )
            self._backend.check_columns(unit, "privacy_unit")  # e.g. a unit column twice
            self._backend.check_unit(unit)
        return _plans.contribution(unit, max_rows, max_groups, grouped, method)

    def _gaussian(
        self,
        noise: object,
        epsilon: PrivacyAmount | None,
        delta: PrivacyAmount,
        rho: PrivacyAmount | None,
        private_keys: object,
        method: str,
    ) -> _plans.Gaussian | None:
        """The zCDP cost of a call with ``noise="gaussian"``; None for geometric noise."""
        kind = _validation.choice(noise, "noise", ("geometric", "gaussian"))
        if kind == "geometric":
            if rho is not None:
                raise InvalidParameterError(
                    "rho= is the cost of discrete Gaussian noise: pass noise='gaussian' too, "
                    "or give epsilon= for the geometric noise."
                )
            if epsilon is None:
                raise InvalidParameterError(
                    f"df.dp.{method} needs epsilon=, the privacy budget of this release "
                    f"(e.g. epsilon=0.5), or noise='gaussian' with rho=."
                )
            return None
        if private_keys is not False:
            raise InvalidParameterError(
                "private_keys=True selects keys with a decision of seed 001 and releases "
                "geometric noise; drop noise='gaussian' for it."
            )
        return _plans.gaussian_cost(epsilon, delta, rho, method)

    @staticmethod
    def _geometric_only(noise: object, method: str) -> None:
        """Refuse ``noise="gaussian"`` for the quantile methods (report-noisy-max)."""
        if _validation.choice(noise, "noise", ("geometric", "gaussian")) == "gaussian":
            raise InvalidParameterError(
                f"df.dp.{method} chooses quantiles by report-noisy-max, a pure epsilon-DP "
                f"mechanism with geometric noise: pass epsilon= without noise='gaussian'. On a "
                f"zCDP budget (set_budget(rho=...)) each of k quantiles of epsilon / k is "
                f"charged rho = (epsilon / k)**2 / 2."
            )

    def _key_selection_choice(
        self, private_keys: bool, delta: PrivacyAmount, by: Columns | None
    ) -> tuple[bool, Fraction]:
        """Whether the call selects its keys privately, and the delta it spends on that."""
        selecting = _validation.flag(private_keys, "private_keys")
        dlt = _validation.delta(delta)
        if selecting and (by is None or dlt == 0):
            raise InvalidParameterError(
                "private_keys=True selects which keys of by= to release, and needs delta > 0 "
                "(the chance that a key held by one person is released), e.g. "
                'df.dp.count(epsilon=1.0, by="query", private_keys=True, delta=1e-6).'
            )
        if not selecting and dlt:
            raise InvalidParameterError(
                "delta is spent only by private key selection (private_keys=True); this "
                "release is pure epsilon-DP: drop delta."
            )
        return selecting, dlt

    def _by_groups(self, by: Columns | None, domain: Domain | None, selecting: bool) -> list[Group]:
        """The groupings of ``by``: declared domains, or keys found in the data for selection."""
        if by is None or not selecting:
            return self._groups_of(by, domain)
        self.ledger.require_budget()  # first, as in _groups
        names = _validation.column_names(by, "by", self._frame.columns)
        if len(names) != 1:
            raise InvalidParameterError(
                "private_keys=True selects the keys of one column; combine several into one "
                'first, e.g. df.assign(key=df["a"].astype(str) + "|" + df["b"].astype(str)).'
            )
        name = self._backend.column_label(names[0], "by")
        if (domain is not None and name in domain) or name in self.ledger.domains:
            raise InvalidParameterError(
                f"{name!r} has declared keys: release them all (drop private_keys and "
                f"delta), since a declared key reveals nothing."
            )
        (dtype,) = self._backend.check_columns([name], "by").values()
        _validation.selectable_keys(dtype, name)
        return [self._backend.observed_group(name, "by")]

    def _selection_plan(
        self,
        scope: _plans.Scope,
        epsilon: Fraction,
        delta: Fraction,
        contribution: _plans.Contribution,
    ) -> tuple[Release | None, Fraction]:
        """The key-selection release (half of epsilon, all of delta), and what is left."""
        if not delta:
            return None, epsilon
        return _plans.selection_release(scope, epsilon / 2, delta, contribution), epsilon / 2

    @staticmethod
    def _select_keys(
        rows: Rows,
        groups: Sequence[Group],
        contribution: _plans.Contribution,
        selection: Release | None,
        rng: np.random.Generator | None,
    ) -> slice | NDArray[np.bool_]:
        """The cells to release: all of them, or those private key selection keeps."""
        if selection is None:
            return slice(None)
        unit, bounds = contribution.unit, contribution.bounds
        if unit is None or bounds is None:  # one row, one unit: its count is the row count
            present, max_groups = rows.count_table(groups), 1
        else:
            present, max_groups = rows.unit_counts(unit, groups), bounds.max_groups
        return mechanisms.key_selection(
            present.reshape(-1),
            epsilon=selection.epsilon,
            delta=selection.delta,
            max_groups=max_groups,
            rng=rng,
        )

    def _rows(
        self,
        where: Where,
        groups: Sequence[Group],
        contribution: _plans.Contribution,
        rng: np.random.Generator | None,
        values: ColumnLabel | None = None,
        *,
        counts_only: bool = False,
    ) -> Rows:
        """The rows a release reads: filtered by ``where``, then bounded per unit.

        With ``values`` (the column a statistic reads), rows missing it are left out
        before the bounding, as ``where`` leaves rows out: a missing value is skipped by
        the statistic, and must not take a place of the unit's ``max_rows``. The
        bounding's random choice is made when the rows are first aggregated, inside the
        ledger transaction, so a refused call draws nothing. ``counts_only``: the
        release reads one count of the rows (``count_table(groups)`` or ``count()``)
        and nothing else, so each unit's kept rows may be counted without being chosen.
        """
        rows = self._backend.rows(where)
        if contribution.unit is None or contribution.bounds is None:
            return rows
        if values is not None:
            rows = rows.present(values)
        bounds = contribution.bounds
        return rows.bounded(contribution.unit, bounds, groups, rng, counts_only=counts_only)

    # ------------------------------------------------------------ count

    @overload
    def count(  # type: ignore[overload-overlap]  # by=None (Hashable) wins
        self,
        *,
        epsilon: PrivacyAmount | None = None,
        by: None = None,
        where: Where = None,
        nonnegative: bool = False,
        domain: Domain | None = None,
        private_keys: bool = False,
        delta: PrivacyAmount = 0.0,
        noise: NoiseKind = "geometric",
        rho: PrivacyAmount | None = None,
        max_rows: int | None = None,
        max_groups: int | None = None,
        rng: RNGLike | None = None,
    ) -> _results.DPInt: ...
    @overload
    def count(
        self,
        *,
        epsilon: PrivacyAmount | None = None,
        by: Columns,
        where: Where = None,
        nonnegative: bool = False,
        domain: Domain | None = None,
        private_keys: bool = False,
        delta: PrivacyAmount = 0.0,
        noise: NoiseKind = "geometric",
        rho: PrivacyAmount | None = None,
        max_rows: int | None = None,
        max_groups: int | None = None,
        rng: RNGLike | None = None,
    ) -> pd.Series[int]: ...
    @_validation.in_call_terms
    def count(
        self,
        *,
        epsilon: PrivacyAmount | None = None,
        by: Columns | None = None,
        where: Where = None,
        nonnegative: bool = False,
        domain: Domain | None = None,
        private_keys: bool = False,
        delta: PrivacyAmount = 0.0,
        noise: NoiseKind = "geometric",
        rho: PrivacyAmount | None = None,
        max_rows: int | None = None,
        max_groups: int | None = None,
        rng: RNGLike | None = None,
    ) -> _results.DPInt | pd.Series[int]:
        """Noisy number of rows (that satisfy ``where``), overall or per group of ``by``.

        Parameters
        ----------
        epsilon : float
            Privacy budget spent by this release (> 0).
        by : column name or list of names, optional
            Count per group. Groups are the declared domain of each column: its
            Categorical categories, or ``domain[name]``; keys absent from the data still
            get a (noisy) count, and rows whose key is missing or outside the domain are
            counted in no group.
        where : str, bool Series or bool array, optional
            Count only the rows satisfying this condition (``"Age >= 18"``).
        nonnegative : bool, default False
            Set negative noisy counts to 0 (seed 003's post-processing; biases counts
            upwards, so the default keeps them unbiased).
        domain : dict, optional
            Declared keys for grouping columns that are not Categorical.
        private_keys : bool, default False
            With ``by`` (one column) that has no declared domain: release only keys
            found in the data *and* selected privately (seed 001's generalized decision
            on each key's number of distinct units), so that no key reveals the presence
            of one person. Needs ``delta > 0``; half of ``epsilon`` selects the keys and
            half noises their values. Keys absent from the data never appear.
        delta : float, default 0.0
            The delta of the key selection (with ``private_keys=True``, where it bounds
            the probability that a key held by one person is released), or of the cost
            of ``noise="gaussian"`` given as ``epsilon`` and ``delta``.
        noise : {"geometric", "gaussian"}, default "geometric"
            The noise: the exact geometric mechanism (pure epsilon-DP), or the exact
            discrete Gaussian (zCDP, cost ``rho``), which is cheaper when one person
            touches many cells (L2 sensitivity ``sqrt(max_groups) * max_rows``).
        rho : float, optional
            With ``noise="gaussian"``: the zCDP cost. Alternatively give ``epsilon`` and
            ``delta``, converted to the largest rho that implies them.
        max_rows : int, optional
            Required on a frame with a privacy unit: the most rows one unit may
            contribute to one group (or to the result, ungrouped); rows beyond it are
            dropped at random.
        max_groups : int, optional
            Required on a frame with a privacy unit for a grouped release: the most
            groups (cells) one unit may contribute to.
        rng : numpy Generator or seed, optional
            For teaching and tests only; the release is recorded as not private.

        Returns
        -------
        DPInt or pandas.Series
            An ``int`` (carrying ``.dp`` metadata) or a Series of ints indexed by the
            domain, labelled like ``df.groupby(by, observed=False).size()``.

        See Also
        --------
        crosstab : Counts of two groupings, as a table.
        threshold_decision : Whether a count reaches a minimum, privately.
        release_info : The metadata, with the error bar.

        Notes
        -----
        Neighbouring data sets differ by one row, added or removed. A count changes by
        at most 1 (sensitivity 1); with ``by``, that row is in at most one group, so the
        whole Series is ``epsilon``-DP with one budget (parallel composition). Noise:
        the exact geometric mechanism (:func:`dpframe.mechanisms.geometric`).

        References
        ----------
        Seed ``003_ce3353c9005cacf5.txt`` (census workflow); seed
        ``002_265e5b6700395d7e.txt`` (the geometric mechanism).

        Examples
        --------
        >>> import dpframe
        >>> from dpframe.datasets import CENSUS_DOMAINS, census
        >>> df = census(1000, rng=0)
        >>> df.dp.set_budget(epsilon=1.0, domains=CENSUS_DOMAINS)
        >>> by_sex = df.dp.count(epsilon=0.5, by="Sex")
        >>> list(by_sex.index)
        ['M', 'F']
        >>> dpframe.release_info(by_sex)["noise_error_bound"]
        6.0
        """
        where = _validation.where_in_caller(where)
        gaussian = self._gaussian(noise, epsilon, delta, rho, private_keys, "count")
        keep_nonnegative = _validation.flag(nonnegative, "nonnegative")
        generator = _validation.rng(rng)
        selecting, dlt = (
            (False, Fraction(0))
            if gaussian
            else self._key_selection_choice(private_keys, delta, by)
        )
        groups = self._by_groups(by, domain, selecting)
        contribution = self._contribution("count", max_rows, max_groups, bool(groups))
        # Private key selection also counts units per cell: the rows must be chosen.
        rows = self._rows(where, groups, contribution, generator, counts_only=not selecting)
        post = ("negative counts set to 0",) if keep_nonnegative else ()
        scope = self._scope("count", [], groups, where, generator)

        if gaussian is not None:
            release, squared = _plans.gaussian_release(scope, gaussian, contribution, post=post)
            with self.ledger.transaction(rho=gaussian.rho) as spending:
                exact = rows.count_table(groups).reshape(-1) if groups else np.array([rows.count()])
                noisy = mechanisms.discrete_gaussian(
                    exact, rho=gaussian.rho, sensitivity_squared=squared, rng=generator
                )
                spending.drawn(release)
            chosen: slice | NDArray[np.bool_] = slice(None)
        else:
            eps = _validation.epsilon(epsilon)
            selection, values_share = self._selection_plan(scope, eps, dlt, contribution)
            per_row = contribution.noise_epsilon(values_share)
            release = contribution.charged(_plans.count_release(scope, per_row, post))
            with self.ledger.transaction(eps, dlt) as spending:
                chosen = self._select_keys(rows, groups, contribution, selection, generator)
                if selection is not None:
                    spending.drawn(selection)
                exact = rows.count_table(groups).reshape(-1) if groups else np.array([rows.count()])
                noisy = mechanisms.geometric(exact[chosen], epsilon=per_row, rng=generator)
                spending.drawn(release)

        if keep_nonnegative:
            noisy = np.maximum(noisy, 0)
        info = call_metadata(spending.parts, release)
        if not groups:
            return _results.integer(int(noisy[0]), info)
        return _results.series(noisy, _tables.released_labels(groups, chosen), "count", info)

    # ------------------------------------------------------------ sum

    @overload
    def sum(  # type: ignore[overload-overlap]  # by=None (Hashable) wins
        self,
        column: ColumnLabel,
        *,
        epsilon: PrivacyAmount | None = None,
        bounds: Bounds | AutoBounds,
        by: None = None,
        where: Where = None,
        domain: Domain | None = None,
        private_keys: bool = False,
        delta: PrivacyAmount = 0.0,
        bounds_epsilon: PrivacyAmount | None = None,
        noise: NoiseKind = "geometric",
        rho: PrivacyAmount | None = None,
        max_rows: int | None = None,
        max_groups: int | None = None,
        rng: RNGLike | None = None,
    ) -> _results.DPFloat: ...
    @overload
    def sum(
        self,
        column: ColumnLabel,
        *,
        epsilon: PrivacyAmount | None = None,
        bounds: Bounds | AutoBounds,
        by: Columns,
        where: Where = None,
        domain: Domain | None = None,
        private_keys: bool = False,
        delta: PrivacyAmount = 0.0,
        bounds_epsilon: PrivacyAmount | None = None,
        noise: NoiseKind = "geometric",
        rho: PrivacyAmount | None = None,
        max_rows: int | None = None,
        max_groups: int | None = None,
        rng: RNGLike | None = None,
    ) -> pd.Series[float]: ...
    @_validation.in_call_terms
    def sum(
        self,
        column: ColumnLabel,
        *,
        epsilon: PrivacyAmount | None = None,
        bounds: Bounds | AutoBounds,
        by: Columns | None = None,
        where: Where = None,
        domain: Domain | None = None,
        private_keys: bool = False,
        delta: PrivacyAmount = 0.0,
        bounds_epsilon: PrivacyAmount | None = None,
        noise: NoiseKind = "geometric",
        rho: PrivacyAmount | None = None,
        max_rows: int | None = None,
        max_groups: int | None = None,
        rng: RNGLike | None = None,
    ) -> _results.DPFloat | pd.Series[float]:
        """Noisy sum of a numeric column, each value clamped into ``bounds``.

        Parameters
        ----------
        column : column name
            A numeric column. Missing values (NaN, NA) are skipped; ±inf are clamped.
        epsilon : float
            Total privacy budget of this call (> 0).
        bounds : (lo, hi) or "auto"
            Declared range of one value; every value is clamped into it. ``"auto"``
            estimates it privately first (seed 004's ApproxBounds: a histogram of the
            values on a log scale, with noise), spending ``bounds_epsilon`` of
            ``epsilon``, recorded in the ledger as its own row.
        by : column name or list of names, optional
            Sum per group, over the declared domains (as for :meth:`count`).
        where : str, bool Series or bool array, optional
            Sum only the rows satisfying this condition.
        domain : dict, optional
            Declared keys for grouping columns that are not Categorical.
        private_keys : bool, default False
            With ``by`` (one column) that has no declared domain: release only keys
            found in the data *and* selected privately (seed 001's generalized decision
            on each key's number of distinct units), so that no key reveals the presence
            of one person. Needs ``delta > 0``; half of ``epsilon`` selects the keys and
            half noises their values. Keys absent from the data never appear.
        delta : float, default 0.0
            The delta of the key selection (with ``private_keys=True``, where it bounds
            the probability that a key held by one person is released), or of the cost
            of ``noise="gaussian"`` given as ``epsilon`` and ``delta``.
        bounds_epsilon : float, optional
            With ``bounds="auto"``: the share of ``epsilon`` spent on the bounds
            (default: a quarter). The sum itself gets the rest.
        noise : {"geometric", "gaussian"}, default "geometric"
            The noise: the exact geometric mechanism (pure epsilon-DP), or the exact
            discrete Gaussian (zCDP, cost ``rho``), which is cheaper when one person
            touches many cells (L2 sensitivity ``sqrt(max_groups) * max_rows``).
        rho : float, optional
            With ``noise="gaussian"``: the zCDP cost. Alternatively give ``epsilon`` and
            ``delta``, converted to the largest rho that implies them.
        max_rows : int, optional
            Required on a frame with a privacy unit: the most rows one unit may
            contribute to one group (or to the result, ungrouped); rows beyond it are
            dropped at random.
        max_groups : int, optional
            Required on a frame with a privacy unit for a grouped release: the most
            groups (cells) one unit may contribute to.
        rng : numpy Generator or seed, optional
            For teaching and tests only; the release is recorded as not private.

        Returns
        -------
        DPFloat or pandas.Series
            The noisy sum (metadata in ``.dp``), or a Series over the domain of ``by``.

        See Also
        --------
        count : Noisy row counts.
        crosstab : Sums per cell of a table (``values=``, ``aggfunc="sum"``).

        Notes
        -----
        Neighbouring data sets differ by one row. After clamping, one row changes a
        sum by at most ``max(|lo|, |hi|)`` (the sensitivity), and a group's sum only.
        The sum is computed exactly: values are clamped, then rounded to a fixed-point
        grid of step ``2^(ceil(log2 max(|lo|, |hi|)) - 32)`` and added as integers, so
        float rounding, summation order and overflow cannot raise the sensitivity
        (Casacuberta et al., "Widespread underestimation of sensitivity in
        differentially private libraries", CCS 2022). The noise is the exact
        geometric mechanism on that grid (a discrete Laplace of scale
        ``sensitivity / epsilon``), so the release is ``epsilon``-DP with no
        floating-point porosity. The error bar covers the noise only, never the bias
        from clamping values that lie outside the bounds.

        References
        ----------
        Seed ``004_2d340d4f6924174c.txt`` (bounds and ApproxBounds).

        Examples
        --------
        >>> import dpframe
        >>> from dpframe.datasets import CENSUS_DOMAINS, census
        >>> df = census(1000, rng=0)
        >>> df.dp.set_budget(epsilon=1.0, domains=CENSUS_DOMAINS)
        >>> total = df.dp.sum("Age", epsilon=0.5, bounds=(0, 100))
        >>> dpframe.release_info(total)["bounds"]
        [0.0, 100.0]
        """
        where = _validation.where_in_caller(where)
        gaussian = self._gaussian(noise, epsilon, delta, rho, private_keys, "sum")
        generator = _validation.rng(rng)
        values = self._backend.numeric_column(column, "column")
        selecting, dlt = (
            (False, Fraction(0))
            if gaussian
            else self._key_selection_choice(private_keys, delta, by)
        )
        groups = self._by_groups(by, domain, selecting)
        contribution = self._contribution("sum", max_rows, max_groups, bool(groups))
        rows = self._rows(where, groups, contribution, generator, column)
        scope = self._scope("sum", [column], groups, where, generator)
        if gaussian is not None:
            if isinstance(bounds, str) or bounds_epsilon is not None:
                raise InvalidParameterError(
                    'noise="gaussian" needs declared bounds=(lo, hi): bounds="auto" estimates '
                    "them with geometric noise first. Estimate them in a call of their own."
                )
            grid = SumGrid.for_bounds(*_validation.sum_bounds(bounds))
            release, squared = _plans.gaussian_release(scope, gaussian, contribution, grid=grid)
            with self.ledger.transaction(rho=gaussian.rho) as spending:
                exact = _exact_sums(rows, values, grid, groups)
                noisy = _noisy_units(exact, grid, generator, rho=gaussian.rho, squared=squared)
                spending.drawn(release)
            return _sum_result(noisy, groups, slice(None), column, call_metadata(spending.parts))

        eps = _validation.epsilon(epsilon)
        selection, values_share = self._selection_plan(scope, eps, dlt, contribution)
        declared, bounds_share = _validation.sum_bounds_choice(bounds, bounds_epsilon, values_share)
        if selecting and declared is None:
            raise InvalidParameterError(
                'private_keys=True needs declared bounds=(lo, hi), not bounds="auto".'
            )
        sum_share = contribution.noise_epsilon(values_share - bounds_share)
        bounds_share = contribution.noise_epsilon(bounds_share)
        _plans.check_sum_epsilon(sum_share)
        if declared is None:  # the estimate is charged before the rows are grouped
            self._backend.check_keys(groups)

        with self.ledger.transaction(eps, dlt) as spending:
            chosen = self._select_keys(rows, groups, contribution, selection, generator)
            if selection is not None:
                spending.drawn(selection)
            rule = None
            if declared is None:
                estimate, threshold = _plans.bounds_release(scope, bounds_share)
                histogram = mechanisms.geometric(
                    rows.log_histogram(values), epsilon=bounds_share, rng=generator
                )
                spending.drawn(contribution.charged(estimate))
                lo, hi, rule = _plans.bounds_from_histogram(histogram, threshold, bounds_share)
                declared = (lo, hi)
            grid = SumGrid.for_bounds(*declared)
            release = _plans.sum_release(scope, sum_share, grid, bounds_rule=rule)
            exact = _exact_sums(rows, values, grid, groups)
            noisy = _noisy_units(exact[chosen], grid, generator, epsilon=sum_share)
            spending.drawn(contribution.charged(release))
        return _sum_result(noisy, groups, chosen, column, call_metadata(spending.parts))

    # ------------------------------------------------------------ means, variances, quantiles

    @_validation.in_call_terms
    def mean(
        self,
        column: ColumnLabel,
        *,
        epsilon: PrivacyAmount | None = None,
        bounds: Bounds,
        by: Columns | None = None,
        where: Where = None,
        domain: Domain | None = None,
        noise: NoiseKind = "geometric",
        rho: PrivacyAmount | None = None,
        delta: PrivacyAmount = 0.0,
        max_rows: int | None = None,
        max_groups: int | None = None,
        rng: RNGLike | None = None,
    ) -> _results.DPFloat | pd.Series[float]:
        """Noisy mean of a numeric column (values clamped into ``bounds``), overall or per group.

        Parameters
        ----------
        column : column name
            A numeric column; missing values are skipped, as pandas does.
        epsilon : float
            Privacy budget of this call (> 0), split evenly between a count and a sum.
        bounds : (lo, hi)
            Declared range of one value; every value is clamped into it.
        by : column name or list of names, optional
            A mean per group over the declared domains (as for :meth:`count`).
        where : str, bool Series or bool array, optional
            Use only the rows satisfying this condition.
        domain : dict, optional
            Declared keys of grouping columns for this call.
        noise : {"geometric", "gaussian"}, default "geometric"
            The noise of the parts: exact geometric (pure epsilon-DP) or exact discrete
            Gaussian (zCDP, cost ``rho``; L2 sensitivity per unit).
        rho : float, optional
            With ``noise="gaussian"``: the zCDP cost, split evenly between the parts (or
            give ``epsilon`` and ``delta``).
        delta : float, default 0.0
            With ``noise="gaussian"`` and ``epsilon``: the delta of the cost.
        max_rows : int, optional
            Required on a frame with a privacy unit: the most rows one unit may
            contribute to one group (or to the result, ungrouped); rows beyond it are
            dropped at random.
        max_groups : int, optional
            Required on a frame with a privacy unit for a grouped release: the most
            groups (cells) one unit may contribute to.
        rng : numpy Generator or seed, optional
            For teaching and tests only; the release is recorded as not private.

        Returns
        -------
        DPFloat or pandas.Series
            The mean, or a Series like ``df.groupby(by)[column].mean()`` over the declared
            domain (NaN where the noisy count is below 1, as pandas gives NaN for an empty
            group). :func:`dpframe.release_info` gives ``noise_interval``.

        See Also
        --------
        var : The variance, from the same kind of parts.
        median : A robust middle.
        sum : The noisy sum alone.

        Notes
        -----
        Neighbouring data sets differ by one row. Values are clamped into the bounds and
        centred on their midpoint ``m``; the count ``N`` (sensitivity 1) and the centred
        sum ``S`` (sensitivity ``(hi - lo)/2``) are summed exactly on fixed-point grids
        and noised with the exact geometric mechanism, ``epsilon/2`` each, and the mean
        is ``m + S/N`` (Google's BoundedMean construction; see
        ``dpframe._moments.moment_plan``). The interval ``noise_interval`` holds the mean
        of the clamped values with probability at least 95%, from the exact noise
        distributions (union bound over the two parts); it excludes clamping bias.

        References
        ----------
        Seed ``004_2d340d4f6924174c.txt`` (bounds); Wilson et al., "Differentially private
        SQL with bounded user contribution", PoPETs 2020 (Google's bounded mean).

        Examples
        --------
        >>> import dpframe
        >>> from dpframe.datasets import CENSUS_DOMAINS, census
        >>> df = census(2000, rng=0)
        >>> df.dp.set_budget(epsilon=1.0, domains=CENSUS_DOMAINS)
        >>> ages = df.dp.mean("Age", epsilon=0.5, bounds=(0, 100), by="Sex")
        >>> list(ages.index), ages.name
        (['M', 'F'], 'Age')
        """
        where = _validation.where_in_caller(where)
        return self._moment(
            "mean", column, epsilon, bounds, 0, by, where, domain, max_rows, max_groups, rng,
            noise=noise, rho=rho, delta=delta,
        )  # fmt: skip

    @_validation.in_call_terms
    def var(
        self,
        column: ColumnLabel,
        *,
        epsilon: PrivacyAmount | None = None,
        bounds: Bounds,
        ddof: int = 1,
        by: Columns | None = None,
        where: Where = None,
        domain: Domain | None = None,
        noise: NoiseKind = "geometric",
        rho: PrivacyAmount | None = None,
        delta: PrivacyAmount = 0.0,
        max_rows: int | None = None,
        max_groups: int | None = None,
        rng: RNGLike | None = None,
    ) -> _results.DPFloat | pd.Series[float]:
        """Noisy variance of a numeric column (values clamped into ``bounds``).

        Parameters
        ----------
        column : column name
            A numeric column; missing values are skipped.
        epsilon : float
            Privacy budget of this call (> 0), split evenly between a count, a centred
            sum and a centred sum of squares.
        bounds : (lo, hi)
            Declared range of one value.
        ddof : int, default 1
            Delta degrees of freedom, as in pandas (divisor ``N - ddof``).
        by : column name or list of names, optional
            A variance per group over the declared domains.
        where : str, bool Series or bool array, optional
            Use only the rows satisfying this condition.
        domain : dict, optional
            Declared keys of grouping columns for this call.
        noise : {"geometric", "gaussian"}, default "geometric"
            The noise of the parts: exact geometric (pure epsilon-DP) or exact discrete
            Gaussian (zCDP, cost ``rho``; L2 sensitivity per unit).
        rho : float, optional
            With ``noise="gaussian"``: the zCDP cost, split evenly between the parts (or
            give ``epsilon`` and ``delta``).
        delta : float, default 0.0
            With ``noise="gaussian"`` and ``epsilon``: the delta of the cost.
        max_rows : int, optional
            Required on a frame with a privacy unit: the most rows one unit may
            contribute to one group (or to the result, ungrouped); rows beyond it are
            dropped at random.
        max_groups : int, optional
            Required on a frame with a privacy unit for a grouped release: the most
            groups (cells) one unit may contribute to.
        rng : numpy Generator or seed, optional
            For teaching and tests only; the release is recorded as not private.

        Returns
        -------
        DPFloat or pandas.Series
            The variance (NaN where the noisy count is at most ``ddof``).

        See Also
        --------
        std : Its square root.
        mean : The mean, from a count and a centred sum.

        Notes
        -----
        As :meth:`mean`, with a third part: the centred sum of squares
        ``Σ ((x - m)² - h²/2)`` (sensitivity ``h²/2``, ``h = (hi - lo)/2``), so bounds far
        from zero cost no extra noise. ``var = (Q + N h²/2 - S²/N) / (N - ddof)``; the
        interval covers the variance of the clamped values with probability at least 95%.

        References
        ----------
        Wilson et al., PoPETs 2020 (Google's BoundedVariance), with the squares centred.

        Examples
        --------
        >>> import dpframe
        >>> from dpframe.datasets import census
        >>> df = census(2000, rng=0)
        >>> df.dp.set_budget(epsilon=1.0)
        >>> spread = df.dp.var("Age", epsilon=0.5, bounds=(0, 100))
        >>> sorted(dpframe.release_info(spread)["noise_interval"])
        ['high', 'low']
        """
        where = _validation.where_in_caller(where)
        return self._moment(
            "var", column, epsilon, bounds, ddof, by, where, domain, max_rows, max_groups, rng,
            noise=noise, rho=rho, delta=delta,
        )  # fmt: skip

    @_validation.in_call_terms
    def std(
        self,
        column: ColumnLabel,
        *,
        epsilon: PrivacyAmount | None = None,
        bounds: Bounds,
        ddof: int = 1,
        by: Columns | None = None,
        where: Where = None,
        domain: Domain | None = None,
        noise: NoiseKind = "geometric",
        rho: PrivacyAmount | None = None,
        delta: PrivacyAmount = 0.0,
        max_rows: int | None = None,
        max_groups: int | None = None,
        rng: RNGLike | None = None,
    ) -> _results.DPFloat | pd.Series[float]:
        """Noisy standard deviation: the square root of :meth:`var` (same parameters).

        Parameters
        ----------
        column : column name
            A numeric column; missing values are skipped.
        epsilon : float
            Privacy budget of this call (> 0).
        bounds : (lo, hi)
            Declared range of one value.
        ddof : int, default 1
            Delta degrees of freedom, as in pandas.
        by : column name or list of names, optional
            A standard deviation per group over the declared domains.
        where : str, bool Series or bool array, optional
            Use only the rows satisfying this condition.
        domain : dict, optional
            Declared keys of grouping columns for this call.
        noise : {"geometric", "gaussian"}, default "geometric"
            The noise of the parts: exact geometric (pure epsilon-DP) or exact discrete
            Gaussian (zCDP, cost ``rho``; L2 sensitivity per unit).
        rho : float, optional
            With ``noise="gaussian"``: the zCDP cost, split evenly between the parts (or
            give ``epsilon`` and ``delta``).
        delta : float, default 0.0
            With ``noise="gaussian"`` and ``epsilon``: the delta of the cost.
        max_rows : int, optional
            Required on a frame with a privacy unit: the most rows one unit may
            contribute to one group (or to the result, ungrouped); rows beyond it are
            dropped at random.
        max_groups : int, optional
            Required on a frame with a privacy unit for a grouped release: the most
            groups (cells) one unit may contribute to.
        rng : numpy Generator or seed, optional
            For teaching and tests only; the release is recorded as not private.

        Returns
        -------
        DPFloat or pandas.Series
            The standard deviation.

        See Also
        --------
        var : The variance it is the root of.

        Notes
        -----
        Post-processing of :meth:`var`: the same parts, privacy and intervals (square
        roots of the variance's).

        Examples
        --------
        >>> import dpframe
        >>> from dpframe.datasets import census
        >>> df = census(2000, rng=0)
        >>> df.dp.set_budget(epsilon=1.0)
        >>> 0 <= df.dp.std("Age", epsilon=0.5, bounds=(0, 100)) <= 50
        True
        """
        where = _validation.where_in_caller(where)
        return self._moment(
            "std", column, epsilon, bounds, ddof, by, where, domain, max_rows, max_groups, rng,
            noise=noise, rho=rho, delta=delta,
        )  # fmt: skip

    def _moment(
        self,
        statistic: Statistic,
        column: ColumnLabel,
        epsilon: PrivacyAmount | None,
        bounds: Bounds,
        ddof: int,
        by: Columns | None,
        where: Where,
        domain: Domain | None,
        max_rows: int | None,
        max_groups: int | None,
        rng: RNGLike | None,
        *,
        noise: NoiseKind,
        rho: PrivacyAmount | None,
        delta: PrivacyAmount,
    ) -> _results.DPFloat | pd.Series[float]:
        """Release a mean, variance or standard deviation: its parts, then the estimate."""
        gaussian = self._gaussian(noise, epsilon, delta, rho, False, statistic)
        generator = _validation.rng(rng)
        values = self._backend.numeric_column(column, "column")
        groups = self._groups_of(by, domain)
        contribution = self._contribution(statistic, max_rows, max_groups, bool(groups))
        rows = self._rows(where, groups, contribution, generator, column)
        scope = self._scope(statistic, [column], groups, where, generator)
        checked = _validation.sum_bounds(bounds)
        if gaussian is not None:
            moment = _plans.moment_release(
                scope, statistic, Fraction(0), checked, ddof, (gaussian, contribution)
            )
            parts, summary = moment.parts, moment.summary
            cost_epsilon, cost_rho = Fraction(0), gaussian.rho
        else:
            eps = _validation.epsilon(epsilon)
            per_row = contribution.noise_epsilon(eps)
            moment = _plans.moment_release(scope, statistic, per_row, checked, ddof)
            parts = tuple(contribution.charged(part) for part in moment.parts)
            summary = contribution.charged(moment.summary)
            cost_epsilon, cost_rho = eps, Fraction(0)

        # Checked part by part, as charged: on a zCDP account, parts of epsilon/2 each
        # cost 2 (epsilon/2)**2 / 2, not epsilon**2 / 2.
        with self.ledger.transaction(cost_epsilon, rho=cost_rho, planned=parts) as spending:
            noisy = _noisy_parts(moment, rows.sum_tables(values, moment.grids, groups), generator)
            spending.drawn(*parts)

        estimate = _moments.moment_estimate(moment.plan, noisy, alpha=_plans.ALPHA)
        interval = {"low": estimate.lower.tolist(), "high": estimate.upper.tolist()}
        summary = summary.replace(details=(*moment.summary.details, ("noise_interval", interval)))
        info = call_metadata(spending.parts, summary)
        if not groups:
            return _results.real(float(estimate.estimate[0]), info)
        return _results.series(estimate.estimate, _tables.labels(groups), column, info)

    @_validation.in_call_terms
    def quantile(
        self,
        column: ColumnLabel,
        q: float | Sequence[float] = 0.5,
        *,
        epsilon: PrivacyAmount,
        bounds: Bounds,
        candidates: ArrayLike | None = None,
        by: Columns | None = None,
        where: Where = None,
        domain: Domain | None = None,
        max_rows: int | None = None,
        max_groups: int | None = None,
        noise: NoiseKind = "geometric",
        rng: RNGLike | None = None,
    ) -> _results.DPFloat | pd.Series[float]:
        """Noisy quantile(s) of a numeric column, chosen from a declared grid of candidates.

        Parameters
        ----------
        column : column name
            A numeric column; missing values are skipped.
        q : float or list of float, default 0.5
            Quantile(s) in [0, 1], as in pandas.
        epsilon : float
            Privacy budget of this call (> 0), split evenly between the quantiles.
        bounds : (lo, hi)
            Declared range of one value; values are clamped into it.
        candidates : array_like of float, optional
            The grid the release is chosen from (sorted, inside the bounds, declared
            without looking at the data); default 4097 evenly spaced points.
        by : column name or list of names, optional
            Quantiles per group over the declared domains.
        where : str, bool Series or bool array, optional
            Use only the rows satisfying this condition.
        domain : dict, optional
            Declared keys of grouping columns for this call.
        max_rows : int, optional
            Required on a frame with a privacy unit: the most rows one unit may
            contribute to one group (or to the result, ungrouped); rows beyond it are
            dropped at random.
        max_groups : int, optional
            Required on a frame with a privacy unit for a grouped release: the most
            groups (cells) one unit may contribute to.
        noise : {"geometric"}, default "geometric"
            Only the geometric noise of report-noisy-max: a quantile is chosen by a pure
            epsilon-DP mechanism (``"gaussian"`` is refused; on a zCDP budget each of the
            ``k`` quantiles, a release of ``epsilon / k``, is charged
            ``rho = (epsilon / k)**2 / 2``).
        rng : numpy Generator or seed, optional
            For teaching and tests only; the release is recorded as not private.

        Returns
        -------
        DPFloat or pandas.Series
            Labelled as pandas labels ``Series.quantile`` (a float, or a Series indexed by
            ``q``) and ``groupby(by)[column].quantile`` (indexed by the groups, then ``q``).

        See Also
        --------
        median : The 0.5 quantile.
        dpframe.mechanisms.quantile : The mechanism.

        Notes
        -----
        The exact counts of values per candidate cell are computed by the backend; the
        release is report-noisy-max of integer rank scores with exact geometric noise
        (:func:`dpframe.mechanisms.quantile_of_counts`). The error bar is in ranks
        (``rank_error_bound``) plus the grid's ``value_resolution``; clamping bias is
        not covered. Groups hold disjoint rows, so one ``epsilon`` covers all of them.
        A rank bar tells little about values where a group has few rows: in a group with
        no rows every candidate has rank error 0, and the released value is uniform over
        the candidates (unlike :meth:`mean`, a quantile spends nothing on a count that
        could tell an empty group; release one with :meth:`count` when it matters).

        References
        ----------
        Smith, STOC 2011; Dwork and Roth 2014, section 3.3 (report-noisy-max).

        Examples
        --------
        >>> import dpframe
        >>> from dpframe.datasets import census
        >>> df = census(2000, rng=0)
        >>> df.dp.set_budget(epsilon=1.0)
        >>> quartiles = df.dp.quantile("Age", [0.25, 0.75], epsilon=0.5, bounds=(0, 100))
        >>> list(quartiles.index)
        [0.25, 0.75]
        """
        where = _validation.where_in_caller(where)
        self._geometric_only(noise, "quantile")
        eps = _validation.epsilon(epsilon)
        generator = _validation.rng(rng)
        values = self._backend.numeric_column(column, "column")
        groups = self._groups_of(by, domain)
        contribution = self._contribution("quantile", max_rows, max_groups, bool(groups))
        rows = self._rows(where, groups, contribution, generator, column)
        checked = _validation.sum_bounds(bounds)
        grid, _ = _quantiles.candidate_cells(checked, candidates)
        scope = self._scope("quantile", [column], groups, where, generator)
        per_row = contribution.noise_epsilon(eps)
        whole = _plans.quantile_release(scope, per_row, q, checked, grid)
        release = contribution.charged(whole)
        parts = tuple(
            map(
                contribution.charged,
                _plans.quantile_parts(whole, scope, per_row, q, checked, grid),
            )
        )

        # Checked and charged per quantile: on a zCDP account k quantiles of epsilon / k
        # cost k (epsilon / k)**2 / 2.
        with self.ledger.transaction(eps, planned=parts) as spending:
            counts = rows.cell_table(values, grid, groups).reshape(-1, grid.size)
            released = mechanisms.quantile_of_counts(
                counts, q, epsilon=per_row, bounds=checked, candidates=grid, rng=generator
            )
            spending.drawn(*parts)

        return _tables.quantile_result(
            released, q, groups, column, call_metadata(spending.parts, release)
        )

    @_validation.in_call_terms
    def median(
        self,
        column: ColumnLabel,
        *,
        epsilon: PrivacyAmount,
        bounds: Bounds,
        candidates: ArrayLike | None = None,
        by: Columns | None = None,
        where: Where = None,
        domain: Domain | None = None,
        max_rows: int | None = None,
        max_groups: int | None = None,
        noise: NoiseKind = "geometric",
        rng: RNGLike | None = None,
    ) -> _results.DPFloat | pd.Series[float]:
        """Noisy median: :meth:`quantile` at 0.5 (same parameters).

        Parameters
        ----------
        column : column name
            A numeric column; missing values are skipped.
        epsilon : float
            Privacy budget of this call (> 0).
        bounds : (lo, hi)
            Declared range of one value.
        candidates : array_like of float, optional
            The grid the release is chosen from.
        by : column name or list of names, optional
            A median per group over the declared domains.
        where : str, bool Series or bool array, optional
            Use only the rows satisfying this condition.
        domain : dict, optional
            Declared keys of grouping columns for this call.
        max_rows : int, optional
            Required on a frame with a privacy unit: the most rows one unit may
            contribute to one group (or to the result, ungrouped); rows beyond it are
            dropped at random.
        max_groups : int, optional
            Required on a frame with a privacy unit for a grouped release: the most
            groups (cells) one unit may contribute to.
        noise : {"geometric"}, default "geometric"
            Only the geometric noise of report-noisy-max: a quantile is chosen by a pure
            epsilon-DP mechanism (``"gaussian"`` is refused; on a zCDP budget the call is
            charged ``rho = epsilon**2 / 2``).
        rng : numpy Generator or seed, optional
            For teaching and tests only; the release is recorded as not private.

        Returns
        -------
        DPFloat or pandas.Series
            The median, or one per group.

        See Also
        --------
        quantile : Any quantile.
        mean : The mean.

        Notes
        -----
        As :meth:`quantile` with ``q=0.5``.

        Examples
        --------
        >>> import dpframe
        >>> import numpy as np
        >>> from dpframe.datasets import census
        >>> df = census(2000, rng=0)
        >>> df.dp.set_budget(epsilon=1.0)
        >>> middle = df.dp.median("Age", epsilon=0.5, bounds=(0, 100), candidates=np.arange(101))
        >>> float(middle).is_integer()
        True
        """
        where = _validation.where_in_caller(where)
        return self.quantile(
            column,
            0.5,
            epsilon=epsilon,
            bounds=bounds,
            candidates=candidates,
            by=by,
            where=where,
            domain=domain,
            max_rows=max_rows,
            max_groups=max_groups,
            noise=noise,
            rng=rng,
        )

    # ------------------------------------------------------------ value counts and describe

    @_validation.in_call_terms
    def value_counts(
        self,
        column: ColumnLabel,
        *,
        epsilon: PrivacyAmount | None = None,
        normalize: bool = False,
        sort: bool = True,
        ascending: bool = False,
        dropna: bool = True,
        nonnegative: bool = False,
        where: Where = None,
        domain: Domain | None = None,
        delta: PrivacyAmount = 0.0,
        noise: NoiseKind = "geometric",
        rho: PrivacyAmount | None = None,
        max_rows: int | None = None,
        max_groups: int | None = None,
        rng: RNGLike | None = None,
    ) -> pd.Series[float]:
        """Noisy ``df[column].value_counts()`` over the column's declared domain.

        Parameters
        ----------
        column : column name or list of column names
            The column whose keys are counted (its keys come from the declared domain);
            with several, their combinations, like ``df.value_counts([...])`` (a
            MultiIndex over every combination of the declared keys).
        epsilon : float
            Privacy budget of this call (> 0).
        normalize : bool, default False
            Shares of the noisy total instead of counts, with an interval for each
            (``noise_interval``), as for a normalized :meth:`crosstab`.
        sort : bool, default True
            Sort by the noisy counts (post-processing), as pandas does.
        ascending : bool, default False
            Sort order.
        dropna : bool, default True
            As in pandas: with ``False``, rows whose key is missing get a NaN entry.
        nonnegative : bool, default False
            Set negative noisy counts to 0 (before normalizing).
        where : str, bool Series or bool array, optional
            Count only the rows satisfying this condition.
        domain : dict, optional
            Declared keys of ``column`` for this call.
        delta : float, default 0.0
            With ``noise="gaussian"`` and ``epsilon``: the delta of the cost.
        noise : {"geometric", "gaussian"}, default "geometric"
            The noise: the exact geometric mechanism (pure epsilon-DP), or the exact
            discrete Gaussian (zCDP, cost ``rho``), which is cheaper when one person
            touches many cells (L2 sensitivity ``sqrt(max_groups) * max_rows``).
        rho : float, optional
            With ``noise="gaussian"``: the zCDP cost. Alternatively give ``epsilon`` and
            ``delta``, converted to the largest rho that implies them.
        max_rows : int, optional
            Required on a frame with a privacy unit: the most rows one unit may
            contribute to one group (or to the result, ungrouped); rows beyond it are
            dropped at random.
        max_groups : int, optional
            Required on a frame with a privacy unit for a grouped release: the most
            groups (cells) one unit may contribute to.
        rng : numpy Generator or seed, optional
            For teaching and tests only; the release is recorded as not private.

        Returns
        -------
        pandas.Series
            Named ``count`` (or ``proportion``), indexed by the keys, like pandas'.
            Every declared key is there, seen or not: which keys occur is private.

        See Also
        --------
        count : The same counts in the declared order.

        Notes
        -----
        One row is in one cell (sensitivity 1, parallel composition): the counts are one
        ``epsilon``-DP release with exact geometric noise; sorting and normalizing are
        post-processing.

        Examples
        --------
        >>> import dpframe
        >>> from dpframe.datasets import CENSUS_DOMAINS, census
        >>> df = census(2000, rng=0)
        >>> df.dp.set_budget(epsilon=1.0, domains=CENSUS_DOMAINS)
        >>> jobs = df.dp.value_counts("Occupation", epsilon=0.5)
        >>> jobs.name, jobs.index.name, len(jobs)
        ('count', 'Occupation', 5)
        """
        where = _validation.where_in_caller(where)
        gaussian = self._gaussian(noise, epsilon, delta, rho, False, "value_counts")
        keep_nonnegative = _validation.flag(nonnegative, "nonnegative")
        for name, value in (("normalize", normalize), ("sort", sort), ("ascending", ascending)):
            _validation.flag(value, name)
        groups = self._groups(column, domain, "column")
        if not _validation.flag(dropna, "dropna"):
            groups = [group.with_missing_cell() for group in groups]
        generator = _validation.rng(rng)
        contribution = self._contribution("value_counts", max_rows, max_groups, True)
        rows = self._rows(where, groups, contribution, generator)
        scope = self._scope("value_counts", [], groups, where, generator)
        post: tuple[str, ...] = ()  # sorted (after any normalizing) in value_counts_result
        shape = (_size(groups), 1)  # the shares' bars: each count and the total, at alpha/2
        if gaussian is not None:
            release, squared = _plans.gaussian_release(scope, gaussian, contribution, post=post)
            bars = None if not normalize else _plans.gaussian_table_bars(
                gaussian.rho, squared, 1.0, shape, margins=True, nonnegative=keep_nonnegative,
                alpha=_plans.ALPHA / 2,
            )  # fmt: skip
            with self.ledger.transaction(rho=gaussian.rho) as spending:
                noisy = mechanisms.discrete_gaussian(
                    rows.count_table(groups), rho=gaussian.rho, sensitivity_squared=squared,
                    rng=generator,
                )  # fmt: skip
                spending.drawn(release)
        else:
            eps = _validation.epsilon(epsilon)
            per_row = contribution.noise_epsilon(eps)
            release = contribution.charged(_plans.count_release(scope, per_row, post))
            bars = None if not normalize else _plans.table_bars(
                per_row, 1, 1.0, shape, margins=True, nonnegative=keep_nonnegative,
                alpha=_plans.ALPHA / 2,
            )  # fmt: skip
            with self.ledger.transaction(eps) as spending:
                counts = rows.count_table(groups)
                noisy = mechanisms.geometric(counts, epsilon=per_row, rng=generator)
                spending.drawn(release)

        # A list of columns (even of one) gives a MultiIndex, as DataFrame.value_counts does.
        given: object = column  # the annotation says one label; a list is read as several
        several = isinstance(given, list) or (
            isinstance(given, tuple) and len(groups) == len(given) and given != groups[0].name
        )
        return _tables.value_counts_result(
            noisy.reshape(-1), groups, release, bars, normalize, sort, ascending,
            keep_nonnegative, multi_index=several,
        )  # fmt: skip

    @_validation.in_call_terms
    def describe(
        self,
        *,
        epsilon: PrivacyAmount | None = None,
        bounds: Mapping[ColumnLabel, Bounds],
        percentiles: Sequence[float] = (0.25, 0.5, 0.75),
        where: Where = None,
        max_rows: int | None = None,
        noise: NoiseKind = "geometric",
        rho: PrivacyAmount | None = None,
        delta: PrivacyAmount = 0.0,
        rng: RNGLike | None = None,
    ) -> pd.DataFrame:
        """A noisy ``DataFrame.describe()``: count, mean, std and percentiles per column.

        Parameters
        ----------
        epsilon : float
            Privacy budget of this call (> 0), split evenly between the columns, and in
            each column half for count, mean and std, half for the percentiles. With
            ``noise="gaussian"``, give ``rho`` or ``epsilon`` with ``delta``.
        bounds : dict
            ``{column: (lo, hi)}``: the numeric columns to describe and their declared
            ranges.
        percentiles : sequence of float, default (0.25, 0.5, 0.75)
            As in pandas: distinct numbers in [0, 1], released in increasing order and
            labelled as pandas labels them (``"25%"``, ``"33.3%"``); at least one.
        where : str, bool Series or bool array, optional
            Describe only the rows satisfying this condition.
        max_rows : int, optional
            Required on a frame with a privacy unit: the most rows one unit may
            contribute; rows beyond it are dropped at random.
        noise : {"geometric", "gaussian"}, default "geometric"
            The noise of count, mean and std. With ``"gaussian"`` they get discrete
            Gaussian noise at half of each column's share of ``rho`` (zCDP), and the
            ``p`` percentiles, chosen by report-noisy-max (a pure epsilon-DP mechanism),
            get the largest ``epsilon`` whose ``p`` releases of ``epsilon / p`` cost at
            most the other half: ``epsilon**2 / (2 p)``.
        rho : float, optional
            The zCDP cost of the call, with ``noise="gaussian"`` (instead of ``epsilon``
            and ``delta``, which are then converted to the largest rho that implies them).
        delta : float, default 0
            With ``noise="gaussian"`` and ``epsilon``: the delta of the converted cost.
        rng : numpy Generator or seed, optional
            For teaching and tests only; the release is recorded as not private.

        Returns
        -------
        pandas.DataFrame
            Laid out like ``DataFrame.describe()`` without ``min`` and ``max``: the
            extremes are single values of single people, and no bounded-noise release of
            them is useful. The split of epsilon is in ``release_info(...)["split"]``.

        See Also
        --------
        mean, std, quantile : The statistics, one at a time.

        Notes
        -----
        For each column, the count (of non-missing values), mean and standard deviation
        come from one variance release (:meth:`var`'s parts: count, centred sum, centred
        sum of squares); its ``p`` percentiles from :meth:`quantile`, each a release of
        ``epsilon_q / p``. They read the same rows (with a privacy unit, each column's
        rows are bounded on their own, its missing values left out first), so their
        costs add (sequential composition): the whole table costs ``epsilon``. With
        ``noise="gaussian"`` each column's three moment parts share ``rho / (2 k)`` of
        zCDP (discrete Gaussian noise, L2 sensitivity of one row or, with a privacy unit,
        of ``max_rows`` rows), and its percentiles are ``p`` pure releases of
        ``epsilon_q / p``, ``p (epsilon_q / p)**2 / 2``-zCDP in all (Bun and Steinke
        2016, Proposition 1.4), at most ``rho / (2 k)`` on a zCDP account: the table is
        ``rho``-zCDP. On an (epsilon, delta) budget before its first zCDP release the
        percentiles are charged first, as plain epsilon, so they get ``epsilon_q`` with
        ``epsilon_q**2 / 2 <= rho / (2 k)`` instead.

        Examples
        --------
        >>> import dpframe
        >>> from dpframe.datasets import census
        >>> df = census(2000, rng=0)
        >>> df.dp.set_budget(epsilon=2.0)
        >>> summary = df.dp.describe(epsilon=1.0, bounds={"Age": (0, 100)})
        >>> list(summary.index)
        ['count', 'mean', 'std', '25%', '50%', '75%']
        """
        where = _validation.where_in_caller(where)
        gaussian = self._gaussian(noise, epsilon, delta, rho, False, "describe")
        generator = _validation.rng(rng)
        columns = _validation.describe_bounds(bounds)
        levels = _validation.describe_percentiles(percentiles)
        _tables.percentile_labels(levels)  # labels that cannot be made refuse before charging
        for column in columns:
            self._backend.numeric_column(column, "bounds")
        contribution = self._contribution("describe", max_rows, None, False)
        rows = self._rows(where, [], contribution, generator)
        # With a unit, each column's rows are bounded on their own, its missing values
        # left out first (they take no place of max_rows): one release per column.
        rows_of = {
            column: rows
            if contribution.unit is None
            else self._rows(where, [], contribution, generator, column)
            for column in columns
        }
        split = _plans.describe_split(
            None if gaussian is None else gaussian.rho,
            None if gaussian is not None else _validation.epsilon(epsilon),
            len(columns),
            # On a zCDP account the p percentiles cost epsilon**2 / (2 p); before it opens
            # (an (epsilon, delta) budget) they are charged first, as plain epsilon.
            len(levels) if self.ledger.remaining.rho is not None else 1,
        )
        moment_cost = (
            None if split.rho is None else (_plans.Gaussian(split.rho, None), contribution)
        )
        per_row = contribution.noise_epsilon(split.percentiles_epsilon)
        plans = []
        summaries: dict[Hashable, Release] = {}
        for c, b in columns.items():
            scope = self._scope("describe", [c], [], where, generator)
            moment = _plans.moment_release(
                scope, "std", contribution.noise_epsilon(split.epsilon), b, 1, moment_cost
            )
            # The bars of all the percentiles (the table's metadata), and each percentile
            # as the release of epsilon / p it is (the ledger's parts).
            whole = _plans.quantile_release(scope, per_row, levels, b, None)
            summaries[c] = contribution.charged(whole)
            quantiles = tuple(
                map(
                    contribution.charged,
                    _plans.quantile_parts(whole, scope, per_row, levels, b, None),
                )
            )
            charged = (
                moment.parts if moment_cost else tuple(map(contribution.charged, moment.parts))
            )
            plans.append((moment, charged, quantiles))
        # Checked part by part, as they are charged: on a zCDP account each percentile
        # costs (epsilon_q / p)**2 / 2, not a share of (k epsilon_q)**2 / 2.
        planned = [part for _, charged, quantiles in plans for part in (*charged, *quantiles)]
        cost = split.call_cost(len(columns))

        with self.ledger.transaction(
            cost.get("epsilon", Fraction(0)), rho=cost.get("rho", Fraction(0)), planned=planned
        ) as spending:
            stats = []
            for column, (moment, charged, quantiles) in zip(columns, plans, strict=True):
                noisy = _noisy_parts(
                    moment, rows_of[column].sum_tables(column, moment.grids, []), generator
                )
                spending.drawn(*charged)
                candidates, _ = _quantiles.candidate_cells(columns[column], None)
                released = mechanisms.quantile_of_counts(
                    rows_of[column].cell_table(column, candidates, []), levels, epsilon=per_row,
                    bounds=columns[column], rng=generator,
                )  # fmt: skip
                spending.drawn(*quantiles)
                stats.append((moment, noisy, released[0]))

        return _tables.describe_result(columns, levels, stats, spending.parts, split, summaries)

    # ------------------------------------------------------------ groupby

    def groupby(self, by: Columns, *, domain: Domain | None = None) -> DPGroupBy:
        """Private ``df.groupby(by)``, as in ``df.dp.groupby("Sex")["Age"].mean(...)``.

        Parameters
        ----------
        by : column name or list of names
            The grouping columns; their keys come from the declared domains.
        domain : dict, optional
            Declared keys of the grouping columns, for the calls made through the result.

        Returns
        -------
        DPGroupBy
            Select a column (``[column]``) for ``count``, ``size``, ``sum``, ``mean``,
            ``var``, ``std``, ``median``, ``quantile`` and ``agg``, each taking ``epsilon``
            (and ``bounds`` where needed); or call ``size`` directly.

        See Also
        --------
        count, mean, quantile : The releases it makes, with ``by``.

        Notes
        -----
        Nothing is released or charged until a statistic is asked for; each statistic is
        the accessor's release with ``by`` (same privacy, ledger and error bars). Unlike
        ``DataFrame.groupby``, every declared group is in the result (``observed=False``):
        which groups occur is private.

        Examples
        --------
        >>> import dpframe
        >>> from dpframe.datasets import CENSUS_DOMAINS, census
        >>> df = census(1000, rng=0)
        >>> df.dp.set_budget(epsilon=1.0, domains=CENSUS_DOMAINS)
        >>> means = df.dp.groupby("Sex")["Age"].mean(epsilon=0.5, bounds=(0, 100))
        >>> list(means.index)
        ['M', 'F']
        """
        _validation.column_names(by, "by", self._frame.columns)
        return DPGroupBy(self, by, domain)

    @_validation.in_call_terms
    def _count_present(
        self,
        column: ColumnLabel,
        *,
        epsilon: PrivacyAmount,
        by: Columns | None,
        where: Where,
        domain: Domain | None,
        max_rows: int | None,
        max_groups: int | None,
        rng: RNGLike | None,
    ) -> pd.Series[int] | _results.DPInt:
        """Noisy number of non-missing values of ``column`` per group (``count()``): a
        Series over the groups, or an int without ``by``."""
        eps = _validation.epsilon(epsilon)
        generator = _validation.rng(rng)
        (dtype,) = self._backend.check_columns([column], "column").values()
        if not _validation.is_real_dtype(dtype):
            raise InvalidParameterTypeError(
                f"column {column!r} has dtype {dtype}: a count of non-missing values per "
                f"group reads a numeric column. For another column, count the rows where it "
                f"is present: df.dp.groupby(...).size(..., where=df[{column!r}].notna())."
            )
        values = self._backend.numeric_column(column, "column")
        groups = self._groups_of(by, domain)
        contribution = self._contribution("count", max_rows, max_groups, bool(groups))
        rows = self._rows(where, groups, contribution, generator, column)
        scope = self._scope("count", [column], groups, where, generator)
        per_row = contribution.noise_epsilon(eps)
        release = contribution.charged(_plans.count_release(scope, per_row))
        present = SumGrid(0.0, 1.0, 1.0, present=True, limit=1)

        with self.ledger.transaction(eps) as spending:
            (exact,) = rows.sum_tables(values, [present], groups)
            noisy = _noisy_units(np.asarray(exact).reshape(-1), present, generator, epsilon=per_row)
            spending.drawn(release)

        counts = np.rint(noisy).astype(np.int64)
        if not groups:
            return _results.integer(int(counts[0]), call_metadata([release]))
        return _results.series(counts, _tables.labels(groups), column, call_metadata([release]))

    # ------------------------------------------------------------ crosstab

    @_validation.in_call_terms
    def crosstab(
        self,
        index: Columns,
        columns: Columns,
        *,
        epsilon: PrivacyAmount | None = None,
        values: ColumnLabel | None = None,
        aggfunc: str | None = None,
        bounds: Bounds | None = None,
        margins: bool = False,
        margins_name: str = "All",
        normalize: Normalize = False,
        nonnegative: bool = False,
        domain: Domain | None = None,
        dropna: bool = True,
        rownames: Sequence[ColumnLabel] | None = None,
        colnames: Sequence[ColumnLabel] | None = None,
        delta: PrivacyAmount = 0.0,
        noise: NoiseKind = "geometric",
        rho: PrivacyAmount | None = None,
        max_rows: int | None = None,
        max_groups: int | None = None,
        rng: RNGLike | None = None,
    ) -> pd.DataFrame:
        """A noisy ``pd.crosstab`` of two (sets of) columns over their declared domains.

        Parameters
        ----------
        index, columns : column name, Series of the frame, or a list of them
            The row and column groupings, like ``pd.crosstab(df[index], df[columns])``
            (``df.dp.crosstab(df["Occupation"], df["Sex"], ...)`` works too).
        epsilon : float
            Privacy budget spent by this release (> 0).
        values : column name or Series of the frame, optional
            With ``aggfunc="sum"`` and ``bounds``: release clamped sums per cell instead
            of counts.
        aggfunc : {"sum"}, optional
            Goes with ``values``; only sums are released (for means, see the Notes).
        bounds : (lo, hi), optional
            With ``values``: the declared range of one value.
        margins : bool, default False
            Add row and column totals, computed from the noisy cells (post-processing,
            no extra budget).
        margins_name : str, default "All"
            The label of the totals.
        normalize : bool, {"all", "index", "columns"} or {0, 1}, default False
            As in ``pd.crosstab``, computed from the noisy cells. Each share gets an
            interval (``noise_interval`` in :func:`dpframe.release_info`) instead of a
            half-width; pass ``nonnegative=True`` too so that shares stay in [0, 1].
        nonnegative : bool, default False
            Set negative noisy cells to 0 before margins and normalization.
        domain : dict, optional
            Declared keys of the grouping columns, for this call (see :meth:`set_budget`
            for declaring them once for the data set).
        dropna : bool, default True
            As in ``pd.crosstab``: rows whose key is missing are left out; with ``False``,
            each grouping gets a missing-value cell (NaN) for them. Unlike pandas, keys
            with no rows are kept either way: which keys occur is private.
        rownames, colnames : sequence, optional
            Names of the row and column levels, one per grouping, as in ``pd.crosstab``.
        delta : float, default 0.0
            With ``noise="gaussian"`` and ``epsilon``: the delta of the cost.
        noise : {"geometric", "gaussian"}, default "geometric"
            The noise: the exact geometric mechanism (pure epsilon-DP), or the exact
            discrete Gaussian (zCDP, cost ``rho``), which is cheaper when one person
            touches many cells (L2 sensitivity ``sqrt(max_groups) * max_rows``).
        rho : float, optional
            With ``noise="gaussian"``: the zCDP cost. Alternatively give ``epsilon`` and
            ``delta``, converted to the largest rho that implies them.
        max_rows : int, optional
            Required on a frame with a privacy unit: the most rows one unit may
            contribute to one group (or to the result, ungrouped); rows beyond it are
            dropped at random.
        max_groups : int, optional
            Required on a frame with a privacy unit for a grouped release: the most
            groups (cells) one unit may contribute to.
        rng : numpy Generator or seed, optional
            For teaching and tests only; the release is recorded as not private.

        Returns
        -------
        pandas.DataFrame
            Shaped and labelled like ``pd.crosstab(..., dropna=False)``: one row and one
            column per key of the declared domains, in their declared order, empty cells
            included. :func:`dpframe.release_info` gives the 95% noise bound of every
            cell.

        See Also
        --------
        count : Counts of one grouping, as a Series.
        sum : Clamped sums, overall or per group.

        Notes
        -----
        Neighbouring data sets differ by one row. A row falls in at most one cell (rows
        whose key is missing or outside a domain fall in none: they are left out, as
        ``pd.crosstab`` leaves out NaN keys), so it changes one count by 1, or one sum
        by at most ``max(|lo|, |hi|)``; the cells are disjoint, and one ``epsilon``
        covers the whole table. Keys come only from the declared domains, never from the
        data, and keys with no rows still get a noisy count: "we must also protect the
        real zeros" (seed 003). Noise: :func:`dpframe.mechanisms.geometric`, on the
        counts or on a fixed-point grid for sums (see :meth:`sum`). For a mean per cell,
        divide a table of sums by a table of counts, each with its own epsilon.

        References
        ----------
        Seed ``003_ce3353c9005cacf5.txt``.

        Examples
        --------
        >>> import dpframe
        >>> from dpframe.datasets import CENSUS_DOMAINS, census
        >>> df = census(1000, rng=0)
        >>> df.dp.set_budget(epsilon=1.0, domains=CENSUS_DOMAINS)
        >>> table = df.dp.crosstab("Occupation", "Sex", epsilon=0.5, margins=True)
        >>> list(table.columns)
        ['M', 'F', 'All']
        """
        gaussian = self._gaussian(noise, epsilon, delta, rho, False, "crosstab")
        generator = _validation.rng(rng)
        if values is not None:  # pd.crosstab(..., values=df["wage"]): a column of the frame
            values = self._backend.column_label(values, "values")
        options = _validation.crosstab_options(
            values, aggfunc, bounds, margins, margins_name, normalize, nonnegative, dropna,
            rownames, colnames,
        )  # fmt: skip
        summed = None if values is None else self._backend.numeric_column(values, "values")
        row_groups, col_groups = self._table_groups(index, columns, domain, options)
        groups = row_groups + col_groups
        contribution = self._contribution("crosstab", max_rows, max_groups, True)
        rows = self._rows(None, groups, contribution, generator, values, counts_only=values is None)
        scope = self._scope("crosstab", [] if values is None else [values], groups, None, generator)
        shape = (_size(row_groups), _size(col_groups))
        cells: NDArray[Any]
        if gaussian is not None:
            plan = _plans.table_plan(scope, Fraction(0), options, shape, (gaussian, contribution))
            squared = plan.sensitivity_squared
            with self.ledger.transaction(rho=gaussian.rho) as spending:
                if plan.grid is None or summed is None:
                    cells = mechanisms.discrete_gaussian(
                        rows.count_table(groups), rho=gaussian.rho, sensitivity_squared=squared,
                        rng=generator,
                    )  # fmt: skip
                else:
                    exact = rows.sum_table(summed, plan.grid, groups)
                    cells = _noisy_units(
                        exact, plan.grid, generator, rho=gaussian.rho, squared=squared
                    )
                spending.drawn(plan.release)
        else:
            eps = _validation.epsilon(epsilon)
            per_row = contribution.noise_epsilon(eps)
            plan = _plans.table_plan(scope, per_row, options, shape)
            plan = dataclasses.replace(plan, release=contribution.charged(plan.release))
            with self.ledger.transaction(eps) as spending:
                if plan.grid is None or summed is None:
                    counts = rows.count_table(groups)
                    cells = mechanisms.geometric(counts, epsilon=per_row, rng=generator)
                else:
                    exact = rows.sum_table(summed, plan.grid, groups)
                    cells = _noisy_units(exact, plan.grid, generator, epsilon=per_row)
                spending.drawn(plan.release)

        table, release = _tables.crosstab_result(cells, row_groups, col_groups, options, plan)
        return _results.frame(table, call_metadata([release]))

    def _table_groups(
        self,
        index: Columns,
        columns: Columns,
        domain: Domain | None,
        options: _validation.CrosstabOptions,
    ) -> tuple[list[Group], list[Group]]:
        """A crosstab's row and column groupings, checked together (schema only)."""
        self.ledger.require_budget()  # first, as in _groups
        row_keys = _validation.column_names(index, "index", self._frame.columns)
        col_keys = _validation.column_names(columns, "columns", self._frame.columns)
        row_names = [self._backend.column_label(key, "index") for key in row_keys]
        col_names = [self._backend.column_label(key, "columns") for key in col_keys]
        self._backend.check_columns(row_names, "index")
        self._backend.check_columns(col_names, "columns")
        _validation.check_level_names(options.rownames, len(row_names), "rownames")
        _validation.check_level_names(options.colnames, len(col_names), "colnames")
        checked = _validation.check_domain_columns(domain, [*row_names, *col_names])
        row_groups = [self._backend.group(name, checked, "index") for name in row_names]
        col_groups = [self._backend.group(name, checked, "columns") for name in col_names]
        if not options.dropna:  # pd.crosstab(dropna=False): missing keys get their own cell
            row_groups = [group.with_missing_cell() for group in row_groups]
            col_groups = [group.with_missing_cell() for group in col_groups]
        for group in (*row_groups, *col_groups):
            if options.margins and options.margins_name in group.domain:
                raise DomainError(
                    f"margins_name={options.margins_name!r} is also a key of {group.name!r}; "
                    f"pick another."
                )
        return row_groups, col_groups

    # ------------------------------------------------------------ threshold decision

    @overload
    def threshold_decision(  # type: ignore[overload-overlap]  # by=None (Hashable) wins
        self,
        *,
        min_count: int,
        epsilon: PrivacyAmount,
        delta: PrivacyAmount = 0.0,
        method: DecisionMethod = "laplace",
        p: float = 0.5,
        by: None = None,
        where: Where = None,
        domain: Domain | None = None,
        max_rows: int | None = None,
        max_groups: int | None = None,
        rng: RNGLike | None = None,
    ) -> _results.DPBool: ...
    @overload
    def threshold_decision(
        self,
        *,
        min_count: int,
        epsilon: PrivacyAmount,
        delta: PrivacyAmount = 0.0,
        method: DecisionMethod = "laplace",
        p: float = 0.5,
        by: Columns,
        where: Where = None,
        domain: Domain | None = None,
        max_rows: int | None = None,
        max_groups: int | None = None,
        rng: RNGLike | None = None,
    ) -> pd.Series[bool]: ...
    @_validation.in_call_terms
    def threshold_decision(
        self,
        *,
        min_count: int,
        epsilon: PrivacyAmount,
        delta: PrivacyAmount = 0.0,
        method: DecisionMethod = "laplace",
        p: float = 0.5,
        by: Columns | None = None,
        where: Where = None,
        domain: Domain | None = None,
        max_rows: int | None = None,
        max_groups: int | None = None,
        rng: RNGLike | None = None,
    ) -> _results.DPBool | pd.Series[bool]:
        """Decide, privately, whether there are at least ``min_count`` rows (satisfying ``where``).

        Parameters
        ----------
        min_count : int
            The threshold m.
        epsilon : float
            Privacy-loss parameter of the decision.
        delta : float, default 0.0
            ``"laplace"`` spends no delta (pass 0); ``"generalized"`` trades delta for a
            sharper decision; ``"cutoff"`` needs ``delta >= 1 - exp(-epsilon)``.
        method : {"laplace", "cutoff", "generalized"}, default "laplace"
            The decision rule of seed 001 (see :func:`dpframe.mechanisms.decision_probability`).
            ``"cutoff"`` is always right at or above ``min_count`` but needs
            ``delta >= 1 - exp(-epsilon)`` (pass it, to acknowledge it): 0.63 at epsilon 1,
            which is large; that is what is charged.
        p : float, default 0.5
            Probability of deciding True when the count is exactly ``min_count``
            (``"cutoff"`` has no such choice).
        by : column name or list of names, optional
            One decision per key of the declared domain (seed 001's rule in each cell).
        where : str, bool Series or bool array, optional
            As for :meth:`count`.
        domain : dict, optional
            Declared keys for grouping columns that are not Categorical.
        max_rows : int, optional
            Required on a frame with a privacy unit: the most rows one unit may
            contribute to one group (or to the result, ungrouped); rows beyond it are
            dropped at random.
        max_groups : int, optional
            Required on a frame with a privacy unit for a grouped release: the most
            groups (cells) one unit may contribute to.
        rng : numpy Generator or seed, optional
            For teaching and tests only; recorded as not private.

        Returns
        -------
        DPBool or pandas.Series
            The decision: behaves as ``True`` or ``False``, with its metadata in ``.dp``
            (:func:`dpframe.release_info`); with ``by``, a bool Series over the domain.

        See Also
        --------
        count : The noisy count itself.
        dpframe.mechanisms.decision_probability : The probability curves.

        Notes
        -----
        Neighbouring data sets differ by one row, which moves the count by 1; each rule
        satisfies ``P(Q(N+1)=1) <= e^eps P(Q(N)=1) + delta`` and
        ``P(Q(N)=0) <= e^eps P(Q(N+1)=0) + delta`` for every N (seed 001), and the
        decision is drawn as one exact Bernoulli trial. With ``by``, one row is in one
        cell, so the decisions together cost one (parallel composition).

        With a privacy unit, one unit moves at most ``max_groups`` cells, each by at most
        ``max_rows`` rows. Each cell then decides on ``count // max_rows`` (which one
        unit moves by at most 1) against ``ceil(min_count / max_rows)``, at
        ``epsilon / max_groups`` and ``delta / max_groups`` (basic composition over the
        cells a unit touches): the decision is about reaching ``min_count`` rounded up
        to a multiple of ``max_rows``. The release records the call's cost and a
        sensitivity of ``max_rows * max_groups`` rows, as a count table does; each
        cell's parameters are ``decided_at``, ``cell_epsilon`` and ``cell_delta``.

        References
        ----------
        Seed ``001_ac8d45847700a6b3.txt``.

        Examples
        --------
        >>> import dpframe
        >>> from dpframe.datasets import CENSUS_DOMAINS, census
        >>> df = census(1000, rng=0)
        >>> df.dp.set_budget(epsilon=1.0, domains=CENSUS_DOMAINS)
        >>> df.dp.threshold_decision(min_count=10, epsilon=0.5)
        True
        """
        where = _validation.where_in_caller(where)
        groups = self._groups_of(by, domain)
        contribution = self._contribution("threshold_decision", max_rows, max_groups, bool(groups))
        if method == "cutoff" and contribution.bounds is not None:
            # The call's delta pays for every cell a unit touches: ask for what they need
            # (more than the single decision check below would ask for).
            _decisions.check_cutoff_cells(
                _validation.epsilon(epsilon),
                _validation.delta(delta),
                contribution.bounds.max_groups,
            )
        params = _decisions.check_parameters(min_count, epsilon, delta, method, p)
        generator = _validation.rng(rng)
        rows = self._rows(where, groups, contribution, generator)
        cell = contribution.decision_parameters(params)
        scope = self._scope("threshold_decision", [], groups, where, generator)
        release = contribution.charged_decision(_plans.decision_release(scope, cell, params))

        with self.ledger.transaction(release.epsilon, release.delta) as spending:
            counts = rows.count_table(groups).reshape(-1) if groups else np.array([rows.count()])
            decided = mechanisms.threshold_decision(
                counts // contribution.rows_per_step,
                min_count=cell.min_count,
                epsilon=cell.epsilon,
                delta=cell.delta,
                method=cell.method,
                p=cell.p,
                rng=generator,
            )
            spending.drawn(release)

        info = call_metadata(spending.parts)
        if not groups:
            return _results.decision(bool(decided[0]), info)
        return _results.series(decided, _tables.labels(groups), "decision", info)


_Validate = Literal["one_to_one", "many_to_one"]
_AT_MOST_ONE_MATCH: dict[str, _Validate] = {
    "1:1": "one_to_one",
    "one_to_one": "one_to_one",
    "m:1": "many_to_one",
    "many_to_one": "many_to_one",
}


def _same_ledger(ledger: Ledger, other: object) -> bool:
    """Whether ``other`` spends ``ledger`` (True), or no budget (False); refuse another one."""
    if not isinstance(other, pd.DataFrame | pd.Series):
        raise InvalidParameterTypeError(
            f"expected a pandas DataFrame or named Series to combine with, got "
            f"{type(other).__name__}."
        )
    found = _attrs.ledger_of(other, create=False)
    if found is ledger:
        return True
    if found is None or (not found.budget_set and not len(found.history)):
        return False  # a public table (its .dp may have made an empty ledger)
    if found is not ledger:
        raise LedgerConflictError(
            "The other frame spends a different privacy budget, so the combined frame could "
            "not be charged to a single one. Release from each frame separately, or "
            "combine the raw data first and call .dp.set_budget once on the combined frame."
        )
    return True


def _check_unit_self_merge(unit: tuple[Hashable, ...], kwargs: Mapping[str, Any]) -> None:
    """Refuse a merge of unit-protected data with itself that is not on the unit's columns."""
    on = kwargs.get("on")
    keys = [on] if isinstance(on, str) or not isinstance(on, list | tuple) else list(on)
    others = set(kwargs) & {"left_on", "right_on", "left_index", "right_index"}
    if (
        on is None
        or others
        or not all(name in keys for name in unit)
        or kwargs.get("how") == "cross"
    ):
        raise PrivacyUnitError(
            f"merging this frame with a frame of the same data pairs rows of different units "
            f"unless it joins on the unit's columns: the result's rows would carry another "
            f"unit's values, which no bound on this unit limits. Merge on them: "
            f"df.dp.merge(other, on={list(unit)!r} + [...])."
        )


_PANEL_HINT = (
    "If the data holds several rows per person (a panel, households), declare the person "
    'instead, df.dp.set_budget(..., privacy_unit="person_id"): each release then bounds '
    "what one person contributes, and merges may repeat rows."
)


def _refuse_rows_of_nobody(how: object, method: str) -> None:
    """Refuse an outer or right merge with a public table: it adds a row for each of the
    table's keys that *no* person has, so a person's presence moves two rows."""
    if how in ("outer", "right"):
        raise PrivacyUnitError(
            f'how="{how}" adds a row for each key of the other table that no person has, so '
            "whether such a row exists depends on the people in the data: one person would "
            f"move two rows, and releases would spend more than they charge. Use the "
            f'default how="left" (or how="inner") in df.dp.{method}.'
        )


def _self_merge_without_unit(method: str) -> PrivacyUnitError:
    """Why the data cannot be merged with itself when no column identifies a person."""
    return PrivacyUnitError(
        f"this {method} pairs rows of the same data, and without a privacy unit dpframe does "
        "not know which column identifies a person: on a person's id each row meets its "
        "own, but on another key (a spouse's or a parent's id, a household) a row takes "
        "another person's values, and removing that person would change two rows. Declare "
        'the person first, df.dp.set_budget(..., privacy_unit="id") (allowed while no '
        "release was made), and merge on it; or add the columns with assign()."
    )


def _merge_validate(validate: object) -> _Validate:
    """pandas' ``validate=`` for a merge with a public table that may not give a person
    several rows."""
    allowed = _AT_MOST_ONE_MATCH
    if validate is None:
        return "many_to_one"
    if not isinstance(validate, str) or validate not in allowed:
        raise PrivacyUnitError(
            f"validate={validate!r} lets a row of this frame match several rows, so some "
            "people would have several rows and the releases would spend more privacy than "
            f"they charge. Use validate={sorted(set(allowed.values()))!r}."
        )
    return allowed[validate]


def _size(groups: Sequence[Group]) -> int:
    size = 1
    for group in groups:
        size *= len(group.domain)
    return size


def dp(frame: pd.DataFrame | dd.DataFrame) -> DPAccessor:
    """The ``.dp`` accessor of ``frame``, typed for mypy (pandas-stubs cannot know ``df.dp``).

    Parameters
    ----------
    frame : pandas.DataFrame or dask.dataframe.DataFrame
        The data to release from.

    Returns
    -------
    DPAccessor
        The same object as ``frame.dp``.

    See Also
    --------
    DPAccessor : The methods.

    Examples
    --------
    >>> import dpframe
    >>> from dpframe.datasets import census
    >>> df = census(500, rng=1)
    >>> dpframe.dp(df).set_budget(epsilon=1.0, domains={"Sex": ["M", "F"]})
    >>> counts = dpframe.dp(df).count(epsilon=1.0, by="Sex")
    >>> list(counts.index)
    ['M', 'F']
    """
    return DPAccessor(frame)


pd.api.extensions.register_dataframe_accessor("dp")(DPAccessor)
