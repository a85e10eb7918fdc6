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
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from dpframe._coins import Coin, bernoulli, make_coin
from dpframe._exact import exp_decimal, exp_lower_bound, precise
from dpframe._random import BitSource, uniform_bits
from dpframe._validation import INT_LIMIT
from dpframe.errors import DPFrameError, InvalidParameterError, NoiseOverflowError

__all__: list[str] = []

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
