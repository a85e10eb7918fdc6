"""Every refusal depends on public parameters only: neighbouring frames refuse identically.

A refusal is itself an output: if adding or removing one person could flip it, or change
its message, the refusal would leak. Each call below is refused on a data set and on its
neighbours (one row removed; one unusual row added), with the same error and the same
message, and nothing is charged. (The one documented data-dependent refusal, repeated
index labels, is tested in test_accessor.py.)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpframe.datasets import CENSUS_DOMAINS, census
from dpframe.errors import BudgetExceededError, DPFrameError

Call = Callable[[pd.DataFrame], object]

REFUSED: dict[str, Call] = {
    "epsilon 0": lambda f: f.dp.count(epsilon=0),
    "epsilon nan": lambda f: f.dp.count(epsilon=math.nan),
    "epsilon str": lambda f: f.dp.count(epsilon="1"),
    "over budget": lambda f: f.dp.count(epsilon=20.0),
    "missing column": lambda f: f.dp.count(epsilon=1.0, by="sex"),
    "no domain": lambda f: f.dp.count(epsilon=1.0, by="Age"),
    "float grouping": lambda f: f.assign(w=f["Age"] * 1.5).dp.count(
        epsilon=1.0, by="w", domain={"w": [1.5]}
    ),
    "keys of the wrong type": lambda f: f.dp.count(epsilon=1.0, by="Age", domain={"Age": ["x"]}),
    "domain not grouped": lambda f: f.dp.count(epsilon=1.0, by="Sex", domain={"Age": [1]}),
    "aggregating where": lambda f: f.dp.count(epsilon=1.0, where="Age > Age.mean()"),
    "bad where": lambda f: f.dp.count(epsilon=1.0, where="Age >"),
    "sum without bounds": lambda f: f.dp.sum("Earnings", epsilon=1.0, bounds=None),
    "sum bounds reversed": lambda f: f.dp.sum("Earnings", epsilon=1.0, bounds=(10, 0)),
    "sum of text": lambda f: f.dp.sum("Sex", epsilon=1.0, bounds=(0, 1)),
    "sum epsilon too small": lambda f: f.dp.sum("Earnings", epsilon=1e-30, bounds=(0, 1)),
    "bounds_epsilon too large": lambda f: f.dp.sum(
        "Earnings", epsilon=1.0, bounds="auto", bounds_epsilon=2.0
    ),
    "crosstab normalize": lambda f: f.dp.crosstab("Sex", "Married", epsilon=1.0, normalize="x"),
    "crosstab margins name": lambda f: f.dp.crosstab(
        "Sex", "Married", epsilon=1.0, margins=True, margins_name="M"
    ),
    "crosstab aggfunc": lambda f: f.dp.crosstab(
        "Sex", "Married", epsilon=1.0, values="Age", aggfunc="mean", bounds=(0, 1)
    ),
    "decision delta": lambda f: f.dp.threshold_decision(min_count=5, epsilon=1.0, delta=0.1),
    "decision min_count": lambda f: f.dp.threshold_decision(min_count=-1, epsilon=1.0),
    "rng": lambda f: f.dp.count(epsilon=1.0, rng="seed"),
    "merge cross": lambda f: f.dp.merge(pd.DataFrame({"z": [1]}), how="cross"),
    "set_budget raised": lambda f: f.dp.set_budget(epsilon=100.0),
}


def _neighbours() -> list[pd.DataFrame]:
    base = census(300, rng=41)
    removed = base.drop(index=base.index[17])
    outlier = pd.DataFrame(
        {
            "Sex": pd.Categorical(["F"], categories=base["Sex"].cat.categories),
            "Age": [200],
            "Married": pd.Categorical([None], categories=base["Married"].cat.categories),
            "Earnings": [10**12],
            "Occupation": pd.Categorical(
                ["Unicorn Wrangler"], categories=base["Occupation"].cat.categories
            ),
        },
        index=[10_000],
    )
    added = pd.concat([base, outlier])
    frames = [base, removed, added]
    for frame in frames:
        frame.dp.set_budget(epsilon=10.0, domains=CENSUS_DOMAINS)
    return frames


def _outcome(call: Call, frame: pd.DataFrame) -> tuple[str, str]:
    try:
        call(frame)
    except DPFrameError as error:
        return type(error).__name__, str(error)
    return "no error", ""


@pytest.mark.parametrize("call", REFUSED.values(), ids=REFUSED.keys())
def test_neighbouring_frames_refuse_identically(call: Call) -> None:
    frames = _neighbours()
    outcomes = [_outcome(call, frame) for frame in frames]
    assert outcomes[0][0] != "no error", "the call was meant to be refused"
    assert outcomes[1] == outcomes[0]
    assert outcomes[2] == outcomes[0]
    for frame in frames:
        assert frame.dp.ledger.spent.epsilon == 0


def test_validity_a_data_dependent_message_is_caught() -> None:
    # The check above would catch a message that printed a figure from the data.
    def leaky(frame: pd.DataFrame) -> Any:
        raise DPFrameError(f"the column has {len(frame)} rows")

    frames = _neighbours()
    outcomes = [_outcome(leaky, frame) for frame in frames]
    assert outcomes[1] != outcomes[0]


def test_no_refusal_message_holds_a_figure_of_the_data() -> None:
    frames = _neighbours()
    figures = {str(len(frames[0])), str(int(frames[0]["Earnings"].sum())), "300", "301", "299"}
    for call in REFUSED.values():
        message = _outcome(call, frames[0])[1]
        words = set(message.replace(",", " ").replace(".", " ").split())
        assert not (words & figures), message
    assert np.isfinite(frames[0]["Earnings"].sum())


def test_a_call_of_several_parts_is_refused_for_what_the_whole_call_costs() -> None:
    # The refusal quoted the part that did not fit, what the call's earlier parts left,
    # and counted them as releases made ("1 release(s) so far" on a fresh ledger).
    frame = census(300, rng=4)
    frame.dp.set_budget(epsilon=1.0)
    with pytest.raises(BudgetExceededError) as refused:
        frame.dp.mean("Age", epsilon=1.5, bounds=(0, 100))
    message = str(refused.value)
    assert "epsilon=3/2" in message or "epsilon=1.5" in message
    assert "after 0 release(s)" in message
    zcdp = census(300, rng=4)
    zcdp.dp.set_budget(rho=0.01)
    with pytest.raises(BudgetExceededError, match=r"after 0 release\(s\)"):
        zcdp.dp.describe(rho=0.02, noise="gaussian", bounds={"Age": (0, 100)})
    zcdp.dp.describe(rho=0.01, noise="gaussian", bounds={"Age": (0, 100)})
    spent = zcdp.dp.ledger.spent.rho
    assert spent is not None
    # all of it, to the percentiles' grid of 1e-6 in epsilon
    assert Fraction(1, 100) - Fraction(1, 10**7) < spent <= Fraction(1, 100)


def test_an_epsilon_out_of_range_is_refused_in_the_callers_terms() -> None:
    # The engine's message spoke of epsilon per grid step (2.3e-19 for epsilon=1e-9 on a
    # sum) and told a count, which takes no bounds, to pass bounds.
    frame = census(100, rng=1)
    frame.dp.set_budget(epsilon=1e12)
    with pytest.raises(DPFrameError, match=r"epsilon=1e-18 is outside what a count") as count:
        frame.dp.count(epsilon=1e-18)
    assert "bounds=" not in str(count.value)
    with pytest.raises(DPFrameError, match=r"epsilon=1e-09 is outside what a sum"):
        frame.dp.sum("Age", epsilon=1e-9, bounds=(0, 100))
    assert frame.dp.ledger.spent.epsilon == 0
