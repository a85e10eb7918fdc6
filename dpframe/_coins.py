"""Exact Bernoulli coins with dyadic probabilities: how dpframe turns random bits into decisions.

A :class:`Coin` has probability ``numerator / 2**(64 * nwords)``, exactly. Drawing it
compares a uniformly random binary fraction with the binary digits of that probability,
most significant digit first; the first unequal digit decides, so the event "fraction <
probability" has exactly the coin's probability. Floating point never enters a decision.
:func:`make_coin` rounds a high-precision probability to such a coin with a stated
relative error.

The comparison is *lazy*: the first byte of the fraction decides a coin except on a tie
with the threshold's first byte (probability 1/256), and only the tied elements draw
further 64-bit words. A coin thus costs about one byte of randomness instead of a word.
Three samplers share that idea:

* :func:`lazy_bernoulli` (and :func:`bernoulli`, which keeps its historic signature):
  ``n`` draws of one coin;
* :func:`lazy_bernoulli_indexed`: one draw per element of a different coin each, taken
  from a :class:`CoinTable` by index (decisions, acceptance tests);
* :class:`DyadicSampler`: draws from any finite distribution whose probabilities are
  dyadic rationals, by the Knuth–Yao method in 16-bit digits: a 16-bit uniform indexes a
  table of 65,536 outcomes; the rare slots that straddle two outcomes read 16 more bits,
  and so on. The realized probabilities are exactly the given ones.

Constant-time draws (:func:`packed_bernoulli`) compare 16 bits per coin and element;
the elements that tie on any coin (probability about ``m / 65536`` for ``m`` coins) are
resolved from a pool of a fixed size, indexed through a running count of ties, so that
the number of random words and the sequence of numpy operations do not depend on the
values drawn (see its docstring for the one exception, of probability below 2**-80).
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from dpframe._exact import log2_of_decimal
from dpframe._random import BitSource
from dpframe.errors import DPFrameError

__all__: list[str] = []

_MASK64 = (1 << 64) - 1
# Bits of the first comparison of a lazy coin (one byte), and of a constant-time one.
LAZY_BITS = 8
CONSTANT_TIME_BITS = 16
# Knuth–Yao digits: 16 bits, a level-1 table of 2**16 slots.
_DIGIT_BITS = 16
_DIGIT = 1 << _DIGIT_BITS
# The constant-time tie pool may overflow (and fall back to extra work) with at most this
# probability per call of packed_bernoulli.
_POOL_FAILURE_LOG2 = 80


def random_bytes(source: BitSource, n: int) -> NDArray[np.uint8]:
    """``n`` uniform bytes (taken from ``ceil(n / 8)`` words)."""
    return source.words((n + 7) >> 3).view(np.uint8)[:n]


def random_uint16(source: BitSource, n: int) -> NDArray[np.uint16]:
    """``n`` uniform 16-bit integers (taken from ``ceil(n / 4)`` words)."""
    return source.words((n + 3) >> 2).view(np.uint16)[:n]


def random_uint32(source: BitSource, n: int) -> NDArray[np.uint32]:
    """``n`` uniform 32-bit integers (taken from ``ceil(n / 2)`` words)."""
    return source.words((n + 1) >> 1).view(np.uint32)[:n]


def _split(numerator: int, total_bits: int, prefix_bits: int) -> tuple[int, tuple[int, ...]]:
    """The threshold's first ``prefix_bits`` bits, and the rest as 64-bit words.

    The rest ``r`` (the remaining ``total_bits - prefix_bits`` bits) is returned shifted
    left by ``prefix_bits``, so it fills ``total_bits / 64`` words whose last bits are 0:
    a fresh uniform word sequence ``U`` satisfies ``U < r`` (lexicographically) exactly
    when its first ``total_bits - prefix_bits`` bits, read as a number, are below the rest.
    """
    top = numerator >> (total_bits - prefix_bits)
    rest = (numerator & ((1 << (total_bits - prefix_bits)) - 1)) << prefix_bits
    shifts = range(total_bits - 64, -1, -64)
    return top, tuple((rest >> s) & _MASK64 for s in shifts)


@dataclass(frozen=True)
class Coin:
    """A Bernoulli coin with the dyadic probability ``numerator / 2**(64 * nwords)``."""

    numerator: int
    nwords: int

    @functools.cached_property
    def words(self) -> tuple[np.uint64, ...]:
        """The threshold's 64-bit digits, most significant first."""
        shifts = range(64 * (self.nwords - 1), -1, -64)
        return tuple(np.uint64((self.numerator >> s) & _MASK64) for s in shifts)

    @property
    def probability(self) -> Fraction:
        return Fraction(self.numerator, 1 << (64 * self.nwords))

    @functools.cached_property
    def lazy_split(self) -> tuple[int, tuple[np.uint64, ...]]:
        """First byte of the threshold and the rest (see :func:`_split`)."""
        top, rest = _split(self.numerator, 64 * self.nwords, LAZY_BITS)
        return top, tuple(np.uint64(w) for w in rest)

    @functools.cached_property
    def constant_time_split(self) -> tuple[int, tuple[np.uint64, ...]]:
        """First 16 bits of the threshold and the rest (see :func:`_split`)."""
        top, rest = _split(self.numerator, 64 * self.nwords, CONSTANT_TIME_BITS)
        return top, tuple(np.uint64(w) for w in rest)


def make_coin(
    p: Decimal, rel_bits: int, *, round_up: bool = False, complement: bool = False
) -> Coin:
    """The dyadic coin nearest ``p`` (or just above it), with relative error below 2**-rel_bits.

    With ``complement=True``, ``p`` is the probability of the coin *not* landing,
    which keeps coins close to 1 accurate. Precision is relative to ``min(p, 1 - p)``,
    so both the coin and its complement are accurate. Call it inside
    :func:`dpframe._exact.precise`, so that the Decimal arithmetic carries enough digits.
    """
    if not Decimal(0) < p < Decimal(1):
        raise DPFrameError(f"internal error: coin probability {p} outside (0, 1); please report")
    smaller = min(p, 1 - p)
    nwords = max(1, math.ceil((rel_bits + 2 - log2_of_decimal(smaller)) / 64))
    scaled = p * (Decimal(2) ** (64 * nwords))
    numerator = int(scaled.to_integral_value(rounding="ROUND_CEILING" if round_up else None))
    numerator = min(max(numerator, 1), (1 << (64 * nwords)) - 1)
    if complement:
        numerator = (1 << (64 * nwords)) - numerator
    return Coin(numerator, nwords)


# ---------------------------------------------------------------- lazy (default) draws


def _tail_below(source: BitSource, digits: Sequence[np.uint64], m: int) -> NDArray[np.bool_]:
    """``m`` fresh uniform fractions compared with ``digits`` (word by word, lazily)."""
    below = np.zeros(m, dtype=np.bool_)
    undecided = np.arange(m)
    for digit in digits:
        if not undecided.size:
            break
        u = source.words(undecided.size)
        below[undecided[u < digit]] = True
        undecided = undecided[u == digit]
    return below  # equal on every digit: the fraction is >= the threshold


def lazy_bernoulli(source: BitSource, coin: Coin, n: int) -> NDArray[np.bool_]:
    """``n`` exact draws of ``coin``: one byte each, more words only after a tie (1/256)."""
    top, rest = coin.lazy_split
    u = random_bytes(source, n)
    below = u < top
    tie = np.flatnonzero(u == top)
    if tie.size:
        below[tie] = _tail_below(source, rest, tie.size)
    return below


def bernoulli(source: BitSource, coin: Coin, n: int, constant_time: bool) -> NDArray[np.bool_]:
    """``n`` exact draws of ``coin``: a uniform binary fraction compared with its threshold.

    The default is :func:`lazy_bernoulli`. Constant-time mode draws every word of the
    threshold for every element and combines them without branches.
    """
    if not constant_time:
        return lazy_bernoulli(source, coin, n)
    first, *rest = coin.words
    u = source.words(n)
    below = u < first
    if not rest:
        return below
    tie = u == first
    for digit in rest:
        u = source.words(n)
        below |= tie & (u < digit)
        tie &= u == digit
    return below


class CoinTable:
    """Several coins (or sure outcomes, ``True``/``False``) to draw by index.

    ``top`` holds each threshold's first byte (256 for a sure True, so no byte ties
    with it); ``rest`` the remaining digits as words, padded with zero words to a
    common length (padding does not change a dyadic probability).
    """

    def __init__(self, coins: Sequence[Coin | bool]) -> None:
        width = max((c.nwords for c in coins if isinstance(c, Coin)), default=1)
        top = np.zeros(len(coins), dtype=np.uint16)
        rest = np.zeros((len(coins), width), dtype=np.uint64)
        for k, coin in enumerate(coins):
            if isinstance(coin, Coin):
                first, digits = _split(
                    coin.numerator << (64 * (width - coin.nwords)), 64 * width, 8
                )
                top[k] = first
                rest[k] = digits
            elif coin:
                top[k] = 256
        self.coins = tuple(coins)
        self.top = top
        self.rest = rest


def lazy_bernoulli_indexed(
    source: BitSource, table: CoinTable, index: NDArray[np.intp]
) -> NDArray[np.bool_]:
    """One draw per element of the coin ``table.coins[index[k]]``, each exact and independent."""
    u = random_bytes(source, index.size)
    threshold = table.top[index]
    below = u < threshold
    tie = np.flatnonzero(u == threshold)
    if tie.size:
        digits = table.rest[index[tie]]
        undecided = np.arange(tie.size)
        for column in range(digits.shape[1]):
            if not undecided.size:
                break
            w = source.words(undecided.size)
            digit = digits[undecided, column]
            below[tie[undecided[w < digit]]] = True
            undecided = undecided[w == digit]
    return below


# ---------------------------------------------------------------- constant-time draws


@functools.lru_cache(maxsize=256)
def tie_pool_size(n: int, coins: int) -> int:
    """Slots for the elements that tie on some coin: overflowing has probability < 2**-80.

    The number of tied elements is at most a sum of ``n * coins`` independent events of
    probability 2**-16 each, with mean ``mu``; Chernoff's bound
    ``P(X >= t) <= exp(-mu) (e mu / t)**t`` picks the smallest ``t`` below 2**-80.
    """
    mu = max(n * coins / _DIGIT, 1e-300)
    t = max(1, math.ceil(mu))
    log_target = -_POOL_FAILURE_LOG2 * math.log(2)
    while -mu + t * (1 + math.log(mu) - math.log(t)) > log_target:
        t += 1 + t // 16
    return t


def _pack_dtype(count: int) -> type[np.unsignedinteger]:
    if count <= 8:
        return np.uint8
    if count <= 16:
        return np.uint16
    return np.uint32 if count <= 32 else np.uint64


# Ties are pooled by groups of 8 consecutive elements (one 64-bit word of their tie flags).
_GROUP = 8


@functools.lru_cache(maxsize=8)
def _groups(count: int) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """``arange(count)`` and the offsets ``0..7`` of a group's elements (read-only)."""
    positions = np.arange(count, dtype=np.intp)
    offsets = np.arange(_GROUP, dtype=np.intp)
    positions.flags.writeable = False
    offsets.flags.writeable = False
    return positions, offsets


def packed_bernoulli(
    source: BitSource, coins: Sequence[Coin], n: int
) -> NDArray[np.unsignedinteger]:
    """``n`` draws of each coin, packed: bit ``i`` of element ``k`` is draw ``k`` of ``coins[i]``.

    See :func:`packed_bernoulli_pooled`, which also says which elements the pool served.
    """
    return packed_bernoulli_pooled(source, coins, n)[0]


def packed_bernoulli_pooled(
    source: BitSource, coins: Sequence[Coin], n: int
) -> tuple[NDArray[np.unsignedinteger], NDArray[np.intp]]:
    """:func:`packed_bernoulli`, and the elements its tie pool served (a fixed number of
    positions; those ``>= n`` are padding). Only these can differ from their first 16
    bits' verdict: a coin whose threshold is below 2**-16 can land only there.

    Constant time: each coin compares 16 random bits per element with the first 16 bits
    of its threshold. The elements tie with some threshold in groups of 8 (about
    ``8 len(coins) / 65536`` of the groups do); a running count (cumulative sum) of the
    tied groups gives each one a slot in a pool of :func:`tie_pool_size` slots, and
    each slot draws fresh words for the rest of every coin's comparison for all 8
    elements, whether used or not; the tied coins take their outcome from there. So the
    words drawn (``n / 4`` per coin plus the pool) and the numpy operations and their
    sizes are fixed by ``n`` and the coins only. If more groups tie than the pool holds
    (probability below 2**-80 per call), the excess is resolved with extra words: still
    exact, but then not constant time.
    """
    m = len(coins)
    if m > 64:
        raise DPFrameError("internal error: more than 64 packed coins; please report")
    dtype = _pack_dtype(m)
    coins = tuple(coins)
    splits = [coin.constant_time_split for coin in coins]
    groups = -(-n // _GROUP)
    padded = groups * _GROUP
    draws = random_uint16(source, m * n).reshape(m, n)
    tops = _tops(coins)
    weights = _lane_weights(m)
    # Byte-wide lanes of up to 8 coins (plus one scratch group), merged at the end.
    lanes = []
    for first in range(0, m, 8):
        rows = slice(first, first + 8)
        lane = np.zeros(padded + _GROUP, dtype=np.uint8)
        below = draws[rows] < tops[rows, None]
        below.view(np.uint8)[...] *= weights[rows, None]
        np.add.reduce(below.view(np.uint8), axis=0, out=lane[:n])
        lanes.append(lane)
    tied = np.zeros(padded, dtype=np.bool_)
    np.logical_or.reduce(draws == tops[:, None], axis=0, out=tied[:n])
    slots = tie_pool_size(groups, m * _GROUP)
    group_tied = tied.view(np.uint64) != 0
    # rank[g] = tied groups up to g: a tied group's own slot is 1..count.
    rank = np.cumsum(group_tied.view(np.uint8), dtype=np.uint32)
    np.minimum(rank, slots, out=rank)
    rank *= group_tied
    positions, offsets = _groups(groups)
    owner = np.full(slots + 1, groups, dtype=np.intp)  # unused slots: the scratch group
    owner[rank] = positions  # slot 0 collects the untied groups and is ignored
    members = (owner[1:, None] * _GROUP + offsets).reshape(-1)
    # Every coin's rest for every pooled element at once: (coins, members) per digit word.
    mine = np.take(draws, members, axis=1, mode="clip") == _tops(coins)[:, None]
    rests = _rests(coins)
    less = np.zeros(mine.shape, dtype=np.bool_)
    equal = np.ones(mine.shape, dtype=np.bool_)
    for column in range(rests.shape[1]):
        w = source.words(mine.size).reshape(mine.shape)
        less |= equal & (w < rests[:, column, None])
        equal &= w == rests[:, column, None]
    weights = _lane_weights(m)
    for number, lane in enumerate(lanes):
        rows = slice(8 * number, 8 * number + 8)
        fix = (mine[rows] * weights[rows, None]).sum(axis=0, dtype=np.uint8)
        bits = ((mine[rows] & less[rows]) * weights[rows, None]).sum(axis=0, dtype=np.uint8)
        lane[members] = (lane[members] & ~fix) | bits
    if int(rank.max(initial=0)) >= slots:  # probability below 2**-80: no longer constant time
        crowded = np.flatnonzero(rank >= slots)
        elements = (crowded[:, None] * _GROUP + offsets).reshape(-1)
        elements = elements[elements < n]
        _resolve_crowded(source, splits, draws, lanes, elements[tied[elements]])
        members = np.concatenate([members, elements])
    packed = lanes[0][:n].astype(dtype)
    for number, lane in enumerate(lanes[1:], start=1):
        packed |= lane[:n].astype(dtype) << dtype(8 * number)
    return packed, members


@functools.lru_cache(maxsize=256)
def _tops(coins: tuple[Coin, ...]) -> NDArray[np.uint16]:
    return np.array([coin.constant_time_split[0] for coin in coins], dtype=np.uint16)


@functools.lru_cache(maxsize=256)
def _rests(coins: tuple[Coin, ...]) -> NDArray[np.uint64]:
    """The coins' rests (after 16 bits) as rows of words, padded with zero words (same value)."""
    width = max(len(coin.constant_time_split[1]) for coin in coins)
    rests = np.zeros((len(coins), width), dtype=np.uint64)
    for i, coin in enumerate(coins):
        digits = coin.constant_time_split[1]
        rests[i, : len(digits)] = digits
    return rests


@functools.lru_cache(maxsize=64)
def _lane_weights(m: int) -> NDArray[np.uint8]:
    return np.array([1 << (i % 8) for i in range(m)], dtype=np.uint8)


def _resolve_crowded(
    source: BitSource,
    splits: Sequence[tuple[int, tuple[np.uint64, ...]]],
    draws: NDArray[np.uint16],
    lanes: Sequence[NDArray[np.uint8]],
    elements: NDArray[np.intp],
) -> None:
    """Redo the tied elements of groups that shared the pool's last slot (probability < 2**-80)."""
    for i, (top, rest) in enumerate(splits):
        u = draws[i, elements]
        landed = u < top
        tie = np.flatnonzero(u == top)
        if tie.size:
            landed[tie] = _tail_below(source, rest, tie.size)
        bit = np.uint8(1 << (i % 8))
        lane = lanes[i // 8]
        lane[elements] = (lane[elements] & ~bit) | (landed * bit)


# ---------------------------------------------------------------- Knuth–Yao sampler


class DyadicSampler:
    """Exact draws from a finite distribution with dyadic probabilities (Knuth–Yao, 16-bit digits).

    Outcome ``k`` has probability ``numerators[k] / 2**bits`` (the numerators must add
    up to ``2**bits``) and is reported as ``values[k]``. Write each probability in base
    2**16: at level 1, a uniform 16-bit ``u`` picks one of 65,536 slots, of which
    outcome ``k`` owns as many as its first digit; the slots left over (fewer than the
    number of outcomes) continue: the slot index and 16 fresh bits pick among the
    second digits, and so on. Outcome ``k`` is thus drawn with probability exactly
    ``sum_l digit_l(k) 2**(-16 l)``. The expected number of bits is below 16 plus a
    vanishing fraction.

    Outcomes flagged ``special`` (rare ones the caller must post-process) are placed
    last, so that the level-1 draws that may need attention are ``u >= first_special``.
    """

    def __init__(
        self,
        numerators: Sequence[int],
        bits: int,
        values: NDArray[np.integer],
        special: NDArray[np.bool_] | None = None,
    ) -> None:
        if sum(numerators) != 1 << bits or min(numerators) < 0:
            raise DPFrameError("internal error: dyadic probabilities must add up to 1")
        flags = np.zeros(len(numerators), dtype=np.bool_) if special is None else special
        order = np.argsort(flags, kind="stable")  # special outcomes last
        levels = -(-bits // _DIGIT_BITS)
        pad = levels * _DIGIT_BITS - bits
        self._numerators = [numerators[k] << pad for k in order.tolist()]
        self._levels = levels
        self.values: NDArray[np.integer] = np.asarray(values)[order]
        self.special = flags[order]
        first = np.array(self._digits(1), dtype=np.int64)
        self.fill = int(first.sum())  # slots owned by outcomes at level 1
        self.first_special = int(first[~self.special].sum())
        self.table: NDArray[np.integer] = np.zeros(_DIGIT, dtype=self.values.dtype)
        self.table[: self.fill] = np.repeat(self.values, first)
        self._deeper: dict[int, tuple[NDArray[np.int64], int]] = {}
        self._lock = threading.Lock()
        # Level 2, where about 1% of the draws go, is built up front.
        self._second = self._level(2) if levels >= 2 else (np.zeros(1, dtype=np.int64), 0)

    def _digits(self, level: int) -> list[int]:
        shift = (self._levels - level) * _DIGIT_BITS
        return [(a >> shift) & (_DIGIT - 1) for a in self._numerators]

    def _level(self, level: int) -> tuple[NDArray[np.int64], int]:
        """Cumulative digit counts at ``level`` >= 2 and their total (built on first use)."""
        with self._lock:
            if level not in self._deeper:
                cumulative = np.cumsum(np.array(self._digits(level), dtype=np.int64))
                self._deeper[level] = (cumulative, int(cumulative[-1]))
            return self._deeper[level]

    def _continue(self, source: BitSource, slot: NDArray[np.int64]) -> NDArray[np.intp]:
        """Outcome indices for draws that continue past level 1 from the given slots."""
        cumulative, fill = self._second
        position = slot * _DIGIT + random_uint16(source, slot.size).astype(np.int64)
        outcome = np.searchsorted(cumulative, position, side="right")
        deeper = np.flatnonzero(position >= fill)  # about 2**-16 of them
        if deeper.size:
            slot = position[deeper] - fill
            pending = deeper
            for level in range(3, self._levels + 1):
                if not pending.size:
                    break
                cumulative, fill = self._level(level)
                position = slot * _DIGIT + random_uint16(source, slot.size).astype(np.int64)
                done = position < fill
                outcome[pending[done]] = np.searchsorted(cumulative, position[done], side="right")
                pending, slot = pending[~done], position[~done] - fill
            if pending.size:
                raise DPFrameError("internal error: Knuth-Yao sampler ran past its last digit")
        return outcome

    def sample(self, source: BitSource, n: int) -> tuple[NDArray[np.integer], NDArray[np.intp]]:
        """``n`` independent draws (as values) and the positions of the special ones."""
        u = random_uint16(source, n)
        out: NDArray[np.integer] = np.take(self.table, u)
        if self.first_special >= _DIGIT:
            return out, np.empty(0, dtype=np.intp)
        flagged = np.flatnonzero(u >= self.first_special)
        if not flagged.size:
            return out, flagged
        if self.first_special == self.fill:  # no special outcomes: all flagged continue
            drawn = self._continue(source, u[flagged].astype(np.int64) - self.fill)
            out[flagged] = self.values[drawn]
            return out, flagged[self.special[drawn]]
        continuing = u[flagged] >= self.fill
        special = flagged[~continuing]
        positions = flagged[continuing]
        if positions.size:
            drawn = self._continue(source, u[positions].astype(np.int64) - self.fill)
            out[positions] = self.values[drawn]
            special = np.concatenate([special, positions[self.special[drawn]]])
        return out, special
