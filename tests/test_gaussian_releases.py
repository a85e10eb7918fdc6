"""``noise="gaussian"`` on the accessor: calibration, accounting, error bars, refusals.

The calibration tests compare the released noise with the exact discrete Gaussian PMF
of ``sigma**2 = sensitivity**2 / (2 rho)`` (chi-square, reject at p < 1e-6); each has a
validity twin that calibrates for one row when a unit touches several cells.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest
from numpy.typing import NDArray
from scipy import stats

import dpframe
from dpframe import _plans
from dpframe._composition import rho_available
from dpframe.errors import InvalidParameterError
from tests._stats import FALSE_ALARM, chi_square_pvalue

CELLS = 50_000


def _discrete_gaussian_pmf(support: NDArray[np.int64], sigma2: float) -> NDArray[np.float64]:
    wide = np.arange(-20_000, 20_001)
    total = np.exp(-(wide.astype(np.float64) ** 2) / (2 * sigma2)).sum()
    return np.asarray(np.exp(-(support.astype(np.float64) ** 2) / (2 * sigma2)) / total)


def _panel(copies: int, waves: int) -> pd.DataFrame:
    """One person per copy, one row in each of ``waves`` cells."""
    frame = pd.DataFrame(
        {
            "person": np.repeat(np.arange(copies), waves),
            "copy": np.repeat(np.arange(copies), waves),
            "wave": np.tile(np.arange(waves), copies),
        }
    )
    frame.dp.set_budget(
        rho=math.inf,
        domains={"copy": range(copies), "wave": range(waves)},
        privacy_unit="person",
    )
    return frame


@pytest.mark.statistical
@pytest.mark.parametrize("weaken", [False, True])
def test_crosstab_noise_is_calibrated_to_the_l2_sensitivity_of_a_unit(
    weaken: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A unit in 4 cells, one row each: sigma**2 = 4 / (2 rho). The twin uses 1 / (2 rho)."""
    if weaken:
        monkeypatch.setattr(_plans.Contribution, "l2_squared", property(lambda self: 1))
    rho = Fraction(1, 2)
    frame = _panel(CELLS, 4)
    noise = []
    for _ in range(4):
        table = frame.dp.crosstab(
            "copy", "wave", noise="gaussian", rho=rho, max_rows=1, max_groups=4
        )
        noise.append(table.to_numpy().reshape(-1) - 1)
    support = np.arange(-60, 61)
    pmf = _discrete_gaussian_pmf(support, 4 / (2 * float(rho)))
    p_value = chi_square_pvalue(np.concatenate(noise) - support[0], support - support[0], pmf)
    assert (p_value < FALSE_ALARM) if weaken else (p_value > FALSE_ALARM)


@pytest.mark.statistical
@pytest.mark.parametrize("miscalibrate", [False, True])
def test_sum_noise_is_calibrated_on_the_grid(
    miscalibrate: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sums of one value 1 in bounds (0, 1), by copy: the noise is a discrete Gaussian on
    a grid of 2**-32, within 2**-32 of a Gaussian of sigma**2 = 1 / (2 rho) in the data's
    units. Mean and variance of the z-scores are checked at 6 standard errors (p < 1e-8).
    The twin calibrates for an L2 sensitivity twice too large."""
    if miscalibrate:
        monkeypatch.setattr(_plans.Contribution, "l2_squared", property(lambda self: 4))
    rho = Fraction(1, 8)
    frame = pd.DataFrame({"copy": np.arange(CELLS), "x": 1.0})
    frame.dp.set_budget(rho=math.inf, domains={"copy": range(CELLS)})
    sums = np.concatenate(
        [
            frame.dp.sum("x", bounds=(0.0, 1.0), by="copy", noise="gaussian", rho=rho).to_numpy()
            for _ in range(4)
        ]
    )
    sigma = math.sqrt(1 / (2 * float(rho)))
    z = (sums - 1.0) / sigma
    assert abs(float(np.mean(z))) < 6 * 2 / math.sqrt(z.size)
    calibrated = abs(float(np.var(z)) - 1) < 6 * math.sqrt(2 / z.size)
    assert calibrated != miscalibrate


@pytest.mark.statistical
def test_margin_bars_cover_at_least_95_percent() -> None:
    frame = _panel(CELLS, 8)
    table = frame.dp.crosstab(
        "copy", "wave", noise="gaussian", rho=0.5, max_rows=1, max_groups=8, margins=True
    )
    bars = np.asarray(dpframe.release_info(table)["noise_error_bound"])
    errors = np.abs(table.to_numpy()[:-1, -1] - 8)
    misses = int((errors > bars[:-1, -1]).sum())
    assert misses <= stats.binom.isf(FALSE_ALARM, CELLS, 0.05)
    cell_misses = int((np.abs(table.to_numpy()[:-1, :-1] - 1) > bars[0, 0]).sum())
    assert cell_misses <= stats.binom.isf(FALSE_ALARM, CELLS * 8, 0.05)


def test_bounded_margins_say_they_cover_at_least_their_level() -> None:
    # A Gaussian margin's bar is a sub-Gaussian tail bound (about 99.5% at alpha 0.05):
    # "noise only" read as a 95% bar, as the cells' are.
    frame = pd.DataFrame({"k": ["a", "b"] * 50, "j": ["x"] * 50 + ["y"] * 50})
    frame.dp.set_budget(rho=1.0, domains={"k": ["a", "b"], "j": ["x", "y"]})
    with_margins = frame.dp.crosstab("k", "j", noise="gaussian", rho=0.1, margins=True)
    assert "at least 1 - alpha by a tail" in str(
        dpframe.release_info(with_margins)["error_bound_covers"]
    )
    # A sum table keeps its clamping caveat beside it.
    frame["x"] = np.linspace(0, 1, 100)
    sums = frame.dp.crosstab(
        "k", "j", values="x", aggfunc="sum", bounds=(0, 1), noise="gaussian", rho=0.1,
        margins=True,
    )  # fmt: skip
    covers = str(dpframe.release_info(sums)["error_bound_covers"])
    assert "clamping" in covers
    assert "by a tail" in covers
    # Validity twin: geometric margins are exact, and say nothing of a bound.
    plain = pd.DataFrame({"k": ["a", "b"] * 50, "j": ["x"] * 50 + ["y"] * 50})
    plain.dp.set_budget(epsilon=1.0, domains={"k": ["a", "b"], "j": ["x", "y"]})
    exact = plain.dp.crosstab("k", "j", epsilon=0.5, margins=True)
    assert "tail" not in str(dpframe.release_info(exact)["error_bound_covers"])


def test_describe_with_gaussian_noise_fits_an_epsilon_delta_budget() -> None:
    # Before the first zCDP release the percentiles are charged first, as plain epsilon:
    # sized for a zCDP account (sqrt(p) more epsilon) the call no longer fit its budget.
    frame = pd.DataFrame({"x": np.linspace(0, 1, 500), "y": np.linspace(0, 10, 500)})
    frame.dp.set_budget(epsilon=1.0, delta=1e-6)
    frame.dp.describe(
        noise="gaussian", epsilon=1.0, delta=1e-6, bounds={"x": (0, 1), "y": (0, 10)},
        percentiles=[0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99],
    )  # fmt: skip
    assert frame.dp.ledger.spent.epsilon <= 1
    # Validity twin: on a rho budget the same call's percentiles get sqrt(7) more epsilon.
    zcdp = pd.DataFrame({"x": np.linspace(0, 1, 500), "y": np.linspace(0, 10, 500)})
    zcdp.dp.set_budget(rho=1.0)
    table = zcdp.dp.describe(
        noise="gaussian", rho=0.1, bounds={"x": (0, 1), "y": (0, 10)},
        percentiles=[0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99],
    )  # fmt: skip
    split = dpframe.release_info(table)["split"]["x"]["percentiles"]  # type: ignore[index, call-overload]
    assert split["epsilon"] == pytest.approx(math.sqrt(7 * 0.1 / 2), abs=1e-6)  # type: ignore[index]


def test_the_call_is_charged_in_rho_and_recorded_as_zcdp() -> None:
    frame = pd.DataFrame({"k": ["a", "b"] * 50})
    frame.dp.set_budget(epsilon=2.0, delta=1e-5, domains={"k": ["a", "b"]})
    counts = frame.dp.count(by="k", noise="gaussian", epsilon=1.0, delta=1e-6)
    info = dpframe.release_info(counts)
    expected = rho_available(Fraction(1), Fraction(1, 10**6))
    assert info["measure"] == "zCDP"
    assert info["rho_exact"] == str(expected)
    assert info["asked"] == {"epsilon": 1.0, "delta": 1e-6}
    assert info["epsilon"] == 0.0
    assert frame.dp.ledger.history["measure"].tolist() == ["zCDP"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"noise": "gaussian"}, "rho="),
        ({"noise": "gaussian", "epsilon": 1.0}, "delta > 0"),
        ({"noise": "gaussian", "rho": 0.1, "epsilon": 1.0}, "not both"),
        ({"rho": 0.1, "epsilon": 1.0}, "noise='gaussian'"),
        ({"noise": "normal", "rho": 0.1}, "noise must be"),
        ({"noise": "gaussian", "rho": -1.0}, "rho"),
        ({}, "epsilon="),
    ],
)
def test_bad_gaussian_calls_are_refused_before_anything_is_charged(
    kwargs: dict[str, Any], message: str
) -> None:
    frame = pd.DataFrame({"k": ["a", "b"]})
    frame.dp.set_budget(rho=1.0, domains={"k": ["a", "b"]})
    with pytest.raises(InvalidParameterError, match=message):
        frame.dp.count(by="k", **kwargs)
    assert frame.dp.ledger.spent.rho in (None, 0)


def test_gaussian_sums_need_declared_bounds_and_no_private_keys() -> None:
    frame = pd.DataFrame({"k": ["a", "b"], "x": [1.0, 2.0]})
    frame.dp.set_budget(rho=1.0, domains={"k": ["a", "b"]})
    with pytest.raises(InvalidParameterError, match="declared bounds"):
        frame.dp.sum("x", bounds="auto", noise="gaussian", rho=0.1)
    with pytest.raises(InvalidParameterError, match="private_keys"):
        frame.dp.count(by="k", noise="gaussian", rho=0.1, private_keys=True)


def test_every_gaussian_method_reports_bars_from_the_noise_it_drew() -> None:
    frame = pd.DataFrame({"k": ["a", "b"] * 500, "x": np.linspace(0, 1, 1000)})
    frame.dp.set_budget(rho=10.0, domains={"k": ["a", "b"]})
    releases = [
        frame.dp.count(noise="gaussian", rho=0.5),
        frame.dp.crosstab("k", "k", noise="gaussian", rho=0.5, domain={"k": ["a", "b"]}),
        frame.dp.sum("x", bounds=(0, 1), noise="gaussian", rho=0.5),
        frame.dp.value_counts("k", noise="gaussian", rho=0.5),
        frame.dp.groupby("k").size(noise="gaussian", rho=0.5),
        frame.dp.groupby("k")["x"].sum(bounds=(0, 1), noise="gaussian", rho=0.5),
    ]
    for result in releases:
        info = dpframe.release_info(result)
        bound = np.max(info["noise_error_bound"])
        scale = info["noise_scale"]
        assert isinstance(scale, float)
        assert 1.5 * scale < bound < 2.5 * scale  # about 1.96 sigma, rounded up to a step
        assert info["rho"] == 0.5


@pytest.mark.statistical
@pytest.mark.parametrize("statistic", ["mean", "std"])
def test_gaussian_moment_intervals_cover(statistic: str) -> None:
    """50,000 groups of 20 people (values 1 and 3 in bounds (0, 4)): each group's noise
    interval holds its statistic with probability >= 95% (binomial bound at 1e-6)."""
    groups = 50_000
    frame = pd.DataFrame(
        {"g": np.repeat(np.arange(groups), 20), "x": np.tile([1.0, 3.0], groups * 10)}
    )
    frame.dp.set_budget(rho=math.inf, domains={"g": range(groups)})
    result = getattr(frame.dp, statistic)("x", bounds=(0, 4), by="g", noise="gaussian", rho=2.0)
    interval = dpframe.release_info(result)["noise_interval"]
    lower = np.asarray(interval["low"])  # type: ignore[index, call-overload]
    upper = np.asarray(interval["high"])  # type: ignore[index, call-overload]
    truth = 2.0 if statistic == "mean" else float(np.std([1.0, 3.0] * 10, ddof=1))
    misses = int(((truth < lower) | (truth > upper)).sum())
    assert misses <= stats.binom.isf(FALSE_ALARM, groups, 0.05)
    info = dpframe.release_info(result)
    assert info["measure"] == "zCDP"
    assert [part["rho"] for part in info["parts"]] == [2 / len(info["parts"])] * len(info["parts"])  # type: ignore[index, union-attr, arg-type]


@pytest.mark.parametrize(
    "call",
    [
        lambda f: f.dp.median("x", epsilon=0.5, bounds=(0, 1), noise="gaussian"),
        lambda f: f.dp.quantile("x", [0.1, 0.9], epsilon=0.5, bounds=(0, 1), noise="gaussian"),
    ],
)
def test_quantiles_refuse_gaussian_noise_and_cost_rho_on_a_zcdp_budget(call: Any) -> None:
    frame = pd.DataFrame({"x": np.linspace(0, 1, 200)})
    frame.dp.set_budget(rho=1.0)
    with pytest.raises(InvalidParameterError, match="report-noisy-max"):
        call(frame)
    assert frame.dp.ledger.history.empty
    frame.dp.median("x", epsilon=0.5, bounds=(0, 1))
    assert frame.dp.ledger.spent.rho == Fraction(1, 8)  # epsilon**2 / 2


def test_a_zero_dimensional_q_is_one_quantile() -> None:
    frame = pd.DataFrame({"x": np.linspace(0, 1, 200)})
    frame.dp.set_budget(rho=1.0)
    released = frame.dp.quantile("x", np.array(0.5), epsilon=0.5, bounds=(0, 1))
    assert isinstance(released, float)
    assert frame.dp.ledger.spent.rho == Fraction(1, 8)


def test_quantiles_on_a_zcdp_budget_cost_each_its_own_epsilon() -> None:
    # Three quantiles of one call are three releases of epsilon / 3: 3 (0.1)**2 / 2, as
    # three calls cost, where the call was charged (0.3)**2 / 2, three times more.
    frame = pd.DataFrame({"x": np.linspace(0, 1, 200)})
    frame.dp.set_budget(rho=1.0)
    quartiles = frame.dp.quantile("x", [0.25, 0.5, 0.75], epsilon=0.3, bounds=(0, 1))
    assert frame.dp.ledger.spent.rho == 3 * Fraction(1, 10) ** 2 / 2
    info = dpframe.release_info(quartiles)
    assert info["epsilon_exact"] == "3/10"
    assert [part["epsilon_exact"] for part in info["parts"]] == ["1/10"] * 3  # type: ignore[index, union-attr]
    # Validity twin: on a pure budget the epsilons add, whatever the split.
    plain = pd.DataFrame({"x": np.linspace(0, 1, 200)})
    plain.dp.set_budget(epsilon=1.0)
    plain.dp.quantile("x", [0.25, 0.5, 0.75], epsilon=0.3, bounds=(0, 1))
    assert plain.dp.ledger.spent.epsilon == Fraction(3, 10)


def test_describe_with_gaussian_noise_is_charged_its_rho_exactly() -> None:
    """Moments get rho/(2k) per column (a third per part), the p percentiles the largest
    epsilon on a 1e-6 grid whose p releases of epsilon/p cost epsilon**2/(2p) <= rho/(2k);
    the zCDP ledger is charged their sum."""
    frame = pd.DataFrame({"x": np.linspace(0, 1, 500), "y": np.linspace(0, 10, 500)})
    frame.dp.set_budget(rho=1.0)
    rho = Fraction(3, 10)
    table = frame.dp.describe(noise="gaussian", rho=rho, bounds={"x": (0, 1), "y": (0, 10)})
    assert list(table.index) == ["count", "mean", "std", "25%", "50%", "75%"]
    info = dpframe.release_info(table)
    share, p = rho / 4, 3
    pure = Fraction(math.isqrt(share.numerator * 2 * p * 10**12 // share.denominator), 10**6)
    assert pure**2 / (2 * p) <= share < (pure + Fraction(1, 10**6)) ** 2 / (2 * p)
    assert frame.dp.ledger.spent.rho == 2 * share + 2 * pure**2 / (2 * p)
    assert frame.dp.ledger.spent.rho <= rho
    parts = info["parts"]
    assert [p["measure"] for p in parts] == (["zCDP"] * 3 + ["pure"] * 3) * 2  # type: ignore[index, union-attr]
    assert [Fraction(p["rho_exact"]) for p in parts if p["measure"] == "zCDP"] == [share / 3] * 6  # type: ignore[index, union-attr, arg-type]
    assert info["split"]["x"]["percentiles"]["epsilon"] == float(pure)  # type: ignore[index, call-overload]
    assert info["mechanism"].startswith("discrete Gaussian")  # type: ignore[union-attr]


def test_describe_with_gaussian_noise_refuses_what_cannot_be_split() -> None:
    frame = pd.DataFrame({"x": np.linspace(0, 1, 50)})
    frame.dp.set_budget(rho=1.0)
    with pytest.raises(InvalidParameterError, match="percentiles"):
        frame.dp.describe(noise="gaussian", rho=Fraction(1, 10**15), bounds={"x": (0, 1)})
    with pytest.raises(InvalidParameterError, match="rho"):
        frame.dp.describe(noise="gaussian", epsilon=0.5, bounds={"x": (0, 1)})  # no delta
    assert frame.dp.ledger.history.empty


@pytest.mark.statistical
def test_describe_with_gaussian_noise_intervals_cover() -> None:
    """400 describes of 2,000 values 1 and 3 in (0, 4): the mean's and std's 95% noise
    intervals each miss at most the binomial bound at 1e-6."""
    frame = pd.DataFrame({"x": np.tile([1.0, 3.0], 1000)})
    frame.dp.set_budget(rho=math.inf)
    truth = {"mean": 2.0, "std": float(frame["x"].std())}
    misses = {"mean": 0, "std": 0}
    runs = 400
    for _ in range(runs):
        table = frame.dp.describe(noise="gaussian", rho=0.02, bounds={"x": (0, 4)}, rng=None)
        intervals = dpframe.release_info(table)["noise_interval"]["x"]  # type: ignore[index, call-overload]
        for name in misses:
            lower, upper = intervals[name]
            misses[name] += not lower <= truth[name] <= upper
    for name in misses:
        assert misses[name] <= stats.binom.isf(FALSE_ALARM, runs, 0.05)
