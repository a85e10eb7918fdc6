"""Privacy amounts, exactly: :class:`Budget` and the exact text shown for every amount.

A budget or a cost is a pair ``(epsilon, delta)`` of exact rationals
(:class:`fractions.Fraction`), or ``math.inf`` when unlimited. Nothing here knows about
ledgers or frames; :mod:`dpframe._ledger` adds and compares these amounts.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import Any

import numpy as np

from dpframe._exact import simplest_rational
from dpframe.errors import InvalidParameterError, InvalidParameterTypeError

__all__ = ["Budget", "budget_amount", "exact_text", "fraction_text"]

# A terminating decimal with more significant digits than this is shown as a fraction.
_MAX_SHOWN_DIGITS = 20

# ------------------------------------------------------------------ exact display


def _decimal_text(exact: Decimal) -> str:
    """A terminating decimal in plain notation, or scientific when very large or small."""
    with localcontext() as ctx:
        ctx.prec = 2 * _MAX_SHOWN_DIGITS
        normal = exact.normalize()
        if -7 < normal.adjusted() < 16:
            return format(normal, "f")
        return format(normal, "e")


def exact_text(value: Fraction | float) -> str:
    """Show an exact amount without float artefacts.

    Integers show as integers (``1``), fractions with a terminating decimal expansion
    as that exact decimal (``3/10`` as ``0.3``, ``1/1000000`` as ``0.000001``,
    ``1/10**9`` as ``1e-9``), and every other fraction as ``numerator/denominator``
    followed by a 6-significant-digit approximation (``1/3 (≈0.333333)``). ``math.inf``
    shows as ``inf``.
    """
    if not isinstance(value, Fraction):
        return "inf" if value == math.inf else repr(value)
    if value.denominator == 1:
        return str(value.numerator)
    rest, twos, fives = value.denominator, 0, 0
    while rest % 2 == 0:
        rest //= 2
        twos += 1
    while rest % 5 == 0:
        rest //= 5
        fives += 1
    if rest == 1:
        places = max(twos, fives)
        scaled = value.numerator * 10**places // value.denominator  # exact: 10**places divides
        if len(str(abs(scaled)).strip("0")) <= _MAX_SHOWN_DIGITS:
            return _decimal_text(Decimal(f"{scaled}E-{places}"))
    return f"{value.numerator}/{value.denominator} (≈{float(value):.6g})"


def fraction_text(value: Fraction | float) -> str:
    """The exact machine-readable form stored in records: ``"1/11"``, ``"0"``, ``"inf"``."""
    return str(value) if isinstance(value, Fraction) else "inf"


# ------------------------------------------------------------------ Budget


def budget_amount(value: Any, name: str) -> Fraction | float:
    """A budget component: ``math.inf`` or an exact non-negative Fraction."""
    if isinstance(value, float) and value == math.inf:
        return math.inf
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise InvalidParameterTypeError(
            f"Budget.{name} must be a number, got {value!r} of type {type(value).__name__}. "
            f"Pass a Fraction, an int, a float or math.inf."
        )
    if isinstance(value, numbers.Integral):
        exact = Fraction(int(value))
    elif isinstance(value, Fraction):
        exact = value
    else:
        as_float = float(value)
        if math.isnan(as_float) or as_float == -math.inf:
            raise InvalidParameterError(f"Budget.{name} must be >= 0 or math.inf, got {value!r}.")
        if as_float == math.inf:
            return math.inf
        exact = simplest_rational(as_float)
    if exact < 0:
        raise InvalidParameterError(f"Budget.{name} must be >= 0, got {value!r}.")
    return exact


@dataclasses.dataclass(frozen=True, repr=False)
class Budget:
    """A privacy budget or amount: ``(epsilon, delta)``, exact.

    Parameters
    ----------
    epsilon : Fraction or float
        The privacy-loss amount, ``math.inf`` when unlimited.
    delta : Fraction or float
        The failure-probability amount, ``math.inf`` when unlimited.

    Notes
    -----
    Finite components are stored as :class:`fractions.Fraction`; a float given here is
    read as the simplest fraction that rounds to it (``0.1`` is exactly 1/10), and
    ``math.inf`` stays a float. ``repr`` and ``str`` show finite components exactly:
    ``Budget(epsilon=0.3, delta=0)``, never ``0.30000000000000004``; a fraction whose
    decimal expansion does not terminate shows as ``1/3 (≈0.333333)``, the exact value
    first and a 6-significant-digit approximation after it. Ledgers add amounts under
    basic sequential composition: releases of ``(ε1, δ1)`` and ``(ε2, δ2)`` on the same
    data together cost ``(ε1 + ε2, δ1 + δ2)``.

    Examples
    --------
    >>> from fractions import Fraction
    >>> from dpframe import Budget
    >>> Budget(epsilon=Fraction(1, 10) + Fraction(2, 10), delta=0)
    Budget(epsilon=0.3, delta=0)
    >>> Budget(epsilon=Fraction(1, 3), delta=Fraction(1, 10**6))
    Budget(epsilon=1/3 (≈0.333333), delta=0.000001)
    """

    epsilon: Fraction | float
    delta: Fraction | float

    def __post_init__(self) -> None:
        # frozen: normalize through object.__setattr__ (ints and floats become Fractions).
        object.__setattr__(self, "epsilon", budget_amount(self.epsilon, "epsilon"))
        object.__setattr__(self, "delta", budget_amount(self.delta, "delta"))

    @property
    def unlimited(self) -> bool:
        """True when neither component is limited (both are ``math.inf``)."""
        return self.epsilon == math.inf and self.delta == math.inf

    def __repr__(self) -> str:
        return f"Budget(epsilon={exact_text(self.epsilon)}, delta={exact_text(self.delta)})"
