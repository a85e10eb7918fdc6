"""dpframe._backends: one accessor, a backend per frame type, exact aggregates on domains."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpframe
from dpframe._backends import Group, SumGrid, _sums, backend_for, kernels, register_backend
from dpframe._backends.bounding import ContributionBounds
from dpframe._backends.pandas_backend import PandasBackend
from dpframe.errors import DPFrameError, InvalidParameterTypeError


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


# ------------------------------------------------ the compiled sum kernel (_sums.c)


def _reference_units(grid: SumGrid, values: np.ndarray) -> list[int]:
    """Each value in grid steps, with numpy's clip, multiply and rint (the definition)."""
    if grid.present:
        return [0 if np.isnan(v) else 1 for v in values]
    with np.errstate(invalid="ignore"):
        units = np.clip(values, grid.lo, grid.hi)
        if grid.radius is not None:
            units = units - grid.centre
        if grid.square_centre is not None:
            units = np.clip(
                units * units - grid.square_centre, -grid.square_centre, grid.square_centre
            )
        units = np.rint(units * (1.0 / grid.step))
    return [0 if np.isnan(u) else int(u) for u in units]


def _reference_tables(
    grids: list[SumGrid],
    values: np.ndarray,
    codes: list[np.ndarray],
    sizes: list[int],
    mask: np.ndarray | None,
) -> list[np.ndarray]:
    """Python-integer sums per cell, one row at a time."""
    tables = [np.zeros(sizes, dtype=object) for _ in grids]
    rows = [_reference_units(grid, values) for grid in grids]
    for i in range(len(values)):
        cell = tuple(int(code[i]) for code in codes)
        if min(cell) < 0 or (mask is not None and not mask[i]):
            continue
        for table, units in zip(tables, rows, strict=True):
            table[cell] += units[i]
    return tables


_VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([-0.0, 0.0, 0.5, 1.5, 2.5, -2.5, 10.0, -10.0]),
    st.floats(-12.0, 12.0),
)


@settings(max_examples=300, deadline=None)
@given(
    data=st.data(),
    n=st.integers(0, 5000),
    sizes=st.lists(st.integers(1, 5), min_size=1, max_size=3),
    dtypes=st.lists(st.sampled_from([np.int8, np.int16, np.int32, np.int64]), min_size=3),
    lo=st.floats(-10.0, 0.0),
    width=st.floats(0.001, 20.0),
    masked=st.booleans(),
)
def test_compiled_sums_equal_numpy_row_by_row(
    data: st.DataObject,
    n: int,
    sizes: list[int],
    dtypes: list[type],
    lo: float,
    width: float,
    masked: bool,
) -> None:
    """Every grid's table equals the sum of numpy's per-row units (clip, multiply, rint),
    for values of every kind (NaN, ±inf, -0.0, halves of a step), codes of every integer
    type with -1, masks, and blocks longer than the kernel's (2048 rows)."""
    gen = np.random.default_rng(data.draw(st.integers(0, 2**32)))
    hi = lo + width
    plain = SumGrid.for_bounds(lo, hi)
    centre = (lo + hi) / 2
    centred = dataclasses.replace(plain, centre=centre, radius=max(hi - centre, centre - lo))
    square_centre = centred.radius**2 / 2
    squared = dataclasses.replace(
        centred,
        step=SumGrid.for_bounds(-square_centre, square_centre).step,
        square_centre=square_centre,
    )
    present = SumGrid(0.0, 1.0, 1.0, present=True, limit=1)
    # any order and any subset: a count rides along with the first grid of values
    grids = data.draw(st.permutations([plain, centred, squared, present]))
    grids = grids[: data.draw(st.integers(1, 4))]
    drawn = data.draw(st.lists(_VALUES, min_size=0, max_size=50))
    values = gen.uniform(lo - 1.0, hi + 1.0, n)
    values[: min(n, len(drawn))] = drawn[:n]
    # exact half steps, where rounding half to even differs from every other rounding
    halves = gen.random(n) < 0.2
    values[halves] = (gen.integers(-(2**20), 2**20, int(halves.sum())) + 0.5) * plain.step
    values[gen.random(n) < 0.05] = np.nan
    values[gen.random(n) < 0.01] = np.inf
    values[gen.random(n) < 0.01] = -np.inf
    gen.shuffle(values)
    codes = [
        gen.integers(-1, size, n).astype(dtype) for size, dtype in zip(sizes, dtypes, strict=False)
    ]
    mask = gen.random(n) < 0.8 if masked else None
    tables = kernels.sum_tables(grids, values, codes, sizes, mask)
    expected = _reference_tables(grids, values, codes, sizes, mask)
    for table, reference in zip(tables, expected, strict=True):
        assert table.shape == tuple(sizes)
        assert table.tolist() == reference.tolist()
    total = kernels.sum_total(plain, values, mask)
    assert total == sum(
        table.sum()
        for table in _reference_tables([plain], values, [np.zeros(n, np.int8)], [1], mask)
    )


def test_compiled_sums_round_half_to_even() -> None:
    """Halves of a step go to the even neighbour, as np.rint: 0.5, 1.5, 2.5, -2.5 steps
    add 0 + 2 + 2 - 2 = 2 (truncation would give 1, rounding half up 4)."""
    grid = SumGrid.for_bounds(-4.0, 4.0)
    values = np.array([0.5, 1.5, 2.5, -2.5]) * grid.step
    assert kernels.sum_total(grid, values, None) == 2
    assert kernels.sum_table(grid, values, [np.zeros(4, np.int8)], [1]).tolist() == [2]


def test_compiled_sums_refuse_codes_out_of_range() -> None:
    """A code outside [-1, size) would write outside the table: refused (the rows before
    it may have been added; sum_tables then drops the whole table)."""
    spec = (SumGrid.for_bounds(0.0, 1.0).spec(),)
    values = np.ones(4)
    for dtype in (np.int8, np.int16, np.int32, np.int64):
        for code in (2, -2, 127):
            codes = np.array([0, 1, code, 0], dtype=dtype)
            with pytest.raises(ValueError, match="outside"):
                _sums.add_sums(values, (codes,), (2,), None, spec, np.zeros(3, dtype=np.int64))
            with pytest.raises(ValueError, match="outside"):  # the path of several columns
                kernels.sum_tables([SumGrid.for_bounds(0.0, 1.0)], values, [codes, codes], [2, 2])
    out = np.zeros(3, dtype=np.int64)
    _sums.add_sums(values, (np.array([0, 1, 1, -1], dtype=np.int8),), (2,), None, spec, out)
    assert out.tolist() == [1 << 32, 1 << 32, 2 << 32]  # twin: in range, summed


def test_compiled_sums_refuse_what_they_cannot_read() -> None:
    spec = (SumGrid.for_bounds(0.0, 1.0).spec(),)
    out = np.zeros(2, dtype=np.int64)
    codes = (np.zeros(3, dtype=np.int8),)
    with pytest.raises(TypeError, match="float64"):
        _sums.add_sums(np.ones(3, dtype=np.float32), codes, (1,), None, spec, out)
    with pytest.raises(TypeError, match="signed integers"):
        _sums.add_sums(np.ones(3), (np.zeros(3, dtype=np.uint8),), (1,), None, spec, out)
    with pytest.raises(TypeError, match="one per value"):
        _sums.add_sums(np.ones(4), codes, (1,), None, spec, out)
    with pytest.raises(TypeError, match="mask"):
        _sums.add_sums(np.ones(3), codes, (1,), np.ones(3, dtype=np.int8), spec, out)
    with pytest.raises(TypeError, match="out must be int64"):
        _sums.add_sums(np.ones(3), codes, (1,), None, spec, np.zeros(3, dtype=np.int64))
    with pytest.raises(TypeError, match="C-contiguous"):
        _sums.add_sums(np.ones(6)[::2], codes, (1,), None, spec, out)
    read_only = np.zeros(2, dtype=np.int64)
    read_only.flags.writeable = False
    with pytest.raises(TypeError, match="out"):
        _sums.add_sums(np.ones(3), codes, (1,), None, spec, read_only)
    _sums.add_sums(np.ones(3), codes, (1,), None, spec, out)  # twin: all well formed
    assert out.tolist() == [0, 3 << 32]


def test_compiled_sums_refuse_units_past_the_grid() -> None:
    """A grid whose values exceed 2**32 steps could wrap int64 sums: refused."""
    fine = SumGrid.for_bounds(0.0, 1.0)
    coarse = dataclasses.replace(fine, step=fine.step / 4)  # 1.0 is now 2**34 steps
    codes = [np.zeros(2, dtype=np.int8)]
    with pytest.raises(ValueError, match="2\\*\\*32"):
        kernels.sum_tables([coarse], np.array([0.0, 1.0]), codes, [1])
    assert kernels.sum_tables([fine], np.array([0.0, 1.0]), codes, [1])[0].tolist() == [1 << 32]


def test_compiled_sums_let_other_threads_run() -> None:
    """Two threads summing at once (the kernel releases the GIL, as Dask's threaded
    scheduler needs) each get their own exact table: the kernel shares no state."""
    from concurrent.futures import ThreadPoolExecutor

    gen = np.random.default_rng(3)
    grid = SumGrid.for_bounds(0.0, 100.0)
    frames = [gen.uniform(-10, 110, 200_000) for _ in range(4)]
    codes = [gen.integers(-1, 7, 200_000).astype(np.int16) for _ in range(4)]
    alone = [
        kernels.sum_table(grid, v, [c], [7]).tolist() for v, c in zip(frames, codes, strict=True)
    ]
    with ThreadPoolExecutor(2) as pool:
        together = list(
            pool.map(
                lambda vc: kernels.sum_table(grid, vc[0], [vc[1]], [7]).tolist(),
                zip(frames, codes, strict=True),
            )
        )
    assert together == alone


def test_compiled_sums_refuse_tables_whose_size_overflows() -> None:
    """8 grids of 2**61 + 1 cells wrap to 8 in a product: refused before any write."""
    grid = SumGrid.for_bounds(0.0, 1.0).spec()
    values, codes = np.array([1.0]), (np.array([7], np.int64),)
    with pytest.raises(OverflowError, match="too many cells"):
        _sums.add_sums(values, codes, (2**61,), None, (grid,) * 8, np.zeros(8, np.int64))
    out = np.zeros(2 * 9, np.int64)  # twin: 8 cells and 2 grids fit
    _sums.add_sums(values, codes, (np.int64(8),), None, (grid,) * 2, out)  # numpy sizes too
    assert out.tolist() == [0] * 8 + [1 << 32] + [0] * 8 + [1 << 32]
    with pytest.raises(TypeError, match="tuple"):
        _sums.add_sums(values, codes, (8,), None, (list(grid),), out[:9])


def test_a_grid_whose_radius_misses_a_bound_is_refused() -> None:
    """The kernel does not clamp to ±radius: a radius short of a bound would leave values
    beyond the sensitivity the grid's limit claims."""
    grid = SumGrid(0.0, 10.0, 2.0**-28, centre=5.0, radius=4.0)
    with pytest.raises(dpframe.errors.DPFrameError, match="radius"):
        kernels.sum_total(grid, np.array([10.0]), None)
    covering = dataclasses.replace(grid, radius=5.0)
    assert kernels.sum_total(covering, np.array([10.0]), None) == 5 * 2**28


def test_rows_bounded_for_one_count_are_read_once_and_only_counted() -> None:
    # counts_only lets a backend count each unit's kept rows without choosing them: a
    # second read would be a second draw, and a sum needs the rows themselves.
    frame = pd.DataFrame({"u": [0, 0, 0, 1], "g": ["a", "b", "b", "a"], "x": [1.0, 2, 3, 4]})
    backend = PandasBackend(frame)
    group = backend.group("g", {"g": ["a", "b"]}, "by")
    bounds = ContributionBounds(max_rows=1, max_groups=2)
    rows = backend.rows(None).bounded(["u"], bounds, [group], None, counts_only=True)
    assert rows.count_table([group]).tolist() == [2, 1]
    with pytest.raises(DPFrameError, match="read again"):
        rows.count_table([group])
    again = backend.rows(None).bounded(["u"], bounds, [group], None, counts_only=True)
    with pytest.raises(DPFrameError, match="read otherwise"):
        again.sum_table("x", SumGrid.for_bounds(0.0, 4.0), [group])
    # Validity twin: rows bounded with a mask may be read as often as needed.
    masked = backend.rows(None).bounded(["u"], bounds, [group], None)
    assert masked.count_table([group]).tolist() == masked.count_table([group]).tolist() == [2, 1]
