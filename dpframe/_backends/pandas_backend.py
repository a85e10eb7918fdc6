"""The pandas backend: exact aggregates of an in-memory DataFrame.

Every aggregate runs the cache-blocked kernels of :mod:`dpframe._backends.kernels` on
the columns' codes and values; nothing here draws noise.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dpframe import _attrs, _quantiles, _validation
from dpframe._backends import Group, SumGrid, bounding, kernels, register_backend
from dpframe._backends.bounding import ContributionBounds
from dpframe._ledger import Ledger
from dpframe._random import bit_source
from dpframe._typing import ColumnLabel, Domain, Where
from dpframe.errors import (
    DPFrameError,
    InvalidParameterError,
    LedgerConflictError,
    PrivacyUnitError,
)

__all__ = ["PandasBackend", "PandasRows"]


class PandasRows:
    """The rows of a pandas frame selected by a filter (a boolean mask, or all).

    The mask may be given as a function, computed on first use: contribution bounding
    draws randomness, and a call the ledger refuses must draw nothing.
    """

    def __init__(
        self,
        frame: pd.DataFrame,
        mask: NDArray[np.bool_] | Callable[[], NDArray[np.bool_] | None] | None,
        counts: _BoundedCounts | None = None,
    ) -> None:
        self._frame = frame
        self._given = mask
        self._counts = counts  # rows bounded for one count only (see bounded)

    @functools.cached_property
    def _mask(self) -> NDArray[np.bool_] | None:
        if self._counts is not None:
            raise DPFrameError("internal error: rows bounded for a count were read otherwise")
        return self._given() if callable(self._given) else self._given

    def _codes(self, groups: Sequence[Group]) -> list[kernels.Codes]:
        return [kernels.domain_codes(self._frame[g.name], g.domain) for g in groups]

    def _values(self, column: ColumnLabel) -> NDArray[np.float64]:
        return _validation.numeric_values(self._frame[column], column)

    def count(self) -> int:
        if self._counts is not None:
            return int(self._counts.table(())[0])
        return len(self._frame) if self._mask is None else int(self._mask.sum())

    def count_table(self, groups: Sequence[Group]) -> NDArray[np.int64]:
        sizes = [len(g.domain) for g in groups]
        if self._counts is not None:
            return self._counts.table(groups).reshape(sizes)
        return kernels.count_table(self._codes(groups), sizes, self._mask)

    def sum(self, column: ColumnLabel, grid: SumGrid) -> int:
        return kernels.sum_total(grid, self._values(column), self._mask)

    def sum_table(
        self, column: ColumnLabel, grid: SumGrid, groups: Sequence[Group]
    ) -> NDArray[np.generic]:
        sizes = [len(g.domain) for g in groups]
        return kernels.sum_table(grid, self._values(column), self._codes(groups), sizes, self._mask)

    def sum_tables(
        self, column: ColumnLabel, grids: Sequence[SumGrid], groups: Sequence[Group]
    ) -> list[NDArray[np.generic]]:
        sizes = [len(g.domain) for g in groups]
        return kernels.sum_tables(
            grids, self._values(column), self._codes(groups), sizes, self._mask
        )

    def cell_table(
        self, column: ColumnLabel, grid: NDArray[np.float64], groups: Sequence[Group]
    ) -> NDArray[np.int64]:
        cells = _quantiles.row_cells(self._values(column), grid, _quantiles.cell_edges(grid))
        sizes = [*(len(g.domain) for g in groups), grid.size]
        return kernels.count_table([*self._codes(groups), cells], sizes, self._mask)

    def log_histogram(self, column: ColumnLabel) -> NDArray[np.int64]:
        values = self._values(column)
        return kernels.log_histogram(values if self._mask is None else values[self._mask])

    def present(self, column: ColumnLabel) -> PandasRows:
        def mask() -> NDArray[np.bool_]:
            present = ~np.isnan(self._values(column))
            return present if self._mask is None else self._mask & present

        return PandasRows(self._frame, mask)

    def bounded(
        self,
        unit: Sequence[ColumnLabel],
        bounds: ContributionBounds,
        groups: Sequence[Group],
        rng: np.random.Generator | None,
        *,
        counts_only: bool = False,
    ) -> PandasRows:
        if counts_only:
            return PandasRows(self._frame, None, _BoundedCounts(self, unit, bounds, groups, rng))

        def keep() -> NDArray[np.bool_] | None:
            ids = unit_ids(self._frame, unit)
            codes, sizes = self._codes(groups), [len(g.domain) for g in groups]
            if _keeps_every_row(ids, codes, sizes, bounds):
                return self._mask  # every row in a cell is kept: no cells, no mask to build
            cells = None
            if groups:
                cells = bounding.cell_numbers(codes, sizes)
            if self._mask is not None:  # rows filtered out are in no cell: never kept
                cells = np.where(self._mask, 0 if cells is None else cells, -1)
            kept = bounding.contribution_mask(
                _codes(ids),
                cells,
                max_rows=bounds.max_rows,
                max_groups=bounds.max_groups,
                source=bit_source(rng),
            )
            return None if kept.all() else kept  # no mask: the kernels skip a pass

        return PandasRows(self._frame, keep)

    def unit_counts(
        self, unit: Sequence[ColumnLabel], groups: Sequence[Group]
    ) -> NDArray[np.int64]:
        sizes = [len(g.domain) for g in groups]
        units = unit_codes(self._frame, unit)
        cells = bounding.cell_numbers(self._codes(groups), sizes)
        present = (units >= 0) & (cells >= 0)
        if self._mask is not None:
            present &= self._mask
        pairs = pd.DataFrame({"cell": cells[present], "unit": units[present]}).drop_duplicates()
        counts = np.bincount(pairs["cell"].to_numpy(), minlength=int(np.prod(sizes)))
        return counts.astype(np.int64).reshape(sizes)


def _keeps_every_row(
    ids: UnitIds,
    codes: Sequence[kernels.Codes],
    sizes: Sequence[int],
    bounds: ContributionBounds,
) -> bool:
    """Whether bounding keeps every row in a cell, told without grouping the rows
    (:func:`bounding.keeps_every_row`; only when no code is -1, as it counts all rows)."""
    cell_count = math.prod(sizes)
    if len(ids.values) > bounds.rows_always_kept(cell_count) * ids.unit_count:
        return False  # some unit has more rows than the bounds always keep: no pass needed
    return all(int(c.min(initial=0)) >= 0 for c in codes) and bounding.keeps_every_row(
        ids.values,
        cell_count=cell_count,
        max_rows=bounds.max_rows,
        max_groups=bounds.max_groups,
        first_unit=ids.first,
    )


class _BoundedCounts:
    """The one count of rows bounded per unit: each unit's kept rows counted, not chosen.

    :func:`bounding.bounded_count_table` gives the same counts in distribution as
    counting :func:`bounding.contribution_mask`'s kept rows, without the mask. Read once,
    for the groups the rows were bounded for: a second read would be a second draw.
    """

    def __init__(
        self,
        rows: PandasRows,
        unit: Sequence[ColumnLabel],
        bounds: ContributionBounds,
        groups: Sequence[Group],
        rng: np.random.Generator | None,
    ) -> None:
        self._rows, self._unit, self._bounds = rows, unit, bounds
        self._groups, self._rng = tuple(groups), rng
        self._read = False

    def table(self, groups: Sequence[Group]) -> NDArray[np.int64]:
        """The bounded count of each cell of ``groups``, flat (one cell when there are none)."""
        if self._read or tuple(groups) != self._groups:
            raise DPFrameError("internal error: rows bounded for one count were read again")
        self._read = True
        rows, bounds = self._rows, self._bounds
        frame, given = rows._frame, rows._mask  # the rows before bounding (where=, present)
        ids = unit_ids(frame, self._unit)
        codes, sizes = rows._codes(groups), [len(g.domain) for g in groups]
        if _keeps_every_row(ids, codes, sizes, bounds):  # then count them all
            if not groups:
                return np.array([len(frame) if given is None else int(given.sum())])
            return kernels.count_table(codes, sizes, given).reshape(-1)
        return bounding.bounded_count_table(
            ids.values,
            codes,
            sizes,
            max_rows=bounds.max_rows,
            max_groups=bounds.max_groups,
            source=bit_source(self._rng),
            mask=given,
            first_unit=ids.first,
            unit_count=ids.unit_count,
        )


def observed_domain(keys: pd.Index, dtype: Any, name: ColumnLabel) -> pd.Index:
    """The keys found in a column, in a data-independent order (sorted; by type and text
    when the keys do not compare), checked against its dtype like a declared domain.

    The order of first appearance would tell which key comes first in the data. No key
    at all is not refused (a refusal would tell that the column is empty): selection then
    releases no key, and is charged like any other.
    """
    _validation.selectable_object_keys(keys, dtype, name)
    if len(keys) == 0:
        return pd.Index([], dtype=object)
    try:
        ordered = keys.sort_values()
    except TypeError:
        ordered = pd.Index(sorted(keys, key=lambda k: (type(k).__name__, str(k))), dtype=object)
    return _validation.declared_domain(dtype, name, {name: ordered}, {})


def _arrow_float_as_numpy(column: pd.Series) -> pd.Series:
    """An Arrow float column as float64 with -0.0 made 0.0 and Arrow's NaN made missing.

    Arrow compares floats by their bits (0.0 and -0.0 differ, NaN is a value), pandas by
    value: ids equal in value must be one unit, as they are in a numpy float column.
    """
    dtype = column.dtype
    if isinstance(dtype, pd.ArrowDtype) and dtype.kind == "f":
        return pd.Series(
            column.to_numpy(dtype=np.float64, na_value=np.nan) + 0.0, index=column.index
        )
    return column


def unit_codes(frame: pd.DataFrame, unit: Sequence[ColumnLabel]) -> NDArray[np.integer[Any]]:
    """The privacy unit of each row as an integer code; -1 where an id is missing."""
    return _codes(unit_ids(frame, unit))


def _codes(ids: UnitIds) -> NDArray[np.integer[Any]]:
    if ids.first == 0:
        return ids.values
    # In at least 32 bits (int8 ids would wrap): int32 below 2**30 rows, else int64 (an
    # int32 subtraction of ids 2**31 apart would wrap negative: "no unit").
    small = ids.values.dtype == np.int32 and len(ids.values) < 2**30
    return np.asarray(np.subtract(ids.values, ids.first, dtype=np.int32 if small else np.int64))


class UnitIds(NamedTuple):
    """Each row's unit as an integer id: its unit code is ``id - first``, from 0 to
    ``unit_count - 1``; an id below ``first`` (-1 when ``first`` is 0) is a row without one."""

    values: NDArray[np.integer[Any]]
    first: int
    unit_count: int


def unit_ids(frame: pd.DataFrame, unit: Sequence[ColumnLabel]) -> UnitIds:
    """The privacy unit of each row as an integer id (:class:`UnitIds`).

    Integer ids in a range of at most twice the rows are kept as they are, with their
    smallest as ``first`` (the compiled counts subtract it as they read them): no
    hashing, no array of codes. Other ids are factorized (``first`` 0).
    """
    if any(isinstance(frame[name].dtype, pd.ArrowDtype) for name in unit):
        frame = pd.DataFrame(
            {position: _arrow_float_as_numpy(frame[name]) for position, name in enumerate(unit)}
        )
        unit = list(range(len(unit)))
    if len(unit) == 1:
        column = frame[unit[0]]
        if isinstance(column.dtype, np.dtype) and column.dtype.kind in "iu" and len(column):
            # Integer ids in a range of at most twice the rows are codes already (their
            # offset from the smallest): 10x faster than factorize, whose hashing dominates.
            values = column.to_numpy()
            lowest, highest = bounding.id_range(values)
            count = highest - lowest + 1
            if count <= 2 * len(values):  # so the offsets fit
                if values.dtype not in (np.int32, np.int64):  # 8 or 16 bits, unsigned
                    return UnitIds(np.subtract(values, lowest, dtype=np.int64), 0, count)
                return UnitIds(np.ascontiguousarray(values), lowest, count)
        try:
            codes, uniques = pd.factorize(column, use_na_sentinel=True)
        except (TypeError, ValueError, NotImplementedError) as failed:  # lists, dicts
            raise kernels.unhashable_keys(column) from failed
        return UnitIds(np.asarray(codes), 0, len(uniques))
    try:
        numbers = frame.groupby(list(unit), dropna=True, sort=False).ngroup()
    except (TypeError, ValueError, NotImplementedError) as failed:
        raise kernels.unhashable_keys(frame[unit[0]]) from failed
    # A row with a missing id in any unit column has no group (NaN): it has no unit, -1.
    codes = np.asarray(numbers.fillna(-1).to_numpy(dtype=np.int64))
    return UnitIds(codes, 0, int(codes.max(initial=-1)) + 1)


class PandasBackend:
    """A pandas DataFrame seen by the accessor (see :class:`dpframe._backends.Backend`)."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self._frame = frame

    @property
    def ledger(self) -> Ledger:
        ledger = _attrs.ledger_of(self._frame)
        if ledger is None:  # pragma: no cover - create=True always returns a ledger
            raise DPFrameError("internal error: no ledger")
        return ledger

    def group(self, name: ColumnLabel, domain: Domain | None, param: str) -> Group:
        dtype = _validation.column(self._frame, name, param).dtype
        declared = _validation.declared_domain(dtype, name, domain, self.ledger.domains)
        return Group(name, declared, dtype)

    def observed_group(self, name: ColumnLabel, param: str) -> Group:
        column = _validation.column(self._frame, name, param)
        try:
            found = pd.unique(column.dropna().to_numpy(dtype=object))
        except TypeError as unhashable:
            raise kernels.unhashable_keys(column) from unhashable
        keys = pd.Index(found, dtype=object)
        return Group(name, observed_domain(keys, column.dtype, name), column.dtype)

    def column_label(self, key: object, param: str) -> ColumnLabel:
        if not isinstance(key, pd.Series):
            return key
        name = key.name
        frame = self._frame
        if (
            name is None
            or name not in frame.columns
            or not key.index.equals(frame.index)
            or not key.equals(_validation.column(frame, name, param))
        ):
            raise InvalidParameterError(
                f"{param} got a Series that is not a column of this frame ({name!r}). Pass a "
                f'column of the frame (df["col"]) or its name; add a derived key as a '
                f'column first, e.g. df = df.assign(band=pd.cut(df["Age"], bins=[0, 18, 65, 120])).'
            )
        return name

    def check_columns(self, names: Iterable[ColumnLabel], param: str) -> dict[ColumnLabel, Any]:
        return {name: _validation.column(self._frame, name, param).dtype for name in names}

    def check_unit(self, unit: Sequence[ColumnLabel]) -> None:
        # pandas.factorize defines which ids are one unit: nothing to check.
        return None

    def check_rows_apart(self) -> None:
        index = self._frame.index
        if not index.is_unique:
            repeated = index[index.duplicated()][0]
            raise PrivacyUnitError(
                f"This frame's index repeats labels (e.g. {repeated!r}), so dpframe could "
                f"not tell a row repeated later (pd.concat of two overlapping selections) "
                f"from a person's own row, and a release could charge one person's loss "
                f"once while counting it twice. Give every row its own label first "
                f"(df = df.reset_index()), or, if a person has several rows, declare the "
                f'person: df.dp.set_budget(..., privacy_unit="person_id").'
            )

    def check_keys(self, groups: Sequence[Group]) -> None:
        for group in groups:
            if group.dtype == object:  # other dtypes are refused, if at all, by their schema
                kernels.domain_codes(self._frame[group.name], group.domain)

    @property
    def row_labels(self) -> tuple[Hashable, ...] | None:
        index = self._frame.index
        return tuple(index.names) if index.is_unique else None

    @property
    def row_count(self) -> int | None:
        return len(self._frame)

    def numeric_column(self, name: ColumnLabel, param: str) -> ColumnLabel:
        _validation.numeric_dtype(_validation.column(self._frame, name, param).dtype, name)
        return name

    def rows(self, where: Where) -> PandasRows:
        refuse_repeated_rows(self._frame, self.ledger)
        if isinstance(where, pd.Series):
            other = _attrs.ledger_of(where, create=False)
            if other is not None and other is not self.ledger and other.budget_set:
                # The condition reads another data set: its budget would not be charged.
                raise LedgerConflictError(
                    "where= is a condition on data with another privacy budget (its Series "
                    "carries another ledger), and a release here would charge only this "
                    "frame's budget. Use a condition on this frame's own columns, or combine "
                    "the raw data first and set one budget on the combined frame."
                )
        return PandasRows(self._frame, _validation.where_mask(self._frame, where))


def refuse_repeated_rows(frame: pd.DataFrame | pd.Series[Any], ledger: Ledger) -> None:
    """Refuse a frame that visibly gives a person several rows, without a privacy unit.

    Visible: index labels that were unique in the frame given the budget now repeat, or
    the frame has more rows than it had (the Dask backend runs this on the pandas frames
    that ``dd.from_pandas`` wraps). With a privacy unit, repeated rows are bounded per
    unit at release time, and nothing is refused here.
    """
    if ledger.privacy_unit is not None:
        return
    labels = ledger.row_labels
    index = frame.index
    if labels is not None and tuple(index.names) == labels and not index.is_unique:
        raise PrivacyUnitError(
            "This frame repeats index labels that were unique in the frame given the "
            "budget (e.g. pd.concat([df, df]) or a merge that duplicated rows), so some "
            "people now have several rows, and a release would spend more privacy than it "
            "charges. dpframe assumes each row belongs to a different person: release from "
            "the frame without the duplicated rows, or merge with df.dp.merge(...), which "
            "checks that no row is duplicated."
        )
    budgeted_rows = ledger.row_count
    if budgeted_rows is not None and len(frame) > budgeted_rows:
        # More rows than the data had: some row is there twice, whatever the index says.
        raise PrivacyUnitError(
            f"This frame has {len(frame)} rows, more than the {budgeted_rows} of the "
            f"frame given the budget, so some people now have several rows "
            f"(pd.concat([df, df], ignore_index=True), explode, a merge that repeated "
            f"rows; or rows of nobody, added by an outer or right merge: merge with "
            f"how='left' or 'inner'), and a release would spend more privacy than it "
            f"charges, or count rows that are no one's. dpframe "
            f"assumes each row belongs to a different person: release from the frame "
            f"without the repeated rows. For data with several rows per person, declare "
            f'the person: df.dp.set_budget(..., privacy_unit="person_id").'
        )


register_backend(pd.DataFrame, PandasBackend)
