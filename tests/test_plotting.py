"""dpframe.plotting: the numbers behind every plot, checked against exact arithmetic and samples.

The plots are headless (Agg). Every test checks the DATA the artists hold (bar heights,
line y values) against an independent computation, not only that drawing succeeds.
"""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Iterator
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.container import BarContainer
from numpy.typing import NDArray

import dpframe.mechanisms as dpm
from dpframe import plotting
from dpframe.errors import (
    DPFrameError,
    InvalidParameterError,
    InvalidParameterTypeError,
    MissingDependencyError,
)
from tests._stats import FALSE_ALARM, chi_square_pvalue

N_GOF = 200_000


@pytest.fixture(autouse=True)
def _close_figures() -> Iterator[None]:
    yield
    plt.close("all")


# ---------------------------------------------------------------- exact references


def _alpha(unit: Fraction) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = 60
        return (-Decimal(unit.numerator) / Decimal(unit.denominator)).exp()


def _exact_clamped(value: int, bounds: tuple[int, int], unit: Fraction) -> list[float]:
    """P(clamp(v + N) = o) for o = lo..hi, from eq. 2.1 summed term by term (no closed tails)."""
    lo, hi = bounds
    v = min(max(value, lo), hi)
    with localcontext() as ctx:
        ctx.prec = 60
        a = _alpha(unit)
        z = (1 - a) / (1 + a)
        pmf = [z * a ** abs(o - v) for o in range(lo, hi + 1)]
        # tails: sum_{k >= K} z a^k = z a^K / (1 - a)
        pmf[0] = z * a ** (v - lo) / (1 - a) if v > lo else pmf[0] + z * a / (1 - a)
        pmf[-1] = z * a ** (hi - v) / (1 - a) if v < hi else pmf[-1] + z * a / (1 - a)
        return [float(p) for p in pmf]


def _seed_rejection_epsilon(unit: Fraction, n: int) -> Decimal:
    """ε' = ε - ln M from seed 002's L and U (eq. 2.2), minus the documented 2^-20 ε margin.

    dpframe uses exactly this value wherever it is verified private, which is the case
    for every setting these tests compare against.
    """
    with localcontext() as ctx:
        ctx.prec = 60
        a = _alpha(unit)
        l_n = (a ** (2 * n + 1) + a ** (n + 1)) / (a ** (2 * n + 2) + a**n)
        u_0 = (a + a ** (n + 1)) / (1 + a ** (n + 2))
        l_1 = (a**3 + a ** (n + 1)) / (a**4 + a**n)
        u_n1 = (a ** (2 * n - 1) + a ** (n + 1)) / (a ** (2 * n - 2) + a ** (n + 2))
        m = max(1 / l_n, 1 / u_0, l_1, u_n1)
        eps = Decimal(unit.numerator) / Decimal(unit.denominator)
        return eps - m.ln() - eps / Decimal(2**20)


def _exact_resampled(
    value: int, bounds: tuple[int, int], unit: Fraction, rate: Fraction | None = None
) -> list[float]:
    """The conditional distribution at seed 002's epsilon' (or at ``rate``, per unit)."""
    lo, hi = bounds
    with localcontext() as ctx:
        ctx.prec = 60
        decay = (
            _seed_rejection_epsilon(unit, hi - lo)
            if rate is None
            else Decimal(rate.numerator) / Decimal(rate.denominator)
        )
        weights = [(-decay * abs(o - value)).exp() for o in range(lo, hi + 1)]
        total = sum(weights)
        return [float(w / total) for w in weights]


# ---------------------------------------------------------------- output_distribution


@pytest.mark.parametrize(
    ("value", "bounds", "epsilon", "sensitivity"),
    [
        (20, (0, 30), 0.1, 1),  # seed 002, Figure 2.1
        (19, (0, 30), 0.1, 1),
        (0, (0, 10), 1.0, 1),
        (10, (0, 10), 1.0, 3),
        (-4, (-5, 9), 5.0, 1),
        (50, (0, 30), 0.5, 2),  # a value outside the bounds is clamped first
        (3, (3, 4), 0.01, 1),
    ],
)
def test_clamped_distribution_is_the_exact_truncated_pmf(
    value: int, bounds: tuple[int, int], epsilon: float, sensitivity: int
) -> None:
    outputs, probs = plotting.output_distribution(
        value, epsilon=epsilon, sensitivity=sensitivity, bounds=bounds
    )
    assert outputs.tolist() == list(range(bounds[0], bounds[1] + 1))
    unit = Fraction(str(epsilon)) / sensitivity
    np.testing.assert_allclose(probs, _exact_clamped(value, bounds, unit), rtol=1e-12, atol=0)
    assert math.isclose(float(probs.sum()), 1.0, rel_tol=1e-12)


def test_figure_2_1_numbers() -> None:
    # Seed 002 reads P(0) ≈ 0.075 and P({0, 30}) ≈ 0.25 off its figure; the exact values:
    _, probs = plotting.output_distribution(20, epsilon=0.1, bounds=(0, 30))
    a = math.exp(-0.1)
    assert math.isclose(probs[0], a**20 / (1 + a), rel_tol=1e-13)
    assert math.isclose(probs[0] + probs[-1], (a**20 + a**10) / (1 + a), rel_tol=1e-13)
    assert round(float(probs[0]), 3) == 0.071
    assert round(float(probs[0] + probs[-1]), 3) == 0.264


@pytest.mark.parametrize(
    ("value", "bounds", "epsilon"),
    [(20, (0, 30), 0.1), (0, (0, 30), 0.1), (5, (0, 10), 1.0), (2, (-3, 3), 2.0)],
)
def test_resampled_distribution_follows_seed_002_section_2_4(
    value: int, bounds: tuple[int, int], epsilon: float
) -> None:
    outputs, probs = plotting.output_distribution(
        value, epsilon=epsilon, bounds=bounds, out_of_range="resample", rejection_rule="seed"
    )
    assert outputs.tolist() == list(range(bounds[0], bounds[1] + 1))
    expected = _exact_resampled(value, bounds, Fraction(str(epsilon)))
    np.testing.assert_allclose(probs, expected, rtol=1e-12, atol=0)
    # By default: the epsilon' the mechanism draws with (issue 13: the largest verified one).
    _, drawn = plotting.output_distribution(
        value, epsilon=epsilon, bounds=bounds, out_of_range="resample"
    )
    rate = dpm.geometric_rejection_epsilon(epsilon=epsilon, bounds=bounds)
    assert rate >= Fraction(_seed_rejection_epsilon(Fraction(str(epsilon)), bounds[1] - bounds[0]))
    expected = _exact_resampled(value, bounds, Fraction(str(epsilon)), rate)
    np.testing.assert_allclose(drawn, expected, rtol=1e-12, atol=0)


def test_unbounded_window_holds_all_but_a_thousandth() -> None:
    for epsilon, sensitivity in [(0.1, 1), (1.0, 1), (1.0, 4), (7.0, 1)]:
        outputs, probs = plotting.output_distribution(100, epsilon=epsilon, sensitivity=sensitivity)
        unit = epsilon / sensitivity
        reach = int(outputs[-1]) - 100
        assert outputs.tolist() == list(range(100 - reach, 100 + reach + 1))
        a = math.exp(-unit)
        ideal = (1 - a) / (1 + a) * a ** np.abs(outputs - 100)
        np.testing.assert_allclose(probs, ideal, rtol=1e-12, atol=0)
        tail = 2 * a ** (reach + 1) / (1 + a)  # P(|N| > reach)
        assert tail <= 1e-3
        assert reach == 0 or 2 * a**reach / (1 + a) > 1e-3  # the window is the smallest


# The distributions must describe what dpframe.mechanisms.geometric actually releases.


@pytest.mark.parametrize(
    ("value", "bounds", "out_of_range"),
    [(20, (0, 30), "clamp"), (20, (0, 30), "resample"), (2, (0, 40), "resample")],
)
def test_distribution_matches_the_mechanism(
    value: int, bounds: tuple[int, int], out_of_range: str
) -> None:
    released = dpm.geometric(
        np.full(N_GOF, value), epsilon=0.1, bounds=bounds, out_of_range=out_of_range
    )
    outputs, probs = plotting.output_distribution(
        value, epsilon=0.1, bounds=bounds, out_of_range=out_of_range
    )
    assert chi_square_pvalue(released, outputs, probs) > FALSE_ALARM


def test_distribution_check_detects_a_weakened_mechanism() -> None:
    # Validity twin: 25% less noise (scale 0.75/ε), and rejection that forgot ln M, fail.
    outputs, probs = plotting.output_distribution(20, epsilon=0.1, bounds=(0, 30))
    weak = dpm.geometric(np.full(N_GOF, 20), epsilon=0.1 / 0.75, bounds=(0, 30))
    assert chi_square_pvalue(weak, outputs, probs) < FALSE_ALARM
    released = dpm.geometric(
        np.full(N_GOF, 20), epsilon=0.1, bounds=(0, 30), out_of_range="resample"
    )
    naive = np.exp(-0.1 * np.abs(outputs - 20))
    assert chi_square_pvalue(released, outputs, naive / naive.sum()) < FALSE_ALARM


def test_output_distribution_refusals() -> None:
    with pytest.raises(InvalidParameterError, match="epsilon"):
        plotting.output_distribution(1, epsilon=0)
    with pytest.raises(InvalidParameterTypeError, match="integers"):
        plotting.output_distribution(1.5, epsilon=1.0)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="one integer"):
        plotting.output_distribution([1, 2], epsilon=1.0)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="resample"):
        plotting.output_distribution(1, epsilon=1.0, out_of_range="resample")
    # seed 002's epsilon - ln M is <= 0 here; the verified fallback still gives a distribution
    _, wide = plotting.output_distribution(1, epsilon=1.0, bounds=(0, 100), out_of_range="resample")
    assert wide.sum() == pytest.approx(1.0)
    with pytest.raises(InvalidParameterError, match="out_of_range"):
        plotting.output_distribution(1, epsilon=1.0, bounds=(0, 3), out_of_range="drop")
    with pytest.raises(InvalidParameterError, match="lo <= hi"):
        plotting.output_distribution(1, epsilon=1.0, bounds=(3, 0))
    with pytest.raises(InvalidParameterError, match="outputs"):
        plotting.output_distribution(1, epsilon=1e-4)  # 150,000 outputs: refused
    with pytest.raises(InvalidParameterError, match="200"):
        plotting.output_distribution(1, epsilon=500.0)
    outputs, probs = plotting.output_distribution(9, epsilon=1.0, bounds=(4, 4))
    assert outputs.tolist() == [4]
    assert probs.tolist() == [1.0]


# ---------------------------------------------------------------- layout: ticks and legends

# matplotlib's "small" at the default 10 pt is 8.3 pt; "x-small" (6.9 pt) is too small to read.
READABLE_POINTS = 8.0


def _visible_xticks(ax: Any) -> NDArray[np.float64]:
    ax.figure.canvas.draw()
    ticks = np.asarray(ax.get_xticks(), dtype=np.float64)
    low, high = ax.get_xlim()
    return ticks[(ticks >= low) & (ticks <= high)]


def _legend_box(ax: Any) -> Any:
    ax.figure.canvas.draw()
    return ax.get_legend().get_window_extent()


def _points_under_legend(ax: Any) -> int:
    """How many drawn points of the axes' lines fall inside the legend's box (display units)."""
    box = _legend_box(ax)
    hidden = 0
    for line in ax.lines:
        xy = np.column_stack([line.get_xdata(), line.get_ydata()]).astype(np.float64)
        shown = line.get_transform().transform(xy)
        hidden += int(
            np.sum(
                (shown[:, 0] >= box.x0)
                & (shown[:, 0] <= box.x1)
                & (shown[:, 1] >= box.y0)
                & (shown[:, 1] <= box.y1)
            )
        )
    return hidden


def _legend_points(ax: Any) -> float:
    return min(text.get_fontsize() for text in ax.get_legend().get_texts())


# ---------------------------------------------------------------- plot_output_distribution


def _bars(ax: Any) -> list[BarContainer]:
    return [c for c in ax.containers if isinstance(c, BarContainer)]


def test_bar_heights_are_the_distributions() -> None:
    values, bounds = [19, 20, 21], (0, 30)
    ax = plotting.plot_output_distribution(values, epsilon=0.1, bounds=bounds)
    bars = _bars(ax)
    assert [b.get_label() for b in bars] == [f"true value {v}" for v in values]
    for i, (v, container) in enumerate(zip(values, bars, strict=True)):
        heights = [patch.get_height() for patch in container.patches]
        centres = [patch.get_x() + patch.get_width() / 2 for patch in container.patches]
        _, expected = plotting.output_distribution(v, epsilon=0.1, bounds=bounds)
        np.testing.assert_allclose(heights, expected, rtol=1e-15)
        np.testing.assert_allclose(centres, np.arange(31) + (i - 1) * 0.8 / 3, atol=1e-12)
    # Differential privacy, as the bars show it: neighbours differ by at most e^ε everywhere.
    h = np.array([[p.get_height() for p in c.patches] for c in bars])
    assert np.all(h[1:] <= math.exp(0.1) * h[:-1] * (1 + 1e-12))
    assert np.all(h[:-1] <= math.exp(0.1) * h[1:] * (1 + 1e-12))


def test_resampled_bars_are_nearly_uniform_and_titled_with_epsilon_prime() -> None:
    ax = plotting.plot_output_distribution(
        [19, 20, 21], epsilon=0.1, bounds=(0, 30), out_of_range="resample", rejection_rule="seed"
    )
    heights = np.array([[p.get_height() for p in c.patches] for c in _bars(ax)])
    np.testing.assert_allclose(heights[1], _exact_resampled(20, (0, 30), Fraction(1, 10)))
    assert heights.max() / heights.min() < 1.5  # seed 002: "nearly uniform"
    rate = float(_seed_rejection_epsilon(Fraction(1, 10), 30))
    assert f"ε' = {rate:.4g}" in ax.get_title()
    # The mechanism's own epsilon' (six times the seed's here) keeps far more information.
    ax = plotting.plot_output_distribution(
        [19, 20, 21], epsilon=0.1, bounds=(0, 30), out_of_range="resample"
    )
    heights = np.array([[p.get_height() for p in c.patches] for c in _bars(ax)])
    assert heights.max() / heights.min() > 2.5
    largest = float(dpm.geometric_rejection_epsilon(epsilon=0.1, bounds=(0, 30)))
    assert f"ε' = {largest:.4g}" in ax.get_title()


def test_unbounded_bars_and_samples_share_one_range() -> None:
    samples = [np.array([-50, 0, 0, 3]), np.array([1, 1, 60])]
    ax = plotting.plot_output_distribution([0, 1], epsilon=1.0, samples=samples)
    bars = _bars(ax)
    for container in bars:
        assert len(container.patches) == 111  # -50..60, widened to hold every sample
    heights = [p.get_height() for p in bars[0].patches]
    outputs, probs = plotting.output_distribution(0, epsilon=1.0)
    start = int(outputs[0]) + 50
    np.testing.assert_allclose(heights[start : start + outputs.size], probs, rtol=1e-15)
    assert sum(heights) == pytest.approx(float(probs.sum()), rel=1e-12)
    dots = [line for line in ax.lines if str(line.get_label()).startswith("observed")]
    assert [d.get_label() for d in dots] == [
        "observed for 0 (n=4)",
        "observed for 1 (n=3)",
    ]
    for sample, line in zip(samples, dots, strict=True):
        expected = np.bincount(sample + 50, minlength=111) / sample.size
        np.testing.assert_array_equal(np.asarray(line.get_ydata()), expected)


def test_observed_frequencies_of_released_values() -> None:
    released = dpm.geometric(np.full(N_GOF, 20), epsilon=0.1, bounds=(0, 30))
    ax = plotting.plot_output_distribution(20, epsilon=0.1, bounds=(0, 30), samples=released)
    (line,) = ax.lines
    np.testing.assert_array_equal(
        np.asarray(line.get_ydata()), np.bincount(released, minlength=31) / N_GOF
    )


def test_plot_output_distribution_uses_the_given_axes_and_refuses_before_drawing() -> None:
    _fig, ax = plt.subplots()
    assert plotting.plot_output_distribution(5, epsilon=1.0, bounds=(0, 9), ax=ax) is ax
    assert len(_bars(ax)) == 1
    before = plt.get_fignums()
    with pytest.raises(InvalidParameterError, match="epsilon"):
        plotting.plot_output_distribution(5, epsilon=-1.0)
    with pytest.raises(InvalidParameterError, match="one array of outputs per true value"):
        plotting.plot_output_distribution([1, 2], epsilon=1.0, samples=[np.array([1])])
    with pytest.raises(InvalidParameterTypeError, match="samples"):
        plotting.plot_output_distribution(1, epsilon=1.0, samples=np.array([0.5]))
    with pytest.raises(InvalidParameterTypeError, match="Axes"):
        plotting.plot_output_distribution(1, epsilon=1.0, ax="axes")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="flat list"):
        plotting.plot_output_distribution(np.ones((2, 2), dtype=int), epsilon=1.0)
    assert plt.get_fignums() == before  # nothing was drawn
    assert len(_bars(ax)) == 1


def test_output_ticks_are_integers_and_the_legend_is_readable_above_the_bars() -> None:
    # A narrow range of outputs is where matplotlib would put ticks at 0.5, 1.5, ...
    ax = plotting.plot_output_distribution(
        [1, 2], epsilon=1.0, bounds=(0, 3), samples=[np.array([0, 1]), np.array([2, 3])]
    )
    ticks = _visible_xticks(ax)
    assert ticks.size >= 2
    np.testing.assert_array_equal(ticks, np.round(ticks))
    assert _legend_points(ax) >= READABLE_POINTS
    box = _legend_box(ax)
    for container in _bars(ax):
        for patch in container.patches:
            assert not patch.get_window_extent().overlaps(box)
    assert _points_under_legend(ax) == 0  # nor any dot of the observed frequencies
    # Figure 2.1's three true values with their samples: the legend stays inside the axes
    values = [19, 20, 21]
    samples = [np.full(10, v) for v in values]
    ax = plotting.plot_output_distribution(values, epsilon=0.1, bounds=(0, 30), samples=samples)
    box, frame = _legend_box(ax), ax.get_window_extent()
    assert frame.x0 <= box.x0
    assert box.x1 <= frame.x1
    assert box.y1 <= frame.y1
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "true value 19",
        "true value 20",
        "true value 21",
        "observed, n=10 each",
    ]


def test_the_tick_check_sees_fractional_ticks() -> None:
    # validity twin: the same axes with matplotlib's default locator fail the check above
    from matplotlib.ticker import AutoLocator

    ax = plotting.plot_output_distribution([1, 2], epsilon=1.0, bounds=(0, 3))
    ax.xaxis.set_major_locator(AutoLocator())
    ticks = _visible_xticks(ax)
    assert np.any(ticks != np.round(ticks))


# ---------------------------------------------------------------- plot_decision_curves


def _lines_by_gid(ax: Any) -> dict[str, Any]:
    return {line.get_gid(): line for line in ax.lines}


def test_decision_curves_are_decision_probability() -> None:
    counts = np.arange(200, -1, -1)  # unsorted on purpose
    ax = plotting.plot_decision_curves(counts, min_count=100, epsilon=0.1, delta=1e-3, p=0.7)
    lines = _lines_by_gid(ax)
    assert set(lines) == {"laplace", "cutoff", "generalized", "min_count"}
    x = np.arange(201)
    expected = {
        "laplace": dpm.decision_probability(x, min_count=100, epsilon=0.1, p=0.7),
        "cutoff": dpm.decision_probability(
            x, min_count=100, epsilon=0.1, delta=1 - math.exp(-0.1), method="cutoff"
        ),
        "generalized": dpm.decision_probability(
            x, min_count=100, epsilon=0.1, delta=1e-3, method="generalized", p=0.7
        ),
    }
    for method, probs in expected.items():
        np.testing.assert_array_equal(np.asarray(lines[method].get_xdata()), x)
        np.testing.assert_array_equal(np.asarray(lines[method].get_ydata()), probs)
    assert "δ = 0, p = 0.7)" in lines["laplace"].get_label()
    assert "1 − exp(−ε)" in lines["cutoff"].get_label()
    assert "δ = 0.001, p = 0.7)" in lines["generalized"].get_label()
    assert list(lines["min_count"].get_xdata()) == [100, 100]
    # the curves' defining points (seed 001): cutoff is 1 from m on, p at m otherwise
    assert lines["cutoff"].get_ydata()[100] == 1.0
    assert lines["cutoff"].get_ydata()[99] == pytest.approx(math.exp(-0.1), rel=1e-9)
    assert lines["laplace"].get_ydata()[100] == pytest.approx(0.7, rel=1e-9)


def test_seed_001_laplace_offset_and_generalized_band() -> None:
    m, eps = 100_000, 1e-3
    counts = np.arange(m - 8000, m + 4001)
    ax = plotting.plot_decision_curves(
        counts, min_count=m, epsilon=eps, methods=["laplace"], p=0.99
    )
    y = np.asarray(_lines_by_gid(ax)["laplace"].get_ydata())
    # k = m + ln(2(1 - p))/ε = m - 3912: the curve is a fair coin there
    assert y[counts == m - 3912][0] == pytest.approx(0.5, abs=1e-3)
    assert y[counts == m][0] == pytest.approx(0.99, rel=1e-9)
    ax = plotting.plot_decision_curves(
        counts, min_count=m, epsilon=eps, delta=eps, methods=["generalized", "laplace"]
    )
    lines = _lines_by_gid(ax)
    gen, lap = (np.asarray(lines[k].get_ydata()) for k in ("generalized", "laplace"))
    band = counts[(gen > 0.01) & (gen < 0.99)]
    assert 700 < band.size < 900  # seed 001: about 400 on each side of p0
    assert 7700 < counts[(lap > 0.01) & (lap < 0.99)].size < 8000  # about 8000


def test_decision_curve_refusals_draw_nothing() -> None:
    before = plt.get_fignums()
    counts = np.arange(10)
    with pytest.raises(InvalidParameterError, match="generalized"):
        plotting.plot_decision_curves(
            counts, min_count=5, epsilon=1.0, delta=0.1, methods=["laplace"]
        )
    with pytest.raises(InvalidParameterError, match="cutoff"):
        plotting.plot_decision_curves(counts, min_count=5, epsilon=1.0, methods=["cutoff"], p=0.9)
    with pytest.raises(InvalidParameterError, match="methods"):
        plotting.plot_decision_curves(counts, min_count=5, epsilon=1.0, methods=["median"])
    with pytest.raises(InvalidParameterError, match="more than once"):
        plotting.plot_decision_curves(counts, min_count=5, epsilon=1.0, methods=["cutoff"] * 2)
    with pytest.raises(InvalidParameterTypeError, match="methods"):
        plotting.plot_decision_curves(counts, min_count=5, epsilon=1.0, methods="laplace")
    with pytest.raises(InvalidParameterError, match="negative"):
        plotting.plot_decision_curves([-1, 2], min_count=5, epsilon=1.0)
    with pytest.raises(InvalidParameterError, match="epsilon"):
        plotting.plot_decision_curves(counts, min_count=5, epsilon=0.0)
    assert plt.get_fignums() == before
    # cutoff at a large epsilon: its delta 1 - e^-ε rounds to 1.0 in float, kept below 1
    ax = plotting.plot_decision_curves(counts, min_count=5, epsilon=50.0, methods=["cutoff"])
    assert _lines_by_gid(ax)["cutoff"].get_ydata()[5] == 1.0


def test_decision_legend_hides_no_curve_and_names_p() -> None:
    ax = plotting.plot_decision_curves(
        np.arange(0, 201), min_count=100, epsilon=0.1, delta=0.01, p=0.99
    )
    assert _points_under_legend(ax) == 0
    assert _legend_points(ax) >= READABLE_POINTS
    ticks = _visible_xticks(ax)
    np.testing.assert_array_equal(ticks, np.round(ticks))
    lines = _lines_by_gid(ax)
    assert lines["laplace"].get_label().endswith("p = 0.99)")
    assert lines["generalized"].get_label().endswith("p = 0.99)")
    assert "p =" not in lines["cutoff"].get_label()  # cutoff has no p: it is 1 at m
    ax = plotting.plot_decision_curves(np.arange(0, 201), min_count=100, epsilon=0.1)
    assert all("p =" not in line.get_label() for line in ax.lines)  # the default p = ½


def test_the_legend_check_sees_a_legend_over_the_curves() -> None:
    # validity twin: the legend in the axes' upper left (where it used to be) covers the
    # steep part of the cutoff curve at m = 100, epsilon = 0.1
    ax = plotting.plot_decision_curves(np.arange(0, 201), min_count=100, epsilon=0.1, delta=0.01)
    ax.legend(loc="upper left", fontsize="small")
    assert _points_under_legend(ax) > 0


# ---------------------------------------------------------------- plot_error_vs_epsilon


def test_error_bar_line_is_geometric_accuracy() -> None:
    eps: list[float | Fraction] = [1.0, 0.01, 0.1, 10.0, Fraction(1, 3)]
    ax = plotting.plot_error_vs_epsilon(eps, sensitivity=2, alpha=0.1)
    (line,) = ax.lines
    assert line.get_gid() == "error_bar"
    ordered = sorted(float(e) for e in eps)
    np.testing.assert_array_equal(np.asarray(line.get_xdata()), ordered)
    expected = [dpm.geometric_accuracy(epsilon=e, sensitivity=2, alpha=0.1) for e in ordered]
    assert list(np.asarray(line.get_ydata())) == expected
    assert ax.get_xscale() == "log"
    assert "90%" in str(line.get_label())


def _observed_band(epsilon: float, alpha: float, n: int, tests: int) -> tuple[int, int]:
    """Where the observed quantile must fall unless an event of probability FALSE_ALARM occurs.

    The observed tail at a fixed a is within t of P(|N| > a) except with probability
    2 exp(-2 n t^2) (Hoeffding); union over ``tests`` such checks.
    """
    t = math.sqrt(math.log(2 * tests / FALSE_ALARM) / (2 * n))
    return (
        dpm.geometric_accuracy(epsilon=epsilon, alpha=alpha + t),
        dpm.geometric_accuracy(epsilon=epsilon, alpha=alpha - t),
    )


EPSILONS_DRAWN = [0.1, 1.0]


def _observed(ax: Any) -> list[int]:
    return [int(y) for y in _lines_by_gid(ax)["observed"].get_ydata()]


def test_observed_errors_sit_on_the_error_bar() -> None:
    n = N_GOF
    ax = plotting.plot_error_vs_epsilon(EPSILONS_DRAWN, draws=n)
    for eps, got in zip(EPSILONS_DRAWN, _observed(ax), strict=True):
        low, high = _observed_band(eps, 0.05, n, 2 * len(EPSILONS_DRAWN))
        assert low <= got <= high


def test_observed_errors_expose_too_little_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    # Validity twin: noise with 25% smaller scale lands below the band for every epsilon.
    def weakened(values: NDArray[np.int64], *, epsilon: Any, sensitivity: Any) -> Any:
        return dpm.geometric(values, epsilon=Fraction(epsilon) / Fraction(3, 4))

    monkeypatch.setattr(plotting, "geometric", weakened)
    n = N_GOF
    ax = plotting.plot_error_vs_epsilon(EPSILONS_DRAWN, draws=n)
    for eps, got in zip(EPSILONS_DRAWN, _observed(ax), strict=True):
        low, _ = _observed_band(eps, 0.05, n, 2 * len(EPSILONS_DRAWN))
        assert got < low


def test_error_plot_refusals() -> None:
    before = plt.get_fignums()
    with pytest.raises(InvalidParameterError, match="epsilons"):
        plotting.plot_error_vs_epsilon([0.1, -1.0])
    with pytest.raises(InvalidParameterTypeError, match="epsilons"):
        plotting.plot_error_vs_epsilon([])
    with pytest.raises(InvalidParameterTypeError, match="epsilons"):
        plotting.plot_error_vs_epsilon(["a"])
    with pytest.raises(InvalidParameterError, match="alpha"):
        plotting.plot_error_vs_epsilon([1.0], alpha=1.5)
    with pytest.raises(InvalidParameterError, match="draws"):
        plotting.plot_error_vs_epsilon([1.0], draws=0)
    with pytest.raises(InvalidParameterTypeError, match="draws"):
        plotting.plot_error_vs_epsilon([1.0], draws=True)
    assert plt.get_fignums() == before


# ---------------------------------------------------------------- without matplotlib


def test_missing_matplotlib_raises_an_import_error_that_names_the_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.axes", None)  # import now fails
    with pytest.raises(MissingDependencyError, match=r'pip install "dpframe\[plot\]"') as e:
        plotting.plot_error_vs_epsilon([1.0])
    assert isinstance(e.value, ImportError)
    assert isinstance(e.value, DPFrameError)


def test_module_imports_without_matplotlib() -> None:
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "import dpframe.plotting as p\n"
        "print(p.output_distribution(20, epsilon=0.1, bounds=(0, 30))[1].size)\n"
        "try:\n"
        "    p.plot_output_distribution(20, epsilon=0.1)\n"
        "except ImportError as e:\n"
        "    print(type(e).__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.split() == ["31", "MissingDependencyError"]
