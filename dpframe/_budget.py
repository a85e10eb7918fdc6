"""Privacy amounts, exactly: :class:`Budget` and the exact text shown for every amount.

A budget or an amount is a pair ``(epsilon, delta)`` of exact rationals
(:class:`fractions.Fraction`), a zero-concentrated DP parameter ``rho``, or both forms of
the same amount; ``math.inf`` when unlimited. Nothing here knows about ledgers or frames:
:mod:`dpframe._composition` adds and compares these amounts, :mod:`dpframe._ledger`
keeps them.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import Any

import numpy as np

from dpframe._exact import show, simplest_rational
from dpframe.errors import InvalidParameterError, InvalidParameterTypeError

__all__ = ["Budget", "budget_amount", "budget_rho", "exact_text", "fraction_text"]

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
    return f"{value.numerator}/{value.denominator} (≈{show(value, 6)})"


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


def budget_rho(value: Any) -> Fraction | float:
    """A total zCDP budget ``rho``: a number > 0 (exact), or ``math.inf`` (unlimited).

    Floats are read as the simplest fraction that rounds to them (``0.015`` is exactly
    3/200), as every privacy parameter in dpframe.
    """
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise InvalidParameterTypeError(
            f"rho must be a number, got {value!r} of type {type(value).__name__}. Pass "
            f"the total zCDP budget as a float or a Fraction, e.g. set_budget(rho=0.015)."
        )
    exact = budget_amount(value, "rho")  # math.inf stays math.inf
    if exact == 0:
        raise InvalidParameterError(
            "rho must be > 0, got 0: a zero budget allows no release. Pass the total zCDP "
            "budget, e.g. set_budget(rho=0.015), or math.inf to explore without a limit."
        )
    return exact


@dataclasses.dataclass(frozen=True, repr=False)
class Budget:
    """A privacy budget or amount: ``(epsilon, delta)``, ``rho`` (zCDP), or both, exact.

    Parameters
    ----------
    epsilon : Fraction or float, optional
        The privacy-loss amount, ``math.inf`` when unlimited. Given with ``delta``, or
        not at all (a zCDP amount).
    delta : Fraction or float, optional
        The failure-probability amount, ``math.inf`` when unlimited.
    rho : Fraction or float, optional
        The zero-concentrated DP (zCDP) amount, when the amount has that form.

    Notes
    -----
    Finite components are stored as :class:`fractions.Fraction`; a float given here is
    read as the simplest fraction that rounds to it (``0.1`` is exactly 1/10), and
    ``math.inf`` stays a float. ``repr`` and ``str`` show the components present,
    exactly: ``Budget(epsilon=0.3, delta=0)``, never ``0.30000000000000004``; a fraction
    whose decimal expansion does not terminate shows as ``1/3 (≈0.333333)``, the exact
    value first and a 6-significant-digit approximation after it.

    An amount in ``(epsilon, delta)`` form is an ``(epsilon, delta)``-DP guarantee; in
    ``rho`` form, a ``rho``-zCDP guarantee (Bun and Steinke 2016), which implies
    ``(epsilon, delta)``-DP for every ``delta > 0`` with the ``epsilon`` of Canonne,
    Kamath and Steinke 2020 (Corollary 13). A ledger's ``spent`` and ``remaining`` carry
    both forms once the ledger accounts in zCDP (see :class:`~dpframe.Ledger`).

    References
    ----------
    M. Bun, T. Steinke, "Concentrated Differential Privacy: Simplifications, Extensions,
    and Lower Bounds", TCC 2016 (arXiv:1605.02065). C. Canonne, G. Kamath, T. Steinke,
    "The Discrete Gaussian for Differential Privacy", NeurIPS 2020 (arXiv:2004.00010).

    Examples
    --------
    >>> from fractions import Fraction
    >>> from dpframe import Budget
    >>> Budget(epsilon=Fraction(1, 10) + Fraction(2, 10), delta=0)
    Budget(epsilon=0.3, delta=0)
    >>> Budget(epsilon=Fraction(1, 3), delta=Fraction(1, 10**6))
    Budget(epsilon=1/3 (≈0.333333), delta=0.000001)
    >>> Budget(rho=0.015)
    Budget(rho=0.015)
    """

    epsilon: Fraction | float | None = None
    delta: Fraction | float | None = None
    rho: Fraction | float | None = None

    def __post_init__(self) -> None:
        if (self.epsilon is None) != (self.delta is None):
            raise InvalidParameterTypeError(
                f"a Budget needs both epsilon and delta, or neither (a zCDP amount, rho=...); "
                f"got epsilon={self.epsilon!r}, delta={self.delta!r}."
            )
        if self.epsilon is None and self.rho is None:
            raise InvalidParameterError(
                "a Budget needs epsilon and delta, or rho, or both; got none of them."
            )
        # frozen: normalize through object.__setattr__ (ints and floats become Fractions).
        for name in ("epsilon", "delta", "rho"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, budget_amount(value, name))

    @property
    def unlimited(self) -> bool:
        """True when no component present is limited (each is ``math.inf``)."""
        present = [v for v in (self.epsilon, self.delta, self.rho) if v is not None]
        return all(v == math.inf for v in present)

    def __repr__(self) -> str:
        parts = []
        if self.epsilon is not None and self.delta is not None:
            parts.append(f"epsilon={exact_text(self.epsilon)}, delta={exact_text(self.delta)}")
        if self.rho is not None:
            parts.append(f"rho={exact_text(self.rho)}")
        return f"Budget({', '.join(parts)})"
