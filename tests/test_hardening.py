"""Misuse: awkward data, budget evasion through pandas operations, randomness hygiene."""

from __future__ import annotations

import copy
import io
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings

import dpframe
import dpframe.mechanisms as dpm
from dpframe import _random
from dpframe.datasets import census
from dpframe.errors import (
    BudgetExceededError,
    BudgetNotSetError,
    DomainError,
    InvalidParameterError,
    InvalidParameterTypeError,
    LedgerConflictError,
    PrivacyUnitError,
)
from tests.conftest import budgeted

# ---------------------------------------------------------------- awkward data


def test_empty_frame_releases_noise_around_zero() -> None:
    empty = budgeted(census(0))
    assert len(empty) == 0
    table = empty.dp.crosstab("Occupation", "Sex", epsilon=1.0)
    assert table.shape == (5, 2)
    assert isinstance(empty.dp.count(epsilon=1.0), int)
    total = empty.dp.sum("Earnings", epsilon=1.0, bounds=(0, 10))
    assert abs(total) < 10 * 60  # noise only: |noise| < 60 sensitivities w.p. 1 - 1e-26


def test_one_row_frame() -> None:
    one = budgeted(census(1, rng=3))
    assert one.dp.count(epsilon=1.0, by="Sex").shape == (2,)
    assert isinstance(one.dp.sum("Age", epsilon=1.0, bounds=(0, 120)), float)


def test_nullable_integer_and_float_columns_sum_with_missing_values_skipped() -> None:
    frame = pd.DataFrame(
        {
            "i": pd.array([1, None, 3], dtype="Int64"),
            "f": pd.array([1.5, None, 2.5], dtype="Float64"),
        }
    )
    budgeted(frame)
    assert abs(frame.dp.sum("i", epsilon=1e9, bounds=(0, 10)) - 4) < 1e-3
    assert abs(frame.dp.sum("f", epsilon=1e9, bounds=(0, 10)) - 4) < 1e-3


def test_a_categorical_read_back_as_an_arrow_dictionary_groups(tmp_path: Path) -> None:
    # read_parquet(dtype_backend="pyarrow") gives dictionary<...>[pyarrow]: Arrow's lookup
    # raised its own ArrowTypeError, after bounds="auto" had charged its share.
    frame = pd.DataFrame({"sex": pd.Categorical(["F", "M", "M", "F", "M"]), "x": [1.0] * 5})
    frame.to_parquet(tmp_path / "dictionary.parquet")
    read = pd.read_parquet(tmp_path / "dictionary.parquet", dtype_backend="pyarrow")
    read.dp.set_budget(epsilon=float("inf"), domains={"sex": ["F", "M"]})
    assert read.dp.count(epsilon=100.0, by="sex").tolist() == [2, 3]
    lists = pd.DataFrame({"l": pd.array([[1], [2]], dtype=pd.ArrowDtype(pa.list_(pa.int64())))})
    lists.dp.set_budget(epsilon=1.0)
    lists["x"] = 1.0
    for call in (
        lambda: lists.dp.count(epsilon=1.0, by="l", domain={"l": [[1], [2]]}),
        lambda: lists.dp.sum("x", epsilon=1.0, bounds="auto", by="l", domain={"l": [[1], [2]]}),
    ):
        with pytest.raises(DomainError, match="nested"):
            call()
    assert lists.dp.ledger.spent.epsilon == 0


def test_an_object_column_of_lists_is_refused_before_auto_bounds_charge() -> None:
    frame = pd.DataFrame({"g": [[1], [2]] * 1000, "x": np.full(2000, 3.0)})
    frame.dp.set_budget(epsilon=100.0, domains={"g": [1, 2]})
    with pytest.raises(DomainError, match="hashable scalars"):
        frame.dp.sum("x", epsilon=1.0, bounds="auto", by="g")
    assert frame.dp.ledger.spent.epsilon == 0
    # Validity twin: the same call on scalar keys is released and charged.
    frame["g"] = [1, 2] * 1000
    frame.dp.sum("x", epsilon=10.0, bounds="auto", by="g")
    assert frame.dp.ledger.spent.epsilon == 10


def test_a_dask_object_key_column_is_refused_before_auto_bounds_charge() -> None:
    dd = pytest.importorskip("dask.dataframe")
    dask = pytest.importorskip("dask")
    frame = pd.DataFrame({"v": np.linspace(0, 10, 400), "k": [["a"], ["b"]] * 200})
    with dask.config.set({"dataframe.convert-string": False}):
        data = dd.from_pandas(frame, npartitions=2)
        data.dp.set_budget(epsilon=10.0, domains={"k": ["a", "b"]})
        with pytest.raises(DomainError, match="Python objects"):
            data.dp.sum("v", epsilon=1.0, bounds="auto", by="k")
        assert data.dp.ledger.spent.epsilon == 0


def test_pyarrow_backed_columns() -> None:
    frame = pd.DataFrame(
        {
            "k": pd.array(["a", "b", None, "a"], dtype="string[pyarrow]"),
            "x": pd.array([1.0, 2.0, 3.0, None], dtype="double[pyarrow]"),
            "n": pd.array([1, 2, 3, 4], dtype="int64[pyarrow]"),
        }
    )
    budgeted(frame)
    counts = frame.dp.count(epsilon=1e9 / 1e7, by="k", domain={"k": ["a", "b"]})
    assert list(counts.index) == ["a", "b"]
    assert (
        abs(
            frame.dp.sum("x", epsilon=1e9, bounds=(0, 5), by="k", domain={"k": ["a", "b"]})["a"] - 1
        )
        < 1e-3
    )
    assert abs(frame.dp.sum("n", epsilon=1e9, bounds=(0, 5)) - 10) < 1e-3


def test_pandas_string_dtype_and_object_columns_need_a_domain() -> None:
    frame = budgeted(pd.DataFrame({"k": pd.Series(["x", "y"], dtype="str"), "o": ["x", object()]}))
    with pytest.raises(DomainError, match="domain="):
        frame.dp.count(epsilon=1.0, by="k")
    assert list(frame.dp.count(epsilon=1.0, by="k", domain={"k": ["x", "y", "z"]}).index) == [
        "x",
        "y",
        "z",
    ]


def test_nan_keys_and_keys_outside_the_domain_are_left_out() -> None:
    frame = pd.DataFrame(
        {"k": pd.Categorical(["a", None, "b", "a"], categories=["a", "b"]), "x": [1.0] * 4}
    )
    budgeted(frame)
    assert frame.dp.count(epsilon=1e9 / 1e7, by="k").tolist() == [2, 1]
    sums = frame.dp.sum("x", epsilon=1e9, bounds=(0, 1), by="k")
    assert abs(sums["a"] - 2) < 1e-3


def test_bool_columns_have_an_implicit_domain() -> None:
    frame = budgeted(pd.DataFrame({"flag": [True, True, False]}))
    counts = frame.dp.count(epsilon=1e9 / 1e7, by="flag")
    assert counts.index.tolist() == [False, True]


@pytest.mark.parametrize("bad", [-1.0, float("nan"), -float("inf"), "1", None, True, 0])
def test_a_bad_budget_is_refused(bad: Any) -> None:
    frame = census(10)
    with pytest.raises((InvalidParameterError, InvalidParameterTypeError)):
        frame.dp.set_budget(epsilon=bad)
    assert not frame.dp.ledger.budget_set
    with pytest.raises(BudgetNotSetError, match="set_budget"):
        frame.dp.count(epsilon=1.0)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    keys=st.lists(st.sampled_from(["a", "b", "c", None, "zz"]), min_size=0, max_size=40),
    values=st.lists(
        st.one_of(
            st.floats(allow_nan=True, allow_infinity=True, width=64),
            st.integers(-(10**6), 10**6).map(float),
        ),
        min_size=40,
        max_size=40,
    ),
    as_category=st.booleans(),
)
def test_generated_frames_either_work_or_are_refused_clearly(
    keys: list[str | None], values: list[float], as_category: bool
) -> None:
    frame = pd.DataFrame({"k": pd.Series(keys, dtype=object), "x": values[: len(keys)]})
    if as_category:  # keys outside the categories become missing, as pandas 4 will require
        inside = frame["k"].where(frame["k"].isin(["a", "b", "c"]))
        frame["k"] = inside.astype(pd.CategoricalDtype(["a", "b", "c"]))
    domain = {"k": ["a", "b", "c"]}
    frame.dp.set_budget(epsilon=10.0)
    counts = frame.dp.count(epsilon=1.0, by="k", domain=domain)
    assert list(counts.index) == ["a", "b", "c"]
    sums = frame.dp.sum("x", epsilon=1.0, bounds=(-5.0, 5.0), by="k", domain=domain)
    assert np.isfinite(sums.to_numpy()).all()  # NaN never reaches the output, inf is clamped
    table = frame.dp.crosstab("k", "k", epsilon=1.0, domain=domain)
    assert table.shape == (3, 3)
    assert frame.dp.ledger.spent.epsilon == 3


# ---------------------------------------------------------------- budget evasion


DERIVATIONS: list[tuple[str, Callable[[pd.DataFrame], pd.DataFrame]]] = [
    ("copy", lambda d: d.copy()),
    ("boolean filter", lambda d: d[d["Age"] > 30]),
    ("column selection", lambda d: d[["Occupation", "Sex"]]),
    ("assign", lambda d: d.assign(old=d["Age"] > 60)),
    ("head", lambda d: d.head(50)),
    ("sample", lambda d: d.sample(frac=0.5)),
    ("sort_values", lambda d: d.sort_values("Age")),
    ("set_index", lambda d: d.set_index("Age")),
    ("reset_index", lambda d: d.reset_index()),
    ("merge with itself", lambda d: d.merge(d[["Age"]].drop_duplicates(), on="Age")),
    ("deepcopy", lambda d: copy.deepcopy(d)),
    ("pickle", lambda d: pickle.loads(pickle.dumps(d))),
]


@pytest.mark.parametrize(("name", "derive"), DERIVATIONS, ids=[n for n, _ in DERIVATIONS])
def test_no_common_operation_forks_or_resets_the_budget(
    name: str, derive: Callable[[pd.DataFrame], pd.DataFrame]
) -> None:
    frame = census(300, rng=4)
    frame.dp.set_budget(epsilon=1.0)
    frame.dp.count(epsilon=0.5)
    derived = derive(frame)
    assert derived.dp.ledger.spent.epsilon == pytest.approx(0.5)
    derived.dp.count(epsilon=0.4)
    with pytest.raises(BudgetExceededError):
        frame.dp.count(epsilon=0.2)  # only 0.1 remains, for both
    assert frame.dp.ledger.remaining.epsilon == pytest.approx(0.1)


REPEATS_UNDER_A_NEW_INDEX: list[tuple[str, Callable[[pd.DataFrame], pd.DataFrame]]] = [
    ("concat, ignore_index", lambda d: pd.concat([d, d], ignore_index=True)),
    ("concat, reset_index", lambda d: pd.concat([d, d.head(5)]).reset_index(drop=True)),
    ("explode, ignore_index", lambda d: d.assign(k=[[1, 2]] * len(d)).explode("k", True)),
]


@pytest.mark.parametrize(
    ("name", "repeat"), REPEATS_UNDER_A_NEW_INDEX, ids=[n for n, _ in REPEATS_UNDER_A_NEW_INDEX]
)
def test_more_rows_than_the_data_had_are_refused_whatever_the_index(
    name: str, repeat: Callable[[pd.DataFrame], pd.DataFrame]
) -> None:
    frame = census(300, rng=4)
    frame.dp.set_budget(epsilon=1.0)
    repeated = repeat(frame)
    assert repeated.index.is_unique  # the index check cannot see the repeats
    with pytest.raises(PrivacyUnitError, match="more than the 300"):
        repeated.dp.count(epsilon=0.5)
    assert frame.dp.ledger.spent.epsilon == 0


def test_a_budget_on_an_index_that_already_repeats_labels_is_refused() -> None:
    # With repeated labels from the start, pd.concat of two overlapping filters (fewer rows
    # than the data) repeated people unseen: released, charged once.
    frame = census(300, rng=4).set_index("Sex")
    with pytest.raises(PrivacyUnitError, match="index repeats labels"):
        frame.dp.set_budget(epsilon=1.0)
    assert not frame.dp.ledger.budget_set
    # Validity twin: with a label per row, the same overlapping concat is refused.
    frame = frame.reset_index()
    frame.dp.set_budget(epsilon=1.0)
    overlapping = pd.concat([frame[frame["Age"] < 30], frame[frame["Age"].between(25, 35)]])
    assert len(overlapping) < len(frame)
    with pytest.raises(PrivacyUnitError, match="repeats index labels"):
        overlapping.dp.count(epsilon=0.5)
    # With a privacy unit, repeated labels are fine: every release bounds each person,
    # also when set_budget is called again without repeating the unit (it is kept).
    panel = census(300, rng=4).assign(person=np.arange(300) // 2).set_index("Sex")
    panel.dp.set_budget(epsilon=1.0, privacy_unit="person")
    panel.dp.set_budget(epsilon=1.0, domains={"Married": ["M", "N", "S"]})
    assert panel.dp.ledger.privacy_unit == ("person",)


def test_more_rows_than_the_data_had_are_bounded_with_a_privacy_unit() -> None:
    frame = census(300, rng=4).assign(person=np.arange(300))
    frame.dp.set_budget(epsilon=1.0, privacy_unit="person")
    doubled = pd.concat([frame, frame], ignore_index=True)
    doubled.dp.count(epsilon=0.5, max_rows=1)  # each person bounded to one row
    assert frame.dp.ledger.spent.epsilon == 0.5


def test_a_where_condition_on_another_budgeted_frame_is_refused() -> None:
    frame, other = census(300, rng=4), census(300, rng=5)
    frame.dp.set_budget(epsilon=1.0)
    other.dp.set_budget(epsilon=1.0)
    with pytest.raises(LedgerConflictError, match="another privacy budget"):
        frame.dp.count(epsilon=0.5, where=other["Age"] > 30)  # would charge frame only
    assert frame.dp.ledger.spent.epsilon == other.dp.ledger.spent.epsilon == 0
    frame.dp.count(epsilon=0.5, where=frame["Age"] > 30)  # its own column: fine


@pytest.mark.parametrize(
    "release",
    [
        lambda v: dpm.geometric(v, epsilon=1.0),
        lambda v: dpm.laplace(v.astype(float), epsilon=1.0, sensitivity=1.0, bounds=(0.0, 9.0)),
    ],
)
def test_a_masked_array_is_refused_not_released_unmasked(release: Callable[[Any], Any]) -> None:
    values = np.ma.masked_array([1, 2, 3], mask=[False, True, False])  # 2 is hidden
    with pytest.raises(InvalidParameterTypeError, match="masked array"):
        release(values)


def test_a_negative_seed_is_refused_as_dpframe_error() -> None:
    with pytest.raises(InvalidParameterError, match="non-negative"):
        dpm.geometric(np.array([1]), epsilon=1.0, rng=-1)


def test_parquet_and_pickle_files_keep_the_spent_budget(tmp_path: Path) -> None:
    frame = census(100, rng=5)
    frame.dp.set_budget(epsilon=1.0)
    frame.dp.count(epsilon=0.75)
    frame.to_parquet(tmp_path / "data.parquet")
    frame.to_pickle(tmp_path / "data.pkl")
    frame.to_csv(io.StringIO())  # still works
    for loaded in (
        pd.read_parquet(tmp_path / "data.parquet"),
        pd.read_pickle(tmp_path / "data.pkl"),
    ):
        assert loaded.dp.ledger.remaining.epsilon == pytest.approx(0.25)
        with pytest.raises(BudgetExceededError):
            loaded.dp.count(epsilon=0.5)


def test_combining_frames_with_different_budgets_is_refused() -> None:
    first, second = census(50, rng=6), census(50, rng=7)
    first.dp.set_budget(epsilon=1.0)
    second.dp.set_budget(epsilon=1.0)
    with pytest.raises(LedgerConflictError):
        pd.concat([first, second])
    with pytest.raises(LedgerConflictError):
        first.merge(second, on="Age")


# ---------------------------------------------------------------- randomness hygiene


def _forbid_numpy_generators(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every way to reach a numpy generator fail: default paths must not need one.

    Covers new generators (default_rng and every bit generator class), the legacy global
    functions, and dpframe's own wrapper of a caller's generator.
    """

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a default (private) path used a numpy random generator")

    names = ["default_rng", "PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64", "RandomState"]
    names += ["random", "rand", "randint", "uniform", "laplace", "geometric", "choice", "bytes"]
    for name in names:
        monkeypatch.setattr(np.random, name, refuse)
    monkeypatch.setattr(_random.GeneratorBitSource, "words", refuse)


def test_default_paths_use_only_the_cryptographic_source(monkeypatch: pytest.MonkeyPatch) -> None:
    frame = budgeted(census(200, rng=8))  # synthetic data may use numpy; the releases may not
    _forbid_numpy_generators(monkeypatch)
    frame.dp.count(epsilon=1.0, by="Sex")
    frame.dp.crosstab("Occupation", "Sex", epsilon=1.0, margins=True)
    frame.dp.sum("Earnings", epsilon=1.0, bounds=(0, 10**6), by="Sex")
    frame.dp.threshold_decision(min_count=100, epsilon=1.0)
    dpm.geometric([1, 2, 3], epsilon=1.0)
    dpm.geometric([1, 2, 3], epsilon=1.0, bounds=(0, 5), constant_time=True)
    dpm.threshold_decision(10, min_count=5, epsilon=1.0)


def test_the_hygiene_check_can_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    """Validity twin: a path that does use numpy's generator is caught."""
    _forbid_numpy_generators(monkeypatch)
    with pytest.raises(AssertionError, match="numpy random generator"):
        dpm.geometric([1, 2, 3], epsilon=1.0, rng=1)


def test_a_callers_rng_is_recorded_as_not_private_everywhere() -> None:
    frame = budgeted(census(200, rng=9))
    result = frame.dp.crosstab("Occupation", "Sex", epsilon=1.0, rng=1)
    assert dpframe.release_info(result)["private"] is False
    frame.dp.threshold_decision(min_count=10, epsilon=1.0, rng=2)
    assert frame.dp.ledger.history["private"].tolist() == [False, False]


@pytest.mark.parametrize(
    ("method", "delta"), [("laplace", 0.0), ("generalized", 1e-3), ("cutoff", 0.7)]
)
def test_threshold_decision_hands_the_exact_count_to_the_audited_sampler(
    monkeypatch: pytest.MonkeyPatch, method: str, delta: float
) -> None:
    """The accessor's decision is the mechanism tests/test_decisions.py audits (1e6 draws per
    neighbour, each method): check it passes that sampler the exact count and parameters."""
    from dpframe import _decisions

    seen: list[dict[str, Any]] = []
    original = _decisions.sample_decisions

    def spy(counts: Any, **kwargs: Any) -> Any:
        seen.append({"counts": np.asarray(counts).tolist(), **kwargs})
        return original(counts, **kwargs)

    monkeypatch.setattr(_decisions, "sample_decisions", spy)
    frame = budgeted(census(500, rng=10))
    frame.dp.threshold_decision(
        min_count=40, epsilon=0.5, delta=delta, method=method, where="Age >= 50"
    )
    (call,) = seen
    assert call["counts"] == [int((frame["Age"] >= 50).sum())]
    assert call["min_count"] == 40
    assert call["method"] == method
    assert float(call["epsilon"]) == 0.5
    assert float(call["delta"]) == pytest.approx(delta)
