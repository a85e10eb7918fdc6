"""dpframe.mechanisms.geometric: distribution, privacy, randomness, constant time, bad input."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

import dpframe.mechanisms as dpm
from dpframe import _coins, _geometric, _random
from dpframe.errors import (
    DPFrameError,
    InvalidParameterError,
    InvalidParameterTypeError,
    NoiseOverflowError,
)
from tests._stats import (
    FALSE_ALARM,
    audit,
    chi_square_pvalue,
    truncated_geometric_pmf,
    two_sided_geometric_pmf,
)
from tests.conftest import WordCounter

N_GOF = 1_000_000


def _unbounded_support(epsilon: float) -> NDArray[np.int64]:
    width = int(45 / epsilon) + 2  # mass beyond is below exp(-45)
    return np.arange(-width, width + 1)


# ---------------------------------------------------------------- goodness of fit


@pytest.mark.parametrize("epsilon", [0.01, 0.1, 1.0, 5.0])
@pytest.mark.parametrize("sensitivity", [1, 3])
def test_unbounded_noise_matches_exact_pmf(epsilon: float, sensitivity: int) -> None:
    true_value = 1000
    out = dpm.geometric(np.full(N_GOF, true_value), epsilon=epsilon, sensitivity=sensitivity)
    unit = epsilon / sensitivity
    support = _unbounded_support(unit)
    p = chi_square_pvalue(out - true_value, support, two_sided_geometric_pmf(support, unit))
    assert p > FALSE_ALARM


@pytest.mark.parametrize(
    ("epsilon", "sensitivity", "true_value", "bounds", "constant_time"),
    [
        (0.1, 1, 20, (0, 30), False),  # seed 002, Figure 2.1
        (0.1, 1, 20, (0, 30), True),
        (0.01, 1, 3, (0, 50), False),
        (0.01, 3, 40, (0, 50), True),
        (1.0, 1, 0, (0, 10), False),
        (1.0, 3, 500, (0, 10**6), True),  # head far shorter than the reach: flat tail
        (5.0, 1, 7, (-5, 9), True),
        (5.0, 3, 7, (-5, 9), False),
        (0.1, 1, 400, (0, 1000), True),
        (1.0, 1, 5, (5, 6), True),  # reach 1
    ],
)
def test_bounded_noise_matches_exact_pmf(
    epsilon: float, sensitivity: int, true_value: int, bounds: tuple[int, int], constant_time: bool
) -> None:
    out = dpm.geometric(
        np.full(N_GOF, true_value),
        epsilon=epsilon,
        sensitivity=sensitivity,
        bounds=bounds,
        constant_time=constant_time,
    )
    assert out.min() >= bounds[0]
    assert out.max() <= bounds[1]
    outputs, pmf = truncated_geometric_pmf(true_value, bounds, epsilon / sensitivity)
    assert chi_square_pvalue(out, outputs, pmf) > FALSE_ALARM


def test_seed_002_figure_2_1_end_masses() -> None:
    """n = 30, count 20, epsilon 0.1: P(0) ~ 0.071 and P(0 or 30) ~ 0.264."""
    _, pmf = truncated_geometric_pmf(20, (0, 30), 0.1)
    assert pmf[0] == pytest.approx(0.0711, abs=5e-4)
    assert pmf[0] + pmf[-1] == pytest.approx(0.2642, abs=5e-4)
    out = dpm.geometric(np.full(N_GOF, 20), epsilon=0.1, bounds=(0, 30))
    # 5.3 standard errors is a two-sided false-alarm rate below 1e-6 for a proportion.
    se = math.sqrt(pmf[0] * (1 - pmf[0]) / N_GOF)
    assert abs(float(np.mean(out == 0)) - pmf[0]) < 5.3 * se


def test_goodness_of_fit_rejects_a_wrong_epsilon() -> None:
    """Validity twin: the same test rejects noise with 25% too little scale."""
    weak = dpm.geometric(np.zeros(N_GOF, dtype=np.int64), epsilon=1.0 / 0.75)
    support = _unbounded_support(1.0)
    assert chi_square_pvalue(weak, support, two_sided_geometric_pmf(support, 1.0)) < FALSE_ALARM


# ---------------------------------------------------------------- neighbour audit


def _release(**kwargs: Any) -> Callable[[int, int], NDArray[np.int64]]:
    def draw(value: int, n: int) -> NDArray[np.int64]:
        return dpm.geometric(np.full(n, value), **kwargs)

    return draw


AUDITS = [
    pytest.param({"epsilon": 1.0}, 10, 11, None, id="unbounded"),
    pytest.param({"epsilon": 1.0, "sensitivity": 3}, 10, 13, None, id="sensitivity-3"),
    pytest.param({"epsilon": 1.0, "bounds": (0, 30)}, 20, 21, (0, 30), id="truncated"),
    pytest.param({"epsilon": 1.0, "bounds": (0, 30)}, 29, 30, (0, 30), id="truncated-edge"),
    pytest.param(
        {"epsilon": 1.0, "bounds": (0, 10**6), "constant_time": True}, 0, 1, (0, 10**6), id="ct"
    ),
]


def _pmf_for(
    bounds: tuple[int, int] | None, epsilon: float
) -> Callable[[int], NDArray[np.float64]]:
    def pmf(value: int) -> NDArray[np.float64]:
        if bounds is None or bounds[1] - bounds[0] > 200:
            return two_sided_geometric_pmf(_unbounded_support(epsilon), epsilon)
        return truncated_geometric_pmf(value, bounds, epsilon)[1]

    return pmf


@pytest.mark.parametrize(("kwargs", "value", "neighbour", "bounds"), AUDITS)
def test_neighbour_audit(
    kwargs: dict[str, Any], value: int, neighbour: int, bounds: tuple[int, int] | None
) -> None:
    epsilon = kwargs["epsilon"]
    unit = epsilon / kwargs.get("sensitivity", 1)
    worst, tolerance = audit(_release(**kwargs), value, neighbour, _pmf_for(bounds, unit), epsilon)
    assert worst < tolerance


@pytest.mark.parametrize(("kwargs", "value", "neighbour", "bounds"), AUDITS)
def test_neighbour_audit_catches_25_percent_less_noise(
    kwargs: dict[str, Any], value: int, neighbour: int, bounds: tuple[int, int] | None
) -> None:
    """Validity twin: noise scaled by 0.75 (epsilon / 0.75) must fail the same audit."""
    epsilon = kwargs["epsilon"]
    unit = epsilon / kwargs.get("sensitivity", 1)
    weakened = {**kwargs, "epsilon": epsilon / 0.75}
    worst, tolerance = audit(
        _release(**weakened), value, neighbour, _pmf_for(bounds, unit), epsilon
    )
    assert worst > tolerance


# ---------------------------------------------------------------- exactness of the plan


PLAN_CASES = [
    (unit, reach, constant_time)
    for unit in ["1/100000", "1/100", "1/10", "1", "5", "30", "200"]
    for reach in [None, 1, 2, 3, 30, 1000, 10**6, 2**40]
    for constant_time in [False, True]
    if reach is not None or not constant_time  # constant time needs bounds
]


@pytest.mark.parametrize(("unit_epsilon", "reach", "constant_time"), PLAN_CASES)
def test_every_plan_is_verified(unit_epsilon: str, reach: int | None, constant_time: bool) -> None:
    plan = _geometric.geometric_plan(Fraction(unit_epsilon), reach, constant_time)
    assert _geometric.privacy_failures(plan, reach) == []
    assert plan.ratio_bound <= Fraction(math.exp(float(Fraction(unit_epsilon))) * (1 + 1e-12))


@pytest.mark.parametrize(
    "break_it",
    [
        lambda p: {"zero": _coins.Coin(p.zero.numerator * 3 // 2, p.zero.nwords)},
        lambda p: {"overflow": _coins.Coin(max(1, p.overflow.numerator // 4), p.overflow.nwords)},
        lambda p: {"head": (_coins.Coin(p.head[0].numerator // 2, 1), *p.head[1:])},
        lambda p: {"ratio_bound": p.ratio_bound * (1 - Fraction(1, 2**10))},
    ],
)
@pytest.mark.parametrize("constant_time", [False, True])
def test_plan_verification_catches_a_broken_plan(
    break_it: Callable[[_geometric.GeometricPlan], dict[str, Any]], constant_time: bool
) -> None:
    """Validity twin of the verification: a perturbed coin or a tighter L must be flagged."""
    import dataclasses

    reach = 30
    plan = _geometric.geometric_plan(Fraction(1, 10), reach, constant_time)
    broken = dataclasses.replace(plan, **break_it(plan))
    assert _geometric.privacy_failures(broken, reach)


def test_realized_probabilities_are_close_to_ideal() -> None:
    """The exact realized PMF differs from the ideal one by the documented factor only."""
    for unit in (Fraction(1, 100), Fraction(1), Fraction(5)):
        plan = _geometric.geometric_plan(unit, None, False)
        noise = np.arange(-300, 301)
        realized = _geometric.realized_log_pmf(plan, noise)
        a = math.exp(-float(unit))
        ideal = math.log((1 - a) / (1 + a)) - float(unit) * np.abs(noise)
        bound = 2.0**-19 * (1 + float(unit) * np.abs(noise)) + 1e-12 * (1 + np.abs(ideal))
        assert np.all(np.abs(realized - ideal) <= bound)


# ---------------------------------------------------------------- randomness


def test_default_randomness_differs_between_calls_and_ignores_numpy_seed() -> None:
    values = np.zeros(1000, dtype=np.int64)
    np.random.seed(0)  # noqa: NPY002 - the legacy global seed must have no effect
    first = dpm.geometric(values, epsilon=1.0)
    np.random.seed(0)  # noqa: NPY002 - the legacy global seed must have no effect
    second = dpm.geometric(values, epsilon=1.0)
    # Equal only with probability below 0.5**1000.
    assert not np.array_equal(first, second)


def test_caller_rng_is_reproducible() -> None:
    values = np.arange(100)
    a = dpm.geometric(values, epsilon=1.0, rng=np.random.default_rng(7))
    b = dpm.geometric(values, epsilon=1.0, rng=7)
    assert np.array_equal(a, b)


def test_default_source_is_cryptographic() -> None:
    assert isinstance(_random.bit_source(None), _random.CryptoBitSource)
    assert _random.bit_source(None).private
    assert not _random.bit_source(np.random.default_rng(1)).private


@pytest.mark.parametrize(("epsilon", "bounds"), [(1.0, (0, 10**6)), (0.1, (0, 30)), (5.0, (-3, 3))])
def test_constant_time_draws_the_same_words_for_any_value(
    word_counter: WordCounter, epsilon: float, bounds: tuple[int, int]
) -> None:
    lo, hi = bounds
    counts = []
    for value in (lo, (lo + hi) // 2, hi, hi + 10**5, lo - 10**5):
        word_counter.words = 0
        dpm.geometric(np.full(5000, value), epsilon=epsilon, bounds=bounds, constant_time=True)
        counts.append(word_counter.words)
    assert len(set(counts)) == 1


def test_constant_time_draws_the_same_words_for_any_noise(word_counter: WordCounter) -> None:
    """One value per call: the word count must not depend on the noise that came out."""
    words_by_noise: dict[int, set[int]] = {}
    for _ in range(3000):
        word_counter.words = 0
        out = int(dpm.geometric([15], epsilon=0.3, bounds=(0, 30), constant_time=True)[0])
        words_by_noise.setdefault(abs(out - 15), set()).add(word_counter.words)
    assert len(set().union(*words_by_noise.values())) == 1
    assert min(words_by_noise) == 0
    assert max(words_by_noise) >= 10


def test_default_mode_word_count_does_depend_on_noise(word_counter: WordCounter) -> None:
    """Validity twin: without constant_time, large noise costs more words."""
    seen = set()
    for _ in range(20):
        word_counter.words = 0
        # Repeats (noise past the head, probability ~2**-16 each) vary between calls.
        dpm.geometric(np.full(200_000, 15), epsilon=0.05, bounds=(0, 10**4))
        seen.add(word_counter.words)
    assert len(seen) > 1


# ---------------------------------------------------------------- shapes and bad input


def test_shape_dtype_and_scalars() -> None:
    out = dpm.geometric(np.arange(12).reshape(3, 4), epsilon=1.0)
    assert out.shape == (3, 4)
    assert out.dtype == np.int64
    assert dpm.geometric(5, epsilon=1.0).shape == ()
    assert dpm.geometric(np.array([], dtype=np.int64), epsilon=1.0).shape == (0,)
    assert dpm.geometric([3, 3], epsilon=1.0, bounds=(3, 3)).tolist() == [3, 3]


def test_values_are_clamped_into_bounds_before_noise() -> None:
    out = dpm.geometric(np.full(10000, 10**9), epsilon=5.0, bounds=(0, 10))
    assert out.min() >= 0
    assert out.max() == 10
    assert np.mean(out == 10) > 0.9


BAD_EPSILONS = [0, -1, -0.5, float("nan"), float("inf"), -float("inf"), "1", None, True, [1.0]]


@pytest.mark.parametrize("bad", BAD_EPSILONS)
def test_bad_epsilon_is_refused(bad: Any) -> None:
    with pytest.raises((InvalidParameterError, InvalidParameterTypeError), match="epsilon"):
        dpm.geometric([1, 2], epsilon=bad)


@pytest.mark.parametrize("bad", BAD_EPSILONS)
def test_bad_sensitivity_is_refused(bad: Any) -> None:
    with pytest.raises((InvalidParameterError, InvalidParameterTypeError), match="sensitivity"):
        dpm.geometric([1, 2], epsilon=1.0, sensitivity=bad)


@pytest.mark.parametrize(
    "bad", [(5, 1), (0.0, 3), (0, float("nan")), ("0", 3), (1,), 5, (0, 1, 2), (True, 3), "ab"]
)
def test_bad_bounds_are_refused(bad: Any) -> None:
    with pytest.raises((InvalidParameterError, InvalidParameterTypeError), match="bounds"):
        dpm.geometric([1, 2], epsilon=1.0, bounds=bad)


@pytest.mark.parametrize(
    "bad", [[1.5, 2.0], [1.0], [True, False], ["a"], np.array([1, 2], dtype=object)]
)
def test_non_integer_values_are_refused(bad: Any) -> None:
    with pytest.raises(InvalidParameterTypeError, match="integers"):
        dpm.geometric(bad, epsilon=1.0)


def test_overflow_is_refused() -> None:
    with pytest.raises(NoiseOverflowError):
        dpm.geometric([2**62 + 1], epsilon=1.0)
    with pytest.raises(NoiseOverflowError):
        dpm.geometric(np.array([2**63 + 5], dtype=np.uint64), epsilon=1.0)
    with pytest.raises(NoiseOverflowError):
        dpm.geometric([1], epsilon=1e-18)
    with pytest.raises(NoiseOverflowError):
        dpm.geometric([1], epsilon=1.0, bounds=(0, 2**62))
    # the same tiny epsilon is fine once bounds make the noise finite
    assert dpm.geometric([1], epsilon=1e-18, bounds=(0, 10))[0] in range(11)


def test_constant_time_needs_bounds_and_a_bool() -> None:
    with pytest.raises(InvalidParameterError, match="bounds"):
        dpm.geometric([1], epsilon=1.0, constant_time=True)
    with pytest.raises(InvalidParameterTypeError, match="constant_time"):
        dpm.geometric([1], epsilon=1.0, bounds=(0, 3), constant_time="yes")  # type: ignore[arg-type]


def test_absurd_epsilon_is_refused() -> None:
    with pytest.raises(InvalidParameterError, match="epsilon"):
        dpm.geometric([1], epsilon=201.0)


@pytest.mark.parametrize("bad", ["seed", 1.5, True, object()])
def test_bad_rng_is_refused(bad: Any) -> None:
    with pytest.raises(InvalidParameterTypeError, match="rng"):
        dpm.geometric([1], epsilon=1.0, rng=bad)


def test_errors_subclass_builtins() -> None:
    assert issubclass(InvalidParameterError, ValueError)
    assert issubclass(InvalidParameterTypeError, TypeError)
    assert issubclass(NoiseOverflowError, DPFrameError)


# ---------------------------------------------------------------- rejection variant (seed 002, 2.4)


def _rejection_log_pmf(
    true_value: int, bounds: tuple[int, int], unit: float
) -> NDArray[np.float64]:
    """Log-probabilities of lo..hi for v + N conditioned on landing in [lo, hi]."""
    lo, hi = bounds
    log_p = -unit * np.abs(np.arange(lo, hi + 1) - true_value)
    return np.asarray(log_p - np.logaddexp.reduce(log_p))


def test_rejection_outputs_stay_in_bounds_and_match_the_conditional_pmf() -> None:
    bounds = (0, 30)
    out = dpm.geometric(np.full(N_GOF, 20), epsilon=0.1, bounds=bounds, out_of_range="resample")
    assert out.min() >= 0
    assert out.max() <= 30
    unit = float(_geometric.rejection_epsilon(Fraction(1, 10), 30))
    pmf = np.exp(_rejection_log_pmf(20, bounds, unit))
    assert chi_square_pvalue(out, np.arange(0, 31), pmf) > FALSE_ALARM
    # seed 002, Figure 2.2: with the seed's epsilon' the result is nearly uniform over the
    # 31 counts; the largest verified epsilon' keeps far more information about the count.
    seed = float(_geometric.seed_rejection_epsilon(Fraction(1, 10), 30))
    seed_pmf = np.exp(_rejection_log_pmf(20, bounds, seed))
    assert seed_pmf.max() / seed_pmf.min() < 1.5
    assert pmf.max() / pmf.min() > 2.5


def _rejection_loss(unit: float, bounds: tuple[int, int]) -> float:
    """Largest |log P_v(o) - log P_{v+1}(o)| over all neighbouring v and all outputs o."""
    lo, hi = bounds
    rows = np.array([_rejection_log_pmf(v, bounds, unit) for v in range(lo, hi + 1)])
    return float(np.abs(np.diff(rows, axis=0)).max())


REJECTION_CASES = [
    (0.1, 30),
    (0.5, 5),
    (1.0, 2),
    (2.0, 1),
    (0.1, 1),
    # where seed 002's epsilon - ln M alone would leak (it bounds rejection, not acceptance)
    (0.1, 3),
    (0.05, 10),
    (0.01, 15),
    (0.3, 4),
    (0.02, 60),
]


@pytest.mark.parametrize(("epsilon", "width"), REJECTION_CASES)
def test_rejection_privacy_loss_is_at_most_epsilon(epsilon: float, width: int) -> None:
    unit = float(_geometric.rejection_epsilon(Fraction(epsilon), width))
    assert unit > 0
    assert _rejection_loss(unit, (0, width)) <= epsilon


def test_seed_002_epsilon_prime_alone_can_leak() -> None:
    """Validity twin: the seed's epsilon - ln M, used unchecked, exceeds epsilon here."""
    seed = float(_geometric.seed_rejection_epsilon(Fraction(1, 10), 3))
    assert _rejection_loss(seed, (0, 3)) > 0.1
    # ... and where it is private, dpframe finds a larger verified epsilon' (issue 13: about
    # 0.053 against the seed's 0.0086 at epsilon 0.1, width 30: six times less noise)
    largest = _geometric.rejection_epsilon(Fraction(1, 10), 30)
    assert largest > 6 * _geometric.seed_rejection_epsilon(Fraction(1, 10), 30)
    assert 0.05 < largest < 0.056


@pytest.mark.parametrize(("epsilon", "width"), [(0.1, 30), (0.5, 5), (1.0, 2)])
def test_rejection_without_the_ln_m_correction_leaks(epsilon: float, width: int) -> None:
    """Validity twin: rejecting with the plain epsilon exceeds epsilon."""
    assert _rejection_loss(epsilon, (0, width)) > epsilon


def test_truncation_factor_decreases_with_more_noise() -> None:
    """M(exp(-eps')) <= M(exp(-eps)) for eps' < eps: what makes eps - ln M(alpha) safe."""
    from decimal import Decimal

    from dpframe._exact import precise

    with precise():
        for n in (1, 2, 5, 30, 300):
            ms = [
                _geometric.truncation_factor(Decimal(math.exp(-e)), n)
                for e in np.linspace(3, 0.001, 60)
            ]
            assert all(a >= b for a, b in itertools.pairwise(ms))


def test_rejection_refusals() -> None:
    with pytest.raises(InvalidParameterError, match="resample"):
        dpm.geometric([1], epsilon=1.0, out_of_range="resample")
    with pytest.raises(InvalidParameterError, match="resample"):
        dpm.geometric([1], epsilon=1.0, bounds=(0, 3), constant_time=True, out_of_range="resample")
    # seed 002's epsilon' is <= 0 here; dpframe falls back to a verified smaller epsilon'
    assert _geometric.seed_rejection_epsilon(Fraction(1), 100) <= 0
    wide = float(_geometric.rejection_epsilon(Fraction(1), 100))
    assert wide > 0
    assert _rejection_loss(wide, (0, 100)) <= 1.0
    assert dpm.geometric([1], epsilon=1.0, bounds=(0, 100), out_of_range="resample")[0] in range(
        101
    )
    with pytest.raises(InvalidParameterError, match="out_of_range"):
        dpm.geometric([1], epsilon=1.0, bounds=(0, 3), out_of_range="wrap")
    with pytest.raises(InvalidParameterError, match="10,000"):
        dpm.geometric([1], epsilon=1e-6, bounds=(0, 20_000), out_of_range="resample")


# ---------------------------------------------------------------- accuracy


@pytest.mark.parametrize("epsilon", [0.01, 0.3, 1.0, 4.0])
@pytest.mark.parametrize("alpha", [0.05, 0.01])
def test_accuracy_matches_the_closed_form(epsilon: float, alpha: float) -> None:
    a = dpm.geometric_accuracy(epsilon=epsilon, alpha=alpha)
    ideal = math.exp(-epsilon)

    def tail(k: int) -> float:
        return 2 * ideal ** (k + 1) / (1 + ideal)

    # The realized noise is a hair wider than the ideal one, never narrower.
    assert tail(a) <= alpha * (1 + 1e-6)
    assert a == 0 or tail(a - 1) > alpha * (1 - 1e-4)


@pytest.mark.parametrize(
    ("kwargs", "alpha"),
    [
        ({"epsilon": 0.1}, 0.05),
        ({"epsilon": 1.0, "sensitivity": 3}, 0.05),
        ({"epsilon": 0.5, "bounds": (0, 10**6), "constant_time": True}, 0.1),
        ({"epsilon": 0.05, "bounds": (0, 40)}, 0.05),
    ],
)
def test_accuracy_covers_empirically(kwargs: dict[str, Any], alpha: float) -> None:
    a = dpm.geometric_accuracy(alpha=alpha, **kwargs)
    lo = kwargs.get("bounds", (0, 0))[0]
    true_value = lo + 20
    out = dpm.geometric(np.full(N_GOF, true_value), **kwargs)
    exceed = int(np.sum(np.abs(out - true_value) > a))
    # One-sided binomial bound at false-alarm 1e-6: mean + 4.8 sd.
    assert exceed <= alpha * N_GOF + 4.8 * math.sqrt(alpha * (1 - alpha) * N_GOF)
    # and the bar is not loose: one less would be exceeded too often
    if a > 0 and a - 1 < 20:
        below = int(np.sum(np.abs(out - true_value) > a - 1))
        assert below > alpha * N_GOF - 4.8 * math.sqrt(alpha * (1 - alpha) * N_GOF)


def test_accuracy_with_bounds_never_exceeds_the_width() -> None:
    assert dpm.geometric_accuracy(epsilon=0.001, bounds=(0, 30)) == 30
    assert dpm.geometric_accuracy(epsilon=1.0, bounds=(4, 4)) == 0


@pytest.mark.parametrize("bad", [0, 1, -0.1, 1.5, float("nan"), "0.05", None])
def test_accuracy_refuses_bad_alpha(bad: Any) -> None:
    with pytest.raises((InvalidParameterError, InvalidParameterTypeError), match="alpha"):
        dpm.geometric_accuracy(epsilon=1.0, alpha=bad)


# ---------------------------------------------------------------- the sampler draws the model


def _forced(rule: str) -> tuple[_geometric.GeometricPlan, int | None]:
    """A plan of each overflow rule whose overflow coin lands often (1/4), to exercise it."""
    import dataclasses

    quarter = _coins.Coin(1 << 62, 1)
    if rule == "repeat":
        plan = _geometric.geometric_plan(Fraction(1, 3), None, False)
        return dataclasses.replace(plan, head=plan.head[:2], overflow=quarter), None
    if rule == "cap":
        plan = _geometric.geometric_plan(Fraction(1, 3), 12, False)
        return dataclasses.replace(plan, overflow=quarter), 12
    plan = _geometric.geometric_plan(Fraction(1, 3), 10**6, True)
    return dataclasses.replace(plan, head=plan.head[:3], overflow=quarter), 10**6


@pytest.mark.parametrize(
    ("rule", "constant_time"),
    [("repeat", False), ("cap", False), ("cap", True), ("tail", False), ("tail", True)],
)
def test_sampler_draws_the_verified_model(rule: str, constant_time: bool) -> None:
    """|N| must follow the exact tail the privacy check and the error bars are computed from.

    The overflow coin is forced to 1/4 so that the continuation is drawn often; a sampler
    that drew the high part wrongly (e.g. adding a fresh head per round) fails this.
    """
    plan, reach = _forced(rule)
    magnitude = np.abs(
        _geometric.geometric_noise(plan, N_GOF, _random.bit_source(None), constant_time)
    )
    top = min(int(magnitude.max()) + 2, 200)  # beyond 200: pooled into the upper tail
    tails = np.array([float(_geometric.magnitude_tail(plan, a)) for a in range(-1, top)])
    pmf = tails[:-1] - tails[1:]  # P(|N| = a) for a = 0 .. top - 1
    assert chi_square_pvalue(magnitude, np.arange(top), pmf) > FALSE_ALARM
    if reach is not None:
        assert magnitude.max() <= reach


def test_accuracy_refuses_constant_time_without_bounds() -> None:
    with pytest.raises(InvalidParameterError, match="bounds"):
        dpm.geometric_accuracy(epsilon=1.0, constant_time=True)


@pytest.mark.parametrize("unit", ["7/10000", "1/3000", "1/4294967296"])
def test_margin_bars_for_wide_noise_cover(unit: str) -> None:
    """The coarse-grid margin bar is at least the exact (fine FFT or empirical) one."""
    u = Fraction(unit)
    bar = _geometric.sum_half_width(u, 30, 0.05, absolute=False)
    if u >= Fraction(1, 10**4):
        a = math.exp(-float(u) * (1 - 2.0**-18))
        fine = _geometric._convolved_half_width(a, 30, 0.05, absolute=False, signed_zero=True)
        assert fine <= bar <= fine * 1.01
    sums = dpm.geometric(np.zeros((20_000, 30), dtype=np.int64), epsilon=u).sum(axis=1)
    exceed = int(np.sum(np.abs(sums) > bar))
    assert exceed <= 0.05 * 20_000 + 4.8 * math.sqrt(0.05 * 0.95 * 20_000)


# ---------------------------------------------------------------- near the randomness floor


@pytest.mark.parametrize(
    ("epsilon", "kwargs", "most"),
    [(1.0, {}, 0.3), (0.01, {}, 0.6), (1.0, {"bounds": (0, 10**6)}, 0.3)],
)
def test_default_mode_spends_few_words_per_value(
    word_counter: WordCounter, epsilon: float, kwargs: dict[str, Any], most: float
) -> None:
    """Issue 17: about a quarter of a word per value at epsilon 1 (one 16-bit table draw)."""
    n = 200_000
    dpm.geometric(np.zeros(n, dtype=np.int64), epsilon=epsilon, **kwargs)
    assert word_counter.words / n <= most


def test_constant_time_words_follow_from_public_parameters(word_counter: WordCounter) -> None:
    """The count is a function of n, epsilon and the bounds: the same for two calls, and
    proportional to the number of full blocks."""
    counts = []
    for n in (1 << 16, 1 << 16, 2 << 16):
        word_counter.words = 0
        dpm.geometric(np.zeros(n, dtype=np.int64), epsilon=0.3, bounds=(0, 30), constant_time=True)
        counts.append(word_counter.words)
    assert counts[0] == counts[1]
    assert counts[2] == 2 * counts[0]


@pytest.mark.parametrize(("epsilon", "width"), [(Fraction(1, 10), 5), (Fraction(1), 7)])
def test_fixed_point_acceptance_matches_exact_rationals(epsilon: Fraction, width: int) -> None:
    plan = _geometric.geometric_plan(epsilon, width + 1, False)
    accept = _geometric._acceptance(plan, width)
    for k in range(width + 1):
        exact = 2 - _geometric.magnitude_tail(plan, width - k) - _geometric.magnitude_tail(plan, k)
        approx = Fraction(accept.twice[k], 1 << accept.precision)
        assert abs(approx - exact) <= Fraction(accept.error, 1 << accept.precision)


@pytest.mark.parametrize(("epsilon", "width"), [(0.1, 30), (0.5, 5), (0.1, 3), (1.0, 100)])
def test_largest_rejection_epsilon_is_the_boundary_of_the_check(epsilon: float, width: int) -> None:
    """The bisection's result passes the exact check; a relative 2**-9 more fails it."""
    unit = Fraction(epsilon)
    chosen = _geometric.rejection_epsilon(unit, width)
    assert _geometric._rejection_check(chosen, unit, width)[0]
    assert not _geometric._rejection_check(chosen * (1 + Fraction(1, 2**9)), unit, width)[0]
    assert (
        chosen >= _geometric.seed_rejection_epsilon(unit, width)
        or not (
            _geometric._rejection_check(
                _geometric.seed_rejection_epsilon(unit, width), unit, width
            )[0]
        )
    )


def test_public_rejection_epsilon() -> None:
    seed = dpm.geometric_rejection_epsilon(epsilon=0.1, bounds=(0, 30), rule="seed")
    assert seed == _geometric.seed_rejection_epsilon(Fraction(1, 10), 30)
    largest = dpm.geometric_rejection_epsilon(epsilon=0.1, bounds=(0, 30))
    assert largest == _geometric.rejection_epsilon(Fraction(1, 10), 30)
    # on the scale of epsilon: twice the sensitivity, twice the epsilon, same noise
    assert (
        dpm.geometric_rejection_epsilon(epsilon=0.2, sensitivity=2, bounds=(0, 30)) == 2 * largest
    )
    with pytest.raises(InvalidParameterError, match="10,000"):
        dpm.geometric_rejection_epsilon(epsilon=0.1, bounds=(0, 10_001))
    with pytest.raises(InvalidParameterError, match="redraw"):
        dpm.geometric_rejection_epsilon(epsilon=1e-9, bounds=(0, 10))
    with pytest.raises(InvalidParameterError, match="rule"):
        dpm.geometric_rejection_epsilon(epsilon=0.1, bounds=(0, 30), rule="other")


def test_chernoff_bars_are_conservative_and_close() -> None:
    """Sums too wide for the FFT use Chernoff's bound: never below the FFT bar, within 1.6x."""
    for unit, k, absolute in [
        (Fraction(1), 30, False),
        (Fraction(1, 10), 1000, False),
        (Fraction(1, 10), 1000, True),
        (Fraction(1, 2000), 500, False),
    ]:
        fft = _geometric.sum_half_width(unit, k, 0.05, absolute=absolute)
        bound = _geometric._chernoff_half_width(unit, k, 0.05, absolute=absolute)
        assert fft <= bound <= 1.6 * fft + 10


def test_bounded_noise_never_exceeds_the_reach_after_repeats() -> None:
    """A cap far above the head (repeat rule): overflow rounds must still stop at the reach."""
    import dataclasses

    base = _geometric.geometric_plan(Fraction(1, 3), None, False)
    cap = 1000  # far above 2**(K + 1) = 128: the tables themselves never reach it
    forced = dataclasses.replace(base, overflow=_coins.Coin(3 << 62, 1), cap=cap)  # lands 3/4
    noise = _geometric.geometric_noise(forced, 200_000, _random.bit_source(None), False)
    assert np.abs(noise).max() == cap + 1  # reached, never exceeded


def test_crypto_source_is_the_aes_ctr_keystream_in_order() -> None:
    """Words are the AES-256-CTR keystream, in order across calls, in independent arrays."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    key, nonce = bytes(range(32)), bytes(range(16))
    source = _random.CryptoBitSource()
    source._encryptor = Cipher(algorithms.AES(key), modes.CTR(nonce)).encryptor()
    first = source.words(3)
    kept = first.copy()
    second = source.words(70_000)
    expected = Cipher(algorithms.AES(key), modes.CTR(nonce)).encryptor().update(bytes(8 * 70_003))
    assert np.array_equal(np.concatenate([first, second]), np.frombuffer(expected, np.uint64))
    assert np.array_equal(first, kept)  # a later call does not overwrite an earlier array
    assert source.words_drawn == 70_003
