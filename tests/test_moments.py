"""dpframe._moments: budget splits, grid contributions, estimates and honest intervals."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats

import dpframe.mechanisms as dpm
from dpframe import _moments
from dpframe._moments import MomentPlan, grid_units, moment_estimate, moment_plan
from dpframe.errors import InvalidParameterError, InvalidParameterTypeError, NoiseOverflowError
from tests._stats import FALSE_ALARM

# ---------------------------------------------------------------- the plan


@pytest.mark.parametrize("epsilon", [0.1, Fraction(1, 3), 1.0, 7, 1 / 11])
@pytest.mark.parametrize(("statistic", "parts"), [("mean", 2), ("var", 3), ("std", 3)])
def test_budget_split_is_exact(epsilon: Any, statistic: Any, parts: int) -> None:
    plan = moment_plan(statistic, epsilon=epsilon, bounds=(0, 1))
    total = Fraction(epsilon) if isinstance(epsilon, Fraction | int) else None
    total = total if total is not None else Fraction(str(epsilon)).limit_denominator(10**6)
    assert len(plan.parts) == parts
    assert sum(p.epsilon for p in plan.parts) == total  # exactly: 1/10 is 1/10
    assert {p.epsilon for p in plan.parts} == {total / parts}


@pytest.mark.parametrize(
    ("bounds", "radius"), [((0, 10), 5), ((1000, 1010), 5), ((-3, 5), 4), ((-2, 2), 2)]
)
def test_sensitivities_depend_on_the_width_only(bounds: tuple[float, float], radius: float) -> None:
    plan = moment_plan("var", epsilon=1.0, bounds=bounds)
    assert plan.centre == sum(bounds) / 2
    assert plan.radius == radius
    assert [p.sensitivity for p in plan.parts] == [1, radius, Fraction(radius) ** 2 / 2]
    assert plan.part("count").step == 1.0
    assert plan.part("count").sensitivity_units == 1


@pytest.mark.parametrize("bounds", [(0, 10), (1000, 1010.5), (-3e-7, 5e-7), (-1e12, 3.3e12)])
def test_one_row_moves_each_part_by_at_most_its_sensitivity(bounds: tuple[float, float]) -> None:
    plan = moment_plan("var", epsilon=1.0, bounds=bounds)
    lo, hi = bounds
    gen = np.random.default_rng()
    extremes = np.array([lo, hi, -np.inf, np.inf, plan.centre, 2 * lo - hi, 2 * hi - lo])
    values = np.concatenate([extremes, gen.uniform(lo, hi, 10_000)])
    for part in plan.parts:
        units = grid_units(plan, part.name, values)
        assert int(np.abs(units).max()) <= part.sensitivity_units
        assert part.sensitivity_units <= 2**32 + 1
        # The grid is fine: the sensitivity in units is the sensitivity, to one step.
        assert abs(part.sensitivity_units * part.step - part.sensitivity) <= part.step


def _exact_parts(plan: MomentPlan, values: NDArray[np.float64]) -> list[float]:
    return [float(grid_units(plan, p.name, values).sum()) * p.step for p in plan.parts]


@pytest.mark.parametrize("ddof", [0, 1, 2])
def test_noise_free_parts_give_the_statistics_of_the_clamped_values(ddof: int) -> None:
    gen = np.random.default_rng()
    bounds = (1000.0, 1010.0)
    values = gen.normal(1005, 4, 500)
    clamped = np.clip(values, *bounds)
    truth = {
        "mean": clamped.mean(),
        "var": clamped.var(ddof=ddof),
        "std": clamped.std(ddof=ddof),
    }
    for statistic, expected in truth.items():
        plan = moment_plan(statistic, epsilon=1.0, bounds=bounds, ddof=ddof)
        parts = _exact_parts(plan, values)
        est = moment_estimate(plan, [np.array([v]) for v in parts])
        assert est.estimate[0] == pytest.approx(expected, rel=1e-8, abs=1e-8)
        assert est.lower[0] <= expected <= est.upper[0]


# ---------------------------------------------------------------- coverage


def _simulated(
    statistic: Any, values: NDArray[np.float64], epsilon: float, bounds: Any, ddof: int, runs: int
) -> tuple[float, _moments.MomentEstimate]:
    """``runs`` independent releases of one group, noise drawn as the plan says."""
    plan = moment_plan(statistic, epsilon=epsilon, bounds=bounds, ddof=ddof)
    noisy = []
    for part in plan.parts:
        exact = int(grid_units(plan, part.name, values).sum())
        units = dpm.geometric(
            np.full(runs, exact), epsilon=part.epsilon, sensitivity=part.sensitivity_units
        )
        noisy.append(units.astype(np.float64) * part.step)
    clamped = np.clip(values, *bounds)
    truth = {
        "mean": clamped.mean(),
        "var": clamped.var(ddof=ddof),
        "std": clamped.std(ddof=ddof),
    }[statistic]
    return float(truth), moment_estimate(plan, noisy)


def _covered(truth: float, est: _moments.MomentEstimate) -> int:
    """Runs whose interval holds the truth (a NaN interval holds nothing)."""
    return int(((est.lower <= truth) & (truth <= est.upper)).sum())


COVERAGE = [
    pytest.param("mean", 20, 1.0, (0.0, 10.0), 1, id="mean-small-n"),
    pytest.param("mean", 30, 0.5, (1000.0, 1010.0), 1, id="mean-far-from-zero"),
    pytest.param("var", 60, 2.0, (0.0, 10.0), 1, id="var"),
    pytest.param("std", 300, 0.5, (-5.0, 5.0), 0, id="std-ddof0"),
    pytest.param("var", 3, 1.0, (0.0, 1.0), 1, id="var-tiny-n"),
]


@pytest.mark.statistical
@pytest.mark.parametrize(("statistic", "n", "epsilon", "bounds", "ddof"), COVERAGE)
def test_interval_covers_at_least_1_minus_alpha(
    statistic: str, n: int, epsilon: float, bounds: tuple[float, float], ddof: int
) -> None:
    """Coverage over 20,000 independent releases; reject "coverage >= 95%" at p < 1e-6."""
    gen = np.random.default_rng()
    lo, hi = bounds
    values = gen.uniform(lo - (hi - lo) / 4, hi, n)  # some clamped
    runs = 20_000
    truth, est = _simulated(statistic, values, epsilon, bounds, ddof, runs)
    assert stats.binom.cdf(_covered(truth, est), runs, 0.95) > FALSE_ALARM


@pytest.mark.statistical
def test_coverage_test_catches_intervals_too_narrow(monkeypatch: pytest.MonkeyPatch) -> None:
    """Validity twin: noise bars shrunk to a fifth make the coverage test reject."""
    honest = _moments.part_half_widths

    def shrunk(plan: MomentPlan, *, alpha: float = 0.05) -> tuple[float, ...]:
        return tuple(w / 5 for w in honest(plan, alpha=alpha))

    monkeypatch.setattr(_moments, "part_half_widths", shrunk)
    values = np.linspace(0.0, 10.0, 20)
    truth, est = _simulated("mean", values, 1.0, (0.0, 10.0), 1, 20_000)
    assert stats.binom.cdf(_covered(truth, est), 20_000, 0.95) < FALSE_ALARM


# ---------------------------------------------------------------- estimates


def test_undefined_groups_are_nan() -> None:
    plan = moment_plan("mean", epsilon=1.0, bounds=(0, 10))
    est = moment_estimate(plan, [np.array([0, -3, 1, -100]), np.array([5.0, 5.0, 5.0, 5.0])])
    assert np.isnan(est.estimate[:2]).all()
    assert est.estimate[2] == 10  # 5 + 5/1, inside the bounds
    # Counts that far below zero leave no count >= 1 within the bar: no interval either.
    assert np.isnan(est.lower[3])
    assert np.isnan(est.upper[3])
    # A count of 0 within the bar of counts >= 1: the interval is the whole range.
    assert (est.lower[0], est.upper[0]) == (0, 10)
    var = moment_plan("var", epsilon=1.0, bounds=(0, 10), ddof=1)
    est = moment_estimate(var, [np.array([1, 2]), np.array([0.0, 0.0]), np.array([0.0, 0.0])])
    assert np.isnan(est.estimate[0])
    assert not np.isnan(est.estimate[1])


def test_estimates_lie_in_their_intervals_and_in_the_possible_range() -> None:
    gen = np.random.default_rng()
    groups = 5000
    for statistic in ("mean", "var", "std"):
        plan = moment_plan(statistic, epsilon=0.7, bounds=(-2.0, 6.0), ddof=1)
        scales = [1, 40, 100]
        noisy = [gen.integers(-20, 200, groups).astype(float)]
        noisy += [gen.normal(0, s, groups) for s in scales[1 : len(plan.parts)]]
        est = moment_estimate(plan, noisy)
        defined = ~np.isnan(est.estimate)
        assert defined.any()
        assert (est.lower[defined] <= est.estimate[defined]).all()
        assert (est.estimate[defined] <= est.upper[defined]).all()
        if statistic == "mean":
            assert (est.lower[defined] >= -2).all()
            assert (est.upper[defined] <= 6).all()
        else:
            assert (est.lower[defined] >= 0).all()


def test_intervals_are_vectorized_over_groups() -> None:
    plan = moment_plan("std", epsilon=1.0, bounds=(0, 1), ddof=0)
    est = moment_estimate(plan, [np.full((3, 4), 50.0), 1.0, np.zeros((3, 4))])
    assert est.estimate.shape == est.lower.shape == est.upper.shape == (3, 4)


def test_half_widths_come_from_the_exact_geometric_bar() -> None:
    plan = moment_plan("var", epsilon=0.3, bounds=(0, 10))
    widths = _moments.part_half_widths(plan, alpha=0.06)
    for part, width in zip(plan.parts, widths, strict=True):
        units = dpm.geometric_accuracy(
            epsilon=part.epsilon, sensitivity=part.sensitivity_units, alpha=0.02
        )
        assert width == units * part.step


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "kwargs",
    [
        {"statistic": "median"},
        {"ddof": -1},
        {"ddof": 1.5},
        {"ddof": True},
        {"ddof": "1"},
        {"bounds": (10, 0)},
        {"bounds": (0, float("nan"))},
        {"epsilon": 0},
        {"epsilon": "1"},
        {"epsilon": 1e4},  # the count alone would carry no privacy
        {"bounds": (-1e308, 1e308)},  # squares overflow
        {"bounds": (0, 1e-300)},  # squares underflow
    ],
)
def test_bad_plans_are_refused(kwargs: dict[str, Any]) -> None:
    args = {"statistic": "var", "epsilon": 1.0, "bounds": (0, 10), "ddof": 1, **kwargs}
    with pytest.raises((InvalidParameterError, InvalidParameterTypeError)):
        moment_plan(args.pop("statistic"), **args)


def test_tiny_epsilon_is_refused_before_any_overflow() -> None:
    with pytest.raises(NoiseOverflowError):
        moment_plan("mean", epsilon=1e-9, bounds=(0, 10))


def test_bad_estimates_are_refused() -> None:
    plan = moment_plan("mean", epsilon=1.0, bounds=(0, 10))
    with pytest.raises(InvalidParameterError):
        moment_estimate(plan, [np.array([1.0])])
    with pytest.raises(InvalidParameterError):
        moment_estimate(plan, [np.array([1.0]), np.array([np.nan])])
    with pytest.raises(InvalidParameterError):
        moment_estimate(plan, [np.array([1.0]), np.array([1.0])], alpha=1.0)
    with pytest.raises(InvalidParameterError):
        plan.part("sum of squares")
    with pytest.raises(InvalidParameterError):
        grid_units(plan, "sum", [1.0, np.nan])
