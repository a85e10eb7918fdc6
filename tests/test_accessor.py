"""The .dp accessor: labels and shapes, noise, neighbour audits, bad input, ledger rules."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest
from numpy.typing import NDArray
from scipy import stats

import dpframe
from dpframe._backends import kernels
from dpframe.datasets import CENSUS_DOMAINS, OCCUPATIONS, SEXES, census
from dpframe.errors import (
    BudgetExceededError,
    BudgetNotSetError,
    DomainError,
    InvalidParameterError,
    InvalidParameterTypeError,
    LedgerConflictError,
    MissingColumnError,
    NoiseOverflowError,
    PrivacyUnitError,
)
from tests._stats import (
    FALSE_ALARM,
    audit,
    chi_square_pvalue,
    two_sided_geometric_pmf,
)
from tests.conftest import WordCounter, budgeted


@pytest.fixture
def df() -> pd.DataFrame:
    return budgeted(census(2000, rng=11))


# ---------------------------------------------------------------- labels and shapes


def test_crosstab_is_labelled_like_pandas(df: pd.DataFrame) -> None:
    noisy = df.dp.crosstab("Occupation", "Sex", epsilon=1.0)
    exact = pd.crosstab(df["Occupation"], df["Sex"], dropna=False)
    pd.testing.assert_index_equal(noisy.index, exact.index)
    pd.testing.assert_index_equal(noisy.columns, exact.columns)
    pd.testing.assert_series_equal(noisy.dtypes, exact.dtypes)
    assert list(noisy.index) == list(OCCUPATIONS)


def test_crosstab_keeps_empty_keys_of_the_domain() -> None:
    frame = budgeted(census(50, rng=2))
    frame = frame[frame["Occupation"] != "Unicorn Wrangler"]
    noisy = frame.dp.crosstab("Occupation", "Sex", epsilon=1.0)
    assert "Unicorn Wrangler" in noisy.index  # a real zero, protected by noise


def test_crosstab_with_a_declared_domain_on_str_columns(df: pd.DataFrame) -> None:
    plain = df.astype({"Occupation": "str", "Sex": "str"})
    domain = {"Occupation": list(OCCUPATIONS), "Sex": list(SEXES)}
    noisy = plain.dp.crosstab("Occupation", "Sex", epsilon=1.0, domain=domain)
    assert list(noisy.index) == list(OCCUPATIONS)  # declared order, not sorted
    assert list(noisy.columns) == list(SEXES)
    exact = pd.crosstab(plain["Occupation"], plain["Sex"]).reindex(
        index=list(OCCUPATIONS), columns=list(SEXES), fill_value=0
    )
    assert (noisy - exact).abs().to_numpy().max() < 60  # noise, not a different table


def test_keys_outside_the_domain_and_missing_keys_go_nowhere() -> None:
    frame = budgeted(pd.DataFrame({"k": ["a", "b", "zzz", None, "a"]}))
    counts = frame.dp.count(epsilon=50.0, by="k", domain={"k": ["a", "b", "c"]})
    assert list(counts.index) == ["a", "b", "c"]
    # epsilon 50: P(noise != 0) is about 4e-22 per cell
    assert counts.tolist() == [2, 1, 0]


def test_crosstab_multiindex(df: pd.DataFrame) -> None:
    noisy = df.dp.crosstab(["Occupation", "Married"], "Sex", epsilon=1.0)
    exact = pd.crosstab([df["Occupation"], df["Married"]], df["Sex"], dropna=False)
    pd.testing.assert_index_equal(noisy.index, exact.index)
    pd.testing.assert_index_equal(noisy.columns, exact.columns)


@pytest.mark.parametrize("normalize", [False, True, "index", "columns"])
def test_margins_and_normalize_follow_pandas_on_the_noisy_cells(
    df: pd.DataFrame, normalize: Any
) -> None:
    noisy = df.dp.crosstab(
        "Occupation", "Sex", epsilon=2.0, margins=True, normalize=normalize, nonnegative=True
    )
    exact = pd.crosstab(
        df["Occupation"], df["Sex"], margins=True, normalize=normalize, dropna=False
    )
    assert noisy.index.equals(exact.index)
    assert noisy.columns.equals(exact.columns)
    if normalize is False:
        cells = noisy.iloc[:-1, :-1]
        assert (noisy.iloc[:-1, -1] == cells.sum(axis=1)).all()
        assert noisy.iloc[-1, -1] == cells.to_numpy().sum()


def test_count_and_sum_results(df: pd.DataFrame) -> None:
    n = df.dp.count(epsilon=1.0)
    assert isinstance(n, int)
    by = df.dp.count(epsilon=1.0, by="Sex")
    assert list(by.index) == list(SEXES)
    total = df.dp.sum("Earnings", epsilon=1.0, bounds=(0, 10**6))
    assert isinstance(total, float)
    grouped = df.dp.sum("Earnings", epsilon=1.0, bounds=(0, 10**6), by="Occupation")
    assert list(grouped.index) == list(OCCUPATIONS)
    assert grouped.dtype == np.float64


def test_typed_entry_point(df: pd.DataFrame) -> None:
    accessor = dpframe.dp(df)
    assert isinstance(accessor, type(df.dp))
    with pytest.raises(InvalidParameterTypeError):
        dpframe.dp([1, 2, 3])  # type: ignore[arg-type]


def test_release_metadata_is_json_and_complete(df: pd.DataFrame) -> None:
    for result in (
        df.dp.count(epsilon=0.5),
        df.dp.count(epsilon=0.5, by="Sex"),
        df.dp.sum("Age", epsilon=0.5, bounds=(0, 120)),
        df.dp.crosstab("Occupation", "Sex", epsilon=0.5, margins=True),
    ):
        info = dpframe.release_info(result)
        json.dumps(info)
        for key in ("mechanism", "epsilon", "delta", "noise_scale", "noise_error_bound", "private"):
            assert key in info
        assert info["private"] is True


def test_rng_marks_the_release_not_private(df: pd.DataFrame) -> None:
    result = df.dp.count(epsilon=0.5, rng=np.random.default_rng(1))
    assert dpframe.release_info(result)["private"] is False
    assert not bool(df.dp.ledger.history["private"].iloc[-1])


def test_nonnegative_sets_negative_counts_to_zero() -> None:
    empty = budgeted(pd.DataFrame({"k": pd.Categorical([], categories=list(range(2000)))}))
    counts = empty.dp.count(epsilon=0.5, by="k", nonnegative=True)
    assert counts.min() == 0
    raw = empty.dp.count(epsilon=0.5, by="k")
    assert raw.min() < 0  # unbiased by default: about half the empty cells are negative


# ---------------------------------------------------------------- noise distribution


def _many_cells(count: int, cells: int) -> pd.DataFrame:
    keys = np.repeat(np.arange(cells), count)
    return budgeted(
        pd.DataFrame({"k": pd.Categorical.from_codes(keys, categories=list(range(cells)))})
    )


@pytest.mark.statistical
def test_count_noise_matches_the_geometric_pmf() -> None:
    frame = _many_cells(3, 200_000)
    noise = np.concatenate([frame.dp.count(epsilon=0.7, by="k").to_numpy() - 3 for _ in range(5)])
    support = np.arange(-80, 81)
    assert chi_square_pvalue(noise, support, two_sided_geometric_pmf(support, 0.7)) > FALSE_ALARM


@pytest.mark.statistical
def test_crosstab_noise_matches_the_geometric_pmf() -> None:
    frame = _many_cells(2, 1000).assign(s=pd.Categorical(["x"] * 2000, categories=["x", "y"]))
    noise = np.concatenate(
        [
            frame.dp.crosstab("k", "s", epsilon=1.3, domain={"s": ["x", "y"]})["x"].to_numpy() - 2
            for _ in range(300)
        ]
    )
    support = np.arange(-50, 51)
    assert chi_square_pvalue(noise, support, two_sided_geometric_pmf(support, 1.3)) > FALSE_ALARM


@pytest.mark.statistical
def test_sum_noise_matches_the_geometric_pmf_on_its_grid() -> None:
    frame = budgeted(
        pd.DataFrame(
            {"k": pd.Categorical.from_codes(np.arange(100_000), categories=list(range(100_000)))}
        ).assign(x=0.0)
    )
    epsilon = 2.0**32 / 3  # noise scale of about 3 grid steps
    result = frame.dp.sum("x", epsilon=epsilon, bounds=(-1.0, 1.0), by="k")
    step = dpframe.release_info(result)["grid_step"]
    noise = np.rint(result.to_numpy() / step).astype(np.int64)
    unit = epsilon / round(1.0 / step)
    support = np.arange(-100, 101)
    assert chi_square_pvalue(noise, support, two_sided_geometric_pmf(support, unit)) > FALSE_ALARM


# ---------------------------------------------------------------- neighbour audits


def _count_release(value: int, n: int, epsilon: float) -> NDArray[np.int64]:
    """n independent releases of one cell with `value` rows (one call, one cell per release)."""
    cells = 200_000
    out = []
    while sum(len(o) for o in out) < n:
        out.append(_many_cells(value, cells).dp.count(epsilon=epsilon, by="k").to_numpy())
    return np.concatenate(out)[:n]


@pytest.mark.statistical
@pytest.mark.parametrize("weaken", [False, True])
def test_count_neighbour_audit(weaken: bool) -> None:
    """D has 3 rows in a cell, D minus one row has 2; the validity twin uses 25% less noise."""
    epsilon = 1.0
    used = epsilon / 0.75 if weaken else epsilon
    support = np.arange(-60, 61)

    def pmf(value: int) -> NDArray[np.float64]:
        return two_sided_geometric_pmf(support, epsilon)

    worst, tolerance = audit(lambda v, n: _count_release(v, n, used), 3, 2, pmf, epsilon)
    assert (worst > tolerance) if weaken else (worst < tolerance)


# ---------------------------------------------------------------- exact sums


def test_sums_are_exact_on_the_grid() -> None:
    """Float sums round and depend on order (Casacuberta et al.); the grid sum does not."""
    values = np.array([1e16, 1.0, -1e16, 1.0] * 100_000)
    grid = kernels.SumGrid.for_bounds(-1e16, 1e16)
    exact = math.fsum(np.rint(values / grid.step) * grid.step)
    assert kernels.sum_total(grid, values, None) * grid.step == exact
    shuffled = np.random.default_rng(0).permutation(values)
    assert kernels.sum_total(grid, shuffled, None) == kernels.sum_total(grid, values, None)
    # A float sum in this order loses every 1.0 next to 1e16: the premise of the test.
    assert sum(values.tolist()) != exact


def test_sum_table_matches_the_total() -> None:
    rng = np.random.default_rng(5)
    values = rng.normal(0, 1e3, size=300_000)
    values[::7] = np.nan
    keys = rng.integers(-1, 7, size=300_000)  # -1: outside the domain
    grid = kernels.SumGrid.for_bounds(-2e3, 2e3)
    table = kernels.sum_table(grid, values, [keys], [7])
    inside = keys >= 0
    assert int(table.sum()) == kernels.sum_total(grid, values, inside)
    assert table[3] == kernels.sum_total(grid, values, keys == 3)
    chosen = values[(keys == 3) & ~np.isnan(values)]
    units = np.rint(np.clip(chosen, -2e3, 2e3) / grid.step)
    assert table[3] == sum(int(u) for u in units)


def test_count_table_matches_pandas_across_blocks() -> None:
    rng = np.random.default_rng(6)
    a = rng.integers(-1, 30, size=500_000)
    b = rng.integers(-1, 4, size=500_000)
    table = kernels.count_table([a, b], [30, 4])
    expected = pd.crosstab(a, b).reindex(index=range(30), columns=range(4), fill_value=0)
    expected = expected.drop(index=-1, columns=-1, errors="ignore")
    assert np.array_equal(table, expected.to_numpy())
    mask = rng.random(500_000) < 0.3
    masked = kernels.count_table([a, b], [30, 4], mask)
    assert masked.sum() == int((mask & (a >= 0) & (b >= 0)).sum())


def test_nan_is_skipped_and_inf_is_clamped() -> None:
    frame = budgeted(pd.DataFrame({"x": [1.0, np.nan, np.inf, -np.inf, 2.0]}))
    total = frame.dp.sum("x", epsilon=1e9, bounds=(-10.0, 10.0))
    # exact clamped sum: 1 + 10 - 10 + 2 = 3; epsilon 1e9 keeps the noise below 1e-6 w.h.p.
    assert abs(total - 3.0) < 1e-3


def test_auto_bounds_spend_their_share_in_their_own_row() -> None:
    frame = budgeted(pd.DataFrame({"x": np.random.default_rng(1).uniform(0, 900, size=50_000)}))
    frame.dp.set_budget(epsilon=1.0)
    total = frame.dp.sum("x", epsilon=1.0, bounds="auto", bounds_epsilon=0.4)
    info = dpframe.release_info(total)
    assert info["bounds"] == [0.0, 1024.0]
    history = frame.dp.ledger.history
    assert list(history["method"]) == ["sum bounds (auto)", "sum"]
    assert history["epsilon"].tolist() == [0.4, 0.6]
    assert float(frame.dp.ledger.remaining.epsilon) == 0


# ---------------------------------------------------------------- bad input, nothing charged


BAD_CALLS = [
    ("count", {"epsilon": 0}),
    ("count", {"epsilon": float("nan")}),
    ("count", {"epsilon": "1"}),
    ("count", {"epsilon": True}),
    ("count", {"epsilon": None}),
    ("count", {"epsilon": -1}),
    ("count", {"epsilon": float("inf")}),
    ("count", {"epsilon": 1.0, "by": "Age"}),  # no declared domain
    ("count", {"epsilon": 1.0, "by": "Nope"}),
    ("count", {"epsilon": 1.0, "where": "Nope > 3"}),
    ("count", {"epsilon": 1.0, "where": [True, False]}),
    ("count", {"epsilon": 1.0, "nonnegative": "yes"}),
    ("count", {"epsilon": 1.0, "by": "Age", "domain": {"Age": [1, 1, 2]}}),
    ("count", {"epsilon": 1.0, "by": "Age", "domain": ["Age"]}),
    ("sum", {"column": "Earnings", "epsilon": 1.0, "bounds": (5, 1)}),
    ("sum", {"column": "Earnings", "epsilon": 1.0, "bounds": (0, float("nan"))}),
    ("sum", {"column": "Earnings", "epsilon": 1.0, "bounds": None}),
    ("sum", {"column": "Sex", "epsilon": 1.0, "bounds": (0, 1)}),
    ("sum", {"column": "Nope", "epsilon": 1.0, "bounds": (0, 1)}),
    ("sum", {"column": "Earnings", "epsilon": 1.0, "bounds": "auto", "bounds_epsilon": 1.0}),
    ("sum", {"column": "Earnings", "epsilon": 1.0, "bounds": (0, 1), "bounds_epsilon": 0.1}),
    ("crosstab", {"index": "Occupation", "columns": "Age", "epsilon": 1.0}),
    ("crosstab", {"index": "Occupation", "columns": "Sex", "epsilon": 1.0, "values": "Age"}),
    (
        "crosstab",
        {
            "index": "Occupation",
            "columns": "Sex",
            "epsilon": 1.0,
            "values": "Age",
            "aggfunc": "mean",
            "bounds": (0, 1),
        },
    ),
    ("crosstab", {"index": "Occupation", "columns": "Sex", "epsilon": 1.0, "normalize": "rows"}),
    ("crosstab", {"index": "Occupation", "columns": "Sex", "epsilon": 1.0, "bounds": (0, 1)}),
    (
        "crosstab",
        {
            "index": "Occupation",
            "columns": "Sex",
            "epsilon": 1.0,
            "margins": True,
            "margins_name": "M",
        },
    ),
    ("threshold_decision", {"min_count": 10, "epsilon": 1.0, "method": "magic"}),
    ("threshold_decision", {"min_count": 10.5, "epsilon": 1.0}),
    ("threshold_decision", {"min_count": 10, "epsilon": 1.0, "p": 1.0}),
    ("threshold_decision", {"min_count": 10, "epsilon": 1.0, "delta": 1.0}),
    ("threshold_decision", {"min_count": 10, "epsilon": 1.0, "delta": 0.1}),  # laplace: no delta
    ("threshold_decision", {"min_count": 10, "epsilon": 1.0, "method": "cutoff"}),  # delta needed
]


@pytest.mark.parametrize(("method", "kwargs"), BAD_CALLS)
def test_bad_input_is_refused_with_nothing_charged_or_drawn(
    df: pd.DataFrame, word_counter: WordCounter, method: str, kwargs: dict[str, Any]
) -> None:
    df.dp.set_budget(epsilon=5.0)
    word_counter.words = 0
    with pytest.raises(
        (InvalidParameterError, InvalidParameterTypeError, DomainError, MissingColumnError)
    ):
        getattr(df.dp, method)(**kwargs)
    assert df.dp.ledger.spent.epsilon == 0
    assert word_counter.words == 0
    assert len(df.dp.ledger.history) == 0


def test_missing_domain_error_shows_how_to_declare_one(df: pd.DataFrame) -> None:
    with pytest.raises(DomainError, match=r"domain=\{'Age': \[\.\.\.\]\}") as raised:
        df.dp.count(epsilon=1.0, by="Age")
    assert "set_budget(..., domains=" in str(raised.value)


def test_missing_column_suggests_a_close_name(df: pd.DataFrame) -> None:
    with pytest.raises(MissingColumnError, match="Did you mean 'Sex'"):
        df.dp.count(epsilon=1.0, by="sex")


def test_duplicate_column_names_are_refused() -> None:
    frame = budgeted(pd.DataFrame([[1, 2]], columns=["a", "a"]))
    with pytest.raises(InvalidParameterError, match="duplicate"):
        frame.dp.sum("a", epsilon=1.0, bounds=(0, 5))


# ---------------------------------------------------------------- ledger rules through the accessor


def test_overspending_is_refused_before_any_noise(
    df: pd.DataFrame, word_counter: WordCounter
) -> None:
    df.dp.set_budget(epsilon=1.0)
    df.dp.crosstab("Occupation", "Sex", epsilon=0.75)
    word_counter.words = 0
    with pytest.raises(BudgetExceededError):
        df.dp.crosstab("Occupation", "Sex", epsilon=0.5)
    assert word_counter.words == 0
    assert df.dp.ledger.spent.epsilon == pytest.approx(0.75)
    df.dp.count(epsilon=0.25)  # exactly what remains
    assert df.dp.ledger.remaining.epsilon == 0


def test_auto_bounds_check_the_whole_cost_first(word_counter: WordCounter) -> None:
    frame = budgeted(pd.DataFrame({"x": np.arange(1000.0)}))
    frame.dp.set_budget(epsilon=0.5)
    word_counter.words = 0
    with pytest.raises(BudgetExceededError):
        frame.dp.sum("x", epsilon=0.6, bounds="auto")
    assert word_counter.words == 0
    assert len(frame.dp.ledger.history) == 0


def test_eleven_elevenths_fit(df: pd.DataFrame) -> None:
    df.dp.set_budget(epsilon=1.0)
    for _ in range(11):
        df.dp.count(epsilon=1 / 11)
    assert df.dp.ledger.remaining.epsilon == 0
    with pytest.raises(BudgetExceededError):
        df.dp.count(epsilon=1e-9)


def test_derived_frames_spend_the_same_budget(df: pd.DataFrame) -> None:
    df.dp.set_budget(epsilon=1.0)
    adults = df[df["Age"] >= 18]
    adults.dp.count(epsilon=0.5)
    df[["Occupation", "Sex"]].dp.crosstab("Occupation", "Sex", epsilon=0.25)
    assert df.dp.ledger.spent.epsilon == pytest.approx(0.75)
    with pytest.raises(BudgetExceededError):
        df.head(10).dp.count(epsilon=0.5)


def test_threshold_decision_charges_its_cost(df: pd.DataFrame) -> None:
    decided = df.dp.threshold_decision(min_count=100, epsilon=0.5)
    assert isinstance(decided, dpframe.DPBool)
    assert dpframe.release_info(decided)["epsilon"] == 0.5
    cut = df.dp.threshold_decision(
        min_count=100, epsilon=0.5, method="cutoff", delta=1 - math.exp(-0.5)
    )
    assert isinstance(cut, dpframe.DPBool)
    assert dpframe.release_info(cut)["delta"] == pytest.approx(1 - math.exp(-0.5))
    history = df.dp.ledger.history
    assert history["delta"].iloc[0] == 0
    assert history["delta"].iloc[1] == pytest.approx(1 - math.exp(-0.5))


def test_threshold_decision_is_right_far_from_the_threshold(df: pd.DataFrame) -> None:
    assert df.dp.threshold_decision(min_count=10, epsilon=1.0)
    assert not df.dp.threshold_decision(min_count=10**6, epsilon=1.0)
    assert not df.dp.threshold_decision(min_count=100, epsilon=1.0, where="Age > 200")


@pytest.mark.statistical
@pytest.mark.parametrize("weaken", [False, True])
def test_crosstab_neighbour_audit(weaken: bool) -> None:
    """Every cell of D has 4 rows, of D minus one row 3; the twin uses 25% less noise."""
    epsilon = 1.0
    used = epsilon / 0.75 if weaken else epsilon
    support = np.arange(-60, 61)

    def release(value: int, n: int) -> NDArray[np.int64]:
        frame = _many_cells(value, 100_000).assign(
            s=pd.Categorical(["x"] * (value * 100_000), categories=["x"])
        )
        draws = [
            frame.dp.crosstab("k", "s", epsilon=used, domain={"s": ["x"]})["x"].to_numpy()
            for _ in range(n // 100_000)
        ]
        return np.concatenate(draws)

    def pmf(value: int) -> NDArray[np.float64]:
        return two_sided_geometric_pmf(support, epsilon)

    worst, tolerance = audit(release, 4, 3, pmf, epsilon)
    assert (worst > tolerance) if weaken else (worst < tolerance)


@pytest.mark.statistical
@pytest.mark.parametrize("weaken", [False, True])
def test_sum_neighbour_audit(weaken: bool) -> None:
    """Each cell of D holds values 1 and 1 (bounds (0, 1)); D minus one row holds only 1.

    The released sums, on the grid, are compared for D and its neighbour; the twin uses
    25% less noise.
    """
    epsilon = 1.0
    used = epsilon / 0.75 if weaken else epsilon
    cells = 100_000

    def release(rows_per_cell: int, n: int) -> NDArray[np.int64]:
        frame = _many_cells(rows_per_cell, cells).assign(x=1.0)
        out = []
        for _ in range(n // cells):
            result = frame.dp.sum("x", epsilon=used, bounds=(0.0, 1.0), by="k")
            step = dpframe.release_info(result)["grid_step"]
            # one unit of sensitivity is 2**32 grid steps: look at the sum in whole units
            out.append(np.floor(result.to_numpy()).astype(np.int64))
            assert step == 2.0**-32
        return np.concatenate(out)

    support = np.arange(-60, 61)

    def pmf(value: int) -> NDArray[np.float64]:
        # floor of a discrete Laplace on a fine grid: close to a two-sided geometric in units
        return two_sided_geometric_pmf(support, epsilon)

    worst, tolerance = audit(release, 2, 1, pmf, epsilon)
    assert (worst > tolerance) if weaken else (worst < tolerance)


def test_count_by_is_labelled_like_groupby(df: pd.DataFrame) -> None:
    noisy = df.dp.count(epsilon=1.0, by=["Occupation", "Sex"])
    exact = df.groupby(["Occupation", "Sex"], observed=False).size()
    pd.testing.assert_index_equal(noisy.index, exact.index)
    assert noisy.dtype == exact.dtype


# ---------------------------------------------------------------- review fixes


@pytest.mark.parametrize("epsilon", [0.7, 0.0007, 0.3])
def test_margins_of_sum_tables_at_any_epsilon(df: pd.DataFrame, epsilon: float) -> None:
    """Error bars for very wide noise are computed on a coarser grid (no recursion)."""
    table = df.dp.crosstab(
        "Occupation",
        "Sex",
        epsilon=epsilon,
        values="Earnings",
        aggfunc="sum",
        bounds=(0, 150_000),
        margins=True,
    )
    bars = np.array(dpframe.release_info(table)["noise_error_bound"])
    assert bars.shape == table.shape
    assert bars[-1, -1] > bars[0, 0]
    assert bars[0, -1] > bars[0, 0]


def test_crosstab_values_may_be_a_column_of_the_frame_as_in_pd_crosstab(
    df: pd.DataFrame,
) -> None:
    sums = {"aggfunc": "sum", "bounds": (0, 150_000), "epsilon": 0.5}
    by_series = df.dp.crosstab(df["Occupation"], df["Sex"], values=df["Earnings"], **sums)
    by_name = df.dp.crosstab("Occupation", "Sex", values="Earnings", **sums)
    pd.testing.assert_index_equal(by_series.index, by_name.index)
    assert dpframe.release_info(by_series)["columns"] == dpframe.release_info(by_name)["columns"]
    spent = df.dp.ledger.spent.epsilon
    with pytest.raises(InvalidParameterError, match="not a column of this frame"):
        df.dp.crosstab("Occupation", "Sex", values=df["Earnings"] * 2, **sums)
    assert df.dp.ledger.spent.epsilon == spent


@pytest.mark.parametrize(("alias", "name"), [(True, "all"), (1, "columns"), (0, "index")])
@pytest.mark.parametrize("margins", [False, True])
def test_normalize_aliases_give_the_named_shares_and_their_intervals(
    df: pd.DataFrame, alias: object, name: str, margins: bool
) -> None:
    """pandas reads True as "all", 0 as "index", 1 as "columns"; so must the intervals.

    (True == 1 in Python: normalize=True was once taken for "columns" when laying out the
    intervals, and normalize=1 for "all" when computing them.)
    """
    args = {"epsilon": 50.0, "margins": margins, "rng": 5}  # noise far below the bars' width
    by_alias = df.dp.crosstab("Occupation", "Sex", normalize=alias, **args)  # type: ignore[arg-type]
    by_name = df.dp.crosstab("Occupation", "Sex", normalize=name, **args)  # type: ignore[arg-type]
    pd.testing.assert_frame_equal(by_alias, by_name)
    exact = pd.crosstab(df["Occupation"], df["Sex"], normalize=name, margins=margins)
    interval = dpframe.release_info(by_alias)["noise_interval"]
    low, high = np.asarray(interval["low"]), np.asarray(interval["high"])
    assert low.shape == high.shape == by_alias.shape == exact.shape
    assert ((low <= exact.to_numpy() + 1e-12) & (exact.to_numpy() <= high + 1e-12)).all()


@pytest.mark.parametrize(
    "options", [{"margins": True}, {"normalize": True}, {"normalize": "index", "margins": True}]
)
def test_a_missing_key_cell_takes_margins_and_normalization(
    options: dict[str, Any],
) -> None:
    """dropna=False adds a NaN cell to each grouping; pandas' margins once failed on it,
    after the noise was drawn and charged."""
    frame = census(500, rng=3)
    frame.loc[frame.index[:20], "Sex"] = None
    frame.dp.set_budget(epsilon=math.inf, domains=CENSUS_DOMAINS)
    # At epsilon 100 a draw is nonzero with probability about 7e-44: the exact table.
    noisy = frame.dp.crosstab("Occupation", "Sex", epsilon=100.0, dropna=False, **options)
    assert noisy.columns.tolist()[:2] == ["M", "F"]
    assert pd.isna(noisy.columns[2])  # the missing-key cell, labelled NaN as pandas does
    cells = frame.groupby(["Occupation", "Sex"], observed=False, dropna=False).size()
    table = cells.unstack().reindex(index=noisy.index[:6], columns=noisy.columns[:3])
    table = table.fillna(0)  # the missing-occupation row: no rows, all zero
    # dpframe's layout: the missing key is a cell like any other, in margins and totals
    exact = pd.crosstab(
        _long(table.index, 3), _long(table.columns, 6, tile=True), values=table.to_numpy().ravel(),
        aggfunc="sum", dropna=False, **options,
    )  # fmt: skip
    np.testing.assert_allclose(
        noisy.iloc[: exact.shape[0], : exact.shape[1]].to_numpy(dtype=float),
        exact.to_numpy(dtype=float),
    )


def _long(labels: pd.Index, times: int, tile: bool = False) -> pd.Categorical:
    """Cell labels of a table laid out long, in its order, with NaN as a key pandas keeps."""
    keys = ["<missing>" if pd.isna(k) else k for k in labels]
    codes = np.tile(np.arange(len(keys)), times) if tile else np.repeat(np.arange(len(keys)), times)
    return pd.Categorical.from_codes(codes, categories=keys)


def test_the_missing_key_cell_keeps_the_keys_labels_exact() -> None:
    # Appending NaN to an integer domain made it float64: 2**53 + 1 was labelled 2**53.
    big = 2**53
    frame = pd.DataFrame(
        {
            "id": [big + 1, big + 1, big + 3, big + 2],
            "n": pd.array([1, None, 2, 1], dtype="Int64"),
            "c": pd.Categorical([1, 2, None, 2], categories=[1, 2, 3]),
            "k": ["x", "x", "y", None],
        }
    )
    frame.dp.set_budget(
        epsilon=math.inf,
        domains={"id": [big + 1, big + 2, big + 3], "n": [1, 2], "c": [1, 2, 3], "k": ["x", "y"]},
    )
    table = frame.dp.crosstab("id", "k", epsilon=100.0, dropna=False)
    assert table.index.dtype == "Int64"
    assert table.index[:3].tolist() == [big + 1, big + 2, big + 3]
    assert pd.isna(table.index[3])
    assert table.to_numpy()[:, :2].tolist() == [[2, 0], [0, 0], [0, 1], [0, 0]]
    pd.testing.assert_index_equal(
        frame.dp.value_counts("n", epsilon=100.0, dropna=False, sort=False).index,
        pd.Index(pd.array([1, 2, None], dtype="Int64"), name="n"),
    )
    categories = frame.dp.crosstab("c", "k", epsilon=100.0, dropna=False).index
    assert isinstance(categories, pd.CategoricalIndex)
    assert categories.isna().tolist()[-1]


@pytest.mark.parametrize("options", [{"margins": True}, {"normalize": "index"}])
def test_margins_take_any_key_a_domain_can_hold(options: dict[str, Any]) -> None:
    # NaT (a datetime's missing-key cell) and tuples could not be categories of pandas'
    # crosstab: it failed after the noise was drawn and charged.
    frame = pd.DataFrame(
        {
            "day": pd.to_datetime(["2020-01-01", "2020-01-02", None, "2020-01-02"]),
            "pair": pd.Series([("a", 1), ("b", 2), ("a", 1), ("a", 1)], dtype=object),
            "sex": ["F", "M", "F", "M"],
        }
    )
    days = pd.to_datetime(["2020-01-01", "2020-01-02"])
    frame.dp.set_budget(epsilon=math.inf, domains={"day": days, "sex": ["F", "M"]})
    # At epsilon 100 a draw is nonzero with probability about 7e-44: the exact table.
    dated = frame.dp.crosstab("day", "sex", epsilon=100.0, dropna=False, **options)
    exact = pd.crosstab(frame["day"], frame["sex"], dropna=False, **options)
    assert dated.index[:3].tolist() == exact.index[:3].tolist()
    np.testing.assert_allclose(
        dated.drop(columns=np.nan).to_numpy(dtype=float), exact.to_numpy(dtype=float)
    )
    pairs = frame.dp.crosstab(
        "pair", "sex", epsilon=100.0, domain={"pair": [("a", 1), ("b", 2)]}, **options
    )
    # pd.crosstab of tuple keys warns (pandas 4 reads tuples as scalars): the exact table
    if options.get("margins"):
        assert pairs.index.tolist() == [("a", 1), ("b", 2), "All"]
        exact_cells = [[2, 1, 3], [0, 1, 1], [2, 2, 4]]
    else:
        assert pairs.index.tolist() == [("a", 1), ("b", 2)]
        exact_cells = [[2 / 3, 1 / 3], [0, 1]]
    np.testing.assert_allclose(pairs.to_numpy(dtype=float), exact_cells)


def test_a_failed_auto_bounds_estimate_is_still_charged() -> None:
    frame = budgeted(pd.DataFrame({"x": [1.0, 2.0, 3.0]}))  # too few rows to occupy any bin
    frame.dp.set_budget(epsilon=1.0)
    with pytest.raises(InvalidParameterError, match="was spent"):
        frame.dp.sum("x", epsilon=1.0, bounds="auto", bounds_epsilon=0.25)
    assert list(frame.dp.ledger.history["method"]) == ["sum bounds (auto)"]
    assert frame.dp.ledger.spent.epsilon == Fraction(1, 4)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"bounds": (0, 1e-300)}, InvalidParameterError),  # grid scale would overflow
        ({"bounds": (0, 1e300)}, InvalidParameterError),
        ({"bounds": (0, 10), "epsilon": 1e-9}, NoiseOverflowError),  # noise past int64
    ],
)
def test_sum_parameters_outside_the_grid_are_refused(
    df: pd.DataFrame, word_counter: WordCounter, kwargs: dict[str, Any], error: type[Exception]
) -> None:
    with pytest.raises(error):
        df.dp.sum("Age", **{"epsilon": 1.0, **kwargs})
    assert word_counter.words == 0
    assert len(df.dp.ledger.history) == 0


def test_complex_columns_are_not_summed() -> None:
    frame = budgeted(pd.DataFrame({"z": np.array([1 + 2j, 3 - 1j])}))
    with pytest.raises(InvalidParameterTypeError, match="not a number"):
        frame.dp.sum("z", epsilon=1.0, bounds=(0, 5))


def test_nonnegative_sums_need_nonnegative_bounds(df: pd.DataFrame) -> None:
    with pytest.raises(InvalidParameterError, match="lo >= 0"):
        df.dp.crosstab(
            "Occupation",
            "Sex",
            epsilon=1.0,
            values="Age",
            aggfunc="sum",
            bounds=(-5, 100),
            nonnegative=True,
        )


# ---------------------------------------------------------------- a real analysis (issue 12)


def test_merging_a_public_table_keeps_the_budget() -> None:
    people = pd.DataFrame({"id": range(6), "region": list("NNSSEW"), "x": np.arange(6.0)})
    people.dp.set_budget(epsilon=1.0)
    names = pd.DataFrame({"region": list("NSEW"), "name": ["North", "South", "East", "West"]})
    plain = people.merge(names, on="region")
    with pytest.raises(BudgetNotSetError, match="merge"):  # pandas dropped the ledger...
        plain.dp.count(epsilon=5.0)
    merged = people.dp.merge(names, on="region")  # ...df.dp.merge keeps it
    merged.dp.count(epsilon=0.75)
    assert people.dp.ledger.remaining.epsilon == Fraction(1, 4)
    with pytest.raises(BudgetExceededError):
        merged.dp.count(epsilon=0.5)
    joined = people.dp.join(names.set_index("region"), on="region")
    assert joined.dp.ledger is people.dp.ledger


def test_merges_that_could_repeat_a_person_are_refused() -> None:
    people = pd.DataFrame({"id": range(4), "region": list("NNSS")})
    people.dp.set_budget(epsilon=1.0)
    lookup = pd.DataFrame({"region": ["Nord", "Nord", "S"], "code": [1, 2, 3]})  # Nord twice
    people["region"] = people["region"].replace({"N": "Nord"})
    for combine in (
        lambda: people.dp.merge(lookup, on="region"),
        lambda: people.dp.join(lookup.set_index("region"), on="region"),
    ):
        with pytest.raises(PrivacyUnitError, match="keys repeat") as refused:
            combine()
        # pandas names the repeated keys (ids, values of the data): the refusal does not,
        # nor does a chained cause.
        assert "Nord" not in str(refused.value)
        assert refused.value.__cause__ is None
        assert refused.value.__suppress_context__
    with pytest.raises(PrivacyUnitError, match="several rows"):
        people.dp.merge(lookup, on="region", validate="one_to_many")
    with pytest.raises(PrivacyUnitError, match="cross"):
        people.dp.merge(lookup, how="cross")
    for how in ("outer", "right"):  # rows for the keys nobody has: their presence is data
        with pytest.raises(PrivacyUnitError, match="no person has"):
            people.dp.merge(lookup.drop_duplicates("region"), on="region", how=how)
        with pytest.raises(PrivacyUnitError, match="no person has"):
            people.dp.join(
                lookup.drop_duplicates("region").set_index("region"), on="region", how=how
            )
    # The same data on both sides, without a unit: on "id" a row meets its own, on a
    # spouse's id another person's, and the two cannot be told apart: both refused.
    couples = people.assign(spouse=[1, 0, 3, 2])
    spouses = couples[["id"]].rename(columns={"id": "spouse"}).assign(spouse_x=1.0)
    with pytest.raises(PrivacyUnitError, match="privacy_unit"):
        couples.dp.merge(spouses, on="spouse", validate="one_to_one")
    with pytest.raises(PrivacyUnitError, match="privacy_unit"):
        people.dp.merge(people[["id"]].assign(y=1.0), on="id")
    with pytest.raises(PrivacyUnitError, match="privacy_unit"):
        people.dp.join(people[["id"]].add_suffix("_r"))
    assert people.dp.ledger.spent.epsilon == 0
    other = pd.DataFrame({"region": ["N", "S"], "z": [1, 2]})
    other.dp.set_budget(epsilon=1.0)
    with pytest.raises(LedgerConflictError):
        people.dp.merge(other, on="region")


def test_repeated_rows_of_the_budgeted_frame_are_refused() -> None:
    people = census(100, rng=31)
    people.dp.set_budget(epsilon=1.0, domains=CENSUS_DOMAINS)
    for doubled in (pd.concat([people, people]), people.assign(l=[[1, 2]] * 100).explode("l")):
        with pytest.raises(PrivacyUnitError, match="different person"):
            doubled.dp.count(epsilon=0.1)
    assert people.dp.ledger.spent.epsilon == 0
    # A new index (set_index on a column that repeats) is not a duplicated row.
    by_age = people.set_index("Age")
    assert by_age.dp.count(epsilon=0.1, by="Sex").shape == (2,)


def test_crosstab_takes_series_of_the_frame_and_pandas_names(df: pd.DataFrame) -> None:
    noisy = df.dp.crosstab(
        df["Occupation"], df["Sex"], epsilon=1.0, rownames=["Job"], colnames=["S"]
    )
    exact = pd.crosstab(df["Occupation"], df["Sex"], rownames=["Job"], colnames=["S"])
    assert noisy.index.names == exact.index.names == ["Job"]
    assert noisy.columns.names == exact.columns.names == ["S"]
    with pytest.raises(InvalidParameterError, match="not a column of this frame"):
        df.dp.crosstab(df["Age"] // 10, df["Sex"], epsilon=1.0)
    with pytest.raises(InvalidParameterError, match="one per grouping"):
        df.dp.crosstab("Occupation", "Sex", epsilon=1.0, rownames=["a", "b"])
    assert df.dp.count(epsilon=1.0, by=df["Sex"]).index.name == "Sex"


def test_crosstab_dropna_false_gives_missing_keys_their_cell() -> None:
    frame = budgeted(
        pd.DataFrame(
            {
                "a": pd.Categorical(["x", None, "y", "x"], categories=["x", "y"]),
                "b": pd.Categorical(["p", "p", None, "q"], categories=["p", "q"]),
            }
        )
    )
    kept = frame.dp.crosstab("a", "b", epsilon=1e9 / 1e7, dropna=False)
    assert kept.shape == (3, 3)
    assert kept.to_numpy().sum() == 4  # every row counted, the missing ones in the NaN cells
    left_out = frame.dp.crosstab("a", "b", epsilon=1e9 / 1e7)
    assert left_out.to_numpy().sum() == 2  # as pd.crosstab's default dropna=True


@pytest.mark.statistical
@pytest.mark.parametrize("normalize", ["all", "index", "columns"])
def test_normalized_tables_have_honest_intervals(normalize: str) -> None:
    """Each share's interval holds the true share in >= 95% of releases (reject at 1e-6)."""
    frame = budgeted(census(400, rng=32))
    exact = pd.crosstab(frame["Occupation"], frame["Sex"], normalize=normalize, margins=True)
    runs, misses = 150, 0
    for _ in range(runs):
        table = frame.dp.crosstab(
            "Occupation", "Sex", epsilon=0.3, normalize=normalize, nonnegative=True, margins=True
        )
        assert ((table >= 0) & (table <= 1)).all().all()  # non-negative shares stay shares
        interval = dpframe.release_info(table)["noise_interval"]
        low, high = np.asarray(interval["low"]), np.asarray(interval["high"])
        truth = exact.reindex(index=table.index, columns=table.columns).to_numpy()
        misses += int(((truth < low - 1e-12) | (truth > high + 1e-12)).sum())
    cells = runs * table.size
    assert stats.binomtest(misses, cells, 0.05, alternative="greater").pvalue > FALSE_ALARM
    assert dpframe.release_info(table)["noise_error_bound"] is None


def test_auto_bounds_cover_the_99th_percentile_and_record_the_whole_cost() -> None:
    gen = np.random.default_rng(33)
    # Skewed like SLID's wages; 1.1% of the rows lie above 64, 0.01% above 128. With this
    # many rows the 1% tail is certified: the bound is 128, whatever the noise (a bound
    # of 64 would need the noise of the tail bins to hide 200 rows, 7 standard deviations).
    wages = np.exp(gen.normal(2.8, 0.6, 200_000))
    frame = budgeted(pd.DataFrame({"wages": wages}))
    total = frame.dp.sum("wages", epsilon=1.0, bounds="auto")
    info = dpframe.release_info(total)
    hi = info["bounds"][1]
    assert (wages > hi).mean() <= 0.01
    assert info["epsilon"] == 1.0  # the whole call: bounds (1/4) and sum (3/4)
    assert [part["epsilon_exact"] for part in info["parts"]] == ["1/4", "3/4"]
    assert "certified" in info["bounds_rule"]
    assert "clamping" in info["error_bound_covers"]


def test_the_history_records_filter_grouping_bounds_and_error_bar(df: pd.DataFrame) -> None:
    df.dp.sum("Earnings", epsilon=0.5, bounds=(0, 10**5), by="Sex", where="Age >= 30")
    df.dp.threshold_decision(min_count=10, epsilon=0.5)
    row = df.dp.ledger.history.iloc[0]
    assert row["where"] == "Age >= 30"
    assert row["by"] == "Sex"
    assert row["bounds"] == "(0, 100000)"
    assert row["noise_error_bound"] > 0
    assert row["columns"] == "Earnings, Sex"
    assert df.dp.ledger.history["method"].iloc[1] == "threshold_decision"
