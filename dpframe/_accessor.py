"""The ``.dp`` DataFrame accessor: drop-in differentially private pandas.

Every method follows the same five steps, in this order, and nothing else:

1. **validate** every argument (``dpframe._validation``), before anything else;
2. **check** the whole cost of the call against the frame's ledger (``Ledger.check``);
   a refused call charges nothing and draws nothing;
3. **aggregate** exactly on the declared domain (``dpframe._aggregate``);
4. **add noise** with a mechanism (``dpframe.mechanisms`` — the only place noise is drawn);
5. **charge** the ledger (``Ledger.charge``) and **wrap** the result (``dpframe._results``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, TypeVar

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dpframe import _aggregate, _decisions, _geometric, _ledger, _results, _validation, mechanisms
from dpframe._random import bit_source
from dpframe.errors import (
    DomainError,
    InvalidParameterError,
    InvalidParameterTypeError,
    NoiseOverflowError,
)

__all__ = ["DPAccessor", "dp"]

T = TypeVar("T")
_ALPHA = 0.05  # error bars are 95% half-widths
_NORMALIZE = (False, True, "all", "index", "columns", 0, 1)


@dataclass(frozen=True)
class _Grouping:
    """Grouping columns resolved against their declared domains."""

    groups: list[_aggregate.Group]

    @property
    def names(self) -> list[Any]:
        return [g.name for g in self.groups]

    @property
    def domains(self) -> list[pd.Index]:
        return [g.domain for g in self.groups]

    @property
    def sizes(self) -> list[int]:
        return [len(g.domain) for g in self.groups]

    def index(self) -> pd.Index:
        """The labels of the cells, in the order of the declared domains."""
        if len(self.groups) == 1:
            only = self.groups[0]
            return _labels(only.domain, only.dtype, only.name)
        product: pd.Index = pd.MultiIndex.from_product(self.domains, names=self.names)
        return product


def _labels(domain: pd.Index, dtype: Any, name: Any) -> pd.Index:
    labels: pd.Index
    if isinstance(dtype, pd.CategoricalDtype) and dtype.categories.equals(domain):
        labels = pd.CategoricalIndex(domain, dtype=dtype, name=name)
    else:
        labels = pd.Index(domain, name=name)
    return labels


def _group(data: Any, names: Sequence[Any], domain: Any, param: str) -> _Grouping:
    groups = []
    for name in names:
        column = data.column(name, param)
        declared = _validation.declared_domain(column, name, domain)
        groups.append(_aggregate.Group(name, declared, column.dtype))
    return _Grouping(groups)


def _flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool | np.bool_):
        raise InvalidParameterTypeError(f"{name} must be True or False, got {value!r}.")
    return bool(value)


class DPAccessor:
    """Differentially private versions of pandas aggregations: ``df.dp``.

    ``import dpframe`` registers this accessor on every DataFrame. For code checked with
    mypy, :func:`dpframe.dp` returns the same object with full type information.

    Every release spends privacy budget from the frame's :class:`~dpframe.Ledger`,
    which belongs to the data: frames derived from this one (copies, filters, column
    selections, ...) spend the same budget.

    Examples
    --------
    >>> import dpframe
    >>> from dpframe.datasets import census
    >>> df = census(1000, seed=0)
    >>> df.dp.set_budget(epsilon=1.0)
    >>> table = df.dp.crosstab("Occupation", "Sex", epsilon=0.5)
    >>> table.shape
    (5, 2)
    >>> float(df.dp.ledger.remaining.epsilon)
    0.5
    """

    def __init__(self, frame: pd.DataFrame) -> None:
        self._frame = frame
        self._data: Any = _aggregate.PandasData(frame)

    # ------------------------------------------------------------ the budget

    @property
    def ledger(self) -> _ledger.Ledger:
        """The ledger of this frame's data: total, spent, remaining and the history of releases."""
        ledger = _ledger.ledger_of(self._frame)
        if ledger is None:  # pragma: no cover - create=True always returns a ledger
            raise RuntimeError("internal error: no ledger")
        return ledger

    def set_budget(self, epsilon: float, delta: float = 0.0) -> None:
        """Set the total privacy budget (epsilon, delta) for this frame's data.

        Without it, spending is tracked with no limit. See :meth:`Ledger.set_budget`
        for the rules (a budget can be lowered, never raised, and never set below what
        is already spent).
        """
        self.ledger.set_budget(epsilon, delta)

    def _spend(
        self,
        cost: tuple[Fraction, Fraction],
        release: Callable[[list[_results.Release]], T],
    ) -> T:
        """Check the whole cost, release, then charge every part whose noise was drawn.

        ``release`` appends each part to the list it is given right after drawing that
        part's noise (its metadata, error bars included, is computed before the draw).
        The parts are charged together even if a later step fails, so drawn noise is
        never free; a call refused before any draw charges nothing.
        """
        ledger = self.ledger
        ledger.check(*cost)
        drawn: list[_results.Release] = []
        try:
            return release(drawn)
        finally:
            if drawn:
                _charge(ledger, drawn)

    # ------------------------------------------------------------ count

    def count(
        self,
        *,
        epsilon: float,
        by: Any = None,
        where: Any = None,
        nonnegative: bool = False,
        domain: dict[Any, Sequence[Any]] | None = None,
        rng: Any = None,
    ) -> Any:
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
        where : str, boolean Series or array, optional
            Count only the rows satisfying this condition (``"Age >= 18"``).
        nonnegative : bool, default False
            Set negative noisy counts to 0 (seed 003's post-processing; biases counts
            upwards, so the default keeps them unbiased).
        domain : dict, optional
            Declared keys for grouping columns that are not Categorical.
        rng : numpy Generator or seed, optional
            For teaching and tests only; the release is recorded as not private.

        Returns
        -------
        DPInt or pandas.Series
            An ``int`` (carrying ``.dp`` metadata) or a Series of ints indexed by the
            domain (metadata in ``.attrs["dp"]``).

        Notes
        -----
        Neighbouring data sets differ by one row, added or removed. A count changes by
        at most 1 (sensitivity 1); with ``by``, that row is in at most one group, so the
        whole Series is ``epsilon``-DP with one budget. Noise: the exact geometric
        mechanism (:func:`dpframe.mechanisms.geometric`).

        References
        ----------
        Seed ``003_ce3353c9005cacf5.txt`` (census workflow); seed ``002_265e5b6700395d7e.txt``.
        """
        eps = _validation.epsilon(epsilon)
        keep_nonnegative = _flag(nonnegative, "nonnegative")
        mask = self._data.where(where)
        grouping = (
            None
            if by is None
            else _group(self._data, _validation.column_names(by, "by"), domain, "by")
        )
        private = rng is None

        part = self._count_release("count", grouping, eps, private, keep_nonnegative)

        def release(drawn: list[_results.Release]) -> Any:
            if grouping is None:
                exact = np.array([self._data.row_count(mask)])
            else:
                exact = self._data.count_table(grouping.groups, mask).reshape(-1)
            noisy = mechanisms.geometric(exact, epsilon=eps, rng=rng)
            drawn.append(part)
            if keep_nonnegative:
                noisy = np.maximum(noisy, 0)
            if grouping is None:
                return _results.scalar(int(noisy[0]), part, integer=True)
            return _results.series(noisy, grouping.index(), "count", part)

        return self._spend((eps, Fraction(0)), release)

    @staticmethod
    def _count_release(
        method: str, grouping: _Grouping | None, eps: Fraction, private: bool, nonnegative: bool
    ) -> _results.Release:
        plan = _geometric.geometric_plan(eps, None, False)
        return _results.Release(
            method=method,
            columns=[] if grouping is None else [str(n) for n in grouping.names],
            mechanism="geometric",
            epsilon=eps,
            delta=Fraction(0),
            sensitivity=1,
            noise_scale=float(1 / eps),
            private=private,
            alpha=_ALPHA,
            error_bound=_geometric.half_width(plan, Fraction(_ALPHA)),
            post_processing=["negative counts set to 0"] if nonnegative else [],
        )

    # ------------------------------------------------------------ sum

    def sum(
        self,
        column: Any,
        *,
        epsilon: float,
        bounds: Any,
        by: Any = None,
        where: Any = None,
        domain: dict[Any, Sequence[Any]] | None = None,
        bounds_epsilon: float | None = None,
        rng: Any = None,
    ) -> Any:
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
        by, where, domain, rng
            As for :meth:`count`.
        bounds_epsilon : float, optional
            With ``bounds="auto"``: the share of ``epsilon`` spent on the bounds
            (default: a quarter). The sum itself gets the rest.

        Returns
        -------
        DPFloat or pandas.Series
            The noisy sum (metadata in ``.dp``), or a Series over the domain of ``by``.

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
        floating-point porosity.

        References
        ----------
        Seed ``004_2d340d4f6924174c.txt`` (bounds and ApproxBounds).
        """
        eps = _validation.epsilon(epsilon)
        values = self._data.numeric(column, "column")
        mask = self._data.where(where)
        grouping = (
            None
            if by is None
            else _group(self._data, _validation.column_names(by, "by"), domain, "by")
        )
        auto = isinstance(bounds, str) and bounds == "auto"
        if auto:
            share = (
                eps / 4
                if bounds_epsilon is None
                else _validation.epsilon(bounds_epsilon, "bounds_epsilon")
            )
            if share >= eps:
                raise InvalidParameterError(
                    f"bounds_epsilon ({float(share):g}) must be less than epsilon "
                    f"({float(eps):g}): it is the share of epsilon spent on the bounds."
                )
            checked_bounds = None
        else:
            if bounds_epsilon is not None:
                raise InvalidParameterError(
                    'bounds_epsilon is only used with bounds="auto"; remove it, or pass '
                    'bounds="auto".'
                )
            if bounds is None:
                raise InvalidParameterError(
                    "sum needs bounds=(lo, hi), the declared range of one value (for example "
                    'bounds=(0, 150000) for earnings), or bounds="auto" to estimate them privately.'
                )
            checked_bounds = _validation.sum_bounds(bounds)
            share = Fraction(0)
        sum_eps = eps - share
        _check_sum_epsilon(sum_eps)
        private = rng is None
        names = [str(column)] + ([] if grouping is None else [str(n) for n in grouping.names])

        def release(drawn: list[_results.Release]) -> Any:
            if checked_bounds is None:
                histogram = self._data.log_histogram(values, mask)
                lo, hi = _approx_bounds(histogram, share, names, private, rng, drawn)
            else:
                lo, hi = checked_bounds
            grid = _aggregate.SumGrid.for_bounds(lo, hi)
            part = _sum_release("sum", names, sum_eps, grid, private)
            if grouping is None:
                exact = np.array([self._data.sum_total(values, grid, mask)])
            else:
                exact = self._data.sum_table(values, grid, grouping.groups, mask).reshape(-1)
            noisy_units = mechanisms.geometric(
                exact, epsilon=sum_eps, sensitivity=grid.sensitivity_units, rng=rng
            )
            drawn.append(part)
            noisy = noisy_units.astype(np.float64) * grid.step
            if grouping is None:
                return _results.scalar(float(noisy[0]), part, integer=False)
            return _results.series(noisy, grouping.index(), f"sum of {column}", part)

        return self._spend((eps, Fraction(0)), release)

    # ------------------------------------------------------------ crosstab

    def crosstab(
        self,
        index: Any,
        columns: Any,
        *,
        epsilon: float,
        values: Any = None,
        aggfunc: Any = None,
        bounds: Any = None,
        margins: bool = False,
        margins_name: str = "All",
        normalize: bool | str | int = False,
        nonnegative: bool = False,
        domain: dict[Any, Sequence[Any]] | None = None,
        rng: Any = None,
    ) -> pd.DataFrame:
        """A noisy ``pd.crosstab`` of two (sets of) columns over their declared domains.

        Parameters
        ----------
        index, columns : column name or list of names
            The row and column groupings, like ``pd.crosstab(df[index], df[columns])``.
        epsilon : float
            Privacy budget spent by this release (> 0).
        values, aggfunc : optional
            ``values="Earnings", aggfunc="sum"`` releases clamped sums per cell instead
            of counts (``bounds`` required).
        bounds : (lo, hi), optional
            With ``values``: the declared range of one value.
        margins, margins_name, normalize
            As in ``pd.crosstab``; computed from the noisy cells (post-processing, no
            extra budget).
        nonnegative : bool, default False
            Set negative noisy cells to 0 before margins and normalization.
        domain : dict, optional
            Declared keys for grouping columns that are not Categorical.
        rng : numpy Generator or seed, optional
            For teaching and tests only; the release is recorded as not private.

        Returns
        -------
        pandas.DataFrame
            Shaped and labelled like ``pd.crosstab(..., dropna=False)``: one row and one
            column per key of the declared domains, in their declared order, empty cells
            included. Metadata, with the 95% error bound of every cell, in
            ``.attrs["dp"]``.

        Notes
        -----
        Neighbouring data sets differ by one row. A row falls in at most one cell (rows
        whose key is missing or outside a domain fall in none: they are left out, as
        ``pd.crosstab`` leaves out NaN keys), so it changes one count by 1, or one sum
        by at most ``max(|lo|, |hi|)``; the cells are disjoint, and one ``epsilon``
        covers the whole table. Keys come only from the declared domains, never from the
        data, and keys with no rows still get a noisy count: "we must also protect the
        real zeros" (seed 003). Noise: :func:`dpframe.mechanisms.geometric`, on the
        counts or on a fixed-point grid for sums (see :meth:`sum`).

        References
        ----------
        Seed ``003_ce3353c9005cacf5.txt``.
        """
        eps = _validation.epsilon(epsilon)
        row_names = _validation.column_names(index, "index")
        col_names = _validation.column_names(columns, "columns")
        keep_nonnegative = _flag(nonnegative, "nonnegative")
        with_margins = _flag(margins, "margins")
        if normalize not in _NORMALIZE or isinstance(normalize, float):
            raise InvalidParameterError(
                f"normalize must be one of False, True, 'all', 'index' or 'columns', "
                f"got {normalize!r}."
            )
        if not isinstance(margins_name, str):
            raise InvalidParameterTypeError(f"margins_name must be a string, got {margins_name!r}.")
        summing = values is not None or aggfunc is not None
        if summing:
            if values is None or aggfunc is None:
                raise InvalidParameterError(
                    'values and aggfunc go together: pass values="column", aggfunc="sum", '
                    "bounds=(lo, hi) for clamped sums per cell."
                )
            if aggfunc not in ("sum", np.sum, sum):
                raise InvalidParameterError(
                    f'aggfunc must be "sum", got {aggfunc!r}. For a mean, divide a noisy sum '
                    f"table by a noisy count table."
                )
            if bounds is None:
                raise InvalidParameterError(
                    "a crosstab of sums needs bounds=(lo, hi), the declared range of one value."
                )
            checked_bounds = _validation.sum_bounds(bounds)
            if keep_nonnegative and checked_bounds[0] < 0:
                raise InvalidParameterError(
                    "nonnegative=True sets negative noisy sums to 0, which is only sound when no "
                    f"value can be negative; bounds={bounds!r} allows negatives. Drop "
                    "nonnegative=True, or declare bounds with lo >= 0."
                )
            _check_sum_epsilon(eps)
            summed = self._data.numeric(values, "values")
        elif bounds is not None:
            raise InvalidParameterError('bounds is only used with values= and aggfunc="sum".')
        rows = _group(self._data, row_names, domain, "index")
        cols = _group(self._data, col_names, domain, "columns")
        for grouping in (rows, cols):
            for name, dom in zip(grouping.names, grouping.domains, strict=True):
                if with_margins and margins_name in dom:
                    raise DomainError(
                        f"margins_name={margins_name!r} is also a key of {name!r}; pick another."
                    )
        private = rng is None
        names = [str(n) for n in [*row_names, *col_names]]

        groups = rows.groups + cols.groups
        shape = (math.prod(rows.sizes), math.prod(cols.sizes))
        post = ["negative cells set to 0"] if keep_nonnegative else []
        post += ["margins from the noisy cells"] if with_margins else []
        post += [f"normalized ({normalize})"] if normalize is not False else []
        if summing:
            grid = _aggregate.SumGrid.for_bounds(*checked_bounds)
            part = _sum_release("crosstab", names, eps, grid, private, post)
            unit_eps, step = eps / grid.sensitivity_units, grid.step
        else:
            part = self._count_release("crosstab", None, eps, private, False)
            part.columns, part.post_processing = names, post
            unit_eps, step = eps, 1.0
        bars = _bar_widths(unit_eps, step, shape, with_margins, keep_nonnegative)

        def release(drawn: list[_results.Release]) -> pd.DataFrame:
            cells: NDArray[Any]
            if summing:
                exact = self._data.sum_table(summed, grid, groups, None).reshape(shape)
                noisy = mechanisms.geometric(
                    exact, epsilon=eps, sensitivity=grid.sensitivity_units, rng=rng
                )
                drawn.append(part)
                cells = noisy.astype(np.float64) * grid.step
            else:
                exact = self._data.count_table(groups, None).reshape(shape)
                cells = mechanisms.geometric(exact, epsilon=eps, rng=rng)
                drawn.append(part)
            if keep_nonnegative:
                cells = np.maximum(cells, 0)
            table = _table(cells, rows, cols, with_margins, margins_name, normalize)
            part.error_bound = _cell_bounds(bars, normalize, table.shape)
            return _results.frame(table, part)

        return self._spend((eps, Fraction(0)), release)

    # ------------------------------------------------------------ threshold decision

    def threshold_decision(
        self,
        *,
        min_count: int,
        epsilon: float,
        delta: float = 0.0,
        method: str = "laplace",
        p: float = 0.5,
        where: Any = None,
        rng: Any = None,
    ) -> bool:
        """Decide, privately, whether there are at least ``min_count`` rows (satisfying ``where``).

        Parameters
        ----------
        min_count : int
            The threshold m.
        epsilon, delta : float
            Privacy parameters of the decision. ``"laplace"`` spends no delta (pass 0);
            ``"generalized"`` trades delta for a sharper decision.
        method : {"laplace", "cutoff", "generalized"}
            The decision rule of seed 001 (see :func:`dpframe.mechanisms.decision_probability`).
            ``"cutoff"`` is always right at or above ``min_count`` but needs
            ``delta >= 1 - exp(-epsilon)`` (pass it, to acknowledge it): 0.63 at epsilon 1,
            which is large; that is what is charged.
        p : float, default 0.5
            Probability of deciding True when the count is exactly ``min_count``
            (``"cutoff"`` has no such choice).
        where : optional
            As for :meth:`count`.
        rng : optional
            For teaching and tests only; recorded as not private.

        Returns
        -------
        bool
            The decision. Its cost appears in ``df.dp.ledger.history``.

        Notes
        -----
        Neighbouring data sets differ by one row, which moves the count by 1; each rule
        satisfies ``P(Q(N+1)=1) <= e^eps P(Q(N)=1) + delta`` and
        ``P(Q(N)=0) <= e^eps P(Q(N+1)=0) + delta`` for every N (seed 001), and the
        decision is drawn as one exact Bernoulli trial.

        References
        ----------
        Seed ``001_ac8d45847700a6b3.txt``.
        """
        params = _decisions.check_parameters(min_count, epsilon, delta, method, p)
        mask = self._data.where(where)
        cost = _decisions.decision_cost(params.epsilon, params.delta, params.method)
        private = rng is None

        part = _results.Release(
            method="threshold_decision",
            columns=[],
            mechanism=f"{params.method} decision",
            epsilon=cost[0],
            delta=cost[1],
            sensitivity=1,
            noise_scale=None,
            private=private,
        )

        def release(drawn: list[_results.Release]) -> bool:
            count = self._data.row_count(mask)
            decided = _decisions.sample_decisions(
                np.array([count], dtype=np.int64),
                min_count=params.min_count,
                epsilon=params.epsilon,
                delta=params.delta,
                method=params.method,
                p=params.p,
                source=bit_source(rng),
            )
            drawn.append(part)
            return bool(decided[0])

        return self._spend(cost, release)


def _charge(ledger: _ledger.Ledger, parts: Sequence[_results.Release]) -> None:
    """Charge every part of a release at once (all or none)."""
    ledger.charge_many(
        [
            {
                "method": part.method,
                "columns": [str(c) for c in part.columns],
                "mechanism": part.mechanism,
                "epsilon": part.epsilon,
                "delta": part.delta,
                "noise_scale": part.noise_scale,
                "private": part.private,
            }
            for part in parts
        ]
    )


# ---------------------------------------------------------------- tables


def _table(
    cells: NDArray[Any],
    rows: _Grouping,
    cols: _Grouping,
    margins: bool,
    margins_name: str,
    normalize: Any,
) -> pd.DataFrame:
    """The released DataFrame; margins and normalization exactly as pd.crosstab does them."""
    row_index, col_index = rows.index(), cols.index()
    plain = pd.DataFrame(cells, index=row_index, columns=col_index)
    if not margins and normalize is False:
        return plain
    # Re-run pandas' own crosstab on the noisy cells (one row per cell), so margins and
    # normalization follow its exact semantics; categoricals keep the declared order.
    long_rows = _long_labels(rows, repeat=len(col_index))
    long_cols = _long_labels(cols, tile=len(row_index))
    result = pd.crosstab(
        long_rows,
        long_cols,
        values=cells.reshape(-1),
        aggfunc="sum",
        margins=margins,
        margins_name=margins_name,
        normalize=normalize,
        dropna=False,
    )
    if not margins:
        result.index, result.columns = row_index, col_index
    return result


def _long_labels(grouping: _Grouping, *, repeat: int = 1, tile: int = 1) -> list[pd.Series]:
    labels = []
    for level, (name, dom) in enumerate(zip(grouping.names, grouping.domains, strict=True)):
        later = math.prod(grouping.sizes[level + 1 :])
        codes = np.tile(np.repeat(np.arange(len(dom)), later), math.prod(grouping.sizes[:level]))
        codes = np.tile(np.repeat(codes, repeat), tile)
        labels.append(pd.Series(pd.Categorical.from_codes(codes, categories=dom), name=name))
    return labels


@dataclass(frozen=True)
class _Bars:
    """95% half-widths of a table's cells and margins, computed before any noise is drawn."""

    cell: float
    row_margin: float | None  # a row's margin adds one row's cells
    column_margin: float | None
    total: float | None


def _bar_widths(
    unit_eps: Fraction, step: float, shape: tuple[int, int], margins: bool, nonnegative: bool
) -> _Bars:
    plan = _geometric.geometric_plan(unit_eps, None, False)
    cell = float(_geometric.half_width(plan, Fraction(_ALPHA)) * step)
    if not margins:
        return _Bars(cell, None, None, None)

    def margin(k: int) -> float:
        # with negatives set to 0 the errors no longer cancel: bound the sum of |noise|
        return float(_geometric.sum_half_width(unit_eps, k, _ALPHA, absolute=nonnegative) * step)

    n_rows, n_cols = shape
    return _Bars(cell, margin(n_cols), margin(n_rows), margin(n_rows * n_cols))


def _cell_bounds(bars: _Bars, normalize: Any, out_shape: tuple[int, int]) -> Any:
    """The half-width of every released cell, shaped like the table (None if normalized)."""
    if normalize is not False:
        return None  # a ratio of noisy values: no simple bound
    bounds = np.full(out_shape, bars.cell)
    if bars.total is not None:
        bounds[:-1, -1] = bars.row_margin
        bounds[-1, :-1] = bars.column_margin
        bounds[-1, -1] = bars.total
    return bounds


def _sum_release(
    method: str,
    columns: list[str],
    epsilon: Fraction,
    grid: _aggregate.SumGrid,
    private: bool,
    post: list[str] | None = None,
) -> _results.Release:
    """The metadata of a clamped sum on ``grid``, error bar included (before any draw)."""
    units = grid.sensitivity_units
    plan = _geometric.geometric_plan(epsilon / units, None, False)
    return _results.Release(
        method=method,
        columns=columns,
        mechanism="geometric on a fixed-point grid",
        epsilon=epsilon,
        delta=Fraction(0),
        sensitivity=units * grid.step,
        noise_scale=units * grid.step / float(epsilon),
        private=private,
        alpha=_ALPHA,
        error_bound=_geometric.half_width(plan, Fraction(_ALPHA)) * grid.step,
        post_processing=post or [],
        notes={"bounds": [grid.lo, grid.hi], "grid_step": grid.step},
    )


def _check_sum_epsilon(epsilon: Fraction) -> None:
    """Refuse, before anything is drawn, a sum whose noise on the grid would overflow int64."""
    if epsilon / 2**_aggregate.SUM_GRID_BITS < _geometric.MIN_UNIT_EPSILON:
        raise NoiseOverflowError(
            f"epsilon {float(epsilon):g} is too small for a sum: its noise, on the fixed-point "
            f"grid of 2**{_aggregate.SUM_GRID_BITS} steps per bound, could overflow int64. Use "
            f"epsilon >= 1e-7."
        )


# ---------------------------------------------------------------- automatic bounds


def _approx_bounds(
    counts: NDArray[np.int64],
    epsilon: Fraction,
    columns: list[str],
    private: bool,
    rng: Any,
    drawn: list[_results.Release],
) -> tuple[float, float]:
    """Private bounds from a noisy log-scale histogram (seed 004's ApproxBounds).

    ``counts``: the rows per bin of ``_aggregate.log_histogram``: [0, 1], (1, 2], (2, 4],
    ..., (2^61, 2^62] for non-negative values, then the same for negative ones (bins
    fixed in advance). One row falls in one bin, so the noisy counts are ``epsilon``-DP.
    A bin is "occupied" when its noisy count exceeds a threshold t chosen so that an
    empty bin passes it with probability below 1e-9 in total; the bounds are the outer
    edges of the outermost occupied bins. The release is appended to ``drawn`` as soon
    as its noise is drawn, so it is charged even if no bin is occupied.
    """
    edges = _aggregate.LOG_EDGES
    n_bins = len(edges)
    alpha = math.exp(-float(epsilon))
    # P(N > t) = alpha^(t+1) / (1 + alpha); union over all bins below 1e-9.
    threshold = math.ceil(math.log(1e-9 * (1 + alpha) / (2 * n_bins)) / math.log(alpha))
    part = _results.Release(
        method="sum bounds (auto)",
        columns=columns,
        mechanism="geometric log-histogram",
        epsilon=epsilon,
        delta=Fraction(0),
        sensitivity=1,
        noise_scale=float(1 / epsilon),
        private=private,
        notes={"threshold": threshold},
    )
    noisy = mechanisms.geometric(counts, epsilon=epsilon, rng=rng)
    drawn.append(part)
    occupied_pos = np.flatnonzero(noisy[:n_bins] > threshold)
    occupied_neg = np.flatnonzero(noisy[n_bins:] > threshold)
    if not occupied_pos.size and not occupied_neg.size:
        raise InvalidParameterError(
            f'bounds="auto" found no bin with more than {threshold} rows (noisy), so it cannot '
            f"place the bounds; its share of epsilon ({float(epsilon):g}) was spent. Pass "
            f"bounds=(lo, hi) yourself, or a larger bounds_epsilon."
        )
    hi = float(edges[occupied_pos.max()]) if occupied_pos.size else 0.0
    lo = -float(edges[occupied_neg.max()]) if occupied_neg.size else 0.0
    if lo == hi:  # only the [0, 1] bin: keep a non-empty range
        hi = 1.0
    return lo, hi


def dp(frame: pd.DataFrame) -> DPAccessor:
    """The ``.dp`` accessor of ``frame``, typed for mypy (pandas-stubs cannot know ``df.dp``).

    Examples
    --------
    >>> import dpframe
    >>> from dpframe.datasets import census
    >>> counts = dpframe.dp(census(500, seed=1)).count(epsilon=1.0, by="Sex")
    >>> list(counts.index)
    ['M', 'F']
    """
    if not isinstance(frame, pd.DataFrame):
        raise InvalidParameterTypeError(
            f"dpframe.dp needs a pandas DataFrame, got {type(frame).__name__}."
        )
    return DPAccessor(frame)


pd.api.extensions.register_dataframe_accessor("dp")(DPAccessor)
