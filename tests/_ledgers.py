"""Helpers shared by the ledger tests (accounting, attrs handle, persistence)."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from dpframe._attrs import ledger_of
from dpframe._ledger import Ledger
from dpframe.errors import BudgetExceededError

F = Fraction


_ZERO = Fraction(0)


def charge(
    ledger: Any,
    epsilon: Any,
    delta: Any = _ZERO,
    *,
    method: str = "count",
    columns: Any = ("age",),
    noise_scale: float | None = None,
    private: bool = True,
) -> None:
    ledger.charge(
        method=method,
        columns=columns,
        mechanism="geometric",
        epsilon=epsilon,
        delta=delta,
        noise_scale=noise_scale,
        private=private,
    )


def plain_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "key": np.arange(6),
            "age": [23, 35, 41, 52, 67, 19],
            "sex": ["F", "M", "F", "M", "F", "M"],
        }
    )


def budgeted_frame(epsilon: float = 1.0) -> tuple[pd.DataFrame, Ledger]:
    frame = plain_frame()
    ledger = ledger_of(frame)
    assert ledger is not None
    ledger.set_budget(epsilon)
    return frame, ledger


class FloatLedger:
    """A broken ledger that sums costs in floats (the bug seen in the wild)."""

    def __init__(self) -> None:
        self.total = math.inf
        self.spent = 0.0

    def set_budget(self, epsilon: float) -> None:
        self.total = float(epsilon)

    def charge(self, *, epsilon: Fraction, **_: Any) -> None:
        if self.spent + float(epsilon) > self.total:
            raise BudgetExceededError("over budget")
        self.spent += float(epsilon)
