"""dpframe.mechanisms.quantile: exact output distribution, privacy, error bars, bad input."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats

import dpframe.mechanisms as dpm
from dpframe import _quantiles
from dpframe._random import bit_source
from dpframe.errors import InvalidParameterError, InvalidParameterTypeError, NoiseOverflowError
from tests._stats import FALSE_ALARM, audit, chi_square_pvalue, delta_tolerance
from tests.conftest import WordCounter

N_GOF = 200_000
N_AUDIT = 1_000_000

# ---------------------------------------------------------------- the exact distribution


def _brute_scores(values: list[float], candidates: NDArray[np.float64], q: Fraction) -> list[int]:
    """The documented scores, from the definition: d times the rank distance of each cell."""
    p, d = q.numerator, q.denominator
    mids = [float(a) / 2 + float(b) / 2 for a, b in itertools.pairwise(candidates)]
    ends = [-math.inf, *mids, math.inf]
    n = len(values)
    scores = []
    for j in range(len(candidates)):
        below = sum(v < ends[j] for v in values)
        through = sum(v < ends[j + 1] for v in values)
        scores.append(max(d * below - p * n, p * n - d * through, 0))
    return scores


def _noisy_max_pmf(scores: list[int], unit_epsilon: float) -> NDArray[np.float64]:
    """P(candidate j is released): argmax of N_j - s_j, uniform among ties.

    N_j are independent two-sided geometric with a = exp(-unit (1 - 2^-20)) (the engine's
    target; the realized coins differ by a relative 2^-19, far below what 1e6 samples see).
    P(j wins) = sum_y P(Y_j = y) E[1 / (1 + #others tied at y); all others <= y], and
    E[1/(1 + K)] = int_0^1 prod_k (P(Y_k < y) + t P(Y_k = y)) dt, integrated exactly as a
    polynomial in t.
    """
    a = math.exp(-unit_epsilon * (1 - 2.0**-20))
    c = (1 - a) / (1 + a)
    s = np.asarray(scores, dtype=np.int64)
    width = math.ceil(60 / unit_epsilon) + 2
    ys = np.arange(-width - int(s.max()), width + 1)

    def pmf(k: NDArray[np.int64]) -> NDArray[np.float64]:
        return np.asarray(c * a ** np.abs(k))

    def below(k: NDArray[np.int64]) -> NDArray[np.float64]:  # P(N < k)
        j = k - 1
        return np.where(j >= 0, 1 - a ** np.maximum(j + 1, 0) / (1 + a), a ** np.abs(j) / (1 + a))

    equal = np.stack([pmf(ys + v) for v in s], axis=1)
    less = np.stack([below(ys + v) for v in s], axis=1)
    out = np.zeros(s.size)
    for i in range(s.size):
        poly = np.ones((ys.size, 1))
        for k in range(s.size):
            if k != i:
                grown = np.zeros((ys.size, poly.shape[1] + 1))
                grown[:, :-1] += poly * less[:, k : k + 1]
                grown[:, 1:] += poly * equal[:, k : k + 1]
                poly = grown
        integral = (poly / np.arange(1, poly.shape[1] + 1)).sum(axis=1)
        out[i] = float((equal[:, i] * integral).sum())
    return out


def _releases(
    values: list[float], q: float, epsilon: float, candidates: NDArray[np.float64], n: int
) -> NDArray[np.int64]:
    """``n`` independent releases (one call: n copies of q, each with its own epsilon)."""
    out = dpm.quantile(
        np.asarray(values, dtype=float),
        [q] * n,
        epsilon=epsilon * n,
        bounds=(float(candidates[0]), float(candidates[-1])),
        candidates=candidates,
    )
    return np.searchsorted(candidates, out).astype(np.int64)


def _unit(q: float, epsilon: float) -> float:
    fraction = Fraction(q).limit_denominator(2**20)
    return epsilon / (2 * max(fraction.numerator, fraction.denominator - fraction.numerator))


GOF_CASES = [
    # values, q, epsilon per release, candidates
    pytest.param([0, 0, 1, 2.5, 2.5, 2.5, 4, 5], 0.5, 1.0, np.arange(6.0), id="median-ties"),
    pytest.param([1, 1.2, 3, 3, 3.7, 9], 0.25, 2.0, np.arange(0.0, 11, 2), id="q0.25"),
    pytest.param([0, 1, 2, 3, 4, 5, 6, 7, 8, 9], 0.9, 0.5, np.linspace(0, 9, 7), id="q0.9"),
    pytest.param([], 0.5, 1.0, np.arange(5.0), id="empty-uniform"),
    # n even, median between two cells that both hold rank n/2: two scores of 0, and
    # little noise, so most draws are ties broken at random.
    pytest.param([0, 0, 3, 3], 0.5, 8.0, np.arange(4.0), id="ties-at-the-top"),
]


@pytest.mark.statistical
@pytest.mark.parametrize(("values", "q", "epsilon", "candidates"), GOF_CASES)
def test_output_distribution_matches_the_exact_one(
    values: list[float], q: float, epsilon: float, candidates: NDArray[np.float64]
) -> None:
    scores = _brute_scores(values, candidates, Fraction(q).limit_denominator(2**20))
    pmf = _noisy_max_pmf(scores, _unit(q, epsilon))
    samples = _releases(values, q, epsilon, candidates, N_GOF)
    p = chi_square_pvalue(samples, np.arange(candidates.size), pmf, min_expected=5)
    assert p > FALSE_ALARM


@pytest.mark.statistical
def test_goodness_of_fit_rejects_a_fixed_tie_break(monkeypatch: pytest.MonkeyPatch) -> None:
    """Validity twin: the same test rejects ties always broken towards the first candidate."""

    def first(noisy: NDArray[np.int64], source: Any) -> NDArray[np.intp]:
        return np.asarray(np.argmax(noisy, axis=1))

    monkeypatch.setattr(_quantiles, "noisy_argmax", first)
    values, q, epsilon, candidates = [0, 0, 3, 3], 0.5, 8.0, np.arange(4.0)
    pmf = _noisy_max_pmf(_brute_scores(values, candidates, Fraction(1, 2)), _unit(q, epsilon))
    samples = _releases(values, q, epsilon, candidates, N_GOF)
    assert chi_square_pvalue(samples, np.arange(4), pmf, min_expected=5) < FALSE_ALARM


@pytest.mark.statistical
def test_goodness_of_fit_rejects_half_the_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    """Validity twin: noise for sensitivity 1 where the scores need 2 is detected."""
    monkeypatch.setattr(_quantiles, "SCORE_SPREAD", 1)
    values, q, epsilon, candidates = [0, 0, 1, 2.5, 2.5, 2.5, 4, 5], 0.5, 1.0, np.arange(6.0)
    pmf = _noisy_max_pmf(_brute_scores(values, candidates, Fraction(1, 2)), _unit(q, epsilon))
    samples = _releases(values, q, epsilon, candidates, N_GOF)
    assert chi_square_pvalue(samples, np.arange(6), pmf, min_expected=5) < FALSE_ALARM


@pytest.mark.parametrize("size", [3, 7, 1000])
def test_tie_break_index_is_uniform(size: int) -> None:
    """The exact uniform integer behind the tie-break (rejection on the top bits)."""
    draws = _quantiles._uniform_below(bit_source(None), np.full(100_000, size))
    assert draws.min() >= 0
    assert draws.max() < size
    uniform = np.full(size, 1 / size)
    assert chi_square_pvalue(draws, np.arange(size), uniform, min_expected=5) > FALSE_ALARM


# ---------------------------------------------------------------- privacy


def _worst_loss(spread: int, q: Fraction, epsilon: float) -> float:
    """Largest log-ratio of output probabilities over all small neighbouring data sets."""
    candidates = np.arange(4.0)
    unit = epsilon / (spread * max(q.numerator, q.denominator - q.numerator))
    worst = 0.0
    for counts in itertools.product(range(3), repeat=4):
        values = [float(v) for v, k in enumerate(counts) for _ in range(k)]
        base = _noisy_max_pmf(_brute_scores(values, candidates, q), unit)
        for added in range(4):
            other = _noisy_max_pmf(_brute_scores([*values, float(added)], candidates, q), unit)
            worst = max(worst, float(np.abs(np.log(base) - np.log(other)).max()))
    return worst


@pytest.mark.statistical
@pytest.mark.parametrize("q", [Fraction(1, 2), Fraction(1, 4), Fraction(9, 10), Fraction(0)])
def test_every_small_neighbour_pair_stays_within_epsilon(q: Fraction) -> None:
    """Exhaustive check of the Notes' proof on the exact distributions (4 candidates, up to
    8 rows, every added row); its twin: noise calibrated without the factor 2 exceeds it."""
    epsilon = 1.0
    assert _worst_loss(2, q, epsilon) <= epsilon * (1 + 1e-9)
    if q not in (0, 1):  # all scores move one way at q = 0 or 1: no factor 2 is needed
        assert _worst_loss(1, q, epsilon) > epsilon * 1.05


AUDIT_VALUES = [0.0, 0.0, 0.0, 1.0, 4.0, 4.0, 4.0]  # a worst case found by the search above
AUDIT_ADDED = 3.0


@pytest.mark.statistical
@pytest.mark.parametrize("weaken", [False, True])
def test_neighbour_audit(weaken: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """delta_hat at the charged epsilon for D and D plus one row; the validity twin draws
    noise for sensitivity 1 where the scores need 2, and must be caught."""
    epsilon, candidates = 1.0, np.arange(5.0)
    data = {0: AUDIT_VALUES, 1: [*AUDIT_VALUES, AUDIT_ADDED]}
    if weaken:
        monkeypatch.setattr(_quantiles, "SCORE_SPREAD", 1)

    def release(which: int, n: int) -> NDArray[np.int64]:
        return _releases(data[which], 0.5, epsilon, candidates, n)

    def pmf(which: int) -> NDArray[np.float64]:
        return _noisy_max_pmf(_brute_scores(data[which], candidates, Fraction(1, 2)), 0.5)

    worst, tolerance = audit(release, 0, 1, pmf, epsilon, n=N_AUDIT)
    assert (worst > tolerance) if weaken else (worst < tolerance)


def test_the_audit_tolerance_leaves_room_to_catch_the_weak_mechanism() -> None:
    """The weakened mechanism's exact delta is well above the audit's tolerance."""
    candidates = np.arange(5.0)
    weak = [
        _noisy_max_pmf(_brute_scores(v, candidates, Fraction(1, 2)), 1.0)
        for v in (AUDIT_VALUES, [*AUDIT_VALUES, AUDIT_ADDED])
    ]
    delta = max(
        float(np.maximum(0, weak[0] - math.e * weak[1]).sum()),
        float(np.maximum(0, weak[1] - math.e * weak[0]).sum()),
    )
    assert delta > 2 * delta_tolerance(weak[0], weak[1], N_AUDIT, 1.0)


# ---------------------------------------------------------------- error bars


def _normal_scores() -> NDArray[np.float64]:
    """400 values spread like a normal(50, 15) sample, to one decimal (fixed data)."""
    return np.round(stats.norm.ppf((np.arange(400) + 0.5) / 400) * 15 + 50, 1)


def _rank_distance(
    released: NDArray[np.float64],
    values: NDArray[np.float64],
    candidates: NDArray[np.float64],
    q: float,
) -> NDArray[np.float64]:
    """Distance in ranks from q n to the ranks held by each released candidate's cell."""
    mids = candidates[:-1] / 2 + candidates[1:] / 2
    ends = np.concatenate([[-np.inf], mids, [np.inf]])
    sorted_values = np.sort(values)
    j = np.searchsorted(candidates, released)
    below = np.searchsorted(sorted_values, ends[j], side="left")
    through = np.searchsorted(sorted_values, ends[j + 1], side="left")
    target = q * values.size
    return np.maximum(np.maximum(below - target, target - through), 0)


@pytest.mark.statistical
@pytest.mark.parametrize(("q", "epsilon"), [(0.5, 0.5), (0.1, 1.0)])
def test_rank_bar_and_value_interval_hold(q: float, epsilon: float) -> None:
    """With 1 - alpha probability the cell is within r ranks of q n, and the release within
    h of the order statistics at q n ± r; the failure rate must not exceed alpha."""
    values = _normal_scores()
    bounds, candidates = (0.0, 100.0), np.linspace(0, 100, 1025)
    alpha, runs = 0.05, 10_000
    r = dpm.quantile_accuracy(q, epsilon=epsilon, bounds=bounds, candidates=candidates, alpha=alpha)
    h = dpm.quantile_resolution(bounds=bounds, candidates=candidates)
    released = dpm.quantile(
        values, [q] * runs, epsilon=epsilon * runs, bounds=bounds, candidates=candidates
    )
    misses = int((_rank_distance(released, values, candidates, q) > r).sum())
    clamped = np.sort(np.clip(values, *bounds))
    n = values.size

    def order_stat(k: int) -> float:
        return bounds[0] if k < 1 else bounds[1] if k > n else float(clamped[k - 1])

    low = order_stat(math.ceil(q * n - r)) - h
    high = order_stat(math.floor(q * n + r) + 1) + h
    outside = int(((released < low) | (released > high)).sum())
    # One-sided binomial test: reject "failure rate <= alpha" at p < 1e-6.
    for failures in (misses, outside):
        assert stats.binom.sf(failures - 1, runs, alpha) > FALSE_ALARM


@pytest.mark.statistical
def test_rank_bar_test_catches_a_bar_too_narrow() -> None:
    """Validity twin: a sixth of r fails more than alpha of the time, and the test sees it.

    (The bar is a worst case over data sets, by a union bound over all candidates; on
    these data the 95th percentile of the rank error is about a quarter of r.)
    """
    values = _normal_scores()
    bounds, candidates, q, epsilon = (0.0, 100.0), np.linspace(0, 100, 1025), 0.5, 0.5
    r = dpm.quantile_accuracy(q, epsilon=epsilon, bounds=bounds, candidates=candidates)
    runs = 10_000
    released = dpm.quantile(
        values, [q] * runs, epsilon=epsilon * runs, bounds=bounds, candidates=candidates
    )
    misses = int((_rank_distance(released, values, candidates, q) > r / 6).sum())
    assert stats.binom.sf(misses - 1, runs, 0.05) < FALSE_ALARM


def test_rank_bar_matches_the_engine_convolution() -> None:
    """The closed-form tail agrees with the geometric engine's bar for sums of two noises."""
    for epsilon, m in [(1.0, 4097), (0.1, 101), (3.0, 11)]:
        t = dpm.quantile_accuracy(
            0.5, epsilon=epsilon, bounds=(0, 1), candidates=np.linspace(0, 1, m)
        )
        engine = dpm.geometric_accuracy(
            epsilon=epsilon, sensitivity=2, alpha=0.1 / (m - 1), terms=2
        )
        assert abs(2 * t - engine) <= 1  # t ranks = 2 t score units for the median


def test_rank_bar_scales_with_epsilon_and_quantiles() -> None:
    one = dpm.quantile_accuracy(0.5, epsilon=1.0, bounds=(0, 1))
    assert dpm.quantile_accuracy(0.5, epsilon=0.1, bounds=(0, 1)) > 8 * one
    both = dpm.quantile_accuracy([0.5, 0.5], epsilon=2.0, bounds=(0, 1))
    assert both.tolist() == [one, one]  # epsilon split evenly: each gets 1.0
    assert dpm.quantile_accuracy(0.5, epsilon=1.0, bounds=(0, 1), candidates=[0.5]) == 0


def test_resolution() -> None:
    assert dpm.quantile_resolution(bounds=(0, 8192)) == 1.0
    assert dpm.quantile_resolution(bounds=(0, 120), candidates=range(121)) == 0.5
    # End candidates away from the bounds: the outer cells reach the bounds.
    assert dpm.quantile_resolution(bounds=(0, 10), candidates=[3, 4, 5]) == 5
    # Rounding up: 0.1 - 0 is exact, (0.3 - 0.1) is not.
    h = dpm.quantile_resolution(bounds=(0, 0.3), candidates=[0.1, 0.3])
    assert Fraction(h) >= Fraction(0.1)
    assert Fraction(h) >= Fraction(0.3) - Fraction(0.2)


# ---------------------------------------------------------------- exact counting


def test_cells_are_counted_exactly_at_and_around_every_edge() -> None:
    gen = np.random.default_rng()
    for candidates in (
        np.unique(np.linspace(-3.7, 1e3, 4097)),
        np.array([0.0, 0.1, 0.2, 5.0, 5.5, 100.0]),  # far from evenly spaced
        np.arange(0.0, 121.0),
    ):
        edges = candidates[:-1] / 2 + candidates[1:] / 2
        near = np.concatenate(
            [edges, np.nextafter(edges, -np.inf), np.nextafter(edges, np.inf), candidates]
        )
        values = np.concatenate(
            [near, gen.uniform(-10, 1100, 100_000), [np.inf, -np.inf, 1e308, -1e308]]
        )
        gen.shuffle(values)
        got = _quantiles.cell_counts(values, candidates, edges)
        expected = np.bincount(
            np.searchsorted(edges, values, side="right"), minlength=len(candidates)
        )
        np.testing.assert_array_equal(got, expected)


def test_clamping_never_changes_a_cell() -> None:
    """Values beyond the bounds count in the end cells, as their clamped values do."""
    candidates = np.array([0.0, 1.0, 2.0])
    edges = candidates[:-1] / 2 + candidates[1:] / 2
    raw = np.array([-5.0, -np.inf, 0.0, 2.0, 7.0, np.inf])
    np.testing.assert_array_equal(
        _quantiles.cell_counts(raw, candidates, edges),
        _quantiles.cell_counts(np.clip(raw, 0, 2), candidates, edges),
    )


# ---------------------------------------------------------------- the interface


def test_returns_follow_the_shape_of_q() -> None:
    values = np.arange(1000.0)
    scalar = dpm.quantile(values, 0.5, epsilon=1.0, bounds=(0, 1000))
    assert isinstance(scalar, float)
    many = dpm.quantile(values, np.array([0.9, 0.1]), epsilon=1.0, bounds=(0, 1000))
    assert many.dtype == np.float64
    assert many.shape == (2,)


def test_order_of_q_is_kept_and_releases_are_accurate() -> None:
    """Far apart quantiles at a large epsilon: within their 1 - 1e-9 bars, so in order."""
    values = np.arange(10_000.0)
    q, epsilon, bounds = [0.9, 0.1, 0.5], 30.0, (0.0, 10_000.0)
    released = dpm.quantile(values, q, epsilon=epsilon, bounds=bounds)
    r = dpm.quantile_accuracy(q, epsilon=epsilon, bounds=bounds, alpha=1e-9)
    h = dpm.quantile_resolution(bounds=bounds)
    for got, want, bar in zip(released, q, r, strict=True):
        assert abs(got - want * 10_000) <= bar + h + 1


def test_released_values_are_candidates() -> None:
    candidates = np.array([1.0, 2.5, 7.0])
    out = dpm.quantile(
        np.arange(10.0), [0.2] * 50, epsilon=50.0, bounds=(0, 9), candidates=candidates
    )
    assert set(out.tolist()) <= set(candidates.tolist())


def test_rng_makes_releases_reproducible() -> None:
    values = np.arange(100.0)
    first = dpm.quantile(values, [0.1, 0.5], epsilon=0.1, bounds=(0, 100), rng=7)
    again = dpm.quantile(values, [0.1, 0.5], epsilon=0.1, bounds=(0, 100), rng=7)
    np.testing.assert_array_equal(first, again)


def test_q_is_read_as_an_exact_fraction() -> None:
    read = _quantiles._quantile_fractions([0.1, 1 / 3, Fraction(2, 7), 1, 0.1 + 0.2])
    assert read.distinct[:4] == (Fraction(1, 10), Fraction(1, 3), Fraction(2, 7), Fraction(1))
    assert read.distinct[4] == Fraction(3, 10)  # float noise: 0.30000000000000004 is 3/10
    # A q that would move (1e-7 read as 0 moved the target rank by 100 at n = 1e9, beyond
    # the rank error bound) is refused.
    for far in (1e-7, 0.9999999, 0.123456789):
        with pytest.raises(InvalidParameterError, match="6 decimals"):
            _quantiles._quantile_fractions([far])
    # float32 levels are read as typed: float32 0.1 is 1/10 (it is 1.5e-9 from it in float64)
    narrow = _quantiles._quantile_fractions(np.array([0.1, 0.5, 0.9], dtype=np.float32))
    assert narrow.distinct == (Fraction(1, 10), Fraction(1, 2), Fraction(9, 10))
    assert _quantiles._quantile_fractions(np.float32(0.1)).distinct == (Fraction(1, 10),)
    repeated = _quantiles._quantile_fractions([0.5, 0.5, 0.25])
    assert [repeated.distinct[i] for i in repeated.which] == [
        Fraction(1, 2),
        Fraction(1, 2),
        Fraction(1, 4),
    ]


# ---------------------------------------------------------------- bad input


GOOD: dict[str, Any] = {"values": np.arange(10.0), "q": 0.5, "epsilon": 1.0, "bounds": (0, 10)}

BAD_CALLS = [
    {"values": np.array([1.0, np.nan])},
    {"values": np.ones((2, 2))},
    {"values": np.array(["a", "b"])},
    {"values": np.array([True, False])},
    {"q": 1.5},
    {"q": -0.1},
    {"q": float("nan")},
    {"q": []},
    {"q": [[0.5]]},
    {"q": "0.5"},
    {"q": True},
    {"q": [0.5, True]},
    {"q": [0.5, None]},
    {"q": None},
    {"epsilon": 0},
    {"epsilon": -1.0},
    {"epsilon": "1"},
    {"epsilon": float("inf")},
    {"epsilon": 1e6},  # no privacy left
    {"bounds": (10, 0)},
    {"bounds": (0, 0)},
    {"bounds": (0, float("inf"))},
    {"bounds": None},
    {"bounds": (0, 1, 2)},
    {"bounds": (-1e308, 1e308)},  # hi - lo overflows
    {"candidates": [3.0, 1.0]},
    {"candidates": [1.0, 1.0, 2.0]},
    {"candidates": [-1.0, 5.0]},
    {"candidates": [1.0, 11.0]},
    {"candidates": [1.0, np.nan]},
    {"candidates": []},
    {"candidates": [[1.0, 2.0]]},
    {"candidates": ["a"]},
    {"rng": "seed"},
]


@pytest.mark.parametrize("bad", BAD_CALLS)
def test_bad_input_is_refused_before_anything_is_drawn(
    word_counter: WordCounter, bad: dict[str, Any]
) -> None:
    kwargs = {**GOOD, **bad}
    with pytest.raises((InvalidParameterError, InvalidParameterTypeError)):
        dpm.quantile(kwargs.pop("values"), kwargs.pop("q"), **kwargs)
    assert word_counter.words == 0


@pytest.mark.parametrize(
    "bad", [b for b in BAD_CALLS if "values" not in b and "rng" not in b] + [{"alpha": 1.0}]
)
def test_accuracy_refuses_the_same_input(bad: dict[str, Any]) -> None:
    kwargs = {"q": 0.5, "epsilon": 1.0, "bounds": (0, 10), **bad}
    with pytest.raises((InvalidParameterError, InvalidParameterTypeError)):
        dpm.quantile_accuracy(kwargs.pop("q"), **kwargs)


def test_epsilon_too_small_for_int64_noise(word_counter: WordCounter) -> None:
    with pytest.raises(NoiseOverflowError):
        dpm.quantile(np.arange(10.0), 0.5, epsilon=1e-18, bounds=(0, 10))
    assert word_counter.words == 0


def test_counts_that_cannot_be_counts_are_refused() -> None:
    # Negative counts were released; totals beyond int64 wrapped in the rank scores.
    grid = np.arange(3.0)
    for bad in ([-5, 10, -5], [2**62, 2**62, 0]):
        with pytest.raises(InvalidParameterError, match="counts must"):
            dpm.quantile_of_counts(bad, 0.5, epsilon=1.0, bounds=(0, 2), candidates=grid)
    out = dpm.quantile_of_counts([0, 2**61, 0], 0.5, epsilon=1.0, bounds=(0, 2),
                                        candidates=grid)  # fmt: skip
    assert np.ravel(out).tolist() == [1.0]
