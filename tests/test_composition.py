"""Pure, approximate and zCDP releases on one ledger (dpframe._composition through Ledger).

Every figure involving a conversion is checked against an independent 50-digit mpmath
computation of Canonne, Kamath and Steinke's bound (golden-section search on the order,
not dpframe's route). An independent auditor re-derives, from a ledger's history alone,
the guarantee the ledger claims; each rule has a validity twin: a deliberately broken
rule (too generous, or too stingy) that the same test catches.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction
from typing import Any

import mpmath
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpframe import _composition, _decisions
from dpframe._budget import Budget
from dpframe._composition import Account, Cost, Total
from dpframe._ledger import Ledger
from dpframe._release import Release, call_metadata
from dpframe._zcdp import rho_of_discrete_gaussian, rho_of_pure_dp
from dpframe.errors import (
    BudgetExceededError,
    DPFrameError,
    InvalidParameterError,
    InvalidParameterTypeError,
)

F = Fraction

# ---------------------------------------------------------------- releases


def geometric(epsilon: Fraction) -> Release:
    """A count with geometric noise: pure epsilon-DP."""
    return Release(
        method="count",
        columns=("Sex",),
        mechanism="geometric",
        epsilon=epsilon,
        delta=F(0),
        sensitivity=1.0,
        noise_scale=float(1 / epsilon),
        private=True,
    )


def laplace(epsilon: Fraction) -> Release:
    """A clamped sum with snapping Laplace noise: pure epsilon-DP."""
    return Release(
        method="sum",
        columns=("Income",),
        mechanism="laplace",
        epsilon=epsilon,
        delta=F(0),
        sensitivity=100.0,
        noise_scale=float(100 / epsilon),
        private=True,
    )


def decision(epsilon: float, delta: float) -> Release:
    """Seed 001's generalized threshold decision: approximate (epsilon, delta)-DP."""
    params = _decisions.check_parameters(10, epsilon, delta, "generalized", 0.5)
    cost_epsilon, cost_delta = _decisions.decision_cost(params.epsilon, params.delta, "generalized")
    return Release(
        method="threshold_decision",
        columns=(),
        mechanism="generalized",
        epsilon=cost_epsilon,
        delta=cost_delta,
        sensitivity=1.0,
        noise_scale=None,
        private=True,
    )


def gaussian(sigma: int, cells: int = 1) -> Release:
    """A table with discrete Gaussian noise, one person in ``cells`` cells: zCDP."""
    return Release(
        method="crosstab",
        columns=("Occupation", "Sex"),
        mechanism="discrete_gaussian",
        epsilon=F(0),
        delta=F(0),
        rho=rho_of_discrete_gaussian(sigma, l2_sensitivity_squared=cells),
        sensitivity=math.sqrt(cells),
        noise_scale=float(sigma),
        private=True,
    )


def zcdp(rho: Fraction) -> Release:
    return Release(
        method="count",
        columns=("Sex",),
        mechanism="discrete_gaussian",
        epsilon=F(0),
        delta=F(0),
        rho=rho,
        sensitivity=1.0,
        noise_scale=None,
        private=True,
    )


def approx(epsilon: Fraction, delta: Fraction) -> Release:
    return geometric(epsilon).replace(delta=delta, mechanism="bounded_laplace")


def budgeted(epsilon: Any = None, delta: Any = None, *, rho: Any = None) -> Ledger:
    ledger = Ledger()
    ledger.set_budget(epsilon, delta, rho=rho)
    return ledger


@contextlib.contextmanager
def refused_and_unchanged(ledger: Ledger, match: str | None = None) -> Iterator[None]:
    """The body must raise BudgetExceededError and leave the ledger exactly as it was."""
    before = ledger.to_dict()
    with pytest.raises(BudgetExceededError, match=match):
        yield
    assert ledger.to_dict() == before


# ---------------------------------------------------------------- the independent reference


def _mp(x: Fraction) -> mpmath.mpf:
    return mpmath.mpf(x.numerator) / x.denominator


@functools.lru_cache(maxsize=512)
def mp_epsilon(rho: Fraction, delta: Fraction) -> mpmath.mpf:
    """inf over α > 1 of αρ + (ln(1/δ) + (α-1) ln(1-1/α) - ln α)/(α-1) (CKS 2020, Cor. 13).

    Golden-section search on t = ln(α - 1) at 50 digits: the bound is quasi-convex in α.
    """
    if rho == 0:
        return mpmath.mpf(0)
    with mpmath.workdps(50):
        r, log_inv_delta = _mp(rho), mpmath.log(1 / _mp(delta))

        def bound(t: mpmath.mpf) -> mpmath.mpf:
            a = 1 + mpmath.exp(t)
            return a * r + (log_inv_delta + (a - 1) * mpmath.log(1 - 1 / a) - mpmath.log(a)) / (
                a - 1
            )

        lo, hi = mpmath.mpf(-40), mpmath.mpf(60)
        ratio = (mpmath.sqrt(5) - 1) / 2
        for _ in range(260):
            a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
            if bound(a) <= bound(b):
                hi = b
            else:
                lo = a
        return max(mpmath.mpf(0), bound((lo + hi) / 2))


_ONE = F(1)


def audit(total: Total, history: Sequence[Release], inflate: Fraction = _ONE) -> bool:
    """Does the ledger's guarantee hold for this history? Re-derived independently.

    For an (epsilon, delta) budget: pure and approximate releases before the first zCDP
    one fit under basic composition; after it, only pure (as ε²/2) and zCDP releases,
    whose total rho must convert, at the delta left, within the epsilon left. For a rho
    budget: no approximate release, and Σ rho (pure as ε²/2) within it. ``inflate``
    multiplies the rho used (a stricter auditor, to allow for the ledger's safe roundings).
    """
    if total.rho is not None:
        if any(r.delta > 0 for r in history):
            return False
        used = sum((r.rho if r.rho is not None else r.epsilon**2 / 2 for r in history), F(0))
        return used * inflate <= total.rho
    first = next((i for i, r in enumerate(history) if r.rho), len(history))
    before, after = history[:first], history[first:]
    epsilon = sum((r.epsilon for r in before), F(0))
    delta = sum((r.delta for r in before), F(0))
    if epsilon > total.epsilon or delta > total.delta:
        return False
    if not after:
        return True
    if any(r.delta > 0 for r in after) or delta >= total.delta:
        return False
    rho = sum((r.rho if r.rho is not None else r.epsilon**2 / 2 for r in after), F(0))
    assert isinstance(total.epsilon, Fraction)
    assert isinstance(total.delta, Fraction)
    with mpmath.workdps(50):
        return bool(mp_epsilon(rho * inflate, total.delta - delta) <= _mp(total.epsilon - epsilon))


def total_of(ledger: Ledger) -> Total:
    return ledger._state()[0]


def history_of(ledger: Ledger) -> list[Release]:
    return list(ledger._releases)


# ---------------------------------------------------------------- conversion figures


@pytest.mark.parametrize(
    ("epsilon", "delta"),
    [
        (F(1), F(1, 10**5)),
        (F(1, 2), F(1, 10**9)),
        (F(8), F(1, 10**3)),
        (F(1, 20), F(1, 10**6)),
        (F(3, 7), F(1, 3 * 10**7)),
    ],
)
def test_the_zcdp_account_is_the_largest_rho_that_converts_within_the_budget(
    epsilon: Fraction, delta: Fraction
) -> None:
    cap = _composition.rho_available(epsilon, delta)
    with mpmath.workdps(50):
        assert mp_epsilon(cap, delta) <= _mp(epsilon)  # never more rho than the budget holds
        assert mp_epsilon(cap * (1 + F(1, 10**10)), delta) > _mp(epsilon)  # and tight
    ledger = budgeted(epsilon, delta)
    assert ledger.remaining_rho == cap
    ledger.charge_many([zcdp(cap)])  # the whole account, exactly, fits
    assert ledger.remaining.rho == 0
    with refused_and_unchanged(ledger, "rho <= 0"):
        ledger.check(rho=F(1, 10**30))


@pytest.mark.parametrize(
    ("rho", "delta"),
    [
        (F(1, 200), F(9, 10**6)),
        (F(3, 8), F(1, 10**9)),
        (F(1, 10**6), F(1, 10**3)),
        (F(2), F(1, 10**12)),
    ],
)
def test_spent_epsilon_is_the_conversion_rounded_up(rho: Fraction, delta: Fraction) -> None:
    ledger = budgeted(100, delta + F(1, 10**6))
    ledger.charge_many([approx(F(1, 4), F(1, 10**6)), zcdp(rho)])
    spent = ledger.spent
    assert spent.delta == delta + F(1, 10**6)  # all the delta left went to the conversion
    assert spent.rho == rho
    assert isinstance(spent.epsilon, Fraction)
    converted = spent.epsilon - F(1, 4)
    with mpmath.workdps(50):
        exact = mp_epsilon(rho, delta)
        assert _mp(converted) >= exact  # never understated
        assert _mp(converted) <= exact * (1 + mpmath.mpf(10) ** -10)  # and tight
    # shown as a plain decimal, not a 64-bit fraction
    assert "/" not in repr(spent)


# ---------------------------------------------------------------- the composition test


def _mixed_session(ledger: Ledger) -> None:
    """Geometric, Laplace, a generalized decision and Gaussian tables on one budget."""
    ledger.charge_many([geometric(F(1, 5))])
    ledger.charge_many([decision(0.1, 1e-6)])
    ledger.charge_many([laplace(F(1, 10))])
    ledger.charge_many([gaussian(10)])  # rho = 1/200: what remains becomes zCDP
    ledger.charge_many([gaussian(20, cells=3)])  # rho = 3/800
    ledger.charge_many([geometric(F(1, 20))])  # pure, now ε²/2 = 1/800


def test_geometric_laplace_decision_and_gaussian_releases_compose_on_one_ledger() -> None:
    ledger = budgeted(1, 1e-5)
    _mixed_session(ledger)
    # phase 1 exact: 1/5 + 1/10 + 1/10 and the decision's delta
    epsilon_left, delta_left = F(3, 5), F(9, 10**6)
    cap = _composition.rho_available(epsilon_left, delta_left)
    rho = F(1, 200) + F(3, 800) + F(1, 800)
    with mpmath.workdps(50):
        assert mp_epsilon(cap, delta_left) <= _mp(epsilon_left)
    spent = ledger.spent
    assert spent.rho == rho
    assert spent.delta == F(1, 10**5)
    assert isinstance(spent.epsilon, Fraction)
    with mpmath.workdps(50):
        exact = mp_epsilon(rho, delta_left)
        assert _mp(spent.epsilon - F(2, 5)) >= exact
        assert _mp(spent.epsilon - F(2, 5)) <= exact * (1 + mpmath.mpf(10) ** -10)
    remaining = ledger.remaining
    assert remaining.rho == cap - rho
    # The epsilon a pure release may still spend: epsilon**2 / 2 of the rho left, at
    # most, and within 12 digits of sqrt(2 * rho) (what "remaining" promised before was
    # the unused epsilon at the budget's delta, which the account would refuse).
    assert isinstance(remaining.epsilon, Fraction)
    assert remaining.epsilon**2 / 2 <= cap - rho
    assert _mp(remaining.epsilon) >= mpmath.sqrt(2 * _mp(cap - rho)) * (1 - mpmath.mpf(10) ** -11)
    assert remaining.delta == 0
    assert ledger.remaining_rho == cap - rho
    history = ledger.history
    assert history["measure"].tolist() == ["pure", "approx", "pure", "zCDP", "zCDP", "pure"]
    assert history["rho"].iloc[3] == 0.005
    assert audit(total_of(ledger), history_of(ledger))

    # approximate releases cannot join the zCDP account
    with refused_and_unchanged(ledger, "cannot join a zCDP account"):
        ledger.charge_many([decision(0.01, 1e-9)])
    # a pure release too large for the account, and the largest that fits
    left = cap - rho
    with refused_and_unchanged(ledger, r"epsilon²/2"):
        ledger.charge_many([geometric(F(1, 5))])
    ledger.charge_many([zcdp(left)])  # exactly what remains
    assert ledger.remaining.rho == 0
    with refused_and_unchanged(ledger):
        ledger.charge_many([geometric(F(1, 10**9))])
    assert audit(total_of(ledger), history_of(ledger))


def test_validity_auditor_catches_a_ledger_that_forgets_the_delta_of_approximate_releases(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The mistake: convert what remains at the budget's whole delta, forgetting the delta
    # the decision spent: the account gets more rho than the budget holds.
    available = _composition.rho_available
    monkeypatch.setattr(
        _composition, "rho_available", lambda epsilon, delta: available(epsilon, F(1, 10**5))
    )
    ledger = budgeted(1, 1e-5)
    ledger.charge_many([decision(0.1, 5e-6)])
    ledger.charge_many([zcdp(ledger.remaining_rho)])
    assert not audit(total_of(ledger), history_of(ledger))


def test_validity_auditor_catches_a_ledger_that_lets_approximate_releases_into_zcdp(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The mistake: count an approximate release in zCDP as if it were pure (ε²/2),
    # dropping its delta.
    spend = _composition.spend

    def lenient(account: Account, cost: Cost, *, force: bool = False) -> Account:
        if account.in_zcdp and cost.rho is None and cost.delta:
            cost = Cost(cost.epsilon)
        return spend(account, cost, force=force)

    monkeypatch.setattr(_composition, "spend", lenient)
    ledger = budgeted(1, 1e-5)
    _mixed_session(ledger)
    ledger.charge_many([decision(0.01, 1e-9)])
    assert not audit(total_of(ledger), history_of(ledger))


def _k_gaussians_fit(ledger: Ledger, k: int) -> bool:
    """Does the account take k Gaussian releases that together spend all of it?"""
    share = ledger.remaining_rho / k
    assert isinstance(share, Fraction)
    try:
        for _ in range(k):
            ledger.charge_many([zcdp(share)])
    except BudgetExceededError:
        return False
    return True


def test_gaussian_releases_compose_in_zcdp_before_converting() -> None:
    assert _k_gaussians_fit(budgeted(1, 1e-6), 10)


def test_validity_a_ledger_converting_each_gaussian_release_alone_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The stingy mistake: convert each zCDP release to (ε_i, δ/10) on its own and add
    # them under basic composition. Sound, but it wastes the budget: 10 releases that
    # compose to the whole budget in zCDP no longer fit.
    spend = _composition.spend

    def one_at_a_time(account: Account, cost: Cost, *, force: bool = False) -> Account:
        if cost.rho is None:
            return spend(account, cost, force=force)
        assert isinstance(account.total.delta, Fraction)
        share = account.total.delta / 10
        converted = Cost(F(_composition._epsilon_of(cost.rho, share)), share)
        return spend(account, converted, force=force)

    monkeypatch.setattr(_composition, "spend", one_at_a_time)
    ledger = budgeted(1, 1e-6)
    share = _composition.rho_available(F(1), F(1, 10**6)) / 10
    accepted = 0
    with contextlib.suppress(BudgetExceededError):
        for _ in range(10):
            ledger.charge_many([zcdp(share)])
            accepted += 1
    assert accepted < 10


# ---------------------------------------------------------------- rho budgets


def test_a_rho_budget_charges_zcdp_and_pure_releases_exactly() -> None:
    ledger = budgeted(rho=F(1, 100))
    assert ledger.total == Budget(rho=F(1, 100))
    ledger.charge_many([gaussian(10)])  # 1/200
    ledger.charge_many([geometric(F(1, 20))])  # 1/800
    ledger.charge_many([laplace(F(1, 20))])  # 1/800
    assert ledger.spent == Budget(rho=F(1, 200) + F(1, 400))
    assert ledger.remaining == Budget(rho=F(1, 400))
    assert ledger.remaining_rho == F(1, 400)
    with refused_and_unchanged(ledger, "has no zCDP guarantee"):
        ledger.charge_many([decision(0.01, 1e-9)])
    with refused_and_unchanged(ledger, r"epsilon <= 0\.0707106"):
        ledger.charge_many([geometric(F(1, 10))])  # 1/200 > 1/400
    ledger.charge_many([zcdp(F(1, 800)), geometric(F(1, 20))])  # exactly the rest
    assert ledger.remaining == Budget(rho=0)
    with refused_and_unchanged(ledger, "rho <= 0"):
        ledger.check(rho=F(1, 10**40))
    assert audit(total_of(ledger), history_of(ledger))


def _fills_rho_budget(rho_of_pure: Callable[[Fraction], Fraction]) -> bool:
    """Charge pure releases of 1/10 until refused: does the ledger stay within rho = 1/20?"""
    ledger = budgeted(rho=F(1, 20))
    with contextlib.suppress(BudgetExceededError):
        for _ in range(100):
            ledger.charge_many([geometric(F(1, 10))])
    used = sum((rho_of_pure(r.epsilon) for r in history_of(ledger)), F(0))
    return used <= F(1, 20) and len(history_of(ledger)) == 10


def test_pure_releases_cost_epsilon_squared_over_two_in_zcdp() -> None:
    assert _fills_rho_budget(rho_of_pure_dp)


def test_validity_a_ledger_undercounting_pure_releases_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spend = _composition.spend

    def undercounting(account: Account, cost: Cost, *, force: bool = False) -> Account:
        if cost.rho is None and not cost.delta:
            cost = Cost(cost.epsilon / 2)  # counts ε²/8
        return spend(account, cost, force=force)

    monkeypatch.setattr(_composition, "spend", undercounting)
    assert not _fills_rho_budget(rho_of_pure_dp)


# ---------------------------------------------------------------- edges of the rule


def test_a_pure_budget_refuses_zcdp_and_says_why() -> None:
    ledger = budgeted(1)
    with refused_and_unchanged(ledger, "only with delta > 0"):
        ledger.charge_many([gaussian(10)])
    assert ledger.remaining_rho == 0


def test_a_budget_whose_delta_is_spent_refuses_zcdp() -> None:
    ledger = budgeted(1, 1e-6)
    ledger.charge_many([approx(F(1, 10), F(1, 10**6))])
    assert ledger.remaining_rho == 0
    with refused_and_unchanged(ledger, "no delta remains"):
        ledger.check(rho=F(1, 10**6))


def test_phase_one_is_unchanged_basic_composition() -> None:
    ledger = budgeted(1, 1e-6)
    for _ in range(10):
        ledger.charge_many([approx(F(1, 10), F(1, 10**7))])
    assert ledger.spent == Budget(F(1), F(1, 10**6))
    assert ledger.remaining == Budget(F(0), F(0))
    assert ledger.remaining_rho == 0


def test_a_zero_rho_part_does_not_open_the_zcdp_account() -> None:
    ledger = budgeted(1, 1e-6)
    ledger.charge_many([zcdp(F(0))])
    ledger.charge_many([approx(F(1, 10), F(1, 10**7))])  # still phase 1
    assert ledger.spent == Budget(F(1, 10), F(1, 10**7))


def test_an_epsilon_unlimited_budget_still_limits_delta() -> None:
    ledger = budgeted(math.inf, 1e-6)
    ledger.charge_many([zcdp(F(50))])  # (inf, δ) holds for any zCDP release
    ledger.charge_many([approx(F(10), F(1, 10**6))])
    assert ledger.remaining == Budget(math.inf, F(0))
    assert ledger.remaining_rho == math.inf
    with refused_and_unchanged(ledger, "delta <= 0"):
        ledger.charge_many([approx(F(1), F(1, 10**9))])


def test_an_unlimited_budget_sums_each_measure() -> None:
    ledger = budgeted(math.inf)
    ledger.charge_many([geometric(F(3)), zcdp(F(2)), approx(F(1), F(1, 10))])
    assert ledger.spent == Budget(F(4), F(1, 10), rho=F(2))
    assert ledger.remaining == Budget(math.inf, math.inf)
    assert ledger.history["measure"].tolist() == ["pure", "approx", "zCDP"]  # zCDP last


# ---------------------------------------------------------------- transactions


def test_a_zcdp_transaction_checks_on_entry_and_charges_on_exit() -> None:
    ledger = budgeted(rho=F(1, 100))
    with refused_and_unchanged(ledger), ledger.transaction(rho=F(1, 50)):
        pytest.fail("the body of a refused transaction must not run")
    with ledger.transaction(rho=F(1, 100)) as spending:
        spending.drawn(zcdp(F(1, 200)))
        spending.drawn(zcdp(F(1, 200)))
    assert ledger.spent == Budget(rho=F(1, 100))
    with (
        pytest.raises(DPFrameError, match="internal error"),
        budgeted(rho=1).transaction(rho=F(1, 100)) as spending,
    ):
        spending.drawn(zcdp(F(1, 50)))  # more rho than checked
    with (
        pytest.raises(DPFrameError, match="internal error"),
        budgeted(1, 1e-6).transaction(F(1, 2)) as spending,
    ):
        spending.drawn(zcdp(F(1, 1000)))  # rho that was never checked


def test_a_mixed_call_charges_its_pure_parts_before_its_zcdp_parts() -> None:
    # bounds="auto" with Gaussian noise: a pure histogram, then a Gaussian sum. The check
    # and the charge both count the pure part under basic composition first.
    ledger = budgeted(1, 1e-6)
    cap_after = _composition.rho_available(F(3, 4), F(1, 10**6))
    ledger.check(F(1, 4), rho=cap_after)
    with refused_and_unchanged(ledger):
        ledger.check(F(1, 4), rho=cap_after * (1 + F(1, 10**6)))
    with ledger.transaction(F(1, 4), rho=cap_after) as spending:
        spending.drawn(zcdp(cap_after))  # drawn first...
        spending.drawn(geometric(F(1, 4)))
    assert ledger.history["measure"].tolist() == ["pure", "zCDP"]  # ...recorded after
    assert ledger.remaining.rho == 0
    assert audit(total_of(ledger), history_of(ledger))
    info = call_metadata(spending.parts)
    assert info["measure"] == "zCDP + pure"
    assert info["rho_exact"] == str(cap_after)
    assert info["epsilon_exact"] == "1/4"


def test_a_zcdp_release_costs_nothing_else() -> None:
    ledger = budgeted(1, 1e-6)
    with pytest.raises(InvalidParameterError, match="one measure"):
        ledger.charge_many([zcdp(F(1, 100)).replace(epsilon=F(1, 10))])
    with pytest.raises(InvalidParameterError):
        ledger.charge(
            method="count", columns="a", mechanism="g", rho=-F(1), noise_scale=None, private=True
        )
    with pytest.raises(InvalidParameterError):
        ledger.check(rho=0.1)  # type: ignore[arg-type]  # floats are not exact
    with pytest.raises(InvalidParameterTypeError):
        ledger.check(rho="0.1")  # type: ignore[arg-type]
    assert ledger.history.empty


def test_release_metadata_states_the_measure() -> None:
    info = gaussian(10).metadata()
    assert info["measure"] == "zCDP"
    assert info["rho_exact"] == "1/200"
    assert info["epsilon"] == 0.0
    assert geometric(F(1, 2)).metadata()["measure"] == "pure"
    assert "rho" not in geometric(F(1, 2)).metadata()
    assert decision(0.1, 1e-6).metadata()["measure"] == "approx"
    assert gaussian(10).record()["rho"] == "1/200"
    assert "rho" not in geometric(F(1, 2)).record()


# ---------------------------------------------------------------- budgets


def test_set_budget_takes_exactly_one_form() -> None:
    ledger = Ledger()
    with pytest.raises(InvalidParameterError, match="exactly one"):
        ledger.set_budget(1, rho=0.1)
    with pytest.raises(InvalidParameterError, match="exactly one"):
        ledger.set_budget(delta=1e-6, rho=0.1)
    with pytest.raises(InvalidParameterTypeError, match="needs a number"):
        ledger.set_budget()
    for bad, error in [
        (0, InvalidParameterError),
        (-1, InvalidParameterError),
        (math.nan, InvalidParameterError),
        ("0.1", InvalidParameterTypeError),
        (True, InvalidParameterTypeError),
    ]:
        with pytest.raises(error):
            ledger.set_budget(rho=bad)
    assert not ledger.budget_set
    ledger.set_budget(rho=math.inf)
    assert ledger.total.unlimited


def test_budgets_can_be_lowered_across_forms_but_never_raised() -> None:
    ledger = budgeted(1, 1e-6)
    cap = _composition.rho_available(F(1), F(1, 10**6))
    ledger.charge_many([geometric(F(1, 10))])
    before = ledger.to_dict()
    with pytest.raises(InvalidParameterError, match=r"never raised.*rho <= "):
        ledger.set_budget(rho=cap * 2)
    assert ledger.to_dict() == before
    ledger.set_budget(rho=cap)  # within the (1, 1e-6) budget: a lowering
    assert ledger.spent == Budget(rho=F(1, 200))  # the pure release, now as ε²/2
    with pytest.raises(InvalidParameterError, match="never raised"):
        ledger.set_budget(1, 1e-6)  # back to (epsilon, delta): would admit approx releases
    with pytest.raises(InvalidParameterError, match="never raised"):
        ledger.set_budget(rho=cap * 2)
    with pytest.raises(BudgetExceededError, match="below what this data has already spent"):
        ledger.set_budget(rho=F(1, 1000))
    ledger.set_budget(rho=F(1, 100))
    assert ledger.remaining == Budget(rho=F(1, 200))


def test_a_first_budget_must_hold_what_was_spent_meanwhile() -> None:
    ledger = Ledger()
    ledger.charge_many([approx(F(1, 2), F(1, 10**7)), zcdp(F(1, 1000))])
    before = ledger.to_dict()
    with pytest.raises(BudgetExceededError, match=r"epsilon >= 0\.5.*rho=0\.001"):
        ledger.set_budget(rho=1)  # an approximate release has no zCDP guarantee
    with pytest.raises(BudgetExceededError, match="release 2 would not fit"):
        ledger.set_budget(1, 1e-7)  # no delta left for the zCDP release
    assert ledger.to_dict() == before
    ledger.set_budget(1, 1e-6)
    assert ledger.remaining.rho is not None
    assert audit(total_of(ledger), history_of(ledger))


# ---------------------------------------------------------------- display


def test_display_shows_each_measure_and_both_forms() -> None:
    ledger = budgeted(1, 1e-5)
    _mixed_session(ledger)
    text = repr(ledger)
    assert "total=Budget(epsilon=1, delta=0.00001)" in text
    assert "rho=0.01" in text  # spent, in zCDP: 1/200 + 3/800 + 1/800
    page = ledger._repr_html_()
    for expected in ("rho (zCDP)", "zCDP", "approx", "pure", "first zCDP release", "0.005"):
        assert expected in page
    assert "0.000009" in page  # the delta that remained went to the zCDP account
    rho_budget = budgeted(rho=0.015)
    assert repr(rho_budget) == (
        "Ledger(total=Budget(rho=0.015), spent=Budget(rho=0), remaining=Budget(rho=0.015), "
        "privacy_unit=one row, releases=0)"
    )
    assert "Accounted in zCDP" in rho_budget._repr_html_()


# ---------------------------------------------------------------- random sessions


_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("pure"), st.fractions(F(1, 100), F(1, 2), max_denominator=100)),
        st.tuples(st.just("approx"), st.fractions(F(1, 100), F(1, 2), max_denominator=100)),
        st.tuples(st.just("zCDP"), st.fractions(F(1, 10**4), F(1, 50), max_denominator=10**4)),
    ),
    max_size=10,
)


def _release_of(measure: str, amount: Fraction) -> Release:
    if measure == "zCDP":
        return zcdp(amount)
    return geometric(amount) if measure == "pure" else approx(amount, F(1, 10**7))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    epsilon=st.fractions(F(1, 10), F(2), max_denominator=20),
    delta=st.sampled_from([F(0), F(1, 10**6), F(1, 10**4)]),
    steps=_STEPS,
)
def test_random_sessions_never_overspend_and_refusals_change_nothing(
    epsilon: Fraction, delta: Fraction, steps: list[tuple[str, Fraction]]
) -> None:
    ledger = budgeted(epsilon, delta)
    for measure, amount in steps:
        release = _release_of(measure, amount)
        before = ledger.to_dict()
        try:
            ledger.charge_many([release])
        except BudgetExceededError:
            assert ledger.to_dict() == before
            # refused only when the auditor refuses it too, allowing for the ledger's
            # safe rounding of the zCDP account (~1e-12 relative; 1e-9 here)
            assert not audit(
                Total(epsilon, delta), [*history_of(ledger), release], inflate=1 + F(1, 10**9)
            )
        else:
            assert audit(Total(epsilon, delta), history_of(ledger))


@settings(max_examples=30, deadline=None)
@given(rho=st.fractions(F(1, 1000), F(1), max_denominator=1000), steps=_STEPS)
def test_random_sessions_on_a_rho_budget(rho: Fraction, steps: list[tuple[str, Fraction]]) -> None:
    ledger = budgeted(rho=rho)
    for measure, amount in steps:
        release = _release_of(measure, amount)
        fits = audit(Total(rho=rho), [*history_of(ledger), release])
        before = ledger.to_dict()
        if fits:
            ledger.charge_many([release])
        else:
            with pytest.raises(BudgetExceededError):
                ledger.charge_many([release])
            assert ledger.to_dict() == before
