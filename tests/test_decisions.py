"""Stochastic threshold decisions (seed 001): exact privacy, the seed's numbers, sampling, input."""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats

from dpframe import _decisions, _random
from dpframe._coins import Coin
from dpframe._exact import exp_lower_bound, simplest_rational
from dpframe.errors import InvalidParameterError, InvalidParameterTypeError
from tests._stats import FALSE_ALARM, audit
from tests.conftest import WordCounter

M = 10**9  # min_count for the exact checks: far enough from 0 for every tail window
HALF_WINDOW = 1000  # the main window is min_count ± 1000
TAIL_WINDOW = 40
TWIN_WINDOW = range(M - 150, M + 151)

Curve = _decisions.DecisionCurve


def _curve(method: str, epsilon: Fraction, delta: Fraction, p: Fraction, m: int = M) -> Curve:
    return _decisions.decision_curve(m, epsilon, delta, method, p)


def _realized(curve: Curve, counts: range) -> NDArray[Any]:
    """Exact realized probabilities of True, as an object array of Fractions."""
    return np.array([_decisions.realized_probability(curve, n) for n in counts], dtype=object)


def _windows(curve: Curve, m: int = M) -> list[range]:
    """Contiguous runs of counts covering the body, the junction and both clamped tails."""
    j, lo, hi = curve.junction, curve.lower_reach, curve.upper_reach
    centres = [j, j - lo, j - lo // 2, j + hi, j + hi // 2]
    if curve.beta > 0:
        # Where a curve that spends delta reaches exactly 0 and 1.
        for scale, side in ((curve.lower_scale, -1), (curve.upper_scale, 1)):
            if scale > 0:
                centres.append(j + side * int((scale / curve.beta).ln() / curve.eps))
    return [range(m - HALF_WINDOW, m + HALF_WINDOW + 1)] + [
        range(c - TAIL_WINDOW, c + TAIL_WINDOW + 1) for c in centres
    ]


def _violations(r: NDArray[Any], epsilon: Fraction, delta: Fraction) -> int:
    """Steps N -> N+1 breaking either DP inequality, checked exactly with L <= e^epsilon.

    Pr(Q(N+1)) <= L Pr(Q(N)) + delta and Pr(not Q(N)) <= L Pr(not Q(N+1)) + delta; using a
    rational L below e^epsilon makes the check stricter than the definition.
    """
    bound = exp_lower_bound(epsilon)
    up = r[1:] <= bound * r[:-1] + delta
    down = (1 - r[:-1]) <= bound * (1 - r[1:]) + delta
    return int((~up.astype(bool)).sum() + (~down.astype(bool)).sum())


def _monotone(r: NDArray[Any]) -> bool:
    return bool(np.all((r[1:] >= r[:-1]).astype(bool)))


def _f(x: float) -> Fraction:
    return Fraction(x).limit_denominator(10**12)


EPSILONS = [_f(1e-3), _f(0.1), Fraction(1)]
PROBS = [_f(0.01), Fraction(1, 2), _f(0.99)]


def _cutoff_delta(epsilon: Fraction) -> Fraction:
    return _decisions.decision_cost(epsilon, Fraction(0), "cutoff")[1]


CASES = (
    [("laplace", e, Fraction(0), p) for e in EPSILONS for p in PROBS]
    + [("cutoff", e, _cutoff_delta(e), Fraction(1, 2)) for e in EPSILONS]
    + [
        ("generalized", e, d, p)
        for e in EPSILONS
        for d in (Fraction(0), _f(1e-3), _f(1e-2))
        for p in PROBS
    ]
    + [
        ("laplace", Fraction(200), Fraction(0), _f(0.3)),
        ("cutoff", Fraction(200), _cutoff_delta(Fraction(200)), Fraction(1, 2)),
        ("generalized", Fraction(30), Fraction(1, 2), _f(0.2)),
        ("generalized", _f(1e-6), _f(1e-9), _f(0.7)),
        ("generalized", Fraction(1, 2**64), Fraction(1, 10**300), _f(0.999)),
    ]
)
CASE_IDS = [f"{m}-eps{float(e):g}-delta{float(d):.3g}-p{float(p):g}" for m, e, d, p in CASES]


# ---------------------------------------------------------------- exact privacy of the curves


@pytest.mark.parametrize(("method", "epsilon", "delta", "p"), CASES, ids=CASE_IDS)
def test_realized_curve_is_exactly_private_monotone_and_placed(
    method: str, epsilon: Fraction, delta: Fraction, p: Fraction
) -> None:
    curve = _curve(method, epsilon, delta, p)
    charged_epsilon, charged_delta = _decisions.decision_cost(epsilon, delta, method)
    assert charged_epsilon == epsilon
    for window in _windows(curve):
        r = _realized(curve, window)
        assert _violations(r, charged_epsilon, charged_delta) == 0, window
        assert _monotone(r), window
        assert all(0 <= x <= 1 for x in r)
    at_m = _decisions.realized_probability(curve, M)
    if method == "cutoff":
        assert at_m == 1
        assert _decisions.realized_probability(curve, M - 1) < 1
    else:
        # The coin for p is within 2^-48 of min(p, 1 - p) (relative); the margin moves
        # nothing at m, where the curve is placed.
        assert abs(at_m - p) <= min(p, 1 - p) / 2**40


@pytest.mark.parametrize("epsilon", EPSILONS)
@pytest.mark.parametrize("p", PROBS)
def test_check_catches_laplace_with_25_percent_less_noise(epsilon: Fraction, p: Fraction) -> None:
    """Validity twin: the Laplace curve for 1.25 epsilon fails the check at epsilon."""
    weak = _curve("laplace", epsilon * Fraction(5, 4), Fraction(0), p)
    r = _realized(weak, TWIN_WINDOW)
    assert _violations(r, epsilon, Fraction(0)) > 0


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_check_catches_cutoff_with_too_little_delta(epsilon: Fraction) -> None:
    """Validity twin: the cutoff curve is not (epsilon, 0.99 (1 - e^-epsilon))-DP."""
    curve = _curve("cutoff", epsilon, _cutoff_delta(epsilon), Fraction(1, 2))
    r = _realized(curve, range(M - 50, M + 51))
    assert _violations(r, epsilon, _cutoff_delta(epsilon) * Fraction(99, 100)) > 0


@pytest.mark.parametrize("epsilon", EPSILONS)
@pytest.mark.parametrize("delta", [_f(1e-3), _f(1e-2)])
def test_check_catches_generalized_with_less_delta_or_epsilon(
    epsilon: Fraction, delta: Fraction
) -> None:
    """Validity twins: the generalized curve is tight, so 0.75 delta or epsilon/1.25 fail."""
    curve = _curve("generalized", epsilon, delta, Fraction(1, 2))
    r = _realized(curve, TWIN_WINDOW)
    assert _violations(r, epsilon, delta * Fraction(3, 4)) > 0
    assert _violations(r, epsilon * Fraction(4, 5), delta) > 0


@pytest.mark.parametrize("method", ["laplace", "generalized"])
def test_check_catches_one_coin_off_by_two_to_the_minus_30(method: str) -> None:
    """Validity twin at the scale of the margin: nudging one coin up breaks the exact check."""
    epsilon = _f(1e-3)
    curve = _curve(method, epsilon, Fraction(0), Fraction(1, 2))
    r = _realized(curve, range(M - 100, M - 50))  # lower branch, where Pr(True) grows by e^eps
    assert _violations(r, epsilon, Fraction(0)) == 0
    r[25] *= 1 + Fraction(1, 2**30)
    assert _violations(r, epsilon, Fraction(0)) > 0


def test_tails_share_one_coin_and_far_counts_are_cheap() -> None:
    curve = _curve("laplace", _f(0.1), Fraction(0), Fraction(1, 2))
    below = curve.junction - curve.lower_reach
    assert _decisions.decision_coin(curve, below) == _decisions.decision_coin(curve, 0)
    assert _decisions.realized_probability(curve, 0) == Fraction(1, 2**256)
    assert _decisions.realized_probability(curve, 2**62) == 1 - Fraction(1, 2**256)
    delta_curve = _curve("generalized", _f(0.1), _f(1e-3), Fraction(1, 2))
    assert _decisions.decision_coin(delta_curve, 0) is False
    assert _decisions.decision_coin(delta_curve, 2**62) is True
    coin = _decisions.decision_coin(curve, M)
    assert isinstance(coin, Coin)
    assert coin.nwords <= 2


def test_decision_cost() -> None:
    eps, dlt = _f(0.5), _f(1e-4)
    assert _decisions.decision_cost(eps, Fraction(0), "laplace") == (eps, Fraction(0))
    assert _decisions.decision_cost(eps, dlt, "generalized") == (eps, dlt)
    cost_eps, cost_delta = _decisions.decision_cost(eps, Fraction(7, 10), "cutoff")
    assert cost_eps == eps
    exact = 1 - math.exp(-0.5)
    assert exact <= float(cost_delta) <= exact * (1 + 1e-15)
    # A rational upper bound: e^-eps >= 1 - cost_delta, i.e. exp_lower_bound is below e^-eps.
    assert cost_delta >= 1 - Fraction(Decimal("-0.5").exp())


# ---------------------------------------------------------------- the curves against seed 001


def _probs(counts: Any, **kwargs: Any) -> NDArray[np.float64]:
    return _decisions.decision_probability(counts, **kwargs)


def test_laplace_curve_matches_equations_4_2_to_4_7() -> None:
    m, eps = 5000, 0.01
    counts = np.arange(m - 1000, m + 1001)
    for p in (0.01, 0.3, 0.8):
        k = m + math.log(2 * (1 - p)) / eps if p >= 0.5 else m - math.log(2 * p) / eps
        ideal = np.where(
            counts < k, 0.5 * np.exp(eps * (counts - k)), 1 - 0.5 * np.exp(eps * (k - counts))
        )
        got = _probs(counts, min_count=m, epsilon=eps, p=p)
        # float64 rounding of values near 1 allows an absolute 1e-15 beyond the relative 1e-9.
        assert np.all(np.abs(got - ideal) <= 1e-9 * np.minimum(ideal, 1 - ideal) + 1e-15)


def test_cutoff_curve_matches_equation_5_3() -> None:
    m, eps = 300, 0.05
    counts = np.arange(0, 600)
    got = _probs(counts, min_count=m, epsilon=eps, delta=0.05, method="cutoff")
    ideal = np.where(counts >= m, 1.0, np.exp(eps * (counts - m)))
    assert np.max(np.abs(got - ideal) / ideal) < 1e-9
    assert np.all(got[counts >= m] == 1.0)


@pytest.mark.parametrize("epsilon", [1e-3, 0.1, 1.0])
@pytest.mark.parametrize("delta", [0.0, 1e-3, 1e-2])
@pytest.mark.parametrize("p", [0.01, 0.5, 0.99])
def test_generalized_curve_follows_the_recursions_6_11_and_6_12(
    epsilon: float, delta: float, p: float
) -> None:
    """Step by step from f(m) = p: f(n+1) = min(e^eps f + delta, 1 - e^-eps (1 - delta - f))."""
    m, steps = 10**6, 450
    up, down = math.exp(epsilon), math.exp(-epsilon)
    forward, backward = [p], [p]
    for _ in range(steps):
        f = forward[-1]
        forward.append(min(1.0, up * f + delta, 1 - down * (1 - delta - f)))
        g = backward[-1]
        backward.append(max(0.0, (g - delta) * down, 1 - delta - up * (1 - g)))
    ideal = np.array(backward[:0:-1] + forward)
    got = _probs(
        np.arange(m - steps, m + steps + 1),
        min_count=m,
        epsilon=epsilon,
        delta=delta,
        method="generalized",
        p=p,
    )
    # Float recursion error grows by about e^eps per step in the exponential tails.
    assert np.max(np.abs(got - ideal)) < 1e-9


def test_seed_laplace_threshold_is_m_minus_3912_for_p_099() -> None:
    """Seed 001 §4: p = 0.99, eps = 1e-3 gives k = m - 3912; p = 0.01 gives k = m + 3912."""
    eps = Decimal("0.001")
    assert round(float(_decisions.laplace_offset(eps, Decimal("0.99")))) == -3912
    assert round(float(_decisions.laplace_offset(eps, Decimal("0.01")))) == 3912
    m = 100_000
    # The decision is a fair coin at k: Pr >= 1/2 exactly from ceil(k) on.
    high = _probs([m - 3913, m - 3912], min_count=m, epsilon=1e-3, p=0.99)
    assert high[0] < 0.5 <= high[1]
    low = _probs([m + 3912, m + 3913], min_count=m, epsilon=1e-3, p=0.01)
    assert low[0] < 0.5 <= low[1]


def _first_count_reaching(level: float, lo: int, hi: int, **kwargs: Any) -> int:
    """Smallest count in (lo, hi] whose Pr(True) is >= level (the curves are monotone)."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if float(_probs(mid, **kwargs)) >= level:
            hi = mid
        else:
            lo = mid
    return hi


def test_seed_laplace_band_is_about_8000_counts() -> None:
    """Seed 001 §4: about 8000 counts between Pr = 0.01 and 0.99 at eps = 1e-3."""
    m = 100_000
    kwargs: dict[str, Any] = {"min_count": m, "epsilon": 1e-3}
    band = _first_count_reaching(0.99, m, m + 10**4, **kwargs) - _first_count_reaching(
        0.01, m - 10**4, m, **kwargs
    )
    assert abs(band - 2 * math.log(50) / 1e-3) <= 2  # 7824
    assert 7800 <= band <= 8000
    # "min 100,000 records, eps = 1e-3, conservative p = 0.01: the data set needs more than
    # 108,000 records to be accepted with probability >= 99%" (precisely: 107,825).
    sure = _probs([107_000, 107_824, 107_825, 108_000], min_count=m, epsilon=1e-3, p=0.01)
    assert sure[0] < sure[1] < 0.99 <= sure[2] < sure[3]


def test_seed_generalized_p0_and_the_400_count_climb() -> None:
    """Seed 001 §6: eps = delta = 1e-3 gives p0 ~ 0.5007 and n - n0 ~ 400 up to 0.99."""
    eps = delta = 1e-3
    p0 = float(_decisions.generalized_p0(Decimal("0.001"), Decimal("0.001")))
    assert round(p0, 4) == 0.5007
    m = 100_000
    kwargs: dict[str, Any] = {"min_count": m, "epsilon": eps, "delta": delta}
    kwargs["method"] = "generalized"
    top = _first_count_reaching(0.99, m, m + 2000, **kwargs)
    bottom = _first_count_reaching(0.01, m - 2000, m, **kwargs)
    climb, descent = top - m, m - bottom
    # Closed form 6.26 with d = 1 + beta, beta = delta e^-eps / (1 - e^-eps).
    d = 1 + delta * math.exp(-eps) / -math.expm1(-eps)
    expected = math.log((d - p0) / (d - 0.99)) / eps  # 395.3
    assert abs(climb - expected) <= 2
    assert 380 <= climb <= 420
    assert 380 <= descent <= 420
    # Spending delta narrows the 0.01-0.99 band from ~7824 counts (Laplace) to ~790.
    assert top - bottom < 800


@pytest.mark.parametrize("epsilon", [0.1, 1.0])
@pytest.mark.parametrize("p", [0.01, 0.5, 0.7])
def test_generalized_without_delta_has_the_laplace_shape(epsilon: float, p: float) -> None:
    """Seed 001 §6: with delta = 0 the generalized decision reduces to the Laplace one.

    Both have exponential tails of rate eps through (m, p); they differ only at the
    crossover, by at most max(cosh(eps/2) - 1, tanh(eps/2)^2 / 2) (worked out from the
    closed forms): the generalized curve is the steepest pure eps-DP curve. At p = 1/2 the
    two coincide (k = m is then a count, and the Laplace curve is tight at every step).
    """
    m = 10_000
    counts = np.arange(m - 600, m + 601)
    laplace = _probs(counts, min_count=m, epsilon=epsilon, p=p)
    general = _probs(counts, min_count=m, epsilon=epsilon, method="generalized", p=p)
    bound = max(math.cosh(epsilon / 2) - 1, math.tanh(epsilon / 2) ** 2 / 2)
    assert np.max(np.abs(general - laplace)) <= bound + 1e-12
    if p == 0.5:
        assert np.array_equal(general, laplace)
    else:
        assert np.max(np.abs(general - laplace)) > bound / 100
    body = (laplace > 1e-6) & (laplace < 1e-2)
    ratio = general[1:][body[:-1] & body[1:]] / general[:-1][body[:-1] & body[1:]]
    assert np.allclose(ratio, math.exp(epsilon), rtol=1e-9)


# ---------------------------------------------------------------- sampled decisions


N_SAMPLES = 200_000

SAMPLING = [
    ("laplace", 0.1, 0.0, 0.5, [990, 1000, 1007]),
    ("laplace", 1.0, 0.0, 0.99, [995, 1000, 1001]),
    ("cutoff", 0.1, 0.1, 0.5, [985, 999, 1000]),
    ("generalized", 1e-3, 1e-3, 0.5, [700, 1000, 1300]),
    ("generalized", 1.0, 1e-2, 0.01, [997, 1000, 1003]),
]


def _sample(count: int, n: int, **kwargs: Any) -> NDArray[np.bool_]:
    return _decisions.sample_decisions(
        np.full(n, count, dtype=np.int64),
        min_count=1000,
        epsilon=simplest_rational(kwargs["epsilon"]),
        delta=simplest_rational(kwargs["delta"]),
        method=kwargs["method"],
        p=kwargs["p"],
        source=_random.bit_source(None),
    )


@pytest.mark.parametrize(("method", "epsilon", "delta", "p", "counts"), SAMPLING)
def test_sampled_frequencies_match_the_curve(
    method: str, epsilon: float, delta: float, p: float, counts: list[int]
) -> None:
    kwargs = {"method": method, "epsilon": epsilon, "delta": delta, "p": p}
    claimed = _probs(counts, min_count=1000, **kwargs)
    # Several counts in one call: grouping by coin must keep each count's own probability.
    mixed = np.repeat(np.array(counts, dtype=np.int64), N_SAMPLES)
    np.random.default_rng().shuffle(mixed)
    decided = _decisions.sample_decisions(
        mixed,
        min_count=1000,
        epsilon=simplest_rational(epsilon),
        delta=simplest_rational(delta),
        method=method,
        p=p,
        source=_random.bit_source(None),
    )
    for count, prob in zip(counts, claimed, strict=True):
        hits = int(decided[mixed == count].sum())
        if prob in (0.0, 1.0):
            assert hits == (N_SAMPLES if prob == 1.0 else 0)
        else:
            assert stats.binomtest(hits, N_SAMPLES, float(prob)).pvalue > FALSE_ALARM


def test_frequency_test_rejects_a_weakened_curve() -> None:
    """Validity twin: decisions drawn with 1.25 epsilon fail the test against the claim."""
    claimed = float(_probs(990, min_count=1000, epsilon=0.1))
    hits = int(_sample(990, N_SAMPLES, method="laplace", epsilon=0.125, delta=0.0, p=0.5).sum())
    assert stats.binomtest(hits, N_SAMPLES, claimed).pvalue < FALSE_ALARM


def _release(method: str, epsilon: float, delta: float, p: float) -> Any:
    def draw(value: int, n: int) -> NDArray[np.int64]:
        kwargs = {"method": method, "epsilon": epsilon, "delta": delta, "p": p}
        return _sample(value, n, **kwargs).astype(np.int64)

    return draw


def _two_point_pmf(method: str, epsilon: float, delta: float, p: float) -> Any:
    def pmf(value: int) -> NDArray[np.float64]:
        kwargs = {"method": method, "epsilon": epsilon, "delta": delta, "p": p}
        f = float(_probs(value, min_count=1000, **kwargs))
        return np.array([1 - f, f])

    return pmf


AUDITS = [
    ("laplace", 1.0, 0.0, 0.5, 999, 1000, 0.0),
    ("generalized", 1.0, 0.0, 0.5, 1000, 1001, 0.0),
    ("generalized", 1.0, 0.05, 0.5, 1000, 1001, 0.05),
    ("cutoff", 1.0, 0.64, 0.5, 999, 1000, 1 - math.exp(-1.0)),
]


@pytest.mark.parametrize(("method", "epsilon", "delta", "p", "a", "b", "spent"), AUDITS)
def test_neighbour_audit(
    method: str, epsilon: float, delta: float, p: float, a: int, b: int, spent: float
) -> None:
    """Google-style delta estimate on neighbouring counts stays below the delta spent."""
    worst, tol = audit(
        _release(method, epsilon, delta, p),
        a,
        b,
        _two_point_pmf(method, epsilon, delta, p),
        epsilon,
    )
    assert worst < spent + tol


@pytest.mark.parametrize(("method", "epsilon", "delta", "p", "a", "b", "spent"), AUDITS)
def test_neighbour_audit_catches_a_weakened_decision(
    method: str, epsilon: float, delta: float, p: float, a: int, b: int, spent: float
) -> None:
    """Validity twin: epsilon scaled by 1/0.75 (and delta doubled, where spent) must fail."""
    weak_eps = epsilon / 0.75
    # Cutoff at 1/0.75 epsilon spends 1 - e^-1.33 = 0.74 (0.9 acknowledges it).
    weak_delta = 0.9 if method == "cutoff" else 2 * delta
    worst, tol = audit(
        _release(method, weak_eps, weak_delta, p),
        a,
        b,
        _two_point_pmf(method, epsilon, delta, p),
        epsilon,
    )
    assert worst > spent + tol


# ---------------------------------------------------------------- randomness


def test_default_randomness_is_cryptographic_and_ignores_numpy_state(
    word_counter: WordCounter,
) -> None:
    drawn = word_counter.calls
    np.random.seed(0)  # noqa: NPY002 - the legacy global seed must have no effect
    state = np.random.get_state()  # noqa: NPY002
    results = {
        _decisions.threshold_decision(100, min_count=100, epsilon=1.0, p=0.5) for _ in range(300)
    }
    # Both outcomes appear unless 300 fair decisions agree (probability 2^-299).
    assert results == {True, False}
    assert len(drawn) >= 300  # one call to words() per decision at least
    after = np.random.get_state()  # noqa: NPY002
    assert all(np.array_equal(x, y) for x, y in zip(state, after, strict=True))


def test_caller_rng_is_reproducible() -> None:
    kwargs: dict[str, Any] = {"min_count": 100, "epsilon": 0.5, "p": 0.5}
    first = [_decisions.threshold_decision(100, rng=seed, **kwargs) for seed in range(64)]
    second = [
        _decisions.threshold_decision(100, rng=np.random.default_rng(seed), **kwargs)
        for seed in range(64)
    ]
    assert first == second
    assert len(set(first)) == 2
    counts = np.arange(90, 111).repeat(50)

    def draw(seed: int) -> NDArray[np.bool_]:
        return _decisions.sample_decisions(
            counts,
            min_count=100,
            epsilon=Fraction(1, 2),
            delta=Fraction(0),
            method="laplace",
            p=0.5,
            source=_random.bit_source(seed),
        )

    assert np.array_equal(draw(3), draw(3))
    assert not np.array_equal(draw(3), draw(4))


# ---------------------------------------------------------------- shapes and bad input


def test_shapes_and_types() -> None:
    probs = _probs(np.arange(12).reshape(3, 4), min_count=5, epsilon=1.0)
    assert probs.shape == (3, 4)
    assert probs.dtype == np.float64
    assert _probs(5, min_count=5, epsilon=1.0).shape == ()
    assert _probs(np.array([], dtype=np.int64), min_count=5, epsilon=1.0).shape == (0,)
    assert isinstance(_decisions.threshold_decision(np.int64(7), min_count=5, epsilon=1.0), bool)
    assert (
        _decisions.threshold_decision(10**6, min_count=5, epsilon=1.0, method="cutoff", delta=0.7)
        is True
    )
    decided = _decisions.sample_decisions(
        np.zeros((2, 3), dtype=np.int64),
        min_count=0,
        epsilon=Fraction(1),
        delta=Fraction(0),
        method="laplace",
        p=0.5,
        source=_random.bit_source(1),
    )
    assert decided.shape == (2, 3)
    assert decided.dtype == np.bool_


GOOD: dict[str, Any] = {"min_count": 100, "epsilon": 1.0}
BAD_CALLS = [
    ({"epsilon": 0}, InvalidParameterError, "epsilon"),
    ({"epsilon": -1.0}, InvalidParameterError, "epsilon"),
    ({"epsilon": float("nan")}, InvalidParameterError, "epsilon"),
    ({"epsilon": float("inf")}, InvalidParameterError, "epsilon"),
    ({"epsilon": "1"}, InvalidParameterTypeError, "epsilon"),
    ({"epsilon": True}, InvalidParameterTypeError, "epsilon"),
    ({"epsilon": 1e-30}, InvalidParameterError, "epsilon"),
    ({"epsilon": 201.0}, InvalidParameterError, "epsilon"),
    ({"delta": -0.1, "method": "generalized"}, InvalidParameterError, "delta"),
    ({"delta": 1.0, "method": "generalized"}, InvalidParameterError, "delta"),
    ({"delta": float("nan"), "method": "generalized"}, InvalidParameterError, "delta"),
    ({"delta": 1e-3}, InvalidParameterError, "delta=0"),  # laplace spends no delta
    ({"method": "cutoff"}, InvalidParameterError, r"delta=0\.633"),  # must acknowledge it
    ({"method": "cutoff", "delta": 0.5}, InvalidParameterError, "1 - exp"),
    ({"method": "cutoff", "delta": 0.7, "p": 0.9}, InvalidParameterError, "p has no role"),
    ({"p": 0.0}, InvalidParameterError, "p must"),
    ({"p": 1.0}, InvalidParameterError, "p must"),
    ({"p": 1.5}, InvalidParameterError, "p must"),
    ({"p": "0.5"}, InvalidParameterTypeError, "p must"),
    ({"method": "Laplace"}, InvalidParameterError, "method"),
    ({"method": None}, InvalidParameterError, "method"),
    ({"min_count": 1.5}, InvalidParameterTypeError, "min_count"),
    ({"min_count": True}, InvalidParameterTypeError, "min_count"),
    ({"min_count": "10"}, InvalidParameterTypeError, "min_count"),
    ({"min_count": -1}, InvalidParameterError, "min_count"),
    ({"min_count": 2**63}, InvalidParameterError, "min_count"),
]


@pytest.mark.parametrize(("changes", "error", "match"), BAD_CALLS)
def test_bad_parameters_are_refused_before_drawing(
    word_counter: WordCounter, changes: dict[str, Any], error: type[Exception], match: str
) -> None:
    kwargs = {**GOOD, **changes}
    with pytest.raises(error, match=match):
        _decisions.threshold_decision(100, **kwargs)
    with pytest.raises(error, match=match):
        _decisions.decision_probability([100], **kwargs)
    assert word_counter.calls == []


@pytest.mark.parametrize(
    ("count", "error"),
    [
        (1.5, InvalidParameterTypeError),
        (True, InvalidParameterTypeError),
        ("5", InvalidParameterTypeError),
        (np.float64(3), InvalidParameterTypeError),
        (-3, InvalidParameterError),
        (2**62 + 1, InvalidParameterError),
    ],
)
def test_bad_count_is_refused_before_drawing(
    word_counter: WordCounter, count: Any, error: type[Exception]
) -> None:
    with pytest.raises(error, match="count"):
        _decisions.threshold_decision(count, **GOOD)
    assert word_counter.calls == []


@pytest.mark.parametrize(
    "counts", [[1.5], [True], [-1, 3], np.array([1, 2], dtype=object), ["a"], [2**62 + 1]]
)
def test_bad_counts_array_is_refused(counts: Any) -> None:
    with pytest.raises((InvalidParameterError, InvalidParameterTypeError), match="counts"):
        _decisions.decision_probability(counts, **GOOD)


@pytest.mark.parametrize("bad", ["seed", 1.5, True, object()])
def test_bad_rng_is_refused_before_drawing(word_counter: WordCounter, bad: Any) -> None:
    with pytest.raises(InvalidParameterTypeError, match="rng"):
        _decisions.threshold_decision(100, rng=bad, **GOOD)
    assert word_counter.calls == []


def test_accepted_edge_parameters() -> None:
    # delta = 0 is allowed for generalized (the steepest pure curve); cutoff accepts any
    # acknowledged delta >= 1 - e^-eps, even the float nearest to it.
    assert 0 < float(_probs(100, method="generalized", **GOOD)) < 1
    assert float(_probs(99, method="cutoff", delta=1 - math.exp(-1.0), **GOOD)) == pytest.approx(
        math.exp(-1.0)
    )
    curve = _decisions.decision_curve(0, Fraction(200), Fraction(0), "laplace", Fraction(1, 2))
    assert _decisions.realized_probability(curve, 10) == 1 - Fraction(1, 2**256)
    assert float(_probs(0, min_count=0, epsilon=2.0**-64)) == pytest.approx(0.5)


def test_check_parameters_returns_exact_forms() -> None:
    checked = _decisions.check_parameters(100, 0.1, 1e-3, "generalized", 0.99)
    assert checked == _decisions.DecisionParameters(
        100, Fraction(1, 10), Fraction(1, 1000), "generalized", Fraction(99, 100)
    )
    with pytest.raises(InvalidParameterError, match=r"delta=0\.0952"):
        _decisions.check_parameters(100, 0.1, 0.0, "cutoff", 0.5)
