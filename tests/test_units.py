"""Privacy units: contribution bounding, per-unit accounting and private key selection.

The neighbour audits remove one *unit* (all of its rows, in several cells where the
release is grouped) and check the released distributions at the charged epsilon; each
has a validity twin that ignores the bounds (noise drawn for one row, or decisions on
row counts) and must fail. Statistical tests reject at p < 1e-6 (``FALSE_ALARM``).
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
from dpframe import _plans, mechanisms
from dpframe._backends import Group, backend_for, bounding
from dpframe._backends.bounding import ContributionBounds
from dpframe._backends.pandas_backend import PandasRows
from dpframe.errors import (
    DomainError,
    DPFrameError,
    InvalidParameterError,
    MissingColumnError,
    PrivacyUnitError,
)
from tests._stats import FALSE_ALARM, audit, two_sided_geometric_pmf

COPIES = 50_000  # independent copies of a small data set in one frame: one sample each


def _unit_frame(frame: pd.DataFrame, epsilon: float = math.inf, delta: float = 0.0) -> pd.DataFrame:
    frame.dp.set_budget(epsilon=epsilon, delta=delta, privacy_unit="unit")
    return frame


def _copies(rows_of_one_copy: list[dict[str, Any]]) -> pd.DataFrame:
    """``COPIES`` copies of a small data set; unit ids made unique per copy."""
    small = pd.DataFrame(rows_of_one_copy)
    frame = pd.concat([small] * COPIES, ignore_index=True)
    copy = np.repeat(np.arange(COPIES), len(small))
    return frame.assign(copy=copy, unit=frame["unit"].to_numpy() + 10 * copy)


@pytest.fixture
def ignore_the_bounds(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """The weakened twin: noise drawn at the charged epsilon for one row."""

    def weaken() -> None:
        monkeypatch.setattr(_plans.Contribution, "noise_epsilon", lambda self, epsilon: epsilon)
        # labelled for the unit (the ledger refuses a release planned for another unit),
        # but charged and noised as for one row
        monkeypatch.setattr(_plans.Contribution, "charged", _plans.Contribution.labelled)

    return weaken


def _convolved_geometric(
    epsilon: float, terms: int, support: NDArray[np.int64]
) -> NDArray[np.float64]:
    """The pmf of a sum of ``terms`` two-sided geometrics of parameter ``epsilon``."""
    wide = np.arange(-400, 401)
    one = two_sided_geometric_pmf(wide, epsilon)
    total = one
    for _ in range(terms - 1):
        total = np.convolve(total, one)
    offset = 400 * terms
    return np.asarray(total[support + offset])


# ---------------------------------------------------------------- neighbour audits


@pytest.mark.statistical
@pytest.mark.parametrize("weaken", [False, True])
def test_count_audit_removes_a_unit_of_three_rows(
    weaken: bool, ignore_the_bounds: Callable[[], None]
) -> None:
    """Each copy holds a unit of 2 rows and, in D, a unit of 3 rows (max_rows=3)."""
    epsilon = 1.0
    if weaken:
        ignore_the_bounds()

    def release(present: int, n: int) -> NDArray[np.int64]:
        rows = [{"unit": 0}] * 2 + [{"unit": 1}] * (3 * present)
        frame = _unit_frame(_copies(rows))
        out = [
            frame.dp.count(
                epsilon=epsilon, by="copy", domain={"copy": range(COPIES)}, max_rows=3,
                max_groups=1,
            ).to_numpy()
            for _ in range(n // COPIES)
        ]  # fmt: skip
        return np.concatenate(out).astype(np.int64)

    support = np.arange(-80, 90)
    worst, tolerance = audit(
        release, 1, 0, lambda v: two_sided_geometric_pmf(support - 5 * v, epsilon / 3), epsilon,
        n=200_000,
    )  # fmt: skip
    assert (worst > tolerance) if weaken else (worst < tolerance)


@pytest.mark.statistical
@pytest.mark.parametrize("weaken", [False, True])
def test_crosstab_audit_removes_a_unit_in_four_cells(
    weaken: bool, ignore_the_bounds: Callable[[], None]
) -> None:
    """The unit has one row in each of 4 cells (max_groups=4); the statistic is the sum of
    those 4 noisy cells of each copy (post-processing of the table)."""
    epsilon = 1.0
    if weaken:
        ignore_the_bounds()
    cells = ["a", "b", "c", "d"]

    def release(present: int, n: int) -> NDArray[np.int64]:
        rows = [{"unit": 0, "cell": c} for c in cells]
        rows += [{"unit": 1, "cell": c} for c in cells] * present
        frame = _unit_frame(_copies(rows))
        out = []
        for _ in range(n // COPIES):
            table = frame.dp.crosstab(
                "copy", "cell", epsilon=epsilon, domain={"copy": range(COPIES), "cell": cells},
                max_rows=1, max_groups=4,
            )  # fmt: skip
            out.append(table.to_numpy().sum(axis=1))
        return np.concatenate(out).astype(np.int64)

    support = np.arange(-150, 160)
    worst, tolerance = audit(
        release, 1, 0,
        lambda v: _convolved_geometric(epsilon / 4, 4, support - 4 - 4 * v), epsilon,
        n=200_000,
    )  # fmt: skip
    assert (worst > tolerance) if weaken else (worst < tolerance)


@pytest.mark.statistical
@pytest.mark.parametrize("weaken", [False, True])
def test_sum_audit_removes_a_unit_of_two_rows(
    weaken: bool, ignore_the_bounds: Callable[[], None]
) -> None:
    """Values 1 in bounds (0, 1): the unit adds 2 (max_rows=2); sums read in whole units."""
    epsilon = 1.0
    if weaken:
        ignore_the_bounds()

    def release(present: int, n: int) -> NDArray[np.int64]:
        rows = [{"unit": 0, "x": 1.0}] + [{"unit": 1, "x": 1.0}] * (2 * present)
        frame = _unit_frame(_copies(rows))
        out = []
        for _ in range(n // COPIES):
            sums = frame.dp.sum(
                "x", epsilon=epsilon, bounds=(0.0, 1.0), by="copy",
                domain={"copy": range(COPIES)}, max_rows=2, max_groups=1,
            )  # fmt: skip
            out.append(np.floor(sums.to_numpy()).astype(np.int64))
        return np.concatenate(out)

    support = np.arange(-60, 70)
    worst, tolerance = audit(
        release, 1, 0, lambda v: two_sided_geometric_pmf(support - 1 - 2 * v, epsilon / 2),
        epsilon, n=200_000,
    )  # fmt: skip
    assert (worst > tolerance) if weaken else (worst < tolerance)


@pytest.mark.statistical
@pytest.mark.parametrize("weaken", [False, True])
def test_mean_audit_removes_a_unit_of_four_rows(
    weaken: bool, ignore_the_bounds: Callable[[], None]
) -> None:
    """Three rows of 4.0 and, in D, a unit of four rows of 8.0 (max_rows=4). The twin's
    noise is 4 times too small (a mean shows only part of its parts' loss)."""
    epsilon = 1.0
    if weaken:
        ignore_the_bounds()

    def release(present: int, n: int) -> NDArray[np.int64]:
        rows = [{"unit": k, "x": 4.0} for k in range(3)]
        rows += [{"unit": 5, "x": 8.0}] * (4 * present)
        frame = _unit_frame(_copies(rows))
        out = []
        for _ in range(n // COPIES):
            means = frame.dp.mean(
                "x", epsilon=epsilon, bounds=(0, 8), by="copy", domain={"copy": range(COPIES)},
                max_rows=4, max_groups=1,
            )  # fmt: skip
            out.append(np.clip(np.round(means.fillna(-1).to_numpy() * 4), -4, 40))
        return np.concatenate(out).astype(np.int64)

    support = np.arange(-4, 41)
    worst, tolerance = audit(
        release, 1, 0, lambda v: np.full(support.size, 1.0 / support.size), epsilon, n=200_000
    )
    assert (worst > tolerance) if weaken else (worst < tolerance)


@pytest.mark.statistical
@pytest.mark.parametrize("weaken", [False, True])
def test_quantile_audit_removes_a_unit_of_four_rows(
    weaken: bool, ignore_the_bounds: Callable[[], None]
) -> None:
    """Medians over 11 candidates; the unit adds four rows of 9 (max_rows=4)."""
    epsilon = 1.0
    if weaken:
        ignore_the_bounds()
    grid = np.arange(0, 11, dtype=np.float64)

    def release(present: int, n: int) -> NDArray[np.int64]:
        rows = [{"unit": k, "x": v} for k, v in enumerate([2.0, 3.0, 7.0, 8.0])]
        rows += [{"unit": 5, "x": 9.0}] * (4 * present)
        frame = _unit_frame(_copies(rows))
        out = []
        for _ in range(n // COPIES):
            medians = frame.dp.median(
                "x", epsilon=epsilon, bounds=(0, 10), candidates=grid, by="copy",
                domain={"copy": range(COPIES)}, max_rows=4, max_groups=1,
            )  # fmt: skip
            out.append(medians.to_numpy().astype(np.int64))
        return np.concatenate(out)

    worst, tolerance = audit(
        release, 1, 0, lambda v: np.full(grid.size, 1.0 / grid.size), epsilon, n=200_000
    )
    assert (worst > tolerance) if weaken else (worst < tolerance)


@pytest.mark.statistical
@pytest.mark.parametrize("weaken", [False, True])
def test_threshold_decision_audit_removes_a_unit_of_three_rows(
    weaken: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """3 rows plus, in D, a unit of 3 rows, against min_count=6 with max_rows=3: each
    copy decides on count // 3. The twin decides on the row count itself."""
    epsilon = 1.0
    if weaken:
        monkeypatch.setattr(_plans.Contribution, "rows_per_step", property(lambda self: 1))
        monkeypatch.setattr(_plans.Contribution, "decision_parameters", lambda self, asked: asked)

    def release(present: int, n: int) -> NDArray[np.int64]:
        rows = [{"unit": k} for k in range(3)] + [{"unit": 5}] * (3 * present)
        frame = _unit_frame(_copies(rows))
        out = [
            frame.dp.threshold_decision(
                min_count=6, epsilon=epsilon, by="copy", domain={"copy": range(COPIES)},
                max_rows=3, max_groups=1,
            ).to_numpy()
            for _ in range(n // COPIES)
        ]  # fmt: skip
        return np.concatenate(out).astype(np.int64)

    worst, tolerance = audit(release, 1, 0, lambda v: np.array([0.5, 0.5]), epsilon, n=200_000)
    assert (worst > tolerance) if weaken else (worst < tolerance)


# ---------------------------------------------------------------- private key selection


def _selected_share(frame: pd.DataFrame, n_keys: int, **kwargs: Any) -> int:
    counts = frame.dp.count(by="key", private_keys=True, **kwargs)
    return len(counts)


@pytest.mark.statistical
@pytest.mark.parametrize("weaken", [False, True])
def test_a_key_held_by_one_unit_appears_with_probability_at_most_delta(
    weaken: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """200,000 keys, each held by one unit with 3 rows: each appears with probability at
    most delta (binomial bound at 1e-6). The twin selects on row counts, not units."""
    if weaken:
        monkeypatch.setattr(
            PandasRows, "unit_counts", lambda self, unit, groups: self.count_table(groups)
        )
    n_keys, delta = 200_000, 0.01
    frame = _unit_frame(
        pd.DataFrame({"unit": np.repeat(np.arange(n_keys), 3)}).assign(
            key=lambda f: "k" + f["unit"].astype(str)
        ),
        delta=0.5,
    )
    selected = _selected_share(frame, n_keys, epsilon=1.0, delta=delta, max_rows=3, max_groups=1)
    bound = stats.binom.isf(FALSE_ALARM, n_keys, delta)
    assert (selected > bound) if weaken else (selected <= bound)


@pytest.mark.statistical
@pytest.mark.parametrize("weaken", [False, True])
def test_a_unit_in_four_keys_shares_delta_between_them(
    weaken: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each unit holds 4 keys (max_groups=4): each key appears with probability at most
    delta / 4. The twin gives every key the whole delta."""
    if weaken:
        original = mechanisms.key_selection

        def whole_delta(counts: Any, **kwargs: Any) -> NDArray[np.bool_]:
            return original(counts, **{**kwargs, "max_groups": 1})

        monkeypatch.setattr(mechanisms, "key_selection", whole_delta)
    units, delta = 50_000, 0.02
    unit = np.repeat(np.arange(units), 4)
    frame = _unit_frame(
        pd.DataFrame({"unit": unit, "key": unit * 4 + np.tile(np.arange(4), units)}),
        delta=0.5,
    )
    selected = _selected_share(frame, 4 * units, epsilon=1.0, delta=delta, max_rows=1, max_groups=4)
    bound = stats.binom.isf(FALSE_ALARM, 4 * units, delta / 4)
    assert (selected > bound) if weaken else (selected <= bound)


@pytest.mark.parametrize("backend", ["pandas", "dask"])
def test_a_key_absent_from_the_data_never_appears(backend: str) -> None:
    """Unused categories and keys removed by where= are never released, whatever the
    noise; keys held by many units always are (at this epsilon)."""
    keys = pd.CategoricalDtype(["big", "small", "unused", "filtered"])
    frame = pd.DataFrame(
        {
            "unit": np.arange(3000),
            "key": pd.Categorical(["big"] * 2000 + ["small"] * 990 + ["filtered"] * 10, dtype=keys),
        }
    )
    data: Any = frame
    if backend == "dask":
        dd = pytest.importorskip("dask.dataframe")
        data = dd.from_pandas(frame, npartitions=3)
    data.dp.set_budget(epsilon=math.inf, delta=0.9, privacy_unit="unit")
    for _ in range(20 if backend == "pandas" else 3):
        counts = data.dp.count(
            epsilon=50.0, by="key", private_keys=True, delta=0.04, where="key != 'filtered'",
            max_rows=1, max_groups=1,
        )  # fmt: skip
        assert set(counts.index) == {"big", "small"}


@pytest.mark.parametrize("backend", ["pandas", "dask"])
def test_private_keys_on_a_frame_without_keys_releases_nothing_and_charges(backend: str) -> None:
    # A refusal here ("the keys are empty") told whether anyone passed the filter: the
    # refusal depended on the data. Like any release, it is charged and shows no key.
    frame = pd.DataFrame({"age": np.arange(100), "occ": ["a", "b"] * 50})
    data: Any = frame
    if backend == "dask":
        dd = pytest.importorskip("dask.dataframe")
        data = dd.from_pandas(frame, npartitions=2)
    data.dp.set_budget(epsilon=10.0, delta=1e-3)
    options = {"by": "occ", "private_keys": True, "delta": 1e-6, "epsilon": 1.0}
    for older in (64, 200):  # someone passes the first filter, nobody the second
        nobody = data[data["age"] > older]
        assert len(nobody.dp.count(**options)) <= 2
        assert len(nobody.dp.sum("age", bounds=(0, 100), **options)) <= 2
    assert len(data[data["age"] > 200].dp.count(**options)) == 0
    assert data.dp.ledger.spent.epsilon == 5


@pytest.mark.parametrize("backend", ["pandas", "dask"])
def test_selected_labels_show_no_unselected_key(backend: str) -> None:
    """One person alone in 'space' (never selected at this delta): the released labels,
    their type and dtype are the same with and without him. A categorical's index listed
    every category, 'space' included, and became a CategoricalIndex only when the keys
    found matched the categories."""
    big = ["mining"] * 300 + ["trade"] * 300

    def released(keys: list[str], categories: list[str] | None) -> pd.Index:
        column: Any = pd.Categorical(keys, categories=categories)
        frame = pd.DataFrame({"unit": np.arange(len(keys)), "industry": column})
        data: Any = frame
        if backend == "dask":
            dd = pytest.importorskip("dask.dataframe")
            data = dd.from_pandas(frame, npartitions=2)
        data.dp.set_budget(epsilon=math.inf, delta=0.5, privacy_unit="unit")
        counts = data.dp.count(
            epsilon=10.0, by="industry", private_keys=True, delta=1e-12, max_rows=1,
            max_groups=1,
        )  # fmt: skip
        assert list(counts.index) == ["mining", "trade"]
        return counts.index

    for categories in (None, ["mining", "space", "trade"]):
        without, with_him = released(big, categories), released([*big, "space"], categories)
        for index in (without, with_him):
            assert not isinstance(index, pd.CategoricalIndex)
            assert "space" not in repr(index)
        assert without.dtype == with_him.dtype


def test_selected_labels_keep_their_dtype_when_no_key_is_found() -> None:
    # An empty selection was labelled object whatever the column, a non-empty one in the
    # column's dtype: the dtype told whether anyone held a key.
    frame = pd.DataFrame({"age": np.arange(3000), "code": np.arange(3000) % 3})
    frame.dp.set_budget(epsilon=10.0, delta=1e-3)
    options = {"by": "code", "private_keys": True, "delta": 1e-6, "epsilon": 2.0}
    nobody = frame[frame["age"] > 5000].dp.count(**options)
    everybody = frame.dp.count(**options)  # 1000 rows a key: selected but with p ~ 1e-400
    assert len(nobody) == 0
    assert len(everybody) == 3
    assert nobody.index.dtype == everybody.index.dtype == np.int64


def test_private_keys_refuse_mixed_objects_and_intervals_before_any_charge() -> None:
    codes = pd.Series([2] * 400 + [10] * 400 + ["x"], dtype=object)
    mixed = pd.DataFrame({"code": codes, "age": pd.Series(np.arange(801) % 90)})
    mixed["band"] = pd.cut(mixed["age"], bins=4)
    mixed.dp.set_budget(epsilon=10.0, delta=1e-3)
    for by in ("code", "band"):
        with pytest.raises(DomainError):
            mixed.dp.count(epsilon=1.0, by=by, private_keys=True, delta=1e-6)
    lists = pd.DataFrame({"code": pd.Series([["x"]] + ["a"] * 800, dtype=object)})
    lists.dp.set_budget(epsilon=10.0, delta=1e-3)
    with pytest.raises(DomainError, match="hashable"):
        lists.dp.count(epsilon=1.0, by="code", private_keys=True, delta=1e-6)
    assert mixed.dp.ledger.spent.epsilon == lists.dp.ledger.spent.epsilon == 0
    # Validity twin: an object column of strings selects, labelled as strings.
    strings = pd.DataFrame({"code": pd.Series(["2"] * 400 + ["10"] * 400, dtype=object)})
    strings.dp.set_budget(epsilon=10.0, delta=1e-3)
    counts = strings.dp.count(epsilon=5.0, by="code", private_keys=True, delta=1e-6)
    assert list(counts.index) == ["10", "2"]


def test_key_selection_is_zero_at_zero_and_below_delta_at_one() -> None:
    for epsilon in (0.01, 1.0, 10.0):
        for delta in (1e-12, 1e-6, 0.3):
            for groups in (1, 7):
                share = Fraction(delta) / groups
                curve = mechanisms.decision_probability(
                    [0, 1], min_count=1, epsilon=Fraction(epsilon) / groups, delta=share,
                    method="generalized", p=share * (1 - Fraction(1, 2**30)),
                )  # fmt: skip
                assert curve[0] == 0
                assert curve[1] <= float(share)
    chosen = mechanisms.key_selection(np.zeros(10_000, dtype=np.int64), epsilon=5.0, delta=0.9)
    assert not chosen.any()


def test_private_keys_charges_epsilon_and_delta_and_records_both_parts() -> None:
    frame = _unit_frame(
        pd.DataFrame({"unit": np.arange(500), "key": ["a"] * 300 + ["b"] * 200}),
        epsilon=2.0, delta=1e-5,
    )  # fmt: skip
    counts = frame.dp.count(
        epsilon=1.0, by="key", private_keys=True, delta=1e-6, max_rows=1, max_groups=1
    )
    info = dpframe.release_info(counts)
    assert info["epsilon_exact"] == "1"
    assert info["delta_exact"] == "1/1000000"
    assert [p["method"] for p in info["parts"]] == ["count (key selection)", "count"]  # type: ignore[index, union-attr]
    spent = frame.dp.ledger.spent
    assert spent.epsilon == 1
    assert spent.delta == Fraction(1, 10**6)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"by": "key", "private_keys": True}, "delta > 0"),
        ({"private_keys": True, "delta": 1e-6}, "delta > 0"),
        ({"by": "key", "delta": 1e-6}, "drop delta"),
        ({"by": ["key", "unit"], "private_keys": True, "delta": 1e-6}, "one column"),
        ({"by": "declared", "private_keys": True, "delta": 1e-6}, "declared keys"),
    ],
)
def test_private_keys_misuse_is_refused_before_anything_is_charged(
    kwargs: dict[str, Any], message: str
) -> None:
    frame = pd.DataFrame({"unit": range(10), "key": ["a"] * 10, "declared": ["x"] * 10})
    frame.dp.set_budget(epsilon=1.0, delta=1e-5, domains={"declared": ["x", "y"]})
    with pytest.raises(InvalidParameterError, match=message):
        frame.dp.count(epsilon=0.5, **kwargs)
    assert frame.dp.ledger.spent.epsilon == 0


# ---------------------------------------------------------------- bounding, end to end


@pytest.mark.parametrize("backend", ["pandas", "dask"])
def test_bounded_rows_respect_both_bounds_per_unit(
    backend: str, test_rng: np.random.Generator
) -> None:
    """Units with 1 to 50 rows over 10 cells: after bounding, no unit keeps more than
    max_rows rows in a cell or rows in more than max_groups cells, and a unit within the
    bounds keeps every row."""
    sizes = test_rng.integers(1, 51, size=400)
    unit = np.repeat(np.arange(sizes.size), sizes)
    cell = test_rng.integers(0, 10, size=unit.size)
    frame = pd.DataFrame({"unit": unit, "cell": cell})
    data: Any = frame
    if backend == "dask":
        dd = pytest.importorskip("dask.dataframe")
        data = dd.from_pandas(frame, npartitions=4)
    data.dp.set_budget(epsilon=1.0, privacy_unit="unit")
    cells = Group("cell", pd.Index(range(10)), frame["cell"].dtype)
    units = Group("unit", pd.Index(range(sizes.size)), frame["unit"].dtype)
    rows = backend_for(data).rows(None).bounded(["unit"], ContributionBounds(3, 4), [cells], None)
    kept = rows.count_table([units, cells])
    assert kept.max() <= 3
    assert ((kept > 0).sum(axis=1) <= 4).all()
    full = (
        frame.groupby(["unit", "cell"])
        .size()
        .unstack(fill_value=0)
        .reindex(index=range(sizes.size), columns=range(10), fill_value=0)
        .to_numpy()
    )
    within = ((full <= 3).all(axis=1)) & ((full > 0).sum(axis=1) <= 4)
    np.testing.assert_array_equal(kept[within], full[within])
    # where the bound binds, it binds exactly: min(rows, 3) in each of min(cells, 4) cells
    assert ((kept > 0).sum(axis=1) == np.minimum((full > 0).sum(axis=1), 4)).all()


def _kept_pairs(frame: pd.DataFrame) -> NDArray[np.int64]:
    """Which 2 of each unit's 5 rows (values 1, 2, 4, 8, 16) were kept: their sum."""
    units = Group("unit", pd.Index(range(frame["unit"].nunique())), frame["unit"].dtype)
    rows = backend_for(frame).rows(None).bounded(["unit"], ContributionBounds(2, 1), [], None)
    grid = dpframe._backends.SumGrid.for_bounds(0.0, 16.0)
    sums = np.asarray(rows.sum_table("x", grid, [units]), dtype=np.float64) * grid.step
    return np.rint(sums).astype(np.int64)


def _uniform_pairs_pvalue(sums: NDArray[np.int64]) -> float:
    pairs = [a + b for i, a in enumerate([1, 2, 4, 8, 16]) for b in [1, 2, 4, 8, 16][i + 1 :]]
    observed = [int((sums == s).sum()) for s in pairs]
    assert sum(observed) == sums.size
    return float(stats.chisquare(observed).pvalue)


@pytest.mark.parametrize("weaken", [False, True])
def test_kept_rows_are_a_uniform_choice(weaken: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """30,000 units of 5 rows, max_rows=2: the 10 possible pairs are equally likely
    (chi-square, p > 1e-6). The twin keeps each unit's first rows."""
    if weaken:

        def first_rows(
            units: Any, cells: Any, *, max_rows: int, **kwargs: Any
        ) -> NDArray[np.bool_]:
            return np.asarray(pd.Series(units).groupby(units).cumcount().to_numpy() < max_rows)

        monkeypatch.setattr(bounding, "contribution_mask", first_rows)
    n_units = 30_000
    values = np.tile([1.0, 2.0, 4.0, 8.0, 16.0], n_units)  # the same order in every unit
    frame = pd.DataFrame({"unit": np.repeat(np.arange(n_units), 5), "x": values})
    frame.dp.set_budget(epsilon=1.0, privacy_unit="unit")
    p_value = _uniform_pairs_pvalue(_kept_pairs(frame))
    assert (p_value < FALSE_ALARM) if weaken else (p_value > FALSE_ALARM)


# ---------------------------------------------------------------- accounting and records


@pytest.fixture
def panel() -> pd.DataFrame:
    """545 people over 8 yearly waves (the size of the plm Males panel)."""
    rng = np.random.default_rng(3)
    years = np.tile(np.arange(1980, 1988), 545)
    frame = pd.DataFrame(
        {
            "nr": np.repeat(np.arange(545), 8),
            "year": years,
            "union": rng.choice(["no", "yes"], size=years.size),
            "wage": rng.normal(1.6, 0.5, size=years.size),
        }
    )
    frame.dp.set_budget(
        epsilon=10.0,
        domains={"year": range(1980, 1988), "union": ["no", "yes"]},
        privacy_unit="nr",
    )
    return frame


def test_the_panel_crosstab_is_charged_per_person(panel: pd.DataFrame) -> None:
    table = panel.dp.crosstab("year", "union", epsilon=0.5, max_rows=1, max_groups=8)
    info = dpframe.release_info(table)
    assert info["epsilon"] == 0.5
    assert info["sensitivity"] == 8.0
    assert info["noise_scale"] == 16.0  # 8 / 0.5: the noise one person needs
    assert info["privacy_unit"] == ["nr"]
    assert (info["max_rows"], info["max_groups"]) == (1, 8)
    row = panel.dp.ledger.history.iloc[-1]
    assert (row["privacy_unit"], row["max_rows"], row["max_groups"]) == ("nr", 1, 8)
    assert panel.dp.ledger.to_dict()["history"][-1]["max_groups"] == 8  # type: ignore[index]


def test_error_bars_say_they_cover_the_kept_rows_only(panel: pd.DataFrame) -> None:
    kept = "of the rows kept by contribution bounding"
    releases = [
        panel.dp.count(epsilon=0.5, max_rows=2),
        panel.dp.crosstab("year", "union", epsilon=0.5, max_rows=1, max_groups=8, normalize=True),
        panel.dp.mean("wage", epsilon=0.5, bounds=(0, 4), max_rows=8),
        panel[["wage", "nr"]].dp.describe(epsilon=0.5, bounds={"wage": (0, 4)}, max_rows=8),
    ]
    for release in releases:
        assert kept in str(dpframe.release_info(release)["error_bound_covers"])
    # Validity twin: without a privacy unit no row is dropped, and the bar says nothing of it.
    plain = pd.DataFrame({"wage": np.arange(545.0)})
    plain.dp.set_budget(epsilon=1.0)
    assert kept not in str(dpframe.release_info(plain.dp.count(epsilon=0.5))["error_bound_covers"])


def test_a_refused_epsilon_is_explained_in_the_calls_terms(panel: pd.DataFrame) -> None:
    # epsilon=2000 was refused as "epsilon=250", the share each row's noise is drawn at.
    with pytest.raises(InvalidParameterError, match=r"epsilon=250 .* max_groups = 8 for noise"):
        panel.dp.count(by="year", epsilon=2000.0, max_rows=1, max_groups=8)
    with pytest.raises(InvalidParameterError, match=r"epsilon=250 .* max_groups = 8 for noise"):
        panel.dp.groupby("year")["wage"].agg(
            ["size", "mean"], epsilon=4000.0, bounds=(0, 4), max_rows=1, max_groups=8
        )
    # Validity twins: figures that are the caller's own get no note (no bounds; a bad
    # epsilon; a decision quoting the whole epsilon).
    plain = pd.DataFrame({"year": np.arange(100) % 8})
    plain.dp.set_budget(epsilon=math.inf)
    refusals = [
        lambda: plain.dp.count(epsilon=2000.0),
        lambda: panel.dp.mean("wage", epsilon=-1.0, bounds=(0, 4), max_rows=8),
        lambda: panel.dp.threshold_decision(
            min_count=10, epsilon=1700.0, by="year", max_rows=2, max_groups=8
        ),
    ]
    refusals.append(  # a rho refusal: no epsilon was divided
        lambda: panel.dp.describe(
            noise="gaussian", epsilon=1e-7, delta=1e-9, bounds={"wage": (0, 4)}, max_rows=8
        )
    )
    for refused_call in refusals:
        with pytest.raises(InvalidParameterError) as refused:
            refused_call()
        assert "per row" not in str(refused.value)


@pytest.mark.parametrize("backend", ["pandas", "dask"])
def test_missing_values_take_no_place_of_max_rows(backend: str) -> None:
    """20 rows per firm, the first one's growth rate missing (as pct_change leaves it):
    with max_rows=19 every non-missing value is used. Bounding before leaving out the
    missing values kept 19 rows of 20 at random, and lost a value in 19 firms of 20."""
    firms, years = 40, 20
    growth = np.ones(firms * years)
    growth[::years] = np.nan
    frame = pd.DataFrame({"firm": np.repeat(np.arange(firms), years), "growth": growth})
    data: Any = frame
    if backend == "dask":
        dd = pytest.importorskip("dask.dataframe")
        data = dd.from_pandas(frame, npartitions=3)
    data.dp.set_budget(epsilon=math.inf, privacy_unit="firm")
    present = firms * (years - 1)
    # 60 per row: the noise is 0 with probability 1 - 2e-26
    total = data.dp.sum("growth", epsilon=60.0 * 19, bounds=(0, 1), max_rows=19)
    assert round(total) == present
    if backend == "pandas":
        summary = data[["firm", "growth"]].dp.describe(
            epsilon=200.0 * 19, bounds={"growth": (0, 1)}, max_rows=19
        )
        assert summary.loc["count", "growth"] == present
    # Validity twin: with room for every row, the missing ones change nothing either.
    assert round(data.dp.sum("growth", epsilon=60.0 * 20, bounds=(0, 1), max_rows=20)) == present


def test_a_grouped_decision_records_the_unit_and_each_cells_parameters(panel: pd.DataFrame) -> None:
    decided = panel.dp.threshold_decision(
        min_count=530, epsilon=1.0, by="year", max_rows=2, max_groups=8
    )
    info = dpframe.release_info(decided)
    # as a count table: one person moves 8 cells by 2 rows each; each cell decides at 1/8
    assert (info["epsilon"], info["sensitivity"]) == (1.0, 16.0)
    assert (info["cell_epsilon"], info["decided_at"]) == (0.125, 265)


@pytest.mark.parametrize(
    "release",
    [
        lambda f, **k: f.dp.count(epsilon=0.5, by="year", **k),
        lambda f, **k: f.dp.sum("wage", epsilon=0.5, bounds=(0, 5), by="year", **k),
        lambda f, **k: f.dp.mean("wage", epsilon=0.5, bounds=(0, 5), by="year", **k),
        lambda f, **k: f.dp.median("wage", epsilon=0.5, bounds=(0, 5), by="year", **k),
        lambda f, **k: f.dp.value_counts("year", epsilon=0.5, **k),
        lambda f, **k: f.dp.groupby("year")["wage"].std(epsilon=0.5, bounds=(0, 5), **k),
        lambda f, **k: f.dp.groupby("year").size(epsilon=0.5, **k),
        lambda f, **k: f.dp.threshold_decision(min_count=50, epsilon=0.5, by="year", **k),
        lambda f, **k: f.dp.crosstab("year", "union", epsilon=0.5, **k),
    ],
)
def test_every_grouped_method_bounds_and_records_the_unit(
    panel: pd.DataFrame, release: Callable[..., Any]
) -> None:
    with pytest.raises(PrivacyUnitError, match="max_rows="):
        release(panel)
    assert panel.dp.ledger.spent.epsilon == 0
    result = release(panel, max_rows=1, max_groups=8)
    info = dpframe.release_info(result)
    assert info["epsilon"] == 0.5
    parts = info.get("parts") or [info]
    for part in panel.dp.ledger.history.itertuples():
        assert (part.privacy_unit, part.max_rows, part.max_groups) == ("nr", 1, 8)
    assert len(parts) == len(panel.dp.ledger.history)


def test_ungrouped_methods_take_max_rows_only(panel: pd.DataFrame) -> None:
    total = panel.dp.count(epsilon=0.5, max_rows=8)
    assert dpframe.release_info(total)["noise_scale"] == 16.0
    summary = panel.dp.describe(epsilon=0.5, bounds={"wage": (0, 5)}, max_rows=8)
    assert dpframe.release_info(summary)["max_rows"] == 8
    with pytest.raises(InvalidParameterError, match="drop max_groups"):
        panel.dp.count(epsilon=0.5, max_rows=8, max_groups=1)


def test_bounds_are_refused_on_a_frame_without_a_unit() -> None:
    frame = pd.DataFrame({"x": [1.0, 2.0]})
    frame.dp.set_budget(epsilon=1.0)
    with pytest.raises(PrivacyUnitError, match="declares no unit"):
        frame.dp.count(epsilon=0.5, max_rows=1)
    assert "one row" in repr(frame.dp.ledger)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2", 2**40 + 1, 2**63])
def test_bad_bounds_are_refused(panel: pd.DataFrame, bad: object) -> None:
    with pytest.raises(DPFrameError):
        panel.dp.count(epsilon=0.5, by="year", max_rows=bad, max_groups=8)  # type: ignore[arg-type]
    assert panel.dp.ledger.spent.epsilon == 0


def test_a_frame_that_lost_the_unit_column_is_refused(panel: pd.DataFrame) -> None:
    with pytest.raises(PrivacyUnitError, match="lacks"):
        panel[["year", "wage"]].dp.mean("wage", epsilon=0.5, bounds=(0, 5), max_rows=8)
    with pytest.raises(PrivacyUnitError, match=r"in the index: release from df\.reset_index"):
        panel.set_index(["nr", "year"]).dp.mean("wage", epsilon=0.5, bounds=(0, 5), max_rows=8)
    with pytest.raises(PrivacyUnitError, match="Series"):
        panel["wage"].dp.mean(epsilon=0.5, bounds=(0, 5))
    assert panel.dp.ledger.spent.epsilon == 0


def test_a_unit_in_the_index_is_named_as_such_at_set_budget() -> None:
    frame = pd.DataFrame({"firm": np.repeat(np.arange(5), 4), "x": np.arange(20.0)})
    with pytest.raises(MissingColumnError, match=r"in the index: use df\.reset_index"):
        frame.set_index("firm").dp.set_budget(epsilon=1.0, privacy_unit="firm")
    # Validity twin: a name that is nowhere gets no such hint.
    with pytest.raises(MissingColumnError) as missing:
        frame.dp.set_budget(epsilon=1.0, privacy_unit="company")
    assert "index" not in str(missing.value)


def test_a_dask_frame_that_lost_the_unit_column_is_refused_with_dpframes_error() -> None:
    # Dask's index has no .names: an AttributeError came out of the refusal's message.
    dd = pytest.importorskip("dask.dataframe")
    firms = pd.DataFrame({"firm": np.repeat(np.arange(7), 4), "inv": np.arange(28.0) + 0.125})
    data = dd.from_pandas(firms, npartitions=2)
    data.dp.set_budget(epsilon=10.0, privacy_unit="firm")
    with pytest.raises(PrivacyUnitError, match="lacks"):
        data[["inv"]].dp.count(epsilon=1.0, max_rows=4)
    with pytest.raises(PrivacyUnitError, match="in the index"):
        data.set_index("firm").dp.count(epsilon=1.0, max_rows=4)
    # Validity twin: with the unit's column the release is made.
    assert data.dp.ledger.spent.epsilon == 0
    data.dp.count(epsilon=1.0, max_rows=4)
    assert data.dp.ledger.spent.epsilon == 1


def test_the_unit_is_declared_once_before_any_release(panel: pd.DataFrame) -> None:
    with pytest.raises(InvalidParameterError, match="already"):
        panel.dp.set_budget(epsilon=5.0, privacy_unit="year")
    frame = pd.DataFrame({"id": [1, 2], "x": [1.0, 2.0]})
    frame.dp.set_budget(epsilon=1.0)
    frame.dp.count(epsilon=0.1)
    with pytest.raises(InvalidParameterError, match="release"):
        frame.dp.set_budget(epsilon=1.0, privacy_unit="id")
    with pytest.raises(DPFrameError):
        pd.DataFrame({"x": [1]}).dp.set_budget(epsilon=1.0, privacy_unit="missing")


def test_repeated_rows_of_a_unit_are_bounded_not_refused(panel: pd.DataFrame) -> None:
    """concat and explode repeat a person's rows; with a unit, the release bounds them."""
    doubled = pd.concat([panel, panel])
    assert doubled.dp.ledger is panel.dp.ledger
    rows = backend_for(doubled).rows(None)
    years = Group("year", pd.Index(range(1980, 1988)), doubled["year"].dtype)
    kept = rows.bounded(["nr"], ContributionBounds(1, 8), [years], None).count_table([years])
    assert (kept == 545).all()  # one row per person and year, as in the panel
    exploded = panel.assign(tag=[["a", "b"]] * len(panel)).explode("tag")
    assert exploded.dp.count(epsilon=0.1, by="year", max_rows=1, max_groups=8).size == 8


def test_merges_of_unit_data_with_itself_must_join_on_the_unit(panel: pd.DataFrame) -> None:
    lookup = pd.DataFrame({"year": range(1980, 1988), "decade": ["80s"] * 8})
    merged = panel.dp.merge(lookup, on="year", validate="many_to_many")
    assert merged.dp.ledger is panel.dp.ledger
    with pytest.raises(PrivacyUnitError, match="unit's columns"):
        panel.dp.merge(panel[["year", "wage"]], on="year")
    same = panel.dp.merge(panel[["nr", "year", "union"]], on=["nr", "year"])
    assert same.dp.ledger is panel.dp.ledger
    with pytest.raises(PrivacyUnitError):
        panel.dp.join(panel[["wage"]], rsuffix="_r")


def test_private_keys_on_a_panel_count_people_not_rows() -> None:
    """Each person has 8 rows under one key; a key of 3 people is as rare as 3 people."""
    frame = pd.DataFrame({"nr": np.repeat(np.arange(3), 8), "key": ["rare"] * 24})
    frame.dp.set_budget(epsilon=math.inf, delta=0.5, privacy_unit="nr")
    rows = backend_for(frame).rows(None)
    group = backend_for(frame).observed_group("key", "by")
    bounded = rows.bounded(["nr"], ContributionBounds(8, 1), [group], None)
    assert bounded.unit_counts(["nr"], [group]).tolist() == [3]
    assert bounded.count_table([group]).tolist() == [24]


def test_dask_releases_bound_units_and_refuse_self_merges(panel: pd.DataFrame) -> None:
    dd = pytest.importorskip("dask.dataframe")
    data = dd.from_pandas(panel.drop(columns=["union"]), npartitions=4)
    data.dp.set_budget(epsilon=10.0, domains={"year": range(1980, 1988)}, privacy_unit="nr")
    counts = data.dp.count(epsilon=0.5, by="year", max_rows=1, max_groups=8)
    info = dpframe.release_info(counts)
    assert (info["noise_scale"], info["max_groups"]) == (16.0, 8)
    with pytest.raises(PrivacyUnitError, match="max_rows="):
        data.dp.count(epsilon=0.5, by="year")
    doubled = dd.concat([data, data])  # repeats each person's rows: bounded, not refused
    total = doubled.dp.count(epsilon=0.5, by="year", max_rows=1, max_groups=8)
    assert len(total) == 8
    self_merged = data.merge(data[["year", "wage"]], on="year")
    with pytest.raises(PrivacyUnitError):
        self_merged.dp.count(epsilon=0.5, max_rows=1)


@pytest.mark.parametrize("dtype", ["int8", "int16", "uint8", "int64"])
def test_narrow_integer_unit_ids_are_never_mistaken_for_missing(dtype: str) -> None:
    """Small-dtype ids spanning more than the dtype's half range keep one code per unit.

    Offsets computed in the ids' own dtype would wrap (int8: 100 - (-100) = -56), and a
    negative code means "no unit": that unit's rows would silently vanish.
    """
    ids = np.repeat(np.array([0, 100, 200]) - (100 if dtype != "uint8" else 0), 60)
    frame = pd.DataFrame({"id": ids.astype(dtype), "g": "a"})
    frame.dp.set_budget(epsilon=1.0, privacy_unit="id", domains={"g": ["a"]})
    rows = backend_for(frame).rows(None)
    group = Group("g", pd.Index(["a"]), frame["g"].dtype)
    kept = rows.bounded(["id"], ContributionBounds(1, 1), [group], None).count_table([group])
    assert kept.tolist() == [3]  # one row for each of the three units


@pytest.mark.parametrize("dtype", ["float64", "object", "category", "Int64"])
def test_a_multi_column_unit_with_a_missing_id_has_no_unit(dtype: str) -> None:
    """A row missing any column of a multi-column unit belongs to no unit: never kept."""
    frame = pd.DataFrame(
        {
            "household": np.repeat(np.arange(6), 2),
            "member": pd.Series([1, 2] * 6, dtype="float64").astype(dtype),
            "g": "a",
        }
    )
    frame.loc[[0, 1, 5], "member"] = pd.NA if dtype == "Int64" else np.nan
    frame.dp.set_budget(epsilon=math.inf, privacy_unit=["household", "member"])
    rows = backend_for(frame).rows(None)
    group = Group("g", pd.Index(["a"]), frame["g"].dtype)
    bounded = rows.bounded(["household", "member"], ContributionBounds(1, 1), [group], None)
    assert bounded.count_table([group]).tolist() == [9]  # 12 rows, 3 without a unit


@pytest.mark.parametrize("columns", [["id"], ["id", "household"]])
@pytest.mark.parametrize("dtype", ["float64", "float64[pyarrow]", "float32[pyarrow]"])
def test_float_unit_ids_equal_in_value_are_one_unit(dtype: str, columns: list[str]) -> None:
    """0.0 and -0.0 are one id, and NaN (Arrow's too) is no id, whatever the storage.

    Arrow tells floats apart by their bits: an Arrow id column counted -0.0 as a second
    unit, each bounded on its own, and an Arrow NaN (a value, not a null) as a unit.
    """
    pyarrow = pytest.importorskip("pyarrow")
    ids = [0.0, -0.0] * 20 + [1.0, float("nan"), float("nan")]
    column = pd.Series(pyarrow.array(ids, from_pandas=False)).astype(dtype)
    frame = pd.DataFrame({"id": column, "household": "h", "g": "a"})
    frame.dp.set_budget(epsilon=math.inf, privacy_unit=columns, domains={"g": ["a"]})
    rows = backend_for(frame).rows(None)
    group = Group("g", pd.Index(["a"]), frame["g"].dtype)
    for counts_only in (True, False):
        bounded = rows.bounded(
            columns, ContributionBounds(1, 1), [group], None, counts_only=counts_only
        )
        assert bounded.count_table([group]).tolist() == [2]  # ids 0.0 and 1.0


def test_a_frame_that_lost_its_ledger_in_a_merge_says_so(panel: pd.DataFrame) -> None:
    """Not "declare a unit", which would put a second budget on the same people."""
    prices = pd.DataFrame({"year": range(1980, 1988), "cpi": np.linspace(82.0, 113.0, 8)})
    merged = panel.merge(prices, on="year")  # pandas drops attrs: the ledger is lost
    with pytest.raises(dpframe.errors.BudgetNotSetError, match="ledger was lost"):
        merged.dp.count(epsilon=0.5, by="year", max_rows=1, max_groups=8)


def test_cutoff_decisions_ask_for_the_delta_of_every_cell_a_unit_touches(
    panel: pd.DataFrame,
) -> None:
    panel = pd.DataFrame({name: panel[name].to_numpy() for name in panel.columns})
    panel.dp.set_budget(
        epsilon=10.0, delta=0.9, privacy_unit="nr", domains={"year": range(1980, 1988)}
    )
    decide: dict[str, Any] = {"min_count": 300, "method": "cutoff", "by": "year"}
    with pytest.raises(InvalidParameterError, match="cannot decide") as refused:
        panel.dp.threshold_decision(epsilon=2.0, delta=0.87, max_rows=1, max_groups=8, **decide)
    assert "pass delta" not in str(refused.value)
    # Two cells at epsilon 0.5: 2 * (1 - exp(-0.25)) = 0.4424 in all; the advice is enough.
    with pytest.raises(InvalidParameterError, match=r"pass delta=0\.443"):
        panel.dp.threshold_decision(epsilon=0.5, delta=0.2, max_rows=1, max_groups=2, **decide)
    assert panel.dp.ledger.spent.epsilon == 0
    decided = panel.dp.threshold_decision(
        epsilon=0.5, delta=0.443, max_rows=1, max_groups=2, **decide
    )
    assert decided.dtype == bool


def test_a_unit_column_given_twice_is_refused_before_anything_is_charged() -> None:
    # pd.concat([panel, panel[["nr"]]], axis=1): the unit's codes raised AttributeError.
    panel = pd.DataFrame({"nr": [1, 1, 2], "year": [1980, 1981, 1980]})
    panel.dp.set_budget(epsilon=1.0, privacy_unit="nr")
    doubled = pd.concat([panel, panel[["nr"]]], axis=1)
    with pytest.raises(InvalidParameterError, match="duplicate column"):
        doubled.dp.count(epsilon=0.5, max_rows=1)
    assert panel.dp.ledger.spent.epsilon == 0


def _sum_while_a_unit_is_declared(monkeypatch: pytest.MonkeyPatch, *, declare: bool) -> float:
    """A sum planned per row, during which (as another thread may) the unit is declared."""
    from dpframe._backends import kernels

    frame = pd.DataFrame({"pid": np.arange(40) // 10, "x": 50.0})  # 10 rows per person
    frame.dp.set_budget(epsilon=1.0)
    summed = kernels.sum_tables

    def declaring(*args: Any, **kwargs: Any) -> Any:
        if declare:  # allowed: the ledger has no release yet
            frame.dp.set_budget(epsilon=1.0, privacy_unit="pid")
        return summed(*args, **kwargs)

    monkeypatch.setattr(kernels, "sum_tables", declaring)
    frame.dp.sum("x", epsilon=0.5, bounds=(0, 100))
    return float(frame.dp.ledger.spent.epsilon)


def test_a_unit_declared_during_a_release_withholds_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # The release was planned with one row per person, without bounding any person's 10
    # rows: charged 0.5 on a ledger that then said it accounts per person (true cost 5).
    with pytest.raises(PrivacyUnitError, match="declared while this release"):
        _sum_while_a_unit_is_declared(monkeypatch, declare=True)


def test_validity_a_release_with_its_unit_unchanged_is_charged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert _sum_while_a_unit_is_declared(monkeypatch, declare=False) == 0.5


def test_counts_of_a_strided_selection_release_as_of_a_copy() -> None:
    # df.iloc[::2] holds strided Categorical codes, which the compiled counts refused.
    gen = np.random.default_rng(0)
    base = pd.DataFrame(
        {
            "pid": gen.integers(0, 10, 40),
            "g": pd.Categorical(gen.choice(list("abc"), 40)),
            "h": gen.choice([1, 2], 40),
        }
    )
    tables = []
    for frame in (base.iloc[::2], base.iloc[::2].copy()):
        frame.dp.set_budget(math.inf, privacy_unit="pid", domains={"g": list("abc"), "h": [1, 2]})
        # max_groups covers every unit's cells: no choice, and no noise at this epsilon.
        tables.append(
            frame.dp.crosstab("g", "h", epsilon=6 * 190, max_rows=1, max_groups=6).to_numpy()
        )
    assert tables[0].tolist() == tables[1].tolist()
