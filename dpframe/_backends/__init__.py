"""Backends: exact aggregates of a frame's rows on declared domains, knowing nothing of noise.

The accessor sees a frame only through a :class:`Backend`: it resolves grouping columns
against their declared domains, validates value columns and row filters (from the
frame's schema only: a refused call reads no data), and hands out :class:`Rows`, whose
methods compute exact counts and clamped sums. One implementation runs in memory on
pandas (:mod:`dpframe._backends.pandas_backend`), one on the workers of a Dask cluster
(:mod:`dpframe._backends.dask_backend`). :func:`backend_for` picks the one registered for
a frame's type; nothing outside a backend's module knows its library.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, Protocol, TypeVar

import numpy as np
from numpy.typing import NDArray

from dpframe._backends.bounding import ContributionBounds
from dpframe._backends.kernels import Group, SumGrid
from dpframe._ledger import Ledger
from dpframe._typing import ColumnLabel, Domain, Where
from dpframe.errors import InvalidParameterTypeError

__all__ = ["Backend", "Group", "Rows", "SumGrid", "backend_for", "register_backend"]


class Rows(Protocol):
    """The rows a release reads (after its ``where=`` filter): exact aggregates only."""

    def count(self) -> int:
        """The number of rows."""
        ...

    def count_table(self, groups: Sequence[Group]) -> NDArray[np.int64]:
        """Rows per cell of the product of the groups' domains, shape ``[len(domain), ...]``.

        Rows whose key is missing or outside a domain fall in no cell.
        """
        ...

    def sum(self, column: ColumnLabel, grid: SumGrid) -> int:
        """The exact clamped sum of a numeric column in grid units (NaN skipped)."""
        ...

    def sum_table(
        self, column: ColumnLabel, grid: SumGrid, groups: Sequence[Group]
    ) -> NDArray[np.generic]:
        """Exact clamped sums per cell in grid units (int64, or Python ints when large)."""
        ...

    def sum_tables(
        self, column: ColumnLabel, grids: Sequence[SumGrid], groups: Sequence[Group]
    ) -> list[NDArray[np.generic]]:
        """Several exact sums of one column per cell (one per grid), in one pass."""
        ...

    def cell_table(
        self, column: ColumnLabel, grid: NDArray[np.float64], groups: Sequence[Group]
    ) -> NDArray[np.int64]:
        """Non-missing values per cell of a candidate ``grid`` (quantiles), per group.

        Shape ``[len(domain), ..., len(grid)]``; values are placed in the cell of their
        nearest candidate (:func:`dpframe._quantiles.row_cells`).
        """
        ...

    def log_histogram(self, column: ColumnLabel) -> NDArray[np.int64]:
        """Non-missing values per log-scale bin (:data:`kernels.LOG_EDGES`), + then -."""
        ...

    def present(self, column: ColumnLabel) -> Rows:
        """These rows without those whose value of the numeric ``column`` is missing."""
        ...

    def bounded(
        self,
        unit: Sequence[ColumnLabel],
        bounds: ContributionBounds,
        groups: Sequence[Group],
        rng: np.random.Generator | None,
        *,
        counts_only: bool = False,
    ) -> Rows:
        """These rows with each privacy unit's contribution bounded (a uniform random choice).

        Each unit keeps rows in at most ``bounds.max_groups`` cells of ``groups`` (one
        cell when there are none) and at most ``bounds.max_rows`` rows in each
        (:func:`dpframe._backends.bounding.contribution_mask`); rows with a missing unit
        id are dropped. With ``counts_only``, the caller reads one count of these rows
        (:meth:`count`, or :meth:`count_table` of ``groups``) and nothing else, so a
        backend may count the rows each unit keeps without choosing which
        (:func:`dpframe._backends.bounding.bounded_count_table`).
        """
        ...

    def unit_counts(
        self, unit: Sequence[ColumnLabel], groups: Sequence[Group]
    ) -> NDArray[np.int64]:
        """Distinct privacy units with a row in each cell, shaped like :meth:`count_table`.

        For private key selection, on rows already :meth:`bounded`; rows with a missing
        unit id count for no unit.
        """
        ...


class Backend(Protocol):
    """What the ``.dp`` accessor needs from a frame."""

    @property
    def ledger(self) -> Ledger:
        """The ledger of the frame's data (a new one, with no budget, if it has none)."""
        ...

    def group(self, name: ColumnLabel, domain: Domain | None, param: str) -> Group:
        """A grouping column resolved against its declared domain (schema only)."""
        ...

    def observed_group(self, name: ColumnLabel, param: str) -> Group:
        """A grouping whose keys are those found in the data, sorted (reads the column).

        Only for private key selection, which releases none of these keys unless it
        selects it privately.
        """
        ...

    def column_label(self, key: object, param: str) -> ColumnLabel:
        """A column named by its label, or given as a Series of this frame (``df["k"]``)."""
        ...

    def check_columns(self, names: Iterable[ColumnLabel], param: str) -> dict[ColumnLabel, Any]:
        """The dtype of each named column, refusing missing or duplicated ones (schema only)."""
        ...

    def check_unit(self, unit: Sequence[ColumnLabel]) -> None:
        """Refuse privacy-unit columns whose equal ids this backend could not keep together.

        pandas' ``factorize`` defines which rows are one unit; a backend that moves rows
        by a hash of the ids (Dask's shuffle) must give every row of a unit the same one.
        """
        ...

    def check_rows_apart(self) -> None:
        """Refuse, at ``set_budget`` without a privacy unit, rows that cannot be told apart.

        Each row is then one person, and derived frames that give a person a second row
        are refused by the labels they repeat: an index whose labels already repeat would
        hide them.
        """
        ...

    def check_keys(self, groups: Sequence[Group]) -> None:
        """Refuse grouping columns whose values cannot be grouped (lists in an object column).

        For a release that charges a first part (``bounds="auto"``) before it groups the
        rows: the refusal must come before any charge.
        """
        ...

    @property
    def row_labels(self) -> tuple[Hashable, ...] | None:
        """The index level names, if every row has its own index label (None: not, or unknown)."""
        ...

    @property
    def row_count(self) -> int | None:
        """The number of rows, when known without reading the data (None: unknown)."""
        ...

    def numeric_column(self, name: ColumnLabel, param: str) -> ColumnLabel:
        """Check that ``name`` is one numeric column (schema only); return it."""
        ...

    def rows(self, where: Where) -> Rows:
        """The rows selected by a validated ``where`` filter."""
        ...


FrameT = TypeVar("FrameT")

_REGISTRY_LOCK = threading.Lock()
# (frame type, build the backend for such a frame), newest first.
_REGISTRY: list[tuple[type, Callable[..., Backend]]] = []


def register_backend(frame_type: type[FrameT], factory: Callable[[FrameT], Backend]) -> None:
    """Register a backend: ``factory(frame)`` serves every instance of ``frame_type``."""
    with _REGISTRY_LOCK:
        _REGISTRY.insert(0, (frame_type, factory))


def backend_for(frame: object) -> Backend:
    """The backend of ``frame`` (a pandas DataFrame, or a Dask one with the dask extra)."""
    with _REGISTRY_LOCK:
        registered = list(_REGISTRY)
    for frame_type, factory in registered:
        if isinstance(frame, frame_type):
            return factory(frame)
    raise InvalidParameterTypeError(
        f"dpframe releases from pandas DataFrames (and Dask DataFrames with the dask extra), "
        f"got {type(frame).__name__}. Convert it first, e.g. pd.DataFrame(...)."
    )
