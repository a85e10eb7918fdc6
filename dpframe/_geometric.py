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

Every coin is an exact Bernoulli with a dyadic probability. Floating point never
decides an output. Because the coins' probabilities are rounded to dyadic numbers, the
realized distribution differs slightly from the ideal one; so the plan targets
``γ = exp(-ε'(1 - 2**-20))`` (a hair more noise than needed) and
:func:`privacy_failures` then verifies, in exact rational arithmetic, every likelihood
ratio the privacy proof needs against a rational ``L <= exp(ε')``. A plan that fails is
never used.

How the coins are drawn (near the randomness floor, issue 17): by default, the joint
distribution of the zero coin, the sign, the first 8 head digits (and the overflow coin
when the head is that short) is a finite distribution with dyadic probabilities, drawn
exactly by the Knuth–Yao method from 16-bit digits (:class:`~dpframe._coins.DyadicSampler`:
one 16-bit draw decides about 99% of the values); further digits come 11 at a time from
more such tables. At epsilon 1 that is a quarter of a 64-bit word per value. In
constant-time mode the coins go by groups of four, each group drawn jointly by inversion
from one 16-bit digit per value through a lookup table, and the rare digits that
straddle two outcomes are resolved from pools of fixed size
(:func:`~dpframe._coins.packed_bernoulli_pooled`). Either way the realized distribution
is exactly the plan's, the one verified.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpframe import _validation
from dpframe._coins import (
    Coin,
    DyadicSampler,
    lazy_bernoulli,
    make_coin,
    packed_bernoulli_pooled,
    random_uint16,
    random_uint32,
)
from dpframe._exact import exp_decimal, exp_lower_bound, precise, show, simplest_rational
from dpframe._random import BitSource, bit_source, uniform_bits
from dpframe._validation import INT_LIMIT
from dpframe.errors import (
    DPFrameError,
    InvalidParameterError,
    InvalidParameterTypeError,
    NoiseOverflowError,
)

__all__ = ["geometric", "geometric_accuracy", "geometric_rejection_epsilon"]

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
# Smallest ε' accepted with bounds: coins for smaller ones would need more than the
# 120 digits of dpframe's decimal arithmetic (and the noise is uniform over int64 anyway).
MIN_BOUNDED_UNIT_EPSILON = Fraction(1, 2**128)
# Smallest alpha of the error bars (the exact tail search handles any; the bar grows
# like ln(1/alpha) / epsilon), and of the FFT-based bars of sums (accurate to ~1e-12).
MIN_ALPHA = Fraction(1, 10**300)
MIN_SUM_ALPHA = 1e-9
# Most terms in a bar of a sum of noise values.
MAX_TERMS = 2**40

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


_MAX_PACKED_COINS = 63  # what the constant-time sampler packs in one 64-bit word


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

    if constant_time and n_head + 2 > _MAX_PACKED_COINS:  # zero and overflow coins too
        raise InvalidParameterError(
            f"constant_time=True packs one coin per bit of the bounds' width, at most "
            f"{_MAX_PACKED_COINS - 2}: bounds {cap + 1 if cap is not None else 'this'} wide "
            f"at epsilon / sensitivity = {eps:.3g} need {n_head}. Use bounds less than "
            f"2**61 apart, a larger epsilon, or constant_time=False."
        )
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


# ---------------------------------------------------------------- sampling

# Head digits per Knuth–Yao table: the first table also holds N = 0 and the sign, so it
# has at most 2 * 2**9 + 1 outcomes and its level-1 draw decides all but about 1%; the
# next tables hold 11 digits each (at most 2**12 outcomes with the overflow coin).
_CHUNK_DIGITS = 8
_MORE_DIGITS = 11


@dataclass(frozen=True)
class _Chunk:
    """One Knuth–Yao table over some head digits (and maybe the zero, sign, overflow coins)."""

    sampler: DyadicSampler
    offset: int  # position of its lowest digit in G
    overflow: bool  # whether it carries the overflow coin
    sparse: bool  # whether its value is 0 at least 90% of the time
    reaches_cap: bool  # whether the noise can exceed the cap (then it is clipped)


def _value_dtype(largest: int) -> type[np.signedinteger]:
    if largest < 2**15:
        return np.int16
    return np.int32 if largest < 2**31 else np.int64


def _digit_products(coins: Sequence[Coin]) -> list[int]:
    """Numerators (over 2**(64 * total words)) of every pattern of the coins' outcomes.

    Index ``h``: bit ``j`` of ``h`` is the outcome of ``coins[j]``.
    """
    products = [1]
    for coin in coins:
        one = 1 << (64 * coin.nwords)
        products = [p * (one - coin.numerator) for p in products] + [
            p * coin.numerator for p in products
        ]
    return products


def _build_chunks(plan: GeometricPlan) -> tuple[_Chunk, ...]:
    """The Knuth–Yao tables that draw ``plan``'s noise (see :func:`_table_block`).

    Outcome values: the first table gives ``0`` (for ``N = 0``) or ``±(1 + low digits)``,
    the others their digits' part of ``G``, shifted into place. The overflow coin rides in
    the last table and adds ``2**K`` when it lands (under ``cap`` that overshoots the
    cap and is clipped back to it; under ``repeat`` and ``tail`` the outcome is flagged
    special and finished by :func:`_finish_overflow`).
    """
    n_head = len(plan.head)
    starts = [0, *range(_CHUNK_DIGITS, n_head, _MORE_DIGITS)]
    special_overflow = plan.on_overflow in ("repeat", "tail")
    chunks = []
    for number, start in enumerate(starts):
        stop = starts[number + 1] if number + 1 < len(starts) else n_head
        digits = plan.head[start:stop]
        last = number == len(starts) - 1
        coins = list(digits) + ([plan.overflow] if last else [])
        products = _digit_products(coins)
        bits = sum(64 * c.nwords for c in coins)
        span = 1 << len(digits)
        patterns = np.arange(len(products), dtype=np.int64)
        value = ((patterns & (span - 1)) << start) + (patterns >> len(digits)) * (1 << n_head)
        special = (patterns >= span) & special_overflow if last else np.zeros(span, dtype=np.bool_)
        if number == 0:
            zero = plan.zero
            zero_bits = 64 * zero.nwords
            scale = (1 << zero_bits) - zero.numerator
            numerators = [zero.numerator << (bits + 1)] + [scale * p for p in products] * 2
            bits += zero_bits + 1  # the fair sign halves every nonzero outcome
            value = np.concatenate([[0], value + 1, -(value + 1)])
            special = np.concatenate([[False], special, special])
        else:
            numerators = products
        values = value.astype(_value_dtype(int(np.abs(value).max())))
        zero_mass = sum(a for a, v in zip(numerators, values.tolist(), strict=True) if v == 0)
        sparse = 10 * zero_mass >= 9 << bits
        reaches = plan.cap is not None and (1 << (n_head + 1)) > plan.cap
        sampler = DyadicSampler(numerators, bits, values, special)
        chunks.append(_Chunk(sampler, start, last, sparse, reaches))
    return tuple(chunks)


def _chunks_for(plan: GeometricPlan) -> tuple[_Chunk, ...]:
    """The plan's tables, built on first use and kept on the (frozen) plan itself."""
    chunks: tuple[_Chunk, ...] | None = plan.__dict__.get("_chunks")
    if chunks is None:
        chunks = _build_chunks(plan)
        plan.__dict__["_chunks"] = chunks
    return chunks


def _table_block(plan: GeometricPlan, source: BitSource, n: int) -> NDArray[np.int64]:
    """``n`` noise values from the Knuth–Yao tables: 2 bytes per table (8 or 11 head digits)."""
    first, *others = _chunks_for(plan)
    code, special = first.sampler.sample(source, n)
    noise = code.astype(np.int64)
    if others:
        sign = np.sign(code)
        high: NDArray[np.int64] | None = None
        for chunk in others:  # their values come shifted into place
            part, flagged = chunk.sampler.sample(source, n)
            if chunk.sparse:  # mostly 0: touch only the others
                moved = np.flatnonzero(part != 0)  # branch-free on booleans
                noise[moved] += sign[moved] * part[moved].astype(np.int64)
            elif high is None:
                high = part.astype(np.int64)
            else:
                high += part
            if chunk.overflow:
                special = flagged
        if high is not None:
            high *= sign
            noise += high
        special = special[noise[special] != 0]  # the overflow coin does not matter for N = 0
    if special.size:
        _finish_overflow(plan, source, noise, special)
    if plan.cap is not None and first.reaches_cap:
        np.clip(noise, -plan.cap - 1, plan.cap + 1, out=noise)
    return noise


def _finish_overflow(
    plan: GeometricPlan, source: BitSource, noise: NDArray[np.int64], landed: NDArray[np.intp]
) -> None:
    """Complete the noise where the overflow coin landed (it already added ``2**K``).

    ``repeat``: ``G = head + 2**K * Q`` with ``Q = floor(G / 2**K)`` geometric and
    independent of the head digits, so the coin is tossed again until it fails, adding
    ``2**K`` each time (past the cap the result is clipped anyway: at most reach / 2**K
    rounds). ``tail``: the magnitude lands uniformly on the flat tail.
    """
    step = 1 << len(plan.head)
    sign = np.sign(noise[landed])
    if plan.on_overflow == "tail":
        if plan.cap is None:
            raise DPFrameError("internal error: tail plan without cap; please report")
        tail = _uniform_integers(source, landed.size, plan.tail_bits)
        noise[landed] = sign * (1 + np.minimum(tail + step, plan.cap))
        return
    pending = landed
    while pending.size:
        magnitude = np.abs(noise[pending])
        if plan.cap is not None:
            keep = magnitude <= plan.cap  # C = |N| - 1 < cap
            pending, sign = pending[keep], sign[keep]
        elif int(magnitude.max()) > INT_LIMIT:
            raise NoiseOverflowError(
                "the geometric noise drawn exceeded 2**62 (probability below 2**-64 for the "
                "accepted parameters); nothing was released. Use a larger epsilon or bounds=."
            )
        if not pending.size:
            break
        again = lazy_bernoulli(source, plan.overflow, pending.size)
        pending, sign = pending[again], sign[again]
        noise[pending] += sign * step
    if plan.cap is not None:  # the last step may overshoot the cap: only min(|N|, reach) matters
        reach = plan.cap + 1
        noise[landed] = np.clip(noise[landed], -reach, reach)


def _uniform_integers(
    source: BitSource, n: int, bits: int, dtype: type[np.signedinteger] = np.int64
) -> NDArray[np.signedinteger]:
    """``n`` uniform integers in ``[0, 2**bits)``, from the narrowest words that hold them."""
    if bits <= 16:
        raw: NDArray[np.unsignedinteger] = random_uint16(source, n)
        width = 16
    elif bits <= 32:
        raw, width = random_uint32(source, n), 32
    else:
        raw, width = source.words(n), 64
    if width - bits:
        raw = raw >> raw.dtype.type(width - bits)
    return raw.astype(dtype)


# Constant-time plans with at most this many head digits decode through a lookup table.
_LOOKUP_DIGITS = 13


@dataclass(frozen=True)
class _Decoder:
    """Lookup tables from the packed coins (head digits, zero, overflow, sign) to the noise.

    ``noise[p]`` is the noise for the pattern ``p``; under the ``tail`` rule,
    ``tail_sign[p]`` is the sign where the overflow coin landed on a nonzero value
    (else 0), to add ``min(tail, cap - 2**K)`` times it.
    """

    noise: NDArray[np.signedinteger]
    tail_sign: NDArray[np.int8]


def _build_decoder(plan: GeometricPlan) -> _Decoder:
    n_head, cap = len(plan.head), plan.cap
    if cap is None:
        raise DPFrameError("internal error: constant-time decoder without cap; please report")
    pattern = np.arange(1 << (n_head + 3), dtype=np.int64)
    head = pattern & ((1 << n_head) - 1)
    nonzero = 1 - ((pattern >> n_head) & 1)
    over = (pattern >> (n_head + 1)) & 1
    sign = 1 - 2 * ((pattern >> (n_head + 2)) & 1)
    if plan.on_overflow == "tail":
        value = np.where(over == 1, 1 << n_head, np.minimum(head, cap))
    else:  # cap: 2**K > cap, so the overflow lands on the cap
        value = np.where(over == 1, cap, np.minimum(head, cap))
    noise = sign * nonzero * (value + 1)
    tail_sign = (sign * nonzero * over).astype(np.int8)
    return _Decoder(noise.astype(_value_dtype(cap + 1)), tail_sign)


def _decoder_for(plan: GeometricPlan) -> _Decoder:
    """The plan's lookup tables, built on first use and kept on the (frozen) plan itself."""
    decoder: _Decoder | None = plan.__dict__.get("_decoder")
    if decoder is None:
        decoder = _build_decoder(plan)
        plan.__dict__["_decoder"] = decoder
    return decoder


def _constant_time_block(
    plan: GeometricPlan, source: BitSource, n: int
) -> NDArray[np.signedinteger]:
    """``n`` noise values with a fixed number of words and a fixed sequence of operations.

    The head digits, the zero coin and the overflow coin are drawn together by
    :func:`dpframe._coins.packed_bernoulli` (16 bits per group of four coins and
    element, ties from fixed pools), the sign and the tail from fixed-width words, and
    they are combined through lookup tables or branch-free arithmetic on whole arrays.
    """
    n_head = len(plan.head)
    cap = plan.cap
    if cap is None or plan.on_overflow == "repeat":
        raise DPFrameError("internal error: constant-time noise needs a cap or tail plan")
    packed, pooled = packed_bernoulli_pooled(source, [*plan.head, plan.zero, plan.overflow], n)
    negative = uniform_bits(source, n).view(np.uint8)
    tail = plan.on_overflow == "tail"
    if n_head <= _LOOKUP_DIGITS:
        decoder = _decoder_for(plan)
        index = np.zeros(n + 1, dtype=np.uint32)  # + a scratch entry (pattern 0: no tail)
        index[:n] = packed
        index[:n] |= negative * np.uint32(1 << (n_head + 2))
        noise: NDArray[np.signedinteger] = np.take(decoder.noise, index)
        if tail:
            dtype = decoder.noise.dtype.type
            if plan.overflow.constant_time_split[0] == 0:
                # The overflow coin is below 2**-16, so it lands only where the tie pool
                # decided it: those (fixed number of) positions alone need a tail draw.
                at = np.minimum(pooled, n)
                extra = _uniform_integers(source, at.size, plan.tail_bits, dtype)
            else:
                at = np.arange(n)
                extra = _uniform_integers(source, n, plan.tail_bits, dtype)
            np.minimum(extra, cap - (1 << n_head), out=extra)
            extra *= np.take(decoder.tail_sign, np.take(index, at))
            noise[at] += extra
        return noise[:n]
    bits = packed.astype(np.int64)
    head = bits & ((1 << n_head) - 1)
    nonzero = 1 - ((bits >> n_head) & 1)
    over = (bits >> (n_head + 1)) & 1
    value = np.minimum(head, cap)  # C = |N| - 1
    if tail:
        extra = np.minimum(_uniform_integers(source, n, plan.tail_bits), cap - (1 << n_head))
        value += over * ((1 << n_head) + extra - value)
    else:
        value += over * (cap - value)
    magnitude = (value + 1) * nonzero
    signed: NDArray[np.int64] = magnitude - 2 * magnitude * negative
    return signed


def _noise_block(
    plan: GeometricPlan, source: BitSource, n: int, constant_time: bool
) -> NDArray[np.signedinteger]:
    if constant_time and plan.on_overflow != "repeat":
        return _constant_time_block(plan, source, n)
    return _table_block(plan, source, n)


def geometric_noise(
    plan: GeometricPlan, n: int, source: BitSource, constant_time: bool
) -> NDArray[np.int64]:
    """``n`` independent noise values for ``plan``, drawn in cache-sized blocks.

    The realized distribution is exactly the plan's (the one :func:`privacy_failures`
    verifies); ``constant_time`` needs a bounded plan (rule ``cap`` or ``tail``).
    """
    if n <= _BLOCK:
        return _noise_block(plan, source, n, constant_time).astype(np.int64, copy=False)
    noise = np.empty(n, dtype=np.int64)
    for start in range(0, n, _BLOCK):
        stop = min(n, start + _BLOCK)
        noise[start:stop] = _noise_block(plan, source, stop - start, constant_time)
    return noise


def _noisy(
    values: NDArray[np.int64],
    plan: GeometricPlan,
    source: BitSource,
    bounds: tuple[int, int] | None,
    constant_time: bool,
) -> NDArray[np.int64]:
    """``values`` plus noise (clamped into ``bounds`` before and after), block by block in cache."""
    out = np.empty(values.size, dtype=np.int64)
    for start in range(0, values.size, _BLOCK):
        stop = min(values.size, start + _BLOCK)
        noise = _noise_block(plan, source, stop - start, constant_time)
        target = out[start:stop]
        if bounds is None:
            np.add(values[start:stop], noise, out=target)
        else:
            np.clip(values[start:stop], bounds[0], bounds[1], out=target)
            target += noise
            np.clip(target, bounds[0], bounds[1], out=target)
    return out


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
    log_gamma = -float(plan.unit_epsilon * (1 - SLACK))  # ln γ, without rounding γ to 1
    log_alpha = math.log(alpha.numerator) - math.log(alpha.denominator)
    estimate = (log_alpha + math.log1p(math.exp(log_gamma)) - math.log(2)) / log_gamma
    guess = max(0, math.ceil(min(estimate, 2.0**62)) - 1)
    if plan.cap is not None:
        guess = min(guess, plan.cap + 1)

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


# Fixed-point precision (bits) of the acceptance check, above the coins' own precision.
_CHECK_BITS = 192
# The rejection variant is refused when a value may need more than this many rounds on
# average (its smallest acceptance probability is below the inverse): the running time
# would be unbounded in practice, and such noise is far wider than the bounds anyway.
MAX_EXPECTED_ROUNDS = 1024
# Relative tolerance of the search for the largest verified epsilon'.
REJECTION_TOLERANCE = Fraction(1, 2**10)


@dataclass(frozen=True)
class _Acceptance:
    """Acceptance probabilities ``2·A(lo + k)`` of the rejection variant, in fixed point.

    ``twice[k]`` is ``2·A(lo + k)`` times ``2**precision``, rounded down, within
    ``error`` of the exact value (for ``k = 0 .. width``).
    """

    twice: list[int]
    precision: int
    error: int


def _fixed(p: Fraction, precision: int) -> int:
    """``floor(p * 2**precision)`` for a dyadic ``p`` (exact when the precision suffices)."""
    return (p.numerator << precision) // p.denominator


def _acceptance(plan: GeometricPlan, width: int) -> _Acceptance:
    """``A(v) = 1 - (P(|N| > hi - v) + P(|N| > v - lo)) / 2`` for every ``v``, fast and rigorous.

    The tails ``P(|N| > a)`` of :func:`magnitude_tail` for all ``a <= width`` at once,
    in integer fixed point with ``precision`` bits: every coin probability is exact at
    that precision, each product is rounded down, and the accumulated rounding is
    bounded by ``error`` units (far below the margins it is compared against). Exact
    rationals would take minutes for wide bounds (their denominators grow with every
    power of the overflow coin).
    """
    coins = [plan.zero, plan.overflow, *plan.head]
    precision = 64 * max(c.nwords for c in coins) + _CHECK_BITS
    one = 1 << precision
    z = _fixed(plan.zero.probability, precision)
    w = _fixed(plan.overflow.probability, precision)
    q = [_fixed(c.probability, precision) for c in plan.head]
    n_head = len(q)
    # P(head = h) for h < span, the digits above span's bit length being 0.
    span = min(1 << n_head, width + 1)
    low = (span - 1).bit_length()
    high_zero = one
    for qi in q[low:]:
        high_zero = high_zero * (one - qi) >> precision
    pmf = [high_zero]
    for qi in q[:low]:
        pmf = [p * (one - qi) >> precision for p in pmf] + [p * qi >> precision for p in pmf]
    at_least = [one] * (span + 1)  # P(head >= r) = 1 - sum of pmf below r
    running = 0
    for r in range(1, span + 1):
        running += pmf[r - 1]
        at_least[r] = one - running
    side = one - z
    tails: list[int] = []
    if plan.on_overflow == "repeat":
        power = one  # w ** blocks
        for a in range(width + 1):
            blocks, rest = a >> n_head, a & ((1 << n_head) - 1)
            if rest == 0 and blocks:
                power = power * w >> precision
            inner = (power * w >> precision) + (
                (power * (one - w) >> precision) * at_least[rest] >> precision
            )
            tails.append(side * inner >> precision)
    else:
        for a in range(width + 1):
            if plan.cap is not None and a > plan.cap:
                tails.append(0)
                continue
            if plan.cap == 0:
                tails.append(side)
                continue
            head_part = at_least[a] if a < span else 0
            if plan.on_overflow == "cap" or a <= (1 << n_head):
                landed = one
            else:
                landed = (
                    ((1 << plan.tail_bits) - (a - (1 << n_head))) << precision >> plan.tail_bits
                )
            inner = ((one - w) * head_part >> precision) + (w * landed >> precision)
            tails.append(side * inner >> precision)
    twice = [2 * one - tails[width - k] - tails[k] for k in range(width + 1)]
    # Each product rounds down by < 1 unit; a tail goes through at most
    # n_head + span + width / 2**n_head + 8 of them.
    error = 4 * (n_head + span + (width >> n_head) + 8)
    return _Acceptance(twice, precision, error)


def _rejection_check(
    candidate: Fraction, unit_epsilon: Fraction, width: int
) -> tuple[bool, Fraction]:
    """Whether drawing at ``candidate`` and rejecting is ``unit_epsilon``-DP, and the smallest A(v).

    For an output ``o`` in ``[lo, hi]``, ``P_v(o) / P_{v+1}(o) = [P(N = o-v) / P(N = o-v-1)]
    · [A(v+1) / A(v)]``; the plan verifies that the first factor is at most its ratio
    bound ``L``, and the second is bounded here from the fixed-point acceptance
    probabilities, rounding every error against privacy. Both together must stay below
    ``exp(unit_epsilon)``.
    """
    if candidate <= 0:
        return False, Fraction(0)
    plan = geometric_plan(candidate, width + 1, False)
    accept = _acceptance(plan, width)
    allowed = exp_lower_bound(unit_epsilon) / plan.ratio_bound
    e = accept.error
    smallest = min(accept.twice) - e
    if smallest <= 0:
        return False, Fraction(0)
    num, den = allowed.numerator, allowed.denominator
    for a, b in itertools.pairwise(accept.twice):
        if (max(a, b) + e) * den > (min(a, b) - e) * num:
            return False, Fraction(smallest, 2 << accept.precision)
    return True, Fraction(smallest, 2 << accept.precision)


@functools.lru_cache(maxsize=256)
def rejection_epsilon(unit_epsilon: Fraction, width: int) -> Fraction:
    """The largest ε' (to a relative 2**-10) whose rejection variant passes the exact check.

    Seed 002 bounds how much the probability of *rejecting* changes between neighbouring
    values (the factor M); conditioning on acceptance divides by ``1 - P(reject)``,
    whose ratio can be larger, so ε − ln M is not always enough (at ε = 0.1 and width 3
    the loss would be 0.118), and often far too little (at ε = 0.1 and width 30 the
    check accepts six times as much). dpframe therefore bisects: it starts from a
    passing ε' (the seed's when it passes, else ε/2, else ε/2**k) and a failing one (ε
    itself always fails: the acceptance ratio exceeds 1) and halves the gap until it is
    below a relative 2**-10, keeping the larger passing end. Returns 0 when nothing
    passes; the caller refuses that.
    """
    seed = seed_rejection_epsilon(unit_epsilon, width)
    passing = Fraction(0)
    for candidate in (seed, unit_epsilon / 2 * (1 - _REJECTION_MARGIN)):
        if candidate > passing and _rejection_check(candidate, unit_epsilon, width)[0]:
            passing = candidate
    if passing == 0:
        candidate = unit_epsilon / 4
        for _ in range(8):
            if _rejection_check(candidate, unit_epsilon, width)[0]:
                passing = candidate
                break
            candidate /= 4
    if passing == 0:
        return Fraction(0)
    failing = unit_epsilon
    while failing - passing > passing * REJECTION_TOLERANCE:
        middle = _round_dyadic((passing + failing) / 2)
        if middle <= passing or middle >= failing:
            break
        if _rejection_check(middle, unit_epsilon, width)[0]:
            passing = middle
        else:
            failing = middle
    return passing


def _round_dyadic(x: Fraction) -> Fraction:
    """``x`` rounded down to 24 significant bits (keeps the bisection's plans simple)."""
    shift = 24 - (x.numerator.bit_length() - x.denominator.bit_length())
    if shift >= 0:
        return Fraction((x.numerator << shift) // x.denominator, 1 << shift)
    return Fraction(x.numerator // (x.denominator << -shift) << -shift)


def usable_rejection_epsilon(unit_epsilon: Fraction, width: int) -> Fraction:
    """:func:`rejection_epsilon` for bounds of this width, refusing what cannot be used."""
    if width > MAX_REJECTION_WIDTH:
        raise InvalidParameterError(
            f'out_of_range="resample" verifies every acceptance probability exactly and '
            f"supports bounds up to {MAX_REJECTION_WIDTH:,} wide, got {width:,}. Use the "
            f'default out_of_range="clamp".'
        )
    chosen = rejection_epsilon(unit_epsilon, width)
    if chosen <= 0:
        raise InvalidParameterError(
            f'out_of_range="resample" leaves no privacy budget for the noise: no epsilon\' > 0 '
            f"passes the exact check for bounds of width {width} at epsilon/sensitivity = "
            f'{show(unit_epsilon)}. Use out_of_range="clamp" (the truncated mechanism) or '
            f"a larger epsilon."
        )
    smallest = _rejection_check(chosen, unit_epsilon, width)[1]
    if smallest * MAX_EXPECTED_ROUNDS < 1:
        raise InvalidParameterError(
            f'out_of_range="resample" would redraw the noise about {show(1 / smallest)} times '
            f"per value on average (at epsilon/sensitivity = {show(unit_epsilon)} the noise is "
            f"far wider than bounds of width {width}), more than the {MAX_EXPECTED_ROUNDS} "
            f'dpframe allows. Use out_of_range="clamp" or a larger epsilon.'
        )
    return chosen


# Proposals per rejection round: after the first round, each pending value gets enough
# proposals for the round to hold about as many as the first (at most _MAX_TRIES each):
# a few rounds of full size cost less than many small ones (numpy's per-call overhead).
_MAX_TRIES = 64


def rejection_rounds(
    propose: Callable[[NDArray[np.int64]], tuple[NDArray[np.int64], NDArray[np.bool_]]],
    values: NDArray[np.int64],
    out: NDArray[np.int64],
) -> None:
    """Rejection sampling for every value: ``out[k]`` is the first accepted proposal for it.

    ``propose(v)`` returns one independent proposal per element of ``v`` and whether it
    is accepted. Each round proposes for the pending values only; once few are left,
    each gets several proposals at once (independent draws, of which the first
    accepted is kept and the rest discarded: the same distribution as proposing one at
    a time), so the tail of the loop takes a few rounds instead of dozens.
    """
    proposal, accepted = propose(values)
    out[...] = proposal
    pending = np.flatnonzero(~accepted)
    while pending.size:  # a loop over rejection rounds, on the rejected values only
        tries = min(_MAX_TRIES, max(1, values.size // (4 * pending.size)))
        if tries == 1:
            proposal, accepted = propose(values[pending])
            hit = np.flatnonzero(accepted)
            out[pending[hit]] = proposal[hit]
            pending = pending[~accepted]
            continue
        proposal, accepted = propose(np.repeat(values[pending], tries))
        hits = np.flatnonzero(accepted)  # in order: proposal k belongs to value k // tries
        owner = hits // tries
        first = np.ones(hits.size, dtype=np.bool_)
        np.not_equal(owner[1:], owner[:-1], out=first[1:])  # the first accepted of each value
        out[pending[owner[first]]] = proposal[hits[first]]
        done = np.zeros(pending.size, dtype=np.bool_)
        done[owner] = True
        pending = pending[~done]


def rejection_noisy(
    values: NDArray[np.int64], lo: int, hi: int, plan: GeometricPlan, source: BitSource
) -> NDArray[np.int64]:
    """Redraw the noise of every value whose noisy result leaves [lo, hi] until none does.

    ``plan`` must have reach ``hi - lo + 1``: a clamped magnitude beyond ``hi - lo``
    always lands outside and is rejected, so the clamping is never visible. Values are
    processed in cache-sized blocks.
    """

    def propose(v: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
        noisy = v + geometric_noise(plan, v.size, source, False)
        return noisy, (noisy >= lo) & (noisy <= hi)

    out = np.empty_like(values)
    for start in range(0, values.size, _BLOCK):
        rejection_rounds(propose, values[start : start + _BLOCK], out[start : start + _BLOCK])
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
        if _fft_size(beta, k) > _MAX_FFT:
            return _chernoff_half_width(unit_epsilon, k, alpha, absolute=absolute)
        narrow = _convolved_half_width(beta, k, alpha, absolute=absolute, signed_zero=False)
        return (narrow + k) * coarse
    a = math.exp(-float(unit_epsilon) * (1 - 2.0**-18))
    if _fft_size(a, k) > _MAX_FFT:
        return _chernoff_half_width(unit_epsilon, k, alpha, absolute=absolute)
    return _convolved_half_width(a, k, alpha, absolute=absolute, signed_zero=True)


# Largest FFT of the convolved bars (points); wider sums use the Chernoff bound.
_MAX_FFT = 1 << 22


def _fft_widths(a: float, k: int) -> tuple[float, int, int]:
    """``(spread, width, total_width)`` of the convolution of k terms with parameter a."""
    spread = math.sqrt(k * 2 * a) / (1 - a)  # standard deviation of the sum (about)
    width = math.ceil(math.log(1e-15 / (k + 1)) / math.log(a)) + 1  # one term's support
    total_width = min(k * width, math.ceil(40 * spread) + width)
    return spread, width, total_width


def _fft_size(a: float, k: int) -> int:
    return 1 << (2 * _fft_widths(a, k)[2] + 2).bit_length()


def _chernoff_half_width(unit_epsilon: Fraction, k: int, alpha: float, *, absolute: bool) -> int:
    """A bar from Chernoff's bound, for sums too wide for an FFT (conservative, never short).

    ``P(S > t) <= min_λ M(λ)**k e**(-λt)`` with ``M`` the moment generating function of
    one term (two-sided geometric ``a = exp(-ε(1 - 2**-18))``, a hair wider than the
    noise drawn: ``M(λ) = (1 - a)**2 / ((1 - a e**λ)(1 - a e**-λ))``; of ``|N|`` for
    ``absolute``), doubled for ``|S|``. The bound is within a small factor of the true
    bar for large ``k``; the smallest ``t`` meeting ``alpha`` is found by bisection.
    """
    u = float(unit_epsilon) * (1 - 2.0**-18)
    one_minus_a = -math.expm1(-u)
    a = math.exp(-u)

    def log_mgf(lam: float) -> float:
        if absolute:  # |N|: P(0) = (1-a)/(1+a), P(m) = 2 (1-a)/(1+a) a**m
            return math.log(one_minus_a / (1 + a)) + math.log1p(
                2 * math.exp(lam - u) / -math.expm1(lam - u)
            )
        return (
            2 * math.log(one_minus_a)
            - math.log(-math.expm1(lam - u))
            - math.log(-math.expm1(-lam - u))
        )

    def log_tail(t: float) -> float:  # log of the bound on P(S > t), minimized over λ
        lo, hi = 0.0, u * (1 - 1e-9)
        for _ in range(200):  # golden-section search: the exponent is convex in λ
            m1, m2 = lo + (hi - lo) * 0.382, lo + (hi - lo) * 0.618
            f1 = k * log_mgf(m1) - m1 * t
            f2 = k * log_mgf(m2) - m2 * t
            lo, hi = (lo, m2) if f1 < f2 else (m1, hi)
        lam = (lo + hi) / 2
        return min(0.0, k * log_mgf(lam) - lam * t)

    target = math.log(alpha / (1 if absolute else 2)) - 1e-9
    low, high = 0.0, 1.0
    while log_tail(high) > target:
        low, high = high, 2 * high
    while high - low > max(1.0, high * 1e-9):
        middle = (low + high) / 2
        low, high = (low, middle) if log_tail(middle) <= target else (middle, high)
    return math.ceil(high)


def _convolved_half_width(
    a: float, k: int, alpha: float, *, absolute: bool, signed_zero: bool
) -> int:
    """The (1 - alpha) bar of a sum of k independent terms, by FFT.

    Each term is a two-sided geometric with parameter ``a`` (``signed_zero=True``:
    P(0) = (1 - a)/(1 + a)), or ``S Q`` with ``Q`` one-sided geometric and ``S`` a fair
    sign (``signed_zero=False``: P(0) = 1 - a); with ``absolute``, its magnitude.
    """
    _, width, total_width = _fft_widths(a, k)
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


def unit_epsilon_in_range(epsilon: Any, sensitivity: Any, *, bounded: bool) -> Fraction:
    """``epsilon / sensitivity``, validated and inside the range the geometric engine supports.

    Above :data:`MAX_UNIT_EPSILON` the noise is nil in all but name; unbounded noise
    below :data:`MIN_UNIT_EPSILON` could leave int64; bounded noise below
    :data:`MIN_BOUNDED_UNIT_EPSILON` would need coins finer than the engine's
    120-digit arithmetic verifies (and is uniform over any int64 range anyway).
    """
    unit = _validation.epsilon(epsilon) / _validation.sensitivity(sensitivity)
    if unit > MAX_UNIT_EPSILON:
        raise InvalidParameterError(
            f"epsilon / sensitivity = {show(unit)} is above {MAX_UNIT_EPSILON}; such a release "
            f"has no meaningful privacy. Use a smaller epsilon (typical values are 0.01 to 10): "
            f"epsilon / sensitivity must lie between {show(MIN_UNIT_EPSILON)} (or "
            f"{show(MIN_BOUNDED_UNIT_EPSILON)} with bounds) and {MAX_UNIT_EPSILON}."
        )
    if not bounded and unit < MIN_UNIT_EPSILON:
        raise NoiseOverflowError(
            f"epsilon / sensitivity = {show(unit)} is below {show(MIN_UNIT_EPSILON)}: noise "
            f"beyond ±2**62 would be too likely for int64. Use a larger epsilon (epsilon / "
            f"sensitivity between {show(MIN_UNIT_EPSILON)} and {MAX_UNIT_EPSILON}), or pass "
            f"bounds=(lo, hi)."
        )
    if unit < MIN_BOUNDED_UNIT_EPSILON:
        raise InvalidParameterError(
            f"epsilon / sensitivity = {show(unit)} is below {show(MIN_BOUNDED_UNIT_EPSILON)}, "
            f"the smallest the geometric engine verifies; the noise would be uniform over any "
            f"int64 range. Use epsilon / sensitivity between {show(MIN_BOUNDED_UNIT_EPSILON)} "
            f"and {MAX_UNIT_EPSILON}."
        )
    return unit


def checked_alpha(value: Any) -> Fraction:
    """A two-sided error probability in ``[MIN_ALPHA, 1)``, exactly (Fractions kept as given)."""
    _validation.probability(value, "alpha")  # type and (0, 1)
    exact = value if isinstance(value, Fraction) else simplest_rational(float(value))
    if exact < MIN_ALPHA:
        raise InvalidParameterError(
            f"alpha = {show(exact)} is below {show(MIN_ALPHA)}; pass alpha between "
            f"{show(MIN_ALPHA)} and 1 (0.05 gives a 95% error bar)."
        )
    return exact


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
        fraction that rounds to them (``0.1`` is exactly 1/10). ``epsilon /
        sensitivity`` must lie between about ``1.9e-17`` (``2.9e-39`` with ``bounds``)
        and 200.
    sensitivity : float or Fraction, default 1
        The most one individual can change any one of ``values`` (1 for a count).
    bounds : tuple of int, optional
        ``(lo, hi)``: the truncated geometric mechanism. Values are clamped into the
        bounds first and every output is clamped into them too, so nothing outside
        ``[lo, hi]`` is ever released. Declare them without looking at the data, for
        example ``(0, n)`` for a count over ``n`` records. Both ends within ±2**61.
    constant_time : bool, default False
        Draw the same number of random words and do the same work for every value,
        whatever the value and whatever noise comes out (requires ``bounds``).
    out_of_range : {"clamp", "resample"}, default "clamp"
        With ``bounds``: ``"clamp"`` is the truncated geometric mechanism above.
        ``"resample"`` is seed 002's section 2.4 variant: noisy results outside
        ``[lo, hi]`` are rejected and drawn again, with the noise drawn at the
        largest ``ε'`` that dpframe verifies to give ``epsilon``-DP (see Notes and
        :func:`geometric_rejection_epsilon`, which returns it). Refused when no
        ``ε' > 0`` passes, when a value could need more than 1024 rounds on average,
        or for widths above 10,000.
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
        For an epsilon or sensitivity that is not a finite number > 0, an ``epsilon /
        sensitivity`` outside the range above, bounds that are not two integers with
        ``lo <= hi``, non-integer values, ``constant_time`` without bounds, or
        ``out_of_range="resample"`` without bounds, with ``constant_time`` (rejection
        cannot take constant time), or with parameters it refuses (above).
    NoiseOverflowError
        When values plus noise could leave int64: values beyond ±2**62 without bounds,
        bounds beyond ±2**61, or ``epsilon / sensitivity`` below ``1.9e-17`` without
        bounds.

    See Also
    --------
    geometric_accuracy : The error bar of this noise.
    geometric_rejection_epsilon : The ``ε'`` of ``out_of_range="resample"``.

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
    output (Mironov 2012; seed 002's footnote). Every coin's probability is exactly a
    stated dyadic rational, and the joint distribution of the zero coin, the sign,
    up to eight digits and the overflow coin (a finite distribution with dyadic
    probabilities) is drawn by the Knuth–Yao method in 16-bit digits: a uniform
    16-bit number indexes a table of 65,536 outcomes, each owning as many slots as
    the first 16 binary digits of its probability; the few leftover slots read 16
    more bits, and so on, so every outcome has exactly its probability. That takes
    about two bytes of randomness per eight digits (a quarter of a 64-bit word per
    value at epsilon 1) instead of a word per coin. The coin probabilities are those
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
    dpframe computes every ``A(v)`` from the coins it draws (in fixed point, with the
    rounding bounded and counted against privacy) and checks
    ``L · max_v A(v±1)/A(v) <= exp(epsilon)``; it draws at the largest ``ε'`` that
    passes, found by bisection to a relative ``2^-10`` (at epsilon 0.1 and width 30,
    about 0.053 where the seed's ``ε - ln M`` is 0.0086: six times less noise).

    **Running time and randomness.** By default the work and the number of random
    words grow with the noise drawn (large noise takes more overflow rounds, rare
    table slots read more bits), so they reveal something about the noise, and hence
    about the value given the output. The rejection variant repeats the draw until
    it lands in the bounds, a number of rounds that depends on the value (values
    near an end are rejected more often): its running time reveals information about
    the value itself. With ``constant_time=True`` every value consumes the same,
    fixed number of random words (a function of epsilon, sensitivity, the bounds
    and the number of values only), and the same sequence of numpy operations runs on
    arrays of the same sizes, whatever the values and the noise: the coins are drawn
    in groups of four, each group's outcome by inversion of one 16-bit digit per
    element through a lookup table; the rare digits that straddle two outcomes are
    resolved from pools of fixed size indexed through running counts (every slot draws
    its words whether used or not; if more tie than the pools hold, with probability
    below 2^-80, every tie is resolved again with extra words), and the results are
    combined with branch-free arithmetic. To keep that fixed count small when ``hi - lo`` is far
    beyond the noise scale, the noise past about ``64 + log2(hi - lo)`` bits of decay
    is flattened onto a uniform tail of total probability about ``2^-64`` (this adds
    noise, never removes it, and the exact verification covers it). What dpframe
    cannot make constant: the CPU's cache and the timing of numpy's own kernels,
    which are branch-free loops but are not audited as constant time.

    References
    ----------
    Seed ``002_265e5b6700395d7e.txt`` and ``000_3a7e247f2899f9f9.txt`` (Covington,
    *Geometric Mechanism Notes*, Harvard Privacy Tools); seed ``003_ce3353c9005cacf5.txt``.
    A. Ghosh, T. Roughgarden, M. Sundararajan, "Universally utility-maximizing privacy
    mechanisms", SIAM J. Comput. 41(6), 2012. I. Mironov, "On significance of the least
    significant bits for differential privacy", CCS 2012. D. Knuth, A. Yao, "The
    complexity of nonuniform random number generation", 1976. J. Jin et al., "Are we
    there yet? Timing and floating-point attacks on differential privacy systems",
    IEEE S&P 2022.

    Examples
    --------
    >>> import dpframe.mechanisms as dpm
    >>> noisy = dpm.geometric([18, 19, 13, 16], epsilon=1.0)
    >>> noisy.shape
    (4,)
    >>> dpm.geometric([20], epsilon=0.1, bounds=(0, 30), constant_time=True).dtype
    dtype('int64')
    """
    if not isinstance(constant_time, bool | np.bool_):
        raise InvalidParameterTypeError(
            f"constant_time must be True or False, got {constant_time!r}."
        )
    checked_bounds = None if bounds is None else _validation.integer_bounds(bounds)
    unit_epsilon = unit_epsilon_in_range(epsilon, sensitivity, bounded=checked_bounds is not None)
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
    if checked_bounds is None:
        _validation.check_unbounded_range(array)
        plan = geometric_plan(unit_epsilon, None, False)
    else:
        lo, hi = checked_bounds
        if hi == lo:  # nothing to hide: every output is lo
            bit_source(rng)  # still refuse a bad rng
            return np.full(array.shape, lo, dtype=np.int64)
        if resample:
            rejection_epsilon = usable_rejection_epsilon(unit_epsilon, hi - lo)
            plan = geometric_plan(rejection_epsilon, hi - lo + 1, False)
        else:
            plan = geometric_plan(unit_epsilon, hi - lo, bool(constant_time))
    source = bit_source(rng)
    flat = array.reshape(-1)
    if resample:
        noisy = rejection_noisy(np.clip(flat, lo, hi), lo, hi, plan, source)
    else:
        noisy = _noisy(flat, plan, source, checked_bounds, bool(constant_time))
    return noisy.reshape(array.shape)


def geometric_rejection_epsilon(
    *,
    epsilon: float | Fraction,
    sensitivity: float | Fraction = 1,
    bounds: tuple[int, int],
    rule: str = "largest",
) -> Fraction:
    """The ``ε'`` at which ``geometric(..., out_of_range="resample")`` draws its noise.

    Parameters
    ----------
    epsilon, sensitivity : float or Fraction
        As for :func:`geometric`.
    bounds : tuple of int
        As for :func:`geometric`, with ``hi - lo`` between 1 and 10,000.
    rule : {"largest", "seed"}, default "largest"
        ``"largest"``: the ``ε'`` :func:`geometric` uses, the largest that dpframe's
        exact check accepts (to a relative ``2^-10``). ``"seed"``: seed 002's
        ``ε' = ε - ln M`` (section 2.4), for teaching: it is **not** always private
        (it bounds the rejection probabilities, not the acceptance ones) and
        :func:`geometric` never uses it unchecked.

    Returns
    -------
    fractions.Fraction
        ``ε'`` on the scale of ``epsilon``: the noise is drawn with
        ``P(N = n) ∝ exp(-(ε' / sensitivity) |n|)``, then conditioned on
        ``lo <= v + N <= hi``. Record it beside a release to say how much noise it
        carries. For ``"seed"`` it can be ``<= 0`` (no budget left for the noise).

    Raises
    ------
    InvalidParameterError, InvalidParameterTypeError
        For parameters :func:`geometric` refuses with ``out_of_range="resample"``
        (``"largest"`` only), bounds of width 0 or above 10,000, or an unknown rule.

    See Also
    --------
    geometric : The mechanism that draws at this ``ε'``.

    Notes
    -----
    The output of the rejection variant for a value ``v`` is ``o`` with probability
    ``P(N = o - v) / A(v)``, ``A(v)`` the probability of landing in the bounds, so
    the privacy loss between neighbours is at most ``L · max A(v ± 1)/A(v)``, with
    ``L`` the plan's verified pointwise ratio. dpframe evaluates every ``A(v)`` from
    the exact coins in fixed-point arithmetic with a rigorous error bound, and
    bisects ``ε'`` between a passing value (the seed's, or ``ε/2``) and ``ε`` (which
    always fails) until the gap is below a relative ``2^-10``; the result is cached
    per ``(epsilon / sensitivity, width)``. It depends on public parameters only and
    spends no privacy budget; the first call for wide bounds takes up to a second.
    Seed 002's value ``ε - ln M`` uses ``M = max(1/L_n, 1/U_0, L_1, U_{n-1})``
    (``n = hi - lo``, ``α = exp(-epsilon/sensitivity)``), less a relative ``2^-20``.

    References
    ----------
    Seed ``002_265e5b6700395d7e.txt``, section 2.4 and Figure 2.2.

    Examples
    --------
    >>> from dpframe.mechanisms import geometric_rejection_epsilon
    >>> largest = geometric_rejection_epsilon(epsilon=0.1, bounds=(0, 30))
    >>> seed = geometric_rejection_epsilon(epsilon=0.1, bounds=(0, 30), rule="seed")
    >>> round(float(seed), 4), 0.05 < float(largest) < 0.1
    (0.0086, True)
    """
    chosen_rule = _validation.choice(rule, "rule", ("largest", "seed"))
    lo, hi = _validation.integer_bounds(bounds)
    unit_epsilon = unit_epsilon_in_range(epsilon, sensitivity, bounded=True)
    scale = _validation.sensitivity(sensitivity)
    if not 1 <= hi - lo <= MAX_REJECTION_WIDTH:
        raise InvalidParameterError(
            f"bounds must be between 1 and {MAX_REJECTION_WIDTH:,} wide for "
            f'out_of_range="resample", got a width of {hi - lo:,}.'
        )
    if chosen_rule == "seed":
        return seed_rejection_epsilon(unit_epsilon, hi - lo) * scale
    return usable_rejection_epsilon(unit_epsilon, hi - lo) * scale


def geometric_accuracy(
    *,
    epsilon: float | Fraction,
    sensitivity: float | Fraction = 1,
    alpha: float | Fraction = 0.05,
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
        The probability that the error exceeds the half-width (0.05 gives a 95% bar),
        at least ``1e-300`` (``1e-9`` with ``terms > 1`` or ``absolute``).
    bounds : tuple of int, optional
        As for :func:`geometric` (``out_of_range="clamp"``).
    constant_time : bool, default False
        As for :func:`geometric`.
    terms : int, default 1
        The bar of a sum of ``terms`` independent noise values (unbounded only), such
        as the margin of a noisy table, which adds the noise of its cells. At most
        ``2**40``.
    absolute : bool, default False
        With ``terms``: bound the sum of the magnitudes ``|N_1| + ... + |N_k|``
        instead, which bounds the error of a sum of cells after post-processing that
        moves each cell towards its true value (such as setting negatives to 0).

    Returns
    -------
    int
        The smallest integer ``a >= 0`` with ``P(|output - clamp(value)| > a) <= alpha``
        for every true value (with bounds, the error is at most ``hi - lo``).

    Raises
    ------
    InvalidParameterError, InvalidParameterTypeError
        For parameters :func:`geometric` refuses, an ``alpha`` outside the range above,
        ``terms`` that is not a positive integer up to ``2**40``, or ``terms > 1`` with
        bounds.

    See Also
    --------
    geometric : The mechanism.

    Notes
    -----
    Computed exactly, not approximated: ``P(|N| > a)`` is evaluated in rational
    arithmetic from the very coins :func:`geometric` draws (so it accounts for the
    realized distribution, not only the ideal one), and ``a`` is found by bisection.
    For the ideal mechanism, ``P(|N| > a) = 2 α^(a+1) / (1 + α)``. Clamping into
    bounds can only shrink the error, so the bar holds for every true value. The
    accuracy depends only on public parameters and spends no privacy budget; its
    running time depends on them only.

    With ``terms = k > 1`` the bar of the sum of ``k`` noise values comes from their
    ``k``-fold convolution, computed by FFT in float64 from the two-sided geometric a
    hair wider than the noise drawn, truncated where the remaining mass is below
    1e-15: accurate to about 1e-12 in probability, not exact. When the sum is too
    wide for an FFT of ``2^22`` points, it is computed on a coarser grid, which makes
    the bar conservative (larger) by at most ``k`` grid steps.

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
    if not isinstance(absolute, bool | np.bool_):
        raise InvalidParameterTypeError(f"absolute must be True or False, got {absolute!r}.")
    if not isinstance(constant_time, bool | np.bool_):
        raise InvalidParameterTypeError(
            f"constant_time must be True or False, got {constant_time!r}."
        )
    checked_bounds = None if bounds is None else _validation.integer_bounds(bounds)
    unit_epsilon = unit_epsilon_in_range(epsilon, sensitivity, bounded=checked_bounds is not None)
    level = checked_alpha(alpha)
    n_terms = _validation.positive_int(terms, "terms")
    if n_terms > MAX_TERMS:
        raise InvalidParameterError(f"terms must be at most 2**40, got {n_terms:,}.")
    if n_terms > 1 and (checked_bounds is not None or constant_time):
        raise InvalidParameterError(
            "terms > 1 bounds a sum of unbounded noise values; drop bounds= and constant_time=."
        )
    if constant_time and checked_bounds is None:
        raise InvalidParameterError("constant_time=True needs bounds=(lo, hi), as in geometric().")
    if (n_terms > 1 or absolute) and level < MIN_SUM_ALPHA:
        raise InvalidParameterError(
            f"alpha = {show(level)} is below {MIN_SUM_ALPHA} for a sum of noise values (the "
            f"convolution is accurate to about 1e-12); pass alpha between {MIN_SUM_ALPHA} and 1."
        )
    reach = None
    if checked_bounds is not None:
        lo, hi = checked_bounds
        if hi == lo:
            return 0
        reach = hi - lo
    if n_terms > 1 or absolute:
        return sum_half_width(unit_epsilon, n_terms, float(level), absolute=bool(absolute))
    plan = geometric_plan(unit_epsilon, reach, bool(constant_time) and reach is not None)
    return half_width(plan, level)
