"""dpframe._backends.bounding: the bounds hold, the choice is uniform, refusals draw nothing."""

from __future__ import annotations

import itertools
import subprocess
import sys
from collections import defaultdict
from collections.abc import Callable
from typing import Any
from unittest import mock

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from numpy.typing import NDArray

from dpframe._backends import _bounded, bounding
from dpframe._backends.bounding import (
    ContributionBounds,
    bounded_count_table,
    cell_numbers,
    contribution_mask,
    keeps_every_row,
    unit_presence_mask,
    units_to_check,
)
from dpframe._random import BitSource, GeneratorBitSource, bit_source
from dpframe.errors import DPFrameError, InvalidParameterError, InvalidParameterTypeError
from tests._stats import FALSE_ALARM, chi_square_pvalue
from tests.conftest import WordCounter

Mask = NDArray[np.bool_]


def violations(
    units: NDArray[Any], cells: NDArray[Any] | None, kept: Mask, max_rows: int, max_groups: int
) -> list[str]:
    """Every way ``kept`` breaks contribution_mask's contract (empty: none).

    Bounds: no unit keeps more than ``max_rows`` rows in a cell or rows in more than
    ``max_groups`` cells, and rows with no unit or no cell are dropped. Maximality: each
    unit keeps ``min(k, max_groups)`` of its ``k`` cells and ``min(m, max_rows)`` of the
    ``m`` rows of each kept cell (so a unit within the bounds keeps all its rows).
    """
    found: list[str] = []
    cells_of = np.zeros(len(units), dtype=np.int64) if cells is None else cells
    rows: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    kept_rows: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for unit, cell, keep in zip(units.tolist(), cells_of.tolist(), kept.tolist(), strict=True):
        if unit < 0 or cell < 0:
            if keep:
                found.append(f"kept a row with unit {unit}, cell {cell}")
            continue
        rows[unit][cell] += 1
        if keep:
            kept_rows[unit][cell] += 1
    for unit, per_cell in rows.items():
        kept_cells = kept_rows[unit]
        if len(kept_cells) != min(len(per_cell), max_groups):
            found.append(f"unit {unit} kept {len(kept_cells)} of {len(per_cell)} cells")
        for cell, count in kept_cells.items():
            if count != min(per_cell[cell], max_rows):
                found.append(f"unit {unit} kept {count} of {per_cell[cell]} rows in cell {cell}")
    return found


# ---------------------------------------------------------------- the bounds hold


@st.composite
def structures(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(0, 40))
    units = np.array(draw(st.lists(st.integers(-1, 5), min_size=n, max_size=n)), dtype=np.int64)
    grouped = draw(st.booleans())
    cells = (
        np.array(draw(st.lists(st.integers(-1, 6), min_size=n, max_size=n)), dtype=np.int64)
        if grouped
        else None
    )
    return {
        "units": units,
        "cells": cells,
        "max_rows": draw(st.integers(1, 4)),
        "max_groups": draw(st.integers(1, 4)),
        "seed": draw(st.integers(0, 2**32)),
        # How the codes are passed: each encoding takes another path through the kernel.
        "encoding": draw(st.sampled_from(["int64", "small", "sparse", "wide", "ranked"])),
    }


def encode(
    units: NDArray[np.int64], cells: NDArray[np.int64] | None, encoding: str
) -> tuple[NDArray[Any], NDArray[Any] | None]:
    """The same structure in other codes: the mask's contract cannot depend on them."""
    if encoding == "small":  # narrow dtypes, as from Categorical codes
        return units.astype(np.int8), None if cells is None else cells.astype(np.int16)
    if encoding == "sparse":  # unit ids far apart: made dense with np.unique first
        return np.where(units < 0, -1, units * 10**15 + 7), cells
    if encoding == "wide":  # cell numbers too wide to pack: the np.lexsort path
        return units, None if cells is None else np.where(cells < 0, -1, cells + 2**60)
    return units, cells


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(structure=structures())
def test_bounds_hold_and_nothing_more_is_dropped(structure: dict[str, Any]) -> None:
    units, cells = structure["units"], structure["cells"]
    max_rows, max_groups = structure["max_rows"], structure["max_groups"]
    coded_units, coded_cells = encode(units, cells, structure["encoding"])
    # "ranked": rank every segment with a sort instead of Floyd's algorithm.
    floyd_max = 0 if structure["encoding"] == "ranked" else bounding._FLOYD_MAX
    with mock.patch.object(bounding, "_FLOYD_MAX", floyd_max):
        kept = contribution_mask(
            coded_units,
            coded_cells,
            max_rows=max_rows,
            max_groups=max_groups,
            source=GeneratorBitSource(np.random.default_rng(structure["seed"])),
        )
    assert kept.dtype == np.bool_
    assert kept.shape == units.shape
    assert violations(units, cells, kept, max_rows, max_groups) == []


@settings(max_examples=100, deadline=None)
@given(structure=structures())
def test_unit_presence_mask_counts_each_unit_once_per_kept_cell(structure: dict[str, Any]) -> None:
    units, cells = structure["units"], structure["cells"]
    kept = unit_presence_mask(
        units,
        cells,
        max_groups=structure["max_groups"],
        source=GeneratorBitSource(np.random.default_rng(structure["seed"])),
    )
    assert violations(units, cells, kept, 1, structure["max_groups"]) == []


def test_bound_checker_catches_a_mask_that_ignores_max_groups() -> None:
    """Validity twin of the property test: pandas' ``groupby(unit).head(max_rows)`` per cell
    keeps every cell of a unit, and the checker must say so."""
    units = np.array([0, 0, 0, 0, 1])
    cells = np.array([0, 1, 2, 2, 0])
    head_per_cell = np.array([True, True, True, False, True])  # max_rows=1, every cell
    assert violations(units, cells, head_per_cell, 1, 2) == ["unit 0 kept 3 of 3 cells"]
    too_many_rows = np.array([True, False, True, True, True])
    assert violations(units, cells, too_many_rows, 1, 2) == ["unit 0 kept 2 of 2 rows in cell 2"]
    assert violations(units, cells, np.zeros(5, dtype=bool), 1, 2) != []  # maximality


def test_a_larger_frame_takes_both_paths(test_rng: np.random.Generator) -> None:
    """Many units within the bounds and a few over them: the rows of the few are selected
    first (the subset path); mostly over them: every row is grouped (the whole path)."""
    n_units = 3000
    for share_over in (0.02, 0.9):
        sizes = np.where(
            test_rng.random(n_units) < share_over, test_rng.integers(3, 30, n_units), 1
        )
        units = np.repeat(np.arange(n_units), sizes)
        test_rng.shuffle(units)
        cells = test_rng.integers(-1, 12, len(units))
        kept = contribution_mask(units, cells, max_rows=2, max_groups=3, source=bit_source(None))
        assert violations(units, cells, kept, 2, 3) == []


@pytest.mark.parametrize("block", [1, 3, 7])
def test_block_boundaries_change_nothing(
    block: int, monkeypatch: pytest.MonkeyPatch, test_rng: np.random.Generator
) -> None:
    """The cache-sized passes (pairs and units spanning blocks, runs of rows beyond
    max_rows, the per-pair flags spread over rows) give a valid mask with tiny blocks."""
    monkeypatch.setattr(bounding, "_BLOCK", block)
    for max_rows, max_groups in ((1, 2), (2, 3), (3, 1)):
        units = np.repeat(np.arange(60), test_rng.integers(1, 12, 60))
        test_rng.shuffle(units)
        cells = test_rng.integers(-1, 6, len(units))
        kept = contribution_mask(
            units, cells, max_rows=max_rows, max_groups=max_groups, source=bit_source(None)
        )
        assert violations(units, cells, kept, max_rows, max_groups) == []
        assert np.array_equal(
            cell_numbers([cells, cells], [6, 6])[cells >= 0], (cells * 7)[cells >= 0]
        )


def _keeps_every_row_claim_holds(
    claim: Callable[..., bool], units: NDArray[Any], cells: NDArray[Any] | None, **bounds: int
) -> bool:
    """False when ``claim`` says every row in a cell is kept and the mask drops one."""
    cell_count = 1 if cells is None else 7  # the structures' cells are -1..6
    if not claim(units, cell_count=cell_count, **bounds):
        return True
    kept = contribution_mask(units, cells, **bounds, source=bit_source(None))
    in_cell = units >= 0 if cells is None else (units >= 0) & (cells >= 0)
    return bool(np.array_equal(kept, in_cell))


@settings(max_examples=200, deadline=None)
@given(structure=structures())
def test_keeps_every_row_only_when_the_mask_does(structure: dict[str, Any]) -> None:
    bounds = {"max_rows": structure["max_rows"], "max_groups": structure["max_groups"]}
    assert _keeps_every_row_claim_holds(
        keeps_every_row, structure["units"], structure["cells"], **bounds
    )


def test_keeps_every_row_check_rejects_ignoring_max_groups() -> None:
    """Validity twin: a claim that looks at max_rows only is caught (3 rows in 3 cells,
    max_groups=2: the mask drops one), and the real one says False there."""

    def rows_only(units: NDArray[Any], *, cell_count: int, max_rows: int, max_groups: int) -> bool:
        return bool(np.bincount(units).max() <= max_rows)

    units, cells = np.array([0, 0, 0]), np.array([0, 1, 2])
    assert not _keeps_every_row_claim_holds(rows_only, units, cells, max_rows=3, max_groups=2)
    assert not keeps_every_row(units, cell_count=7, max_rows=3, max_groups=2)
    assert keeps_every_row(units, cell_count=2, max_rows=3, max_groups=2)  # 2 cells at most
    assert not keeps_every_row(np.array([0, -1]), cell_count=1, max_rows=5, max_groups=1)
    assert keeps_every_row(np.zeros(0, dtype=np.int64), cell_count=1, max_rows=1, max_groups=1)


@pytest.mark.parametrize("dtype", [np.int16, np.int32, np.int64])
@pytest.mark.parametrize("first", [0, -7, 1_000])
def test_keeps_every_row_reads_ids_from_first_unit(dtype: type, first: int) -> None:
    # Whether every unit has at most min(max_rows, max_groups) rows (as the cells are
    # more than max_groups), from ids read as id - first_unit: a byte per unit below a
    # limit of 255, four bytes from there, numpy for other dtypes. Against np.bincount.
    rng = np.random.default_rng()
    for limit in (1, 3, 254, 255, 300):
        for _ in range(20):
            n = int(rng.integers(1, 2_000))
            codes = rng.integers(0, int(rng.integers(1, 2 * n + 2)), n)
            if rng.random() < 0.5:  # some unit just past the limit, or just within it
                codes[: limit + int(rng.integers(0, 2))] = 0
            ids = (codes + first).astype(dtype)
            expected = bool(np.bincount(codes).max() <= limit)
            got = keeps_every_row(
                ids, cell_count=10_000, max_rows=limit, max_groups=limit, first_unit=first
            )
            assert got is expected
    # A unit of 256 + 10 rows wraps a byte counter back to 10: it is over 10 all the same.
    ids = np.concatenate([np.zeros(266), np.arange(1, 300)]).astype(np.int32)
    assert not keeps_every_row(ids, cell_count=10_000, max_rows=10, max_groups=10)
    # An id below first_unit is a row without a unit: not every row is kept.
    ids = np.array([first - 1, first, first + 1]).astype(np.int64)
    assert not keeps_every_row(ids, cell_count=9, max_rows=5, max_groups=5, first_unit=first)


@pytest.mark.parametrize("n", [1, 2, 7, 8, 9, 31, 33, 1_000, 100_001])
def test_id_range_is_numpys_min_and_max(n: int) -> None:
    # One pass (vectorized where the CPU allows) for the pandas backend's int32 unit ids;
    # lengths around vector widths, and the extremes of int32.
    rng = np.random.default_rng()
    for _ in range(20):
        ids = rng.integers(-(2**31), 2**31, n).astype(np.int32)
        if n > 2:
            ids[rng.integers(0, n, 2)] = [-(2**31), 2**31 - 1]
        assert _bounded.id_range(ids) == (int(ids.min()), int(ids.max()))
    # The wrapper: the same for int32, and numpy's for other ids and misaligned views.
    for values in (ids, ids.astype(np.int64), ids.astype(np.int16), ids[::2]):
        assert bounding.id_range(values) == (int(values.min()), int(values.max()))
    with pytest.raises(ValueError, match="empty"):
        _bounded.id_range(np.zeros(0, np.int32))
    with pytest.raises(TypeError, match="int32"):
        _bounded.id_range(np.zeros(3, np.int64))


def test_units_within_refuses_an_id_beyond_the_units() -> None:
    # Called directly (keeps_every_row checks the smallest id first): an id below
    # first_unit is a row without a unit, never counted as within.
    assert not _bounded.units_within(np.array([-1, 0], np.int64), 0, 1, 5)
    assert _bounded.units_within(np.array([0, 0], np.int32), 0, 1, 2)
    with pytest.raises(ValueError, match="beyond the units"):
        _bounded.units_within(np.array([0, 1, 5], np.int64), 0, 3, 2)
    with pytest.raises(ValueError, match="limit"):  # a four-byte counter would wrap
        _bounded.units_within(np.array([0], np.int64), 0, 1, 2**32 - 1)


# ---------------------------------------------------------------- uniformity

N_UNITS = 100_000
CELLS, ROWS, MAX_GROUPS, MAX_ROWS = 5, 3, 2, 2


def _valid_patterns() -> NDArray[np.int64]:
    """The bit patterns (bit ``3 * cell + row``) of every allowed choice, in sorted order:
    2 of the 5 cells and 2 of the 3 rows in each, C(5, 2) * C(3, 2)**2 = 90 patterns."""
    patterns = []
    for chosen in itertools.combinations(range(CELLS), MAX_GROUPS):
        for rows in itertools.product(itertools.combinations(range(ROWS), MAX_ROWS), repeat=2):
            bits = [
                ROWS * cell + row for cell, kept in zip(chosen, rows, strict=True) for row in kept
            ]
            patterns.append(sum(1 << b for b in bits))
    return np.array(sorted(patterns))


def _pattern_pvalue(select: Callable[[NDArray[np.int64], NDArray[np.int64]], Mask]) -> float:
    """Chi-square p-value of the kept patterns of N_UNITS identical units against uniform.

    Each unit has 3 rows in each of 5 cells, in the order (unit, cell, row): a choice that
    leans on cell numbers or on row order fails. Patterns outside the 90 allowed ones
    fail outright.
    """
    units = np.repeat(np.arange(N_UNITS), CELLS * ROWS)
    cells = np.tile(np.repeat(np.arange(CELLS), ROWS), N_UNITS)
    kept = select(units, cells)
    bits = kept.reshape(N_UNITS, CELLS * ROWS).astype(np.int64) @ (1 << np.arange(CELLS * ROWS))
    valid = _valid_patterns()
    category = np.searchsorted(valid, bits)
    assert np.array_equal(valid[np.minimum(category, len(valid) - 1)], bits), "pattern not allowed"
    outputs = np.arange(len(valid))
    return chi_square_pvalue(category, outputs, np.full(len(valid), 1 / len(valid)))


@pytest.mark.parametrize("method", ["floyd", "ranked"])
def test_kept_subsets_are_uniform(method: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if method == "ranked":
        monkeypatch.setattr(bounding, "_FLOYD_MAX", 0)

    def select(units: NDArray[np.int64], cells: NDArray[np.int64]) -> Mask:
        return contribution_mask(
            units, cells, max_rows=MAX_ROWS, max_groups=MAX_GROUPS, source=bit_source(None)
        )

    assert _pattern_pvalue(select) > FALSE_ALARM


def test_uniformity_test_rejects_keeping_the_first_rows() -> None:
    """Validity twin: uniformly random cells but the first ``max_rows`` rows of each, as
    ``groupby([unit, cell]).head(max_rows)`` does, must fail the same test."""

    def head(units: NDArray[np.int64], cells: NDArray[np.int64]) -> Mask:
        presence = unit_presence_mask(units, cells, max_groups=MAX_GROUPS, source=bit_source(None))
        pair = units * CELLS + cells
        kept_pair = np.zeros(N_UNITS * CELLS, dtype=bool)
        kept_pair[pair[presence]] = True
        # Rows come in (unit, cell, row) order: a row's rank in its cell is its position mod 3.
        return kept_pair[pair] & (np.arange(len(units)) % ROWS < MAX_ROWS)

    assert _pattern_pvalue(head) < FALSE_ALARM


def _joint_pvalue(kept_cell: NDArray[np.int64]) -> float:
    """Chi-square p-value of the joint choices of consecutive pairs of units against the
    product of uniform marginals (each of two cells with probability 1/2)."""
    joint = 2 * kept_cell[0::2] + kept_cell[1::2]
    return chi_square_pvalue(joint, np.arange(4), np.full(4, 0.25))


def test_units_choose_independently() -> None:
    """Two units with the same two cells and max_groups=1: their choices are independent
    (a choice shared between units would bias the table towards the same cells)."""
    n_units = 2 * N_UNITS
    units = np.repeat(np.arange(n_units), 2)
    cells = np.tile([0, 1], n_units)
    kept = contribution_mask(units, cells, max_rows=1, max_groups=1, source=bit_source(None))
    kept_cell = kept.reshape(n_units, 2).argmax(axis=1)
    assert np.array_equal(kept.reshape(n_units, 2).sum(axis=1), np.ones(n_units))
    assert _joint_pvalue(kept_cell) > FALSE_ALARM


def test_independence_test_rejects_a_shared_choice(test_rng: np.random.Generator) -> None:
    """Validity twin: each pair of units sharing one uniformly random choice fails."""
    shared = test_rng.integers(0, 2, N_UNITS)
    assert _joint_pvalue(np.repeat(shared, 2)) < FALSE_ALARM


class CoarseSource:
    """Uniform words with only their two leading bits random: ties on almost every draw."""

    private = False

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.words_drawn = 0

    def words(self, n: int) -> NDArray[np.uint64]:
        self.words_drawn += n
        return self.rng.integers(0, 4, n).astype(np.uint64) << np.uint64(62)


SEGMENT = 4  # 24 permutations


def _permutation_pvalue(ranks: NDArray[np.int64]) -> float:
    """Chi-square p-value of the permutations in consecutive segments of 4 against uniform."""
    code = ranks.reshape(-1, SEGMENT) @ (SEGMENT ** np.arange(SEGMENT))
    valid = np.array(
        sorted(
            np.array(p) @ (SEGMENT ** np.arange(SEGMENT))
            for p in itertools.permutations(range(SEGMENT))
        )
    )
    category = np.searchsorted(valid, code)
    assert np.array_equal(valid[np.minimum(category, len(valid) - 1)], code)
    return chi_square_pvalue(category, np.arange(len(valid)), np.full(len(valid), 1 / len(valid)))


@pytest.mark.parametrize("packed", [True, False])
def test_ties_are_broken_at_random(
    packed: bool, monkeypatch: pytest.MonkeyPatch, test_rng: np.random.Generator
) -> None:
    """Ranks from words that tie most of the time are still uniform permutations: ties are
    broken by fresh words, recursively, never by position (both the packed sort and the
    np.lexsort branch)."""
    if not packed:
        monkeypatch.setattr(bounding, "_MIN_RANDOM_BITS", 64)
    source = CoarseSource(test_rng)
    ranks = bounding._segment_ranks(np.full(50_000, SEGMENT), source)
    assert source.words_drawn > 50_000 * SEGMENT  # ties were frequent and were broken
    assert _permutation_pvalue(ranks) > FALSE_ALARM


def test_tie_test_rejects_breaking_ties_by_position(test_rng: np.random.Generator) -> None:
    """Validity twin: ranking by the same coarse words with ties left in row order fails."""
    segment = np.repeat(np.arange(50_000), SEGMENT)
    words = CoarseSource(test_rng).words(len(segment))
    order = np.lexsort((words, segment))
    ranks = np.empty(len(segment), dtype=np.int64)
    ranks[order] = np.arange(len(segment)) % SEGMENT
    assert _permutation_pvalue(ranks) < FALSE_ALARM


def test_uniform_integers_are_uniform_below_every_bound(test_rng: np.random.Generator) -> None:
    """Lemire's method (bounds up to 2**32) and leading bits (above), in 50 equal-odds bins."""
    source = GeneratorBitSource(test_rng)
    for bound in (2, 3, 7, 1000, 2**32, 2**32 + 3, 3 * 2**40 + 1):
        draws = bounding._uniform_below(np.full(200_000, bound), source)
        assert draws.min() >= 0
        assert draws.max() < bound
        bins = min(bound, 50)
        # Value v falls in bin k when k * bound <= bins * v < (k + 1) * bound.
        edges = [-(-k * bound // bins) for k in range(bins + 1)]
        pmf = np.diff(edges) / bound
        assert chi_square_pvalue(draws * bins // bound, np.arange(bins), pmf) > FALSE_ALARM


class ScriptedSource:
    """Hands out the given words, in order (a test's control over every draw)."""

    private = False

    def __init__(self, *words: int) -> None:
        self.script = list(words)
        self.words_drawn = 0

    def words(self, n: int) -> NDArray[np.uint64]:
        self.words_drawn += n
        drawn, self.script = self.script[:n], self.script[n:]
        return np.array(drawn, dtype=np.uint64)


@pytest.mark.parametrize("bound", [3, 2**32 - 1, 2**32])
def test_uniform_integers_reject_the_values_that_would_bias_them(bound: int) -> None:
    """x = 0 maps to 0 with a remainder 0 < 2**32 mod bound: Lemire's method rejects it
    (bound 2**32 has remainder 0 and rejects nothing). Undetectable by sampling, so checked
    on scripted words; the second word's 32 low bits are all ones: the top value."""
    source = ScriptedSource(0, 2**32 - 1)
    drawn = bounding._uniform_below(np.array([bound]), source)
    rejects = 2**32 % bound != 0
    assert drawn.tolist() == [bound - 1 if rejects else 0]
    assert source.words_drawn == (2 if rejects else 1)


# ---------------------------------------------------------------- randomness drawn


def test_no_word_is_drawn_when_every_unit_is_within_the_bounds(word_counter: WordCounter) -> None:
    units = np.array([0, 0, 1, 2, 2, 2])
    cells = np.array([0, 1, 0, 0, 1, 2])
    kept = contribution_mask(units, cells, max_rows=3, max_groups=3, source=bit_source(None))
    assert kept.all()
    assert word_counter.words == 0
    # Within the bounds but over min(max_rows, max_groups) rows: checked, nothing drawn.
    kept = contribution_mask(units, cells, max_rows=1, max_groups=3, source=bit_source(None))
    assert kept.all()
    assert word_counter.words == 0
    kept = contribution_mask(units, cells, max_rows=1, max_groups=2, source=bit_source(None))
    assert kept.sum() == 5
    assert word_counter.words > 0


def test_units_to_check_is_the_cheap_test() -> None:
    units = np.array([0, 0, 0, 1, 2, 2, -1])
    cells = np.array([5, 5, 6, 5, 1, -1, 3])
    flags = units_to_check(units, cells, max_rows=1, max_groups=2)
    assert flags.tolist() == [True, False, False]
    assert units_to_check(units, None, max_rows=2, max_groups=1).tolist() == [True, False, False]
    # No more cells (0..6) than max_groups: only max_rows can bind.
    assert units_to_check(units, cells, max_rows=2, max_groups=7).tolist() == [True, False, False]
    assert units_to_check(units, cells, max_rows=3, max_groups=7).tolist() == [False] * 3
    with pytest.raises(InvalidParameterError, match="dense unit codes"):
        units_to_check(units * 10**9, cells, max_rows=1, max_groups=1)


# ---------------------------------------------------------------- parameters


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"max_rows": 0}, InvalidParameterError),
        ({"max_rows": -2}, InvalidParameterError),
        ({"max_groups": 0}, InvalidParameterError),
        ({"max_rows": True}, InvalidParameterTypeError),
        ({"max_groups": np.True_}, InvalidParameterTypeError),
        ({"max_rows": 1.0}, InvalidParameterTypeError),
        ({"max_groups": 2.5}, InvalidParameterTypeError),
        ({"max_rows": "2"}, InvalidParameterTypeError),
        ({"max_groups": None}, InvalidParameterTypeError),
        ({"units": np.array([0.0, 1.0, 1.0])}, InvalidParameterTypeError),
        ({"units": np.array([True, False, True])}, InvalidParameterTypeError),
        ({"units": np.array([[0, 1, 1]])}, InvalidParameterError),
        ({"units": np.array([0, 1])}, InvalidParameterError),
        ({"cells": np.array([0, 1, 2, 3])}, InvalidParameterError),
        ({"cells": np.array(["a", "b", "c"])}, InvalidParameterTypeError),
        ({"units": np.array([0, 1, 2**63], dtype=np.uint64)}, InvalidParameterError),
        ({"source": np.random.default_rng(0)}, InvalidParameterTypeError),
    ],
)
def test_bad_parameters_are_refused_before_drawing(
    kwargs: dict[str, Any], error: type[DPFrameError], word_counter: WordCounter
) -> None:
    call: dict[str, Any] = {
        "units": np.array([0, 0, 0]),
        "cells": np.array([0, 1, 2]),
        "max_rows": 1,
        "max_groups": 1,
        "source": bit_source(None),
    }
    call.update(kwargs)
    units, cells = call.pop("units"), call.pop("cells")
    with pytest.raises(error):
        contribution_mask(units, cells, **call)
    assert word_counter.words == 0


def test_numpy_integers_are_accepted_as_bounds() -> None:
    kept = contribution_mask(
        np.array([0, 0, 0]),
        None,
        max_rows=np.int64(2),
        max_groups=np.uint8(1),
        source=bit_source(None),
    )
    assert kept.sum() == 2


def test_contribution_bounds_give_the_sensitivities() -> None:
    bounds = ContributionBounds(max_rows=3, max_groups=4)
    assert (bounds.l1, bounds.linf, bounds.l2_squared) == (12, 3, 36)
    assert bounds.l2 == pytest.approx(6.0)
    with pytest.raises(InvalidParameterError, match="max_groups must be a positive integer"):
        ContributionBounds(max_rows=1, max_groups=0)
    with pytest.raises(InvalidParameterTypeError, match="max_rows=1, max_groups=5"):
        ContributionBounds(max_rows=1.5, max_groups=1)  # type: ignore[arg-type]


def test_cell_numbers_are_row_major_and_minus_one_outside(test_rng: np.random.Generator) -> None:
    sizes = [4, 3, 5]
    codes = [test_rng.integers(-1, size, 1000) for size in sizes]
    cells = cell_numbers(codes, sizes)
    inside = np.all([code >= 0 for code in codes], axis=0)
    expected = np.ravel_multi_index([code[inside] for code in codes], sizes)
    assert np.array_equal(cells[inside], expected)
    assert (cells[~inside] == -1).all()
    with pytest.raises(InvalidParameterError):
        cell_numbers(codes, sizes[:2])
    with pytest.raises(InvalidParameterError):
        cell_numbers([codes[0], codes[1][:10]], sizes[:2])


def test_the_empty_frame_keeps_nothing() -> None:
    empty = np.zeros(0, dtype=np.int64)
    for cells in (empty, None):
        kept = contribution_mask(empty, cells, max_rows=1, max_groups=1, source=bit_source(None))
        assert kept.shape == (0,)


def test_source_is_the_bit_source_protocol() -> None:
    source: BitSource = GeneratorBitSource(np.random.default_rng(1))
    assert contribution_mask(np.array([0]), None, max_rows=1, max_groups=1, source=source).all()


# ---------------------------------------------------------------- bounded counts, no mask


def _exact_counts(
    units: NDArray[np.int64], cells: NDArray[np.int64] | None, max_rows: int, cell_count: int
) -> dict[int, NDArray[np.int64]]:
    """Each unit's bounded rows per cell if it kept every cell: min(m, max_rows)."""
    per_unit: dict[int, NDArray[np.int64]] = {}
    cells_of = np.zeros(len(units), dtype=np.int64) if cells is None else cells
    for unit in np.unique(units[units >= 0]).tolist():
        mine = cells_of[(units == unit) & (cells_of >= 0)]
        counts = np.bincount(mine, minlength=cell_count)
        per_unit[unit] = np.minimum(counts, max_rows)
    return per_unit


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(structure=structures(), masked=st.booleans(), two_columns=st.booleans())
def test_bounded_counts_are_what_each_unit_keeps(
    structure: dict[str, Any], masked: bool, two_columns: bool
) -> None:
    # The counts without a mask: each unit adds min(m, max_rows) to min(k, max_groups) of
    # its k cells. Where no unit has more cells than max_groups there is no choice, and
    # the table is exactly the count of contribution_mask's kept rows.
    units, cells = structure["units"], structure["cells"]
    max_rows, max_groups = structure["max_rows"], structure["max_groups"]
    gen = np.random.default_rng(structure["seed"])
    mask = gen.random(len(units)) < 0.7 if masked else None
    if mask is not None:
        cells = np.where(mask, 0 if cells is None else cells, -1)
    codes: list[NDArray[Any]] = []
    sizes: list[int] = []
    if structure["cells"] is not None:  # 7 cells as one column, or as 1 x 7 of two columns
        plain = structure["cells"]  # the mask goes separately
        codes = [np.zeros_like(plain), plain] if two_columns else [plain]
        codes = [c.astype(np.int8) for c in codes] if structure["encoding"] == "small" else codes
        sizes = [1, 7] if two_columns else [7]
    table = bounded_count_table(
        units.astype(np.int8) if structure["encoding"] == "small" else units,
        codes,
        sizes,
        max_rows=max_rows,
        max_groups=max_groups,
        source=GeneratorBitSource(gen),
        mask=mask,
    )
    cell_count = 7 if sizes else 1
    assert table.dtype == np.int64
    assert table.shape == (cell_count,)
    per_unit = _exact_counts(units, cells, max_rows, cell_count)
    if all(np.count_nonzero(c) <= max_groups for c in per_unit.values()):
        kept = contribution_mask(
            units, cells, max_rows=max_rows, max_groups=max_groups, source=bit_source(None)
        )
        cells_of = np.zeros(len(units), dtype=np.int64) if cells is None else cells
        assert table.tolist() == np.bincount(cells_of[kept], minlength=cell_count).tolist()
    else:  # the choice binds: bounded above by every unit keeping every cell
        assert (table >= 0).all()
        assert (table <= sum(per_unit.values())).all()
    # One unit at a time, the choice is visible: min(k, max_groups) cells, each full.
    for unit, counts in per_unit.items():
        alone = units == unit
        one = bounded_count_table(
            units[alone],
            [c[alone] for c in codes],
            sizes,
            max_rows=max_rows,
            max_groups=max_groups,
            source=GeneratorBitSource(gen),
            mask=None if mask is None else mask[alone],
        )
        kept_cells = np.flatnonzero(one)
        assert len(kept_cells) == min(np.count_nonzero(counts), max_groups)
        assert one[kept_cells].tolist() == counts[kept_cells].tolist()


def test_bounded_counts_keep_units_of_different_chunks_apart() -> None:
    # Unit codes 0 and 2**16 share their low 16 bits, the unit's part of a 32-bit key when
    # there are up to 2**16 cells: they are in different chunks, and each counts.
    units = np.concatenate([np.arange(70_000), [0, 2**16, 2**16 + 1, 2**16 + 1]])
    cells = np.concatenate([np.full(70_000, 1), [0, 0, 0, 0]])
    table = bounded_count_table(
        units, [cells], [2**16], max_rows=1, max_groups=5, source=bit_source(None)
    )
    assert table[:2].tolist() == [3, 70_000]
    assert table.sum() == 70_003
    # Every path: one cell (no grouping column), and a table too wide for the keys.
    ungrouped = bounded_count_table(
        units, [], [], max_rows=1, max_groups=1, source=bit_source(None)
    )
    assert ungrouped.tolist() == [70_000]
    wide = bounded_count_table(
        units, [cells], [2**25], max_rows=1, max_groups=5, source=bit_source(None)
    )
    assert wide[:2].tolist() == [3, 70_000]


def test_bounded_counts_count_the_rows_when_the_sampled_room_falls_short() -> None:
    # The room of each chunk is estimated from every (n // 2**17)-th id: here every
    # second, and the rows alternate between units of chunk 0 (sampled) and chunk 1
    # (never sampled), so chunk 1 overflows its room; the rows are then counted first,
    # and the table is exact all the same.
    n = 2**18
    rng = np.random.default_rng()
    units = np.where(
        np.arange(n) % 2 == 0, rng.integers(0, 2**16, n), 2**16 + rng.integers(0, 9, n)
    )
    cells = rng.integers(0, 40, n)
    room = bounding._chunk_room(units, 0, 16, 2)
    assert room is not None
    assert room[1] < n // 4  # the estimate misses chunk 1
    table = bounded_count_table(
        units, [cells], [40], max_rows=n, max_groups=40, source=bit_source(None)
    )
    assert table.tolist() == np.bincount(cells, minlength=40).tolist()


def test_bounded_counts_sample_no_room_for_ids_far_below_first_unit() -> None:
    # Found by the kernel review: the sample subtracted first_unit before dropping the
    # ids below it, and an id 2**63 below wrapped to a huge code (a petabyte bincount).
    ids = np.array([1, 2, 2, -(2**63)])
    for first in (1, 2**62):
        table = bounded_count_table(
            ids + (first - 1) * (ids > 0), [np.array([0, 1, 1, 0])], [2], max_rows=5,
            max_groups=5, source=bit_source(None), first_unit=first,
        )  # fmt: skip
        assert table.tolist() == [1, 2]


def test_a_short_unit_count_is_refused_whether_or_not_the_room_is_sampled() -> None:
    # Found by the kernel review: a unit beyond the chunks in a row outside the mask was
    # refused by the counting pass only; the sampled room skipped it. Both refuse now.
    ids, cells = np.array([0, 1, 2, 70_000]), [np.zeros(4, np.int64)]
    mask = np.array([True, True, True, False])
    kwargs = {"max_rows": 1, "max_groups": 1, "mask": mask, "unit_count": 3}
    with pytest.raises(ValueError, match="beyond the chunks"):
        bounded_count_table(ids, cells, [1], source=bit_source(None), **kwargs)
    with (
        mock.patch.object(bounding, "_chunk_room", return_value=None),
        pytest.raises(ValueError, match="beyond the chunks"),
    ):
        bounded_count_table(ids, cells, [1], source=bit_source(None), **kwargs)


def test_the_kernels_refuse_unaligned_ids_and_the_wrapper_aligns_them() -> None:
    # Found by the kernel review: a view one byte in is a misaligned int32 array, which
    # the kernels read with undefined behaviour. They refuse it; the wrappers copy it.
    raw = np.zeros(41, np.uint8)
    raw[1:].view(np.int32)[:] = [0, 1, 1, 2, 3, 3, 3, 4, 5, 9]
    ids = raw[1:].view(np.int32)
    assert not ids.flags.aligned
    with pytest.raises(ValueError, match="aligned"):
        _bounded.id_range(ids)
    with pytest.raises(ValueError, match="aligned"):
        _bounded.units_within(ids, 0, 10, 3)
    assert keeps_every_row(ids, cell_count=100, max_rows=3, max_groups=3)
    assert not keeps_every_row(ids, cell_count=100, max_rows=2, max_groups=2)
    table = bounded_count_table(
        ids, [np.arange(10) % 2], [2], max_rows=9, max_groups=2, source=bit_source(None)
    )
    assert table.tolist() == [5, 5]


def test_partition_keys_says_when_a_chunk_overflows_its_room() -> None:
    units, cells = np.array([0, 0, 1, 2**16]), (np.zeros(4, np.int32),)
    keys, offsets, ends = np.empty(8, np.uint32), np.empty(3, np.int64), np.empty(2, np.int64)
    args = (units, 0, cells, (1,), None, 16, keys, offsets, ends)
    assert _bounded.partition_keys(*args, np.array([3, 1])) is True
    assert ends.tolist() == [3, 4]
    assert offsets.tolist() == [0, 3, 4]
    assert _bounded.partition_keys(*args, np.array([2, 6])) is False  # chunk 0 has 3 rows
    for room in (np.array([5, 4]), np.array([-1, 4]), np.array([1])):
        with pytest.raises(ValueError, match="room"):
            _bounded.partition_keys(*args, room)
    with pytest.raises(ValueError, match="beyond the chunks"):  # a unit beyond them
        _bounded.partition_keys(units * 2, 0, cells, (1,), None, 16, keys, offsets, ends,
                                np.array([4, 4]))  # fmt: skip


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("first", [0, -(2**31) + 10, 7, 2**31 - 200_000])
def test_bounded_counts_read_ids_from_first_unit(dtype: type, first: int) -> None:
    # Ids are read as codes id - first_unit, without an array of codes; ids below
    # first_unit have no unit. The same table as from the codes themselves (no unit is
    # over max_groups, so no draw is involved), on every path: chunks, one cell, wide.
    rng = np.random.default_rng()
    n = 40_000  # codes in two chunks of 2**16 units (dense: fewer than 2n + 1024)
    codes = np.where(rng.random(n) < 0.1, -1, rng.integers(0, 70_000, n))  # -1: no unit
    cells = rng.integers(0, 40, n)
    ids = np.where(codes < 0, first - 1 - rng.integers(0, 5, n), codes + first)
    ids = ids.astype(dtype)  # every id fits int32
    for columns, sizes in (([cells], [40]), ([], []), ([cells], [2**25])):
        expected = bounded_count_table(
            codes, columns, sizes, max_rows=2, max_groups=40, source=bit_source(None)
        )
        got = bounded_count_table(
            ids, columns, sizes, max_rows=2, max_groups=40, source=bit_source(None),
            first_unit=first,
        )  # fmt: skip
        assert got.tolist() == expected.tolist()


def test_bounded_counts_take_the_unit_count_from_the_caller() -> None:
    # Given, it is not read from the ids again: the same table; too small (ids beyond
    # the chunks it makes), an error from the kernel, never a write out of bounds.
    rng = np.random.default_rng()
    ids, cells = rng.integers(5, 200_005, 50_000), rng.integers(0, 30, 50_000)
    args = ([cells], [30])
    expected = bounded_count_table(
        ids, *args, max_rows=3, max_groups=30, source=bit_source(None), first_unit=5
    )
    got = bounded_count_table(
        ids, *args, max_rows=3, max_groups=30, source=bit_source(None), first_unit=5,
        unit_count=200_000,
    )  # fmt: skip
    assert got.tolist() == expected.tolist()
    with pytest.raises(ValueError, match="beyond the chunks"):
        bounded_count_table(
            ids, *args, max_rows=3, max_groups=30, source=bit_source(None), first_unit=5,
            unit_count=1_000,
        )  # fmt: skip
    with pytest.raises(InvalidParameterError, match="unit_count"):
        bounded_count_table(
            ids, *args, max_rows=3, max_groups=30, source=bit_source(None), unit_count=-1
        )


def test_bounded_counts_refuse_a_first_unit_far_below_the_ids() -> None:
    ids = np.array([0, 2**62, 2**62 + 1])
    for first in (-(2**62), -(2**63) - 1, 2**63):
        with pytest.raises(InvalidParameterError, match="first_unit"):
            bounded_count_table(
                ids, [], [], max_rows=1, max_groups=1, source=bit_source(None), first_unit=first
            )


def _kept_cells_pvalue(source: BitSource) -> float:
    """Chi-square p-value of the cells N_UNITS units keep (MAX_GROUPS of CELLS, ROWS rows
    in each) against the uniform choice of C(5, 2) = 10 subsets. Each unit has its own
    cells, so the table shows every unit's choice."""
    units = np.repeat(np.arange(N_UNITS), CELLS * ROWS)
    cells = np.repeat(np.arange(N_UNITS * CELLS), ROWS)
    table = bounded_count_table(
        units, [cells], [N_UNITS * CELLS], max_rows=MAX_ROWS, max_groups=MAX_GROUPS,
        source=source,
    )  # fmt: skip
    kept = table.reshape(N_UNITS, CELLS)
    assert set(np.unique(kept).tolist()) <= {0, MAX_ROWS}
    assert (np.count_nonzero(kept, axis=1) == MAX_GROUPS).all()
    patterns = (kept > 0).astype(np.int64) @ (1 << np.arange(CELLS))
    subsets = itertools.combinations(range(CELLS), MAX_GROUPS)
    allowed = np.array(sorted(sum(1 << c for c in chosen) for chosen in subsets))
    category = np.searchsorted(allowed, patterns)
    return chi_square_pvalue(category, np.arange(len(allowed)), np.full(len(allowed), 0.1))


class _FewWords:
    """The cryptographic words, at most ``limit`` per call: the kernel runs out within
    units and must continue their choice on the next words it asks for."""

    private = True

    def __init__(self, limit: int) -> None:
        self._source, self._limit = bit_source(None), limit
        self.words_drawn = 0

    def words(self, n: int) -> NDArray[np.uint64]:
        return self._source.words(min(n, self._limit))


@pytest.mark.parametrize("words", ["cryptographic", "few at a time"])
def test_bounded_counts_choose_cells_uniformly(words: str) -> None:
    source = bit_source(None) if words == "cryptographic" else _FewWords(1)
    assert _kept_cells_pvalue(source) > FALSE_ALARM


class _ConstantWords:
    """Words of all ones: Lemire's method then always gives its largest value, and each
    unit keeps the same cells (its last ones, by cell number): a weakened source."""

    private = False

    def __init__(self, value: int = 2**64 - 1) -> None:
        self.value = value

    def words(self, n: int) -> NDArray[np.uint64]:
        return np.full(n, self.value, dtype=np.uint64)


def test_kept_cells_test_rejects_a_fixed_choice() -> None:
    """Validity twin: a choice that is the same for every unit (the kernel fed constant
    words) must fail the same test."""
    assert _kept_cells_pvalue(_ConstantWords()) < FALSE_ALARM


def _wide_unit_marginals_pvalue(source: BitSource, cells: int, max_groups: int) -> float:
    """Chi-square p-value of how often each of a unit's ``cells`` cells is kept, over
    units of more than 64 cells (their choice is marked in memory, not in the bits of a
    word), against max_groups / cells each. Kept cells of one unit are drawn without
    replacement, so their counts vary less than independent draws: the test is
    conservative (false alarms at most as often as stated)."""
    units = 400_000 // cells
    table = bounded_count_table(
        np.repeat(np.arange(units), cells), [np.arange(units * cells)], [units * cells],
        max_rows=1, max_groups=max_groups, source=source,
    )  # fmt: skip
    kept = table.reshape(units, cells)
    assert (kept.sum(axis=1) == max_groups).all()
    positions = np.nonzero(kept)[1]
    return chi_square_pvalue(positions, np.arange(cells), np.full(cells, 1 / cells))


@pytest.mark.parametrize(("cells", "max_groups"), [(65, 2), (65, 63), (80, 30)])
def test_units_of_more_than_64_cells_keep_each_cell_equally_often(
    cells: int, max_groups: int
) -> None:
    # 400,000 unit-cell pairs: at least 5,000 units; each cell kept 189 times or more.
    assert _wide_unit_marginals_pvalue(bit_source(None), cells, max_groups) > FALSE_ALARM
    assert _wide_unit_marginals_pvalue(_FewWords(1), cells, max_groups) > FALSE_ALARM


def test_wide_unit_marginals_test_rejects_a_fixed_choice() -> None:
    """Validity twin: constant words keep the same cells in every unit."""
    assert _wide_unit_marginals_pvalue(_ConstantWords(), 65, 2) < FALSE_ALARM


class _Failing:
    private = True

    def __init__(self, words: Callable[[int], object]) -> None:
        self.words = words
        self.calls = 0


def _unit_over_max_groups(source: object) -> NDArray[np.int64]:
    units, cells = np.zeros(5, np.int64), np.arange(5)
    return bounded_count_table(
        units,
        [cells],
        [5],
        max_rows=1,
        max_groups=2,
        source=source,  # type: ignore[arg-type]
    )


def test_the_counts_ask_for_words_only_when_a_unit_must_choose() -> None:
    def never(n: int) -> object:
        raise AssertionError("no unit is over max_groups: no word is needed")

    units, cells = np.repeat(np.arange(1000), 3), np.tile(np.arange(3), 1000)
    table = bounded_count_table(
        units,
        [cells],
        [3],
        max_rows=1,
        max_groups=3,
        source=_Failing(never),  # type: ignore[arg-type]
    )
    assert table.tolist() == [1000, 1000, 1000]
    # The first unit over max_groups asks for words: an error of the source comes through.
    with pytest.raises(AssertionError, match="no word is needed"):
        _unit_over_max_groups(_Failing(never))


@pytest.mark.parametrize(
    ("words", "error", "match"),
    [
        (lambda n: np.zeros(n, dtype=np.float64), TypeError, "uint64"),
        (lambda n: np.zeros(0, dtype=np.uint64), ValueError, "no words"),
        (lambda n: np.zeros((n, 2), dtype=np.uint64), ValueError, "one-dimensional"),
        (lambda n: "words", TypeError, "buffer"),
        # Uniform words are rejected with probability below bound / 2**32: zeros, which
        # Lemire's method rejects for a bound of 5, must not loop forever.
        (lambda n: np.zeros(n, dtype=np.uint64), ValueError, "not uniform"),
    ],
)
def test_the_counts_refuse_words_that_are_not_uniform_uint64(
    words: Callable[[int], object], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        _unit_over_max_groups(_Failing(words))


@pytest.mark.parametrize("max_groups", [10, 2_000, 4_990])
def test_a_unit_with_thousands_of_cells_keeps_max_groups_of_them(max_groups: int) -> None:
    # The kernel records a slot per cell of the unit it reads, in room grown from 1024
    # slots: a unit of 5000 cells (1 to 3 rows each) grows it three times, among units of
    # a few cells. It keeps max_groups cells (picked, or the rest of those dropped), each
    # with min(rows, max_rows), and the others keep all of theirs.
    rng = np.random.default_rng()
    big_rows = rng.integers(1, 4, 5_000)
    big_cells = np.repeat(np.arange(5_000), big_rows)
    small_units = rng.integers(1, 300, 3_000)
    small_cells = rng.integers(1, 6, 3_000) * 10_000 + small_units  # cells of their own
    units = np.concatenate([np.zeros(len(big_cells), np.int64), small_units])
    cells = np.concatenate([big_cells, small_cells])
    order = rng.permutation(len(units))
    table = bounded_count_table(
        units[order], [cells[order]], [60_000], max_rows=2, max_groups=max_groups,
        source=bit_source(None),
    )  # fmt: skip
    big = table[:5_000]
    kept = np.flatnonzero(big)
    assert len(kept) == max_groups
    assert big[kept].tolist() == np.minimum(big_rows[kept], 2).tolist()
    small = np.bincount(small_cells, minlength=60_000)
    small = np.minimum(small, 2)  # each small unit's cell is its own: min(m, max_rows)
    assert table[5_000:].tolist() == small[5_000:].tolist()


def test_a_unit_chooses_from_the_keys_the_pass_read() -> None:
    # Found by the kernel review: draw() runs Python code in the middle of the pass; when
    # it changed the keys of the unit choosing, the walk that adds the kept cells read
    # other keys than the pass had counted, and returned a wrong (even negative) count.
    for _ in range(50):
        keys, table = np.array([0, 1, 2], np.uint32), np.zeros(2**8, np.int64)

        def draw(n: int, keys: NDArray[np.uint32] = keys) -> NDArray[np.uint64]:
            keys[:] = 3
            return bit_source(None).words(n)

        chosen = _bounded.add_bounded_counts(
            keys, np.array([0, 3]), np.array([3]), 8, 1, 2, table, draw, 1
        )
        assert chosen == 1
        assert sorted(table[:3].tolist()) == [0, 1, 1]
        assert not table[3:].any()


def _words(n: int) -> NDArray[np.uint64]:
    return bit_source(None).words(n)


KEYS = np.arange(4, dtype=np.uint32)  # with cell_bits=2: unit 0, in cells 0, 1, 2, 3


@pytest.mark.parametrize(
    "call",
    [
        lambda: bounded_count_table(
            np.array([0, 1]),
            [np.array([0, 3])],
            [3],
            max_rows=1,
            max_groups=1,
            source=bit_source(None),
        ),  # a code beyond its domain
        lambda: _bounded.partition_keys(
            np.array([0, 2**20]),
            0,
            (),
            (),
            None,
            16,
            np.empty(2, np.uint32),
            np.empty(2, np.int64),
            np.empty(1, np.int64),
        ),  # a unit beyond the chunks
        lambda: _bounded.add_bounded_counts(
            KEYS, np.array([0, 4]), np.array([5]), 2, 1, 1, np.zeros(4, np.int64), _words, 8
        ),  # a chunk past the keys
        lambda: _bounded.add_bounded_counts(
            KEYS, np.array([0, 4]), np.array([4]), 2, 1, 10, np.zeros(2, np.int64), _words, 8
        ),  # a table of fewer than 2**cell_bits cells
        lambda: _bounded.add_bounded_counts(
            KEYS, np.array([0, 4]), np.array([4]), 2, 1, 1, np.zeros(2, np.int64), _words, 8
        ),  # the same, in a unit over max_groups
        lambda: _bounded.add_bounded_counts(
            KEYS, np.array([0, 4]), np.array([4]), 2, 1, 1, np.zeros(4, np.int64), _words, 0
        ),  # no words at a time
    ],
)
def test_the_count_kernels_refuse_what_would_index_out_of_bounds(
    call: Callable[[], object],
) -> None:
    with pytest.raises((ValueError, InvalidParameterError)):
        call()


def test_bounded_counts_read_strided_codes_and_masks() -> None:
    # Found by the kernel review: df.iloc[::2] gives strided Categorical codes, and a
    # where= array may be strided too; the compiled kernels refused them (TypeError).
    gen = np.random.default_rng(0)
    units, cells = gen.integers(0, 10, 80), gen.integers(0, 3, 80)
    mask = np.repeat(gen.random(80) < 0.6, 2)[::2]
    strided = (units[::2], cells[::2], mask[::2])
    assert not any(a.flags.c_contiguous for a in strided)
    contiguous = tuple(np.ascontiguousarray(a) for a in strided)
    for counts_of in (strided, contiguous):
        table = bounded_count_table(
            counts_of[0], [counts_of[1]], [3], max_rows=2, max_groups=3,
            source=bit_source(None), mask=counts_of[2],
        )  # fmt: skip
        kept = contribution_mask(
            contiguous[0], np.where(contiguous[2], contiguous[1], -1), max_rows=2,
            max_groups=3, source=bit_source(None),
        )  # fmt: skip
        assert table.tolist() == np.bincount(contiguous[1][kept], minlength=3).tolist()


# Scenarios of the kernel review, each run in its own process: a kernel that reads or
# writes out of bounds kills it (a segfault) or hangs, either of which fails the test.
SHARED_MEMORY = {
    # The chunk limits written over the units, between the pass that checks the units
    # and the pass that uses them: unit 0 of row 1 becomes 4096, a chunk that is not there.
    "offsets over units": """
units = np.zeros(4096, dtype=np.int64)
_bounded.partition_keys(units, 0, (np.zeros(4096, np.int32),), (1,), None, 24,
                        np.empty(4096, np.uint32), units[:2], np.empty(1, np.int64))
""",
    # The table is the chunk ends: counting chunk 0 moves chunk 1's end 2**22 keys past
    # the last one.
    "table over ends": """
first, second = np.arange(1 << 22, dtype=np.uint32), np.arange(16, dtype=np.uint32)
keys = np.concatenate([(first << 1) | 1, second << 1])
ends = np.array([1 << 22, len(keys)])
offsets = np.array([0, 1 << 22, len(keys)])
words = lambda n: np.random.default_rng().integers(0, 2**63, n, dtype=np.uint64)
_bounded.add_bounded_counts(keys, offsets, ends, 1, 1, 1, ends, words, 8)
""",
    # The table is the keys: the counts the pass adds change the keys it reads again to
    # take back a unit's rows and to add its kept cells (a unit's p-th cell could pass its
    # number of cells, and index past its marks).
    "table over keys": """
for seed in range(50):
    gen = np.random.default_rng(seed)
    keys = np.sort((gen.integers(0, 8, 4096) << 11) | gen.integers(0, 2048, 4096)).astype(np.uint32)
    table = keys.view(np.int64)  # 2048 cells, over the keys
    words = lambda n: gen.integers(0, 2**63, n, dtype=np.uint64)
    with contextlib.suppress(ValueError):
        _bounded.add_bounded_counts(keys, np.array([0, len(keys)]), np.array([len(keys)]), 11,
                                    2, 3, table, words, 1)
""",
}


@pytest.mark.parametrize("scenario", list(SHARED_MEMORY))
def test_the_count_kernels_stay_in_bounds_when_their_arrays_share_memory(scenario: str) -> None:
    # Found by the kernel review: limits were checked once, then read again from the
    # caller's arrays, which a shared buffer (or another thread, while the GIL is
    # released) could change in between. Each call must now fail cleanly or return.
    code = (
        "import contextlib\nimport numpy as np\nfrom dpframe._backends import _bounded\n"
        "with contextlib.suppress(ValueError):\n"
        + "".join(f"    {line}\n" for line in SHARED_MEMORY[scenario].strip().splitlines())
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
