"""dpframe._backends: one accessor, a backend per frame type, exact aggregates on domains."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

import dpframe
from dpframe._backends import Group, SumGrid, backend_for, kernels, register_backend
from dpframe._backends.pandas_backend import PandasBackend
from dpframe.errors import InvalidParameterTypeError


def test_pandas_frames_get_the_pandas_backend() -> None:
    frame = pd.DataFrame({"x": [1.0]})
    assert isinstance(backend_for(frame), PandasBackend)
    assert type(frame.dp) is dpframe.DPAccessor


@pytest.mark.parametrize("thing", [[1, 2], np.arange(3), pd.Series([1.0]), "frame", None])
def test_anything_else_is_refused_with_the_fix(thing: object) -> None:
    with pytest.raises(InvalidParameterTypeError, match="pandas DataFrames"):
        backend_for(thing)
    with pytest.raises(InvalidParameterTypeError):
        dpframe.dp(thing)  # type: ignore[arg-type]


def test_a_registered_backend_serves_its_frame_type() -> None:
    class Frame:
        pass

    class Backend(PandasBackend):
        def __init__(self, frame: Frame) -> None:
            super().__init__(pd.DataFrame({"x": [1.0, 2.0]}))

    register_backend(Frame, Backend)
    assert isinstance(backend_for(Frame()), Backend)


def test_rows_aggregate_exactly_on_declared_domains() -> None:
    frame = pd.DataFrame({"k": ["a", "b", "zzz", None, "a"], "x": [1.0, np.nan, 5.0, 2.0, 3.0]})
    backend = PandasBackend(frame)
    group = backend.group("k", {"k": ["a", "b", "c"]}, "by")
    assert isinstance(group, Group)
    rows = backend.rows("x > 0")
    assert rows.count() == 4  # NaN > 0 is False
    np.testing.assert_array_equal(rows.count_table([group]), [2, 0, 0])
    grid = SumGrid.for_bounds(0.0, 4.0)
    assert rows.sum("x", grid) * grid.step == 1.0 + 4.0 + 2.0 + 3.0  # 5 clamped to 4
    np.testing.assert_array_equal(rows.sum_table("x", grid, [group]) * grid.step, [4.0, 0.0, 0.0])


def test_sums_past_int64_are_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    # Flush into Python integers every 4 rows instead of 2**29: the code path that keeps
    # sums of more than 2**30 rows exact, on a table small enough to check by hand.
    monkeypatch.setattr(kernels, "_FLUSH_ROWS", 4)
    monkeypatch.setattr(kernels, "_MAX_SUM_BLOCK", 2)
    values = np.full(11, 1e300)
    grid = SumGrid.for_bounds(0.0, 1e300)
    table = kernels.sum_table(grid, values, [np.zeros(11, dtype=np.int64)], [1])
    assert table.dtype == object
    assert int(table[0]) == 11 * grid.sensitivity_units
    assert kernels.sum_total(grid, values, None) == 11 * grid.sensitivity_units


@pytest.mark.parametrize("masked", [False, True])
def test_sum_tables_leave_out_nan_in_any_block(
    masked: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NaN is found through the sums (no scan of its own): blocks with and without NaN,
    at their first and last rows, give the exact counts and sums of the other rows."""
    monkeypatch.setattr(kernels, "_BLOCK", 64)  # 64 rows per block: 16 blocks
    gen = np.random.default_rng(7)
    n, cells = 1024, 3
    values = gen.uniform(-5.0, 15.0, n)
    values[[0, 63, 64, 200, 511, 1023]] = np.nan  # blocks 0, 1, 3, 7, 15; the others clean
    values[[5, 6]] = [np.inf, -np.inf]
    codes = gen.integers(-1, cells, n)  # -1: in no cell
    mask = gen.random(n) < 0.7 if masked else None
    lo, hi = 0.0, 10.0
    plain = SumGrid.for_bounds(lo, hi)
    centred = dataclasses.replace(plain, centre=5.0, radius=5.0)
    present = dataclasses.replace(plain, step=1.0, present=True)
    for grids in ([present, plain, centred], [plain], [present]):
        tables = kernels.sum_tables(grids, values, [codes], [cells], mask)
        kept = ~np.isnan(values) & (codes >= 0) & (True if mask is None else mask)
        for grid, table in zip(grids, tables, strict=True):
            if grid.present:
                units = np.ones(n)
            else:
                units = np.rint((np.clip(values, lo, hi) - grid.centre) / grid.step)
            expected = [int(units[kept & (codes == c)].sum()) for c in range(cells)]
            assert table.tolist() == expected
