"""The Laplace family: the snapping mechanism and the bounded-domain Laplace mechanism.

Two ways to add Laplace noise to real numbers without the floating-point porosity that
Mironov (2012) exploited, plus their accuracy half-widths:

* :func:`laplace` is Mironov's *snapping mechanism*: clamp, add Laplace noise drawn from a
  full-precision uniform, round to a power-of-two grid ``Λ``, clamp again. Its noise scale
  ``λ`` carries a small term for floating-point error, sized by this module's own error
  analysis (see ``_snapping``).
* :func:`bounded_laplace` is the bounded-domain Laplace mechanism of Holohan et al.
  (2019), which resamples until the output lies in the domain. dpframe runs it entirely
  on a fine power-of-two grid with exact integer noise, so every decision is an exact
  coin and the privacy condition is checked on the exact discrete normalization.

Everything is vectorized: loops run over rejection rounds, bit positions or blocks,
never over elements. Parameters are validated before any randomness is drawn.
"""

from __future__ import annotations

import functools
import math
import numbers
import sys
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpframe import _geometric, _validation
from dpframe._coins import Coin, lazy_bernoulli, random_uint16, random_uint32
from dpframe._exact import exp_decimal, precise, show, to_decimal
from dpframe._random import BitSource, bit_source
from dpframe.errors import DPFrameError, InvalidParameterError, NoiseOverflowError

__all__ = ["bounded_laplace", "bounded_laplace_accuracy", "laplace", "laplace_accuracy"]

# ---------------------------------------------------------------- constants

# Coefficient of the floating-point term in λ = (Δ + C·B)/ε. This module's analysis (see
# _snapping) bounds the loss by (Δ + 2**-45·B)/λ; C = 2**-44 keeps a factor 2 in hand and
# is 32 times Mironov's 2**-49, so his Theorem 1 bound is also below ε.
_FLOAT_TERM = Fraction(1, 2**44)
# Mironov's condition B < 2**46·λ: the grid of multiples of Λ stays far coarser than the
# float64 spacing anywhere in [-B, B].
_MAX_BOUND_OVER_SCALE = 2**46
# Smallest λ accepted: keeps λ, Λ/2 and λ·t away from subnormal numbers.
_MIN_SCALE = 2.0**-960
# A rational above 64·ln 2 = 44.36: noise beyond t·λ has probability exp(-t) < 2**-64.
_OVERFLOW_TAILS = Fraction(4437, 100)
_DBL_MAX = Fraction(sys.float_info.max)
_LN2 = math.log(2.0)
# Elements processed at a time: keeps the working arrays inside the CPU cache.
_BLOCK = 1 << 13
# Values per block of the snapping mechanism (few operations each: larger blocks).
_SNAP_BLOCK = 1 << 15
# Values per block of the bounded mechanism's rejection loop.
_REJECTION_BLOCK = 1 << 15
# Bits of the 64-bit word used for the uniform's exponent (a float64 holds 53 exactly).
_EXPONENT_BITS = 53
_ONE_BITS = np.uint64(0x3FF0000000000000)  # float64 exponent field of 1.0
# The first bits of the exponent's bit stream come from the low 11 bits of the mantissa
# word: the 1-based position of their first one (bit 10 first), or 0 if all are zero.
_LOW_BITS = 11
_LOW_MASK = (1 << _LOW_BITS) - 1
_LOW_POSITIONS = np.array(
    [0.0] + [float(_LOW_BITS - k.bit_length() + 1) for k in range(1, 1 << _LOW_BITS)]
)

# Bounded Laplace grid: 2**-20 of the sensitivity (or of the domain width, if narrower).
_GRID_BITS = 20
# ... but at least 2**10 grid steps across the domain.
_MIN_GRID_STEPS = 2**10
# Grid indices stay below 2**52 in magnitude, so index·g is exact in float64.
_MAX_INDEX_BITS = 52
# Noise scales beyond 2**800 grid steps are refused (float64 accuracy computations).
_MAX_SCALE_OVER_GRID = Fraction(2) ** 800
# Acceptance tables of the uniform-proposal sampler: at most 2**12 coins each.
_ACCEPT_BITS = 12
# Geometric proposal: weights beyond 2**-100 of the normalization are handled as a lump.
_FAR_LOG = 100
# Largest budget ε − ln(1 − δ) per grid step of sensitivity: keeps the unit g/b below 200
# (the geometric engine's limit) with room for the search's factor 2.
_MAX_BUDGET_PER_REACH = 99
# The scale search aims this far (relative) below the budget before the exact check.
_SEARCH_MARGIN = Fraction(1, 2**24)


def _float_at_least(x: Fraction) -> float:
    """The smallest float64 >= ``x`` (raises OverflowError beyond the float range)."""
    result = float(x)
    if Fraction(result) < x:
        result = math.nextafter(result, math.inf)
    return result


def _floor_log2(x: Fraction) -> int:
    """floor(log2(x)) for a positive rational, exactly."""
    k = x.numerator.bit_length() - x.denominator.bit_length()
    if Fraction(2) ** k > x:
        k -= 1
    return k


def _one_minus_exp_neg(x: Fraction) -> Decimal:
    """``1 - exp(-x)`` for ``x >= 0`` in high precision, without cancellation for tiny x."""
    if x < Fraction(1, 10**24):
        # Three terms of the series: the error is below x**4, far beyond 120 digits.
        d = to_decimal(x)
        return d - d * d / 2 + d * d * d / 6
    return 1 - exp_decimal(-x)


def _real_bounds(bounds: Any) -> tuple[float, float]:
    """:func:`dpframe._validation.real_bounds`, refusing ends beyond float64 (huge ints or
    Fractions), which it would pass to ``float()`` unchecked."""
    if isinstance(bounds, tuple | list) and len(bounds) == 2:
        for end in bounds:
            if isinstance(end, numbers.Rational) and abs(Fraction(end)) > _DBL_MAX:
                raise InvalidParameterError(
                    f"bounds must be finite float64 numbers (at most about 1.8e308 in "
                    f"magnitude), got an end of magnitude {show(abs(Fraction(end)))}."
                )
    return _validation.real_bounds(bounds)


# ---------------------------------------------------------------- the full-precision uniform


def _full_precision_uniform(
    source: BitSource, n: int
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.uint64]]:
    """``n`` uniforms ``U* = m·2**-e`` with full precision and ``n`` fair signs, a word each.

    Returns ``(e, m, sign)``: ``e >= 1`` an integer-valued float with
    ``P(e = k) = 2**-k`` (the position of the first one in a stream of fair bits),
    ``m = 1.b1...b52`` with 52 uniform bits, and ``sign`` a fair float64 sign bit (bit
    63, to XOR into a float). One word per value holds all three: bit 63 is the sign,
    bits 11..62 the mantissa, bits 10..0 the start of the exponent's bit stream; only
    when those 11 bits are all zero (probability 2**-11) are more words read, 53 bits
    at a time. ``U*`` is a real uniform on (0, 1) truncated to 53 significant bits:
    every double in (0, 1), and every smaller binade too, carries exactly the
    probability of the interval it truncates. ``U*`` itself is never formed, so there
    is no floor at 2**-1074.
    """
    word = source.words(n)
    sign = word & _SIGN_BIT
    low = (word & np.uint64(_LOW_MASK)).astype(np.intp)
    exponent = np.take(_LOW_POSITIONS, low)
    pending = np.flatnonzero(low == 0)  # 11 zero bits: probability 2**-11, keep reading
    offset = _LOW_BITS
    while pending.size:  # a loop over rounds, on the few undecided elements only
        more = source.words(pending.size) >> np.uint64(64 - _EXPONENT_BITS)
        exponent[pending] = offset + _first_one_position(more)
        pending = pending[more == 0]
        offset += _EXPONENT_BITS
    # Bit 63 lands on bit 52, which the exponent field of 1.0 sets anyway.
    m = ((word >> np.uint64(_LOW_BITS)) | _ONE_BITS).view(np.float64)
    return exponent, m, sign


def _first_one_position(top: NDArray[np.uint64]) -> NDArray[np.float64]:
    """1-based position of the highest set bit of 53-bit words, counted from bit 52."""
    # A float64 holds a 53-bit integer exactly; its biased exponent is 1023 + floor(log2).
    biased = top.view(np.int64).astype(np.float64).view(np.int64) >> np.int64(52)
    positions: NDArray[np.float64] = np.subtract(
        float(1023 + _EXPONENT_BITS), biased, dtype=np.float64
    )
    return positions


# ---------------------------------------------------------------- snapping: scale and checks


@dataclass(frozen=True)
class _Snapping:
    """The snapping mechanism's parameters, fixed by public inputs only."""

    scale: float  # λ
    grid: float  # Λ, the smallest power of two >= λ
    bound: Fraction  # B: [lo, hi] ⊂ [-B, B]


@functools.lru_cache(maxsize=256)
def _snapping(epsilon: Fraction, sensitivity: Fraction, lo: float, hi: float) -> _Snapping:
    """λ and Λ for the snapping mechanism, or a dpframe error when no safe λ exists.

    Why ``λ = (Δ + 2**-44·B)/ε`` is enough (η = 2**-53, λ < B < 2**46·λ, λ <= Λ < 2λ).
    ``U* = m·2**-e`` truncates a real uniform V (``U* <= V < U*(1 + 2**-52)``), so
    ``W = ±λ·(−ln V)`` is an exact Laplace(λ) draw, and ``T = −ln U* = e·ln 2 − ln m``
    is within 2η of ``−ln V``. The computed ``t = fl(fl(e·fl(ln 2)) − log(m))``, with
    numpy's log erring by at most 2 ulp on [1, 2) (2η absolute; the tests measure
    below 1 ulp), satisfies ``|t − T| <= 3ηT + 3.4η``; the product by λ adds ``ηλt``
    and the sum with x adds ``η|x + noise|``. So the computed sum z obeys
    ``|z − (x + W)| <= η|x + noise| + 4.001η|W| + 5.42ηλ``, at most ``d = 27ηB`` when
    ``|W| <= 2B + Λ``. Rounding to multiples of Λ and both clamps are exact. Hence an
    interior output o satisfies ``{x + W ∈ (o − Λ/2 + d, o + Λ/2 − d)} ⊂ {output = o}
    ⊂ {x + W ∈ [o − Λ/2 − d, o + Λ/2 + d]}`` (whatever the rule for ties), and an end
    output lies between two half-lines likewise (noise beyond 2B + Λ lands on the same
    end however it rounds). For inputs at most Δ apart, mapping the outer interval of one affinely
    onto the inner interval of the other moves no point by more than Δ + 2d, so the
    probabilities differ by at most ``exp((Δ + 2d)/λ)·(Λ + 2d)/(Λ − 2d)``. With
    ``d < 0.211λ`` (from B < 2**46·λ) this is at most
    ``exp((Δ + 8.92d)/λ) <= exp((Δ + 2**-45·B)/λ)``, half the margin dpframe takes.
    """
    bound_abs = max(Fraction(abs(lo)), Fraction(abs(hi)))
    # Mironov needs λ < B; a clamp to [lo, hi] is also a clamp to any wider [-B, B].
    bound = max(bound_abs, 2 * sensitivity / epsilon)
    exact_scale = (sensitivity + _FLOAT_TERM * bound) / epsilon
    try:
        scale = _float_at_least(exact_scale)
    except OverflowError:
        scale = math.inf
    if not math.isfinite(scale) or (_DBL_MAX - bound_abs) <= _OVERFLOW_TAILS * Fraction(scale):
        raise NoiseOverflowError(
            f"epsilon / sensitivity = {show(epsilon / sensitivity)} with bounds up to "
            f"{show(bound_abs)} gives Laplace noise that reaches the largest float64 "
            f"with probability above 2**-64. Use a larger epsilon or a smaller sensitivity."
        )
    if scale < _MIN_SCALE:
        raise InvalidParameterError(
            f"sensitivity / epsilon = {show(sensitivity / epsilon)} is below 2**-960; "
            f"the noise would be subnormal in float64. Rescale the data (e.g. to other "
            f"units) so that sensitivity / epsilon is larger."
        )
    if not Fraction(scale) < bound:
        raise InvalidParameterError(
            f"epsilon={show(epsilon)} is too small for the snapping mechanism: its "
            f"floating-point term 2**-44·B/λ cannot stay below epsilon. Use epsilon >= 1e-12."
        )
    if not bound_abs < _MAX_BOUND_OVER_SCALE * Fraction(scale):
        raise InvalidParameterError(
            f"bounds=({lo!r}, {hi!r}) reach {show(bound_abs)}, at least 2**46 times the "
            f"noise scale {scale:g}: float64 cannot hold the snapping grid that far from "
            f"zero. Shift the data towards zero first (e.g. subtract a public offset), or "
            f"use a smaller epsilon or a larger sensitivity."
        )
    mantissa, exponent = math.frexp(scale)
    grid = scale if mantissa == 0.5 else math.ldexp(1.0, exponent)
    return _Snapping(scale=scale, grid=grid, bound=bound)


def snapping_scale(
    epsilon: Fraction, sensitivity: Fraction, bounds: tuple[float, float]
) -> tuple[float, float]:
    """``(λ, Λ)`` of the snapping mechanism for validated parameters.

    ``λ = (sensitivity + 2**-44·B)/epsilon`` rounded up to a float64, with
    ``B = max(|lo|, |hi|, 2·sensitivity/epsilon)``; ``Λ`` is the smallest power of two
    ``>= λ``. Raises the same errors as :func:`laplace` for parameters it refuses.
    """
    snap = _snapping(epsilon, sensitivity, float(bounds[0]), float(bounds[1]))
    return snap.scale, snap.grid


# fl(e·fl(ln 2)) for the exponent e that the low 11 bits of a word give (0 where they are
# all zero: those few values are completed from further words).
_LOW_TERMS = _LOW_POSITIONS * _LN2
_SIGN_BIT = np.uint64(1 << 63)


class _SnapKernel:
    """The snapping mechanism on blocks of ``_SNAP_BLOCK`` values, in preallocated buffers.

    It performs the float64 operations of the plain reference computation in
    ``tests/test_laplace.py`` (``_reference_snap_noise``, ``_reference_snap_round``)
    (the same roundings, in the same order, from the same bits of the same words), so
    its outputs are bit for bit theirs; it only avoids temporaries, reads ``e·ln 2``
    from a table, and skips a clamp that cannot change a bit (see :meth:`finish`).
    """

    def __init__(self, snap: _Snapping, lo: float, hi: float, size: int) -> None:
        self.snap, self.lo, self.hi = snap, lo, hi
        self.index = np.empty(size, dtype=np.intp)
        self.mantissa = np.empty(size, dtype=np.uint64)
        self.sign = np.empty(size, dtype=np.uint64)
        self.buffer = np.empty(size, dtype=np.float64)

    def noise(self, n: int, source: BitSource) -> NDArray[np.float64]:
        """The reference noise, bit for bit: ``±λ·(e·ln 2 − ln m)`` from one word each.

        The result lives in the kernel's buffer: valid until the next call.
        """
        index, mantissa, sign = self.index[:n], self.mantissa[:n], self.sign[:n]
        word = source.words(n)
        np.bitwise_and(word, np.uint64(_LOW_MASK), out=index.view(np.uint64))
        noise = np.take(_LOW_TERMS, index, mode="clip", out=self.buffer[:n])
        pending = np.flatnonzero(index == 0)  # 11 zero bits: probability 2**-11
        if pending.size:
            exponent = np.zeros(pending.size)
            offset = _LOW_BITS
            undecided = np.arange(pending.size)
            while undecided.size:  # as in _full_precision_uniform, on the few pending only
                more = source.words(undecided.size) >> np.uint64(64 - _EXPONENT_BITS)
                exponent[undecided] = offset + _first_one_position(more)
                undecided = undecided[more == 0]
                offset += _EXPONENT_BITS
            noise[pending] = exponent * _LN2
        np.right_shift(word, np.uint64(_LOW_BITS), out=mantissa)
        np.bitwise_or(mantissa, _ONE_BITS, out=mantissa)
        log_m = mantissa.view(np.float64)
        np.log(log_m, out=log_m)
        noise -= log_m
        noise *= self.snap.scale
        np.bitwise_and(word, _SIGN_BIT, out=sign)
        bits = noise.view(np.uint64)
        np.bitwise_xor(bits, sign, out=bits)
        return noise

    def finish(
        self, values: NDArray[np.float64], noise: NDArray[np.float64], out: NDArray[np.float64]
    ) -> None:
        """``out[:] = clip(values)``, plus ``noise``, then the reference rounding's operations.

        The reference's clamp to ``[lo − Λ, hi + Λ]`` before rounding, which keeps ``z/Λ``
        below ``2**52`` so that the rounding is exact, is skipped: it changes no bit of the
        output. A ``z`` beyond that range rounds, exactly or not (or to ``±inf``), to a
        point beyond the same end, as its clamped value does, and the final clamp takes
        both to that end. The clamp of ``values`` always runs, even when they all lie in
        the bounds, so that which operations run never depends on the values.
        """
        grid, lo, hi = self.snap.grid, self.lo, self.hi
        np.clip(values, lo, hi, out=out)
        out += noise
        out *= 1.0 / grid
        np.rint(out, out=out)
        out *= grid
        np.clip(out, lo, hi, out=out)
        # -0.0 (a sum that rounded to 0 from below) would tell the sign of value + noise
        # before the rounding, finer than the grid: adding +0.0 makes every zero +0.0.
        out += 0.0


# ---------------------------------------------------------------- the snapping mechanism


def laplace(
    values: ArrayLike,
    *,
    epsilon: float,
    sensitivity: float,
    bounds: tuple[float, float],
    rng: Any = None,
) -> NDArray[np.float64]:
    """Add Laplace noise to real numbers with Mironov's snapping mechanism.

    Each value is clamped into ``bounds``, receives Laplace noise of scale ``λ``
    computed from a full-precision uniform, is rounded to the nearest multiple of
    ``Λ`` (the smallest power of two ``>= λ``, ties to an even multiple), and is clamped
    into ``bounds`` again. The output never reveals the low-order bits of the
    floating-point computation, which a textbook float Laplace leaks.

    Parameters
    ----------
    values : array_like of float
        The exact results to release (sums, means). Any shape. ``±inf`` are clamped;
        NaN is refused.
    epsilon : float
        Privacy-loss parameter, a finite number > 0 (at least about 1e-12).
    sensitivity : float
        The most one individual can change any one of ``values``.
    bounds : tuple of float
        ``(lo, hi)`` with ``lo < hi``: values are clamped into it before the noise and
        every output is clamped into it after. Declare them without looking at the data.
    rng : numpy.random.Generator or seed, optional
        For teaching and tests only: makes the output reproducible, hence not private.
        The default draws from an AES-256-CTR keystream keyed by ``os.urandom``.

    Returns
    -------
    numpy.ndarray of float64
        The released values, with the shape of ``values``. Each is ``lo``, ``hi`` or a
        multiple of ``Λ`` strictly between them (see :func:`snapping_scale`).

    Raises
    ------
    InvalidParameterError, InvalidParameterTypeError
        For an epsilon or sensitivity that is not a finite number > 0, bounds that are
        not two finite numbers with ``lo < hi``, values that are not real numbers or
        contain NaN, an epsilon below about 1e-12, a sensitivity / epsilon below
        2**-960, or bounds reaching ``2**46·λ`` away from zero (outside Mironov's
        condition; float64 cannot carry the grid there).
    NoiseOverflowError
        When the noise could reach the largest float64 with probability ``>= 2**-64``
        (seed 004's check).

    Notes
    -----
    **Privacy.** Two data sets are neighbours when one row is added or removed; the
    caller guarantees that this changes each entry of ``values`` by at most
    ``sensitivity`` (entries computed on disjoint groups of rows may all change at
    once only if each row touches one entry). The release is then
    ``epsilon``-differentially private, as follows. The mechanism is Mironov's
    snapping mechanism (2012, section 5.2)
    ``clamp_B(⌊clamp_B(f(D)) ⊕ S⊗λ⊗LN(U*)⌉_Λ)`` with ``B = max(|lo|, |hi|,
    2·sensitivity/epsilon)``; clamping into ``[lo, hi] ⊂ [-B, B]`` before and after
    is a stable transformation and post-processing of it. Mironov's Theorem 1, scaled
    to sensitivity ``Δ``, bounds its privacy loss by ``(Δ + 2^-49·B)/λ`` when
    ``λ < B < 2^46·λ``. dpframe uses ``λ = (Δ + 2^-44·B)/epsilon`` (rounded up), so
    that bound is at most epsilon, and refuses parameters outside the condition.

    The larger coefficient comes from dpframe's own analysis of what it computes,
    which differs from the paper's assumptions in two ways: numpy's ``log`` is not
    correctly rounded (below 1 ulp of error; dpframe assumes 2), and the uniform is
    never formed as a double (below). Treating every float64 operation as an
    independent rounding and comparing each output event with the exact continuous
    Laplace shows a loss of at most ``(Δ + 2^-45·B)/λ``; dpframe keeps a factor 2 on
    top. The proof is in the source of ``dpframe._laplace._snapping``.

    **The noise.** ``U* = m·2^-e``: the exponent ``e`` is the position of the first
    one in a stream of random bits (``P(e = k) = 2^-k``) and ``m`` has 52 random
    mantissa bits, as the paper prescribes, so every double in (0, 1) is drawn with
    exactly the probability of the interval of reals it stands for. dpframe computes
    ``−ln U* = e·ln 2 − ln m`` without forming ``U*``, so the noise has no floor (a
    double ``U*`` stops at 2^-1074, which would cap the noise at about 745λ and make
    far outputs impossible for one input and possible for its neighbour).

    **Truncation.** The clamping of the output to ``bounds`` is the "truncation"
    post-processing of seed 004: values beyond the domain are projected to its ends,
    so ``lo`` and ``hi`` can carry much probability. Use :func:`bounded_laplace` when
    the ends must not be favoured.

    **Accuracy.** ``|output − clamp(value)| <= λ·ln(1/α) + Λ/2`` up to a relative
    2^-48 of B, with probability at least ``1 − α``; see :func:`laplace_accuracy`.

    **Running time and randomness.** Every value consumes one random word (a second
    with probability 2^-11, when the 11 bits the exponent's bit stream starts with are
    all zero) and goes through the same sequence of numpy operations, in blocks of
    fixed size, whatever its value and its noise. The number of words therefore
    reveals essentially nothing; the time is not audited as constant (numpy's ``log``
    and float64 arithmetic make no timing promise, and subnormal intermediates are
    slower on some CPUs).

    References
    ----------
    I. Mironov, "On significance of the least significant bits for differential
    privacy", ACM CCS 2012, section 5.2 and Theorem 1. Seed
    ``004_2d340d4f6924174c.txt`` (overflow check, truncation, snapping).

    Examples
    --------
    >>> from dpframe.mechanisms import laplace
    >>> noisy = laplace([3.2, 4.8, 9.9], epsilon=1.0, sensitivity=1.0, bounds=(0.0, 10.0))
    >>> noisy.shape
    (3,)
    >>> bool(((noisy >= 0.0) & (noisy <= 10.0)).all())
    True
    """
    eps = _validation.epsilon(epsilon)
    sens = _validation.sensitivity(sensitivity)
    lo, hi = _real_bounds(bounds)
    array = _validation.real_array(values)
    snap = _snapping(eps, sens, lo, hi)
    source = bit_source(rng)
    flat = array.reshape(-1)
    out = np.empty(flat.size, dtype=np.float64)
    kernel = _SnapKernel(snap, lo, hi, min(flat.size, _SNAP_BLOCK))
    for start in range(0, flat.size, _SNAP_BLOCK):  # everything in cache, block by block
        stop = min(flat.size, start + _SNAP_BLOCK)
        kernel.finish(flat[start:stop], kernel.noise(stop - start, source), out[start:stop])
    return out.reshape(array.shape)


def laplace_accuracy(
    *,
    epsilon: float,
    sensitivity: float,
    bounds: tuple[float, float],
    alpha: float = 0.05,
) -> float:
    """Half-width ``a``: ``|laplace(v) − clamp(v)| <= a`` with probability ``>= 1 − alpha``.

    Parameters
    ----------
    epsilon, sensitivity : float or Fraction
        As for :func:`laplace`.
    bounds : tuple of float
        As for :func:`laplace`.
    alpha : float, default 0.05
        Allowed probability of a larger error, strictly between 0 and 1.

    Returns
    -------
    float
        ``min(hi − lo, λ·ln(1/alpha) + Λ/2 + 2^-48·B)``, valid for every value.

    Notes
    -----
    The exact Laplace draw ``W`` satisfies ``P(|W| > λ·ln(1/α)) = α``. Rounding to
    the grid moves the result by at most ``Λ/2``, floating point by at most
    ``27·2^-53·B`` (see :func:`laplace`), and clamping into ``bounds`` only brings
    the output closer to the clamped value. Without the snapping the half-width would
    be the closed form ``λ·ln(1/α)``; snapping adds at most ``Λ/2 < λ``. It depends
    on public parameters only, draws no randomness and spends no privacy budget.

    Examples
    --------
    >>> from dpframe.mechanisms import laplace_accuracy
    >>> a = laplace_accuracy(epsilon=1.0, sensitivity=1.0, bounds=(0.0, 100.0))
    >>> 3.0 < a < 5.1
    True
    """
    eps = _validation.epsilon(epsilon)
    sens = _validation.sensitivity(sensitivity)
    lo, hi = _real_bounds(bounds)
    level = float(_geometric.checked_alpha(alpha))
    snap = _snapping(eps, sens, lo, hi)
    # One part in 2**40 covers the rounding of the float64 arithmetic below.
    tail = snap.scale * -math.log(level) * (1 + 2.0**-40)
    slack = math.ldexp(float(snap.bound), -48)
    return min(hi - lo, tail + snap.grid / 2 + slack)


# ---------------------------------------------------------------- bounded Laplace: the plan


Sampler = Literal["geometric", "uniform"]


@dataclass(frozen=True)
class _BoundedPlan:
    """The bounded Laplace mechanism on a grid, fixed by public parameters only.

    Outputs are ``(first + j)·grid`` for integer ``j`` in ``[0, steps]``; an input at
    grid index ``v`` outputs ``j`` with probability proportional to ``w(|j − v|)``,
    where ``w`` is the realized weight of the sampler: within a factor ``exp(±kappa)``
    of ``c·exp(−unit·|n|)`` for ``|n| <= near``, with total realized and ideal mass
    beyond ``near`` below ``far`` times the smallest normalization.
    """

    grid: float  # g, a power of two
    first: int  # k_lo: the smallest grid index in [lo, hi]
    steps: int  # M: grid indices run over first .. first + M
    reach: int  # s = ceil(sensitivity / g): index distance between neighbours
    unit: Fraction  # g / b
    sampler: Sampler
    geometric: _geometric.GeometricPlan | None
    accept: tuple[_AcceptTable, ...]  # uniform sampler: acceptance coin tables
    kappa: Decimal  # bound on |ln realized weight − ln ideal weight| for |n| <= near
    far: Decimal  # mass beyond `near`, relative to the smallest normalization
    margin: Decimal  # privacy loss added to the ideal one by the realized coins

    @property
    def scale(self) -> float:
        """The Laplace scale b = g / unit."""
        return float(Fraction(self.grid) / self.unit)


def _loss_without_kappa(unit: Fraction, reach: int, steps: int) -> Decimal:
    """``t·u + ln(h(t)/h(0))``, ``t = min(s, M)``: the privacy loss of the ideal mechanism.

    For weights ``γ^|n|`` (``γ = exp(−u)``) on indices ``0..M``, an input at index ``a``
    has normalization ``h(a)/(1 − γ)`` with ``h(a) = 1 + γ − γ^(a+1) − γ^(M−a+1)``.
    Inputs ``t`` indices apart give output ratios at most ``e^(t·u)·h(a')/h(a)``, with
    equality at the output 0. ``ln h`` is concave and symmetric, so for a fixed ``t``
    the ratio is largest for ``a = 0, a' = t``, and ``t·u + ln h(t)`` increases with
    ``t``: the largest loss is at ``t = min(s, M)``. This is the discrete form of
    Holohan et al.'s ``Δ/b + ln ΔC(b)`` with ``ΔC(b) = C_(l+Δ)(b)/C_l(b)``.
    """
    t = min(reach, steps)
    with precise():
        gamma = exp_decimal(-unit)
        h0 = _one_minus_exp_neg(unit * (steps + 1))
        h_t = _one_minus_exp_neg(unit * (t + 1)) + gamma * _one_minus_exp_neg(unit * (steps - t))
        return to_decimal(unit * t) + (h_t / h0).ln()


def _ln_ratio(realized: Fraction, ideal: Decimal) -> Decimal:
    return abs((to_decimal(realized) / ideal).ln())


def _geometric_margin(
    plan: _geometric.GeometricPlan, unit: Fraction, reach: int, steps: int
) -> tuple[Decimal, Decimal, Decimal]:
    """``(margin, kappa, far)`` for the geometric proposal, from the coins' exact values.

    The realized PMF is ``p(0) = z`` and ``p(±(1 + c)) = (1 − z)/2 · (1 − w) ·
    w^(c >> K) · Π_i q_i^bit_i (1 − q_i)^(1 − bit_i)`` for ``c < M``; the ideal one has
    the same form with the values for ``γ = exp(−unit)``, i.e. ``z·γ^|n|``. Each
    factor's realized-to-ideal log ratio is bounded exactly, so

    * two noise values ``t`` apart have a ratio within ``pair`` of the ideal ``γ^±t``
      (the block counts differ by at most ``t >> K`` + 1, however large the values);
    * for ``|n| <= near`` each weight is within ``kappa`` of the ideal;
    * beyond ``near``, the realized mass (``_geometric.magnitude_tail``) and the ideal
      mass are below ``far`` times the smallest normalization ``(1 − γ^(M+1))/(1 + γ)``.

    The normalizations of two inputs then differ from the ideal ratio by at most
    ``2·kappa + ln((1 + far)/(1 − far))``; ``margin`` adds ``pair`` at ``t = min(s, M)``.
    """
    n_head = len(plan.head)
    w = plan.overflow.probability
    with precise():
        gamma = exp_decimal(-unit)
        digits = Decimal(0)
        for i, coin in enumerate(plan.head):
            beta = exp_decimal(-unit * (1 << i))
            digits += max(
                _ln_ratio(coin.probability, beta / (1 + beta)),
                _ln_ratio(1 - coin.probability, 1 / (1 + beta)),
            )
        zero = _ln_ratio(plan.zero.probability, _one_minus_exp_neg(unit) / (1 + gamma))
        side = _ln_ratio((1 - plan.zero.probability) / 2, gamma / (1 + gamma))
        not_over = _ln_ratio(1 - w, _one_minus_exp_neg(unit * (1 << n_head)))
        per_block = _ln_ratio(w, exp_decimal(-unit * (1 << n_head)))
        t = min(reach, steps)
        pair = zero + side + not_over + 2 * digits + ((t >> n_head) + 1) * per_block
        smallest = _one_minus_exp_neg(unit * (steps + 1)) / (1 + gamma)
        # Beyond `near` the ideal mass 2γ^(near+1)/(1+γ) is below 2**-100 of `smallest`.
        cut = (_FAR_LOG * Decimal(2).ln() + (4 / smallest).ln()) / to_decimal(unit)
        near = min(steps, int(cut) + 1)
        kappa = max(zero, side + not_over + digits + ((near - 1) >> n_head) * per_block)
        far = Decimal(0)
        if near < steps:
            ideal_far = 2 * exp_decimal(-unit * (near + 1)) / (1 + gamma)
            realized_far = to_decimal(_geometric.magnitude_tail(plan, near))
            far = max(ideal_far, realized_far) / (smallest - ideal_far)
        margin = pair + 2 * kappa + ((1 + far) / (1 - far)).ln()
        return margin, kappa, far


class _AcceptTable:
    """Acceptance coins ``P_k ≈ exp(−unit·k·2**shift)`` for ``k < size``, drawn lazily.

    ``P_k = floor(2**256 · D_k) / 2**256`` with ``D_k`` the 120-digit value of the
    exponential: an exact dyadic number within a relative ``2**-250`` of the ideal one
    (``D_k >= e**-2`` on the uniform sampler's distances). Drawing compares 16 random
    bits with the first 16 bits of ``P_k`` (computed in float64, and exactly wherever
    float64 could be off by one); only on a tie (probability 2**-16) are the other 240
    bits computed and compared with fresh words. So tables of thousands of coins cost
    a vectorized ``exp`` to build, not thousands of 120-digit exponentials.
    """

    def __init__(self, unit: Fraction, shift: int, size: int) -> None:
        self.unit, self.shift = unit, shift
        step = float(unit * (1 << shift))
        scaled = np.exp(-step * np.arange(size, dtype=np.float64)) * 65536.0
        prefix = np.floor(scaled)
        fraction = scaled - prefix
        # float64 is within 2**-34 of the truth here; nearer an integer, decide exactly.
        for k in np.flatnonzero((fraction < 2.0**-30) | (fraction > 1 - 2.0**-30)).tolist():
            prefix[k] = self._numerator(k) >> 240
        self.prefix = prefix.astype(np.uint32)  # 65536 for k = 0: always accepted
        if int(self.prefix.min()) < 1:
            raise DPFrameError("internal error: an acceptance coin below 2**-16; please report")
        # P_k's first 16 bits minus one: the largest 16-bit uniform that is surely below
        # P_k, in the uniform's own type (no widening in the comparisons).
        self.largest_below = (self.prefix - 1).astype(np.uint16)
        self._rests: dict[int, tuple[np.uint64, ...]] = {}

    def _numerator(self, k: int) -> int:
        """``floor(2**256 · D_k)``: ``P_k`` times ``2**256``."""
        if k == 0:
            return 1 << 256
        with precise():
            value = exp_decimal(-self.unit * (k << self.shift))
            return int((value * (Decimal(2) ** 256)).to_integral_value(rounding="ROUND_FLOOR"))

    def probability(self, k: int) -> Fraction:
        """The exact probability of coin ``k``."""
        return Fraction(self._numerator(k), 1 << 256)

    def rest(self, k: int) -> tuple[np.uint64, ...]:
        """The 240 bits of ``P_k`` after its first 16, as 4 words (see ``_coins._split``)."""
        if k not in self._rests:
            rest = (self._numerator(k) & ((1 << 240) - 1)) << 16
            self._rests[k] = tuple(np.uint64((rest >> s) & (2**64 - 1)) for s in (192, 128, 64, 0))
        return self._rests[k]

    def draw(self, source: BitSource, index: NDArray[np.int64]) -> NDArray[np.bool_]:
        """One exact draw of coin ``index[i]`` for each ``i``."""
        u = random_uint16(source, index.size)
        largest = np.take(self.largest_below, index, mode="clip")  # in range: skip the check
        accept = u <= largest
        # A tie is u equal to the prefix: u − 1 == largest. As uint16, u = 0 wraps and also
        # "ties" coin 0, whose prefix 65536 no u reaches: that one is simply accepted.
        for position in np.flatnonzero((u - np.uint16(1)) == largest).tolist():  # ~2**-16
            k = int(index[position])
            accept[position] = k == 0 or self.after_tie(source, k)
        return accept

    def after_tie(self, source: BitSource, k: int) -> bool:
        """Coin ``k`` when its first 16 random bits equal its prefix: the other 240 bits."""
        for digit in self.rest(k):
            word = source.words(1)[0]
            if word != digit:
                return bool(word < digit)
        return False  # equal on every bit: the uniform is not below P_k


# Bound on |ln P_k − ln exp(−unit·k·2**shift)| for every acceptance coin (see _AcceptTable).
_ACCEPT_KAPPA = Decimal(2) ** -250 + 2 * Decimal(10) ** -119


def _accept_tables(unit: Fraction, steps: int) -> tuple[tuple[_AcceptTable, ...], Decimal]:
    """Acceptance tables for the uniform proposal (``_ACCEPT_BITS`` bits of the distance
    each, so ``exp(−unit·d)`` is the product of one coin per table), and their κ."""
    bits = max(steps.bit_length(), 1)
    count = -(-bits // _ACCEPT_BITS)
    width = -(-bits // count)  # equal widths: smaller tables
    tables = tuple(
        _AcceptTable(unit, first, 1 << min(width, bits - first)) for first in range(0, bits, width)
    )
    return tables, _ACCEPT_KAPPA * len(tables)


def _largest_unit(target: Decimal, reach: int, steps: int) -> Fraction:
    """The largest ``unit`` (to 2**-40 relative) with ``_loss_without_kappa <= target``.

    Bisection on exact dyadic rationals: the loss grows with the unit (less noise).
    """
    upper = Fraction(target) / reach  # s·u alone reaches the target there
    upper = Fraction(2) ** (_floor_log2(upper) + 1)
    lower = upper / 2
    for _ in range(4000):
        if _loss_without_kappa(lower, reach, steps) <= target:
            break
        upper, lower = lower, lower / 2
    else:
        raise DPFrameError("internal error: bounded Laplace scale search; please report")
    while upper - lower > lower / 2**40:
        middle = (lower + upper) / 2
        if _loss_without_kappa(middle, reach, steps) <= target:
            lower = middle
        else:
            upper = middle
    return lower


def _grid_for(sensitivity: Fraction, lo: float, hi: float) -> tuple[int, int, int]:
    """``(grid exponent, first index, steps)`` of the bounded Laplace output grid."""
    width = Fraction(hi) - Fraction(lo)
    exponent = _floor_log2(min(sensitivity, width)) - _GRID_BITS
    magnitude = max(Fraction(abs(lo)), Fraction(abs(hi)))
    # |lo| / g and |hi| / g below 2**52: grid points and indices are exact in float64.
    exponent = max(exponent, _floor_log2(magnitude) + 1 - _MAX_INDEX_BITS)
    grid = Fraction(2) ** exponent
    first = math.ceil(Fraction(lo) / grid)
    steps = math.floor(Fraction(hi) / grid) - first
    if exponent < -1000:
        raise InvalidParameterError(
            f"sensitivity={show(sensitivity)} with bounds=({lo!r}, {hi!r}) needs a grid "
            f"finer than 2**-1000. Rescale the data (e.g. to other units)."
        )
    if steps < _MIN_GRID_STEPS:
        raise InvalidParameterError(
            f"bounds=({lo!r}, {hi!r}) are too narrow for their distance from zero: float64 "
            f"holds fewer than {_MIN_GRID_STEPS} grid points between them. Shift the data "
            f"towards zero first (e.g. subtract a public offset)."
        )
    return exponent, first, steps


@functools.lru_cache(maxsize=256)
def _bounded_plan(
    epsilon: Fraction, delta: Fraction, sensitivity: Fraction, lo: float, hi: float
) -> _BoundedPlan:
    """Grid, scale and sampler of the bounded Laplace mechanism, checked in high precision."""
    if sensitivity / epsilon > _DBL_MAX:
        raise NoiseOverflowError(
            f"epsilon / sensitivity = {show(epsilon / sensitivity)} gives a noise scale "
            f"beyond the float64 range. Use a larger epsilon or a smaller sensitivity."
        )
    exponent, first, steps = _grid_for(sensitivity, lo, hi)
    grid = Fraction(2) ** exponent
    reach = math.ceil(sensitivity / grid)
    if sensitivity / epsilon > _MAX_SCALE_OVER_GRID * grid:
        raise InvalidParameterError(
            f"sensitivity / epsilon = {show(sensitivity / epsilon)} is more than 2**800 "
            f"times the grid of bounds=({lo!r}, {hi!r}); the output would be uniform. Use "
            f"a larger epsilon or a smaller sensitivity."
        )
    with precise():
        # Holohan et al.: p <= e^ε' q pointwise with ε' = ε − ln(1 − δ) gives (ε, δ)-DP.
        budget = to_decimal(epsilon) - to_decimal(1 - delta).ln()
        target = budget * (1 - to_decimal(_SEARCH_MARGIN))
    # The noise per grid step (the unit, at most 2·budget/reach) must stay within what the
    # geometric engine draws: beyond, the noise is below 1/200 of a grid step (no privacy).
    largest = _MAX_BUDGET_PER_REACH * reach
    if budget > largest:
        raise InvalidParameterError(
            f"epsilon - ln(1 - delta) = {show(Fraction(budget))} is too large for bounded_laplace "
            f"with sensitivity={show(sensitivity)} and bounds=({lo!r}, {hi!r}): the noise would "
            f"be below 1/200 of the output grid, so the release would be exact. Use epsilon "
            f"- ln(1 - delta) at most {show(largest)} (typical epsilon: 0.01 to 10)."
        )
    for _ in range(3):
        unit = _largest_unit(target, reach, steps)
        if (steps + 1) * unit <= 2:
            # Noise wider than the domain: propose uniformly, accept with exp(−u|j − v|).
            sampler: Sampler = "uniform"
            accept, kappa = _accept_tables(unit, steps)
            plan, far = None, Decimal(0)
            # Weights within exp(±κ) of γ^|n|: 2κ on the ratio of two, 2κ on the sums.
            margin = 4 * kappa
        else:
            # Noise narrower than the domain: propose v + N with N two-sided geometric.
            sampler, accept = "geometric", ()
            # The engine aims at unit·(1 − slack): pass the unit that lands on ours.
            engine_unit = unit / (1 - _geometric.SLACK)
            plan = _geometric.geometric_plan(engine_unit, steps + 1, False)
            margin, kappa, far = _geometric_margin(plan, unit, reach, steps)
        with precise():
            loss = _loss_without_kappa(unit, reach, steps) + margin
            if loss <= budget - Decimal(10) ** -60:
                break
            target = budget - 2 * margin - budget * to_decimal(_SEARCH_MARGIN)
    else:
        raise DPFrameError("internal error: no verified bounded Laplace plan; please report")
    return _BoundedPlan(
        grid=float(grid),
        first=first,
        steps=steps,
        reach=reach,
        unit=unit,
        sampler=sampler,
        geometric=plan,
        accept=accept,
        kappa=kappa,
        far=far,
        margin=margin,
    )


def bounded_laplace_scale(
    epsilon: Fraction, delta: Fraction, sensitivity: Fraction, bounds: tuple[float, float]
) -> float:
    """The Laplace scale ``b`` :func:`bounded_laplace` uses, for validated parameters."""
    return _bounded_plan(epsilon, delta, sensitivity, float(bounds[0]), float(bounds[1])).scale


# ---------------------------------------------------------------- bounded Laplace: sampling


def _uniform_index(source: BitSource, n: int, steps: int) -> NDArray[np.int64]:
    """``n`` uniform integers in ``[0, steps]``, exactly.

    Up to ``2**32`` values: Lemire's multiply-shift, ``j = (r·(steps + 1)) >> 32`` for a
    uniform 32-bit ``r``, redrawing the rare ``r`` whose low product falls below
    ``2**32 mod (steps + 1)`` (so each ``j`` has exactly ``floor(2**32 / (steps+1))``
    preimages). Beyond: the top bits of a word, redrawn when above ``steps``.
    """
    out = np.empty(n, dtype=np.int64)
    span = steps + 1
    if span <= 1 << 32:
        floor = (1 << 32) % span
        product = random_uint32(source, n).astype(np.uint64)
        product *= np.uint64(span)
        np.right_shift(product, np.uint64(32), out=out.view(np.uint64))
        pending = np.flatnonzero((product & np.uint64(0xFFFFFFFF)) < floor)
        while pending.size:  # each round accepts with probability > 1 - span / 2**32
            product = random_uint32(source, pending.size).astype(np.uint64) * np.uint64(span)
            low_ok = (product & np.uint64(0xFFFFFFFF)) >= floor
            kept = np.flatnonzero(low_ok)
            out[pending[kept]] = (product[kept] >> np.uint64(32)).astype(np.int64)
            pending = pending[np.flatnonzero(~low_ok)]
        return out
    pending = np.arange(n)
    shift = np.uint64(64 - steps.bit_length())
    while pending.size:  # each round accepts with probability > 1/2
        draw = (source.words(pending.size) >> shift).astype(np.int64)
        ok = draw <= steps
        out[pending[ok]] = draw[ok]
        pending = pending[~ok]
    return out


def _ends_at_zero(zero: Coin, n: int, source: BitSource) -> NDArray[np.intp]:
    """Of ``n`` elements whose sign points out of the domain, those whose redraw is ``0``.

    One draw of the engine's zero-or-sign is ``0`` when the zero coin ``Z`` (probability
    ``z``) lands, else a fair sign ``S``; the plain sampler redraws it until it is not the
    bad sign. That loop is not run. Let ``K`` be the round of the first good ``S``
    (``P(K = k) = 2**-k``). Every round before ``K`` has ``S`` bad and ends the loop with
    ``0`` exactly when its ``Z`` lands; round ``K`` ends it anyway, with ``0`` when its ``Z``
    lands and with the good sign otherwise. So the redraw ends at ``0`` exactly when one
    of ``K`` independent zero coins lands (probability ``2z / (1 + z)`` in all), else at
    the good sign.

    The ``n`` redraws run as one stream of rounds, each a zero coin and a fair sign (the
    bits of whole words, 64 rounds per word): a good sign ends the current element's
    rounds, and the next round is the next element's first. Element ``i`` owns the rounds
    preceded by exactly ``i`` good signs: ``K_i`` of them, independent of each other and
    of the coins. Rounds after the ``n``-th good sign are discarded unseen. A landed coin's
    owner is a population count, so the work is about two bytes per element.
    """
    if n == 0:
        return np.empty(0, dtype=np.intp)
    extra = 8 + n // 1024  # words beyond the expected n / 32: a shortfall is rare
    signs = source.words(-(-n // 32) + extra)
    good = np.bitwise_count(signs)
    while int(good.sum(dtype=np.int64)) < n:  # fewer than n good signs: extend the stream
        signs = np.concatenate([signs, source.words(extra)])
        good = np.bitwise_count(signs)
    before = np.cumsum(good, dtype=np.int64)
    before -= good  # good signs in the earlier words
    landed = np.flatnonzero(lazy_bernoulli(source, zero, 64 * signs.size))
    word, bit = landed >> 6, (landed & 63).astype(np.uint64)
    earlier_bits = signs[word] & ((np.uint64(1) << bit) - np.uint64(1))
    owners: NDArray[np.intp] = (before[word] + np.bitwise_count(earlier_bits)).astype(np.intp)
    owners = owners[owners < n]  # non-decreasing
    first = np.ones(owners.size, dtype=np.bool_)  # an element may land several coins
    np.not_equal(owners[1:], owners[:-1], out=first[1:])
    return owners[first]


def _propose_geometric(
    plan: _BoundedPlan, v: NDArray[np.int64], source: BitSource
) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """Proposals ``v + N``, ``N`` drawn by the geometric engine, and their acceptance.

    Only inputs inside the domain come here (``0 < v < steps``): with this sampler those
    at an end are always drawn by :func:`_from_the_lower_end`.
    """
    geometric = plan.geometric
    if geometric is None:
        raise DPFrameError("internal error: geometric proposal without its plan; please report")
    j = _geometric.geometric_noise(geometric, v.size, source, False)
    j += v  # (one block: the rejection loop's blocks are no larger than the engine's)
    # 0 <= j <= steps in one comparison: a negative j is above 2**63 as unsigned.
    return j, j.view(np.uint64) <= np.uint64(plan.steps)


def _propose(
    plan: _BoundedPlan, v: NDArray[np.int64], source: BitSource
) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """One proposal per element and whether it is accepted."""
    if plan.geometric is not None:
        return _propose_geometric(plan, v, source)
    j = _uniform_index(source, v.size, plan.steps)
    return j, _accepts(plan, np.abs(j - v), source)


def _accepts(
    plan: _BoundedPlan, distance: NDArray[np.int64], source: BitSource
) -> NDArray[np.bool_]:
    """The uniform sampler's acceptance of proposals at these distances from their input."""
    accept = np.ones(distance.size, dtype=np.bool_)
    for table in plan.accept:
        # exp(−u·d) is the product over chunks of exp(−u·k_c·2**shift_c): one coin each.
        chunk = distance >> table.shift if table.shift else distance
        if plan.steps >> table.shift >= table.prefix.size:  # not the top chunk: mask it
            chunk = chunk & (table.prefix.size - 1)
        accept &= table.draw(source, chunk)
    return accept


def _from_the_lower_end(plan: _BoundedPlan, n: int, source: BitSource) -> NDArray[np.int64]:
    """``n`` independent outputs for the input ``v = 0`` (grid indices).

    Every such input has the same law, so they need not each run their own rejection
    loop: one stream of independent proposals from ``v = 0`` is drawn, a block at a
    time, and its accepted proposals, in order, are ``n`` independent draws of that law
    (the accepted proposals of an i.i.d. stream are i.i.d.). Accepted proposals beyond
    the ``n``-th are discarded unseen. This saves the per-element bookkeeping of the
    rejection rounds, which costs as much as the proposals themselves.
    """
    rate = _end_acceptance(plan)
    out = np.empty(n, dtype=np.int64)
    have = 0
    while have < n:  # the rate only sizes the batches
        batch = min(_REJECTION_BLOCK, math.ceil((n - have) / rate * 1.05) + 64)
        accepted = _accepted_from_zero(plan, batch, source)
        taken = min(accepted.size, n - have)
        out[have : have + taken] = accepted[:taken]
        have += taken
    return out


def _end_acceptance(plan: _BoundedPlan) -> float:
    """About how often a proposal from an end of the domain is accepted (sizes batches)."""
    unit = float(plan.unit)
    if plan.geometric is None:  # the mean of exp(−unit·j) over j in [0, steps]
        return -math.expm1(-unit * (plan.steps + 1)) / ((plan.steps + 1) * -math.expm1(-unit))
    return -math.expm1(-unit * (plan.steps + 1))  # P(|N| <= steps)


# The uniform sampler's inputs at an end share a stream only when it rejects at least
# this share of its proposals there: otherwise the stream's bookkeeping (gathering the
# accepted ones) costs more than the few rejection rounds it saves.
_STREAM_MIN_REJECTION = 0.15


def _accepted_from_zero(plan: _BoundedPlan, batch: int, source: BitSource) -> NDArray[np.int64]:
    """The accepted among ``batch`` independent proposals from ``v = 0``, in order."""
    geometric = plan.geometric
    if geometric is None:
        j = _uniform_index(source, batch, plan.steps)
        return j.take(np.flatnonzero(_accepts(plan, j, source)))  # no masked gather
    # N is symmetric: 0 with probability z, else a fair sign and a magnitude independent
    # of it. A negative N points out of the domain: the plain sampler would reject it and
    # propose again, and the next proposal's zero-or-sign is a fresh draw. So only that
    # part is redrawn until feasible (_ends_at_zero: 0, or the positive sign), keeping
    # the magnitude: the proposal then has exactly the law of the plain sampler's first
    # proposal with a feasible sign, so the accepted ones have the law of N conditioned
    # on the domain. An input at an end needs about one proposal, not two.
    noise = _geometric.geometric_noise(geometric, batch, source, False)
    negative = noise < 0
    j = np.abs(noise, out=noise)
    zeroed = _ends_at_zero(geometric.zero, int(np.count_nonzero(negative)), source)
    if zeroed.size:  # rare where the grid is fine: z is about unit / 2
        j[np.flatnonzero(negative)[zeroed]] = 0
    if int(j.max()) <= plan.steps:  # usual where the noise is narrower than the domain
        return j
    return np.delete(j, np.flatnonzero(j > plan.steps))


# Rejection rounds give each pending value one proposal (the fewest proposals in all)
# until fewer than _FEW_PENDING are left; then several each, for about _FEW_PENDING
# proposals per round (at most _MAX_TRIES each): a few more proposals, far fewer rounds.
_FEW_PENDING = 1 << 13
_MAX_TRIES = 64


def _propose_blocks(
    plan: _BoundedPlan, v: NDArray[np.int64], source: BitSource
) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """:func:`_propose` for each element of ``v``, ``_REJECTION_BLOCK`` elements at a time."""
    if v.size <= _REJECTION_BLOCK:
        return _propose(plan, v, source)
    j = np.empty(v.size, dtype=np.int64)
    accepted = np.empty(v.size, dtype=np.bool_)
    for start in range(0, v.size, _REJECTION_BLOCK):
        stop = min(v.size, start + _REJECTION_BLOCK)
        j[start:stop], accepted[start:stop] = _propose(plan, v[start:stop], source)
    return j, accepted


def _bounded_release(
    plan: _BoundedPlan, flat: NDArray[np.float64], lo: float, hi: float, source: BitSource
) -> NDArray[np.float64]:
    """The released values for the inputs ``flat``: at each the grid point of the first
    accepted of independent proposals.

    Inputs at an end of the domain (common: clamped data piles up there) share one
    stream of proposals (:func:`_from_the_lower_end`; the upper end is its mirror image,
    ``steps − j``), unless the uniform sampler rarely rejects there. Every other input
    gets its own proposals: a first one as its block is read (in cache), then rejection
    rounds for those rejected (:func:`_rejection_rounds`).
    """
    n = flat.size
    out = np.empty(n, dtype=np.float64)
    streamed = plan.geometric is not None or _end_acceptance(plan) < 1 - _STREAM_MIN_REJECTION
    # Inputs below `lowest` round to index 0, those from `highest` on to `steps` (exact:
    # half-integers below 2**52 times a power of two).
    lowest = (plan.first + 0.5) * plan.grid
    highest = (plan.first + plan.steps - 0.5) * plan.grid
    lower, upper = [np.empty(0, dtype=np.intp)], [np.empty(0, dtype=np.intp)]
    rejected, rejected_values = [np.empty(0, dtype=np.intp)], [np.empty(0, dtype=np.int64)]
    for start in range(0, n, _REJECTION_BLOCK):  # everything in cache, block by block
        stop = min(n, start + _REJECTION_BLOCK)
        x = flat[start:stop]
        some_at_an_end = False
        if streamed:
            least, most = float(x.min()), float(x.max())
            if most < lowest:  # the whole block at the lower end
                lower.append(np.arange(start, stop))
                continue
            if least >= highest:
                upper.append(np.arange(start, stop))
                continue
            some_at_an_end = least < lowest or most >= highest
        v = _grid_index(np.clip(x, lo, hi), plan)
        positions: NDArray[np.intp] | None = None  # None: the whole block, in order
        if some_at_an_end:
            at_lower, at_upper = v == 0, v == plan.steps
            lower.append(np.flatnonzero(at_lower) + start)
            upper.append(np.flatnonzero(at_upper) + start)
            inside = np.flatnonzero(~(at_lower | at_upper))
            if inside.size == 0:
                continue
            positions, v = inside + start, v[inside]
        j, accepted = _propose(plan, v, source)
        # Rejected proposals are written too (out of range, harmlessly): a later round
        # overwrites them.
        if positions is None:
            out[start:stop] = _grid_points(plan, j)
        else:
            out[positions] = _grid_points(plan, j)
        missed = np.flatnonzero(~accepted)
        if missed.size:
            rejected.append(missed + start if positions is None else positions[missed])
            rejected_values.append(v[missed])
    n_lower, n_upper = sum(p.size for p in lower), sum(p.size for p in upper)
    if n_lower + n_upper:
        drawn = _from_the_lower_end(plan, n_lower + n_upper, source)
        if n_lower == n:  # every input at the lower end: no scatter
            return _grid_points(plan, drawn)
        if n_upper == n:
            return _grid_points(plan, np.subtract(plan.steps, drawn, out=drawn))
        ends_lower, ends_upper = np.concatenate(lower), np.concatenate(upper)
        out[ends_lower] = _grid_points(plan, drawn[:n_lower])
        # the upper end is the mirror image of the lower one
        out[ends_upper] = _grid_points(plan, np.subtract(plan.steps, drawn[ends_lower.size :]))
    _rejection_rounds(plan, np.concatenate(rejected), np.concatenate(rejected_values), source, out)
    return out


def _grid_points(plan: _BoundedPlan, j: NDArray[np.int64]) -> NDArray[np.float64]:
    """The output values ``(first + j)·grid`` of grid indices ``j``, exactly."""
    # j·grid and first·grid are exact (integers below 2**52 times a power of two), and so
    # is their sum, (first + j)·grid: it is a float64 too.
    x = np.multiply(j, plan.grid, dtype=np.float64)
    if plan.first:
        x += plan.first * plan.grid
    return x


def _rejection_rounds(
    plan: _BoundedPlan,
    pending: NDArray[np.intp],
    values: NDArray[np.int64],
    source: BitSource,
    out: NDArray[np.float64],
) -> None:
    """For each input grid index ``values[i]`` whose first proposal was rejected, the
    first accepted of further independent proposals, written to ``out[pending[i]]``.

    The rounds gather the rejected values of the whole call, so that their proposals,
    too, are drawn in full blocks (numpy's cost per call dominated small rounds). Once
    few values are left, each gets several proposals at once (independent draws, of
    which the first accepted is kept and the rest discarded: the same distribution as
    proposing one at a time). Index arrays, not boolean masks, select the rejected
    values: numpy's masked gather branches per element, and acceptances are coin flips.
    """
    while pending.size:  # a loop over rejection rounds, on the rejected values only
        tries = min(_MAX_TRIES, max(1, _FEW_PENDING // pending.size))
        if tries == 1:
            proposal, accepted = _propose_blocks(plan, values, source)
            hit = np.flatnonzero(accepted)  # positions in pending
            chosen = proposal[hit]
            miss = np.flatnonzero(~accepted)
        else:
            proposal, accepted = _propose_blocks(plan, np.repeat(values, tries), source)
            hits = np.flatnonzero(accepted)  # in order: proposal k belongs to value k // tries
            owner = hits // tries
            first = np.ones(hits.size, dtype=np.bool_)
            np.not_equal(owner[1:], owner[:-1], out=first[1:])  # the first accepted of each
            firsts = np.flatnonzero(first)
            hit, chosen = owner[firsts], proposal[hits[firsts]]
            done = np.zeros(pending.size, dtype=np.bool_)
            done[hit] = True
            miss = np.flatnonzero(~done)
        out[pending[hit]] = _grid_points(plan, chosen)
        pending, values = pending[miss], values[miss]


def _grid_index(x: NDArray[np.float64], plan: _BoundedPlan) -> NDArray[np.int64]:
    """Nearest grid index (ties up) of clamped inputs, relative to ``plan.first``, exactly."""
    q = x * (1.0 / plan.grid)  # exact: the grid is a power of two
    # |q| < 2**52, so its ulp is at most 1/2 and q + 0.5 is exact: floor rounds ties up.
    q += 0.5
    np.floor(q, out=q)
    index = q.astype(np.int64)
    index -= plan.first
    return np.clip(index, 0, plan.steps, out=index)


def bounded_laplace(
    values: ArrayLike,
    *,
    epsilon: float,
    delta: float = 0.0,
    sensitivity: float,
    bounds: tuple[float, float],
    rng: Any = None,
) -> NDArray[np.float64]:
    """Add Laplace noise restricted to a domain, by resampling (the bounded Laplace mechanism).

    Each value is clamped into ``bounds``; noise is redrawn until the noisy value lies
    in ``bounds``, so the ends get no extra probability (unlike :func:`laplace`'s
    clamping). The noise scale is inflated, per Holohan et al. (2019), so that the
    renormalization does not break the privacy guarantee.

    Parameters
    ----------
    values : array_like of float
        The exact results to release. Any shape. ``±inf`` are clamped; NaN is refused.
    epsilon : float
        Privacy-loss parameter, a finite number > 0.
    delta : float, default 0.0
        Failure probability in ``[0, 1)``; Holohan et al.'s condition turns it into
        ``epsilon − ln(1 − delta)`` of budget, a modest gain.
    sensitivity : float
        The most one individual can change any one of ``values``.
    bounds : tuple of float
        ``(lo, hi)`` with ``lo < hi``: the domain. Every output lies in it.
    rng : numpy.random.Generator or seed, optional
        For teaching and tests only: makes the output reproducible, hence not private.

    Returns
    -------
    numpy.ndarray of float64
        Released values in ``[lo, hi]``, on a grid of spacing ``g`` (below), with the
        shape of ``values``.

    Raises
    ------
    InvalidParameterError, InvalidParameterTypeError
        For an epsilon or sensitivity that is not a finite number > 0, a delta outside
        ``[0, 1)``, bounds that are not two finite numbers with ``lo < hi``, values that
        are not real numbers or contain NaN, or bounds so far from zero (relative to
        their width) that float64 holds fewer than 1024 grid points between them.
    NoiseOverflowError
        When the noise scale would exceed the float64 range.

    Notes
    -----
    **The mechanism, exactly.** dpframe works on the grid ``g·Z``, with ``g`` the
    power of two ``2^-20·min(sensitivity, hi − lo)`` (coarser only if ``|lo|`` or
    ``|hi|`` exceed ``2^52·g``). An input is clamped into ``bounds`` and rounded to
    the nearest grid index ``v`` in ``[lo, hi]``; two inputs ``sensitivity`` apart
    give indices at most ``s = ⌈sensitivity/g⌉`` apart. The output index ``j``
    (``j·g`` in ``[lo, hi]``) has probability ``w(|j − v|) / Σ_j' w(|j' − v|)``, drawn
    by exact rejection: propose ``v + N`` with ``N`` from dpframe's exact geometric
    engine (when the noise is narrower than the domain) or ``j`` uniform (when it is
    wider) and accept with probability ``w``, an exact product of dyadic coins. (A
    geometric proposal whose sign points out of the domain, at an end, has its sign
    redrawn and keeps its magnitude, which is independent of the sign: the same law as
    rejecting it and proposing again, at half the cost.) No floating-point value
    decides anything. The weights ``w(n)`` are those of
    ``γ^|n|``, ``γ = exp(−g/b)``, up to the dyadic rounding of the coins, whose
    effect on the privacy loss dpframe bounds from the coins' exact probabilities by
    a margin ``μ`` (below ``2^-30`` in practice; see ``_geometric_margin``).

    **Privacy.** Neighbours (one row added or removed) change each entry by at most
    ``sensitivity``. The scale ``b`` is the smallest (found by bisection) with
    ``t·g/b + ln ΔC + μ <= epsilon − ln(1 − delta)``, where ``t = min(s, M)``,
    ``ΔC = h(t)/h(0)``, ``h(a) = 1 + γ − γ^(a+1) − γ^(M−a+1)`` and ``M + 1`` is the
    number of grid points: the discrete form of Holohan et al.'s condition with the
    normalization term ``ΔC(b)``. For the ideal weights it is the exact worst case:
    an input at an end of the domain against the one ``t`` steps inside, at the
    output at that end (``ln h`` is concave and symmetric). The condition is
    evaluated in 120-digit arithmetic. Every output is then at most
    ``exp(epsilon)/(1 − delta)`` times likelier under one input than under a
    neighbouring one: ``epsilon``-DP for ``delta = 0``, and ``(epsilon, delta)``-DP
    otherwise (Holohan et al.'s argument: the excess over ``e^ε`` on any event is at
    most ``delta`` times its probability). On grids of 2^20 steps per sensitivity the
    scale agrees with the paper's continuous fixed point to about one part in 10^6.

    **Accuracy.** See :func:`bounded_laplace_accuracy`.

    **Running time and randomness.** Rejection sampling: each value is proposed
    again until a proposal is accepted, and the number of rounds, of random words and
    the time all depend on the value. A value at an end of the domain redraws the
    sign of about half its proposals when the noise is narrower than the domain (and
    is rejected about half the time when it is wider), a value in the middle rarely;
    so an observer who can time the call or count the random words learns something
    about the value itself, not only about the noise. The first round runs in blocks
    of 32,768 values, the later ones over all the rejected values of the call, with
    several proposals per pending value once few are left, which blurs but does not
    remove this. Use :func:`laplace` (fixed work per value) where timing can be
    observed.

    References
    ----------
    N. Holohan, S. Antonatos, S. Braghin, P. Mac Aonghusa, "The Bounded Laplace
    Mechanism in Differential Privacy", Journal of Privacy and Confidentiality 10(1),
    2019 (arXiv:1808.10410). Seed ``004_2d340d4f6924174c.txt`` (truncation vs.
    bounding); seed ``002_265e5b6700395d7e.txt`` section 2.4 (rejection on a grid).
    I. Mironov, CCS 2012 (why the noise lives on a grid).

    Examples
    --------
    >>> from dpframe.mechanisms import bounded_laplace
    >>> noisy = bounded_laplace([0.1, 0.5, 1.0], epsilon=1.0, sensitivity=0.1, bounds=(0.0, 1.0))
    >>> noisy.shape
    (3,)
    >>> bool(((noisy >= 0.0) & (noisy <= 1.0)).all())
    True
    """
    eps = _validation.epsilon(epsilon)
    dlt = _validation.delta(delta)
    sens = _validation.sensitivity(sensitivity)
    lo, hi = _real_bounds(bounds)
    array = _validation.real_array(values)
    plan = _bounded_plan(eps, dlt, sens, lo, hi)
    source = bit_source(rng)
    out = _bounded_release(plan, array.reshape(-1), lo, hi, source)
    return out.reshape(array.shape)


def _worst_tail(plan: _BoundedPlan, m: int) -> float:
    """max over inputs of P(|j − v| > m) for the ideal weights (float64, ~1e-15 relative).

    The worst input is an end (a = 0) or the middle (a = ⌊M/2⌋): for a <= min(m, M/2)
    the tail decreases in a, for m <= a <= M/2 it increases.
    """
    u = float(plan.unit)
    steps = plan.steps

    def far(side: int) -> float:  # Σ_{n = m+1..side} γ^n · (1 − γ)
        return 0.0 if side <= m else math.exp(-u * (m + 1)) * -math.expm1(-u * (side - m))

    def tail(a: int) -> float:
        c = steps - a
        normal = -math.expm1(-u * (a + 1)) + math.exp(-u) * -math.expm1(-u * c)
        return (far(a) + far(c)) / normal

    return max(tail(0), tail(steps // 2))


def bounded_laplace_accuracy(
    *,
    epsilon: float,
    delta: float = 0.0,
    sensitivity: float,
    bounds: tuple[float, float],
    alpha: float = 0.05,
) -> float:
    """Half-width ``a``: ``|bounded_laplace(v) − clamp(v)| <= a`` with probability ``>= 1 − alpha``.

    Parameters
    ----------
    epsilon, delta, sensitivity : float or Fraction
        As for :func:`bounded_laplace`.
    bounds : tuple of float
        As for :func:`bounded_laplace`.
    alpha : float, default 0.05
        Allowed probability of a larger error, strictly between 0 and 1.

    Returns
    -------
    float
        The worst case over all values: ``(m + 1)·g`` with ``m`` the smallest number of
        grid steps whose exceedance probability is at most ``alpha`` for every input
        index (one more step covers rounding the input to the grid), capped at
        ``hi − lo``.

    Notes
    -----
    The exceedance probability of the conditional (renormalized) Laplace is computed
    in closed form for the two inputs where it is largest, an end of the domain and
    its middle, and ``alpha`` is reduced by the factor ``exp(2κ)`` (and the far mass)
    that separates the realized weights from the ideal ones. For a domain much wider
    than ``b`` this is close to the Laplace closed form ``b·ln(1/alpha)``. It depends
    on public parameters only, draws no randomness and spends no privacy budget.

    Examples
    --------
    >>> from dpframe.mechanisms import bounded_laplace_accuracy
    >>> a = bounded_laplace_accuracy(epsilon=1.0, sensitivity=1.0, bounds=(0.0, 100.0))
    >>> 4.5 < a < 5.2
    True
    """
    eps = _validation.epsilon(epsilon)
    dlt = _validation.delta(delta)
    sens = _validation.sensitivity(sensitivity)
    lo, hi = _real_bounds(bounds)
    level = float(_geometric.checked_alpha(alpha))
    plan = _bounded_plan(eps, dlt, sens, lo, hi)
    # Realized tail <= e^(2κ)·ideal/(1 − far) + e^κ·far (see _geometric_margin).
    far = float(plan.far)
    allowed = (level - 2 * far) * (1 - far) * math.exp(-2 * float(plan.kappa)) * (1 - 1e-9)
    low, high = -1, plan.steps  # tail(high) = 0 <= allowed; tail(low) = 1 > allowed
    while high - low > 1:
        middle = (low + high) // 2
        if _worst_tail(plan, middle) <= allowed:
            high = middle
        else:
            low = middle
    return min(hi - lo, (high + 1) * plan.grid)
