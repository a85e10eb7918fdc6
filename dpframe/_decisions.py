"""Stochastic threshold decisions: "are there at least ``min_count`` records?" (seed 001).

A decision ``Q(N)`` answers True or False about a true count ``N`` that one row can
change by one. Seed ``001_ac8d45847700a6b3.txt`` derives three such rules, each a curve
``f(N) = Pr(Q(N) = True)`` that rises with ``N``:

* ``"laplace"`` (§4): ``N + Laplace(1/ε) >= k``, pure ε-DP;
* ``"cutoff"`` (§5): always True from ``min_count`` on, ``e^{ε(N - m)}`` below; it is
  ``(ε, 1 - e^{-ε})``-DP;
* ``"generalized"`` (§6): the steepest curve that ``(ε, δ)``-DP allows.

Every curve here is written in one form. There is a *junction* ``J``; at and below it
``f(N) = lower_scale · e^{-ε'(J - N)} - β`` and above it
``1 - f(N) = upper_scale · e^{-ε'(N - J)} - β``, with ``β = δ' e^{-ε'} / (1 - e^{-ε'})``
(zero for the pure rules). The curves are built with a safety margin
(``ε' = ε(1 - 2^-40)``, ``δ' = δ(1 - 2^-40)``), evaluated in 120-digit decimal
arithmetic, clamped in their far tails, and rounded to dyadic Bernoulli coins
(:mod:`dpframe._coins`), so that the probability actually realized for each count is
an exactly known rational that satisfies both privacy inequalities with the requested
``(ε, δ)``; the tests verify this in exact rational arithmetic.
"""

from __future__ import annotations

import decimal
import functools
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpframe import _validation
from dpframe._coins import Coin, CoinTable, lazy_bernoulli, lazy_bernoulli_indexed, make_coin
from dpframe._exact import (
    exp_decimal,
    exp_lower_bound,
    precise,
    show,
    simplest_rational,
    to_decimal,
)
from dpframe._random import BitSource, bit_source
from dpframe.errors import InvalidParameterError, InvalidParameterTypeError

__all__ = ["decision_probability", "key_selection", "threshold_decision"]

METHODS = ("laplace", "cutoff", "generalized")

# The curve is built for ε' = ε(1 - 2^-40) and δ' = δ(1 - 2^-40): the slack this leaves in
# both inequalities absorbs the rounding of every probability to a dyadic coin.
SAFETY_MARGIN = Fraction(1, 2**40)
# Pure (δ = 0) curves never reach 0 or 1; their tails are held flat at 2^-256 (and
# 1 - 2^-256), which keeps every coin a few words long and keeps ε-DP (see DecisionCurve).
PURE_TAIL_LOG2 = 256
# Curves that spend δ > 0 are set to exactly 0 (or 1) once within 2^-44 δ e^-ε of it.
_DELTA_TAIL_LOG2 = 44
# Accepted range of epsilon: below 2^-64 the curve would be wider than any int64 count (the
# decision ignores the data); above 200 it is a deterministic threshold in all but name.
MIN_EPSILON = Fraction(1, 2**64)
MAX_EPSILON = Fraction(200)
# Counts spanning fewer values than this are mapped to their coins through a lookup array.
_DENSE_RANGE = 1 << 20
# 1 - p below this would round p to 1 in the curve's 120-digit arithmetic.
MIN_P_DISTANCE = Fraction(1, 10**100)


# ---------------------------------------------------------------- validation


def _integer(value: Any, name: str, fix: str) -> int:
    """A Python int from an integer (bool refused). Belongs in _validation (see report)."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Integral):
        raise InvalidParameterTypeError(
            f"{name} must be an integer, got {value!r} of type {type(value).__name__}. {fix}"
        )
    result = int(value)
    if not 0 <= result <= _validation.INT_LIMIT:
        raise InvalidParameterError(f"{name} must be between 0 and 2**62, got {value!r}. {fix}")
    return result


def _cutoff_delta(epsilon: Fraction) -> Fraction:
    """``1 - e^{-ε}`` to about 120 digits (an approximation, for messages and checks)."""
    return 1 - Fraction(exp_decimal(-epsilon))


def check_cutoff_cells(epsilon: Fraction, delta: Fraction, cells: int) -> None:
    """Refuse ``method="cutoff"`` when ``delta`` cannot pay for every cell one unit touches.

    With a privacy unit in ``cells`` cells, each cell decides at ``epsilon / cells`` and
    spends ``1 - exp(-epsilon / cells)`` of delta: the call needs ``cells`` times that,
    which is 1 or more when ``cells`` is large (then no delta below 1 can pay for it).
    """
    needed = cells * _cutoff_delta(epsilon / cells)
    if delta >= needed * (1 - SAFETY_MARGIN):
        return
    per_cell = f"1 - exp(-epsilon / {cells}) = {float(needed / cells):.6g}"
    if needed >= 1:
        raise InvalidParameterError(
            f"method='cutoff' cannot decide for units in up to {cells} cells at "
            f"epsilon={show(epsilon)}: each cell spends delta = {per_cell}, {cells} times "
            f"that is {float(needed):.6g}, and delta must be below 1. Use method='laplace' "
            f"or 'generalized', or a smaller max_groups."
        )
    raise InvalidParameterError(
        f"method='cutoff' spends delta in each of the up to {cells} cells one unit "
        f"contributes to: {per_cell} each, {float(needed):.6g} in all. To accept that, pass "
        f"delta={_rounded_up(needed)}; otherwise use method='laplace' or 'generalized'."
    )


def _rounded_up(x: Fraction) -> str:
    """``x`` rounded up to three significant digits, for a suggestion in a message."""
    ctx = decimal.Context(prec=3, rounding=decimal.ROUND_CEILING)
    return str(ctx.divide(Decimal(x.numerator), Decimal(x.denominator)))


@dataclass(frozen=True)
class DecisionParameters:
    """Validated parameters of a decision, in the exact form the helpers below take."""

    min_count: int
    epsilon: Fraction
    delta: Fraction
    method: str
    p: Fraction


def check_parameters(
    min_count: Any, epsilon: Any, delta: Any, method: Any, p: Any
) -> DecisionParameters:
    """Validate every parameter of a decision but the count (draws nothing).

    Callers of :func:`sample_decisions` and :func:`decision_cost` (the accessor) should
    validate with this, so that the method-specific rules (no delta for ``"laplace"``,
    the acknowledged delta and fixed p of ``"cutoff"``, the epsilon range) hold there too.
    """
    eps = _validation.epsilon(epsilon)
    dlt = _validation.delta(delta)
    chosen = _validation.choice(method, "method", METHODS)
    _validation.probability(p, "p")  # type and (0, 1)
    prob = p if isinstance(p, Fraction) else simplest_rational(float(p))
    if 1 - prob < MIN_P_DISTANCE:
        raise InvalidParameterError(
            f"p={show(prob)} is too close to 1: pass p between 0 and 1 - 1e-100 (the curve is "
            f"built in 120-digit arithmetic). Typical values are 0.5 (neutral), 0.9 (generous) "
            f"or 0.1 (conservative)."
        )
    m = _integer(
        min_count,
        "min_count",
        "Pass the smallest number of records that should count as enough, e.g. min_count=100.",
    )
    if eps < MIN_EPSILON:
        raise InvalidParameterError(
            f"epsilon={show(eps)} is below 2**-64: the decision would ignore the count and "
            f"be a coin flip with probability p. Use a larger epsilon (typical: 0.01 to 10)."
        )
    if eps > MAX_EPSILON:
        raise InvalidParameterError(
            f"epsilon={show(eps)} is above {MAX_EPSILON}; such a decision has no meaningful "
            f"privacy. Use a smaller epsilon (typical: 0.01 to 10)."
        )
    if chosen == "laplace" and dlt != 0:
        raise InvalidParameterError(
            f"method='laplace' is pure epsilon-DP and spends no delta, got delta={delta!r}. "
            f"Pass delta=0, or use method='generalized' to spend delta on a steeper curve."
        )
    if chosen == "cutoff":
        needed = _cutoff_delta(eps)
        if dlt < needed * (1 - SAFETY_MARGIN):
            raise InvalidParameterError(
                f"method='cutoff' is only (epsilon, 1 - exp(-epsilon))-DP: with "
                f"epsilon={show(eps)} it spends delta = {float(needed):.6g}: with up to that "
                f"probability it can reveal whether one person is in the data. To accept "
                f"that, pass delta={_rounded_up(needed)} (any "
                f"delta >= 1 - exp(-epsilon)); otherwise use method='laplace' or 'generalized'."
            )
        if prob != Fraction(1, 2):
            raise InvalidParameterError(
                f"p has no role for method='cutoff': it always decides True at min_count "
                f"(probability 1), got p={p!r}. Leave p at its default 0.5, or use "
                f"method='laplace' or 'generalized' to choose Pr(True) at min_count."
            )
    return DecisionParameters(m, eps, dlt, chosen, prob)


def _counts(values: Any, name: str = "counts") -> NDArray[np.int64]:
    """True counts as int64: integers >= 0 (refused otherwise)."""
    dtype = np.asarray(values).dtype
    if dtype == np.bool_ or dtype.kind not in "iu":
        # Checked here because integer_array's message is about the geometric mechanism.
        raise InvalidParameterTypeError(
            f"{name} must hold integer counts, got dtype {dtype}. Pass the exact numbers of "
            f"records, for example np.asarray(x, dtype='int64')."
        )
    array = _validation.integer_array(values, name)
    if array.size and int(array.min()) < 0:
        raise InvalidParameterError(
            f"{name} must be true counts (integers >= 0); got a negative value. Pass the "
            f"exact number of records, not a noisy count."
        )
    if array.size and int(array.max()) > _validation.INT_LIMIT:
        raise InvalidParameterError(f"{name} must be at most 2**62; got a larger value.")
    return array


def decision_cost(epsilon: Fraction, delta: Fraction, method: str) -> tuple[Fraction, Fraction]:
    """The exact ``(ε, δ)`` one decision spends, for the privacy ledger.

    ``(ε, 0)`` for ``"laplace"``; ``(ε, d)`` for ``"cutoff"``, where ``d`` is a rational
    upper bound on ``1 - e^{-ε}`` (whatever larger ``delta`` the caller acknowledged);
    ``(ε, δ)`` for ``"generalized"``. Arguments are the validated Fractions.
    """
    if method == "laplace":
        return epsilon, Fraction(0)
    if method == "cutoff":
        return epsilon, 1 - exp_lower_bound(-epsilon)
    if method == "generalized":
        return epsilon, delta
    raise InvalidParameterError(f"method must be one of {METHODS}; got {method!r}.")


# ---------------------------------------------------------------- the curves


@dataclass(frozen=True)
class DecisionCurve:
    """One decision curve, fixed by public parameters only (see the module docstring).

    For ``N <= junction``: ``f(N) = lower_scale · exp(-eps · min(junction - N,
    lower_reach)) - beta``; for ``N > junction``: ``1 - f(N) = upper_scale · exp(-eps ·
    min(N - junction, upper_reach)) - beta``. A value below ``cut`` (on either side) is
    replaced by ``tail`` (0 or 2^-256); the reaches are where that has certainly
    happened, so counts beyond them share one coin. ``upper_scale == 0`` means
    ``f(N) = 1`` above the junction (cutoff).
    """

    method: str
    eps: Decimal
    beta: Decimal
    junction: int
    lower_scale: Decimal
    upper_scale: Decimal
    cut: Decimal
    tail: Decimal
    lower_reach: int
    upper_reach: int
    rel_bits: int


def _floor(x: Decimal) -> int:
    return int(x.to_integral_value(rounding=decimal.ROUND_FLOOR))


def _reach(scale: Decimal, cut: Decimal, eps: Decimal) -> int:
    """Steps j beyond which ``scale · e^{-eps j} < cut`` certainly (one step to spare)."""
    if scale <= cut:
        return 0
    return _floor((scale / cut).ln() / eps) + 2


def generalized_p0(eps: Decimal, delta: Decimal) -> Decimal:
    """Seed 001, eq. 6.10: the value where the two DP constraints on f(n - 1) cross."""
    up, down = eps.exp(), (-eps).exp()
    return (up - 1 + delta * (1 - down)) / (up - down)


def laplace_offset(eps: Decimal, p: Decimal) -> Decimal:
    """``k - m`` of seed 001 eqs. 4.5 / 4.7: where ``N + Laplace(1/eps) >= k`` is a fair coin."""
    if p >= Decimal("0.5"):
        return (2 * (1 - p)).ln() / eps
    return -(2 * p).ln() / eps


@functools.lru_cache(maxsize=256)
def decision_curve(
    min_count: int, epsilon: Fraction, delta: Fraction, method: str, p: Fraction
) -> DecisionCurve:
    """Build the curve of ``method`` through ``(min_count, p)`` with the safety margin."""
    with precise():
        return _build_curve(min_count, epsilon, delta, method, p)


def _build_curve(
    min_count: int, epsilon: Fraction, delta: Fraction, method: str, p: Fraction
) -> DecisionCurve:
    eps = to_decimal(epsilon * (1 - SAFETY_MARGIN))
    down = (-eps).exp()
    prob = to_decimal(p)
    half = Decimal(1) / 2
    zero = Decimal(0)
    beta = zero
    if method == "laplace":
        # Eq. 4.2 / 4.3 with k = min_count + offset: f = ½ e^{ε(N-k)} below k, else
        # 1 - ½ e^{ε(k-N)}. The junction is the last count below k.
        offset = laplace_offset(eps, prob)
        steps_up = -_floor(-offset)  # ceil(offset)
        junction = min_count + steps_up - 1
        frac = offset - (steps_up - 1)  # k - junction, in (0, 1]
        lower_scale = half * (-eps * frac).exp()
        upper_scale = half * (eps * frac).exp()
    elif method == "cutoff":
        # Eq. 5.1 / 5.3: f = e^{ε(N-m)} below m, exactly 1 from m on.
        junction = min_count - 1
        lower_scale = down
        upper_scale = zero
    else:
        # §6. The steepest (ε, δ) curve: going up, f(n+1) = min(T1, T2)(f(n)) with
        # T1(y) = e^ε y + δ (eq. 6.11) and T2(y) = 1 - e^-ε (1 - δ - y) (eq. 6.12). Their
        # closed forms (eqs. 6.18, 6.26; 6.27 is the first step of 6.26) are
        # f = (y + β) e^{ε(n-J)} - β below and 1 - f = (1 - y + β) e^{-ε(n-J)} - β above
        # the junction J, where y = f(J) is the last value <= p0 (eq. 6.10). Both
        # constraints then hold at every step, whatever the fractional placement.
        dlt = to_decimal(delta * (1 - SAFETY_MARGIN))
        beta = dlt * down / (1 - down)
        p0 = generalized_p0(eps, dlt)
        if prob <= p0:
            steps = _floor(((p0 + beta) / (prob + beta)).ln() / eps)
            junction = min_count + steps
            y = (prob + beta) * (eps * steps).exp() - beta
        else:
            steps = -_floor(-(((1 - p0 + beta) / (1 - prob + beta)).ln() / eps))
            junction = min_count - steps
            y = 1 + beta - (1 - prob + beta) * (eps * steps).exp()
        lower_scale = y + beta
        upper_scale = 1 - y + beta
    if method == "cutoff" or (method == "generalized" and beta > 0):
        # Tails set to exactly 0 / 1: harmless while the next value stays <= δ (it is below
        # 2^-44 δ e^-ε times e^ε', far inside the δ margin).
        spent = (1 - down) if method == "cutoff" else beta * (1 - down) / down
        cut = spent * down / Decimal(2**_DELTA_TAIL_LOG2)
        tail = zero
    else:
        # Pure curves: clamping a valid curve to [c, 1 - c] keeps both inequalities.
        cut = Decimal(2) ** -PURE_TAIL_LOG2
        tail = cut
    rel_bits = 48 + max(0, math.ceil(-math.log2(epsilon)))
    return DecisionCurve(
        method=method,
        eps=eps,
        beta=beta,
        junction=junction,
        lower_scale=lower_scale,
        upper_scale=upper_scale,
        cut=cut,
        tail=tail,
        lower_reach=_reach(lower_scale, cut, eps),
        upper_reach=_reach(upper_scale, cut, eps) if upper_scale > 0 else 0,
        rel_bits=rel_bits,
    )


# A decision for one count: a coin, or a constant when the curve is exactly 0 or 1.
_Outcome = Coin | bool


def decision_coin(curve: DecisionCurve, count: int) -> _Outcome:
    """The exact Bernoulli coin that decides ``Q(count)`` (True/False: a sure outcome)."""
    if count <= curve.junction:
        return _branch_coin(curve, min(curve.junction - count, curve.lower_reach), False)
    if curve.upper_scale == 0:
        return True
    return _branch_coin(curve, min(count - curve.junction, curve.upper_reach), True)


@functools.lru_cache(maxsize=1 << 16)
def _branch_coin(curve: DecisionCurve, steps: int, upper: bool) -> _Outcome:
    """The coin ``steps`` counts below (or above, ``upper``) the junction; tails share one."""
    scale = curve.upper_scale if upper else curve.lower_scale
    with precise():
        value = scale * (-curve.eps * steps).exp() - curve.beta
        if value < curve.cut:
            return upper if curve.tail == 0 else _tail_coin(curve.tail, curve.rel_bits, upper)
        # ``value`` is Pr(True) below the junction and Pr(False) above it; rounding it (not
        # its complement) keeps the small side accurate to 2^-rel_bits relative.
        return make_coin(value, curve.rel_bits, complement=upper)


@functools.lru_cache(maxsize=64)
def _tail_coin(tail: Decimal, rel_bits: int, upper: bool) -> Coin:
    with precise():
        return make_coin(tail, rel_bits, complement=upper)


def realized_probability(curve: DecisionCurve, count: int) -> Fraction:
    """The exact probability that ``Q(count)`` is True, as sampled."""
    outcome = decision_coin(curve, count)
    if isinstance(outcome, bool):
        return Fraction(int(outcome))
    return outcome.probability


def _window(curve: DecisionCurve) -> tuple[int, int]:
    """Counts outside this range share the coin of its nearer end (the curve's reaches)."""
    smallest, largest = int(np.iinfo(np.int64).min), int(np.iinfo(np.int64).max)
    low = curve.junction - curve.lower_reach
    high = curve.junction + (curve.upper_reach if curve.upper_scale > 0 else 1)
    # Both ends into int64 (a tiny p or epsilon can put the whole window beyond it).
    return min(max(low, smallest), largest), min(max(high, smallest), largest)


def _distinct_in_window(
    flat: NDArray[np.int64], curve: DecisionCurve
) -> tuple[NDArray[np.int64], NDArray[np.intp]]:
    """The distinct counts (clamped into the curve's window) and each entry's position among
    them, without sorting when the counts span a small range."""
    if not flat.size:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.intp)
    low, high = int(flat.min()), int(flat.max())
    window_low, window_high = _window(curve)
    if low < window_low or high > window_high:
        flat = np.clip(flat, window_low, window_high)
        low = min(max(low, window_low), window_high)
        high = max(min(high, window_high), window_low)
    if low == high:
        return np.array([low], dtype=np.int64), np.zeros(flat.size, dtype=np.intp)
    if high - low >= _DENSE_RANGE:
        distinct, index = np.unique(flat, return_inverse=True)
        return distinct, index.reshape(-1)
    offsets = flat - low
    present = np.flatnonzero(np.bincount(offsets, minlength=high - low + 1))
    lookup = np.zeros(high - low + 1, dtype=np.intp)
    lookup[present] = np.arange(present.size)
    return present + low, np.take(lookup, offsets)


def sample_decisions(
    counts: NDArray[np.int64],
    *,
    min_count: int,
    epsilon: Fraction,
    delta: Fraction,
    method: str,
    p: float | Fraction,
    source: BitSource,
) -> NDArray[np.bool_]:
    """One independent decision per entry of ``counts`` (validated parameters).

    Each count's exact coin is looked up once per distinct count (counts beyond the
    curve's reaches share one); the draws are one vectorized pass that compares one
    random byte per decision with its coin's threshold (:func:`lazy_bernoulli_indexed`),
    reading more words only on a tie (1/256).
    """
    prob = p if isinstance(p, Fraction) else simplest_rational(float(p))
    curve = decision_curve(min_count, epsilon, delta, method, prob)
    shape = np.shape(counts)
    flat = np.asarray(counts, dtype=np.int64).reshape(-1)
    if not flat.size:
        return np.zeros(shape, dtype=np.bool_)
    distinct, index = _distinct_in_window(flat, curve)
    if distinct.size == 1:
        only = decision_coin(curve, int(distinct[0]))
        if isinstance(only, bool):
            return np.full(shape, only, dtype=np.bool_)
        return lazy_bernoulli(source, only, flat.size).reshape(shape)
    outcomes = [decision_coin(curve, count) for count in distinct.tolist()]
    return lazy_bernoulli_indexed(source, CoinTable(outcomes), index.reshape(-1)).reshape(shape)


# ---------------------------------------------------------------- public functions


def decision_probability(
    counts: ArrayLike,
    *,
    min_count: int | np.integer[Any],
    epsilon: float | Fraction,
    delta: float | Fraction = 0.0,
    method: str = "laplace",
    p: float | Fraction = 0.5,
) -> NDArray[np.float64]:
    """Probability that :func:`threshold_decision` says True, for each true count.

    This is public knowledge (it depends on the parameters only, not on any data), so
    calling it spends no privacy budget. Use it to choose ``min_count``, ``epsilon``,
    ``delta``, ``method`` and ``p`` before deciding.

    Parameters
    ----------
    counts : array_like of int
        True counts ``N >= 0`` at which to evaluate the curve. Any shape.
    min_count : int
        ``m``: the number of records that should count as enough (``0 <= m <= 2**62``).
    epsilon : float
        Privacy-loss parameter, ``2**-64 <= epsilon <= 200``.
    delta : float, default 0.0
        ``"laplace"``: must be 0. ``"cutoff"``: must be at least ``1 - exp(-epsilon)``
        (an acknowledgement of that large cost; the float nearest it is accepted, and
        the cost charged is ``1 - exp(-epsilon)`` itself, rounded up).
        ``"generalized"``: any value in ``[0, 1)``, the δ the curve spends.
    method : {"laplace", "cutoff", "generalized"}, default "laplace"
        The decision rule of seed 001 (§4, §5, §6); see :func:`threshold_decision`.
    p : float, default 0.5
        ``Pr(True)`` at ``N = min_count``, strictly between 0 and 1 (``"cutoff"``
        always has 1 there and only accepts the default).

    Returns
    -------
    numpy.ndarray of float64
        ``Pr(Q(N) = True)`` for each count, with the shape of ``counts``: the exact
        probability realized by the sampler, rounded to the nearest float.

    Raises
    ------
    InvalidParameterError, InvalidParameterTypeError
        For parameters outside the ranges above, non-integer or negative counts, or a
        ``delta``/``p`` the method cannot honour.

    Notes
    -----
    The curves (seed 001) for the true count ``N`` and ``m = min_count``:

    * ``"laplace"``: ``½ e^{ε(N - k)}`` for ``N < k`` and ``1 - ½ e^{ε(k - N)}`` for
      ``N >= k``, with ``k = m + ln(2(1 - p))/ε`` for ``p >= ½`` and
      ``k = m - ln(2p)/ε`` for ``p < ½`` (eqs. 4.2-4.7). For ``ε = 10^-3``,
      ``p = 0.99`` gives ``k = m - 3912``; the curve needs about 7800 counts to go
      from 0.01 to 0.99.
    * ``"cutoff"``: ``e^{ε(N - m)}`` for ``N < m`` and exactly 1 from ``m`` on (§5).
    * ``"generalized"``: the steepest curve allowed by ``(ε, δ)``-DP (§6): geometric
      growth ``f(N+1) = e^ε f(N) + δ`` below ``p0`` (eq. 6.10), geometric decay of
      ``1 - f`` above it, placed so that ``f(m) = p``; exactly 0 and 1 in its far
      tails when ``δ > 0``. For ``ε = δ = 10^-3``, ``p0 = 0.50075`` and the curve
      climbs from 0.5 to 0.99 in about 400 counts (about 790 from 0.01 to 0.99,
      against 7824 for ``"laplace"``). With ``δ = 0`` it is the steepest pure ε-DP
      curve: the Laplace curve at ``p = ½``, and within ``cosh(ε/2) - 1 ≈ ε²/8`` of it
      otherwise.

    Computing the curve depends on the parameters only (no data, no randomness); its
    running time grows with the number of distinct counts asked about.

    The values differ from these formulas only through the safety margin described in
    :func:`threshold_decision` (``ε(1 - 2^-40)`` in place of ``ε``, ``δ(1 - 2^-40)``
    in place of ``δ``, and the dyadic rounding) and, for pure curves, in the tails
    below ``2^-256``, which are held flat.

    References
    ----------
    Seed ``001_ac8d45847700a6b3.txt`` ("Implementation of Stochastic Decision").

    Examples
    --------
    >>> import dpframe.mechanisms as dpm
    >>> probs = dpm.decision_probability([90, 100, 110], min_count=100, epsilon=0.1)
    >>> [round(float(x), 3) for x in probs]
    [0.184, 0.5, 0.816]
    >>> float(dpm.decision_probability(100, min_count=100, epsilon=1.0, p=0.99))
    0.99
    """
    checked = check_parameters(min_count, epsilon, delta, method, p)
    array = _counts(counts)
    curve = decision_curve(
        checked.min_count, checked.epsilon, checked.delta, checked.method, checked.p
    )
    distinct, index = _distinct_in_window(array.reshape(-1), curve)
    values = np.array(
        [float(realized_probability(curve, count)) for count in distinct.tolist()],
        dtype=np.float64,
    )
    return np.take(values, index).reshape(array.shape)


@overload
def threshold_decision(
    count: int | np.integer[Any],
    *,
    min_count: int | np.integer[Any],
    epsilon: float | Fraction,
    delta: float | Fraction = 0.0,
    method: str = "laplace",
    p: float | Fraction = 0.5,
    rng: Any = None,
) -> bool: ...


@overload
def threshold_decision(
    count: Sequence[int] | NDArray[np.integer[Any]],
    *,
    min_count: int | np.integer[Any],
    epsilon: float | Fraction,
    delta: float | Fraction = 0.0,
    method: str = "laplace",
    p: float | Fraction = 0.5,
    rng: Any = None,
) -> NDArray[np.bool_]: ...


def threshold_decision(
    count: int | np.integer[Any] | Sequence[int] | NDArray[np.integer[Any]],
    *,
    min_count: int | np.integer[Any],
    epsilon: float | Fraction,
    delta: float | Fraction = 0.0,
    method: str = "laplace",
    p: float | Fraction = 0.5,
    rng: Any = None,
) -> bool | NDArray[np.bool_]:
    """Decide, with differential privacy, whether a count reaches ``min_count``.

    Answers "are there at least ``min_count`` records?" with a random True/False whose
    probability rises with the true count: ``p`` at ``count == min_count``, near 0 far
    below it, near 1 far above it. Use it to gate a release on having enough data
    without revealing the count.

    Parameters
    ----------
    count : int or array_like of int
        The true number of records (``>= 0``). An array gives one independent
        decision per entry (see Notes for what that costs).
    min_count : int
        ``m``: the number of records that should count as enough (``0 <= m <= 2**62``).
    epsilon : float
        Privacy-loss parameter, ``2**-64 <= epsilon <= 200``.
    delta : float, default 0.0
        ``"laplace"``: must be 0 (pure ε-DP). ``"cutoff"``: must be at least
        ``1 - exp(-epsilon)``, which is what the rule spends (0.632 for
        ``epsilon = 1``); passing it (or any larger value) is the acknowledgement, and
        ``1 - exp(-epsilon)``, rounded up, is what gets charged. ``"generalized"``: the δ to
        spend, in ``[0, 1)``; 0 gives the steepest pure ε-DP curve.
    method : {"laplace", "cutoff", "generalized"}, default "laplace"
        ``"laplace"``: ``count + Laplace(1/epsilon) >= k`` (seed 001 §4).
        ``"cutoff"``: always True from ``min_count`` on, ``exp(epsilon (count - m))``
        below (§5). ``"generalized"``: the steepest curve ``(epsilon, delta)``-DP allows
        (§6). See :func:`decision_probability` for the curves.
    p : float, default 0.5
        ``Pr(True)`` at ``count == min_count``, strictly between 0 and 1. Above ½ is
        generous (a count at the minimum usually passes), below ½ conservative.
        ``"cutoff"`` has probability 1 at ``min_count`` and only accepts the default.
    rng : numpy.random.Generator or seed, optional
        For teaching and tests only: makes the decision reproducible, hence not
        private. The default draws from an AES-256-CTR keystream keyed by ``os.urandom``.

    Returns
    -------
    bool or numpy.ndarray of bool
        The decision; for an array of counts, one per entry, with its shape.

    Raises
    ------
    InvalidParameterError, InvalidParameterTypeError
        For an epsilon outside ``[2**-64, 200]``, a delta outside ``[0, 1)``, a
        probability ``p`` outside ``(0, 1)``, an unknown method, a non-integer or
        negative ``count`` or ``min_count``, a nonzero ``delta`` with ``"laplace"``, a
        ``delta`` below ``1 - exp(-epsilon)`` or a ``p`` other than 0.5 with
        ``"cutoff"``, or a bad ``rng``. Nothing is drawn before every check passed.

    Notes
    -----
    **Privacy.** Two data sets are neighbours when one row is added or removed, which
    changes ``count`` by one. A randomized True/False answer ``Q`` is
    ``(ε, δ)``-differentially private exactly when, for every ``N``,
    ``Pr(Q(N+1)) <= e^ε Pr(Q(N)) + δ`` and ``Pr(not Q(N)) <= e^ε Pr(not Q(N+1)) + δ``
    (seed 001, §2; the other two inequalities follow because every curve rises with
    ``N``). The guarantee and the cost to charge are:

    * ``"laplace"``: ``(ε, 0)``, pure ε-DP (the Laplace mechanism followed by a
      comparison).
    * ``"cutoff"``: ``(ε, 1 - e^{-ε})`` (seed 001, eqs. 5.5-5.8). **This δ is large**:
      0.632 for ε = 1, 0.095 for ε = 0.1. It means that a count just below ``m`` and
      one at ``m`` can be told apart with that probability: one person's presence
      can be revealed. Prefer ``"generalized"`` with a small δ.
    * ``"generalized"``: ``(ε, δ)``; with ``δ = 0``, ``(ε, 0)``.

    **What "exact" means here.** The decision is one draw of a Bernoulli coin whose
    probability is a dyadic rational (``numerator / 2^(64·words)``), drawn by comparing
    uniformly random 64-bit words with its binary digits (:mod:`dpframe._coins`), so
    the realized probability of True is exactly that rational; no floating-point
    uniform is compared with a floating-point probability. Each count's probability is
    computed in 120-digit decimal arithmetic from the closed-form curve for
    ``ε' = ε(1 - 2^-40)`` and ``δ' = δ(1 - 2^-40)``, then rounded to within a relative
    ``2^-(48 + log2(1/ε))`` of ``min(f, 1 - f)``. The margin this leaves in both
    inequalities (``(e^ε - e^ε') f + (δ - δ') >= 2^-40 (ε f + δ)``) is more than the
    rounding can use up, so the *realized* probabilities satisfy both inequalities
    with the requested ``ε`` and ``δ``; the test suite checks this in exact rational
    arithmetic, against a rational lower bound on ``e^ε``, over thousands of counts
    around ``min_count`` and at the tails for every method. In the far tails, pure
    curves are held flat at ``2^-256`` (and ``1 - 2^-256``), which keeps ε-DP since
    clamping a valid curve to ``[c, 1 - c]`` keeps both inequalities; curves with
    ``δ > 0`` become exactly 0 (or 1) once within ``2^-44 δ e^-ε`` of it, which the
    δ margin covers.

    **Several counts.** An array of counts gets independent decisions, each with the
    guarantee above for its own count. Releasing them together costs ``(ε, δ)`` in
    all only when every row counts towards at most one of them (counts of disjoint
    groups, parallel composition); otherwise the costs add up.

    **Running time and randomness.** One random byte decides each coin except on a
    tie with its threshold's first byte (probability 1/256), which reads further
    words. The work done depends on the count: the first decision at a count not seen
    before computes its coin (a few 120-digit exponentials), and counts near
    ``min_count`` have coins of more words. So an observer who can time the call, or
    count the random words it reads, learns something about the count. Do not expose
    timings.

    References
    ----------
    Seed ``001_ac8d45847700a6b3.txt`` ("Implementation of Stochastic Decision"): §4
    Laplace noise decision, §5 cutoff exponential, §6 generalized Laplace noise decision.
    C. Dwork, A. Roth, *The Algorithmic Foundations of Differential Privacy*, 2014.

    Examples
    --------
    >>> import dpframe.mechanisms as dpm
    >>> enough = dpm.threshold_decision(1234, min_count=1000, epsilon=0.1)
    >>> isinstance(enough, bool)
    True
    >>> dpm.threshold_decision(10**6, min_count=1000, epsilon=0.1, delta=1e-6,
    ...                        method="generalized", p=0.9)
    True
    >>> dpm.threshold_decision([10**6, 10**6], min_count=1000, epsilon=0.1).tolist()
    [True, True]
    """
    checked = check_parameters(min_count, epsilon, delta, method, p)
    scalar = isinstance(count, numbers.Integral)
    if scalar:
        value = _integer(count, "count", "Pass the true number of records, an integer >= 0.")
        counts = np.array([value], dtype=np.int64)
    else:
        counts = _counts(count, "count")
    source = bit_source(rng)
    decided = sample_decisions(
        counts,
        min_count=checked.min_count,
        epsilon=checked.epsilon,
        delta=checked.delta,
        method=checked.method,
        p=checked.p,
        source=source,
    )
    return bool(decided[0]) if scalar else decided


def key_selection(
    counts: Sequence[int] | NDArray[np.integer[Any]],
    *,
    epsilon: float | Fraction,
    delta: float | Fraction,
    max_groups: int = 1,
    rng: Any = None,
) -> NDArray[np.bool_]:
    """Choose, privately, which keys found in the data may be released (partition selection).

    Each key is kept with a probability that rises with its count of distinct privacy
    units: exactly 0 at count 0, at most ``delta / max_groups`` at count 1, then as fast
    as ``(epsilon, delta)``-DP allows, reaching almost 1 after a few dozen units.

    Parameters
    ----------
    counts : array_like of int
        For each candidate key, the number of distinct units (people) with a row under
        it, each unit counted under at most ``max_groups`` keys (``>= 0``).
    epsilon : float
        Privacy-loss parameter of the whole selection (> 0).
    delta : float
        The probability budget of the selection, in ``(0, 1)``: a key held by a single
        unit is released with probability below ``delta / max_groups``.
    max_groups : int, default 1
        The most keys one unit is counted under.
    rng : numpy.random.Generator or seed, optional
        For teaching and tests only (the selection is then not private).

    Returns
    -------
    numpy.ndarray of bool
        True for the keys to release, shaped like ``counts``.

    Raises
    ------
    InvalidParameterError, InvalidParameterTypeError
        For ``delta`` not in ``(0, 1)``, a bad ``epsilon``, ``max_groups`` below 1 or
        not an integer, or negative or non-integer counts. Nothing is drawn before every
        check passed.

    See Also
    --------
    threshold_decision : The decision applied to each key.
    decision_probability : Its probability curve.

    Notes
    -----
    Neighbouring data sets differ by one unit, which changes at most ``max_groups``
    counts, each by 1 (and can make a key appear or disappear). Each key gets seed
    001's generalized decision (§6) at ``(epsilon / max_groups, delta / max_groups)``
    with ``min_count = 1`` and ``p`` just below ``delta / max_groups``: the curve that
    is 0 at count 0 and then rises by the largest step ``(ε, δ)``-DP allows,
    ``f(n + 1) = e^ε f(n) + δ``. This is the optimal partition-selection rule of
    Desfontaines, Voss, Gipson and Mandayam (PoPETs 2022), and by basic composition
    over the at most ``max_groups`` keys one unit changes, the selection is
    ``(epsilon, delta)``-DP. Because the probability at count 0 is exactly 0 (a dyadic
    coin of probability 0), a key without units is never selected, whatever the
    randomness. The decisions are exact Bernoulli trials (see
    :func:`threshold_decision`).

    References
    ----------
    Seed ``001_ac8d45847700a6b3.txt``, §6. D. Desfontaines, J. Voss, B. Gipson,
    C. Mandayam, "Differentially private partition selection", PoPETs 2022(1).

    Examples
    --------
    >>> import numpy as np
    >>> import dpframe.mechanisms as dpm
    >>> dpm.key_selection(np.array([0, 1, 5000]), epsilon=1.0, delta=1e-6).tolist()[::2]
    [False, True]
    """
    checked = check_parameters(1, epsilon, delta, "generalized", 0.5)
    if checked.delta <= 0:
        raise InvalidParameterError(
            "key selection needs delta > 0: a key held by one person must have a chance "
            "to be released, and delta bounds it. Pass e.g. delta=1e-6 (below 1 / n)."
        )
    groups = _integer(max_groups, "max_groups", "Pass the most keys one unit is counted under.")
    if groups < 1:
        raise InvalidParameterError(f"max_groups must be at least 1, got {groups}.")
    values = _counts(counts, "counts")
    share_epsilon, share_delta = checked.epsilon / groups, checked.delta / groups
    # p just below delta/k: the curve's value at count 0 then falls under its cut and is 0.
    p = share_delta * (1 - Fraction(1, 2**30))
    cell = check_parameters(1, share_epsilon, share_delta, "generalized", p)
    decided = sample_decisions(
        values,
        min_count=1,
        epsilon=cell.epsilon,
        delta=cell.delta,
        method="generalized",
        p=cell.p,
        source=bit_source(rng),
    )
    return np.asarray(decided & (values > 0))
