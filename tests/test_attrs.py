"""dpframe._attrs: the ledger follows its data through pandas, pinned to pandas' behaviour.

These tests pin how pandas propagates ``attrs`` (the one thing the handle depends on):
derived frames share the ledger, combining different ledgers is refused, and the cases
pandas gives no hook for are documented by tests that fail if pandas starts keeping
(or dropping) the ledger. Validity twins: a handle that forks, a handle that hides
conflicts.
"""

from __future__ import annotations

import copy
import io
import json
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpframe import _attrs
from dpframe._attrs import combined_ledger, ledger_of
from dpframe._budget import Budget
from dpframe._ledger import Ledger
from dpframe.errors import (
    BudgetNotSetError,
    InvalidParameterError,
    InvalidParameterTypeError,
    LedgerConflictError,
    PrivacyUnitError,
)
from tests._ledgers import F, budgeted_frame, charge, plain_frame

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
    frame, ledger = budgeted_frame()
    derived = operation(frame)
    derived_ledger = ledger_of(derived, create=False)
    if derived_ledger is None:
        return False
    charge(derived_ledger, F(1, 4))
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
    monkeypatch.setattr(
        _attrs._LedgerHandle, "__deepcopy__", lambda self, memo: _attrs.handle_of(Ledger())
    )
    assert not _shares_ledger(lambda df: df[df["age"] > 30])


def test_ledger_itself_is_never_copied() -> None:
    ledger = Ledger()
    assert copy.copy(ledger) is ledger
    assert copy.deepcopy(ledger) is ledger
    assert copy.deepcopy({"a": [ledger]})["a"][0] is ledger
    assert pickle.loads(pickle.dumps(ledger)) is ledger


def test_ledger_of_without_create_leaves_frame_alone() -> None:
    frame = plain_frame()
    assert ledger_of(frame, create=False) is None
    assert frame.attrs == {}
    ledger = ledger_of(frame)
    assert ledger is not None
    assert ledger.total.unlimited
    assert ledger_of(frame) is ledger
    with pytest.raises(InvalidParameterTypeError):
        ledger_of([1, 2, 3])  # type: ignore[arg-type]


def test_attrs_hold_a_json_serializable_mirror() -> None:
    frame, ledger = budgeted_frame()
    charge(ledger, F(1, 11))
    state = json.loads(json.dumps(frame.attrs))["dpframe"]
    assert state == json.loads(json.dumps(ledger.to_dict()))


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
    left, left_ledger = budgeted_frame(1.0)
    right, right_ledger = budgeted_frame(2.0)
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
    monkeypatch.setattr(_attrs._LedgerHandle, "__eq__", lambda self, other: True)
    assert not _combination_refused(_COMBINATIONS["concat"])


def test_conflict_message_names_the_fix() -> None:
    left, _ = budgeted_frame()
    right, _ = budgeted_frame()
    with pytest.raises(LedgerConflictError, match=r"set_budget once on the combined frame"):
        pd.concat([left, right])


def test_frame_read_from_file_conflicts_with_another_ledger(tmp_path: Path) -> None:
    saved, _ = budgeted_frame()
    saved.to_parquet(tmp_path / "saved.parquet")
    loaded = pd.read_parquet(tmp_path / "saved.parquet")  # attrs hold a plain dict
    other, _ = budgeted_frame()
    with pytest.raises(LedgerConflictError):
        pd.concat([other, loaded])
    with pytest.raises(LedgerConflictError):
        pd.concat([loaded, other])
    same = pd.concat([saved, loaded])  # same id: allowed
    assert ledger_of(same) is ledger_of(saved)


def test_combined_ledger() -> None:
    left, ledger = budgeted_frame()
    derived = left[left["age"] > 30]
    plain = plain_frame()
    assert combined_ledger([left, derived, plain]) is ledger
    assert ledger_of(plain, create=False) is ledger  # the unbudgeted frame adopted it
    other, _ = budgeted_frame()
    newcomer = plain_frame()
    with pytest.raises(LedgerConflictError):
        combined_ledger([left, other, newcomer])
    assert ledger_of(newcomer, create=False) is None  # refused: nothing attached
    fresh = [plain_frame(), plain_frame()]
    shared = combined_ledger(fresh)
    assert all(ledger_of(frame, create=False) is shared for frame in fresh)
    with pytest.raises(InvalidParameterError):
        combined_ledger([])
    with pytest.raises(InvalidParameterTypeError):
        combined_ledger(left)  # type: ignore[arg-type]


def test_documented_concat_with_an_unbudgeted_frame_drops_the_ledger() -> None:
    budgeted, _ = budgeted_frame()
    combined = pd.concat([budgeted, plain_frame()])
    assert ledger_of(combined, create=False) is None


def test_documented_concat_with_other_differing_attrs_drops_the_ledger() -> None:
    first, ledger = budgeted_frame()
    second = first.copy()
    first.attrs["source"] = "a"
    second.attrs["source"] = "b"
    assert ledger_of(second) is ledger
    assert ledger_of(pd.concat([first, second]), create=False) is None


def test_documented_binary_operation_keeps_the_right_operand_ledger() -> None:
    left, _ = budgeted_frame()
    right, right_ledger = budgeted_frame()
    assert ledger_of(left[["age"]] + right[["age"]], create=False) is right_ledger
    assert ledger_of(left["age"] + right["age"], create=False) is right_ledger


def test_documented_new_frame_from_values_has_no_ledger() -> None:
    budgeted, _ = budgeted_frame()
    assert ledger_of(pd.DataFrame(budgeted.to_numpy()), create=False) is None
    assert ledger_of(pd.DataFrame(budgeted), create=False) is None


# ---------------------------------------------------------------- the README's table, row by row


def _people() -> pd.DataFrame:
    frame = pd.DataFrame(
        {
            "id": range(6),
            "k": pd.Categorical(list("aabbca"), categories=list("abc")),
            "j": list("xyxyxy"),
            "x": np.arange(6.0),
        }
    )
    frame.dp.set_budget(epsilon=10.0, domains={"k": list("abc")})
    return frame


_PUBLIC = pd.DataFrame({"k": pd.Categorical(list("abc"), categories=list("abc")), "z": [1, 2, 3]})

# (operation, what happens to the budget when a release is asked of the result)
PANDAS_OPERATIONS: dict[str, tuple[Callable[[pd.DataFrame], Any], str]] = {
    "copy": (lambda d: d.copy(), "shared"),
    "boolean filter": (lambda d: d[d["x"] > 1], "shared"),
    "column selection": (lambda d: d[["k", "x"]], "shared"),
    "loc / iloc": (lambda d: d.iloc[1:4], "shared"),
    "query": (lambda d: d.query("x > 1"), "shared"),
    "assign": (lambda d: d.assign(y=d["x"] * 2), "shared"),
    "head / sample": (lambda d: d.head(4).sample(frac=1.0), "shared"),
    "sort_values": (lambda d: d.sort_values("x"), "shared"),
    "set_index / reset_index": (lambda d: d.set_index("j").reset_index(), "shared"),
    "astype / rename / drop / fillna": (
        lambda d: d.astype({"x": "float32"}).rename(columns={"j": "J"}).drop(columns="J").fillna(0),
        "shared",
    ),
    "pickle": (lambda d: pickle.loads(pickle.dumps(d)), "shared"),
    "concat of parts": (lambda d: pd.concat([d.iloc[:3], d.iloc[3:]]), "shared"),
    "df.dp.merge with a public table": (lambda d: d.dp.merge(_PUBLIC, on="k"), "shared"),
    "df.dp.join with a public table": (
        lambda d: d.dp.join(_PUBLIC.set_index("k"), on="k"),
        "shared",
    ),
    "merge with a public table": (lambda d: d.merge(_PUBLIC, on="k"), "lost"),
    "join with a public table": (lambda d: d.join(_PUBLIC.set_index("k"), on="k"), "lost"),
    "concat with a public table": (lambda d: pd.concat([d, _PUBLIC]), "lost"),
    "pd.DataFrame(df)": (lambda d: pd.DataFrame(d), "lost"),
    "pivot": (lambda d: d.pivot(index="id", columns="j", values="x"), "lost"),
    "groupby().agg(func)": (
        lambda d: d.groupby("j")["x"].agg(lambda s: s.max()).to_frame(),
        "lost",
    ),
    "CSV round trip": (lambda d: pd.read_csv(io.StringIO(d.to_csv(index=False))), "lost"),
    "concat with itself": (lambda d: pd.concat([d, d]), "repeated"),
    "explode": (lambda d: d.assign(l=[[1, 2]] * 6).explode("l"), "repeated"),
}


@pytest.mark.parametrize(
    ("operation", "outcome"), PANDAS_OPERATIONS.values(), ids=PANDAS_OPERATIONS.keys()
)
def test_each_pandas_operation_keeps_refuses_or_loses_the_ledger_as_documented(
    operation: Callable[[pd.DataFrame], Any], outcome: str
) -> None:
    people = _people()
    derived = operation(people)
    if outcome == "shared":
        derived.dp.count(epsilon=4.0)
        assert people.dp.ledger.spent.epsilon == 4  # the release spent the source's budget
    elif outcome == "lost":
        with pytest.raises(BudgetNotSetError, match="set_budget"):
            derived.dp.count(epsilon=4.0)
    else:
        with pytest.raises(PrivacyUnitError, match="different person"):
            derived.dp.count(epsilon=4.0)
    if outcome != "shared":
        assert people.dp.ledger.spent.epsilon == 0


def test_combining_two_budgets_is_refused_in_pandas_itself() -> None:
    first, second = _people(), _people()
    with pytest.raises(LedgerConflictError):
        pd.concat([first, second])
    with pytest.raises(LedgerConflictError):
        first.merge(second, on="id")
