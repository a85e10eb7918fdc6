"""dpframe._budget: exact amounts, shown exactly."""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest

from dpframe._budget import Budget, exact_text
from dpframe.errors import (
    InvalidParameterError,
    InvalidParameterTypeError,
)
from tests._ledgers import F


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (F(1, 3), "1/3 (≈0.333333)"),
        (F(2, 30), "1/15 (≈0.0666667)"),
        (F(3, 10), "0.3"),
        (F(1, 10**6), "0.000001"),
        (F(1, 10**9), "1e-9"),
        (F(5), "5"),
        (F(0), "0"),
        (F(123456, 1000), "123.456"),
        (F(1, 2**80), f"1/{2**80} (≈{2.0**-80:.6g})"),  # exact decimal too long to show
        (math.inf, "inf"),
    ],
)
def test_exact_display(value: Fraction | float, shown: str) -> None:
    assert exact_text(value) == shown


def test_one_third_budget_display() -> None:
    assert repr(Budget(F(1, 3), F(0))) == "Budget(epsilon=1/3 (≈0.333333), delta=0)"
    assert repr(Budget(math.inf, math.inf)) == "Budget(epsilon=inf, delta=inf)"


def test_budget_normalizes_and_validates() -> None:
    assert Budget(0.1, 0).epsilon == F(1, 10)
    assert isinstance(Budget(1, 0).delta, Fraction)
    assert Budget(math.inf, math.inf).unlimited
    assert not Budget(1, math.inf).unlimited
    for bad in (-1, -0.5, math.nan, -math.inf):
        with pytest.raises(InvalidParameterError):
            Budget(bad, 0)
    wrong_types: list[Any] = ["1", True, None, Decimal("0.1")]
    for wrong in wrong_types:
        with pytest.raises(InvalidParameterTypeError):
            Budget(wrong, 0)


def test_budget_forms_and_display() -> None:
    assert repr(Budget(rho=F(3, 200))) == "Budget(rho=0.015)"
    assert repr(Budget(F(1), F(0), rho=F(1, 3))) == (
        "Budget(epsilon=1, delta=0, rho=1/3 (≈0.333333))"
    )
    assert Budget(rho=0.015).rho == F(3, 200)
    assert Budget(rho=0.015).epsilon is None
    assert Budget(rho=math.inf).unlimited
    assert not Budget(math.inf, math.inf, rho=F(1)).unlimited
    assert Budget(F(1), F(0)) == Budget(F(1), F(0), rho=None)
    assert Budget(F(1), F(0)) != Budget(F(1), F(0), rho=F(0))
    with pytest.raises(InvalidParameterError, match="needs epsilon and delta, or rho"):
        Budget()
    with pytest.raises(InvalidParameterTypeError, match="both epsilon and delta"):
        Budget(epsilon=1)
    with pytest.raises(InvalidParameterError):
        Budget(rho=-1)
    with pytest.raises(InvalidParameterTypeError):
        Budget(rho="1")
