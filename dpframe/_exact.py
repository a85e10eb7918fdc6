"""Exact arithmetic shared by the mechanisms and the ledger.

Privacy parameters are carried as :class:`fractions.Fraction` so that budgets add up
exactly (eleven charges of 1/11 fit in a budget of 1) and so that every inequality a
mechanism relies on can be checked without rounding. Floats given by users are read as
the simplest rational that rounds to them (``0.1`` is 1/10, ``1/11`` is 1/11).
"""

from __future__ import annotations

import decimal
import math
from contextlib import AbstractContextManager
from fractions import Fraction
from typing import Any

import numpy as np

__all__: list[str] = []

# Working precision (decimal digits) for the transcendental values behind the mechanisms.
_DIGITS = 120


def simplest_rational(x: float) -> Fraction:
    """Return the simplest fraction that rounds to the float ``x`` (``x`` finite).

    "Simplest" means smallest denominator; it lies strictly between the midpoints to
    ``x``'s neighbouring floats, so ``float(result) == x`` always holds.
    """
    if x == 0.0:
        return Fraction(0)
    if x < 0.0:
        return -simplest_rational(-x)
    exact = Fraction(x)
    below = Fraction(math.nextafter(x, -math.inf))
    above = math.nextafter(x, math.inf)
    # The largest float has no finite neighbour above: its spacing there mirrors below.
    upper_neighbour = Fraction(above) if math.isfinite(above) else 2 * exact - below
    lower = (exact + below) / 2
    upper = (exact + upper_neighbour) / 2
    return _simplest_between(lower, upper)


def simplest_rational_in_type(x: np.floating[Any]) -> Fraction:
    """The simplest fraction that rounds to the numpy float ``x`` in its own type (finite).

    For a float32, the midpoints are to its float32 neighbours: float32 0.1 gives 1/10.
    """
    if x == 0:
        return Fraction(0)
    if x < 0:
        return -simplest_rational_in_type(-x)
    exact = Fraction(float(x))
    below = Fraction(float(np.nextafter(x, x.dtype.type(-np.inf))))
    above = np.nextafter(x, x.dtype.type(np.inf))
    upper_neighbour = Fraction(float(above)) if np.isfinite(above) else 2 * exact - below
    return _simplest_between((exact + below) / 2, (exact + upper_neighbour) / 2)


def _simplest_between(lower: Fraction, upper: Fraction | None) -> Fraction:
    """Simplest fraction in the open interval (lower, upper); ``upper=None`` means +inf."""
    whole = math.floor(lower)
    if upper is None or whole + 1 < upper:
        return Fraction(whole + 1)
    # lower and upper share the integer part: recurse on the reciprocals of the fractional parts.
    inner_lower = 1 / (upper - whole)
    inner_upper = None if lower == whole else 1 / (lower - whole)
    return whole + 1 / _simplest_between(inner_lower, inner_upper)


def _context() -> decimal.Context:
    return decimal.Context(
        prec=_DIGITS, rounding=decimal.ROUND_HALF_EVEN, Emin=-(10**17), Emax=10**17
    )


def precise() -> AbstractContextManager[decimal.Context]:
    """A context manager in which Decimal arithmetic carries ``_DIGITS`` digits."""
    return decimal.localcontext(_context())


def to_decimal(x: Fraction) -> decimal.Decimal:
    """``x`` to ``_DIGITS`` significant digits (relative error below 1e-119)."""
    ctx = _context()
    return ctx.divide(decimal.Decimal(x.numerator), decimal.Decimal(x.denominator))


def exp_lower_bound(x: Fraction) -> Fraction:
    """A rational number guaranteed to be at most ``exp(x)``, within a relative 1e-70 of it.

    The decimal module rounds ``exp`` correctly, so the only errors are the two
    roundings (conversion of ``x`` and of the result), far below the 1e-70 margin for
    any ``|x| < 1e15``.
    """
    ctx = _context()
    value = ctx.exp(to_decimal(x))
    return Fraction(value) * (1 - Fraction(1, 10**70))


def exp_decimal(x: Fraction) -> decimal.Decimal:
    """``exp(x)`` to ``_DIGITS`` significant digits (not a bound, an approximation)."""
    return _context().exp(to_decimal(x))


def log2_of_decimal(x: decimal.Decimal) -> float:
    """log2 of a positive decimal, as a float (fine for sizing, never for a decision)."""
    exponent = x.adjusted()  # x = m * 10**exponent with 1 <= m < 10
    return math.log2(float(x.scaleb(-exponent))) + exponent * math.log2(10)


def show(x: Fraction | int | float, digits: int = 4) -> str:
    """``x`` to ``digits`` significant digits for a message, at any magnitude (no overflow)."""
    exact = Fraction(x)
    if exact == 0 or Fraction(1, 10**300) < abs(exact) < 10**300:
        return f"{float(exact):.{digits}g}"
    ctx = decimal.Context(prec=digits, Emin=-(10**17), Emax=10**17)
    value = ctx.divide(decimal.Decimal(exact.numerator), decimal.Decimal(exact.denominator))
    return format(value.normalize(ctx), "g")
