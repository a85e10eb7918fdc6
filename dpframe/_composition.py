"""The ledger's composition rule: what a sequence of releases spends of a budget.

Pure functions over immutable values, no state, no pandas: a :class:`Total` (the
budget), one :class:`Cost` per release, and the :class:`Account` that :func:`spend`
returns after each release (or a refusal). The ledger (:mod:`dpframe._ledger`) keeps an
account and replays its history through :func:`replay` when its total changes.

The rule is a *privacy filter*: the ledger decides whether each release fits from the
costs of the releases before it, and those costs are chosen adaptively (after seeing
earlier results). So every step below rests on a composition theorem proved for
adaptively chosen privacy parameters, not only on the classical composition theorems,
which assume the parameters are fixed in advance.

**An (epsilon, delta) budget** is spent in two phases.

1. Until the first zCDP release, pure (``delta = 0``) and approximate costs add up under
   basic composition: a release fits when ``Σ ε <= ε_total`` and ``Σ δ <= δ_total``.
   This is a valid privacy filter for adaptively chosen ``(ε_i, δ_i)`` (Rogers, Roth,
   Ullman, Vadhan 2016, Lemma 3.5 of arXiv:1605.08294v1).
2. The first zCDP release (``rho > 0``) turns what remains, ``(ε_r, δ_r)``, into a zCDP
   account of ``rho_r = rho_for_budget(ε_r, δ_r)`` (Canonne, Kamath, Steinke 2020,
   Corollary 13, rounded down and verified). From then on every release is charged in
   zCDP: ``rho`` for zCDP releases, ``ε²/2`` for pure ones (Bun and Steinke 2016,
   Proposition 1.4), and a release fits while the account's ``Σ rho <= rho_r``. A zCDP
   filter with a fixed budget is valid for adaptively chosen ``rho_i`` (Feldman and
   Zrnic 2021, the Rényi filter, applied at every order α: the stopping rule
   ``Σ rho_i <= rho_r`` is the same at every order), so the account is
   ``rho_r``-zCDP, hence ``(ε_r, δ_r)``-DP. Approximate releases (``delta > 0``) have no
   zCDP guarantee and are refused in this phase.

The two phases compose under basic composition of interactive mechanisms whose
parameters are chosen adaptively (Haney, Shoemate, Tian, Vadhan, Vyrros, Xu, Zhang
2023: every valid filter for non-interactive mechanisms extends to interactive ones,
for (ε, δ)-DP): phase 1 spends ``(Σ ε, Σ δ)`` and the zCDP account is one interactive
mechanism of cost ``(ε_r, δ_r)``, fixed when it opens. The total is
``(ε_total, δ_total)``.

**A rho budget** is one zCDP account from the start: zCDP releases add their ``rho``,
pure ones ``ε²/2``; approximate releases are refused.

**An unlimited budget** (or none yet) refuses nothing and sums each measure.

What this rule does *not* do, deliberately: pick, after the fact, the best way to count
each pure release (as ``ε``, or as ``ε²/2`` in zCDP) and compare the best composition
with the budget, as :func:`dpframe._zcdp.epsilon_of_composition` does for costs fixed in
advance. Used as a filter, that "natural" rule mixes two measures that are not totally
ordered, and a natural filter is free only for a totally ordered family of mechanisms
("Privacy Filters are Captured by Residues", arXiv:2602.15815, 2026; for f-DP, Tran,
Koskela, Räisä, Honkela, arXiv:2602.06756, 2026): no theorem makes it sound for
adaptively chosen costs. Here the order of the releases decides, once, how each is
counted.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from decimal import Decimal, localcontext
from fractions import Fraction

from dpframe._budget import Budget, exact_text
from dpframe._release import Measure
from dpframe._zcdp import epsilon_of_zcdp, rho_for_budget
from dpframe.errors import BudgetExceededError

__all__ = [
    "RESTORED",
    "Account",
    "Cost",
    "Measure",
    "RefusedCostError",
    "Total",
    "fresh_account",
    "lower_total",
    "replay",
    "rho_available",
    "spend",
    "within",
]

#: The method name of the history rows that hold spending learnt from another copy.
RESTORED = "(restored)"

_ZERO = Fraction(0)


@dataclasses.dataclass(frozen=True)
class Total:
    """A total budget: ``(epsilon, delta)``, ``rho`` (zCDP), or unlimited (``epsilon = inf``)."""

    epsilon: Fraction | float = math.inf
    delta: Fraction | float = math.inf
    rho: Fraction | None = None

    @property
    def unlimited(self) -> bool:
        """True when nothing is refused: no budget yet, or ``math.inf``."""
        return self.rho is None and self.epsilon == math.inf and self.delta == math.inf

    @property
    def epsilon_unlimited(self) -> bool:
        """True for ``(inf, delta)``: only delta is limited; zCDP releases are free of it."""
        return self.rho is None and self.epsilon == math.inf

    @property
    def is_rho(self) -> bool:
        """True for a zCDP budget (``set_budget(rho=...)``)."""
        return self.rho is not None

    def budget(self) -> Budget:
        """The public form: ``Budget(epsilon, delta)`` or ``Budget(rho=...)``."""
        if self.rho is not None:
            return Budget(rho=self.rho)
        return Budget(self.epsilon, self.delta)


UNLIMITED = Total()


@dataclasses.dataclass(frozen=True)
class Cost:
    """One release's cost in its own measure: ``(epsilon, delta)``, or ``rho`` (zCDP)."""

    epsilon: Fraction = _ZERO
    delta: Fraction = _ZERO
    rho: Fraction | None = None
    #: Spending learnt from another copy of the ledger: always counted at its worst.
    restored: bool = False

    @property
    def measure(self) -> Measure:
        """``"zCDP"`` when ``rho`` is set, else ``"approx"`` when ``delta > 0``, else ``"pure"``."""
        if self.rho is not None:
            return "zCDP"
        return "approx" if self.delta > 0 else "pure"

    def text(self) -> str:
        """The cost as shown in messages."""
        if self.rho is not None:
            return f"rho={exact_text(self.rho)}"
        return f"epsilon={exact_text(self.epsilon)}, delta={exact_text(self.delta)}"


@dataclasses.dataclass(frozen=True)
class Account:
    """Where a ledger stands: what its releases spent of its total, under the rule above.

    ``raw_*`` are the plain sums of the costs by measure (order-free; kept in records and
    high-water marks). ``epsilon``/``delta`` are charged under basic composition;
    ``rho`` is charged in the zCDP account once it is open (``rho_cap`` set: a rho
    budget, or an (epsilon, delta) budget after its first zCDP release, with
    ``converted`` the ``(ε_r, δ_r)`` that remained then). ``overspent`` marks an account
    that only a restored copy could push past its total: it refuses everything.
    """

    total: Total
    releases: int = 0
    raw_epsilon: Fraction = _ZERO
    raw_delta: Fraction = _ZERO
    raw_rho: Fraction = _ZERO
    epsilon: Fraction = _ZERO
    delta: Fraction = _ZERO
    converted: tuple[Fraction, Fraction] | None = None
    rho_cap: Fraction | None = None
    rho: Fraction = _ZERO
    overspent: bool = False

    @property
    def in_zcdp(self) -> bool:
        """True once every release is charged in zCDP (a rho budget, or after conversion)."""
        return self.rho_cap is not None

    def spent(self) -> Budget:
        """What was spent, in the forms the account has (see :meth:`Ledger.spent`)."""
        total = self.total
        if total.epsilon_unlimited:
            rho = self.rho if self.raw_rho else None
            return Budget(self.epsilon, self.delta, rho=rho)
        if total.is_rho:
            return Budget(rho=self.rho)
        if self.converted is None:
            return Budget(self.epsilon, self.delta)
        reserved_delta = self.converted[1]
        return Budget(
            self.epsilon + _epsilon_of(self.rho, reserved_delta),
            self.delta + reserved_delta,
            rho=self.rho,
        )

    def remaining(self) -> Budget:
        """What is left, in the forms the account has (see :meth:`Ledger.remaining`)."""
        total = self.total
        if total.unlimited:
            return Budget(math.inf, math.inf)
        if total.epsilon_unlimited and isinstance(total.delta, Fraction):
            return Budget(math.inf, _left(total.delta, self.delta, self.overspent))
        if total.rho is not None:
            return Budget(rho=_ZERO if self.overspent else max(_ZERO, total.rho - self.rho))
        if not isinstance(total.epsilon, Fraction) or not isinstance(total.delta, Fraction):
            return Budget(math.inf, math.inf)  # pragma: no cover - unlimited handled above
        if self.rho_cap is not None:
            # In zCDP, what limits every release is the rho left: a pure release of epsilon
            # costs epsilon**2 / 2 of it, and none may add delta (all of it is reserved).
            rho_left = _ZERO if self.overspent else max(_ZERO, self.rho_cap - self.rho)
            return Budget(_pure_epsilon_within(rho_left), _ZERO, rho=rho_left)
        spent = self.spent()
        spent_epsilon = spent.epsilon if spent.epsilon is not None else math.inf
        spent_delta = spent.delta if spent.delta is not None else math.inf
        return Budget(
            _left(total.epsilon, spent_epsilon, self.overspent),
            _left(total.delta, spent_delta, self.overspent),
        )


def _left(total: Fraction, spent: Fraction | float, overspent: bool) -> Fraction:
    if overspent or not isinstance(spent, Fraction):
        return _ZERO
    return max(_ZERO, total - spent)


#: Significant decimal digits kept of a conversion's result (rounded in the safe
#: direction), so that it shows as a plain decimal instead of a 64-bit fraction.
_SHOWN_DIGITS = 12


def _pure_epsilon_within(rho: Fraction, digits: int = _SHOWN_DIGITS) -> Fraction:
    """The largest epsilon with ``epsilon**2 / 2 <= rho``, rounded down to ``digits``
    significant digits (checked exactly)."""
    if rho <= 0:
        return _ZERO
    with localcontext() as ctx:
        ctx.prec = 40
        root = (2 * Decimal(rho.numerator) / Decimal(rho.denominator)).sqrt()
    step = Fraction(10) ** (root.adjusted() - digits + 1)
    shown = math.floor(Fraction(root) / step) * step
    while shown > 0 and shown * shown / 2 > rho:  # the 40-digit root may round up
        shown -= step
    return max(shown, _ZERO)


def _decimal_rounded(value: Fraction, *, up: bool) -> Fraction:
    """``value`` rounded up or down to ``_SHOWN_DIGITS`` significant decimal digits."""
    if value == 0:
        return value
    with localcontext() as ctx:
        ctx.prec = 40
        approximate = Decimal(value.numerator) / Decimal(value.denominator)
    step = Fraction(10) ** (approximate.adjusted() - _SHOWN_DIGITS + 1)
    units = value / step
    whole = math.ceil(units) if up else math.floor(units)
    return whole * step


def _epsilon_of(rho: Fraction, delta: Fraction) -> Fraction | float:
    """ε of ``rho``-zCDP at ``delta`` (CKS 2020, rounded up); inf when delta is 0."""
    if rho == 0:
        return _ZERO
    if delta <= 0 or delta >= 1:
        return math.inf
    return _decimal_rounded(epsilon_of_zcdp(rho, delta), up=True)


def rho_available(epsilon: Fraction | float, delta: Fraction | float) -> Fraction:
    """The largest rho whose zCDP guarantee implies ``(epsilon, delta)``-DP; 0 when none.

    ``rho_for_budget`` (CKS 2020, rounded down and verified against the very conversion
    the display uses), rounded down again to 12 significant digits; 0 when
    ``epsilon <= 0`` or ``delta <= 0`` (zCDP never implies pure DP).
    """
    if not isinstance(epsilon, Fraction) or not isinstance(delta, Fraction):
        raise ValueError("internal error: rho_available of an unlimited amount")
    if epsilon <= 0 or delta <= 0:
        return _ZERO
    return _decimal_rounded(rho_for_budget(epsilon, delta), up=False)


def fresh_account(total: Total) -> Account:
    """The account of a ledger with this total and no release yet."""
    return Account(total=total, rho_cap=total.rho)


class RefusedCostError(BudgetExceededError):
    """A cost that does not fit: why (``reason``), and at which release (``position``, from 1)."""

    def __init__(self, account: Account, cost: Cost, reason: str, fix: str) -> None:
        super().__init__(
            f"This release needs {cost.text()}, but {reason} ({account.releases} release(s) "
            f"so far). Nothing was charged. {fix}"
        )
        self.reason = reason
        self.position = account.releases + 1


def _refused(account: Account, cost: Cost, reason: str, fix: str) -> RefusedCostError:
    return RefusedCostError(account, cost, reason, fix)


_NO_RAISE = "a budget, once set, cannot be raised."


def _epsilon_floor_text(rho: Fraction) -> str:
    """The largest pure epsilon with ``ε²/2 <= rho``, rounded down to 6 digits, as text."""
    shown = _pure_epsilon_within(rho, digits=6)
    return f"{(Decimal(shown.numerator) / Decimal(shown.denominator)).normalize():f}"


def spend(account: Account, cost: Cost, *, force: bool = False) -> Account:
    """The account after ``cost``, or :class:`BudgetExceededError` (with ``force``: never).

    ``force`` records a cost that does not fit (spending learnt from a restored copy,
    which happened whatever the ledger says): the account is then marked ``overspent``.
    """
    if account.overspent and not force:
        raise _refused(
            account,
            cost,
            "this data's copies together spent more than its budget (see the "
            f"{RESTORED!r} rows of its history)",
            "Nothing more can be released from this data.",
        )
    base = dataclasses.replace(
        account,
        releases=account.releases + 1,
        raw_epsilon=account.raw_epsilon + cost.epsilon,
        raw_delta=account.raw_delta + cost.delta,
        raw_rho=account.raw_rho + (cost.rho or _ZERO),
    )
    total = account.total
    if total.unlimited or (total.epsilon_unlimited and cost.rho is not None):
        # (inf, delta) holds for every zCDP release: (ε(ρ, δ'), δ') for any δ' > 0.
        if cost.rho is not None:
            return dataclasses.replace(base, rho=account.rho + cost.rho)
        return dataclasses.replace(
            base, epsilon=account.epsilon + cost.epsilon, delta=account.delta + cost.delta
        )
    if account.in_zcdp:
        return _spend_zcdp(account, base, cost, force)
    if cost.rho is None:
        return _spend_basic(account, base, cost, force)
    return _open_zcdp(account, base, cost, force)


def _spend_basic(account: Account, base: Account, cost: Cost, force: bool) -> Account:
    """Phase 1 of an (epsilon, delta) budget: basic composition."""
    total = account.total
    after = dataclasses.replace(
        base, epsilon=account.epsilon + cost.epsilon, delta=account.delta + cost.delta
    )
    over_epsilon = after.epsilon > total.epsilon
    over_delta = after.delta > total.delta
    if not (over_epsilon or over_delta):
        return after
    if force:
        return dataclasses.replace(after, overspent=True)
    left = account.remaining()
    fixes = []
    if over_epsilon:
        fixes.append(f"epsilon <= {exact_text(left.epsilon or _ZERO)}")
    if over_delta:
        fixes.append(f"delta <= {exact_text(left.delta or _ZERO)}")
    raise _refused(
        account,
        cost,
        f"only epsilon={exact_text(left.epsilon or _ZERO)}, "
        f"delta={exact_text(left.delta or _ZERO)} remains of the total budget "
        f"{total.budget()}",
        f"Ask for {' and '.join(fixes)}, or release fewer statistics; {_NO_RAISE}",
    )


def _open_zcdp(account: Account, base: Account, cost: Cost, force: bool) -> Account:
    """The first zCDP release of an (epsilon, delta) budget: what remains becomes zCDP."""
    rho = cost.rho or _ZERO
    if rho == 0:  # a free zCDP part: nothing to account, no phase change
        return base
    total = account.total
    if not isinstance(total.epsilon, Fraction) or not isinstance(total.delta, Fraction):
        raise ValueError("internal error: an unlimited total reached the zCDP conversion")
    epsilon_left = max(_ZERO, total.epsilon - account.epsilon)
    delta_left = max(_ZERO, total.delta - account.delta)
    cap = rho_available(epsilon_left, delta_left)
    after = dataclasses.replace(base, converted=(epsilon_left, delta_left), rho_cap=cap, rho=rho)
    if rho <= cap:
        return after
    if force:
        return dataclasses.replace(after, overspent=True)
    if delta_left == 0:
        where = "the total budget has delta=0" if total.delta == 0 else "no delta remains"
        raise _refused(
            account,
            cost,
            f"a zCDP guarantee (Gaussian noise) implies (epsilon, delta)-DP only with "
            f"delta > 0, and {where} (total {total.budget()})",
            "Use noise with a pure guarantee (the geometric), or, on a new frame from the "
            "source data, a budget with delta > 0 (set_budget(epsilon=..., delta=1e-6)) or a "
            "zCDP budget (set_budget(rho=...)).",
        )
    raise _refused(
        account,
        cost,
        f"what remains of the total budget {total.budget()}, "
        f"epsilon={exact_text(epsilon_left)}, delta={exact_text(delta_left)}, holds at most "
        f"rho={exact_text(cap)} (Canonne, Kamath, Steinke 2020, Corollary 13)",
        f"Ask for rho <= {exact_text(cap)}, or release fewer statistics; {_NO_RAISE}",
    )


def _spend_zcdp(account: Account, base: Account, cost: Cost, force: bool) -> Account:
    """A rho budget, or an (epsilon, delta) budget after its first zCDP release."""
    total = account.total
    cap = account.rho_cap if account.rho_cap is not None else _ZERO
    if cost.rho is None and (cost.restored or cost.delta > 0) and not total.is_rho:
        # The account already holds all that remained when it opened: nothing more can be
        # charged under basic composition (restored spending is counted there, at its worst).
        after = dataclasses.replace(
            base, epsilon=account.epsilon + cost.epsilon, delta=account.delta + cost.delta
        )
        if cost.epsilon == 0 and cost.delta == 0:
            return after
        if force:
            return dataclasses.replace(after, overspent=True)
        if cost.restored:
            raise _refused(
                account,
                cost,
                f"this (epsilon, delta) budget turned what remained of it into a zCDP account "
                f"(rho={exact_text(cap)}) at its first zCDP release, and spending restored "
                f"from another copy of the ledger comes on top of it",
                f"Keep the budget; {_NO_RAISE}",
            )
        raise _refused(
            account,
            cost,
            f"this (epsilon, delta) budget turned what remained of it into a zCDP account "
            f"(rho={exact_text(cap)}) at its first zCDP release, and an approximate release "
            f"(delta > 0) cannot join a zCDP account",
            "Use a mechanism with delta=0 (pure DP) or Gaussian noise; on a new frame from "
            "the source data, release the approximate statistics before the first zCDP one.",
        )
    if cost.rho is None and cost.delta > 0:
        if force:
            need = cost.epsilon * cost.epsilon / 2
            return dataclasses.replace(base, rho=account.rho + need, overspent=True)
        raise _refused(
            account,
            cost,
            f"an approximate release (delta > 0) has no zCDP guarantee, and this data's "
            f"budget is {total.budget()} (zCDP)",
            "Use a mechanism with delta=0 (pure DP) or Gaussian noise, or set an "
            "(epsilon, delta) budget on a new frame from the source data.",
        )
    pure = cost.rho is None
    need = cost.epsilon * cost.epsilon / 2 if pure else (cost.rho or _ZERO)
    after = dataclasses.replace(base, rho=account.rho + need)
    if after.rho <= cap:
        return after
    if force:
        return dataclasses.replace(after, overspent=True)
    left = max(_ZERO, cap - account.rho)
    if total.is_rho:
        where = f"the total budget {total.budget()}"
    else:
        converted = account.converted or (_ZERO, _ZERO)
        where = (
            f"the zCDP account this budget opened at its first zCDP release (rho="
            f"{exact_text(cap)}, from the epsilon={exact_text(converted[0])}, "
            f"delta={exact_text(converted[1])} that remained of {total.budget()})"
        )
    counted = f" (a pure epsilon counts as epsilon²/2 = {exact_text(need)} in zCDP)" if pure else ""
    ask = f"epsilon <= {_epsilon_floor_text(left)}" if pure else f"rho <= {exact_text(left)}"
    raise _refused(
        account,
        cost,
        f"only rho={exact_text(left)} remains of {where}{counted}",
        f"Ask for {ask}, or release fewer statistics; {_NO_RAISE}",
    )


def replay(total: Total, costs: Iterable[Cost], *, force: bool = False) -> Account:
    """The account of a history of costs under ``total`` (refusing, unless ``force``)."""
    account = fresh_account(total)
    for cost in costs:
        account = spend(account, cost, force=force)
    return account


def within(new: Total, old: Total) -> bool:
    """True when ``new`` promises at least as much privacy as ``old`` (a lowering, or equal).

    A rho budget is within an (epsilon, delta) one when its conversion fits in it; an
    (epsilon, delta) budget is never within a rho budget (it would admit approximate
    releases, which have no zCDP guarantee).
    """
    if old.unlimited:
        return True
    if new.unlimited:
        return False
    if old.rho is not None:
        return new.rho is not None and new.rho <= old.rho
    if new.rho is None:
        return new.epsilon <= old.epsilon and new.delta <= old.delta
    if old.epsilon == math.inf:
        return old.delta > 0
    return new.rho <= rho_available(old.epsilon, old.delta)


def lower_total(ours: Total, theirs: Total) -> Total:
    """The total within both (for merging two copies of a ledger): never the higher one."""
    if within(theirs, ours):
        return theirs
    if within(ours, theirs):
        return ours
    if ours.rho is None and theirs.rho is None:
        return Total(min(ours.epsilon, theirs.epsilon), min(ours.delta, theirs.delta))
    zcdp, other = (ours, theirs) if ours.rho is not None else (theirs, ours)
    rho = zcdp.rho if zcdp.rho is not None else _ZERO
    if other.rho is None and other.epsilon != math.inf:
        rho = min(rho, rho_available(other.epsilon, other.delta))
    return Total(rho=rho)
