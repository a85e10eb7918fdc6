"""dpframe._results: a released value carries metadata that describes exactly it."""

from __future__ import annotations

import json
import pickle
import statistics
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpframe
from dpframe import DPBool, DPFloat, DPInt
from dpframe._results import RELEASE_KEY
from dpframe.datasets import census
from dpframe.errors import NotAReleaseError
from tests.conftest import budgeted


@pytest.fixture
def df() -> pd.DataFrame:
    return budgeted(census(1000, rng=21))


def _table(df: pd.DataFrame) -> pd.DataFrame:
    return df.dp.crosstab("Occupation", "Sex", epsilon=1.0, margins=True)


# ---------------------------------------------------------------- what stays a release


def test_a_release_is_read_back_as_returned(df: pd.DataFrame) -> None:
    table = _table(df)
    info = dpframe.release_info(table)
    assert info["method"] == "crosstab"
    assert np.asarray(info["noise_error_bound"]).shape == table.shape
    assert RELEASE_KEY in table.attrs
    assert "dp" not in table.attrs  # results do not use the bare "dp" key


def test_an_identical_copy_is_still_the_release(df: pd.DataFrame, tmp_path: Path) -> None:
    table = _table(df)
    assert dpframe.release_info(table.copy()) == dpframe.release_info(table)
    assert dpframe.release_info(pickle.loads(pickle.dumps(table)))["method"] == "crosstab"
    table.to_parquet(tmp_path / "table.parquet")
    loaded = pd.read_parquet(tmp_path / "table.parquet")
    pd.testing.assert_frame_equal(loaded, table, check_index_type=False, check_column_type=False)
    json.dumps(table.attrs)  # plain JSON: parquet stores it


def test_release_info_returns_a_copy(df: pd.DataFrame) -> None:
    counts = df.dp.count(epsilon=1.0, by="Sex")
    info = dpframe.release_info(counts)
    info["epsilon"] = 0.0
    assert dpframe.release_info(counts)["epsilon"] == 1.0


# ---------------------------------------------------------------- what is no longer a release

DERIVED: dict[str, Any] = {
    "arithmetic": lambda t: t * 100,
    "slice": lambda t: t.iloc[:2],
    "one column": lambda t: t["M"],
    "reindex": lambda t: t.reindex(index=t.index[::-1]),
    "sort": lambda t: t.sort_values("M"),
    "rename": lambda t: t.rename(columns={"M": "Male"}),
    "astype": lambda t: t.astype(float),
    "fillna after where": lambda t: t.where(t > 10).fillna(0),
    "division of two releases": None,  # built in the test below
}


@pytest.mark.parametrize(
    "derive", [v for v in DERIVED.values() if v], ids=[k for k, v in DERIVED.items() if v]
)
def test_values_derived_from_a_table_are_not_releases(df: pd.DataFrame, derive: Any) -> None:
    table = _table(df)
    derived = derive(table)
    assert RELEASE_KEY in derived.attrs  # pandas copied the tag along...
    with pytest.raises(NotAReleaseError, match="derived from a dpframe release"):
        dpframe.release_info(derived)  # ...and release_info sees it no longer fits


def test_a_ratio_of_two_releases_is_not_a_release(df: pd.DataFrame) -> None:
    sums = df.dp.sum("Earnings", epsilon=0.5, bounds=(0, 10**6), by="Sex")
    counts = df.dp.count(epsilon=0.5, by="Sex")
    with pytest.raises(NotAReleaseError):
        dpframe.release_info(sums / counts)
    total, n = df.dp.sum("Earnings", epsilon=0.5, bounds=(0, 10**6)), df.dp.count(epsilon=0.5)
    with pytest.raises(NotAReleaseError, match="float is not a dpframe release"):
        dpframe.release_info(total / n)
    with pytest.raises(NotAReleaseError):
        dpframe.release_info(n + 0)


def test_validity_a_tag_without_fingerprint_check_would_accept_derived_values(
    df: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The refusal above comes from the fingerprint: with it disabled, the stale bar passes.
    monkeypatch.setattr(dpframe._results, "_fingerprint", lambda result: "same")
    table = _table(df)
    assert dpframe.release_info(table * 100)["method"] == "crosstab"


@pytest.mark.parametrize("value", [3, 2.5, True, np.int64(3), [1, 2], pd.Series([1, 2])])
def test_plain_values_are_not_releases(value: Any) -> None:
    with pytest.raises(NotAReleaseError, match="release_info needs a value returned by"):
        dpframe.release_info(value)


# ---------------------------------------------------------------- scalar results


def test_scalars_behave_as_numbers_and_carry_metadata(df: pd.DataFrame) -> None:
    n = df.dp.count(epsilon=0.5)
    total = df.dp.sum("Age", epsilon=0.5, bounds=(0, 100))
    assert isinstance(n, DPInt)
    assert isinstance(n, int)
    assert isinstance(total, DPFloat)
    assert isinstance(total, float)
    assert type(n + 1) is int
    assert type(total * 2) is float
    assert pickle.loads(pickle.dumps(n)).dp == n.dp


def test_statistics_of_released_scalars_are_plain_numbers(df: pd.DataFrame) -> None:
    # statistics.mean builds its result as type(x)(value): DPInt(value) raised TypeError
    # (metadata missing); an average of releases is no release, so it is a plain number.
    counts = [df.dp.count(epsilon=0.1) for _ in range(3)]
    sums = [df.dp.sum("Age", epsilon=0.1, bounds=(0, 100)) for _ in range(2)]
    for derived in (
        statistics.mean(counts),
        statistics.variance(counts),
        statistics.mean(sums),
        DPInt.from_bytes(b"\x01", "big"),
        DPFloat.fromhex("0x1p0"),
    ):
        assert type(derived) in (int, float)
        with pytest.raises(NotAReleaseError):
            dpframe.release_info(derived)
    # Validity twin: with its metadata, the release is still one.
    assert dpframe.release_info(DPInt(int(counts[0]), counts[0].dp))["method"] == "count"


def test_decisions_behave_as_bools(df: pd.DataFrame) -> None:
    yes = df.dp.threshold_decision(min_count=10, epsilon=1.0)
    assert isinstance(yes, DPBool)
    assert yes == True  # noqa: E712  (the point: it compares as a bool)
    assert bool(yes) is True
    assert repr(yes) == "True"
    assert str(yes) == "True"
    assert dpframe.release_info(yes)["method"] == "threshold_decision"
    no = DPBool(False, {})
    assert not no
    assert repr(no) == "False"
    assert not no
    assert pickle.loads(pickle.dumps(yes)) == True  # noqa: E712
