"""Contribution bounding for person-level privacy: which rows a release may read.

When a privacy unit is declared (a person, a household, a firm), neighbouring data sets
differ by *all* the rows of one unit, and one unit may have any number of rows. Before
every release dpframe bounds each unit's contribution, at release time: each unit keeps
rows in at most ``max_groups`` cells (the cells of the table released; an ungrouped
count or sum is one cell), and at most ``max_rows`` rows in each of them. Which rows it
keeps is a uniformly random choice, drawn from the cryptographic bit source, that
depends only on the *structure* of the data (which rows share a unit and a cell), never
on values or on the order of the rows.

This module is pure numpy: arrays of integer codes in, a boolean row mask out. Rows are
identified by their unit code and cell number (:func:`cell_numbers` builds the latter
from the per-column codes of :mod:`dpframe._backends.kernels`). The backends apply the
mask to their exact aggregates; the accessor turns :class:`ContributionBounds` into the
sensitivity of the noise.

How it runs (no Python loop over units, cells or rows):

1. when units average fewer than ``2 * min(max_rows, max_groups)`` rows, one
   ``np.bincount`` of the unit codes gives each unit's number of rows. A unit with at
   most ``min(max_rows, max_groups)`` rows in cells cannot exceed either bound: all its
   rows are kept, and no randomness is drawn for it (:func:`units_to_check`). When no
   unit needs checking, that is all. When units average more, most rows need checking
   and the count is skipped: every row is grouped, and units within the bounds simply
   drop nothing;
2. the rows to check (all rows, when they are the majority) are grouped by (unit, cell)
   with one ``np.sort`` of int64 keys packing (unit, cell, row): numpy's vectorized
   sort, several times faster than ``argsort`` or ``lexsort``. One cache-blocked pass
   over the sorted keys finds the rows beyond the first ``max_rows`` of their pair (the
   row ``max_rows`` positions earlier is in the same pair): their runs give the pairs
   that must shrink, and nothing is stored per pair. Only when some unit has more than
   ``max_groups`` rows are the starts of pairs and units marked and the cells of each
   unit counted;
3. each unit in more than ``max_groups`` cells keeps a uniformly random subset of
   ``max_groups`` of them, and each kept pair with more than ``max_rows`` rows a uniformly
   random subset of ``max_rows`` rows. Each segment draws the smaller of the subset it
   keeps and the subset it drops, with Floyd's algorithm (one exact uniform integer per
   element picked, vectorized over segments) when that is at most ``_FLOYD_MAX``
   elements, else by ranking all its elements with random keys in one more packed
   sort (:func:`_segment_ranks`), where equal keys are broken by fresh words. The
   element-wise passes run a cache-sized block at a time, so their temporaries never
   grow with the number of rows.

A release that reads only a count of the bounded rows (``count``, ``crosstab`` without
values) needs not the mask but how many rows each unit keeps in each cell:
:func:`bounded_count_table` groups 32-bit (unit, cell) keys, a chunk of units at a time,
in compiled code (``_bounded.c``) and numpy's sort, and draws only which cells the units
over ``max_groups`` keep.

The choice is exactly uniform: uniform integers come from Lemire's method with
rejection, ties between random keys are broken by fresh random words, never by
position, and nothing is decided by floating point.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpframe._backends import _bounded
from dpframe._random import BitSource
from dpframe.errors import InvalidParameterError, InvalidParameterTypeError

__all__ = [
    "ContributionBounds",
    "bounded_count_table",
    "cell_numbers",
    "contribution_mask",
    "id_range",
    "keeps_every_row",
    "unit_presence_mask",
    "units_to_check",
]

# Unit codes up to this multiple of the number of rows are counted with np.bincount
# directly; sparser codes are first made dense with np.unique (a sort).
_DENSE_FACTOR = 2
# A packed ranking key keeps at least this many random bits; with fewer, np.lexsort on
# full words is used instead (ties are broken by fresh words either way).
_MIN_RANDOM_BITS = 16


@dataclass(frozen=True)
class ContributionBounds:
    """The most one privacy unit may contribute to a release, and the sensitivities it implies.

    Parameters
    ----------
    max_rows : int
        The most rows one unit may contribute to one cell (or to an ungrouped count or
        sum): a positive integer.
    max_groups : int
        The most cells one unit may contribute to: a positive integer.

    Raises
    ------
    InvalidParameterTypeError
        When either bound is not an integer (bools and floats are refused).
    InvalidParameterError
        When either bound is below 1.

    See Also
    --------
    contribution_mask : The mask that enforces the bounds.

    Notes
    -----
    After :func:`contribution_mask`, removing all the rows of one unit changes at most
    ``max_groups`` cells, each by at most ``max_rows`` rows. For a table of counts:
    L0 sensitivity ``max_groups`` (cells changed), L-infinity ``max_rows``, L1
    ``max_groups * max_rows`` (geometric and Laplace noise) and L2
    ``sqrt(max_groups) * max_rows`` (Gaussian noise; :attr:`l2_squared` is the exact
    integer ``max_groups * max_rows**2``). For sums of values clamped into
    ``[lo, hi]``, multiply each by ``max(|lo|, |hi|)``.

    Examples
    --------
    >>> from dpframe._backends.bounding import ContributionBounds
    >>> bounds = ContributionBounds(max_rows=2, max_groups=3)
    >>> bounds.l1, bounds.linf, bounds.l2_squared
    (6, 2, 12)
    """

    max_rows: int
    max_groups: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "max_rows", _limit(self.max_rows, "max_rows"))
        object.__setattr__(self, "max_groups", _limit(self.max_groups, "max_groups"))

    @property
    def l1(self) -> int:
        """L1 sensitivity of a table of counts: ``max_groups * max_rows``."""
        return self.max_groups * self.max_rows

    @property
    def linf(self) -> int:
        """L-infinity sensitivity of a table of counts (the most one cell moves): ``max_rows``."""
        return self.max_rows

    @property
    def l2_squared(self) -> int:
        """Squared L2 sensitivity of a table of counts: ``max_groups * max_rows**2``, exactly."""
        return self.max_groups * self.max_rows**2

    @property
    def l2(self) -> float:
        """L2 sensitivity of a table of counts: ``sqrt(max_groups) * max_rows`` (a float)."""
        return math.sqrt(self.max_groups) * self.max_rows

    def rows_always_kept(self, cell_count: int) -> int:
        """A unit with at most this many rows in cells keeps them all, in a table of
        ``cell_count`` cells.

        Its rows lie in at most that many cells, with at most that many in any one. When
        there are no more cells than ``max_groups`` (or one, ungrouped), no unit can
        exceed ``max_groups`` and only ``max_rows`` matters.
        """
        if cell_count <= self.max_groups:
            return self.max_rows
        return min(self.max_rows, self.max_groups)


def _limit(value: Any, name: str) -> int:
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Integral):
        raise InvalidParameterTypeError(
            f"{name} must be a positive integer declared without looking at the data, got "
            f"{value!r} of type {type(value).__name__}. For example max_rows=1, max_groups=5: "
            f"each unit then contributes at most one row to each of at most five cells."
        )
    if int(value) < 1:
        raise InvalidParameterError(
            f"{name} must be a positive integer, got {value!r}. For example max_rows=1, "
            f"max_groups=5: each unit then contributes at most one row to each of at most "
            f"five cells."
        )
    if int(value) > _LARGEST_LIMIT:
        raise InvalidParameterError(
            f"{name}={value!r} is beyond 2**40: no unit holds that many rows or cells, and "
            f"the noise, which grows with max_rows * max_groups, would bury every count. "
            f"Declare the most one unit can really contribute (e.g. 8 waves: max_rows=8)."
        )
    return int(value)


# More rows or cells per unit than any data set holds; keeps counts // max_rows in int64.
_LARGEST_LIMIT = 2**40


Codes = NDArray[np.integer[Any]]


def _code_array(values: Any, name: str) -> NDArray[np.int64] | NDArray[np.signedinteger[Any]]:
    """A 1-D array of signed integer codes (no copy when it already is one)."""
    array = np.asarray(values)
    if array.dtype == np.bool_ or array.dtype.kind not in "iu":
        raise InvalidParameterTypeError(
            f"{name} must be an array of integer codes (for example from pandas.factorize), "
            f"got dtype {array.dtype}."
        )
    if array.ndim != 1:
        raise InvalidParameterError(f"{name} must be one-dimensional, got shape {array.shape}.")
    if array.dtype.kind == "u":
        if array.size and int(array.max()) >= 2**63:
            raise InvalidParameterError(
                f"{name} holds codes of 2**63 or more; factorize the column first "
                f"(pandas.factorize gives codes 0..n-1)."
            )
        return array.astype(np.int64)
    return array


def cell_numbers(codes: Sequence[Codes], sizes: Sequence[int]) -> NDArray[np.signedinteger[Any]]:
    """The cell number of each row in row-major order over the domains; -1 outside every cell.

    Parameters
    ----------
    codes : sequence of numpy.ndarray of int
        For each grouping column, the position of each row's key in the column's declared
        domain (``0 .. size - 1``), or -1 (missing or outside the domain), as
        :func:`kernels.domain_codes` gives them. All of the same length.
    sizes : sequence of int
        The size of each column's domain.

    Returns
    -------
    numpy.ndarray of int32 or int64
        ``codes[0] * sizes[1] * ... + codes[-1]``, or -1 for a row with any code -1
        (int32 when there are fewer than 2**31 cells).

    Raises
    ------
    InvalidParameterError
        When no column is given, the lengths differ, or the sizes do not match the codes.

    Examples
    --------
    >>> import numpy as np
    >>> from dpframe._backends.bounding import cell_numbers
    >>> cell_numbers([np.array([0, 1, -1]), np.array([2, 0, 1])], [2, 3]).tolist()
    [2, 3, -1]
    """
    if len(codes) == 0 or len(codes) != len(sizes):
        raise InvalidParameterError(
            f"cell_numbers needs one domain size per code column; got {len(codes)} code "
            f"columns and {len(sizes)} sizes."
        )
    arrays = [_code_array(code, "codes") for code in codes]
    if len({len(a) for a in arrays}) != 1:
        raise InvalidParameterError("every code column must have one code per row.")
    # int32 halves the memory when the cells fit (a 10M-row table: 40 MB, not 80).
    n = len(arrays[0])
    cells: NDArray[np.signedinteger[Any]]
    cells = np.empty(n, dtype=np.int32 if math.prod(sizes) < 2**31 else np.int64)
    # A block at a time: the temporaries stay in the CPU's cache.
    for start in range(0, n, _BLOCK):
        block = cells[start : start + _BLOCK]
        block[:] = arrays[0][start : start + _BLOCK]
        outside = block < 0
        for array, size in zip(arrays[1:], sizes[1:], strict=True):
            column = array[start : start + _BLOCK]
            block *= size
            block += column
            outside |= column < 0
        block[outside] = -1
    return cells


def _bits(largest: int) -> int:
    """Bits needed to store the integers 0..largest."""
    return max(int(largest).bit_length(), 1)


def _validated(
    units: Any, cells: Any, max_rows: Any, max_groups: Any, source: BitSource | None
) -> tuple[Codes, Codes | None, ContributionBounds]:
    bounds = ContributionBounds(max_rows, max_groups)
    unit_codes = _code_array(units, "units")
    cell_codes = None if cells is None else _code_array(cells, "cells")
    if cell_codes is not None and cell_codes.shape != unit_codes.shape:
        raise InvalidParameterError(
            f"units and cells must have one code per row: got {unit_codes.shape[0]} unit "
            f"codes and {cell_codes.shape[0]} cell numbers."
        )
    if source is not None and not callable(getattr(source, "words", None)):
        raise InvalidParameterTypeError(
            f"source must be a bit source (dpframe._random.bit_source(rng)), got {source!r}."
        )
    return unit_codes, cell_codes, bounds


def _eligible(units: Codes, cells: Codes | None) -> NDArray[np.bool_] | None:
    """Rows that have a unit and a cell; None when every row has both (the common case)."""
    n = len(units)
    if n == 0:
        return None
    no_unit = int(units.min()) < 0
    no_cell = cells is not None and int(cells.min()) < 0
    if not (no_unit or no_cell):
        return None
    eligible = units >= 0
    if no_cell and cells is not None:
        eligible &= cells >= 0
    return eligible


def _dense_units(units: Codes, eligible: NDArray[np.bool_] | None) -> tuple[Codes, int]:
    """Unit codes as small non-negative integers (negative codes left as they are), and
    how many there are. Factorized codes are already dense; others cost a sort."""
    n = len(units)
    largest = int(units.max()) if n else -1
    if largest < _DENSE_FACTOR * n + 1024:
        return units, largest + 1
    present = units if eligible is None else units[eligible]
    distinct, inverse = np.unique(present, return_inverse=True)
    dense = np.full(n, -1, dtype=np.int64)
    if eligible is None:
        dense[:] = inverse
    else:
        dense[eligible] = inverse
    return dense, len(distinct)


def units_to_check(
    units: Codes,
    cells: Codes | None = None,
    *,
    max_rows: int,
    max_groups: int,
) -> NDArray[np.bool_]:
    """Which units might exceed the bounds: the fast check that lets most rows skip all work.

    A unit with at most ``min(max_rows, max_groups)`` rows in cells (at most ``max_rows``
    when ``cells`` is None, or when there are no more cells than ``max_groups``: cell
    numbers up to ``max(cells)``) can neither have more than ``max_rows`` rows in one
    cell nor rows in more than ``max_groups`` cells, so :func:`contribution_mask` keeps all its
    rows without grouping them and without drawing randomness. The other units are
    checked exactly (their rows are grouped by cell), and truncated only where they do
    exceed a bound.

    Parameters
    ----------
    units : numpy.ndarray of int
        The unit code of each row, dense non-negative codes (as from ``pandas.factorize``);
        -1 marks a row with no unit.
    cells : numpy.ndarray of int, optional
        The cell number of each row (-1: in no cell); None for an ungrouped release.
    max_rows, max_groups : int
        The bounds (see :class:`ContributionBounds`).

    Returns
    -------
    numpy.ndarray of bool
        One flag per unit code ``0..max(units)``: True for the units that
        :func:`contribution_mask` examines.

    Raises
    ------
    InvalidParameterError, InvalidParameterTypeError
        For bounds that are not positive integers, codes that are not integer arrays,
        arrays of different lengths, or sparse unit codes (above twice the number of
        rows plus 1024).

    See Also
    --------
    contribution_mask : The mask itself.

    Examples
    --------
    >>> import numpy as np
    >>> from dpframe._backends.bounding import units_to_check
    >>> units = np.array([0, 0, 0, 1, 2, 2])
    >>> units_to_check(units, np.array([5, 5, 6, 5, 1, 2]), max_rows=1, max_groups=2)
    array([ True, False,  True])
    """
    unit_codes, cell_codes, bounds = _validated(units, cells, max_rows, max_groups, None)
    n = len(unit_codes)
    unit_count = int(unit_codes.max()) + 1 if n else 0
    if unit_count > _DENSE_FACTOR * n + 1024:
        raise InvalidParameterError(
            "units_to_check needs dense unit codes (0..U-1, as from pandas.factorize): it "
            "returns one flag per code."
        )
    eligible = _eligible(unit_codes, cell_codes)
    per_unit = _rows_per_unit(unit_codes, eligible, max(unit_count, 0))
    cell_count = 1 if cell_codes is None or n == 0 else int(cell_codes.max()) + 1
    return np.asarray(per_unit > bounds.rows_always_kept(cell_count))


def id_range(ids: NDArray[np.integer[Any]]) -> tuple[int, int]:
    """The smallest and the largest of a non-empty integer array, in one pass where it can.

    Parameters
    ----------
    ids : numpy.ndarray of int
        Integer ids (a privacy unit's column), at least one.

    Returns
    -------
    tuple of int
        ``(ids.min(), ids.max())``.

    See Also
    --------
    keeps_every_row : Reads the ids' range to count their rows.

    Notes
    -----
    Not a release: what it reads stays with the caller. Contiguous, aligned int32 ids
    are read once by compiled code (an AVX2 version where the CPU has it: about twice
    as fast as numpy's ``min`` and ``max``); other ids use numpy's two passes (for
    int64, AVX2 has no minimum or maximum, and numpy's are faster).

    Examples
    --------
    >>> import numpy as np
    >>> from dpframe._backends.bounding import id_range
    >>> id_range(np.array([7, -2, 5], dtype=np.int32))
    (-2, 7)
    """
    if ids.dtype == np.int32 and ids.flags.c_contiguous and ids.flags.aligned:
        return _bounded.id_range(ids)
    return int(ids.min()), int(ids.max())


def keeps_every_row(
    units: Codes,
    *,
    cell_count: int,
    max_rows: int,
    max_groups: int,
    first_unit: int = 0,
) -> bool:
    """Whether :func:`contribution_mask` keeps every row in a cell, told from the units alone.

    True when every row has a unit and no unit has more rows than it could keep whatever
    its cells (see :func:`units_to_check`): the mask is then "every row in a cell", and a
    backend need not build the cell numbers nor the mask. A quick answer of False may
    be wrong only in that direction: :func:`contribution_mask` then decides.

    Parameters
    ----------
    units : numpy.ndarray of int
        The unit of each row as an integer id: its unit code is ``id - first_unit``
        (below ``first_unit``: no unit).
    cell_count : int
        An upper bound on the cell numbers plus one (the product of the domain sizes;
        1 for an ungrouped release): declared, not read from the data.
    max_rows, max_groups : int
        The bounds (see :class:`ContributionBounds`).
    first_unit : int, default 0
        The id of unit code 0 (see ``units``).

    Returns
    -------
    bool
        True when no unit can exceed the bounds and every row has a unit.

    Raises
    ------
    InvalidParameterError, InvalidParameterTypeError
        For bounds that are not positive integers or codes that are not integer arrays.

    See Also
    --------
    contribution_mask : The mask, when this says False.

    Notes
    -----
    Removing nothing and drawing nothing, this is exact: a unit with at most
    ``min(max_rows, max_groups)`` rows (at most ``max_rows`` when ``cell_count`` is at
    most ``max_groups``) keeps all its rows in :func:`contribution_mask`. It counts the
    rows of each unit, unless the units average more rows than that limit (then some
    unit exceeds it, and the answer is False at once) or the codes are sparse (False:
    the mask makes them dense). Compiled code counts int32 and int64 ids with a byte per
    unit when the limit is below 255 (a table that stays in cache; four bytes up to
    ``2**32 - 1``), reading every row whatever it finds: the running time depends on the
    number of rows and units only.

    Examples
    --------
    >>> import numpy as np
    >>> from dpframe._backends.bounding import keeps_every_row
    >>> units = np.array([0, 1, 1, 2])
    >>> keeps_every_row(units, cell_count=10, max_rows=2, max_groups=3)
    True
    >>> keeps_every_row(units, cell_count=10, max_rows=1, max_groups=3)
    False
    """
    bounds = ContributionBounds(max_rows, max_groups)
    ids = _code_array(units, "units")
    first_unit = operator.index(first_unit)
    n = len(ids)
    if n == 0:
        return True
    lowest, highest = id_range(ids)
    if lowest < first_unit:
        return False  # a row without a unit
    unit_count = highest - first_unit + 1
    limit = bounds.rows_always_kept(cell_count)
    if n > limit * unit_count or unit_count > _DENSE_FACTOR * n + 1024:
        return False
    if ids.dtype in (np.int32, np.int64) and limit < 2**32 - 1:
        aligned = np.require(ids, requirements=["C", "A"])
        return bool(_bounded.units_within(aligned, first_unit, unit_count, limit))
    codes = _codes_from(ids, first_unit)
    return int(_rows_per_unit(codes, None, unit_count).max()) <= limit


def contribution_mask(
    units: Codes,
    cells: Codes | None,
    *,
    max_rows: int,
    max_groups: int,
    source: BitSource,
) -> NDArray[np.bool_]:
    """The rows a release keeps: at most ``max_rows`` per cell and ``max_groups`` cells per unit.

    Parameters
    ----------
    units : numpy.ndarray of int
        The privacy unit of each row as an integer code. Codes from ``pandas.factorize``
        (0..U-1) are fastest; any non-negative integers work (sparse codes cost a sort).
        A negative code (``factorize`` gives -1 for a missing id) marks a row with no
        unit: it is never kept.
    cells : numpy.ndarray of int or None
        The cell of each row (:func:`cell_numbers`), any non-negative integers; -1 marks
        a row in no cell (missing key, outside the declared domain, or filtered out by
        ``where=``), which is never kept and does not count towards ``max_groups``.
        None: all rows are in one cell (an ungrouped count, sum or mean).
    max_rows : int
        The most rows one unit keeps in one cell.
    max_groups : int
        The most cells one unit keeps rows in.
    source : BitSource
        The random words (``dpframe._random.bit_source(rng)``: cryptographic by default).

    Returns
    -------
    numpy.ndarray of bool
        One flag per row, True for the rows kept.

    Raises
    ------
    InvalidParameterError, InvalidParameterTypeError
        For bounds that are not positive integers (bools and floats are refused), codes
        that are not one-dimensional integer arrays, or ``units`` and ``cells`` of
        different lengths. Everything is checked before any word is drawn.

    See Also
    --------
    ContributionBounds : The bounds, and the sensitivities they give.
    unit_presence_mask : One row per kept (unit, cell) pair, to count units per cell.
    units_to_check : The fast check that lets units within the bounds skip all work.

    Notes
    -----
    **What is kept.** Rows with no unit or in no cell are dropped. Each unit then keeps
    the rows of ``min(k, max_groups)`` of the ``k`` distinct cells it has rows in, every
    such subset of cells equally likely, and in each kept cell ``min(m, max_rows)`` of its
    ``m`` rows there, every such subset of rows equally likely; the choices of different
    units, and of different cells of a unit, are independent. A unit within both bounds
    keeps all its rows in cells. The choice depends only on which rows share a unit and a
    cell and on the random words: not on values, codes, or the order of the rows.

    **Privacy.** Neighbouring data sets differ by all the rows of one unit. The mask is
    computed at release time, on the rows the release reads, so after it removing one
    unit changes at most ``max_groups`` cells, each by at most ``max_rows`` rows, and the
    other units' kept rows keep their distribution (each unit's choice depends on its own
    rows only). A table of counts then has L1 sensitivity ``max_groups * max_rows``,
    L-infinity ``max_rows`` and L2 ``sqrt(max_groups) * max_rows``; a table of sums of
    values clamped into ``[lo, hi]``, the same times ``max(|lo|, |hi|)``
    (:class:`ContributionBounds`).

    **Exact uniformity.** Each segment (the cells of a unit, the rows of a kept cell)
    that must shrink draws a uniformly random subset: the kept subset or the dropped
    one, whichever is smaller, with Floyd's algorithm on exact uniform integers
    (Lemire's multiply-and-reject method on 32-bit halves of random words), or, for
    subsets above ``_FLOYD_MAX`` elements, by sorting the segment's elements on random
    keys, breaking ties between keys with fresh words, recursively, never by position.
    Every subset of the stated size is therefore exactly equally likely; no floating
    point is involved.

    **Running time and randomness.** Units with at most ``min(max_rows, max_groups)``
    rows in cells need no choice: nothing is drawn for them (:func:`units_to_check`),
    and when every unit is such, no word at all. Words are drawn only for segments that
    must shrink: about one per element picked (with Floyd), or one per element of the
    segment (when ranked), plus rare redraws. The running time and the number of words
    drawn therefore depend on the structure of the data (how many units, cells and rows
    exceed the bounds) and on the random draws, never on values: like the rest of
    dpframe outside ``constant_time=True``, this makes no timing promise, and the threat
    model does not cover an observer of the curator's machine. The released values do
    not depend on the number of words drawn. Drawing a word for every row anyway would
    not hide the structure, which the sort's running time shows as well.

    **Cost.** One ``np.bincount`` over the rows (skipped when units average more than
    twice ``min(max_rows, max_groups)`` rows); then, for the rows of the units to check
    only, one ``np.sort`` of int64 keys and a few cache-blocked passes. Memory: the
    sorted keys (8 bytes per row checked) and a few bytes per row of flags. On 10M rows
    and 1M units (``benchmarks/bench_bounding.py``) the mask costs about 2 unit-free
    count tables when no unit needs checking, and 9 to 17 when most rows do (the sort
    alone costs 3 to 4; the most when cells must be chosen too), less than pandas'
    ``groupby(unit).head(max_rows)``, which bounds rows per unit only. When the packed
    key would not fit in 63 bits, ``np.lexsort`` is used (slower, same result).

    References
    ----------
    Tumult Analytics' ``MaxRowsPerID``/``MaxGroupsPerID`` truncation; Google's PipelineDP
    (``max_contributions_per_partition``, ``max_partitions_contributed``). R. Wilson et
    al., "Differentially private SQL with bounded user contribution", PoPETs 2020.

    Examples
    --------
    >>> import numpy as np
    >>> from dpframe._backends.bounding import contribution_mask
    >>> from dpframe._random import bit_source
    >>> units = np.array([0, 0, 0, 0, 1, 1])
    >>> cells = np.array([3, 3, 3, 4, 3, -1])
    >>> kept = contribution_mask(units, cells, max_rows=2, max_groups=2, source=bit_source(None))
    >>> int(kept[:3].sum()), bool(kept[3]), bool(kept[4]), bool(kept[5])
    (2, True, True, False)
    """
    unit_codes, cell_codes, bounds = _validated(units, cells, max_rows, max_groups, source)
    return _mask(unit_codes, cell_codes, bounds, source)


def bounded_count_table(
    units: Codes,
    codes: Sequence[Codes],
    sizes: Sequence[int],
    *,
    max_rows: int,
    max_groups: int,
    source: BitSource,
    mask: NDArray[np.bool_] | None = None,
    first_unit: int = 0,
    unit_count: int | None = None,
) -> NDArray[np.int64]:
    """Rows per cell after contribution bounding, without building the mask of kept rows.

    The counts that :func:`contribution_mask` followed by ``np.bincount`` of the kept
    rows' cells gives, in distribution: a count needs only how many rows each unit keeps
    in each cell, not which.

    Parameters
    ----------
    units : numpy.ndarray of int
        The privacy unit of each row as an integer id: its unit code is ``id -
        first_unit`` (below ``first_unit``: no unit, never counted). Dense codes (as
        from ``pandas.factorize``, or integer ids in a range of about the number of
        rows, with their smallest as ``first_unit``) are fastest.
    codes : sequence of numpy.ndarray of int
        For each grouping column, the position of each row's key in its declared domain,
        or -1 (missing, outside the domain): a row with a -1 is in no cell. None given:
        every row is in one cell (an ungrouped count).
    sizes : sequence of int
        The size of each column's domain.
    max_rows : int
        The most rows one unit adds to one cell.
    max_groups : int
        The most cells one unit adds to.
    source : BitSource
        The random words that choose the cells a unit keeps.
    mask : numpy.ndarray of bool, optional
        Rows to consider (a ``where=`` filter); the others are in no cell.
    first_unit : int, default 0
        The id of unit code 0 (see ``units``).
    unit_count : int, optional
        The largest id minus ``first_unit``, plus one, when the caller knows it (it is
        then not read from the ids again). A code beyond the chunks of units it makes
        (``unit_count`` rounded up to whole chunks) is an error, in any row.

    Returns
    -------
    numpy.ndarray of int64
        The bounded count of each cell, flat in row-major order over the domains (one
        cell when no column is given).

    Raises
    ------
    InvalidParameterError, InvalidParameterTypeError
        For bounds that are not positive integers, codes that are not integer arrays,
        arrays of different lengths, or a code beyond its domain. Everything is checked
        before any word is drawn.

    See Also
    --------
    contribution_mask : The kept rows themselves, for statistics that read values.

    Notes
    -----
    **What is counted.** As in :func:`contribution_mask`: each unit keeps ``min(k,
    max_groups)`` of the ``k`` cells it has rows in, every such subset equally likely,
    and counts ``min(m, max_rows)`` of its ``m`` rows in each kept cell. Which of those
    rows are kept cannot change a count, so no choice of rows is drawn. Removing one
    unit changes at most ``max_groups`` cells, each by at most ``max_rows``: the
    sensitivities of :class:`ContributionBounds`.

    **How.** When the cells fit in 24 bits, each row becomes a 32-bit key, its unit in
    the high bits and its cell in the low ones, written by compiled code (the room of
    each chunk of ``2**(32 - cell bits)`` units estimated from a systematic sample of
    about ``2**17`` ids, with slack, or counted in a first pass where the slack would be
    large or a chunk overflows; then one pass computing cell numbers and scattering the
    keys; ids are read as ``id - first_unit``, so dense integer ids need no array of
    codes); numpy sorts each chunk (32-bit keys sort about twice as fast as 64-bit
    ones), and one flat compiled pass over the sorted keys adds each unit's bounded rows
    (the first ``max_groups`` cells of each unit) and writes, for each cell of the unit
    it reads, the cell and its first row in a slot; a unit found in more than
    ``max_groups`` cells then keeps a uniformly random subset of its cells instead, from
    its slots: Floyd's algorithm picks the smaller of the kept and the dropped cells,
    with Lemire's exact uniform integers, from words the kernel asks ``source`` for,
    ``2**16`` at a time, only once a unit must choose, and only the cells whose fate
    differs from what the pass added are changed (at most ``2 * max_groups`` additions,
    whatever the unit's rows). Memory: 4 bytes per row (up to 5 with the slack), and 13
    per cell of the unit with the most cells (up to twice that: the room doubles).
    Larger tables (or sparse unit codes) build the mask (:func:`contribution_mask`) and
    count the kept rows. Running time and the number of words drawn depend on the
    structure of the data (how many units exceed ``max_groups``) and on the draws, never
    on values.

    Examples
    --------
    >>> import numpy as np
    >>> from dpframe._backends.bounding import bounded_count_table
    >>> from dpframe._random import bit_source
    >>> units = np.array([0, 0, 0, 1, 1, 2])
    >>> cells = np.array([1, 1, 1, 0, 1, -1])
    >>> bounded_count_table(units, [cells], [3], max_rows=2, max_groups=2, source=bit_source(None))
    array([1, 3, 0])
    """
    unit_codes, _, bounds = _validated(units, None, max_rows, max_groups, source)
    n = len(unit_codes)
    # The kernels read contiguous buffers (a frame's iloc[::2] gives strided codes).
    columns = [_aligned(_code_array(c, "codes")) for c in codes]
    counts = [int(size) for size in sizes]
    if len(columns) != len(counts) or any(c.shape != (n,) for c in columns):
        raise InvalidParameterError(
            "bounded_count_table needs one domain size per code column, and one code per row."
        )
    if mask is not None:
        mask = np.ascontiguousarray(mask)
        if mask.dtype != np.bool_ or mask.shape != (n,):
            raise InvalidParameterError("mask must be a boolean array with one flag per row.")
    cell_count = math.prod(counts)
    table = np.zeros(cell_count, dtype=np.int64)
    if n == 0 or cell_count == 0:
        return table
    first_unit = operator.index(first_unit)
    if unit_count is None:
        unit_count = int(unit_codes.max()) - first_unit + 1
    elif (unit_count := operator.index(unit_count)) < 0:
        raise InvalidParameterError("unit_count must not be negative.")
    if first_unit and not (-(2**63) <= first_unit < 2**63 and unit_count <= 2**62):
        raise InvalidParameterError(
            "first_unit must be an int64 at most 2**62 below the largest unit id."
        )
    if unit_codes.dtype.itemsize < 4:  # the compiled kernels read int32 or int64 ids
        unit_codes = unit_codes.astype(np.int32)
    cell_bits = _bits(cell_count - 1) if cell_count > 1 else 0
    if cell_bits > _FUSED_CELL_BITS or unit_count > _DENSE_FACTOR * n + 1024:
        cells = cell_numbers(columns, counts) if columns else None
        unit_codes = _codes_from(unit_codes, first_unit)
        return _counted_mask(unit_codes, cells, cell_count, bounds, source, mask)
    chunk_bits = min(32 - cell_bits, _CHUNK_UNIT_BITS)
    chunks = max(1, -(-unit_count >> chunk_bits))  # ceil(units / units per chunk)
    unit_codes = _aligned(unit_codes)
    offsets = np.empty(chunks + 1, dtype=np.int64)
    ends = np.empty(chunks, dtype=np.int64)
    partition = (unit_codes, first_unit, tuple(columns), tuple(counts), mask, 32 - chunk_bits)
    room = _chunk_room(unit_codes, first_unit, chunk_bits, chunks)
    keys = np.empty(n if room is None else int(room.sum()), dtype=np.uint32)
    if room is None or not _bounded.partition_keys(*partition, keys, offsets, ends, room):
        # The estimate fell short (or was not made): count each chunk's rows first.
        keys = keys[:n] if len(keys) >= n else np.empty(n, dtype=np.uint32)
        _bounded.partition_keys(*partition, keys, offsets, ends)
    for chunk in range(chunks):  # numpy's vectorized sort, a chunk of units at a time
        keys[offsets[chunk] : ends[chunk]].sort()
    # A cell for every value of a key's cell bits: the kernel need not check each row's.
    key_cells = 1 << (32 - chunk_bits)
    every = table if cell_count == key_cells else np.zeros(key_cells, np.int64)
    _bounded.add_bounded_counts(
        keys, offsets, ends, 32 - chunk_bits, bounds.max_rows, bounds.max_groups, every,
        source.words, _WORD_BATCH,
    )  # fmt: skip
    return every if every is table else every[:cell_count].copy()


# Tables of up to 2**24 cells are counted from 32-bit (unit, cell) keys; the rest of the
# 32 bits number units within a chunk, at most 2**16 per chunk (~650K keys on 10 rows per
# unit: a chunk sorts within the CPU's cache; 2**14 was no faster end to end).
_FUSED_CELL_BITS = 24
_CHUNK_UNIT_BITS = 16
# Words the counts kernel asks its source for at a time (512 KiB), only once a unit has
# more than max_groups cells: a unit's choice takes one 32-bit half per cell picked.
_WORD_BATCH = 2**16


def _aligned(values: NDArray[Any]) -> NDArray[Any]:
    """``values`` contiguous and aligned, as the compiled kernels read them (a view of
    bytes, or ``df.iloc[::2]``, may be neither): a copy only when they are not."""
    return np.require(values, requirements=["C", "A"])


def _chunk_room(
    ids: Codes, first_unit: int, chunk_bits: int, chunks: int
) -> NDArray[np.int64] | None:
    """Room for each chunk's keys, from the chunks of a systematic sample of the ids
    (every ``len(ids) // 2**17``-th), so that partition_keys need not count every row's
    chunk first; None (count them) where the slack would take over a quarter more room.

    Each chunk's estimate has a standard deviation of about ``sqrt(rows * step)`` where
    rows are in random order, and far less where they are sorted: the room adds 3% and
    four of those. A chunk that still overflows makes partition_keys say so, and the rows
    are counted; only the speed depends on the sample.
    """
    n = len(ids)
    step = max(1, n >> _SAMPLE_BITS)
    every = ids[::step]
    sample = every[every >= first_unit]  # ids below first_unit have no unit: no room
    # The unit codes as uint64 (exact for ids at or above first_unit, whatever their
    # range); codes beyond the chunks get no room (the kernel refuses them).
    codes = sample.astype(np.uint64) - np.uint64(first_unit % 2**64)
    chunk_of = codes >> np.uint64(chunk_bits)
    per_chunk = np.bincount(chunk_of[chunk_of < chunks].astype(np.intp), minlength=chunks)
    estimate = per_chunk * (n / max(len(every), 1))
    room = np.ceil(1.03 * estimate + 4 * np.sqrt((estimate + 1) * step) + 64).astype(np.int64)
    total = int(room.sum())
    return room if total <= 1.25 * n + 4096 else None


# Rows sampled, about, to estimate the room of each chunk (2**17: under a millisecond).
_SAMPLE_BITS = 17


def _codes_from(ids: Codes, first_unit: int) -> Codes:
    """Unit codes from ids: ``id - first_unit``, and -1 (no unit) for ids below it."""
    if first_unit == 0:
        return ids
    codes = ids.astype(np.int64) - np.int64(first_unit)  # wraps only for ids below it
    return np.where(ids < first_unit, -1, codes)


def _counted_mask(
    units: Codes,
    cells: Codes | None,
    cell_count: int,
    bounds: ContributionBounds,
    source: BitSource,
    mask: NDArray[np.bool_] | None,
) -> NDArray[np.int64]:
    """:func:`bounded_count_table` through the mask of kept rows (large tables)."""
    if mask is not None:
        cells = np.where(mask, 0 if cells is None else cells, -1)
    kept = _mask(units, cells, bounds, source)
    if cells is None:
        return np.array([int(kept.sum())], dtype=np.int64)
    return np.bincount(cells[kept], minlength=cell_count).astype(np.int64)


def unit_presence_mask(
    units: Codes,
    cells: Codes | None,
    *,
    max_groups: int,
    source: BitSource,
) -> NDArray[np.bool_]:
    """One row for each (unit, cell) pair kept, in at most ``max_groups`` cells per unit.

    The per-unit view, with ``max_groups`` as the only bound: counting the mask per cell
    gives, for each cell, the number of distinct units in it, each unit counted in at
    most ``max_groups`` cells. This is the count that private key selection thresholds
    when a grouping column has no declared domain (its cells are then the keys found in
    the data, for example codes from ``pandas.factorize``: the selection, not the mask,
    keeps them private), and the count of "how many people" rather than "how many rows".
    It is :func:`contribution_mask` with ``max_rows=1``.

    Parameters
    ----------
    units : numpy.ndarray of int
        The unit code of each row (negative: no unit, never kept).
    cells : numpy.ndarray of int or None
        The cell of each row (-1: in no cell); None for one cell (then each unit with a
        row is kept once: a count of units).
    max_groups : int
        The most cells one unit is counted in.
    source : BitSource
        The random words.

    Returns
    -------
    numpy.ndarray of bool
        One flag per row, True for the one row kept per kept (unit, cell) pair.

    Raises
    ------
    InvalidParameterError, InvalidParameterTypeError
        As :func:`contribution_mask`.

    See Also
    --------
    contribution_mask : The general mask.

    Notes
    -----
    Removing one unit changes at most ``max_groups`` cells' unit counts, each by 1: L1
    sensitivity ``max_groups``, L-infinity 1, L2 ``sqrt(max_groups)``. The cells kept for
    a unit are a uniformly random subset, and which of its rows in a cell stands for it
    is uniformly random (irrelevant to counts, relevant to sums).

    Examples
    --------
    >>> import numpy as np
    >>> from dpframe._backends.bounding import unit_presence_mask
    >>> from dpframe._random import bit_source
    >>> units, cells = np.array([0, 0, 0, 1, 2]), np.array([0, 0, 1, 0, 1])
    >>> kept = unit_presence_mask(units, cells, max_groups=5, source=bit_source(None))
    >>> np.bincount(cells[kept])  # units per cell
    array([2, 2])
    """
    return contribution_mask(units, cells, max_rows=1, max_groups=max_groups, source=source)


# ---------------------------------------------------------------- the kernel

# Rows per block of the element-wise passes: their temporaries stay in the CPU's cache.
_BLOCK = 1 << 16
# Rows per np.bincount call when counting rows per unit: bincount casts its input to
# intp, which for int32 codes is much faster a block at a time.
_COUNT_BLOCK = 1 << 21


def _mask(
    units: Codes, cells: Codes | None, bounds: ContributionBounds, source: BitSource
) -> NDArray[np.bool_]:
    n = len(units)
    eligible = _eligible(units, cells)
    mask = np.ones(n, dtype=np.bool_) if eligible is None else eligible
    if n == 0:
        return mask
    units, unit_count = _dense_units(units, eligible)
    cell_count = 1 if cells is None else int(cells.max()) + 1
    limit = bounds.rows_always_kept(cell_count)
    groups_may_bind = cell_count > bounds.max_groups
    rows: NDArray[np.intp] | None
    if n < _SKIP_COUNT_FACTOR * limit * unit_count:
        # Units average few rows: count them, and skip those within the bounds.
        per_unit = _rows_per_unit(units, eligible, unit_count)
        to_check = per_unit > limit
        rows_to_check = int(per_unit[to_check].sum())
        if rows_to_check == 0:
            return mask
        # No unit can have more cells than rows: the cell bound binds only above max_groups rows.
        groups_may_bind &= int(per_unit.max()) > bounds.max_groups
        if 2 * rows_to_check >= int(per_unit.sum()):
            rows = None if eligible is None else np.flatnonzero(eligible)
        else:
            selected = to_check[units] if eligible is None else to_check[np.maximum(units, 0)]
            if eligible is not None:
                selected &= eligible
            rows = np.flatnonzero(selected)
        del per_unit, to_check
    else:
        # Units average many rows over the limit: most rows need checking, and grouping them
        # all is cheaper than counting first (units within the bounds drop nothing).
        rows = None if eligible is None else np.flatnonzero(eligible)
    grouped = _group(rows, units, cells, unit_count, cell_count)
    _drop(mask, grouped, bounds, groups_may_bind, source)
    return mask


# Rows per unit on average, in multiples of the row limit, from which every row is grouped
# without counting the rows of each unit first (a heuristic: it changes the speed only).
_SKIP_COUNT_FACTOR = 2


def _rows_per_unit(
    units: Codes, eligible: NDArray[np.bool_] | None, unit_count: int
) -> NDArray[np.int64]:
    counts = np.zeros(unit_count, dtype=np.int64)
    for start in range(0, len(units), _COUNT_BLOCK):
        block = units[start : start + _COUNT_BLOCK]
        if eligible is not None:
            block = block[eligible[start : start + _COUNT_BLOCK]]
        counts += np.bincount(block, minlength=unit_count)
    return counts


_EMPTY = np.zeros(0, dtype=np.intp)


def _drop(
    mask: NDArray[np.bool_],
    grouped: _Grouped,
    bounds: ContributionBounds,
    groups_may_bind: bool,
    source: BitSource,
) -> None:
    """Clear in ``mask`` the rows to drop (the grouped rows hold all rows of their units)."""
    dropped: NDArray[np.bool_] | None = None  # per sorted position, when cells are dropped
    if groups_may_bind and grouped.any_longer_than(bounds.max_groups, _UNIT):
        # Units in more than max_groups cells keep a uniformly random max_groups of them.
        # Pairs are numbered in sorted order; no array holds a value per pair but the flags.
        new_pair, new_unit = grouped.boundaries()
        unit_starts = np.flatnonzero(new_unit)
        del new_unit
        cells_per_unit = np.add.reduceat(new_pair.view(np.uint8), unit_starts, dtype=np.intp)
        unit_first = np.cumsum(cells_per_unit) - cells_per_unit
        pair_dropped = _drop_flags(unit_first, cells_per_unit, bounds.max_groups, source)
        if pair_dropped is not None:
            dropped = _per_position(pair_dropped, new_pair)
    # Kept pairs with more than max_rows rows keep a uniformly random max_rows of them.
    starts, lengths = grouped.runs_longer_than(bounds.max_rows)
    if dropped is not None and starts.size:
        kept = ~dropped[starts]
        starts, lengths = starts[kept], lengths[kept]
    positions = (
        _dropped_elements(starts, lengths, bounds.max_rows, source) if starts.size else _EMPTY
    )
    if dropped is None:
        if positions.size:
            mask[grouped.rows_at(positions)] = False
        return
    dropped[positions] = True
    grouped.clear(mask, dropped)


def _per_position(per_pair: NDArray[np.bool_], new_pair: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """``per_pair`` spread over the sorted positions (``new_pair``: where each pair starts)."""
    size = len(new_pair)
    out = np.empty(size, dtype=np.bool_)
    pair = -1  # the pair of the position before the block
    for start in range(0, size, _BLOCK):
        stop = min(size, start + _BLOCK)
        starts = np.flatnonzero(new_pair[start:stop])
        # Segments: the rest of the current pair, then each pair starting in the block.
        lengths = np.diff(starts, prepend=0, append=stop - start)
        first = pair
        if pair < 0:  # position 0 starts the first pair: no current pair
            first, lengths = 0, lengths[1:]
        out[start:stop] = np.repeat(per_pair[first : pair + len(starts) + 1], lengths)
        pair += len(starts)
    return out


# Levels of the grouping: a pair is a (unit, cell), a unit all of its pairs.
_PAIR, _UNIT = 0, 1


@dataclass(frozen=True)
class _Grouped:
    """Rows sorted by (unit, cell), and how to tell where each pair and each unit starts.

    Packed: ``rows_or_keys`` are int64 keys (unit, cell, row) whose low ``shifts[0]`` bits
    are the row; a pair is the bits above ``shifts[0]``, a unit those above ``shifts[1]``.
    Otherwise (codes too wide to pack) they are the rows, and ``ids`` hold each sorted
    row's pair and unit numbers.
    """

    rows_or_keys: NDArray[np.int64]
    shifts: tuple[int, int]
    ids: tuple[NDArray[np.int64], NDArray[np.int64]] | None = None

    def rows_at(self, positions: NDArray[np.intp]) -> NDArray[np.int64]:
        """The rows at these sorted positions."""
        found = self.rows_or_keys[positions]
        if self.ids is None:
            found &= (1 << self.shifts[_PAIR]) - 1
        return found

    def clear(self, mask: NDArray[np.bool_], dropped: NDArray[np.bool_]) -> None:
        """Clear in ``mask`` the rows at the sorted positions flagged in ``dropped``."""
        for start in range(0, len(dropped), _BLOCK):
            found = self.rows_or_keys[start : start + _BLOCK][dropped[start : start + _BLOCK]]
            if self.ids is None:
                found &= (1 << self.shifts[_PAIR]) - 1
            mask[found] = False

    def boundaries(self) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
        """Per sorted position: whether a pair starts there, and whether a unit does."""
        size = len(self.rows_or_keys)
        new_pair = np.empty(size, dtype=np.bool_)
        new_unit = np.empty(size, dtype=np.bool_)
        new_pair[:1] = new_unit[:1] = True
        if self.ids is not None:
            pair_ids, unit_ids = self.ids
            np.not_equal(pair_ids[1:], pair_ids[:-1], out=new_pair[1:])
            np.not_equal(unit_ids[1:], unit_ids[:-1], out=new_unit[1:])
            return new_pair, new_unit
        keys = self.rows_or_keys
        scratch = np.empty(min(size, _BLOCK), dtype=np.int64)
        for start in range(1, size, _BLOCK):
            stop = min(size, start + _BLOCK)
            changed = scratch[: stop - start]
            np.bitwise_xor(keys[start:stop], keys[start - 1 : stop - 1], out=changed)
            np.greater_equal(changed, 1 << self.shifts[_PAIR], out=new_pair[start:stop])
            np.greater_equal(changed, 1 << self.shifts[_UNIT], out=new_unit[start:stop])
        return new_pair, new_unit

    def any_longer_than(self, length: int, level: int) -> bool:
        """Whether some pair (unit) has more than ``length`` rows."""
        return bool(self._compare(length, level, differ=False).any())

    def runs_longer_than(self, keep: int) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
        """Where each pair with more than ``keep`` rows starts, and its length.

        A row lies beyond the first ``keep`` of its pair when the row ``keep`` positions
        before is in the same pair; such rows form one run at the end of each long pair.
        """
        beyond = np.flatnonzero(self._compare(keep, _PAIR, differ=False))
        if beyond.size == 0:
            return _EMPTY, _EMPTY
        # Runs of consecutive positions: two long pairs' runs never touch (the first `keep`
        # rows of a pair are never beyond).
        breaks = np.flatnonzero(beyond[1:] != beyond[:-1] + 1) + 1
        run_starts = np.concatenate(([0], breaks))
        run_lengths = _lengths(run_starts, len(beyond))
        return beyond[run_starts] - keep, run_lengths + keep

    def _compare(self, distance: int, level: int, differ: bool) -> NDArray[np.bool_]:
        """Per sorted position: in another (``differ``) or the same pair (unit) as the row
        ``distance`` positions before; the first ``distance`` positions count as another."""
        size = len(self.rows_or_keys)
        flags = np.empty(size, dtype=np.bool_)
        flags[:distance] = differ
        threshold = 1 << self.shifts[level]
        values = self.rows_or_keys if self.ids is None else self.ids[level]
        scratch = np.empty(min(size, _BLOCK), dtype=values.dtype)
        for start in range(distance, size, _BLOCK):
            stop = min(size, start + _BLOCK)
            out, changed = flags[start:stop], scratch[: stop - start]
            now, before = values[start:stop], values[start - distance : stop - distance]
            if self.ids is None:
                np.bitwise_xor(now, before, out=changed)
                (np.greater_equal if differ else np.less)(changed, threshold, out=out)
            else:
                (np.not_equal if differ else np.equal)(now, before, out=out)
        return flags


def _lengths(starts: NDArray[np.intp], total: int) -> NDArray[np.intp]:
    """The length of each segment, from where each starts and where the last one ends."""
    lengths = np.empty(len(starts), dtype=np.intp)
    np.subtract(starts[1:], starts[:-1], out=lengths[:-1])
    lengths[-1:] = total - starts[-1:]
    return lengths


def _group(
    rows: NDArray[np.intp] | None,
    units: Codes,
    cells: Codes | None,
    unit_count: int,
    cell_count: int,
) -> _Grouped:
    """Sort ``rows`` (None: all rows) by (unit, cell).

    One ``np.sort`` of int64 keys packing unit, cell and row when they fit in 63 bits
    (numpy's vectorized sort); ``np.lexsort`` otherwise.
    """
    row_bits = _bits(len(units) - 1)
    unit_bits = _bits(unit_count - 1)
    cell_bits = 0 if cells is None else _bits(cell_count - 1)
    if unit_bits + cell_bits + row_bits > 63:
        return _group_lexsort(rows, units, cells)
    size = len(units) if rows is None else len(rows)
    keys = np.empty(size, dtype=np.int64)
    for start in range(0, size, _BLOCK):
        stop = min(size, start + _BLOCK)
        key = keys[start:stop]
        at = np.arange(start, stop) if rows is None else rows[start:stop]
        key[:] = units[start:stop] if rows is None else units[at]
        if cells is not None:
            key <<= cell_bits
            key |= cells[start:stop] if rows is None else cells[at]
        key <<= row_bits
        key |= at
    keys.sort()
    return _Grouped(keys, (row_bits, row_bits + cell_bits))


def _group_lexsort(rows: NDArray[np.intp] | None, units: Codes, cells: Codes | None) -> _Grouped:
    """The same grouping with ``np.lexsort``, for codes too wide to pack in 63 bits."""
    unit_of = (units if rows is None else units[rows]).astype(np.int64)
    if cells is None:
        order = np.argsort(unit_of, kind="stable")
    else:
        cell_of = cells if rows is None else cells[rows]
        order = np.lexsort((cell_of, unit_of))  # stable: rows stay in order within a pair
    unit_of = unit_of[order]
    new_unit = np.concatenate(([True], unit_of[1:] != unit_of[:-1]))
    new_pair = new_unit.copy()
    if cells is not None:
        cell_of = cell_of[order]
        new_pair[1:] |= cell_of[1:] != cell_of[:-1]
    unit_ids = np.cumsum(new_unit, dtype=np.int64)
    pair_ids = np.cumsum(new_pair, dtype=np.int64)
    sorted_rows = order if rows is None else rows[order]
    return _Grouped(sorted_rows.astype(np.int64), (0, 0), (pair_ids, unit_ids))


def _ranges(
    starts: NDArray[np.integer[Any]], lengths: NDArray[np.integer[Any]]
) -> NDArray[np.intp]:
    """The concatenated index ranges ``starts[i] .. starts[i] + lengths[i] - 1``."""
    if len(lengths) == 0:
        return _EMPTY
    if int(lengths.max()) == 1:
        return np.asarray(starts, dtype=np.intp)
    ends = np.cumsum(lengths)
    shift = np.repeat(np.asarray(starts, dtype=np.intp) - (ends - lengths), lengths)
    shift += np.arange(len(shift), dtype=np.intp)
    return shift


# ---------------------------------------------------------------- uniform random subsets

# Segments that pick at most this many elements use Floyd's algorithm (a few passes per
# element picked); larger picks rank the whole segment with one sort.
_FLOYD_MAX = 16


def _drop_flags(
    starts: NDArray[np.intp], lengths: NDArray[np.intp], keep: int, source: BitSource
) -> NDArray[np.bool_] | None:
    """Which elements to drop so that each segment keeps ``keep``, chosen uniformly at random.

    The segments (``starts``, ``lengths``) tile ``0 .. sum(lengths) - 1`` in order; each
    longer than ``keep`` drops all but ``keep`` of its elements, every subset of ``keep``
    kept elements equally likely, independently across segments
    (:func:`_dropped_elements`). Flags suit drops that are many: segments that draw what
    they keep start all dropped. Returns None when nothing is dropped.
    """
    long = lengths > keep
    if not long.any():
        return None
    segments = np.flatnonzero(long)
    picks_kept = long & (lengths > 2 * keep)  # cheaper to draw what it keeps
    flags = np.repeat(picks_kept, lengths)
    picked = np.where(picks_kept[segments], keep, lengths[segments] - keep)
    small = picked <= _FLOYD_MAX
    floyd = segments[small]
    if floyd.size:
        segment, offset = _floyd(lengths[floyd], picked[small], source)
        flags[starts[floyd][segment] + offset] = ~picks_kept[floyd][segment]
    ranked = segments[~small]
    if ranked.size:
        ranks = _segment_ranks(lengths[ranked], source)
        flags[_ranges(starts[ranked], lengths[ranked])] = ranks >= keep
    return flags


def _dropped_elements(
    starts: NDArray[np.intp], lengths: NDArray[np.intp], keep: int, source: BitSource
) -> NDArray[np.intp]:
    """The elements each segment drops so that it keeps ``keep``, chosen uniformly at random.

    Every segment (``starts``, ``lengths``: disjoint ranges of element numbers) is longer
    than ``keep``; it keeps ``keep`` of its elements, every such subset equally likely,
    independently across segments, and the others are returned (in no particular order).
    Each draws the smaller of the set it keeps and the set it drops: with Floyd's
    algorithm when that is at most ``_FLOYD_MAX`` elements, else by ranking all its
    elements (:func:`_segment_ranks`).
    """
    picks_kept = lengths > 2 * keep  # cheaper to draw what it keeps
    picked = np.where(picks_kept, keep, lengths - keep)
    small = picked <= _FLOYD_MAX
    parts: list[NDArray[np.intp]] = []
    if small.all():
        floyd: NDArray[np.intp] | None = None  # every segment: no need to select them
    else:
        floyd = np.flatnonzero(small)
    f_starts = starts if floyd is None else starts[floyd]
    f_lengths = lengths if floyd is None else lengths[floyd]
    if f_lengths.size:
        f_kept = picks_kept if floyd is None else picks_kept[floyd]
        f_picked = picked if floyd is None else picked[floyd]
        segment, offset = _floyd(f_lengths, f_picked, source)
        picked_kept = f_kept[segment]
        # Segments that drew what they drop: the picks are the dropped elements.
        dropping = ~picked_kept
        parts.append(f_starts[segment[dropping]] + offset[dropping])
        # Segments that drew what they keep drop every other element.
        keeping = np.flatnonzero(f_kept)
        if keeping.size:
            k_lengths = f_lengths[keeping]
            local_start = np.zeros(len(f_lengths), dtype=np.intp)
            local_start[keeping] = np.cumsum(k_lengths) - k_lengths
            drop = np.ones(int(k_lengths.sum()), dtype=np.bool_)
            drop[local_start[segment[picked_kept]] + offset[picked_kept]] = False
            parts.append(_ranges(f_starts[keeping], k_lengths)[drop])
    if floyd is not None:
        ranked = np.flatnonzero(~small)
        r_lengths = lengths[ranked]
        ranks = _segment_ranks(r_lengths, source)
        parts.append(_ranges(starts[ranked], r_lengths)[ranks >= keep])
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _floyd(
    lengths: NDArray[np.intp], picks: NDArray[np.intp], source: BitSource
) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """A uniformly random subset of ``picks[i]`` of the offsets ``0..lengths[i]-1``, for each i.

    Floyd's algorithm, vectorized over the segments: for ``j`` from ``length - picks`` to
    ``length - 1``, draw ``t`` uniform in ``0..j``; pick ``t``, or ``j`` if ``t`` was
    picked already. Every subset of that size is equally likely (J. Bentley, R. W. Floyd,
    "Programming pearls: a sample of brilliance", CACM 30(9), 1987). Returns the
    (segment, offset) of every pick.
    """
    if int(picks.max()) == 1:  # one pick each (the common case): one uniform draw each
        return np.arange(len(lengths)), _uniform_below(lengths, source)
    # Segments in decreasing order of picks: those still picking in round i are a prefix.
    descending = -picks
    if int(picks.max()) < 2**15:
        descending = descending.astype(np.int16)  # numpy sorts 16-bit integers by radix
    order = np.argsort(descending, kind="stable")
    lengths, picks = lengths[order], picks[order]
    rounds = int(picks[0])
    # How many segments pick at least i + 1 elements, for each round i.
    active = np.searchsorted(-picks, -np.arange(rounds), side="left")
    small = int(lengths.max()) < 2**31
    chosen = np.empty((rounds, len(lengths)), dtype=np.int32 if small else np.intp)
    for i in range(rounds):
        k = int(active[i])
        j = lengths[:k] - picks[:k] + i
        t = _uniform_below(j + 1, source)
        seen = (chosen[:i, :k] == t).any(axis=0)
        chosen[i, :k] = np.where(seen, j, t)
    # Round i's picks are chosen[i, :active[i]].
    segment = np.concatenate([order[: int(k)] for k in active])
    offset = np.concatenate([chosen[i, : int(k)] for i, k in enumerate(active)])
    return segment, offset.astype(np.intp)


def _uniform_below(bound: NDArray[np.intp], source: BitSource) -> NDArray[np.intp]:
    """One integer uniform in ``0..bound[i]-1`` for each i, exactly (every ``bound`` >= 1).

    Lemire's method on 32-bit halves of random words, for bounds up to 2**32: with ``x``
    uniform on 32 bits, ``x * bound`` splits into ``high * 2**32 + low``; ``high`` is the
    draw, accepted unless ``low < 2**32 mod bound``, which leaves every value exactly
    ``floor(2**32 / bound)`` accepted ``x`` (D. Lemire, "Fast random integer generation in
    an interval", ACM TOMACS 29(1), 2019). Rejections (probability below
    ``bound / 2**32``) draw again. Larger bounds use the leading bits of a word, redrawn
    when not below the bound.
    """
    bound = np.asarray(bound, dtype=np.intp)
    out = np.empty(len(bound), dtype=np.intp)
    if len(bound) == 0:
        return out
    if int(bound.max()) > 2**32:
        huge = bound > 2**32
        out[huge] = _uniform_below_large(bound[huge], source)
        out[~huge] = _uniform_below(bound[~huge], source)
        return out
    # A block at a time: the temporaries stay in the CPU's cache.
    rejected: list[NDArray[np.intp]] = []
    for start in range(0, len(bound), _BLOCK):
        stop = min(len(bound), start + _BLOCK)
        out[start:stop], again = _lemire(bound[start:stop], source)
        if again.size:
            rejected.append(again + start)
    while rejected:
        pending = np.concatenate(rejected)
        out[pending], again = _lemire(bound[pending], source)
        rejected = [pending[again]] if again.size else []
    return out


def _lemire(
    bound: NDArray[np.intp], source: BitSource
) -> tuple[NDArray[np.int64], NDArray[np.intp]]:
    """One draw of Lemire's method per bound (each in ``1..2**32``): the draws, and the
    indices of those rejected (to draw again)."""
    n = len(bound)
    x = source.words((n + 1) // 2).view(np.uint32)[:n].astype(np.uint64)
    limit = bound.astype(np.uint64)
    x *= limit  # below 2**64: both factors are at most 2**32
    low = x & np.uint64(2**32 - 1)
    # 2**32 mod bound < bound: only a low part below the bound may be rejected.
    doubtful = np.flatnonzero(low < limit)
    rejected = doubtful[low[doubtful] < np.uint64(2**32) % limit[doubtful]]
    x >>= np.uint64(32)
    return x.view(np.int64), rejected


def _uniform_below_large(bound: NDArray[np.intp], source: BitSource) -> NDArray[np.intp]:
    """``_uniform_below`` for bounds above 2**32: leading bits of a word, redrawn when too big."""
    out = np.zeros(len(bound), dtype=np.intp)
    # Bits of bound - 1, from the float exponent; a float rounded up gives one bit more,
    # which costs acceptance rate, never exactness.
    shift = np.uint64(64) - np.frexp((bound - 1).astype(np.float64))[1].astype(np.uint64)
    pending = np.arange(len(bound))
    while pending.size:
        value = source.words(pending.size) >> shift[pending]
        accepted = value < bound[pending].astype(np.uint64)
        out[pending[accepted]] = value[accepted].astype(np.intp)
        pending = pending[~accepted]
    return out


def _segment_ranks(lengths: NDArray[np.integer[Any]], source: BitSource) -> NDArray[np.int64]:
    """An exactly uniform random permutation of ``0..length-1`` for each of consecutive segments.

    Element ``j`` of segment ``s`` (elements numbered consecutively, segment after
    segment) gets rank ``ranks[j]``; ranks of different segments are independent. Each
    element draws a random word; its leading bits are packed under the segment number
    and above the element's offset, and one ``np.sort`` orders the segments' elements by
    their words. Elements whose packed words tie within a segment form runs, which are
    permuted by the same procedure with fresh words: ties are broken at random, never by
    position, so every permutation is exactly equally likely.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    starts = np.cumsum(lengths) - lengths
    start_of = np.repeat(starts, lengths)
    offset = np.arange(total, dtype=np.int64) - start_of
    segment_bits = _bits(len(lengths) - 1)
    offset_bits = _bits(int(lengths.max()) - 1)
    random_bits = 63 - segment_bits - offset_bits
    words = source.words(total)
    if random_bits >= _MIN_RANDOM_BITS:
        key = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
        key <<= random_bits
        key |= (words >> np.uint64(64 - random_bits)).view(np.int64)
        key <<= offset_bits
        key |= offset
        key.sort()
        # Ties: equal segment and random bits, that is equal bits above the offset.
        tied = (key[1:] ^ key[:-1]) < 1 << offset_bits
        key &= (1 << offset_bits) - 1
        sorted_offset = key
    else:
        segment = np.repeat(np.arange(len(lengths)), lengths)
        order = np.lexsort((words, segment))
        sorted_offset = offset[order]
        tied = words[order][1:] == words[order][:-1]
        tied &= segment[1:] == segment[:-1]  # segment[order] == segment: sorted by segment
    # The element at sorted position p has rank p - start; runs of ties are shuffled.
    position = np.arange(total, dtype=np.int64)
    if tied.any():
        edges = np.diff(np.concatenate(([0], tied.view(np.int8), [0])))
        run_starts = np.flatnonzero(edges == 1)
        run_lengths = np.flatnonzero(edges == -1) - run_starts + 1
        runs = _ranges(run_starts, run_lengths)
        position[runs] = np.repeat(run_starts, run_lengths) + _segment_ranks(run_lengths, source)
    ranks = np.empty(total, dtype=np.int64)
    ranks[start_of + sorted_offset] = position - start_of
    return ranks
