"""zCDP accounting math against an independent high-precision computation (mpmath).

The reference solves the optimality condition of each bound (the derivative in the order
α vanishes; both conditions are monotone in α) by 400 bisection steps at 60 digits, a
different route from dpframe's (float location of the order, then outward-rounded
decimal interval arithmetic). "Never understates" is checked exactly: dpframe's
Fraction against the 60-digit reference, which is accurate far beyond the margins.
"""

from __future__ import annotations

import doctest
import functools
import itertools
import math
import random
from fractions import Fraction

import mpmath
import pytest

import dpframe
from dpframe import _zcdp
from dpframe._zcdp import (
    delta_of_zcdp,
    epsilon_of_composition,
    epsilon_of_zcdp,
    rho_for_budget,
    rho_of_discrete_gaussian,
    rho_of_pure_dp,
)
from dpframe.datasets import census
from dpframe.errors import InvalidParameterError, InvalidParameterTypeError

RHOS = ["1e-12", "1e-8", "1e-4", "0.005", "0.03125", "0.5", "3", "50", "1e4"]
DELTAS = ["1e-300", "1e-12", "1e-6", "1e-3", "0.1", "0.9"]


def _mp(x: Fraction | str) -> mpmath.mpf:
    if isinstance(x, str):
        return mpmath.mpf(x)
    return mpmath.mpf(x.numerator) / x.denominator


def _bisect(increasing: object, lo: mpmath.mpf, hi: mpmath.mpf, steps: int = 400) -> mpmath.mpf:
    f = increasing  # the root of an increasing function on [lo, hi]
    for _ in range(steps):
        mid = (lo + hi) / 2
        if f(mid) < 0:  # type: ignore[operator]
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@functools.lru_cache(maxsize=256)
def epsilon_reference(rho: str, delta: str) -> mpmath.mpf:
    """inf_α ε(α): dε/dα = ρ - (ln(1/δ) - ln α)/(α-1)² = 0."""
    with mpmath.workdps(60):
        r, big_a = mpmath.mpf(rho), mpmath.log(1 / mpmath.mpf(delta))
        a = _bisect(
            lambda a: r * (a - 1) ** 2 - (big_a - mpmath.log(a)),
            mpmath.mpf(1),
            1 + 2 * mpmath.sqrt(big_a / r) + 10,
        )
        return max(mpmath.mpf(0), a * r + mpmath.log(1 - 1 / a) + (big_a - mpmath.log(a)) / (a - 1))


@functools.lru_cache(maxsize=256)
def delta_reference(rho: str, epsilon: str, steps: int = 400) -> mpmath.mpf:
    """inf_α δ(α): d ln δ/dα = (2α-1)ρ - ε + ln(1-1/α) = 0."""
    with mpmath.workdps(60):
        r, e = mpmath.mpf(rho), mpmath.mpf(epsilon)
        a = _bisect(
            lambda a: (2 * a - 1) * r - e + mpmath.log(1 - 1 / a),
            mpmath.mpf(1),
            (e + 1) / (2 * r) + 2,
            steps,
        )
        value = mpmath.exp((a - 1) * (a * r - e) + a * mpmath.log(1 - 1 / a) - mpmath.log(a - 1))
        return min(mpmath.mpf(1), value)


@functools.lru_cache(maxsize=64)
def rho_reference(epsilon: str, delta: str) -> mpmath.mpf:
    """sup{ρ : δ(ρ, ε) <= δ}, δ increasing in ρ."""
    with mpmath.workdps(60):
        lo, hi = mpmath.mpf(0), mpmath.mpf(epsilon) + 1
        for _ in range(100):  # 2**-100 of epsilon + 1: far below the 1e-12 checked
            mid = (lo + hi) / 2
            fits = delta_reference(str(mid), epsilon, 200) <= mpmath.mpf(delta)
            lo, hi = (mid, hi) if fits else (lo, mid)
        return lo


# ---------------------------------------------------------------- exact costs


def test_rho_of_discrete_gaussian_is_exact() -> None:
    assert rho_of_discrete_gaussian(10, 1) == Fraction(1, 200)
    assert rho_of_discrete_gaussian(Fraction(3, 2), Fraction(1, 3)) == Fraction(1, 81) * 2
    assert rho_of_discrete_gaussian(0.5, 1) == 2
    assert rho_of_discrete_gaussian(2, l2_sensitivity_squared=3) == Fraction(3, 8)
    # A float √3 is not √3: the squared form is the exact route.
    assert rho_of_discrete_gaussian(2, math.sqrt(3)) != Fraction(3, 8)


def test_rho_of_pure_dp_is_exact() -> None:
    assert rho_of_pure_dp(0.1) == Fraction(1, 200)
    assert rho_of_pure_dp(Fraction(1, 3)) == Fraction(1, 18)


@pytest.mark.parametrize(
    "call",
    [
        lambda: rho_of_discrete_gaussian(0, 1),
        lambda: rho_of_discrete_gaussian(1, -1),
        lambda: rho_of_discrete_gaussian(1),
        lambda: rho_of_discrete_gaussian(1, 1, l2_sensitivity_squared=1),
        lambda: rho_of_discrete_gaussian(float("nan"), 1),
        lambda: rho_of_pure_dp(0),
        lambda: epsilon_of_zcdp(-1, 1e-6),
        lambda: epsilon_of_zcdp(0.1, 0),
        lambda: epsilon_of_zcdp(0.1, 1),
        lambda: epsilon_of_zcdp(float("inf"), 1e-6),
        lambda: delta_of_zcdp(0.1, -0.5),
        lambda: rho_for_budget(0, 1e-6),
        lambda: rho_for_budget(1, 0),
        lambda: epsilon_of_composition(0, rhos=[0.1]),
        lambda: epsilon_of_composition(1e-6, pure_epsilons=[0]),
    ],
)
def test_bad_inputs_are_refused(call: object) -> None:
    with pytest.raises(InvalidParameterError):
        call()  # type: ignore[operator]


def test_wrong_types_are_refused() -> None:
    with pytest.raises(InvalidParameterTypeError):
        epsilon_of_zcdp("0.1", 1e-6)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterTypeError):
        delta_of_zcdp(True, 1.0)


# ---------------------------------------------------------------- conversions vs mpmath


def excess(value: Fraction, reference: mpmath.mpf) -> mpmath.mpf:
    """Relative excess of value over reference (negative: understated)."""
    with mpmath.workdps(60):
        return (_mp(value) - reference) / reference


@pytest.mark.parametrize(("rho", "delta"), list(itertools.product(RHOS, DELTAS)))
def test_epsilon_is_never_understated_and_tight(rho: str, delta: str) -> None:
    value = epsilon_of_zcdp(Fraction(rho), Fraction(delta))
    reference = epsilon_reference(rho, delta)
    assert isinstance(value, Fraction)
    if reference == 0:
        assert value == 0
        return
    assert 0 <= excess(value, reference) <= 1e-15
    # Twin: the same check catches a value understated by a relative 1e-14.
    assert excess(value * (1 - Fraction(1, 10**14)), reference) < 0


@pytest.mark.parametrize("rho", ["1e-6", "1e-4", "0.03125", "0.5", "3", "100"])
@pytest.mark.parametrize("epsilon", ["0", "0.01", "0.1", "1", "5", "20"])
def test_delta_is_never_understated_and_tight(rho: str, epsilon: str) -> None:
    value = delta_of_zcdp(Fraction(rho), Fraction(epsilon))
    reference = delta_reference(rho, epsilon)
    assert 0 < value <= 1
    if reference < mpmath.mpf(2) ** -1074:
        assert value == _zcdp.SMALLEST_DELTA  # reported as the floor, still an upper bound
        return
    assert 0 <= excess(value, reference) <= 1e-15


@pytest.mark.parametrize("epsilon", ["0.01", "0.1", "1", "10"])
@pytest.mark.parametrize("delta", ["1e-12", "1e-6", "0.01"])
def test_rho_for_budget_is_never_overstated_and_round_trips(epsilon: str, delta: str) -> None:
    value = rho_for_budget(Fraction(epsilon), Fraction(delta))
    reference = rho_reference(epsilon, delta)
    assert -1e-12 <= excess(value, reference) <= 0
    # The ledger's check: spending exactly this rho fits the (epsilon, delta) budget.
    assert epsilon_of_zcdp(value, Fraction(delta)) <= Fraction(epsilon)


def test_round_trips_over_many_budgets() -> None:
    rng = random.Random(20260601)
    for _ in range(60):
        eps = Fraction(rng.choice([1, 2, 5])) / 10 ** rng.randint(0, 3) * rng.randint(1, 9)
        delta = Fraction(1, 10 ** rng.randint(1, 15))
        rho = rho_for_budget(eps, delta)
        assert epsilon_of_zcdp(rho, delta) <= eps
        back = delta_of_zcdp(rho, epsilon_of_zcdp(rho, delta))
        assert abs(back / delta - 1) <= Fraction(1, 10**15)


@pytest.mark.parametrize(("rho", "delta"), list(itertools.product(RHOS[:-1], DELTAS[1:-1])))
def test_tighter_than_the_standard_bound(rho: str, delta: str) -> None:
    """CKS's conversion beats Bun & Steinke's ρ + 2 sqrt(ρ ln(1/δ))."""
    value = epsilon_of_zcdp(Fraction(rho), Fraction(delta))
    r, d = float(rho), float(delta)
    assert float(value) <= r + 2 * math.sqrt(r * math.log(1 / d))


def test_monotone() -> None:
    rhos = [Fraction(1, 10**j) for j in range(8, 0, -1)]
    eps = [epsilon_of_zcdp(r, 1e-6) for r in rhos]
    assert eps == sorted(eps)
    deltas = [Fraction(1, 10**j) for j in range(1, 15)]
    eps_d = [epsilon_of_zcdp(Fraction(1, 100), d) for d in deltas]
    assert eps_d == sorted(eps_d)


def test_opendp_figures() -> None:
    """Figures OpenDP's tests state for rho = 1/32 (scale 4, sensitivity 1)."""
    assert abs(float(epsilon_of_zcdp(Fraction(1, 32), 1e-3)) - 0.6880024554878086) < 1e-15
    assert abs(float(delta_of_zcdp(Fraction(1, 32), 0)) - 0.1508457845622862) < 1e-15


def test_edge_cases() -> None:
    assert epsilon_of_zcdp(0, 1e-9) == 0
    assert delta_of_zcdp(0, 1) == 0
    assert delta_of_zcdp(50, 0) == 1  # nothing is promised at epsilon 0 with large rho
    assert epsilon_of_zcdp(Fraction(1, 10**12), Fraction(99, 100)) == 0
    assert delta_of_zcdp(Fraction(1, 10**6), 20) == _zcdp.SMALLEST_DELTA
    value = epsilon_of_zcdp(Fraction(1, 3), Fraction(1, 7))
    assert value.denominator & (value.denominator - 1) == 0  # rounded onto 64 bits


# ---------------------------------------------------------------- composition


def test_composition_of_pure_releases_alone_is_their_sum() -> None:
    assert epsilon_of_composition(1e-6, pure_epsilons=[0.5, 0.25, 0.25]) == 1


def test_composition_of_zcdp_releases_alone_adds_rho() -> None:
    assert epsilon_of_composition(1e-6, rhos=[0.01, 0.02]) == epsilon_of_zcdp(
        Fraction(3, 100), 1e-6
    )


def test_composition_picks_the_best_split() -> None:
    small = [Fraction(1, 100)] * 1000
    total = epsilon_of_composition(1e-6, pure_epsilons=small)
    assert total == epsilon_of_zcdp(sum(e * e / 2 for e in small), Fraction(1, 10**6))
    assert total < 10  # instead of 1000 × 0.01
    mixed = [Fraction(1, 100)] * 100 + [Fraction(3)]
    rho = Fraction(1, 1000)
    options = [
        sum(mixed[k:], Fraction(0))
        + epsilon_of_zcdp(rho + sum(e * e / 2 for e in mixed[:k]), Fraction(1, 10**6))
        for k in range(len(mixed) + 1)
    ]
    result = epsilon_of_composition(1e-6, rhos=[rho], pure_epsilons=mixed)
    assert result == min(options)
    assert result < options[0]  # converting the small ones pays
    assert result < options[-1]  # converting the large one does not


# ---------------------------------------------------------------- interval arithmetic


def test_intervals_contain_the_truth() -> None:
    rng = random.Random(7)
    for _ in range(200):
        a = Fraction(rng.randint(1, 10**9), rng.randint(1, 10**9))
        b = Fraction(rng.randint(-(10**9), 10**9), rng.randint(1, 10**6))
        ia, ib = _zcdp._Interval.of(a), _zcdp._Interval.of(b)
        with mpmath.workdps(80):
            checks = [
                (ia + ib, _mp(a) + _mp(b)),
                (ia - ib, _mp(a) - _mp(b)),
                (ia * ib, _mp(a) * _mp(b)),
                (ib / ia, _mp(b) / _mp(a)),
                (ia.ln(), mpmath.log(_mp(a))),
                (ia.exp(), mpmath.exp(_mp(a))),
            ]
            for interval, truth in checks:
                assert _mp(Fraction(interval.lo)) <= truth <= _mp(Fraction(interval.hi))


def test_docstring_examples_run() -> None:
    failures, tried = doctest.testmod(_zcdp, raise_on_error=False)
    assert tried > 0
    assert failures == 0


def test_conversions_beyond_the_float_range_stay_valid_bounds() -> None:
    # Found by the ledger red team: a delta below the smallest float (log(0.0)) and
    # a rho or epsilon above the largest one (float() overflow) raised bare errors.
    tiny, huge = Fraction(1, 10**400), Fraction(10**400)
    rho = _zcdp.rho_for_budget(1.0, tiny)
    assert 0 < rho < _zcdp.rho_for_budget(1.0, Fraction(1, 10**300))
    assert _zcdp.epsilon_of_zcdp(rho, tiny) <= 1  # the rho found converts back within budget
    assert _zcdp.epsilon_of_zcdp(huge, 1e-6) >= huge  # at least rho: a valid epsilon
    assert _zcdp.delta_of_zcdp(huge, 1) == 1
    assert 0 < _zcdp.delta_of_zcdp(0.5, huge) <= _zcdp.delta_of_zcdp(0.5, 100)
    frame = census(300)
    frame.dp.set_budget(epsilon=math.inf)
    released = frame.dp.sum("Age", noise="gaussian", epsilon=10**400, delta=1e-6, bounds=(0, 100))
    assert dpframe.release_info(released)["asked"]["epsilon"] == "inf"  # as JSON has it
