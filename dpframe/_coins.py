"""Exact Bernoulli coins with dyadic probabilities: how dpframe turns random bits into decisions.

A :class:`Coin` has probability ``numerator / 2**(64 * nwords)``, exactly. Drawing it
compares uniformly random 64-bit words, read as one binary fraction, with the digits of
that probability, most significant word first; the first unequal word decides, so the
event "fraction < probability" has exactly the coin's probability. Floating point never
enters a decision. :func:`make_coin` rounds a high-precision probability to such a coin
with a stated relative error.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from dpframe._exact import log2_of_decimal
from dpframe._random import BitSource
from dpframe.errors import DPFrameError

__all__: list[str] = []


@dataclass(frozen=True)
class Coin:
    """A Bernoulli coin with the dyadic probability ``numerator / 2**(64 * nwords)``."""

    numerator: int
    nwords: int

    @functools.cached_property
    def words(self) -> tuple[np.uint64, ...]:
        """The threshold's 64-bit digits, most significant first."""
        mask = (1 << 64) - 1
        shifts = range(64 * (self.nwords - 1), -1, -64)
        return tuple(np.uint64((self.numerator >> s) & mask) for s in shifts)

    @property
    def probability(self) -> Fraction:
        return Fraction(self.numerator, 1 << (64 * self.nwords))


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


def bernoulli(source: BitSource, coin: Coin, n: int, constant_time: bool) -> NDArray[np.bool_]:
    """``n`` exact draws of ``coin``: a uniform binary fraction compared with its threshold.

    The first word decides except on a tie (probability 2**-64 per word); constant-time
    mode draws every further word for every element, the default only for the ties.
    """
    first, *rest = coin.words
    u = source.words(n)
    below = u < first
    if not rest:
        return below
    tie = u == first
    if constant_time:
        for digit in rest:
            u = source.words(n)
            below |= tie & (u < digit)
            tie &= u == digit
        return below
    undecided = np.flatnonzero(tie)
    for digit in rest:
        if not undecided.size:
            break
        u = source.words(undecided.size)
        below[undecided[u < digit]] = True
        undecided = undecided[u == digit]
    return below
