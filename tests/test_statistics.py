"""Means, variances, quantiles, value counts, describe, groupby and the Series accessor.

Labels against pandas with ``pandas.testing``; a neighbour audit per kind of release with a
validity twin; bad input refused with nothing drawn or charged; noise intervals that cover.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest
from numpy.typing import NDArray
from scipy import stats

import dpframe
from dpframe import mechanisms
from dpframe.datasets import CENSUS_DOMAINS, census
from dpframe.errors import DPFrameError, InvalidParameterError, InvalidParameterTypeError
from tests._stats import FALSE_ALARM, audit
from tests.conftest import WordCounter, budgeted


@pytest.fixture
def df() -> pd.DataFrame:
    frame = census(3000, rng=51)
    frame.dp.set_budget(epsilon=math.inf, domains=CENSUS_DOMAINS)
    return frame


# ---------------------------------------------------------------- labels like pandas


def test_grouped_moments_are_labelled_like_groupby(df: pd.DataFrame) -> None:
    exact = df.groupby(["Sex", "Married"], observed=False)["Age"]
    for name in ("mean", "var", "std"):
        noisy = getattr(df.dp, name)("Age", epsilon=5.0, bounds=(0, 100), by=["Sex", "Married"])
        truth = getattr(exact, name)()
        pd.testing.assert_index_equal(noisy.index, truth.index)
        assert noisy.name == truth.name == "Age"
        assert noisy.dtype == truth.dtype == np.float64
        large = (exact.size() > 400).to_numpy()  # small groups are mostly noise: only large
        assert np.allclose(noisy[large], truth[large], rtol=0.2, atol=1.0)  # not another table


def test_quantiles_are_labelled_like_pandas(df: pd.DataFrame) -> None:
    grid = np.arange(0, 101)
    one = df.dp.quantile("Age", 0.5, epsilon=5.0, bounds=(0, 100), candidates=grid)
    assert isinstance(one, dpframe.DPFloat)
    several = df.dp.quantile("Age", [0.25, 0.75], epsilon=5.0, bounds=(0, 100), candidates=grid)
    pd.testing.assert_index_equal(several.index, df["Age"].quantile([0.25, 0.75]).index)
    grouped = df.dp.quantile(
        "Age", [0.25, 0.75], epsilon=5.0, bounds=(0, 100), candidates=grid, by="Sex"
    )
    truth = df.groupby("Sex", observed=False)["Age"].quantile([0.25, 0.75])
    pd.testing.assert_index_equal(grouped.index, truth.index)
    assert np.abs(grouped.to_numpy() - truth.to_numpy()).max() <= 3


def test_value_counts_are_labelled_and_sorted_like_pandas(df: pd.DataFrame) -> None:
    noisy = df.dp.value_counts("Occupation", epsilon=5.0)
    truth = df["Occupation"].value_counts()
    assert noisy.name == truth.name == "count"
    assert noisy.index.name == truth.index.name == "Occupation"
    assert (np.diff(noisy.to_numpy()) <= 0).all()  # sorted by the noisy counts
    shares = df.dp.value_counts("Occupation", epsilon=5.0, normalize=True, nonnegative=True)
    assert shares.name == "proportion"
    interval = dpframe.release_info(shares)["noise_interval"]
    assert len(interval["low"]) == len(shares) == 5


def test_describe_is_laid_out_like_pandas_without_min_and_max(df: pd.DataFrame) -> None:
    noisy = df.dp.describe(epsilon=4.0, bounds={"Age": (0, 100), "Earnings": (0, 2e6)})
    truth = df[["Age", "Earnings"]].describe().drop(index=["min", "max"])
    pd.testing.assert_index_equal(noisy.index, truth.index)
    pd.testing.assert_index_equal(noisy.columns, truth.columns)
    assert abs(noisy.loc["count", "Age"] - 3000) < 50
    info = dpframe.release_info(noisy)
    assert info["epsilon"] == 4.0
    assert info["split"] == {
        "Age": {"count, mean, std": 1.0, "percentiles": 1.0},
        "Earnings": {"count, mean, std": 1.0, "percentiles": 1.0},
    }
    # The metadata describes what was released: the bounds read, and every bar promised.
    assert info["bounds"] == {"Age": [0.0, 100.0], "Earnings": [0.0, 2e6]}
    ranks = info["rank_error_bound"]
    assert set(ranks) == {"Age", "Earnings"}
    assert all(len(bars) == 3 and min(bars) > 0 for bars in ranks.values())
    assert 0 < info["value_resolution"]["Age"] < info["value_resolution"]["Earnings"]
    assert "rank_error_bound" in info["error_bound_covers"]


@pytest.mark.parametrize(
    "percentiles",
    [
        [1 / 3, 0.1234567],
        np.array([0.75, 0.25]),
        [0.001, 0.0011],
        [Fraction(1, 3)],
        (0.0, 1.0),
        [0.419999, 0.42],  # close to a whole percent, but not one: '41.9999%', '42%'
        [0.0165, 0.5],  # '1.6%' as pandas rounds it (half to even), not '1.7%'
    ],
)
def test_describe_reads_and_labels_percentiles_like_pandas(
    df: pd.DataFrame, percentiles: Any
) -> None:
    noisy = df.dp.describe(epsilon=4.0, bounds={"Age": (0, 100)}, percentiles=percentiles)
    levels = [float(p) for p in percentiles]  # pandas cannot format a Fraction's label
    truth = df[["Age"]].describe(percentiles=levels).drop(index=["min", "max"])
    pd.testing.assert_index_equal(noisy.index, truth.index)


def test_levels_equal_once_scaled_share_a_label_and_release(df: pd.DataFrame) -> None:
    """Distinct levels that make one percent: the label rule once divided by their zero
    gap, after the budget was charged (pandas' own describe fails on them)."""
    level = 0.7298317482601286
    noisy = df.dp.describe(
        epsilon=1.0, bounds={"Age": (0, 100)}, percentiles=[level, float(np.nextafter(level, 2))]
    )
    assert noisy.index.tolist()[3:] == ["73.0%", "73.0%"]


@pytest.mark.parametrize(
    ("percentiles", "error"),
    [
        (0.5, InvalidParameterTypeError),
        ("0.5", InvalidParameterTypeError),
        ([True], InvalidParameterTypeError),
        ([0.5, 0.5], InvalidParameterError),
        ([0.25, Fraction(1, 4)], InvalidParameterError),
        ([], InvalidParameterError),
        ([1.5], InvalidParameterError),
        ([math.nan], InvalidParameterError),
    ],
)
def test_describe_refuses_bad_percentiles_before_charging(
    df: pd.DataFrame, percentiles: Any, error: type[Exception]
) -> None:
    with pytest.raises(error):
        df.dp.describe(epsilon=1.0, bounds={"Age": (0, 100)}, percentiles=percentiles)
    assert df.dp.ledger.spent.epsilon == 0


@pytest.mark.parametrize("options", [{}, {"normalize": True}, {"ascending": True}, {"sort": False}])
def test_value_counts_of_several_columns_like_dataframe_value_counts(
    df: pd.DataFrame, options: dict[str, bool]
) -> None:
    # At epsilon 100 a geometric draw is nonzero with probability about 2e-44: the exact table.
    noisy = df.dp.value_counts(["Sex", "Married"], epsilon=100.0, **options)
    truth = df.value_counts(["Sex", "Married"], **options)
    assert noisy.name == truth.name
    assert noisy.index.names == truth.index.names
    if options.get("sort", True):  # pandas orders unsorted combinations as found in the data
        assert np.array_equal(noisy.to_numpy(), truth.to_numpy())
    pd.testing.assert_series_equal(
        noisy.sort_index(), truth.sort_index(), check_index_type=False, check_dtype=False
    )
    assert dpframe.release_info(noisy)["by"] == ["Sex", "Married"]


def test_value_counts_of_a_list_of_one_column_has_a_multiindex(df: pd.DataFrame) -> None:
    # DataFrame.value_counts(["Sex"]) labels with a one-level MultiIndex; dpframe gave a flat
    # Index. And a normalized release listed "sorted" before "normalized", not as done.
    noisy = df.dp.value_counts(["Sex"], epsilon=100.0, normalize=True)
    truth = df.value_counts(["Sex"], normalize=True)
    pd.testing.assert_index_equal(noisy.index, truth.index, exact=False)
    post = dpframe.release_info(noisy)["post_processing"]
    assert post == ["normalized by the noisy total", "sorted"]


@pytest.mark.parametrize(
    "release",
    [
        lambda d: d.dp.count(epsilon=1.0, domain={"Sex": ["F", "M"]}),
        lambda d: d.dp.sum("Age", epsilon=1.0, bounds=(0, 100), domain={"Sex": ["F", "M"]}),
        lambda d: d.dp.mean("Age", epsilon=1.0, bounds=(0, 100), domain={"Sex": ["F", "M"]}),
        lambda d: d.dp.median("Age", epsilon=1.0, bounds=(0, 100), domain={"Sex": ["F", "M"]}),
        lambda d: d.dp.threshold_decision(min_count=5, epsilon=1.0, domain={"Sex": ["F", "M"]}),
    ],
)
def test_a_domain_without_by_is_refused_before_charging(
    df: pd.DataFrame, release: Callable[[pd.DataFrame], object]
) -> None:
    with pytest.raises(dpframe.errors.DomainError, match="forgotten by="):
        release(df)
    assert df.dp.ledger.spent.epsilon == 0


def test_groupby_mirrors_dataframe_groupby(df: pd.DataFrame) -> None:
    grouped = df.dp.groupby("Sex")
    assert grouped.size(epsilon=1.0).index.tolist() == ["M", "F"]
    assert grouped["Age"].count(epsilon=1.0).name == "Age"
    table = grouped["Age"].agg(["count", "mean", "median"], epsilon=3.0, bounds=(0, 100))
    truth = df.groupby("Sex", observed=False)["Age"].agg(["count", "mean", "median"])
    pd.testing.assert_index_equal(table.index, truth.index)
    pd.testing.assert_index_equal(table.columns, truth.columns)
    info = dpframe.release_info(table)
    assert info["split"] == {"count": 1.0, "mean": 1.0, "median": 1.0}
    with pytest.raises(InvalidParameterError, match="min and max"):
        grouped["Age"].agg(["min"], epsilon=1.0, bounds=(0, 100))


def test_the_series_accessor_shares_the_frames_ledger() -> None:
    frame = census(500, rng=52)
    frame.dp.set_budget(epsilon=1.0)
    ages = frame["Age"]
    ages.dp.mean(epsilon=0.25, bounds=(0, 100))
    ages.dp.median(epsilon=0.25, bounds=(0, 100))
    assert frame.dp.ledger.remaining.epsilon == 0.5
    assert ages.dp.ledger is frame.dp.ledger
    cutoff = 40  # noqa: F841  (read by where= below)
    older = ages.dp.count(epsilon=0.25, where="Age >= @cutoff")
    assert dpframe.release_info(older)["where"] == "Age >= 40"
    assert frame.dp.ledger.remaining.epsilon == 0.25


# ---------------------------------------------------------------- intervals that cover


@pytest.mark.statistical
@pytest.mark.parametrize("statistic", ["mean", "std"])
def test_moment_intervals_cover_the_clamped_statistic(statistic: str) -> None:
    """The 95% noise interval covers the true clamped statistic (reject at 1e-6)."""
    gen = np.random.default_rng(53)
    frame = budgeted(pd.DataFrame({"x": gen.normal(40, 15, 200), "g": gen.integers(0, 4, 200)}))
    bounds = (0.0, 100.0)
    clamped = frame.assign(x=frame["x"].clip(*bounds)).groupby("g")["x"]
    truth = getattr(clamped, statistic)().to_numpy()
    runs, misses, cells = 200, 0, 0
    for _ in range(runs):
        noisy = getattr(frame.dp, statistic)(
            "x", epsilon=0.5, bounds=bounds, by="g", domain={"g": [0, 1, 2, 3]}
        )
        interval = dpframe.release_info(noisy)["noise_interval"]
        low, high = np.asarray(interval["low"]), np.asarray(interval["high"])
        misses += int(((truth < low) | (truth > high)).sum())
        cells += truth.size
    assert stats.binomtest(misses, cells, 0.05, alternative="greater").pvalue > FALSE_ALARM


# ---------------------------------------------------------------- neighbour audits


def _mean_release(value: float, n: int, epsilon: float) -> NDArray[np.int64]:
    """n means of a frame holding 3 rows of 4.0 and one of ``value``, on a grid of 1/4."""
    out = []
    for _ in range(n // 20_000):
        rows = [4.0, 4.0, 4.0] + ([] if math.isnan(value) else [value])
        frame = budgeted(pd.DataFrame({"x": rows * 5000, "k": np.repeat(range(5000), len(rows))}))
        means = frame.dp.mean(
            "x", epsilon=epsilon, bounds=(0, 8), by="k", domain={"k": range(5000)}
        )
        out.append(np.clip(np.round(means.fillna(-1).to_numpy() * 4), -4, 40).astype(np.int64))
    return np.concatenate(out)


@pytest.mark.statistical
@pytest.mark.parametrize("weaken", [False, True])
def test_mean_neighbour_audit(weaken: bool) -> None:
    """Each group of D holds four rows (4, 4, 4, 8), of its neighbour three; the twin
    releases at 4 times the epsilon it is charged for (a mean shows only part of its
    parts' privacy loss, so a small weakening would not show). delta_hat at the charged
    epsilon stays within the tolerance for the real mechanism and exceeds it for the twin."""
    epsilon = 1.0
    used = epsilon * 4 if weaken else epsilon
    support = np.arange(-4, 41)

    def release(value: int, n: int) -> NDArray[np.int64]:
        return _mean_release(8.0 if value else math.nan, n, used)

    def pmf(value: int) -> NDArray[np.float64]:
        return np.full(support.size, 1.0 / support.size)

    worst, tolerance = audit(release, 1, 0, pmf, epsilon, n=200_000)
    assert (worst > tolerance) if weaken else (worst < tolerance)


@pytest.mark.statistical
@pytest.mark.parametrize("weaken", [False, True])
def test_quantile_neighbour_audit(weaken: bool) -> None:
    """Medians over 11 candidates of 500 groups of 5 rows, against the groups with one row
    removed; the twin releases at 4 times its charged epsilon."""
    epsilon = 1.0
    used = epsilon * 4 if weaken else epsilon
    grid = np.arange(0, 11, dtype=np.float64)

    def release(value: int, n: int) -> NDArray[np.int64]:
        rows = [2.0, 3.0, 7.0, 8.0] + ([9.0] if value else [])
        out = []
        for _ in range(n // 50_000):
            frame = budgeted(
                pd.DataFrame({"x": rows * 50_000, "k": np.repeat(range(50_000), len(rows))})
            )
            medians = frame.dp.median(
                "x", epsilon=used, bounds=(0, 10), candidates=grid, by="k",
                domain={"k": range(50_000)},
            )  # fmt: skip
            out.append(medians.to_numpy().astype(np.int64))
        return np.concatenate(out)

    def pmf(value: int) -> NDArray[np.float64]:
        return np.full(grid.size, 1.0 / grid.size)

    worst, tolerance = audit(release, 1, 0, pmf, epsilon, n=200_000)
    assert (worst > tolerance) if weaken else (worst < tolerance)


# ---------------------------------------------------------------- bad input

BAD: dict[str, tuple[Callable[[pd.DataFrame], object], type[Exception]]] = {
    "bounds reversed": (
        lambda f: f.dp.mean("Age", epsilon=1.0, bounds=(100, 0)),
        InvalidParameterError,
    ),
    "q outside [0, 1]": (
        lambda f: f.dp.quantile("Age", 1.5, epsilon=1.0, bounds=(0, 100)),
        InvalidParameterError,
    ),
    "non-numeric column": (
        lambda f: f.dp.mean("Sex", epsilon=1.0, bounds=(0, 1)),
        InvalidParameterTypeError,
    ),
    "negative ddof": (
        lambda f: f.dp.var("Age", epsilon=1.0, bounds=(0, 100), ddof=-1),
        InvalidParameterError,
    ),
    "candidates outside the bounds": (
        lambda f: f.dp.median("Age", epsilon=1.0, bounds=(0, 100), candidates=[50, 150]),
        InvalidParameterError,
    ),
    "describe without bounds": (
        lambda f: f.dp.describe(epsilon=1.0, bounds={}),
        InvalidParameterTypeError,
    ),
    "value_counts of an undeclared column": (
        lambda f: f.dp.value_counts("Age", epsilon=1.0),
        DPFrameError,
    ),
    "agg without bounds": (
        lambda f: f.dp.groupby("Sex")["Age"].agg(["mean"], epsilon=1.0),
        InvalidParameterError,
    ),
    "groupby two columns": (
        lambda f: f.dp.groupby("Sex")[["Age", "Earnings"]],
        InvalidParameterError,
    ),
}


@pytest.mark.parametrize(("call", "error"), BAD.values(), ids=BAD.keys())
def test_bad_input_is_refused_with_nothing_charged(
    df: pd.DataFrame, call: Callable[[pd.DataFrame], object], error: type[Exception],
    word_counter: WordCounter,
) -> None:  # fmt: skip
    with pytest.raises(error):
        call(df)
    assert word_counter.words == 0
    assert len(df.dp.ledger.history) == 0


def test_dask_releases_match_pandas_structure(df: pd.DataFrame) -> None:
    dd = pytest.importorskip("dask.dataframe")
    lazy = dd.from_pandas(df, npartitions=3)
    for name, call in {
        "mean": lambda f: f.dp.mean("Age", epsilon=1.0, bounds=(0, 100), by="Sex"),
        "median": lambda f: f.dp.median("Age", epsilon=1.0, bounds=(0, 100), by="Sex"),
        "value_counts": lambda f: f.dp.value_counts("Sex", epsilon=1.0, sort=False),
    }.items():
        local, remote = call(df), call(lazy)
        pd.testing.assert_index_equal(local.index, remote.index, obj=name)
        assert dpframe.release_info(local)["method"] == dpframe.release_info(remote)["method"]


def test_median_speed_path_uses_one_pass(df: pd.DataFrame, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    original = mechanisms.quantile_of_counts

    def spy(counts: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(np.asarray(counts).shape)
        return original(counts, *args, **kwargs)

    monkeypatch.setattr(mechanisms, "quantile_of_counts", spy)
    df.dp.median("Age", epsilon=1.0, bounds=(0, 100), by="Sex")
    assert calls == [(2, 4097)]  # one table of exact counts, both groups at once


def test_integer_column_labels_name_results_as_pandas_does() -> None:
    """pandas keeps a column label's type in a result's name (0, not '0')."""
    frame = pd.DataFrame({0: np.arange(100.0), 1: np.tile([0, 1], 50)})
    frame.dp.set_budget(epsilon=math.inf, domains={1: [0, 1]})
    exact = frame.groupby(1)[0]
    releases = {
        "sum": frame.dp.sum(0, epsilon=1.0, bounds=(0, 100), by=1),
        "mean": frame.dp.mean(0, epsilon=1.0, bounds=(0, 100), by=1),
        "var": frame.dp.var(0, epsilon=1.0, bounds=(0, 100), by=1),
        "quantile": frame.dp.quantile(0, [0.5], epsilon=1.0, bounds=(0, 100), by=1),
    }
    for name, noisy in releases.items():
        truth = getattr(exact, name)([0.5]) if name == "quantile" else getattr(exact, name)()
        assert noisy.name == truth.name == 0
    alone = frame.dp.quantile(0, [0.5], epsilon=1.0, bounds=(0, 100))
    assert alone.name == frame[0].quantile([0.5]).name == 0


def test_a_zcdp_budget_checks_a_calls_parts_as_it_charges_them() -> None:
    """Pure parts of epsilon_i cost the sum of epsilon_i**2 / 2 of rho, not (sum)**2 / 2."""
    frame = census(3000, rng=51)
    frame.dp.set_budget(rho=0.02, domains=CENSUS_DOMAINS)
    # A mean of epsilon 0.25: (0.25)**2 / 2 = 0.03125 as one release (over the budget);
    # charged as a count and a sum of 0.125 each, 0.015625.
    frame.dp.mean("Age", epsilon=0.25, bounds=(0, 100))
    assert frame.dp.ledger.spent.rho == Fraction(1, 64)
    with pytest.raises(dpframe.errors.BudgetExceededError):
        frame.dp.mean("Age", epsilon=0.25, bounds=(0, 100))  # 0.015625 more does not fit
    assert frame.dp.ledger.spent.rho == Fraction(1, 64)


def test_describe_with_gaussian_noise_fits_a_rho_budget_as_charged() -> None:
    frame = census(3000, rng=51)
    frame.dp.set_budget(rho=0.02)
    bounds = {"Age": (0, 100), "Earnings": (0, 2e6)}
    # the whole budget, to the percentiles' grid of 1e-6 in epsilon
    frame.dp.describe(bounds=bounds, noise="gaussian", rho=0.02)
    spent = frame.dp.ledger.spent.rho
    assert spent is not None
    assert Fraction(1, 50) - Fraction(1, 10**7) < spent <= Fraction(1, 50)
    with pytest.raises(dpframe.errors.BudgetExceededError):
        frame.dp.describe(bounds=bounds, noise="gaussian", rho=0.001)
    assert frame.dp.ledger.spent.rho == spent


def test_describe_with_mixed_measures_is_refused_before_drawing(word_counter: WordCounter) -> None:
    """On an (epsilon, delta) budget the pure percentiles are charged before the zCDP
    moments; a check in another order passed, and the call was refused after drawing."""
    frame = pd.DataFrame(
        np.random.default_rng(0).integers(0, 100, (300, 6)), columns=list("abcdef")
    )
    frame.dp.set_budget(epsilon=1.0, delta=1e-6)
    with pytest.raises(dpframe.errors.BudgetExceededError):
        frame.dp.describe(noise="gaussian", rho=0.0213, bounds=dict.fromkeys(frame, (0, 100)))
    assert word_counter.words == 0
    assert frame.dp.ledger.spent.epsilon == 0
