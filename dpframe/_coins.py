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

Constant-time draws (:func:`packed_bernoulli`) take the coins by groups of four and
draw each group's 16 outcomes jointly, by inversion, from one 16-bit digit per element
through a lookup table; the digits that straddle two outcomes (at most 15 of the 65,536
per group) are resolved from pools of a fixed size, indexed through running counts of
ties, so that the number of random words and the sequence of numpy operations do not
depend on the values drawn (see its docstring for the one exception, of probability
below 2**-80).
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
    def _hash(self) -> int:
        return hash((self.numerator, self.nwords))

    def __hash__(self) -> int:  # coins key caches: hash the (large) numerator once
        return self._hash

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
# Coins drawn together, from one 16-bit digit, in constant-time mode.
_JOINT_COINS = 4


@functools.lru_cache(maxsize=8)
def _groups(count: int) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """``arange(count)`` and the offsets ``0..7`` of a group's elements (read-only)."""
    positions = np.arange(count, dtype=np.intp)
    offsets = np.arange(_GROUP, dtype=np.intp)
    positions.flags.writeable = False
    offsets.flags.writeable = False
    return positions, offsets


def _table_dtype(count: int) -> type[np.unsignedinteger]:
    """The narrowest unsigned type with a bit to spare above ``count`` coin bits (the tie flag)."""
    if count < 8:
        return np.uint8
    if count < 16:
        return np.uint16
    return np.uint32 if count < 32 else np.uint64


@dataclass(frozen=True)
class _JointTable:
    """Up to :data:`_JOINT_COINS` coins drawn together, by inversion, from 16-bit digits.

    The ``2**k`` outcomes of ``k`` coins (bit ``i`` set: coin ``i`` landed) lie on
    ``[0, 1)`` in decreasing order of their bit pattern, each on an interval as long as
    its exact probability (a product of dyadic coins: a multiple of ``2**-bits``). A
    uniform ``U`` falls in the interval of its outcome, so the coins come out
    independent, each with exactly its probability. A 16-bit digit ``u`` says that ``U``
    lies in ``[u, u + 1)·2**-16``; ``verdict[u]`` is the outcome, shifted to the coins'
    place in the packed result, when no interval ends strictly inside (the next bits of
    ``U`` cannot change it), and only the tie flag (the table type's top bit) when some
    do. Tied digit ``u`` is entry ``tie_number[u] - 1`` of ``tied``: the index of the
    interval the digit starts in, and the ends inside its range, each as the fraction
    of the way through it, in units of ``2**-fraction_bits``. The outcome is then that
    index plus the number of ends at or below ``U`` (:class:`_TieRows` holds them for
    the draws).
    """

    coins: int
    shift: int
    verdict: NDArray[np.unsignedinteger]
    tie_number: NDArray[np.uint16]
    tied: tuple[tuple[int, tuple[int, ...]], ...]
    fraction_bits: int

    @property
    def ties(self) -> int:
        return len(self.tied)


def _joint_table(coins: Sequence[Coin], shift: int, dtype: type[np.unsignedinteger]) -> _JointTable:
    k = len(coins)
    bits = 64 * sum(coin.nwords for coin in coins)
    landed = [coin.numerator << (bits - 64 * coin.nwords) for coin in coins]  # over 2**bits
    # P(pattern) * 2**bits, patterns from all landed (2**k - 1) down to none landed (0)
    ends, total = [], 0
    for pattern in range((1 << k) - 1, -1, -1):
        weight = 1
        for i, p in enumerate(landed):
            weight *= p if pattern >> i & 1 else (1 << bits) - p
        total += weight >> (bits * (k - 1))  # each factor carried 2**bits; exact division
        ends.append(total)
    if total != 1 << bits:
        raise DPFrameError("internal error: joint coin probabilities do not add up; please report")
    inner = ends[:-1]  # interval j ends where interval j + 1 starts
    scale_bits = bits - _DIGIT_BITS
    digit = np.arange(_DIGIT, dtype=np.int64)
    # the interval each digit starts in: the number of ends at or below its start
    ceilings = np.array([-(-end >> scale_bits) for end in inner], dtype=np.int64)
    start = np.searchsorted(ceilings, digit, side="right")
    pattern_of = (1 << k) - 1 - start
    # Ends strictly inside a digit's range, by digit; an end on a digit's start is
    # already counted in ``start`` and must not be counted again.
    within: dict[int, list[int]] = {}
    for end in inner:
        if end & ((1 << scale_bits) - 1):
            within.setdefault(end >> scale_bits, []).append(end)
    inside = sorted(within)
    verdict = (pattern_of << shift).astype(dtype)
    verdict[inside] = np.iinfo(dtype).max ^ (np.iinfo(dtype).max >> 1)  # the tie flag
    tie_number = np.zeros(_DIGIT, dtype=np.uint16)
    tie_number[inside] = np.arange(1, len(inside) + 1)
    low = (1 << scale_bits) - 1
    tied = tuple((int(start[u]), tuple(end & low for end in within[u])) for u in inside)
    for array in (verdict, tie_number):
        array.flags.writeable = False
    return _JointTable(k, shift, verdict, tie_number, tied, scale_bits)


@dataclass(frozen=True)
class _TieRows:
    """The tied digits of all coin groups, as rows of one table (row 0: a dummy, no ends).

    Row ``offset[g] + tie_number`` of group ``g`` holds its ends padded to a common
    ``depth`` and ``width`` (zero words on the right: the same fraction), the index
    ``first`` of the interval its digit starts in, and the group's ``coins`` and
    ``shift`` (its place in the packed result).
    """

    offset: NDArray[np.intp]
    rests: NDArray[np.uint64]
    valid: NDArray[np.bool_]
    first: NDArray[np.int64]
    coins: NDArray[np.int64]
    shift: NDArray[np.int64]

    @property
    def width(self) -> int:
        return int(self.rests.shape[2])


@functools.lru_cache(maxsize=64)  # about 0.7 MiB each (the 16-bit lookup tables)
def _joint_tables(coins: tuple[Coin, ...]) -> tuple[tuple[_JointTable, ...], _TieRows]:
    dtype = _table_dtype(len(coins))
    tables = tuple(
        _joint_table(coins[start : start + _JOINT_COINS], start, dtype)
        for start in range(0, len(coins), _JOINT_COINS)
    )
    # Every end as a fraction of its digit's range in ``width`` words, left-aligned (a
    # shorter fraction padded with zero bits on the right is the same number).
    width = max(-(-t.fraction_bits // 64) for t in tables)
    depth = max([len(ends) for t in tables for _, ends in t.tied], default=1)
    rows = 1 + sum(t.ties for t in tables)
    rests = np.zeros((rows, depth, width), dtype=np.uint64)
    valid = np.zeros((rows, depth), dtype=np.bool_)
    first = np.zeros(rows, dtype=np.int64)
    count = np.zeros(rows, dtype=np.int64)
    shift = np.zeros(rows, dtype=np.int64)
    offset = np.zeros(len(tables), dtype=np.intp)
    row = 1
    for g, t in enumerate(tables):
        offset[g] = row - 1  # tie numbers start at 1
        for start, ends in t.tied:
            first[row], count[row], shift[row] = start, t.coins, t.shift
            for d, end in enumerate(ends):
                aligned = end << (64 * width - t.fraction_bits)
                rests[row, d] = [
                    (aligned >> (64 * (width - 1 - w))) & _MASK64 for w in range(width)
                ]
                valid[row, d] = True
            row += 1
    for array in (offset, rests, valid, first, count, shift):
        array.flags.writeable = False
    return tables, _TieRows(offset, rests, valid, first, count, shift)


def _resolve(
    source: BitSource, rows: _TieRows, row: NDArray[np.intp]
) -> tuple[NDArray[np.uint64], NDArray[np.uint64]]:
    """The outcome bits (shifted into place) and group masks for the tied digits ``row``.

    Draws ``rows.width`` fresh words per entry, whatever its row (row 0, the dummy,
    yields 0 and mask 0). The outcome is ``first`` plus the number of ends at or below
    ``U``; a fraction equal to an end on every word is at or above it.
    """
    rests, valid = rows.rests[row], rows.valid[row]  # (entries, depth, width)
    words = source.words(row.size * rows.width).reshape(row.size, 1, rows.width)
    below = np.zeros(rests.shape[:2], dtype=np.bool_)  # U < end, decided word by word
    equal = np.ones(rests.shape[:2], dtype=np.bool_)
    for w in range(rows.width):
        below |= equal & (words[:, :, w] < rests[:, :, w])
        equal &= words[:, :, w] == rests[:, :, w]
    index = rows.first[row] + (valid & ~below).sum(axis=1)
    real = (row != 0).astype(np.uint64)
    full = (np.uint64(1) << rows.coins[row].astype(np.uint64)) - np.uint64(1)
    shift = rows.shift[row].astype(np.uint64)
    pattern = ((full - index.astype(np.uint64)) << shift) * real
    mask: NDArray[np.uint64] = (full << shift) * real
    return pattern, mask


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
    positions; those ``>= n`` are padding). Only these can differ from their 16-bit
    digits' verdict: a coin of probability below 2**-16 can land only there.

    Constant time. The coins go by groups of up to four: each group's ``2**k`` outcomes
    are drawn together by inversion from one 16-bit digit per element, through a table
    (:class:`_JointTable`). A digit whose range holds the end of an outcome's interval
    (probability ``ties / 65536``, at most 15/65536 for four coins) ties. Two pools of
    :func:`tie_pool_size` slots find the ties in fixed work: a running count (cumulative
    sum) over the elements' groups of 8 gives each tied group a slot; a second running
    count over (coin group, element) among the slots' members gives each tie a slot of
    the second pool, and every slot of that one draws ``width`` fresh words to resolve
    its tie, whether it holds one or not. So the words drawn (``n / 4`` per coin group
    plus ``width`` per slot of the second pool) and the numpy operations and their
    sizes are fixed by ``n`` and the coins only. If more tie than a pool holds
    (probability below 2**-80 per call), every tie is resolved again with extra words:
    still exact, but then not constant time.
    """
    m = len(coins)
    if m > 63:
        raise DPFrameError("internal error: more than 63 packed coins; please report")
    if n == 0:
        return np.zeros(0, dtype=_pack_dtype(m)), np.zeros(0, dtype=np.intp)
    tables, rows = _joint_tables(tuple(coins))
    dtype = _table_dtype(m)
    groups = -(-n // _GROUP)
    padded = groups * _GROUP
    digits = random_uint16(source, len(tables) * n).reshape(len(tables), n)
    # One lookup per coin group; the tie flag (top bit) accumulates with the outcomes.
    packed = np.zeros(padded + _GROUP, dtype=dtype)  # + a scratch group
    looked_up = np.empty(n, dtype=dtype)
    for table, row in zip(tables, digits, strict=True):
        np.take(table.verdict, row, out=looked_up)
        packed[:n] |= looked_up
    tie_flag = dtype(np.iinfo(dtype).max ^ (np.iinfo(dtype).max >> 1))
    tied = (packed[:padded] >= tie_flag).view(np.uint8)  # the top bit: some group tied
    group_tied = tied.view(np.uint64) != 0
    events = sum(table.ties for table in tables)  # tied digits, each of probability 2**-16
    slots = tie_pool_size(groups, _GROUP * events)
    # Level 1: rank[g] = tied groups of 8 up to g; a tied group's own slot is 1..count.
    rank = np.cumsum(group_tied.view(np.uint8), dtype=np.uint32)
    np.minimum(rank, slots, out=rank)
    rank *= group_tied
    positions, offsets = _groups(groups)
    owner = np.full(slots + 1, groups, dtype=np.intp)  # unused slots: the scratch group
    owner[rank] = positions  # slot 0 collects the untied groups and is ignored
    members = (owner[1:, None] * _GROUP + offsets).reshape(-1)
    # Level 2: the tied (coin group, member) pairs, each in a slot of a second pool.
    at = np.minimum(members, n - 1)
    number = np.stack([t.tie_number[d[at]] for t, d in zip(tables, digits, strict=True)])
    number *= members < n
    pair_tied = (number != 0).reshape(-1)
    pairs = tie_pool_size(n, events)
    pair_rank = np.cumsum(pair_tied.view(np.uint8), dtype=np.uint32)
    np.minimum(pair_rank, pairs, out=pair_rank)
    pair_rank *= pair_tied
    pair_owner = np.full(pairs + 1, pair_tied.size, dtype=np.intp)  # unused: no pair
    pair_owner[pair_rank] = np.arange(pair_tied.size, dtype=np.intp)
    used = pair_owner[1:] < pair_tied.size
    group_of, member_of = np.divmod(np.minimum(pair_owner[1:], pair_tied.size - 1), members.size)
    row = (rows.offset[group_of] + number[group_of, member_of]) * used
    pattern, _ = _resolve(source, rows, row)
    # The tied groups' bits are still 0: OR the outcomes in (np.bitwise_or.at, as an
    # element may have tied in several groups); unused slots write 0 to the scratch group.
    target = np.where(used, members[member_of], padded)
    np.bitwise_or.at(packed, target, pattern.astype(dtype))
    if int(rank.max(initial=0)) >= slots or int(pair_rank.max(initial=0)) >= pairs:
        # Probability below 2**-80 (a pool overflowed): no longer constant time. Every
        # tie is resolved again with fresh words, replacing what the pools decided.
        members = np.concatenate([members, _resolve_all(source, tables, rows, digits, packed)])
    packed &= ~tie_flag
    return packed[:n].astype(_pack_dtype(m), copy=False), members


def _resolve_all(
    source: BitSource,
    tables: Sequence[_JointTable],
    rows: _TieRows,
    digits: NDArray[np.uint16],
    packed: NDArray[np.unsignedinteger],
) -> NDArray[np.intp]:
    """Resolve every tied digit again, replacing its group's bits; returns the tied elements."""
    tied_elements = []
    for g, (table, row) in enumerate(zip(tables, digits, strict=True)):
        elements = np.flatnonzero(table.tie_number[row])
        pattern, mask = _resolve(source, rows, rows.offset[g] + table.tie_number[row[elements]])
        kept = packed[elements] & ~mask.astype(packed.dtype)
        packed[elements] = kept | pattern.astype(packed.dtype)
        tied_elements.append(elements)
    return np.concatenate(tied_elements)


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
