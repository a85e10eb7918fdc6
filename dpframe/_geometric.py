"""The geometric engine: exact two-sided geometric noise, drawn one binary digit at a time.

How a noise value is built (every step vectorized over the whole array):

* ``N = 0`` with probability ``z = (1-γ)/(1+γ)``; otherwise ``N = ±(1 + G)`` with a fair sign.
* ``G`` is one-sided geometric, ``P(G = g) ∝ γ**g``. Its binary digits are independent:
  digit ``i`` is 1 with probability ``q_i = β_i / (1 + β_i)``, ``β_i = γ**(2**i)``
  (write ``γ**g`` as the product of ``β_i`` over the set bits of ``g``). The low ``K``
  digits form the *head*; whether ``G >= 2**K`` is one more coin, the *overflow*.
* On overflow, depending on the plan: add ``2**K`` and toss the overflow coin again
  (``repeat``: ``floor(G / 2**K)`` is itself geometric, independent of the head digits);
  or stop at the cap (``cap``: bounded
  mechanisms only need ``min(|N|, reach)``); or, in constant-time mode when the head
  cannot reach the cap, land uniformly in a flat *tail* (``tail``).

Every coin is an exact Bernoulli with a dyadic probability: the drawn 64-bit words are
compared, as one long binary fraction, with the digits of the threshold. Floating point
never decides an output. Because the coins' probabilities are rounded to dyadic
numbers, the realized distribution differs slightly from the ideal one; so the plan
targets ``γ = exp(-ε'(1 - 2**-20))`` (a hair more noise than needed) and
:func:`privacy_failures` then verifies, in exact rational arithmetic, every likelihood
ratio the privacy proof needs against a rational ``L <= exp(ε')``. A plan that fails is
never used.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpframe import _validation
from dpframe._coins import Coin, bernoulli, make_coin
from dpframe._exact import exp_decimal, exp_lower_bound, precise
from dpframe._random import BitSource, bit_source, uniform_bits
from dpframe._validation import INT_LIMIT
from dpframe.errors import (
    DPFrameError,
    InvalidParameterError,
    InvalidParameterTypeError,
    NoiseOverflowError,
)

__all__ = ["geometric", "geometric_accuracy"]

# The plan aims a relative 2**-20 below the requested ε' in the exponent; the dyadic
# rounding of each coin must stay well inside that slack.
SLACK = Fraction(1, 2**20)
# Unbounded plans stop the head where P(G >= 2**K) <= 2**-16, so repeats are rare.
_REPEAT_LOG2 = 16
# Elements processed per block: keeps the working arrays inside the CPU cache.
_BLOCK = 1 << 16
# Largest ε' = ε/sensitivity accepted: beyond it the zero coin alone would need
# hundreds of words of precision, and the release would carry no privacy worth the name.
MAX_UNIT_EPSILON = Fraction(200)
# Smallest ε' accepted unbounded: below it, noise beyond ±2**62 has probability > 2**-64.
MIN_UNIT_EPSILON = Fraction(64 * 7, 10 * 2**61)  # 44.8 / 2**61 > 64 ln 2 / 2**62

OverflowRule = Literal["repeat", "cap", "tail"]


@dataclass(frozen=True)
class GeometricPlan:
    """Everything needed to draw one kind of geometric noise, fixed by public parameters only."""

    unit_epsilon: Fraction
    ratio_bound: Fraction
    zero: Coin
    head: tuple[Coin, ...]
    overflow: Coin
    on_overflow: OverflowRule
    # Largest value of C = |N| - 1 that matters (reach - 1); None when unbounded.
    cap: int | None
    tail_bits: int


def _head_bits_for(log2_target: float, eps: float, *, offset: int) -> int:
    """Smallest K >= 0 with eps * (2**K - offset) >= log2_target * ln 2."""
    needed = log2_target * math.log(2) / eps + offset
    return max(0, math.ceil(math.log2(needed)))


@functools.lru_cache(maxsize=512)
def geometric_plan(unit_epsilon: Fraction, reach: int | None, constant_time: bool) -> GeometricPlan:
    """Build and verify the plan for noise with ``ε' = unit_epsilon``.

    ``reach`` is ``hi - lo`` for bounded mechanisms (outputs are clamped, so only
    ``min(|N|, reach)`` matters), None for unbounded ones.
    """
    ratio_bound = exp_lower_bound(unit_epsilon)
    for extra_bits in (0, 32, 96):
        with precise():
            plan = _build_plan(unit_epsilon, ratio_bound, reach, constant_time, extra_bits)
        if not privacy_failures(plan, reach):
            return plan
    raise DPFrameError(
        f"internal error: no verified geometric plan for epsilon/sensitivity={unit_epsilon}, "
        f"reach={reach}; please report"
    )


def _build_plan(
    unit_epsilon: Fraction,
    ratio_bound: Fraction,
    reach: int | None,
    constant_time: bool,
    extra_bits: int,
) -> GeometricPlan:
    target = unit_epsilon * (1 - SLACK)
    eps = float(target)
    gamma = exp_decimal(-target)
    # The verified ratios have a relative slack of about eps * 2**-20; the up to ~64 rounded
    # coins that enter one ratio must together stay far below it.
    rel_bits = 30 + max(0, math.ceil(-math.log2(eps))) + extra_bits

    def beta(i: int) -> Decimal:
        return exp_decimal(-target * (1 << i))

    repeat_bits = _head_bits_for(_REPEAT_LOG2, eps, offset=0)
    tail_bits = 0
    rule: OverflowRule
    cap = None if reach is None else reach - 1
    if cap is None:
        rule, n_head = "repeat", repeat_bits
    else:
        cap_bits = cap.bit_length()
        if constant_time:
            inverse_gap = math.ceil(1 / (ratio_bound - 1))
            tail_bits = (cap + inverse_gap + 2).bit_length()
            precision_bits = _head_bits_for(64 + tail_bits, eps, offset=1)
            rule, n_head = (
                ("cap", cap_bits) if cap_bits <= precision_bits else ("tail", precision_bits)
            )
        else:
            rule, n_head = ("cap", cap_bits) if cap_bits <= repeat_bits else ("repeat", repeat_bits)

    # P(N = 0) = (1 - γ)/(1 + γ), built from its complement 2γ/(1 + γ) so it stays exact near 1.
    zero = make_coin(2 * gamma / (1 + gamma), rel_bits, complement=True)
    head = tuple(make_coin(beta(i) / (1 + beta(i)), rel_bits) for i in range(n_head))
    if rule == "tail":
        head_end = math.prod((c.probability for c in head), start=Fraction(1))
        ratio = Decimal(head_end.numerator) / Decimal(head_end.denominator) * 2**tail_bits
        overflow = make_coin(ratio / (1 + ratio), rel_bits, round_up=True)
    else:
        overflow = make_coin(beta(n_head), rel_bits, round_up=rule == "cap")
    return GeometricPlan(
        unit_epsilon=unit_epsilon,
        ratio_bound=ratio_bound,
        zero=zero,
        head=head,
        overflow=overflow,
        on_overflow=rule,
        cap=cap,
        tail_bits=tail_bits,
    )


def privacy_failures(plan: GeometricPlan, reach: int | None) -> list[str]:
    """Every privacy condition the plan violates, checked exactly (empty list: the plan is ε'-DP).

    With ``L = plan.ratio_bound <= exp(ε')`` and neighbouring values ``v, v+1``, the
    conditions below make each output at most ``L`` times likelier under one value than
    under the other; ``sensitivity`` unit steps then give ``exp(ε)``. Outputs are
    ``v + N`` (unbounded) or ``clamp(v + N, lo, hi)``; clamping turns the end points
    into tail sums, hence the conditions on ``P(N >= t)``.
    """
    bound = plan.ratio_bound
    z = plan.zero.probability
    q = [c.probability for c in plan.head]
    w = plan.overflow.probability
    rho = [p / (1 - p) for p in q]
    head_zero = math.prod((1 - p for p in q), start=Fraction(1))  # P(head = 0)
    head_end = math.prod(q, start=Fraction(1))  # P(head = 2**K - 1)
    side = (1 - z) / 2  # P(N = +1 + g) = side * P(G = g)
    failures: list[str] = []

    def need(condition: bool, what: str) -> None:
        if not condition:
            failures.append(what)

    bounded = reach is not None
    if bounded:
        # Upper end point for v = hi - 1 against v = hi: P(N >= 0) <= bound * P(N >= 1).
        need(z <= (bound - 1) * side, "end point: zero mass too large")
    interior = not bounded or (reach is not None and reach >= 2)
    if interior:
        g_zero = (1 - w) * head_zero
        need(z <= bound * side * g_zero, "P(0) <= bound P(1)")
        need(side * g_zero <= bound * z, "P(1) <= bound P(0)")
        prefix = Fraction(1)
        for t, r in enumerate(rho):
            # G = g with t trailing one-bits, then g + 1: the ratio is prod(rho[:t]) / rho[t].
            ratio = prefix / r
            need(ratio <= bound and 1 / ratio <= bound, f"head step with {t} trailing ones")
            prefix *= r
    if plan.on_overflow == "repeat":
        # Block boundary: P(G = j 2**K + 2**K - 1) against P(G = (j+1) 2**K).
        need(head_end <= bound * w * head_zero, "repeat boundary, downward")
        need(w * head_zero <= bound * head_end, "repeat boundary, upward")
    elif interior:
        # Clamped end point: P(C = c) <= (bound - 1) P(C > c) for every c <= reach - 2; the head
        # steps give it inside the head, the overflow mass must cover the rest.
        need(w * (bound - 1) >= (1 - w) * head_end, "overflow mass below the clamped tail")
    if plan.on_overflow == "tail" and reach is not None:
        n_head = len(q)
        density = w / 2**plan.tail_bits
        end = (1 - w) * head_end
        if 2**n_head <= reach - 2:
            need(end <= bound * density and density <= bound * end, "head end against tail")
        need((bound - 1) * (2**n_head + 2**plan.tail_bits + 1 - reach) >= 1, "tail too short")
    return failures


def _head(plan: GeometricPlan, source: BitSource, n: int, constant_time: bool) -> NDArray[np.int64]:
    value = np.zeros(n, dtype=np.int64)
    for i, coin in enumerate(plan.head):
        bit = bernoulli(source, coin, n, constant_time)
        np.bitwise_or(value, np.left_shift(bit, i, dtype=np.int64), out=value)
    return value


def _block(
    plan: GeometricPlan, source: BitSource, n: int, constant_time: bool
) -> NDArray[np.int64]:
    is_zero = bernoulli(source, plan.zero, n, constant_time)
    negative = uniform_bits(source, n)
    cap = plan.cap
    value = _head(plan, source, n, constant_time)  # C = |N| - 1, before the overflow rule
    if cap == 0:
        value[:] = 0
    elif plan.on_overflow == "cap" and cap is not None:
        over = bernoulli(source, plan.overflow, n, constant_time)
        value = np.where(over, cap, np.minimum(value, cap))
    elif plan.on_overflow == "tail":
        if cap is None:
            raise DPFrameError("internal error: tail plan without cap; please report")
        over = bernoulli(source, plan.overflow, n, constant_time)
        tail = (source.words(n) >> np.uint64(64 - plan.tail_bits)).astype(np.int64)
        landed = np.minimum(tail + (1 << len(plan.head)), cap)
        value = np.where(over, landed, np.minimum(value, cap))
    else:
        _repeat(plan, source, value, bernoulli(source, plan.overflow, n, False))
        if cap is not None:
            np.minimum(value, cap, out=value)
    magnitude = np.where(is_zero, 0, value + 1)
    return np.where(negative, -magnitude, magnitude)


def _repeat(
    plan: GeometricPlan, source: BitSource, value: NDArray[np.int64], over: NDArray[np.bool_]
) -> None:
    """The high part of G: while the overflow coin lands, add 2**K and toss it again.

    ``G = head + 2**K * Q`` with ``Q = floor(G / 2**K)`` geometric and independent of the
    K head digits, so the head drawn first is kept and only the coin is tossed again.
    """
    step = 1 << len(plan.head)
    pending = np.flatnonzero(over)
    while pending.size:
        value[pending] += step
        if plan.cap is not None:
            # Past the cap the result is clamped anyway: at most reach / 2**K rounds.
            pending = pending[value[pending] < plan.cap]
        elif int(value[pending].max()) > INT_LIMIT:
            raise NoiseOverflowError(
                "the geometric noise drawn exceeded 2**62 (probability below 2**-64 for the "
                "accepted parameters); nothing was released. Use a larger epsilon or bounds=."
            )
        if not pending.size:
            break
        pending = pending[bernoulli(source, plan.overflow, pending.size, False)]


def geometric_noise(
    plan: GeometricPlan, n: int, source: BitSource, constant_time: bool
) -> NDArray[np.int64]:
    """``n`` independent noise values for ``plan``, drawn in cache-sized blocks."""
    noise = np.empty(n, dtype=np.int64)
    for start in range(0, n, _BLOCK):
        stop = min(n, start + _BLOCK)
        noise[start:stop] = _block(plan, source, stop - start, constant_time)
    return noise


def _log(p: Fraction) -> float:
    return math.log(p.numerator) - math.log(p.denominator)


def realized_log_pmf(plan: GeometricPlan, noise: NDArray[np.int64]) -> NDArray[np.float64]:
    """Natural log of the exact realized probability of each noise value (unbounded plans).

    Computed from the coins' exact probabilities; float64 only in the final logarithms.
    """
    if plan.on_overflow != "repeat" or plan.cap is not None:
        raise DPFrameError("internal error: realized_log_pmf needs an unbounded plan")
    noise = np.asarray(noise, dtype=np.int64)
    n_head = len(plan.head)
    g = np.abs(noise) - 1
    safe_g = np.maximum(g, 0)
    blocks = safe_g >> n_head
    log_p = blocks * _log(plan.overflow.probability) + _log(1 - plan.overflow.probability)
    log_p = log_p.astype(np.float64)
    for i, coin in enumerate(plan.head):
        bit = (safe_g >> i) & 1
        log_p += np.where(bit == 1, _log(coin.probability), _log(1 - coin.probability))
    side = _log((1 - plan.zero.probability) / 2)
    return np.where(noise == 0, _log(plan.zero.probability), side + log_p)


# ---------------------------------------------------------------- accuracy (exact)


def _head_at_least(plan: GeometricPlan, r0: int) -> Fraction:
    """P(head >= r0) for 0 <= r0 < 2**K, exactly: scan the digits from the top."""
    at_least, equal_so_far = Fraction(0), Fraction(1)
    for i in reversed(range(len(plan.head))):
        q = plan.head[i].probability
        if (r0 >> i) & 1:
            equal_so_far *= q
        else:
            at_least += equal_so_far * q  # first digit where head exceeds r0
            equal_so_far *= 1 - q
    return at_least + equal_so_far


def magnitude_tail(plan: GeometricPlan, a: int) -> Fraction:
    """P(|N| > a) exactly, for the noise the plan draws (clamped magnitude when bounded)."""
    if a < 0:
        return Fraction(1)
    c = a  # |N| > a  <=>  N != 0 and C >= a, with C = |N| - 1
    n_head, w = len(plan.head), plan.overflow.probability
    if plan.cap is not None and c > plan.cap:
        return Fraction(0)
    if plan.cap == 0:
        at_least = Fraction(1)
    elif plan.on_overflow == "repeat":
        blocks, rest = c >> n_head, c & ((1 << n_head) - 1)
        at_least = w ** (blocks + 1) + w**blocks * (1 - w) * _head_at_least(plan, rest)
    else:
        head_part = _head_at_least(plan, c) if c < (1 << n_head) else Fraction(0)
        if plan.on_overflow == "cap" or c <= (1 << n_head):
            landed = Fraction(1)
        else:
            landed = Fraction((1 << plan.tail_bits) - (c - (1 << n_head)), 1 << plan.tail_bits)
        at_least = (1 - w) * head_part + w * landed
    return (1 - plan.zero.probability) * at_least


@functools.lru_cache(maxsize=1024)
def half_width(plan: GeometricPlan, alpha: Fraction) -> int:
    """Smallest integer a >= 0 with P(|N| > a) <= alpha, decided in exact arithmetic.

    The closed form of the ideal mechanism (at the plan's slightly wider target) gives
    a first guess; a galloping search then brackets the answer and bisection finds it,
    every comparison made on the exact realized tail.
    """
    gamma = math.exp(-float(plan.unit_epsilon * (1 - SLACK)))
    guess = math.ceil(math.log(float(alpha) * (1 + gamma) / 2) / math.log(gamma)) - 1
    guess = max(0, guess if plan.cap is None else min(guess, plan.cap + 1))

    def fits(a: int) -> bool:
        return magnitude_tail(plan, a) <= alpha

    step = 1
    if fits(guess):  # search downwards for a bracket (lo fails, hi fits)
        hi, lo = guess, guess - step
        while lo >= 0 and fits(lo):
            hi, step = lo, 2 * step
            lo = hi - step
        lo = max(lo, -1)
    else:
        lo, hi = guess, guess + step
        while not fits(hi):
            lo, step = hi, 2 * step
            hi = lo + step
    while hi - lo > 1:  # invariant: lo fails (or is -1), hi fits
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    return hi


# ---------------------------------------------------------------- rejection (seed 002, 2.4)


def truncation_factor(alpha: Decimal, n: int) -> Decimal:
    """M = max(1/L_n, 1/U_0, L_1, U_{n-1}) of seed 002 section 2.4 (n = hi - lo >= 1).

    The probability that untruncated noise leaves [lo, hi] changes between neighbouring
    counts by at most this factor, so rejecting those draws costs ln M of privacy.
    """
    a = alpha
    l_n = (a ** (2 * n + 1) + a ** (n + 1)) / (a ** (2 * n + 2) + a**n)
    u_0 = (a + a ** (n + 1)) / (1 + a ** (n + 2))
    l_1 = (a**3 + a ** (n + 1)) / (a**4 + a**n)
    u_last = (a ** (2 * n - 1) + a ** (n + 1)) / (a ** (2 * n - 2) + a ** (n + 2))
    return max(1 / l_n, 1 / u_0, l_1, u_last)


# The realized coins deviate from the ideal geometric by far less than this (relative, per
# probability); it is taken off the rejection mechanism's epsilon on top of ln M.
_REJECTION_MARGIN = Fraction(1, 2**20)
# Widest bounds the rejection variant verifies (one exact acceptance probability per value).
MAX_REJECTION_WIDTH = 10_000


def seed_rejection_epsilon(unit_epsilon: Fraction, reach: int) -> Fraction:
    """Seed 002's ε' = ε − ln M (M from α = exp(−ε) and n = reach), less a 2^-20 margin."""
    with precise():
        m = truncation_factor(exp_decimal(-unit_epsilon), reach)
        log_m = Fraction(m.ln())
    return unit_epsilon - log_m - _REJECTION_MARGIN * unit_epsilon


def _acceptance_ratio(plan: GeometricPlan, reach: int) -> Fraction:
    """Largest ratio A(v)/A(v±1) of the exact acceptance probabilities of neighbouring values.

    A(v) = P(lo <= v + N <= hi) = 1 - (P(|N| > hi - v) + P(|N| > v - lo)) / 2.
    """
    tails = [magnitude_tail(plan, a) for a in range(reach + 1)]
    accept = [1 - (tails[reach - k] + tails[k]) / 2 for k in range(reach + 1)]
    return max(max(a / b, b / a) for a, b in itertools.pairwise(accept))


def _rejection_is_private(candidate: Fraction, unit_epsilon: Fraction, reach: int) -> bool:
    """Exact check of the rejection variant's loss: pointwise ratio times acceptance ratio.

    For an output o in [lo, hi], P_v(o) / P_{v+1}(o) = [P(N = o-v) / P(N = o-v-1)] ·
    [A(v+1) / A(v)]; the plan verifies the first factor is at most its ratio bound L, and
    the second is computed exactly here. Both together must stay below exp(ε).
    """
    if candidate <= 0:
        return False
    plan = geometric_plan(candidate, reach + 1, False)
    loss_bound = plan.ratio_bound * _acceptance_ratio(plan, reach)
    return loss_bound <= exp_lower_bound(unit_epsilon)


@functools.lru_cache(maxsize=256)
def rejection_epsilon(unit_epsilon: Fraction, reach: int) -> Fraction:
    """The ε' the rejection variant draws with: seed 002's ε − ln M whenever that is ε-DP.

    Seed 002 bounds how much the probability of *rejecting* changes between neighbouring
    values (the factor M); conditioning on acceptance divides by ``1 - P(reject)``,
    whose ratio can be larger, so ε − ln M is not always enough (at ε = 0.1 and width 3
    the loss would be 0.118). dpframe therefore checks the seed's ε' exactly (see
    :func:`_rejection_is_private`) and, where it falls short, uses the largest ε' of a
    halving search that passes the same check (ε/2 always does: the acceptance ratio is
    then at most exp(ε/2)). Returns 0 when nothing passes; the caller refuses that.
    """
    seed = seed_rejection_epsilon(unit_epsilon, reach)
    if _rejection_is_private(seed, unit_epsilon, reach):
        return seed
    candidate = seed if seed > 0 else unit_epsilon / 2
    for _ in range(12):
        candidate = (
            (candidate + unit_epsilon / 2) / 2 if candidate > unit_epsilon / 2 else candidate
        )
        if _rejection_is_private(candidate, unit_epsilon, reach):
            return candidate
    half = unit_epsilon / 2 * (1 - _REJECTION_MARGIN)
    return half if _rejection_is_private(half, unit_epsilon, reach) else Fraction(0)


def usable_rejection_epsilon(unit_epsilon: Fraction, reach: int) -> Fraction:
    """:func:`rejection_epsilon` for bounds of width ``reach``, refusing what cannot be used."""
    if reach > MAX_REJECTION_WIDTH:
        raise InvalidParameterError(
            f'out_of_range="resample" verifies every acceptance probability exactly and '
            f"supports bounds up to {MAX_REJECTION_WIDTH:,} wide, got {reach:,}. Use the "
            f'default out_of_range="clamp".'
        )
    chosen = rejection_epsilon(unit_epsilon, reach)
    if chosen <= 0:
        raise InvalidParameterError(
            f'out_of_range="resample" leaves no privacy budget for the noise: no epsilon\' > 0 '
            f"passes the exact check for bounds of width {reach} at epsilon/sensitivity = "
            f'{float(unit_epsilon):g}. Use out_of_range="clamp" (the truncated mechanism) or '
            f"a larger epsilon."
        )
    return chosen


def rejection_noisy(
    values: NDArray[np.int64], lo: int, hi: int, plan: GeometricPlan, source: BitSource
) -> NDArray[np.int64]:
    """Redraw the noise of every value whose noisy result leaves [lo, hi] until none does.

    ``plan`` must have reach ``hi - lo + 1``: a clamped magnitude beyond ``hi - lo``
    always lands outside and is rejected, so the clamping is never visible.
    """
    out = values + geometric_noise(plan, values.size, source, False)
    pending = np.flatnonzero((out < lo) | (out > hi))
    while pending.size:  # a loop over rejection rounds, on the rejected values only
        out[pending] = values[pending] + geometric_noise(plan, pending.size, source, False)
        pending = pending[(out[pending] < lo) | (out[pending] > hi)]
    return out


def sum_half_width(unit_epsilon: Fraction, k: int, alpha: float, *, absolute: bool) -> int:
    """Smallest a with P(|N_1 + ... + N_k| > a) <= alpha (or of |N_1| + ... + |N_k|).

    For margins of noisy tables, which add k independent noise values. The k-fold
    convolution is computed by FFT in float64 from the two-sided geometric evaluated a
    hair wider than the noise dpframe draws, truncated where the remaining mass is below
    1e-15; an error bar, accurate to about 1e-12 in probability.

    Noise wider than 1000 steps is bounded on a grid ``c`` times coarser: with
    ``G = c Q + R`` (``Q`` geometric with ``α^c``, ``0 <= R < c``), each term is
    ``S (1 + G)`` or 0, so the sum is within ``k c`` of ``c`` times the sum of the
    ``S Q``; the bar is that sum's bar, scaled, plus ``k c`` (conservative by about
    ``sqrt(k) / 2000`` of the bar).
    """
    if unit_epsilon < Fraction(1, 1000):
        coarse = math.ceil(1 / (1000 * unit_epsilon))  # >= 2, and unit * coarse >= 1/1000
        beta = math.exp(-float(unit_epsilon * coarse) * (1 - 2.0**-18))
        narrow = _convolved_half_width(beta, k, alpha, absolute=absolute, signed_zero=False)
        return (narrow + k) * coarse
    a = math.exp(-float(unit_epsilon) * (1 - 2.0**-18))
    return _convolved_half_width(a, k, alpha, absolute=absolute, signed_zero=True)


def _convolved_half_width(
    a: float, k: int, alpha: float, *, absolute: bool, signed_zero: bool
) -> int:
    """The (1 - alpha) bar of a sum of k independent terms, by FFT.

    Each term is a two-sided geometric with parameter ``a`` (``signed_zero=True``:
    P(0) = (1 - a)/(1 + a)), or ``S Q`` with ``Q`` one-sided geometric and ``S`` a fair
    sign (``signed_zero=False``: P(0) = 1 - a); with ``absolute``, its magnitude.
    """
    spread = math.sqrt(k * 2 * a) / (1 - a)  # standard deviation of the sum (about)
    width = math.ceil(math.log(1e-15 / (k + 1)) / math.log(a)) + 1  # one term's support
    total_width = min(k * width, math.ceil(40 * spread) + width)
    size = 1 << (2 * total_width + 2).bit_length()
    magnitudes = np.arange(width + 1, dtype=np.float64)
    if signed_zero:
        pmf_magnitude = (1 - a) / (1 + a) * np.where(magnitudes == 0, 1.0, 2.0) * a**magnitudes
    else:
        pmf_magnitude = (1 - a) * a**magnitudes
    one = np.zeros(size)
    if absolute:
        one[: width + 1] = pmf_magnitude
    else:
        one[0] = pmf_magnitude[0]
        one[1 : width + 1] = pmf_magnitude[1:] / 2
        one[-width:] = one[1 : width + 1][::-1]  # negative values wrap around the FFT ring
    pmf = np.fft.irfft(np.fft.rfft(one) ** k, n=size)
    if absolute:
        beyond = 1 - np.cumsum(pmf[: size // 2])  # P(S > x)
    else:
        centre = np.concatenate([pmf[-(size // 2) :], pmf[: size // 2]])  # s = -size/2 ..
        cdf = np.cumsum(centre)
        zero = size // 2
        x = np.arange(size // 2 - 1)
        beyond = (1 - cdf[zero + x]) + cdf[zero - x - 1]  # P(S > x) + P(S < -x)
    ok = np.flatnonzero(beyond <= alpha * (1 - 1e-9))
    return int(ok[0]) if ok.size else total_width


# ---------------------------------------------------------------- the public functions


def geometric(
    values: ArrayLike,
    *,
    epsilon: float | Fraction,
    sensitivity: float | Fraction = 1,
    bounds: tuple[int, int] | None = None,
    constant_time: bool = False,
    out_of_range: str = "clamp",
    rng: Any = None,
) -> NDArray[np.int64]:
    """Add two-sided geometric noise to integers (the discrete Laplace mechanism).

    Parameters
    ----------
    values : array_like of int
        The exact integer results to release (counts, integer sums). Any shape.
    epsilon : float or Fraction
        Privacy-loss parameter, a finite number > 0. Floats are read as the simplest
        fraction that rounds to them (``0.1`` is exactly 1/10).
    sensitivity : float or Fraction, default 1
        The most one individual can change any one of ``values`` (1 for a count).
    bounds : tuple of int, optional
        ``(lo, hi)``: the truncated geometric mechanism. Values are clamped into the
        bounds first and every output is clamped into them too, so nothing outside
        ``[lo, hi]`` is ever released. Declare them without looking at the data, for
        example ``(0, n)`` for a count over ``n`` records.
    constant_time : bool, default False
        Draw the same number of random words and do the same work for every value,
        whatever the value and whatever noise comes out (requires ``bounds``).
    out_of_range : {"clamp", "resample"}, default "clamp"
        With ``bounds``: ``"clamp"`` is the truncated geometric mechanism above.
        ``"resample"`` is seed 002's section 2.4 variant: noisy results outside
        ``[lo, hi]`` are rejected and drawn again, with the noise drawn at
        ``ε' = ε - ln M``, ``M = max(1/L_n, 1/U_0, L_1, U_{n-1})`` (``n = hi - lo``,
        computed from ``α = exp(-epsilon/sensitivity)``), whenever that ``ε'`` is
        verified to give ``epsilon``-DP; where the seed's bound falls short, a smaller
        verified ``ε'`` (see Notes). The seed found the result nearly uniform over the
        bounds. Refused when no ``ε' > 0`` passes, or for widths above 10,000.
    rng : numpy.random.Generator or seed, optional
        For teaching and tests only: makes the output reproducible, hence not private.
        The default draws from an AES-256-CTR keystream keyed by ``os.urandom``.

    Returns
    -------
    numpy.ndarray of int64
        ``values`` plus noise, with the shape of ``values``.

    Raises
    ------
    InvalidParameterError, InvalidParameterTypeError
        For an epsilon or sensitivity that is not a finite number > 0, bounds that are
        not two integers with ``lo <= hi``, non-integer values, ``constant_time``
        without bounds, or ``out_of_range="resample"`` without bounds, with
        ``constant_time`` (rejection cannot take constant time) or with ``ε' <= 0``.
    NoiseOverflowError
        When values plus noise could leave int64: values beyond ±2**62 without bounds,
        bounds beyond ±2**61, or ``epsilon / sensitivity`` below 2e-17 without bounds.

    Notes
    -----
    **Privacy.** Two data sets are neighbours when one row is added or removed; the
    caller guarantees that this changes each entry of ``values`` by at most
    ``sensitivity`` (entries computed on disjoint groups of rows, such as the cells
    of one crosstab, may all change at once only if each changes by at most
    ``sensitivity`` and each row touches one entry). The release is then
    ``epsilon``-differentially private: the noise on each entry satisfies
    ``P(N = n) <= exp(epsilon / sensitivity) * P(N = n ± 1)`` for every ``n``, checked
    exactly as stated below. With ``bounds``, the end points receive the clamped tails
    and the ratio holds for them too (clamping after noise is post-processing).

    **The distribution.** ``P(N = n) = (1 - α)/(1 + α) · α^|n|`` with
    ``α = exp(-epsilon / sensitivity)`` (seed 002, eq. 2.1; seed 003 draws it as the
    difference of two geometric draws). dpframe draws ``N = 0`` with probability
    ``(1 - α)/(1 + α)``, else ``±(1 + G)`` with a fair sign and ``G`` one-sided
    geometric, built from its binary digits, which are independent coins
    (``P(digit i = 1) = α^(2^i) / (1 + α^(2^i))``); above the top digit ``K``,
    ``floor(G / 2^K)`` is itself geometric, drawn by tossing one more coin until it
    fails. With ``bounds``, only ``min(|N|, hi - lo)`` matters, so sampling stops
    there: at most ``hi - lo`` steps, in practice about ``log2(hi - lo)`` coins
    (seed 002, section 2.3).

    **What "exact" means here.** No floating-point inverse transform decides any
    output (Mironov 2012; seed 002's footnote). Each coin compares uniformly random
    64-bit words, read as one binary fraction, with the binary digits of its
    probability, extending the comparison word by word on a tie, so each coin's
    probability is exactly a stated dyadic rational. The coin probabilities are those
    of the ideal distribution with α raised by a relative ``epsilon · 2^-20`` (a hair
    more noise), then rounded to dyadic rationals with relative error far below that
    margin. The resulting output distribution is thus exactly known, and dpframe
    verifies in exact rational arithmetic, before using it, that every likelihood
    ratio the proof above needs is at most a rational ``L <= exp(epsilon/sensitivity)``.
    So the requested epsilon is what is guaranteed and charged; nothing is added to
    it. Every integer in the support of the ideal mechanism keeps a positive
    probability, so no output is possible for one input and impossible for a
    neighbouring one. Against the ideal probabilities, each realized one differs by a
    factor at most ``exp(2^-19 · (1 + |n| · epsilon/sensitivity))`` at noise ``n``.

    **Rejection.** With ``out_of_range="resample"`` the output is ``v + N``
    conditioned on landing in ``[lo, hi]``. For an output ``o``,
    ``P_v(o) / P_{v+1}(o) = [P(N = o-v) / P(N = o-v-1)] · [A(v+1) / A(v)]`` with
    ``A(v)`` the acceptance probability. Seed 002's factor ``M`` bounds the ratio of
    the *rejection* probabilities ``1 - A(v)``, which does not always bound the
    ratio of the ``A(v)`` (at epsilon 0.1 and width 3, ``ε - ln M`` would leak 0.118).
    dpframe computes every ``A(v)`` exactly from the coins it draws and checks
    ``L · max_v A(v±1)/A(v) <= exp(epsilon)``; it uses the seed's ``ε'`` when that
    passes (for instance at epsilon 0.1 and width 30), and otherwise the largest
    ``ε'`` of a short search toward ``ε/2`` that passes.

    **Constant time.** With ``constant_time=True`` every value consumes the same,
    fixed number of random words (a function of epsilon, sensitivity and the bounds
    only), and the same sequence of numpy operations runs on arrays of the same sizes,
    whatever the values and the noise: every coin draws all the words of its
    threshold for every element, and the results are combined with branch-free
    ``np.where``. To keep that fixed count small when ``hi - lo`` is far beyond the
    noise scale, the noise past about ``64 + log2(hi - lo)`` bits of decay is
    flattened onto a uniform tail of total probability about ``2^-64`` (this adds
    noise, never removes it, and the exact verification covers it). What dpframe
    cannot make constant: the CPU's cache and the timing of numpy's own kernels,
    which are branch-free loops but are not audited as constant time.

    References
    ----------
    Seed ``002_265e5b6700395d7e.txt`` and ``000_3a7e247f2899f9f9.txt`` (Covington,
    *Geometric Mechanism Notes*, Harvard Privacy Tools); seed ``003_ce3353c9005cacf5.txt``.
    A. Ghosh, T. Roughgarden, M. Sundararajan, "Universally utility-maximizing privacy
    mechanisms", SIAM J. Comput. 41(6), 2012. I. Mironov, "On significance of the least
    significant bits for differential privacy", CCS 2012.

    Examples
    --------
    >>> import dpframe.mechanisms as dpm
    >>> noisy = dpm.geometric([18, 19, 13, 16], epsilon=1.0)
    >>> noisy.shape
    (4,)
    >>> dpm.geometric([20], epsilon=0.1, bounds=(0, 30), constant_time=True).dtype
    dtype('int64')
    """
    unit_epsilon = _validation.epsilon(epsilon) / _validation.sensitivity(sensitivity)
    if not isinstance(constant_time, bool | np.bool_):
        raise InvalidParameterTypeError(
            f"constant_time must be True or False, got {constant_time!r}."
        )
    checked_bounds = None if bounds is None else _validation.integer_bounds(bounds)
    if constant_time and checked_bounds is None:
        raise InvalidParameterError(
            "constant_time=True needs bounds=(lo, hi): an unbounded noise value has no fixed "
            "number of steps. Declare the range of possible results, e.g. bounds=(0, n)."
        )
    resample = _validation.choice(out_of_range, "out_of_range", ("clamp", "resample")) == "resample"
    if resample and (checked_bounds is None or constant_time):
        raise InvalidParameterError(
            'out_of_range="resample" needs bounds=(lo, hi) and constant_time=False (rejection '
            'sampling takes a random number of rounds). Use the default out_of_range="clamp".'
        )
    array = _validation.integer_array(values)
    if unit_epsilon > MAX_UNIT_EPSILON:
        raise InvalidParameterError(
            f"epsilon / sensitivity = {float(unit_epsilon):g} is above "
            f"{MAX_UNIT_EPSILON}; such a release has no meaningful privacy. "
            f"Use a smaller epsilon (typical values are 0.01 to 10)."
        )
    if checked_bounds is None:
        _validation.check_unbounded_range(array)
        if unit_epsilon < MIN_UNIT_EPSILON:
            raise NoiseOverflowError(
                f"epsilon / sensitivity = {float(unit_epsilon):g} makes noise beyond ±2**62 "
                f"too likely for int64. Use a larger epsilon, or pass bounds=(lo, hi)."
            )
        plan = geometric_plan(unit_epsilon, None, False)
    else:
        lo, hi = checked_bounds
        if resample and hi > lo:
            rejection_epsilon = usable_rejection_epsilon(unit_epsilon, hi - lo)
            plan = geometric_plan(rejection_epsilon, hi - lo + 1, False)
        else:
            plan = geometric_plan(unit_epsilon, hi - lo, bool(constant_time))
    source = bit_source(rng)
    flat = array.reshape(-1)
    if checked_bounds is None:
        noisy = flat + geometric_noise(plan, flat.size, source, False)
    elif hi == lo:
        noisy = np.full(flat.size, lo, dtype=np.int64)
    elif resample:
        noisy = rejection_noisy(np.clip(flat, lo, hi), lo, hi, plan, source)
    else:
        noise = geometric_noise(plan, flat.size, source, bool(constant_time))
        noisy = np.clip(flat, lo, hi)  # clamp the values, add the noise, clamp the result
        noisy += noise
        np.clip(noisy, lo, hi, out=noisy)
    return noisy.reshape(array.shape)


def geometric_accuracy(
    *,
    epsilon: float | Fraction,
    sensitivity: float | Fraction = 1,
    alpha: float = 0.05,
    bounds: tuple[int, int] | None = None,
    constant_time: bool = False,
    terms: int = 1,
    absolute: bool = False,
) -> int:
    """The error bar of :func:`geometric`: ``|noise| <= a`` with probability ``>= 1 - alpha``.

    Parameters
    ----------
    epsilon, sensitivity : float or Fraction
        As for :func:`geometric`.
    alpha : float, default 0.05
        The probability that the error exceeds the half-width (0.05 gives a 95% bar).
    bounds : tuple of int, optional
        As for :func:`geometric` (``out_of_range="clamp"``).
    constant_time : bool, default False
        As for :func:`geometric`.
    terms : int, default 1
        The bar of a sum of ``terms`` independent noise values (unbounded only), such
        as the margin of a noisy table, which adds the noise of its cells.
    absolute : bool, default False
        With ``terms``: bound the sum of the magnitudes ``|N_1| + ... + |N_k|``
        instead, which bounds the error of a sum of cells after post-processing that
        moves each cell towards its true value (such as setting negatives to 0).

    Returns
    -------
    int
        The smallest integer ``a >= 0`` with ``P(|output - clamp(value)| > a) <= alpha``
        for every true value (with bounds, the error is at most ``hi - lo``).

    Notes
    -----
    Computed exactly, not approximated: ``P(|N| > a)`` is evaluated in rational
    arithmetic from the very coins :func:`geometric` draws (so it accounts for the
    realized distribution, not only the ideal one), and ``a`` is found by bisection.
    For the ideal mechanism, ``P(|N| > a) = 2 α^(a+1) / (1 + α)``. Clamping into
    bounds can only shrink the error, so the bar holds for every true value. The
    accuracy depends only on public parameters and spends no privacy budget.

    With ``terms = k > 1`` the bar of the sum of ``k`` noise values comes from their
    ``k``-fold convolution, computed by FFT in float64 from the two-sided geometric a
    hair wider than the noise drawn, truncated where the remaining mass is below
    1e-15: accurate to about 1e-12 in probability, not exact.

    References
    ----------
    Seed ``002_265e5b6700395d7e.txt`` (eq. 2.1, section 2.3).

    Examples
    --------
    >>> from dpframe.mechanisms import geometric_accuracy
    >>> geometric_accuracy(epsilon=1.0)
    3
    >>> geometric_accuracy(epsilon=0.01, bounds=(0, 30))
    30
    """
    unit_epsilon = _validation.epsilon(epsilon) / _validation.sensitivity(sensitivity)
    level = Fraction(_validation.probability(alpha, "alpha"))
    n_terms = _validation.positive_int(terms, "terms")
    if not isinstance(absolute, bool | np.bool_):
        raise InvalidParameterTypeError(f"absolute must be True or False, got {absolute!r}.")
    if n_terms > 1 and (bounds is not None or constant_time):
        raise InvalidParameterError(
            "terms > 1 bounds a sum of unbounded noise values; drop bounds= and constant_time=."
        )
    reach = None
    if constant_time and bounds is None:
        raise InvalidParameterError("constant_time=True needs bounds=(lo, hi), as in geometric().")
    if bounds is not None:
        lo, hi = _validation.integer_bounds(bounds)
        if hi == lo:
            return 0
        reach = hi - lo
    if unit_epsilon > MAX_UNIT_EPSILON:
        raise InvalidParameterError(f"epsilon / sensitivity must be at most {MAX_UNIT_EPSILON}.")
    if reach is None and unit_epsilon < MIN_UNIT_EPSILON:
        raise NoiseOverflowError("epsilon / sensitivity is too small for unbounded noise.")
    if n_terms > 1 or absolute:
        return sum_half_width(unit_epsilon, n_terms, float(level), absolute=bool(absolute))
    plan = geometric_plan(unit_epsilon, reach, bool(constant_time) and reach is not None)
    return half_width(plan, level)
