"""What each release will be, decided from public parameters before any noise is drawn.

Every function here builds the :class:`~dpframe._release.Release` of one part of an
accessor call (its mechanism, sensitivity, noise scale, cost and error bars) from the
call's public parameters only: epsilon, bounds, the sizes of the declared domains. The
error bars come from the public accuracy functions of :mod:`dpframe.mechanisms`, the
same route the noise takes, and those functions also refuse parameters the mechanism
cannot serve, so an unusable call fails here, before the ledger is touched.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import cast

import numpy as np
from numpy.typing import NDArray

from dpframe import _composition, _decisions, _geometric, _validation, mechanisms
from dpframe._backends import SumGrid
from dpframe._backends.bounding import ContributionBounds
from dpframe._backends.kernels import LOG_EDGES, SUM_GRID_BITS
from dpframe._decisions import DecisionParameters
from dpframe._exact import show
from dpframe._moments import MomentPlan, Statistic, moment_plan
from dpframe._release import NOISE_ONLY, NOISE_ONLY_CLAMPED, JSONValue, Release
from dpframe._typing import Bounds, ColumnLabel
from dpframe._validation import CrosstabOptions
from dpframe.errors import DPFrameError, InvalidParameterError, NoiseOverflowError, PrivacyUnitError

__all__ = [
    "ALPHA",
    "Contribution",
    "Gaussian",
    "MomentRelease",
    "Scope",
    "TableBars",
    "TablePlan",
    "bounds_from_histogram",
    "bounds_release",
    "check_sum_epsilon",
    "contribution",
    "count_release",
    "covers_like",
    "decision_release",
    "gaussian_cost",
    "gaussian_release",
    "gaussian_table_bars",
    "moment_release",
    "quantile_parts",
    "quantile_release",
    "selection_release",
    "sum_release",
    "table_bars",
    "table_plan",
]

#: Error bars are 95% half-widths.
ALPHA = 0.05


@dataclass(frozen=True)
class Contribution:
    """What one privacy unit may contribute to a call, and what that does to its cost.

    ``unit`` is None when one row is one unit (factor 1: nothing changes). Otherwise the
    call's rows are bounded to at most ``bounds.max_rows`` rows per cell in at most
    ``bounds.max_groups`` cells per unit, so removing a unit removes at most
    ``factor = max_rows * max_groups`` rows of the bounded data, and the bounding of the
    other units does not depend on it (each unit's rows are chosen independently). Every
    pure-DP mechanism of the call is then run at ``epsilon / factor`` for one row, which
    is ``epsilon``-DP for one unit (group privacy; for the geometric and Laplace noise
    of counts and sums this is the same noise as scaling the L1 sensitivity by
    ``factor``), and its release is recorded at ``epsilon`` with that sensitivity.
    """

    unit: tuple[ColumnLabel, ...] | None
    bounds: ContributionBounds | None

    @property
    def factor(self) -> int:
        """The most rows of the bounded data one unit can hold (1 when a row is a unit)."""
        return 1 if self.bounds is None else self.bounds.l1

    def noise_epsilon(self, epsilon: Fraction) -> Fraction:
        """The per-row epsilon at which noise is drawn to spend ``epsilon`` per unit."""
        return epsilon / self.factor

    @property
    def rows_per_step(self) -> int:
        """How many rows of one unit one step of a decision's count stands for."""
        return 1 if self.bounds is None else self.bounds.max_rows

    def decision_parameters(self, asked: DecisionParameters) -> DecisionParameters:
        """The parameters of each cell's threshold decision, checked.

        One unit moves at most ``max_groups`` cells by at most ``max_rows`` rows each, so
        ``count // max_rows`` moves by at most 1 in each: each cell decides on it against
        ``ceil(min_count / max_rows)`` at ``(epsilon, delta) / max_groups``.
        """
        if self.bounds is None:
            return asked
        cells = self.bounds.max_groups
        return _decisions.check_parameters(
            -(-asked.min_count // self.bounds.max_rows),
            asked.epsilon / cells,
            asked.delta / cells,
            asked.method,
            asked.p,
        )

    def charged_decision(self, release: Release) -> Release:
        """A decision release (planned per cell) as charged per unit: times ``max_groups``."""
        if self.unit is None or self.bounds is None:
            return release
        cells = self.bounds.max_groups
        return release.replace(
            epsilon=release.epsilon * cells,
            delta=release.delta * cells,
            error_bound_covers=(
                f"{release.error_bound_covers}; decided on the rows kept by contribution "
                f"bounding (a unit's rows beyond max_rows in a cell, or beyond max_groups "
                f"cells, were dropped)"
            ),
            # as for a count table: one unit moves max_groups cells by max_rows rows each
            sensitivity=float(self.bounds.max_rows * cells),
            privacy_unit=tuple(str(name) for name in self.unit),
            max_rows=self.bounds.max_rows,
            max_groups=cells,
        )

    @property
    def l2_squared(self) -> int:
        """Squared L2 sensitivity of a table of counts: ``max_groups * max_rows**2`` (1 per row)."""
        return 1 if self.bounds is None else self.bounds.l2_squared

    def labelled(self, release: Release) -> Release:
        """``release`` (planned for the unit already) with the unit and its bounds recorded."""
        if self.unit is None or self.bounds is None:
            return release
        return release.replace(
            privacy_unit=tuple(str(name) for name in self.unit),
            max_rows=self.bounds.max_rows,
            max_groups=self.bounds.max_groups,
            error_bound_covers=_of_kept_rows(release.error_bound_covers),
        )

    def charged(self, release: Release) -> Release:
        """``release`` (planned per row at :meth:`noise_epsilon`) as charged per unit."""
        if self.unit is None or self.bounds is None:
            return release
        factor = self.factor
        return release.replace(
            epsilon=release.epsilon * factor,
            sensitivity=None if release.sensitivity is None else release.sensitivity * factor,
            privacy_unit=tuple(str(name) for name in self.unit),
            max_rows=self.bounds.max_rows,
            max_groups=self.bounds.max_groups,
            error_bound_covers=_of_kept_rows(release.error_bound_covers),
        )


def covers_like(release: Release, covers: str) -> str:
    """``covers`` for a bar derived from ``release``'s, with its unit's note if it has one."""
    return covers if release.privacy_unit is None else _of_kept_rows(covers)


def _of_kept_rows(covers: str) -> str:
    """What an error bar covers on a unit-protected frame: the rows bounding kept."""
    return (
        f"{covers}; of the rows kept by contribution bounding: the rows of a unit beyond "
        f"max_rows in a group, or beyond max_groups groups, were dropped and are not "
        f"included (nor is the bias that dropping them causes)"
    )


def contribution(
    unit: tuple[ColumnLabel, ...] | None,
    max_rows: int | None,
    max_groups: int | None,
    grouped: bool,
    method: str,
) -> Contribution:
    """Check a call's contribution bounds against the ledger's privacy unit.

    On a unit-protected frame ``max_rows`` is required, and ``max_groups`` too when the
    call has groups; neither may be given otherwise (they would mean nothing, and a
    reader of the code would think the data protected per person). ``method`` names the
    call in the error's example.
    """
    if unit is None:
        pairs = (("max_rows", max_rows), ("max_groups", max_groups))
        given = [name for name, value in pairs if value is not None]
        if given:
            raise PrivacyUnitError(
                f"{' and '.join(given)} bound what one privacy unit "
                f"(a person, a household) contributes, but this frame declares no unit: each "
                f"row is taken to be a different person. Declare the unit on the frame the "
                f'budget is set on, df.dp.set_budget(epsilon, privacy_unit="person_id"), or '
                f"drop these arguments."
            )
        return Contribution(None, None)
    names = ", ".join(repr(name) for name in unit)
    example = (
        f"df.dp.{method}(..., max_rows=1, max_groups=8)"
        if grouped
        else f"df.dp.{method}(..., max_rows=8)"
    )
    if max_rows is None or (grouped and max_groups is None):
        raise PrivacyUnitError(
            f"this frame's privacy unit is {names}: a release must bound what one unit "
            f"contributes, with bounds chosen from how the data were collected, never read "
            f"from the data. max_rows= is the most rows one unit may add to one cell (or to "
            f"an ungrouped statistic); for a grouped release, max_groups= is the most groups "
            f"(cells) one unit may appear in. For a panel of 8 yearly waves with one row per "
            f"person and year: {example}. Rows beyond the bounds are dropped at random, and "
            f"the noise grows with max_rows * max_groups."
        )
    if not grouped and max_groups is not None:
        raise InvalidParameterError(
            "max_groups bounds the groups (cells) one unit appears in, but this release is "
            "not grouped (one cell); drop max_groups."
        )
    return Contribution(unit, ContributionBounds(max_rows, 1 if max_groups is None else max_groups))


@dataclass(frozen=True)
class Gaussian:
    """The zCDP cost of a call with discrete Gaussian noise.

    ``rho`` is charged; ``asked`` is the ``(epsilon, delta)`` it was derived from when
    the call gave those instead of ``rho`` (the largest rho whose conversion implies
    them, Canonne, Kamath and Steinke 2020, rounded down).
    """

    rho: Fraction
    asked: tuple[Fraction, Fraction] | None


@dataclass(frozen=True)
class DescribeSplit:
    """How ``describe`` shares its cost: per column, half for count, mean and std, half
    for the percentiles.

    With geometric noise every share is pure ``epsilon / (2 k)`` for ``k`` columns. With
    Gaussian noise the moments of a column get ``rho / (2 k)`` of zCDP, and its ``p``
    percentiles (report-noisy-max, pure epsilon-DP, each a release of ``epsilon / p``)
    the largest epsilon, on a grid of ``1e-6``, whose zCDP cost ``p (epsilon / p)**2 / 2
    = epsilon**2 / (2 p)`` is at most the same ``rho / (2 k)``.
    """

    epsilon: Fraction  # the moments' pure share per column (0 with Gaussian noise)
    rho: Fraction | None  # the moments' zCDP share per column (None: geometric noise)
    percentiles_epsilon: Fraction  # the percentiles' pure share per column
    total_epsilon: Fraction  # what the call asked for (geometric noise), else 0
    percentiles: int = 1  # how many percentiles share percentiles_epsilon

    def call_cost(self, columns: int) -> dict[str, Fraction]:
        """The whole cost of the call, for the ledger's transaction."""
        if self.rho is None:
            return {"epsilon": self.total_epsilon}
        return {"epsilon": columns * self.percentiles_epsilon, "rho": columns * self.rho}

    def shown(self) -> dict[str, JSONValue]:
        """One column's split, for ``release_info(...)["split"]``."""
        if self.rho is None:
            return {
                "count, mean, std": float(self.epsilon),
                "percentiles": float(self.percentiles_epsilon),
            }
        return {
            "count, mean, std": {"rho": float(self.rho)},
            "percentiles": {
                "epsilon": float(self.percentiles_epsilon),
                "rho": float(self.percentiles_epsilon**2 / (2 * self.percentiles)),
            },
        }


def describe_split(
    rho: Fraction | None, epsilon: Fraction | None, columns: int, percentiles: int
) -> DescribeSplit:
    """Split ``describe``'s cost between its columns and statistics (see DescribeSplit)."""
    if rho is None:
        if epsilon is None:  # pragma: no cover - the accessor validated one of them
            raise DPFrameError("internal error: describe without a cost; please report")
        share = epsilon / (2 * columns)
        return DescribeSplit(share, None, share, epsilon, percentiles)
    share_rho = rho / (2 * columns)
    # epsilon = isqrt(2 p rho 1e12) / 1e6 <= sqrt(2 p rho): its epsilon**2 / (2 p) <= rho
    scale, room = 10**6, 2 * percentiles * share_rho
    pure = Fraction(math.isqrt(room.numerator * scale**2 // room.denominator), scale)
    if pure <= 0:
        raise InvalidParameterError(
            f"rho={show(rho)} leaves the percentiles of {columns} column(s) no epsilon "
            f"on a grid of 1e-6 (epsilon**2 / {2 * percentiles} <= rho / {2 * columns}); "
            f"use a larger rho."
        )
    return DescribeSplit(Fraction(0), share_rho, pure, Fraction(0), percentiles)


def gaussian_cost(epsilon: object, delta: object, rho: object, method: str) -> Gaussian:
    """Check a Gaussian call's cost: ``rho=``, or ``epsilon=`` with ``delta > 0``."""
    if rho is not None:
        if epsilon is not None or delta:
            raise InvalidParameterError(
                f"noise='gaussian' takes its cost as rho= (zCDP) or as epsilon= and delta=, "
                f"not both: e.g. df.dp.{method}(..., noise='gaussian', rho=0.01)."
            )
        return Gaussian(_validation.epsilon(rho, "rho"), None)
    if epsilon is None or not delta:
        raise InvalidParameterError(
            f"noise='gaussian' needs rho= (zCDP), or epsilon= with delta > 0 (the discrete "
            f"Gaussian is never pure epsilon-DP): e.g. df.dp.{method}(..., noise='gaussian', "
            f"epsilon=1.0, delta=1e-6)."
        )
    eps, dlt = _validation.epsilon(epsilon), _validation.delta(delta)
    converted = _composition.rho_available(eps, dlt)
    if converted <= 0:  # pragma: no cover - eps > 0 and delta > 0 give rho > 0
        raise InvalidParameterError(f"epsilon={epsilon!r}, delta={delta!r} allow no rho.")
    return Gaussian(converted, (eps, dlt))


def gaussian_release(
    scope: Scope,
    cost: Gaussian,
    contribution: Contribution,
    *,
    grid: SumGrid | None = None,
    post: Sequence[str] = (),
) -> tuple[Release, int]:
    """A count (or table of counts), or a sum on ``grid``, with discrete Gaussian noise.

    Returns the release and the squared L2 sensitivity, in grid steps, to draw with: one
    row moves one cell by 1 (or ``grid.sensitivity_units`` steps); a unit, by
    ``max_rows`` that in each of ``max_groups`` cells (L2 squared ``max_groups *
    max_rows**2``). The noise has ``sigma**2 = sensitivity_squared / (2 rho)`` exactly.
    """
    units, step = (1, 1.0) if grid is None else (grid.sensitivity_units, grid.step)
    squared = contribution.l2_squared * units**2
    bar = mechanisms.discrete_gaussian_accuracy(
        rho=cost.rho, sensitivity_squared=squared, alpha=ALPHA
    )
    details: tuple[tuple[str, JSONValue], ...] = ()
    if grid is not None:
        details += (("grid_step", grid.step),)
    if cost.asked is not None:
        asked: JSONValue = {
            "epsilon": _as_float(cost.asked[0]),
            "delta": _as_float(cost.asked[1]),
        }
        details += (("asked", asked),)
    release = Release(
        method=scope.method,
        columns=scope.columns,
        where=scope.where,
        by=scope.by,
        mechanism="discrete Gaussian" + ("" if grid is None else " on a fixed-point grid"),
        epsilon=Fraction(0),
        delta=Fraction(0),
        rho=cost.rho,
        sensitivity=math.sqrt(squared) * step,
        noise_scale=math.sqrt(squared / (2 * cost.rho)) * step,
        private=scope.private,
        alpha=ALPHA,
        noise_error_bound=float(bar * step),
        error_bound_covers=NOISE_ONLY if grid is None else NOISE_ONLY_CLAMPED,
        bounds=None if grid is None else (grid.lo, grid.hi),
        post_processing=tuple(post),
        details=details,
    )
    return contribution.labelled(release), squared


@functools.lru_cache(maxsize=256)
def gaussian_table_bars(
    rho: Fraction,
    sensitivity_squared: int,
    step: float,
    shape: tuple[int, int],
    *,
    margins: bool,
    nonnegative: bool,
    alpha: float = ALPHA,
) -> TableBars:
    """The bars of a table with discrete Gaussian noise in each cell, and of its margins.

    A cell's bar is exact (:func:`dpframe.mechanisms.discrete_gaussian_accuracy`). A margin
    adds ``k`` cells' noises: the discrete Gaussian of parameter ``sigma`` is
    sub-Gaussian with variance proxy ``sigma**2`` (Canonne, Kamath, Steinke 2020), so the sum of
    ``k`` is ``sqrt(k) sigma``-sub-Gaussian and ``|sum| <= sigma sqrt(2 k ln(2/alpha))``
    with probability ``>= 1 - alpha``; with negatives set to 0 the bar bounds the sum of
    the absolute errors instead, ``k`` times the cell bar at ``alpha / k`` (union bound).
    Both are rounded up to whole steps.
    """
    cell = mechanisms.discrete_gaussian_accuracy(
        rho=rho, sensitivity_squared=sensitivity_squared, alpha=alpha
    )
    if not margins:
        return TableBars(cell * step, None, None, None)
    sigma = math.sqrt(sensitivity_squared / (2 * float(rho)))

    def margin(k: int) -> float:
        if nonnegative:
            each = mechanisms.discrete_gaussian_accuracy(
                rho=rho, sensitivity_squared=sensitivity_squared, alpha=alpha / k
            )
            return float(k * each) * step
        width = math.ceil(sigma * math.sqrt(2 * k * math.log(2 / alpha)) * (1 + 1e-12))
        return float(width) * step

    n_rows, n_cols = shape
    return TableBars(cell * step, margin(n_cols), margin(n_rows), margin(n_rows * n_cols))


@dataclass(frozen=True)
class Scope:
    """What a release read: its columns, filter and grouping (for the records)."""

    method: str
    columns: tuple[str, ...]
    where: str | None
    by: tuple[str, ...]
    private: bool


def count_release(scope: Scope, epsilon: Fraction, post: Sequence[str] = ()) -> Release:
    """A count (or table of counts): sensitivity 1, exact geometric noise."""
    bar = _release_bar(epsilon, 1, "a count")
    return Release(
        method=scope.method,
        columns=scope.columns,
        where=scope.where,
        by=scope.by,
        mechanism="geometric",
        epsilon=epsilon,
        delta=Fraction(0),
        sensitivity=1.0,
        noise_scale=float(1 / epsilon),
        private=scope.private,
        alpha=ALPHA,
        noise_error_bound=float(bar),
        error_bound_covers=NOISE_ONLY,
        post_processing=tuple(post),
    )


def _release_bar(epsilon: Fraction, units: int, what: str, detail: str = "") -> int:
    """The 95% bar of geometric noise in ``units`` steps, or a refusal of ``epsilon`` in
    the caller's terms (the engine's speaks of epsilon per grid step, and of bounds)."""
    try:
        return mechanisms.geometric_accuracy(epsilon=epsilon, sensitivity=units, alpha=ALPHA)
    except (NoiseOverflowError, InvalidParameterError) as refused:
        low = _geometric.MIN_UNIT_EPSILON * units
        high = _geometric.MAX_UNIT_EPSILON * units
        raise type(refused)(
            f"epsilon={show(epsilon)} is outside what {what} supports{detail}: epsilon must "
            f"lie between {show(low)} (below, the noise could overflow int64) and "
            f"{show(high)} (above, the release would have no meaningful privacy). Typical "
            f"values are 0.01 to 10."
        ) from None


def sum_release(
    scope: Scope,
    epsilon: Fraction,
    grid: SumGrid,
    post: Sequence[str] = (),
    bounds_rule: str | None = None,
) -> Release:
    """A clamped sum (or table of sums) on ``grid``: geometric noise in grid steps."""
    units = grid.sensitivity_units
    detail = f" (its noise is drawn in grid steps of {grid.step:g}, {units} per person)"
    bar = _release_bar(epsilon, units, f"a sum over bounds ({grid.lo:g}, {grid.hi:g})", detail)
    details: tuple[tuple[str, JSONValue], ...] = (("grid_step", grid.step),)
    if bounds_rule is not None:
        details += (("bounds_rule", bounds_rule),)
    return Release(
        method=scope.method,
        columns=scope.columns,
        where=scope.where,
        by=scope.by,
        mechanism="geometric on a fixed-point grid",
        epsilon=epsilon,
        delta=Fraction(0),
        sensitivity=units * grid.step,
        noise_scale=units * grid.step / float(epsilon),
        private=scope.private,
        alpha=ALPHA,
        noise_error_bound=bar * grid.step,
        error_bound_covers=NOISE_ONLY_CLAMPED,
        bounds=(grid.lo, grid.hi),
        post_processing=tuple(post),
        details=details,
    )


@dataclass(frozen=True)
class TableBars:
    """95% half-widths of a table's cells and margins, computed before any noise is drawn."""

    cell: float
    row_margin: float | None  # a row's margin adds one row's cells
    column_margin: float | None
    total: float | None

    def shaped(self, shape: tuple[int, int]) -> NDArray[np.float64]:
        """The bar of every released cell, margins last (as ``pd.crosstab`` lays them out)."""
        bars = np.full(shape, self.cell)
        if self.total is not None:
            bars[:-1, -1] = self.row_margin
            bars[-1, :-1] = self.column_margin
            bars[-1, -1] = self.total
        return bars


@functools.lru_cache(maxsize=256)  # margin bars come from an FFT: reused across releases
def table_bars(
    epsilon: Fraction,
    sensitivity: int,
    step: float,
    shape: tuple[int, int],
    *,
    margins: bool,
    nonnegative: bool,
    alpha: float = ALPHA,
) -> TableBars:
    """The bars of a table of ``shape`` cells (and of its margins, which add cells' noise).

    With negatives set to 0 the cells' errors no longer cancel in a margin, so the
    margin's bar bounds the sum of the cells' absolute errors instead.
    """
    cell = mechanisms.geometric_accuracy(epsilon=epsilon, sensitivity=sensitivity, alpha=alpha)
    if not margins:
        return TableBars(cell * step, None, None, None)

    def margin(k: int) -> float:
        width = mechanisms.geometric_accuracy(
            epsilon=epsilon, sensitivity=sensitivity, alpha=alpha, terms=k, absolute=nonnegative
        )
        return width * step

    n_rows, n_cols = shape
    return TableBars(cell * step, margin(n_cols), margin(n_rows), margin(n_rows * n_cols))


def check_sum_epsilon(epsilon: Fraction) -> None:
    """Refuse, before anything is drawn, a sum epsilon too small for any grid.

    One row moves a sum by at most 2**32 grid steps, so the noise's epsilon per step can
    be as small as ``epsilon / 2**32``; the geometric mechanism refuses what it cannot draw.
    """
    _release_bar(
        epsilon,
        2**SUM_GRID_BITS,
        "a sum",
        " (its noise is drawn in grid steps, up to 2**32 per person)",
    )


@dataclass(frozen=True)
class TablePlan:
    """A crosstab's release, its grid (for sums) and the bars of its cells and margins."""

    release: Release
    grid: SumGrid | None
    bars: TableBars
    shares_in_unit_interval: bool  # counts and non-negative sums: shares lie in [0, 1]
    sensitivity_squared: int = 0  # discrete Gaussian noise: squared L2 sensitivity, in steps


def table_plan(
    scope: Scope,
    epsilon: Fraction,
    options: CrosstabOptions,
    shape: tuple[int, int],
    gaussian: tuple[Gaussian, Contribution] | None = None,
) -> TablePlan:
    """Plan a crosstab of counts, or of sums when ``options.bounds`` is set.

    ``epsilon`` is the per-row epsilon of geometric noise; with ``gaussian`` (the call's
    zCDP cost and contribution bounds) the cells get discrete Gaussian noise instead. A
    normalized table needs the bars of its margins (its denominators) even without
    ``margins=True``, each at level alpha/2, for the intervals of its shares.
    """
    normalizing = options.normalize is not False
    grid = None if options.bounds is None else SumGrid.for_bounds(*options.bounds)
    if gaussian is not None:
        cost, contribution = gaussian
        release, squared = gaussian_release(
            scope, cost, contribution, grid=grid, post=options.post_processing
        )
        bars = gaussian_table_bars(
            cost.rho,
            squared,
            1.0 if grid is None else grid.step,
            shape,
            margins=options.margins or normalizing,
            nonnegative=options.nonnegative,
            alpha=ALPHA / 2 if normalizing else ALPHA,
        )
        return TablePlan(release, grid, bars, grid is None or grid.lo >= 0, squared)
    if grid is None:
        release = count_release(scope, epsilon, options.post_processing)
        units, step = 1, 1.0
    else:
        release = sum_release(scope, epsilon, grid, options.post_processing)
        units, step = grid.sensitivity_units, grid.step
    bars = table_bars(
        epsilon,
        units,
        step,
        shape,
        margins=options.margins or normalizing,
        nonnegative=options.nonnegative,
        alpha=ALPHA / 2 if normalizing else ALPHA,
    )
    unit_interval = grid is None or grid.lo >= 0
    return TablePlan(release, grid, bars, unit_interval)


# ---------------------------------------------------------------- automatic bounds


def bounds_release(scope: Scope, epsilon: Fraction) -> tuple[Release, int]:
    """The noisy log-histogram of ``bounds="auto"``, and the count a bin must exceed.

    The bins are fixed in advance (:data:`LOG_EDGES`, for non-negative and negative
    values); one row falls in one bin, so the noisy counts are ``epsilon``-DP. A bin is
    "occupied" when its noisy count exceeds the threshold, chosen so that any empty bin
    passes it with probability below 1e-3 in total over all bins.
    """
    n_bins = 2 * len(LOG_EDGES)
    # P(N > t) = alpha^(t+1) / (1 + alpha), alpha = exp(-epsilon); union over all bins
    # below 1e-3. In logs: exp(-epsilon) is 0.0 in floats from epsilon ~745 on.
    log_alpha = -float(epsilon)
    threshold = math.ceil((math.log(1e-3 / n_bins) + math.log1p(math.exp(log_alpha))) / log_alpha)
    release = Release(
        method="sum bounds (auto)",
        columns=scope.columns,
        where=scope.where,
        by=(),
        mechanism="geometric log-histogram",
        epsilon=epsilon,
        delta=Fraction(0),
        sensitivity=1.0,
        noise_scale=float(1 / epsilon),
        private=scope.private,
        alpha=None,
        details=(("threshold", threshold),),
    )
    mechanisms.geometric_accuracy(epsilon=epsilon)  # refuses an unusable epsilon up front
    return release, threshold


#: The auto bounds aim to leave out at most this share of the rows on each side.
TAIL_SHARE = 0.01
# Each side's tail test holds with probability at least 1 - 2 * _TAIL_ALPHA.
_TAIL_ALPHA = 1e-3
RULE_CERTIFIED = (
    "99th percentile: at most 1% of the rows lie beyond the bound (certified against the "
    "noise, with probability at least 0.998)"
)
RULE_ESTIMATED = (
    "estimated, not certified (too few rows to certify it against the noise): the bins "
    "beyond the bound whose noisy count passed the occupancy threshold hold at most 1% of "
    "the noisy row count; bins below the threshold are not counted, so the bound may leave "
    "out more than 1% of the rows (a bin just under the threshold, or a whole side); and "
    "with probability up to 1e-3 an empty bin passes the threshold and sets a far bound"
)


def _side_edge(
    side: NDArray[np.int64], threshold: int, tail_bar: int, rows: float, rows_low: float
) -> tuple[int, str] | None:
    """The bin whose upper edge bounds one side (magnitudes), and the rule that chose it.

    The smallest bin ``j`` such that the occupied bins beyond it hold at most 1% of the
    noisy number of rows. It is *certified* when every bin beyond it, plus the noise bar
    of such a sum, is at most 1% of a lower bound on the number of rows: then at most 1%
    of the rows lie beyond its edge with probability at least 1 - 2e-3, and the bound
    covers the 99th percentile of the magnitudes. None when no bin is occupied.
    """
    occupied = side > threshold
    if not occupied.any():
        return None
    beyond_occupied = np.append(np.cumsum(np.where(occupied, side, 0)[::-1])[::-1][1:], 0)
    edge = int(np.flatnonzero(beyond_occupied <= TAIL_SHARE * max(rows, 0.0))[0])
    beyond = np.append(np.cumsum(side[::-1])[::-1][1:], 0)  # every bin's noisy count
    certified = rows_low > 0 and beyond[edge] + tail_bar <= TAIL_SHARE * rows_low
    return edge, RULE_CERTIFIED if certified else RULE_ESTIMATED


def bounds_from_histogram(
    noisy: NDArray[np.int64], threshold: int, epsilon: Fraction
) -> tuple[float, float, str]:
    """Bounds from the noisy log-histogram (post-processing), and the rule that set them.

    Each side (non-negative values, negative values) is bounded by the edge of the
    smallest bin beyond which the occupied bins hold at most 1% of the rows, certified
    against the noise when there are rows enough (see :func:`_side_edge`); a side with no
    occupied bin contributes 0. The bins double in width, so the bound is within a factor
    2 of the 99th percentile of magnitudes.
    """
    n_bins = len(LOG_EDGES)
    total_bar = mechanisms.geometric_accuracy(epsilon=epsilon, alpha=_TAIL_ALPHA, terms=2 * n_bins)
    tail_bar = mechanisms.geometric_accuracy(epsilon=epsilon, alpha=_TAIL_ALPHA, terms=n_bins)
    rows = float(noisy.sum())
    upper = _side_edge(noisy[:n_bins], threshold, tail_bar, rows, rows - total_bar)
    lower = _side_edge(noisy[n_bins:], threshold, tail_bar, rows, rows - total_bar)
    if upper is None and lower is None:
        raise InvalidParameterError(
            f'bounds="auto" found no bin with more than {threshold} rows (noisy), so it cannot '
            f"place the bounds; its share of epsilon was spent. Pass bounds=(lo, hi) "
            f"yourself, or a larger bounds_epsilon."
        )
    hi = float(LOG_EDGES[upper[0]]) if upper is not None else 0.0
    lo = -float(LOG_EDGES[lower[0]]) if lower is not None else 0.0
    if lo == hi:  # only the [0, 1] bin: keep a non-empty range
        hi = 1.0
    rule = "; ".join(sorted({side[1] for side in (upper, lower) if side is not None}))
    return lo, hi, rule


# ---------------------------------------------------------------- moments and quantiles


@dataclass(frozen=True)
class MomentRelease:
    """A mean, variance or standard deviation: its parts, their grids, and what it is."""

    plan: MomentPlan
    grids: tuple[SumGrid, ...]
    parts: tuple[Release, ...]
    summary: Release


_MOMENT_COVERS = (
    "noise only: [lower, upper] holds the statistic of the values clamped into the bounds "
    "with probability at least 1 - alpha (union bound over its parts); clamping bias is "
    "not included"
)


def moment_release(
    scope: Scope,
    statistic: Statistic,
    epsilon: Fraction,
    bounds: Bounds,
    ddof: int,
    gaussian: tuple[Gaussian, Contribution] | None = None,
) -> MomentRelease:
    """Plan a moment (:func:`dpframe._moments.moment_plan`): a count and centred sums.

    Each part is an exact sum on its own fixed-point grid (the count of non-missing
    values, the centred sum, for variances the centred sum of squares), noised with the
    geometric mechanism at its share of ``epsilon`` (per row), or, with ``gaussian``
    (the call's zCDP cost and contribution bounds), with the discrete Gaussian at its
    share of ``rho`` and the L2 sensitivity of one unit; those parts are recorded per
    unit already.
    """
    if gaussian is not None:
        cost, contribution = gaussian
        plan = moment_plan(
            statistic, rho=cost.rho, bounds=bounds, ddof=ddof, l2_squared=contribution.l2_squared
        )
        return _moment_parts(scope, plan, cost, contribution)
    plan = moment_plan(statistic, epsilon=epsilon, bounds=bounds, ddof=ddof)
    return _moment_parts(scope, plan, None, None)


def _moment_parts(
    scope: Scope, plan: MomentPlan, cost: Gaussian | None, contribution: Contribution | None
) -> MomentRelease:
    """The grids and releases of a moment's parts, and its summary release."""
    statistic, ddof = plan.statistic, plan.ddof
    lo, hi = plan.bounds
    grids = tuple(
        SumGrid(
            lo,
            hi,
            part.step,
            centre=plan.centre,
            radius=None if part.name == "count" else plan.radius,
            square_centre=plan.square_centre if part.name == "sum of squares" else None,
            present=part.name == "count",
            limit=part.sensitivity_units,
        )
        for part in plan.parts
    )
    parts = tuple(
        Release(
            method=f"{scope.method} ({part.name})",
            columns=scope.columns,
            where=scope.where,
            by=scope.by,
            mechanism="geometric on a fixed-point grid",
            epsilon=part.epsilon,
            delta=Fraction(0),
            sensitivity=float(part.sensitivity),
            noise_scale=float(part.sensitivity / part.epsilon),
            private=scope.private,
            bounds=plan.bounds,
            noise_error_bound=mechanisms.geometric_accuracy(
                epsilon=part.epsilon, sensitivity=part.sensitivity_units, alpha=ALPHA
            )
            * part.step,
            error_bound_covers=NOISE_ONLY_CLAMPED,
        )
        if part.rho is None
        else Release(
            method=f"{scope.method} ({part.name})",
            columns=scope.columns,
            where=scope.where,
            by=scope.by,
            mechanism="discrete Gaussian on a fixed-point grid",
            epsilon=Fraction(0),
            delta=Fraction(0),
            rho=part.rho,
            sensitivity=math.sqrt(part.sensitivity_squared) * part.step,
            noise_scale=math.sqrt(part.sensitivity_squared / (2 * part.rho)) * part.step,
            private=scope.private,
            bounds=plan.bounds,
            noise_error_bound=mechanisms.discrete_gaussian_accuracy(
                rho=part.rho, sensitivity_squared=part.sensitivity_squared, alpha=ALPHA
            )
            * part.step,
            error_bound_covers=NOISE_ONLY_CLAMPED,
        )
        for part in plan.parts
    )
    gaussian = cost is not None
    noise = "discrete Gaussian" if gaussian else "geometric"
    summary = Release(
        method=scope.method,
        columns=scope.columns,
        where=scope.where,
        by=scope.by,
        mechanism=f"{noise} on fixed-point grids (" + ", ".join(p.name for p in plan.parts) + ")",
        epsilon=Fraction(0) if gaussian else sum((p.epsilon for p in plan.parts), Fraction(0)),
        delta=Fraction(0),
        rho=None if cost is None else cost.rho,
        sensitivity=None,
        noise_scale=None,
        private=scope.private,
        bounds=plan.bounds,
        error_bound_covers=_MOMENT_COVERS,
        details=(("ddof", ddof),) if statistic != "mean" else (),
    )
    if contribution is not None:
        parts = tuple(contribution.labelled(part) for part in parts)
        summary = contribution.labelled(summary)
    return MomentRelease(plan, grids, parts, summary)


def quantile_parts(
    whole: Release,
    scope: Scope,
    epsilon: Fraction,
    q: float | Sequence[float],
    bounds: Bounds,
    candidates: NDArray[np.float64] | None,
) -> tuple[Release, ...]:
    """The quantiles of one call as the releases they are: each at ``epsilon / k``.

    ``whole`` is :func:`quantile_release` of all of them (the one part of a single
    quantile). The ``k`` quantiles are independent report-noisy-max draws of
    ``epsilon / k`` each (:func:`dpframe.mechanisms.quantile_of_counts`): on a zCDP
    account they cost ``k (epsilon / k)**2 / 2``, not ``epsilon**2 / 2``.
    """
    levels = [q] if np.ndim(q) == 0 else list(cast(Sequence[float], q))
    if len(levels) <= 1:
        return (whole,)
    share = epsilon / len(levels)
    return tuple(quantile_release(scope, share, level, bounds, candidates) for level in levels)


def quantile_release(
    scope: Scope,
    epsilon: Fraction,
    q: float | Sequence[float],
    bounds: Bounds,
    candidates: NDArray[np.float64] | None,
) -> Release:
    """A quantile (or several): report-noisy-max of rank scores over a candidate grid.

    The error bar is in ranks (``rank_error_bound``: with probability 1 - alpha the
    released candidate's cell is within that many ranks of ``q n``) and, because the
    release is a candidate, the grid's resolution (``value_resolution``); a value
    interval would need the data's order statistics, so none is published.
    """
    rank_bar = mechanisms.quantile_accuracy(
        q, epsilon=epsilon, bounds=bounds, candidates=candidates, alpha=ALPHA
    )
    resolution = mechanisms.quantile_resolution(bounds=bounds, candidates=candidates)
    bars: JSONValue = rank_bar.tolist() if isinstance(rank_bar, np.ndarray) else rank_bar
    return Release(
        method=scope.method,
        columns=scope.columns,
        where=scope.where,
        by=scope.by,
        mechanism="report-noisy-max of rank scores (geometric noise)",
        epsilon=epsilon,
        delta=Fraction(0),
        sensitivity=None,
        noise_scale=None,
        private=scope.private,
        bounds=(float(bounds[0]), float(bounds[1])),
        error_bound_covers=(
            "noise only, in ranks: rank_error_bound ranks of q n, plus value_resolution for "
            "the grid; values clamped into the bounds, so clamping bias is not included. "
            "Ranks say little about values in a group of few rows: in a group with no rows "
            "every candidate is at rank error 0, and the release is uniform over them"
        ),
        details=(
            ("q", [float(x) for x in np.atleast_1d(np.asarray(q, dtype=np.float64))]),
            ("rank_error_bound", bars),
            ("value_resolution", float(resolution)),
            ("candidates", "default grid" if candidates is None else len(candidates)),
        ),
    )


# ---------------------------------------------------------------- decisions


def selection_release(
    scope: Scope, epsilon: Fraction, delta: Fraction, contribution: Contribution
) -> Release:
    """Private key selection (:func:`dpframe.mechanisms.key_selection`), charged per unit.

    The keys are the grouping column's values found in the data; each is kept by seed
    001's generalized decision on its number of distinct units, one unit touching at
    most ``max_groups`` keys. Neither the candidates nor their number are recorded: they
    come from the data.
    """
    bounds = contribution.bounds
    return Release(
        method=f"{scope.method} (key selection)",
        columns=scope.columns,
        where=scope.where,
        by=scope.by,
        mechanism="generalized decision per key found in the data (partition selection)",
        epsilon=epsilon,
        delta=delta,
        sensitivity=1.0,
        noise_scale=None,
        private=scope.private,
        alpha=None,
        error_bound_covers="no error bar: a key is released or not",
        privacy_unit=None
        if contribution.unit is None
        else tuple(str(name) for name in contribution.unit),
        max_rows=None if bounds is None else bounds.max_rows,
        max_groups=None if bounds is None else bounds.max_groups,
    )


def decision_release(scope: Scope, cell: DecisionParameters, asked: DecisionParameters) -> Release:
    """Threshold decisions of seed 001, one per cell (each one exact coin, no noise scale).

    ``cell`` holds the parameters each cell's decision is drawn with, ``asked`` those of
    the call (they differ on a unit-protected frame, see
    :meth:`Contribution.decision_parameters`). The cost is one cell's: a row is in one
    cell (parallel composition).
    """
    epsilon, delta = _decisions.decision_cost(cell.epsilon, cell.delta, cell.method)
    return Release(
        method=scope.method,
        columns=scope.columns,
        where=scope.where,
        by=scope.by,
        mechanism=f"{cell.method} decision",
        epsilon=epsilon,
        delta=delta,
        sensitivity=1.0,
        noise_scale=None,
        private=scope.private,
        alpha=None,
        error_bound_covers=(
            "no error bar: each decision is one exact Bernoulli trial, whose probability "
            "dpframe.mechanisms.decision_probability gives"
        ),
        details=(
            ("min_count", asked.min_count),
            ("decided_at", cell.min_count),
            ("cell_epsilon", float(cell.epsilon)),
            ("cell_delta", float(cell.delta)),
            ("p", float(cell.p)),
        ),
    )


def _as_float(value: Fraction | float) -> float:
    """``value`` as a float for metadata: ``inf`` beyond the largest float (10**400)."""
    return math.inf if value > sys.float_info.max else float(value)
