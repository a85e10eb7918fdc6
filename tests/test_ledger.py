"""dpframe._ledger: exact budget arithmetic, check-then-charge, and a ledger that follows its data.

Each budget rule has a validity twin: the same check run against a deliberately broken
ledger (float sums, a check that never refuses, unchecked costs, a handle that forks, a
handle that hides conflicts, a restore that resets) must fail, proving the test can.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import json
import math
import pickle
import subprocess
import sys
import threading
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpframe import _ledger, _validation
from dpframe._ledger import Budget, Ledger, combined_ledger, exact_text, ledger_of
from dpframe.errors import (
    BudgetExceededError,
    InvalidParameterError,
    InvalidParameterTypeError,
    LedgerConflictError,
)

F = Fraction
_ZERO = Fraction(0)


def _charge(
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


def _frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "key": np.arange(6),
            "age": [23, 35, 41, 52, 67, 19],
            "sex": ["F", "M", "F", "M", "F", "M"],
        }
    )


def _budgeted(epsilon: float = 1.0) -> tuple[pd.DataFrame, Ledger]:
    frame = _frame()
    ledger = ledger_of(frame)
    assert ledger is not None
    ledger.set_budget(epsilon)
    return frame, ledger


def _state(ledger: Ledger) -> dict[str, Any]:
    return ledger.to_dict()


class _FloatLedger:
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


# ---------------------------------------------------------------- exact arithmetic


def _accepted_elevenths(ledger: Any) -> int:
    ledger.set_budget(1)
    accepted = 0
    for _ in range(11):
        try:
            _charge(ledger, F(1, 11))
        except BudgetExceededError:
            break
        accepted += 1
    return accepted


def test_eleven_charges_of_one_eleventh_fit_in_one() -> None:
    ledger = Ledger()
    assert _accepted_elevenths(ledger) == 11
    assert ledger.spent == Budget(F(1), F(0))
    assert ledger.remaining == Budget(F(0), F(0))
    with pytest.raises(BudgetExceededError):
        ledger.check(F(1, 10**30))


def test_validity_float_ledger_fails_the_elevenths_test() -> None:
    assert _accepted_elevenths(_FloatLedger()) != 11


def _overspends_after_tenths(ledger: Any) -> bool:
    """Ten charges of 0.1 fill a budget of 1; does a further sliver still get through?"""
    ledger.set_budget(1)
    for _ in range(10):
        _charge(ledger, _validation.epsilon(0.1))
    try:
        _charge(ledger, F(1, 10**16))
    except BudgetExceededError:
        return False
    return True


def test_ten_tenths_leave_nothing() -> None:
    assert not _overspends_after_tenths(Ledger())


def test_validity_float_ledger_overspends_after_tenths() -> None:
    assert _overspends_after_tenths(_FloatLedger())


def test_point_one_plus_point_two_shows_as_point_three() -> None:
    ledger = Ledger()
    _charge(ledger, _validation.epsilon(0.1))
    _charge(ledger, _validation.epsilon(0.2))
    assert ledger.spent.epsilon == F(3, 10)
    assert repr(ledger.spent) == "Budget(epsilon=0.3, delta=0)"
    assert str(ledger.spent) == "Budget(epsilon=0.3, delta=0)"
    assert "spent=Budget(epsilon=0.3, delta=0)" in repr(ledger)
    assert ledger.to_dict()["spent"] == {"epsilon": "3/10", "delta": "0"}


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


_costs = st.one_of(
    st.fractions(min_value=0, max_value=1, max_denominator=60),
    st.floats(min_value=1e-6, max_value=1.0).map(_validation.epsilon),
)


@settings(max_examples=200, deadline=None)
@given(
    budget=st.fractions(min_value=F(1, 100), max_value=3, max_denominator=100),
    delta_budget=st.fractions(min_value=0, max_value=F(1, 10**5), max_denominator=10**7),
    charges=st.lists(
        st.tuples(_costs, st.fractions(min_value=0, max_value=F(1, 10**6))), max_size=40
    ),
)
def test_random_charges_never_exceed_and_sum_exactly(
    budget: Fraction, delta_budget: Fraction, charges: list[tuple[Fraction, Fraction]]
) -> None:
    ledger = Ledger()
    ledger.set_budget(budget, delta_budget)
    spent_epsilon, spent_delta = F(0), F(0)
    for epsilon, delta in charges:
        fits = spent_epsilon + epsilon <= budget and spent_delta + delta <= delta_budget
        if fits:
            ledger.check(epsilon, delta)
            _charge(ledger, epsilon, delta)
            spent_epsilon += epsilon
            spent_delta += delta
        else:
            before = _state(ledger)
            with pytest.raises(BudgetExceededError):
                ledger.check(epsilon, delta)
            with pytest.raises(BudgetExceededError):
                _charge(ledger, epsilon, delta)
            assert _state(ledger) == before
    assert ledger.spent == Budget(spent_epsilon, spent_delta)
    assert spent_epsilon <= budget
    assert spent_delta <= delta_budget
    assert ledger.remaining == Budget(budget - spent_epsilon, delta_budget - spent_delta)
    record = ledger.to_dict()
    assert sum((F(r["epsilon"]) for r in record["history"]), F(0)) == spent_epsilon
    assert sum((F(r["delta"]) for r in record["history"]), F(0)) == spent_delta


# ---------------------------------------------------------------- check, then charge


def _refusal_is_free(ledger: Ledger) -> bool:
    """A release that does not fit: check and charge both refuse, and nothing changes."""
    ledger.set_budget(1, 1e-6)
    _charge(ledger, F(9, 10))
    before = _state(ledger)
    for epsilon, delta in [(F(2, 10), F(0)), (F(0), F(2, 10**6))]:
        try:
            ledger.check(epsilon, delta)
        except BudgetExceededError:
            pass
        else:
            return False
        try:
            _charge(ledger, epsilon, delta)
        except BudgetExceededError:
            pass
        else:
            return False
    return _state(ledger) == before and ledger.spent == Budget(F(9, 10), F(0))


def test_refused_release_changes_nothing() -> None:
    assert _refusal_is_free(Ledger())


def test_validity_ledger_without_check_fails_refusal_test(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(Ledger, "_check_locked", lambda self, epsilon, delta: None)
    assert not _refusal_is_free(Ledger())


def test_check_never_changes_state() -> None:
    ledger = Ledger()
    ledger.set_budget(1)
    _charge(ledger, F(1, 2))
    before = _state(ledger)
    ledger.check(F(1, 2))
    ledger.check(F(1, 4))
    zero: Any = 0  # ints are exact, so accepted
    ledger.check(zero)
    with pytest.raises(BudgetExceededError):
        ledger.check(F(3, 4))
    assert _state(ledger) == before


def test_refusal_message_says_what_was_asked_what_remains_and_the_fix() -> None:
    ledger = Ledger()
    ledger.set_budget(1)
    _charge(ledger, F(7, 10))
    with pytest.raises(BudgetExceededError) as refused:
        ledger.check(F(1, 2))
    message = str(refused.value)
    assert "epsilon=0.5" in message  # asked
    assert "epsilon=0.3" in message  # remains
    assert "epsilon <= 0.3" in message  # fix
    assert "Nothing was charged" in message


def test_costs_within_budget_that_fit_exactly_are_accepted() -> None:
    ledger = Ledger()
    ledger.set_budget(F(1, 3), F(1, 10**6))
    ledger.check(F(1, 3), F(1, 10**6))
    _charge(ledger, F(1, 3), F(1, 10**6))
    assert ledger.remaining == Budget(F(0), F(0))


def test_concurrent_charges_never_overspend() -> None:
    ledger = Ledger()
    ledger.set_budget(1)
    accepted: list[int] = []

    def spend() -> None:
        for _ in range(25):
            try:
                _charge(ledger, F(1, 100))
            except BudgetExceededError:
                continue
            accepted.append(1)

    threads = [threading.Thread(target=spend) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(accepted) == 100
    assert ledger.spent.epsilon == 1
    assert len(ledger.history) == 100


# ---------------------------------------------------------------- set_budget rules


@pytest.mark.parametrize(
    ("epsilon", "delta", "error"),
    [
        (-1.0, 0.0, InvalidParameterError),
        (0, 0.0, InvalidParameterError),
        (math.nan, 0.0, InvalidParameterError),
        (math.inf, 0.0, InvalidParameterError),
        (True, 0.0, InvalidParameterTypeError),
        ("1", 0.0, InvalidParameterTypeError),
        (None, 0.0, InvalidParameterTypeError),
        (1.0, -1e-6, InvalidParameterError),
        (1.0, 1.0, InvalidParameterError),
        (1.0, math.nan, InvalidParameterError),
        (1.0, math.inf, InvalidParameterError),
        (1.0, False, InvalidParameterTypeError),
        (1.0, "0", InvalidParameterTypeError),
    ],
)
def test_set_budget_refuses_bad_values(epsilon: Any, delta: Any, error: type[Exception]) -> None:
    ledger = Ledger()
    with pytest.raises(error):
        ledger.set_budget(epsilon, delta)
    assert ledger.total.unlimited


def test_set_budget_refuses_a_total_below_what_was_spent() -> None:
    ledger = Ledger()
    _charge(ledger, F(1, 2), F(1, 10**7))  # spent while unlimited still counts
    with pytest.raises(BudgetExceededError, match=r"epsilon >= 0\.5"):
        ledger.set_budget(0.4, 1e-6)
    with pytest.raises(BudgetExceededError, match="delta >= "):
        ledger.set_budget(1.0)  # delta 0 is below the delta spent
    assert ledger.total.unlimited
    ledger.set_budget(0.5, 1e-7)
    assert ledger.remaining == Budget(F(0), F(0))


def test_set_budget_cannot_raise_but_can_lower() -> None:
    ledger = Ledger()
    ledger.set_budget(1, 1e-6)
    _charge(ledger, F(1, 4))
    for epsilon, delta in [(2, 1e-6), (1, 2e-6), (1.5, 0)]:
        with pytest.raises(InvalidParameterError, match="never raised"):
            ledger.set_budget(epsilon, delta)
    assert ledger.total == Budget(F(1), F(1, 10**6))
    ledger.set_budget(1, 1e-6)  # setting the same total again is allowed
    ledger.set_budget(0.5)  # lowering is allowed (delta to 0 as well)
    assert ledger.total == Budget(F(1, 2), F(0))
    with pytest.raises(InvalidParameterError):
        ledger.set_budget(0.6)
    with pytest.raises(BudgetExceededError):
        ledger.set_budget(0.2)  # lowering below spent
    assert ledger.total == Budget(F(1, 2), F(0))


# ---------------------------------------------------------------- bad costs


_BAD_COSTS: list[tuple[str, Any, Any, type[Exception]]] = [
    ("negative epsilon", F(-1, 10), F(0), InvalidParameterError),
    ("negative int epsilon", -1, F(0), InvalidParameterError),
    ("nan epsilon", math.nan, F(0), InvalidParameterError),
    ("inf epsilon", math.inf, F(0), InvalidParameterError),
    ("-inf epsilon", -math.inf, F(0), InvalidParameterError),
    ("float epsilon", 0.1, F(0), InvalidParameterError),
    ("numpy float epsilon", np.float64(0.1), F(0), InvalidParameterError),
    ("str epsilon", "0.1", F(0), InvalidParameterTypeError),
    ("bool epsilon", True, F(0), InvalidParameterTypeError),
    ("None epsilon", None, F(0), InvalidParameterTypeError),
    ("Decimal epsilon", Decimal("0.1"), F(0), InvalidParameterTypeError),
    ("negative delta", F(1, 10), F(-1, 10**6), InvalidParameterError),
    ("nan delta", F(1, 10), math.nan, InvalidParameterError),
    ("delta of 1", F(1, 10), F(1), InvalidParameterError),
]


@pytest.mark.parametrize(
    ("epsilon", "delta", "error"),
    [case[1:] for case in _BAD_COSTS],
    ids=[case[0] for case in _BAD_COSTS],
)
def test_bad_costs_never_reach_the_ledger(epsilon: Any, delta: Any, error: type[Exception]) -> None:
    ledger = Ledger()
    ledger.set_budget(1)
    _charge(ledger, F(1, 2))
    before = _state(ledger)
    with pytest.raises(error):
        ledger.check(epsilon, delta)
    with pytest.raises(error):
        _charge(ledger, epsilon, delta)
    assert _state(ledger) == before


def _negative_cost_refunds(ledger: Ledger) -> bool:
    ledger.set_budget(1)
    _charge(ledger, F(1))
    with contextlib.suppress(InvalidParameterError):
        _charge(ledger, F(-1, 2))
    return ledger.remaining.epsilon > 0


def test_negative_cost_cannot_refund() -> None:
    assert not _negative_cost_refunds(Ledger())


def test_validity_ledger_trusting_costs_fails_refund_test(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_ledger, "_cost", lambda value, name: Fraction(value))
    assert _negative_cost_refunds(Ledger())


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("method", 3, InvalidParameterTypeError),
        ("mechanism", None, InvalidParameterTypeError),
        ("columns", 5, InvalidParameterTypeError),
        ("noise_scale", math.nan, InvalidParameterError),
        ("noise_scale", -1.0, InvalidParameterError),
        ("noise_scale", "big", InvalidParameterTypeError),
        ("private", 1, InvalidParameterTypeError),
    ],
)
def test_charge_refuses_bad_metadata(field: str, value: Any, error: type[Exception]) -> None:
    ledger = Ledger()
    arguments: dict[str, Any] = {
        "method": "count",
        "columns": ["age"],
        "mechanism": "geometric",
        "epsilon": F(1, 10),
        "delta": F(0),
        "noise_scale": 10.0,
        "private": True,
    }
    arguments[field] = value
    with pytest.raises(error):
        ledger.charge(**arguments)
    assert ledger.spent == Budget(F(0), F(0))
    assert ledger.history.empty


# ---------------------------------------------------------------- history and display


def test_history_columns_dtypes_and_values() -> None:
    empty = Ledger().history
    ledger = Ledger()
    before = pd.Timestamp.now(tz="UTC")
    _charge(ledger, F(1, 10), method="crosstab", columns=["Occupation", "Sex"], noise_scale=10.0)
    _charge(ledger, F(1, 3), F(1, 10**6), method="sum", columns="income", private=False)
    after = pd.Timestamp.now(tz="UTC")
    history = ledger.history
    expected = [
        "time",
        "method",
        "columns",
        "mechanism",
        "epsilon",
        "delta",
        "noise_scale",
        "private",
    ]
    for frame in (empty, history):
        assert list(frame.columns) == expected
        assert isinstance(frame["time"].dtype, pd.DatetimeTZDtype)
        assert str(frame["time"].dt.tz) == "UTC"
        for column in ("method", "columns", "mechanism"):
            assert pd.api.types.is_string_dtype(frame[column].dtype)
        for column in ("epsilon", "delta", "noise_scale"):
            assert frame[column].dtype == np.float64
        assert frame["private"].dtype == np.bool_
    assert len(empty) == 0
    assert len(history) == 2
    assert list(history["method"]) == ["crosstab", "sum"]
    assert list(history["columns"]) == ["Occupation, Sex", "income"]
    assert history["epsilon"].tolist() == [0.1, float(F(1, 3))]
    assert history["delta"].tolist() == [0.0, 1e-6]
    assert history["noise_scale"].iloc[0] == 10.0
    assert math.isnan(history["noise_scale"].iloc[1])
    assert history["private"].tolist() == [True, False]
    assert (history["time"] >= before).all()
    assert (history["time"] <= after).all()
    # the frame is a copy for display: editing it does not touch the ledger
    history.loc[0, "epsilon"] = 0.0
    assert ledger.history["epsilon"].iloc[0] == 0.1


def test_repr_html_contains_the_numbers_and_escapes() -> None:
    ledger = Ledger()
    ledger.set_budget(1, 1e-6)
    _charge(ledger, F(3, 10), method="crosstab", columns=["Occupation", "Sex"])
    _charge(ledger, F(1, 30), method="<script>", columns=["a&b"])
    page = ledger._repr_html_()
    for text in ("total", "spent", "remaining", "0.000001", "crosstab", "Occupation, Sex"):
        assert text in page
    assert "1/3 (≈0.333333)" in page  # spent: 3/10 + 1/30
    assert "2/3 (≈0.666667)" in page  # remaining
    assert "1/30 (≈0.0333333)" in page  # a history row, exact
    assert "<script>" not in page
    assert "&lt;script&gt;" in page
    assert "a&amp;b" in page
    assert "No releases yet" in Ledger()._repr_html_()


def test_repr_and_to_dict_are_exact_and_json_serializable() -> None:
    ledger = Ledger()
    ledger.set_budget(1)
    for _ in range(3):
        _charge(ledger, F(1, 11))
    assert repr(ledger) == (
        "Ledger(total=Budget(epsilon=1, delta=0), spent=Budget(epsilon=3/11 (≈0.272727), "
        "delta=0), remaining=Budget(epsilon=8/11 (≈0.727273), delta=0), releases=3)"
    )
    state = json.loads(json.dumps(ledger.to_dict()))
    assert state["format"] == "dpframe.ledger"
    assert state["id"] == ledger.id
    assert state["total"] == {"epsilon": "1", "delta": "0"}
    assert state["spent"] == {"epsilon": "3/11", "delta": "0"}
    assert [row["epsilon"] for row in state["history"]] == ["1/11"] * 3
    assert Ledger().to_dict()["total"] == {"epsilon": "inf", "delta": "inf"}


# ---------------------------------------------------------------- the ledger follows the data


_SAME_LEDGER_OPERATIONS: dict[str, Callable[[pd.DataFrame], pd.DataFrame | pd.Series[Any]]] = {
    "copy": lambda df: df.copy(),
    "copy(deep=False)": lambda df: df.copy(deep=False),
    "boolean filter": lambda df: df[df["age"] > 30],
    "column selection": lambda df: df[["age", "sex"]],
    "series extraction": lambda df: df["age"],
    "attribute series": lambda df: df.age,
    "loc": lambda df: df.loc[df["age"] > 30, ["age"]],
    "iloc": lambda df: df.iloc[:3],
    "query": lambda df: df.query("age > 30"),
    "assign": lambda df: df.assign(decade=df["age"] // 10),
    "head": lambda df: df.head(3),
    "sample": lambda df: df.sample(3),
    "sort_values": lambda df: df.sort_values("age"),
    "set_index": lambda df: df.set_index("sex"),
    "reset_index": lambda df: df.set_index("sex").reset_index(),
    "concat with itself": lambda df: pd.concat([df, df]),
    "concat of derived frames": lambda df: pd.concat([df.head(2), df[df["age"] > 50]]),
    "concat axis=1": lambda df: pd.concat([df[["age"]], df[["sex"]]], axis=1),
    "merge": lambda df: df.merge(df[["key", "sex"]], on="key"),
    "join": lambda df: df.set_index("key")[["age"]].join(df.set_index("key")[["sex"]]),
    "copy.copy": copy.copy,
    "copy.deepcopy": copy.deepcopy,
    "pickle bytes": lambda df: pickle.loads(pickle.dumps(df)),
    "pickle of a derived frame": lambda df: pickle.loads(pickle.dumps(df[df["age"] > 30])),
}


def _shares_ledger(operation: Callable[[pd.DataFrame], Any]) -> bool:
    frame, ledger = _budgeted()
    derived = operation(frame)
    derived_ledger = ledger_of(derived, create=False)
    if derived_ledger is None:
        return False
    _charge(derived_ledger, F(1, 4))
    return derived_ledger is ledger and ledger.spent.epsilon == F(1, 4)


@pytest.mark.parametrize(
    "operation", _SAME_LEDGER_OPERATIONS.values(), ids=_SAME_LEDGER_OPERATIONS.keys()
)
def test_derived_frame_spends_the_same_budget(
    operation: Callable[[pd.DataFrame], Any],
) -> None:
    assert _shares_ledger(operation)


def test_validity_forking_handle_fails_the_sharing_test(monkeypatch: pytest.MonkeyPatch) -> None:
    # A handle that deep-copies into a fresh ledger is what a plain object in attrs does.
    monkeypatch.setattr(_ledger._LedgerHandle, "__deepcopy__", lambda self, memo: Ledger()._handle)
    assert not _shares_ledger(lambda df: df[df["age"] > 30])


def test_ledger_itself_is_never_copied() -> None:
    ledger = Ledger()
    assert copy.copy(ledger) is ledger
    assert copy.deepcopy(ledger) is ledger
    assert copy.deepcopy({"a": [ledger]})["a"][0] is ledger
    assert pickle.loads(pickle.dumps(ledger)) is ledger


def test_ledger_of_without_create_leaves_frame_alone() -> None:
    frame = _frame()
    assert ledger_of(frame, create=False) is None
    assert frame.attrs == {}
    ledger = ledger_of(frame)
    assert ledger is not None
    assert ledger.total.unlimited
    assert ledger_of(frame) is ledger
    with pytest.raises(InvalidParameterTypeError):
        ledger_of([1, 2, 3])  # type: ignore[arg-type]


def test_attrs_hold_a_json_serializable_mirror() -> None:
    frame, ledger = _budgeted()
    _charge(ledger, F(1, 11))
    state = json.loads(json.dumps(frame.attrs))["dpframe"]
    assert state == json.loads(json.dumps(ledger.to_dict()))


# ---------------------------------------------------------------- different ledgers


_COMBINATIONS: dict[str, Callable[[pd.DataFrame, pd.DataFrame], Any]] = {
    "concat": lambda a, b: pd.concat([a, b]),
    "concat axis=1": lambda a, b: pd.concat([a, b.add_suffix("_b")], axis=1),
    "concat of series": lambda a, b: pd.concat([a["age"], b["age"]]),
    "merge": lambda a, b: a.merge(b, on="key"),
    "join": lambda a, b: a.set_index("key").join(
        b.set_index("key"),
        suffixes=("", "_b"),  # type: ignore[call-arg]  # pandas 3.1 API, stubs lag
    ),
    "join list": lambda a, b: a.set_index("key").join([b.set_index("key").add_suffix("_b")]),
}


def _combination_refused(combine: Callable[[pd.DataFrame, pd.DataFrame], Any]) -> bool:
    left, left_ledger = _budgeted(1.0)
    right, right_ledger = _budgeted(2.0)
    try:
        combine(left, right)
    except LedgerConflictError:
        return left_ledger.spent == right_ledger.spent == Budget(F(0), F(0))
    return False


@pytest.mark.parametrize("combine", _COMBINATIONS.values(), ids=_COMBINATIONS.keys())
def test_combining_frames_with_different_ledgers_is_refused(
    combine: Callable[[pd.DataFrame, pd.DataFrame], Any],
) -> None:
    assert _combination_refused(combine)


def test_validity_lenient_handle_fails_the_conflict_test(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_ledger._LedgerHandle, "__eq__", lambda self, other: True)
    assert not _combination_refused(_COMBINATIONS["concat"])


def test_conflict_message_names_the_fix() -> None:
    left, _ = _budgeted()
    right, _ = _budgeted()
    with pytest.raises(LedgerConflictError, match=r"set_budget once on the combined frame"):
        pd.concat([left, right])


def test_frame_read_from_file_conflicts_with_another_ledger(tmp_path: Path) -> None:
    saved, _ = _budgeted()
    saved.to_parquet(tmp_path / "saved.parquet")
    loaded = pd.read_parquet(tmp_path / "saved.parquet")  # attrs hold a plain dict
    other, _ = _budgeted()
    with pytest.raises(LedgerConflictError):
        pd.concat([other, loaded])
    with pytest.raises(LedgerConflictError):
        pd.concat([loaded, other])
    same = pd.concat([saved, loaded])  # same id: allowed
    assert ledger_of(same) is ledger_of(saved)


def test_combined_ledger() -> None:
    left, ledger = _budgeted()
    derived = left[left["age"] > 30]
    plain = _frame()
    assert combined_ledger([left, derived, plain]) is ledger
    assert ledger_of(plain, create=False) is ledger  # the unbudgeted frame adopted it
    other, _ = _budgeted()
    newcomer = _frame()
    with pytest.raises(LedgerConflictError):
        combined_ledger([left, other, newcomer])
    assert ledger_of(newcomer, create=False) is None  # refused: nothing attached
    fresh = [_frame(), _frame()]
    shared = combined_ledger(fresh)
    assert all(ledger_of(frame, create=False) is shared for frame in fresh)
    with pytest.raises(InvalidParameterError):
        combined_ledger([])
    with pytest.raises(InvalidParameterTypeError):
        combined_ledger(left)  # type: ignore[arg-type]


# What pandas 3.1 gives no hook for. These tests pin the documented limitations; if
# one starts failing, pandas changed and the module docstring must be updated.


def test_documented_concat_with_an_unbudgeted_frame_drops_the_ledger() -> None:
    budgeted, _ = _budgeted()
    combined = pd.concat([budgeted, _frame()])
    assert ledger_of(combined, create=False) is None


def test_documented_concat_with_other_differing_attrs_drops_the_ledger() -> None:
    first, ledger = _budgeted()
    second = first.copy()
    first.attrs["source"] = "a"
    second.attrs["source"] = "b"
    assert ledger_of(second) is ledger
    assert ledger_of(pd.concat([first, second]), create=False) is None


def test_documented_binary_operation_keeps_the_right_operand_ledger() -> None:
    left, _ = _budgeted()
    right, right_ledger = _budgeted()
    assert ledger_of(left[["age"]] + right[["age"]], create=False) is right_ledger
    assert ledger_of(left["age"] + right["age"], create=False) is right_ledger


def test_documented_new_frame_from_values_has_no_ledger() -> None:
    budgeted, _ = _budgeted()
    assert ledger_of(pd.DataFrame(budgeted.to_numpy()), create=False) is None
    assert ledger_of(pd.DataFrame(budgeted), create=False) is None


# ---------------------------------------------------------------- round trips


def test_pickle_bytes_round_trip_reconnects_to_the_live_ledger() -> None:
    frame, ledger = _budgeted()
    _charge(ledger, F(1, 3))
    restored = pickle.loads(pickle.dumps(frame))
    assert ledger_of(restored) is ledger
    assert ledger.total == Budget(F(1), F(0))
    assert ledger.spent == Budget(F(1, 3), F(0))
    _charge(ledger_of(restored), F(1, 3))
    assert ledger.spent.epsilon == F(2, 3)


def test_pickle_file_round_trip_reconnects_to_the_live_ledger(tmp_path: Path) -> None:
    frame, ledger = _budgeted()
    _charge(ledger, F(1, 3))
    frame.to_pickle(tmp_path / "frame.pkl")
    _charge(ledger, F(1, 3))  # spent after the save
    restored = pd.read_pickle(tmp_path / "frame.pkl")
    assert ledger_of(restored) is ledger
    assert ledger.spent.epsilon == F(2, 3)  # the older copy did not reset anything
    assert ledger.total.epsilon == 1


def _pickle_round_trip_keeps_spending() -> bool:
    """Save, spend more, let every frame of the ledger die, load: is the spending kept?"""
    frame, ledger = _budgeted()
    _charge(ledger, F(3, 10))
    saved = pickle.dumps(frame)
    _charge(ledger, F(2, 10))
    ledger_id = ledger.id
    del frame, ledger
    gc.collect()
    assert ledger_id not in _ledger._LIVE
    restored = ledger_of(pickle.loads(saved))
    assert restored is not None
    history = restored.to_dict()["history"]
    return (
        restored.id == ledger_id
        and restored.spent == Budget(F(1, 2), F(0))
        and restored.total == Budget(F(1), F(0))
        and sum((F(row["epsilon"]) for row in history), F(0)) == F(1, 2)
    )


def test_pickle_after_the_ledger_died_never_refunds() -> None:
    assert _pickle_round_trip_keeps_spending()


def test_validity_resetting_restore_fails_the_pickle_test(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def restore_from_scratch(state: Any) -> Ledger:
        fresh = Ledger()
        fresh.set_budget(1)
        return fresh

    monkeypatch.setattr(_ledger, "_restore", restore_from_scratch)
    assert not _pickle_round_trip_keeps_spending()


def test_a_copy_that_spent_more_is_absorbed_conservatively() -> None:
    # A copy of this ledger that went on elsewhere (another process) spent more and
    # lowered the total; reconnecting must keep the highest spent and the lowest total.
    _, ledger = _budgeted()
    _charge(ledger, F(1, 10))
    elsewhere = ledger.to_dict()
    elsewhere["total"] = {"epsilon": "4/5", "delta": "0"}
    elsewhere["spent"] = {"epsilon": "3/10", "delta": "0"}
    elsewhere["history"].append({**elsewhere["history"][0], "epsilon": "1/5"})
    other = _frame()
    other.attrs["dpframe"] = json.loads(json.dumps(elsewhere))
    assert ledger_of(other) is ledger
    assert ledger.total == Budget(F(4, 5), F(0))
    assert ledger.spent == Budget(F(3, 10), F(0))
    history = ledger.history
    assert history["method"].tolist() == ["count", "(restored)"]
    assert sum((F(row["epsilon"]) for row in ledger.to_dict()["history"]), F(0)) == F(3, 10)
    # an older copy (less spent, higher total) changes nothing
    older = _frame()
    older.attrs["dpframe"] = {
        **elsewhere,
        "total": {"epsilon": "1", "delta": "0"},
        "spent": {"epsilon": "0", "delta": "0"},
        "history": [],
    }
    before = _state(ledger)
    assert ledger_of(older) is ledger
    assert _state(ledger) == before


def test_parquet_round_trip_restores_and_reconnects(tmp_path: Path) -> None:
    frame, ledger = _budgeted()
    ledger.set_budget(1)
    _charge(ledger, F(1, 11), method="crosstab", columns=["age", "sex"], noise_scale=11.0)
    path = tmp_path / "frame.parquet"
    frame.to_parquet(path)
    loaded = pd.read_parquet(path)
    pd.testing.assert_frame_equal(loaded, frame)
    assert ledger_of(loaded) is ledger
    assert isinstance(loaded.attrs["dpframe"], _ledger._LedgerHandle)
    # a second write carries the spending done since
    _charge(ledger, F(1, 11))
    loaded.to_parquet(path)
    assert json.loads(json.dumps(pd.read_parquet(path).attrs))["dpframe"]["spent"] == {
        "epsilon": "2/11",
        "delta": "0",
    }


def test_parquet_round_trip_rebuilds_when_the_ledger_is_gone(tmp_path: Path) -> None:
    frame, ledger = _budgeted()
    _charge(ledger, F(1, 7))
    ledger_id = ledger.id
    frame.to_parquet(tmp_path / "frame.parquet")
    del frame, ledger
    gc.collect()
    restored = ledger_of(pd.read_parquet(tmp_path / "frame.parquet"))
    assert restored is not None
    assert restored.id == ledger_id
    assert restored.spent == Budget(F(1, 7), F(0))
    assert restored.total == Budget(F(1), F(0))
    assert restored.history["method"].tolist() == ["count"]


def test_files_restore_the_ledger_in_a_new_process(tmp_path: Path) -> None:
    frame = _frame()
    ledger = ledger_of(frame)
    assert ledger is not None
    ledger.set_budget(2, 1e-6)
    _charge(ledger, F(1, 3), F(1, 10**7), noise_scale=3.0)
    _charge(ledger, F(1, 10))
    frame.to_pickle(tmp_path / "frame.pkl")
    frame.to_parquet(tmp_path / "frame.parquet")
    script = (
        "import json, sys, pandas as pd\n"
        "from dpframe._ledger import ledger_of\n"
        "out = {}\n"
        "for name, frame in [('pickle', pd.read_pickle(sys.argv[1])),\n"
        "                    ('parquet', pd.read_parquet(sys.argv[2]))]:\n"
        "    state = ledger_of(frame).to_dict()\n"
        "    out[name] = [state['id'], state['total'], state['spent'], len(state['history'])]\n"
        "print(json.dumps(out))\n"
    )
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            str(tmp_path / "frame.pkl"),
            str(tmp_path / "frame.parquet"),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    expected = [
        ledger.id,
        {"epsilon": "2", "delta": "1/1000000"},
        {"epsilon": "13/30", "delta": "1/10000000"},
        2,
    ]
    assert json.loads(result.stdout) == {"pickle": expected, "parquet": expected}


def test_to_csv_works_and_carries_no_ledger(tmp_path: Path) -> None:
    frame, ledger = _budgeted()
    text = frame.to_csv(index=False)
    assert text.splitlines()[0] == "key,age,sex"
    frame.to_csv(tmp_path / "frame.csv", index=False)
    loaded = pd.read_csv(tmp_path / "frame.csv")
    assert ledger_of(loaded, create=False) is None  # documented: CSV keeps no metadata
    assert ledger_of(frame) is ledger


def test_deepcopy_shares_the_ledger() -> None:
    frame, ledger = _budgeted()
    duplicate = copy.deepcopy(frame)
    assert duplicate.attrs["dpframe"] is frame.attrs["dpframe"]
    _charge(ledger_of(duplicate), F(1, 2))
    assert ledger.spent.epsilon == F(1, 2)


@pytest.mark.parametrize(
    "record",
    [
        "not a ledger",
        {"format": "dpframe.ledger"},
        {"format": "dpframe.ledger", "version": 99, "id": "x"},
        {
            "format": "dpframe.ledger",
            "version": 1,
            "id": "x",
            "total": {"epsilon": "1", "delta": "0"},
            "spent": {"epsilon": "-1", "delta": "0"},
            "history": [],
        },
        {
            "format": "dpframe.ledger",
            "version": 1,
            "id": "x",
            "total": {"epsilon": "1", "delta": "0"},
            "spent": {"epsilon": "0", "delta": "0"},
            "history": [{"time": "2025-01-01T00:00:00+00:00", "epsilon": "1/2"}],
        },
    ],
)
def test_malformed_record_in_attrs_is_refused(record: Any) -> None:
    frame = _frame()
    frame.attrs["dpframe"] = record
    with pytest.raises(InvalidParameterError, match="not a valid dpframe ledger record"):
        ledger_of(frame)


def test_charge_many_is_all_or_nothing() -> None:
    """A multi-part release (auto bounds + sum) that no longer fits records no part."""
    from dpframe._ledger import Ledger

    ledger = Ledger()
    ledger.set_budget(1.0)
    part = {
        "method": "sum",
        "columns": ["x"],
        "mechanism": "geometric",
        "noise_scale": 1.0,
        "private": True,
        "delta": Fraction(0),
    }
    ledger.charge(**{**part, "epsilon": Fraction(1, 2)})
    with pytest.raises(BudgetExceededError):
        ledger.charge_many(
            [{**part, "epsilon": Fraction(1, 4)}, {**part, "epsilon": Fraction(1, 3)}]
        )
    assert ledger.spent.epsilon == Fraction(1, 2)
    assert len(ledger.history) == 1
    ledger.charge_many([{**part, "epsilon": Fraction(1, 4)}, {**part, "epsilon": Fraction(1, 4)}])
    assert ledger.remaining.epsilon == 0
