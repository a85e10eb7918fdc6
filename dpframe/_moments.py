"""Private means, variances and standard deviations from noisy counts and centred sums.

The ``.dp`` accessor releases a moment in three steps, each a pure function here:

1. :func:`moment_plan` fixes, from public parameters only, the parts to release (a
   count, a centred sum, a centred sum of squares), each part's share of epsilon
   (exact fractions), its sensitivity and the fixed-point grid it is summed on.
2. The caller sums each part's per-row :func:`grid_units` exactly and adds geometric
   noise with the part's ``epsilon`` and ``sensitivity_units`` (one noisy total per
   group).
3. :func:`moment_estimate` turns the noisy totals into the estimate and an honest
   ``1 - alpha`` interval for the error the noise can cause (post-processing, no
   further privacy cost), vectorized over groups.

Nothing here draws randomness or reads pandas objects.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpframe import _validation
from dpframe._exact import show
from dpframe._gaussian import discrete_gaussian_accuracy
from dpframe._geometric import MAX_UNIT_EPSILON, MIN_UNIT_EPSILON, geometric_accuracy
from dpframe.errors import InvalidParameterError, InvalidParameterTypeError, NoiseOverflowError

__all__ = [
    "MomentEstimate",
    "MomentPart",
    "MomentPlan",
    "grid_units",
    "moment_estimate",
    "moment_plan",
    "part_half_widths",
]

Statistic = Literal["mean", "var", "std"]
PartName = Literal["count", "sum", "sum of squares"]
STATISTICS: tuple[Statistic, ...] = ("mean", "var", "std")

# Sums run on a grid of step 2**(ceil(log2(sensitivity)) - GRID_BITS): one row is at most
# 2**GRID_BITS steps, as for dpframe's clamped sums.
GRID_BITS = 32
# Half the width of the bounds must lie within 2**-RADIUS_BITS .. 2**RADIUS_BITS: squares
# and their grid steps then stay normal floats.
RADIUS_BITS = 400
# Interval ends are computed in float64; they are moved outward by this relative amount
# (of the statistic's scale) so that rounding can only widen them.
_ROUNDING_MARGIN = 1e-12


@dataclass(frozen=True)
class MomentPart:
    """One noisy total a moment is built from.

    Each row contributes at most ``sensitivity`` in absolute value (exactly 1 for the
    count), summed as whole multiples of ``step``; on that grid one row moves the total
    by at most ``sensitivity_units`` steps, the sensitivity to give the geometric
    mechanism together with ``epsilon``.
    """

    name: PartName
    epsilon: Fraction
    sensitivity: Fraction
    step: float
    sensitivity_units: int
    rho: Fraction | None = None  # discrete Gaussian noise instead, at this zCDP cost
    sensitivity_squared: int = 0  # ... with this squared L2 sensitivity, in grid steps


@dataclass(frozen=True)
class MomentPlan:
    """The parts of a mean, variance or standard deviation, fixed by public parameters.

    ``centre`` is the midpoint of the bounds and ``radius`` the largest distance from
    it to a bound (rounded up): a clamped value ``x`` contributes ``y = x - centre`` to
    the sum, with ``|y| <= radius``, and ``y**2 - square_centre`` to the sum of
    squares, with ``square_centre = radius**2 / 2`` (rounded up).
    """

    statistic: Statistic
    bounds: tuple[float, float]
    ddof: int
    centre: float
    radius: float
    square_centre: float
    parts: tuple[MomentPart, ...]

    def part(self, name: PartName) -> MomentPart:
        """The part called ``name``."""
        for part in self.parts:
            if part.name == name:
                return part
        raise InvalidParameterError(
            f"a {self.statistic} has no part {name!r}; its parts are "
            f"{[p.name for p in self.parts]}."
        )


@dataclass(frozen=True)
class MomentEstimate:
    """Estimates and honest ``1 - alpha`` intervals for the noise, one per group.

    ``lower`` and ``upper`` are NaN where, with probability ``1 - alpha``, the statistic
    is undefined (too few rows); ``estimate`` is NaN where the noisy count is too small
    to compute it (at most ``ddof`` for a variance, below 1 for a mean).
    """

    estimate: NDArray[np.float64]
    lower: NDArray[np.float64]
    upper: NDArray[np.float64]


def _round_up(x: Fraction) -> float:
    """The smallest float >= x."""
    value = float(x)
    return value if Fraction(value) >= x else math.nextafter(value, math.inf)


def _grid_part(name: PartName, epsilon: Fraction, sensitivity: Fraction) -> MomentPart:
    if name == "count":
        return MomentPart(name, epsilon, sensitivity, 1.0, 1)
    exponent = math.ceil(math.log2(sensitivity)) if sensitivity > 0 else 0
    step = math.ldexp(1.0, exponent - GRID_BITS)
    units = round(sensitivity / Fraction(step))  # the rounding the rows get: half-even
    return MomentPart(name, epsilon, sensitivity, step, max(units, 1))


def _ddof(value: Any) -> int:
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Integral):
        raise InvalidParameterTypeError(
            f"ddof must be an integer (1 for the sample variance, 0 for the population "
            f"variance, as in pandas), got {value!r}."
        )
    if int(value) < 0:
        raise InvalidParameterError(
            f"ddof must be >= 0, got {value!r}. Use ddof=1 (pandas' default) for the sample "
            f"variance or ddof=0 for the population variance."
        )
    return int(value)


def moment_plan(
    statistic: Statistic,
    *,
    epsilon: float | Fraction | None = None,
    bounds: tuple[float, float],
    ddof: int = 1,
    rho: Fraction | None = None,
    l2_squared: int = 1,
) -> MomentPlan:
    """The parts a private mean, variance or standard deviation releases, and their budget.

    Parameters
    ----------
    statistic : {"mean", "var", "std"}
        The statistic to release.
    epsilon : float or Fraction, optional
        Its total privacy budget (> 0), split exactly between the parts (geometric noise).
    rho : Fraction, optional
        Instead of ``epsilon``: a zCDP budget, split exactly between the parts, which then
        get discrete Gaussian noise.
    l2_squared : int, default 1
        With ``rho``: the squared L2 sensitivity of a table of counts for one individual
        (``max_groups * max_rows**2`` for a privacy unit), which scales every part's.
    bounds : (lo, hi)
        Declared range of one value (``lo < hi``), never read from the data.
    ddof : int, default 1
        Delta degrees of freedom of a variance or standard deviation, as in pandas
        (divisor ``n - ddof``); must be >= 0. Ignored for the mean.

    Returns
    -------
    MomentPlan
        The parts, in order: ``count`` and ``sum`` for a mean, plus ``sum of squares``
        for a variance or standard deviation; each with its ``epsilon``, sensitivity
        and grid.

    Raises
    ------
    InvalidParameterError, InvalidParameterTypeError
        Before anything is computed: an unknown statistic, epsilon not a finite number
        > 0 or so large a part would carry no privacy, bounds not two finite numbers
        with ``lo < hi``, or a negative or non-integer ``ddof``.
    NoiseOverflowError
        When epsilon is so small that a part's noise on its grid could overflow int64.

    Notes
    -----
    **The construction.** Values are clamped into the bounds and centred on their
    midpoint ``m``: with ``y = x - m`` and ``h`` the radius of the bounds, the parts are
    the count ``N`` (sensitivity 1), the centred sum ``S = Σ y`` (sensitivity ``h``) and,
    for variances, the centred sum of squares ``Q = Σ (y² - h²/2)`` (sensitivity
    ``h²/2``): one added or removed row changes each by at most that. Then
    ``mean = m + S/N`` and ``var = (Q + N h²/2 - S²/N) / (N - ddof)``. This is the
    construction of Google's ``BoundedMean`` / ``BoundedVariance`` (values shifted by the
    midpoint of the bounds, squares by the midpoint of their range), with the squares
    taken after centring: their range shrinks from Google's ``|hi² - lo²|``
    (``max(lo², hi²)`` across zero) to ``h²``, so bounds far from zero cost no extra
    noise (for bounds (1000, 1010): 25 instead of 20,100). A sum of raw values
    (sensitivity ``max(|lo|, |hi|)``) would likewise be 202 times noisier there.

    **The split.** Each part gets an equal share, ``epsilon/2`` for a mean and
    ``epsilon/3`` for a variance or standard deviation, as exact fractions that add up
    to ``epsilon``; the parts are released independently (sequential composition), so
    the statistic is ``epsilon``-DP with respect to adding or removing one row. The
    count is shared by the mean and variance formulas (Google releases it twice). The
    equal split minimises the worst-case error of a mean (with ``|S/N| <= h`` the two
    parts' errors weigh the same); for a variance, which part dominates depends on the
    data, so the three parts get equal shares too.

    **The grid.** Sums are exact on a fixed-point grid of step
    ``2^(ceil(log2 s) - 32)`` for a part of sensitivity ``s``, as dpframe's clamped sums:
    each row's contribution is rounded to the grid (see :func:`grid_units`) and the
    integers are added exactly, so float rounding and summation order cannot raise the
    sensitivity. Noise is the exact geometric mechanism on that grid.

    References
    ----------
    Google differential-privacy library, ``BoundedMean`` and ``BoundedVariance``.
    Seed ``004_2d340d4f6924174c.txt`` (bounds and what spends budget).
    S. Casacuberta et al., "Widespread underestimation of sensitivity in differentially
    private libraries", CCS 2022 (sums on a grid).

    See Also
    --------
    grid_units, moment_estimate, part_half_widths

    Examples
    --------
    >>> from dpframe._moments import moment_plan
    >>> plan = moment_plan("var", epsilon=0.1, bounds=(0, 10))
    >>> [(p.name, p.epsilon, p.sensitivity) for p in plan.parts]
    [('count', Fraction(1, 30), Fraction(1, 1)), ('sum', Fraction(1, 30), Fraction(5, 1)), \
('sum of squares', Fraction(1, 30), Fraction(25, 2))]
    """
    if statistic not in STATISTICS:
        raise InvalidParameterError(
            f"statistic must be one of {', '.join(map(repr, STATISTICS))}; got {statistic!r}."
        )
    if (epsilon is None) == (rho is None):
        raise InvalidParameterError("a moment takes epsilon (geometric) or rho (Gaussian).")
    eps = _validation.epsilon(epsilon if rho is None else rho, "epsilon" if rho is None else "rho")
    lo, hi = _validation.real_bounds(bounds)
    checked_ddof = _ddof(ddof)
    centre = lo / 2 + hi / 2  # halves first: no overflow
    exact_radius = max(Fraction(hi) - Fraction(centre), Fraction(centre) - Fraction(lo))
    if not Fraction(1, 2**RADIUS_BITS) <= exact_radius <= 2**RADIUS_BITS:
        raise InvalidParameterError(
            f"bounds={bounds!r} are outside the range dpframe computes moments on (half their "
            f"width must lie between 2**-{RADIUS_BITS} and 2**{RADIUS_BITS}, so that squares "
            f"fit float64's grid). Rescale the column first."
        )
    radius = _round_up(exact_radius)
    square_centre = _round_up(Fraction(radius) ** 2 / 2)
    names: tuple[PartName, ...] = (
        ("count", "sum") if statistic == "mean" else ("count", "sum", "sum of squares")
    )
    share = eps / len(names)
    sensitivities = {
        "count": Fraction(1),
        "sum": Fraction(radius),
        "sum of squares": Fraction(square_centre),
    }
    parts = tuple(_grid_part(name, share, sensitivities[name]) for name in names)
    if rho is not None:  # the same grids; each part's noise is Gaussian at rho / k
        parts = tuple(
            dataclasses.replace(
                part,
                epsilon=Fraction(0),
                rho=share,
                sensitivity_squared=l2_squared * part.sensitivity_units**2,
            )
            for part in parts
        )
    for part in parts if rho is None else ():
        unit = part.epsilon / part.sensitivity_units
        if unit > MAX_UNIT_EPSILON:
            raise InvalidParameterError(
                f"epsilon {show(eps)} leaves the {part.name} with no meaningful privacy; "
                f"use a smaller epsilon (typical values are 0.01 to 10)."
            )
        if unit < MIN_UNIT_EPSILON:
            raise NoiseOverflowError(
                f"epsilon {show(eps)} is too small for a {statistic}: the noise of its "
                f"{part.name} on the fixed-point grid could overflow int64. Use a larger "
                f"epsilon."
            )
    return MomentPlan(
        statistic=statistic,
        bounds=(lo, hi),
        ddof=checked_ddof,
        centre=centre,
        radius=radius,
        square_centre=square_centre,
        parts=parts,
    )


def grid_units(plan: MomentPlan, name: PartName, values: ArrayLike) -> NDArray[np.int64]:
    """Each value's contribution to a part, in whole grid steps (sum them exactly).

    Values are clamped into the bounds (±inf included) and centred; the count part
    contributes 1 per value, the sum ``y = x - centre``, the sum of squares
    ``y**2 - square_centre``, each clamped to ``±sensitivity`` and rounded (half to even)
    to the part's grid. NaN is refused: drop missing values first.

    Examples
    --------
    >>> from dpframe._moments import grid_units, moment_plan
    >>> plan = moment_plan("mean", epsilon=1.0, bounds=(0, 10))
    >>> grid_units(plan, "sum", [0.0, 5.0, 12.0]) * plan.part("sum").step
    array([-5.,  0.,  5.])
    """
    part = plan.part(name)
    array = _validation.real_array(values)
    if name == "count":
        return np.ones(array.shape, dtype=np.int64)
    lo, hi = plan.bounds
    with np.errstate(over="ignore", invalid="ignore"):
        centred = np.clip(array, lo, hi) - plan.centre
        np.clip(centred, -plan.radius, plan.radius, out=centred)
        if name == "sum of squares":
            centred *= centred
            centred -= plan.square_centre
            np.clip(centred, -plan.square_centre, plan.square_centre, out=centred)
    centred *= 1.0 / part.step  # a power of two: exact
    np.rint(centred, out=centred)
    return centred.astype(np.int64)


def part_half_widths(plan: MomentPlan, *, alpha: float = 0.05) -> tuple[float, ...]:
    """Each part's noise bar at level ``alpha / k`` (``k`` parts), in the data's units.

    With probability at least ``1 - alpha``, every part's noise is within its half-width
    at once (union bound): ``|noise| <= a`` with probability ``>= 1 - alpha/k`` each,
    computed exactly from the geometric engine's coins
    (:func:`dpframe.mechanisms.geometric_accuracy`), times the part's grid step.

    Examples
    --------
    >>> from dpframe._moments import moment_plan, part_half_widths
    >>> part_half_widths(moment_plan("mean", epsilon=1.0, bounds=(0, 10)))[0]
    7.0
    """
    level = _validation.probability(alpha, "alpha")
    share = Fraction(level) / len(plan.parts)
    return tuple(
        (
            geometric_accuracy(
                epsilon=part.epsilon, sensitivity=part.sensitivity_units, alpha=float(share)
            )
            if part.rho is None
            else discrete_gaussian_accuracy(
                rho=part.rho, sensitivity_squared=part.sensitivity_squared, alpha=float(share)
            )
        )
        * part.step
        for part in plan.parts
    )


def _outward(
    lower: NDArray[np.float64], upper: NDArray[np.float64], scale: float
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Move interval ends outward by a relative margin, so float rounding only widens them."""
    lower = lower - _ROUNDING_MARGIN * (np.abs(lower) + scale)
    upper = upper + _ROUNDING_MARGIN * (np.abs(upper) + scale)
    return lower, upper


def moment_estimate(
    plan: MomentPlan, noisy: Sequence[ArrayLike], *, alpha: float = 0.05
) -> MomentEstimate:
    """Estimates and honest noise intervals of a mean, variance or standard deviation.

    Parameters
    ----------
    plan : MomentPlan
        From :func:`moment_plan`; the noisy parts must have been released as it says.
    noisy : sequence of array_like
        The noisy totals, in the order of ``plan.parts`` and in the data's units (grid
        units times the step): one array per part, one entry per group.
    alpha : float, default 0.05
        The intervals hold with probability at least ``1 - alpha`` each.

    Returns
    -------
    MomentEstimate
        ``estimate``, ``lower``, ``upper``: float arrays with one entry per group.

    Notes
    -----
    **Estimate.** ``mean = centre + S/N`` and ``var = (Q + N h²/2 - S²/N) / (N - ddof)``
    from the noisy parts (post-processing), clipped to what clamped values allow
    (``[lo, hi]`` for a mean, ``[0, h² N / (N - ddof)]`` for a variance); ``std`` is the
    square root of ``var``. Where the noisy count is below 1 (mean) or at most ``ddof``
    (variance) the estimate is NaN, as pandas gives NaN for an empty group: the noise
    has hidden whether the group has rows.

    **Interval.** Each part's noise is bounded by :func:`part_half_widths` at level
    ``alpha / k``; by the union bound, with probability at least ``1 - alpha`` the true
    parts lie in the box of those half-widths around the noisy ones. The interval
    encloses the statistic over that whole box: the mean's ``S/N`` at the box's
    corners (only counts ``>= 1`` are possible), the variance's numerator
    ``Q + N h²/2 - S²/N`` (increasing in ``N``) and denominator bounded separately,
    then clipped as the estimate. So it covers the true statistic of the clamped values
    with probability at least ``1 - alpha``, whatever the data, exactly from the
    realized noise distribution; it is conservative (the box's corners are rarely all
    reached). The box also absorbs the grid: each row's contribution is rounded by at
    most one step. Where the box holds only counts too small for the statistic, the
    interval is NaN. Each group's interval holds on its own (use ``alpha / g`` for
    ``g`` groups at once). The end points are computed in float64 and moved outward by
    a relative 1e-12.

    **What it excludes.** Clamping bias: the interval is for the statistic of the
    values clamped into the bounds. It cannot cover the distance to the unclamped
    statistic without looking at the data.

    See Also
    --------
    moment_plan, part_half_widths

    Examples
    --------
    >>> import numpy as np
    >>> from dpframe._moments import moment_estimate, moment_plan
    >>> plan = moment_plan("mean", epsilon=1.0, bounds=(0, 10))
    >>> est = moment_estimate(plan, [np.array([200, 0]), np.array([100.0, 3.0])])
    >>> est.estimate
    array([5.5, nan])
    >>> bool(est.lower[0] < 5.5 < est.upper[0])
    True
    """
    if len(noisy) != len(plan.parts):
        raise InvalidParameterError(
            f"a {plan.statistic} has {len(plan.parts)} parts "
            f"({[p.name for p in plan.parts]}); got {len(noisy)} arrays."
        )
    arrays = np.broadcast_arrays(
        *[
            _validation.real_array(a, f"noisy {p.name}")
            for a, p in zip(noisy, plan.parts, strict=True)
        ]
    )
    half_widths = part_half_widths(plan, alpha=alpha)
    if plan.statistic == "mean":
        return _mean(plan, arrays[0], arrays[1], half_widths)
    variance = _variance(plan, arrays[0], arrays[1], arrays[2], half_widths)
    if plan.statistic == "var":
        return variance
    return MomentEstimate(
        estimate=np.sqrt(variance.estimate),
        lower=np.sqrt(variance.lower),
        upper=np.sqrt(variance.upper),
    )


def _count_range(
    count: NDArray[np.float64], half_width: float, smallest: int
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]:
    """The possible true counts ``[n_lo, n_hi]`` (at least ``smallest``) and where none is."""
    n_lo = np.maximum(count - half_width, smallest)
    n_hi = count + half_width
    return n_lo, n_hi, n_hi < n_lo


def _mean(
    plan: MomentPlan,
    count: NDArray[np.float64],
    total: NDArray[np.float64],
    half_widths: tuple[float, ...],
) -> MomentEstimate:
    lo, hi = plan.bounds
    h, centre = plan.radius, plan.centre
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.clip(total / count, -h, h)
        estimate = np.where(count >= 1, np.clip(centre + ratio, lo, hi), np.nan)
        n_lo, n_hi, undefined = _count_range(count, half_widths[0], 1)
        slack = half_widths[1] + n_hi * plan.part("sum").step  # noise plus grid rounding
        s_lo, s_hi = total - slack, total + slack
        top = np.where(s_hi >= 0, s_hi / n_lo, s_hi / n_hi)
        bottom = np.where(s_lo <= 0, s_lo / n_lo, s_lo / n_hi)
        lower, upper = _outward(
            np.clip(bottom, -h, h) + centre, np.clip(top, -h, h) + centre, abs(centre) + h
        )
    lower = np.where(undefined, np.nan, np.clip(lower, lo, hi))
    upper = np.where(undefined, np.nan, np.clip(upper, lo, hi))
    return MomentEstimate(estimate=estimate, lower=lower, upper=upper)


def _variance(
    plan: MomentPlan,
    count: NDArray[np.float64],
    total: NDArray[np.float64],
    squares: NDArray[np.float64],
    half_widths: tuple[float, ...],
) -> MomentEstimate:
    ddof, c, h2 = plan.ddof, plan.square_centre, plan.radius**2
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        numerator = squares + c * count - total**2 / count
        most = h2 * count / (count - ddof)  # largest variance n clamped values can have
        estimate = np.where(count > ddof, np.clip(numerator / (count - ddof), 0, most), np.nan)
        n_lo, n_hi, undefined = _count_range(count, half_widths[0], ddof + 1)
        s_slack = half_widths[1] + n_hi * plan.part("sum").step
        q_slack = half_widths[2] + n_hi * plan.part("sum of squares").step
        s_lo, s_hi = total - s_slack, total + s_slack
        smallest_square = np.where((s_lo <= 0) & (s_hi >= 0), 0.0, np.minimum(s_lo**2, s_hi**2))
        largest_square = np.maximum(s_lo**2, s_hi**2)
        # Q + N c - S²/N grows with N: its extremes are at the box's ends.
        top = squares + q_slack + c * n_hi - smallest_square / n_hi
        bottom = squares - q_slack + c * n_lo - largest_square / n_lo
        upper = np.maximum(top, 0) / (n_lo - ddof)
        lower = np.maximum(bottom, 0) / (n_hi - ddof)
        lower, upper = _outward(lower, upper, h2)
        upper = np.minimum(upper, h2 * n_lo / (n_lo - ddof))
        lower = np.clip(lower, 0, upper)
    lower = np.where(undefined, np.nan, lower)
    upper = np.where(undefined, np.nan, upper)
    return MomentEstimate(estimate=estimate, lower=lower, upper=upper)
