"""The ``.dp`` accessor on Dask DataFrames: the same privacy code, exact aggregates from Dask.

Importing this module registers ``.dp`` on ``dask.dataframe.DataFrame`` (``import
dpframe`` does it when the ``dask`` extra is installed). Nothing about privacy is
re-implemented here: :class:`DaskDPAccessor` *is* :class:`~dpframe.DPAccessor` (validate,
check the ledger, aggregate, add noise, charge, wrap) with two changes only:

* the rows are seen through :class:`DaskData` instead of ``_aggregate.PandasData``. It
  has the same methods; each runs the pandas backend on every partition, on the
  workers, and adds up the small per-partition arrays of exact aggregates in a tree.
  The client receives one exact table (a few kilobytes), and the unchanged accessor
  code adds the noise to it there, once, with the same mechanism as for pandas;
* the ledger is found in the metadata of the Dask expression (see below).

Validation looks only at Dask's metadata (``ddf._meta``, an empty pandas frame with
the real dtypes), so a refused call reads no data, draws no noise and charges nothing.
Group keys come from declared domains only: a Categorical dtype whose categories Dask
knows without reading the data (``ddf.astype({"c": pd.CategoricalDtype([...])})``), or
``domain=``. Dask Categoricals with unknown categories are refused.

How the ledger follows a Dask DataFrame (verified with dask 2026.8.0, pandas 3.1.1)
-----------------------------------------------------------------------------------
A Dask DataFrame is a tree of expressions, and every expression caches its ``_meta``,
an empty pandas frame. The ledger handle is stored in ``ddf._meta.attrs["dpframe"]``,
exactly as on a pandas frame, and pandas copies ``attrs`` (the handle returns itself
from ``deepcopy``) whenever Dask computes the metadata of a derived frame from its
parent's. Two Dask behaviours need more than that:

* a frame's metadata may have been computed before the budget was set, and Dask gives
  equal expressions one shared object (so ``ddf[ddf.Age >= 18]`` written again after
  ``set_budget`` is the old expression, with the old metadata). The ledger is
  therefore looked up in the ``_meta`` of *every* expression of the frame's tree: a
  frame spends the budget of any frame it was derived from, and two different ledgers
  in one tree are refused with :class:`~dpframe.errors.LedgerConflictError`;
* ``optimize()`` and ``persist()`` rewrite the tree (a column selection is pushed down
  into the parquet reader or ``from_pandas``) and rebuild metadata from the sources'.
  So whenever the ledger is looked up, it is also stamped on every expression's
  metadata that has none, including the parquet reader's base metadata and the copy
  of the pandas frame that ``dd.from_pandas`` wraps (the caller's frame is not touched).

Shared ledger (tested): filters (``ddf[ddf.Age >= 18]``, ``query``), column selection,
``assign``, ``astype``, ``rename``, ``drop``, ``fillna``, ``dropna``, ``reset_index``,
``set_index``, ``shuffle``, ``sample``, ``copy``, ``repartition``, ``map_partitions``
(with or without ``meta=``), ``optimize``, ``persist`` (also after a column selection
or a filter), frames derived *before* the budget was set, a second ``dd.read_parquet``
of the same files (or ``dd.from_pandas`` of equal data) while a frame of the first is
alive (Dask reuses the expression: equal inputs share one budget), ``dd.from_pandas``
of a budgeted pandas frame, and ``compute()`` of a ``dd.from_pandas`` frame (its
partitions carry the handle).

Refused with :class:`~dpframe.errors.LedgerConflictError` (tested): ``dd.concat`` and
``merge`` of frames with different ledgers (raised by pandas while Dask builds the
metadata), and a release from a frame holding columns (``assign``) or operands
(``a + b``) of a frame with another ledger, or with a ``where=`` filter built from one.

Not covered (Dask gives no hook):

* ``head()``, ``compute()``, ``to_delayed()`` and ``to_parquet`` of frames read from
  files hand over raw rows without the ledger: that is the data holder's own view,
  like ``to_numpy()`` in pandas, and ``.dp`` on such a pandas frame starts a new,
  unlimited ledger;
* ``persist()`` of a frame whose metadata had no ledger when it was persisted: one
  derived before the budget was set, or ``map_partitions(..., meta=...)`` with a
  ``meta`` built from scratch, neither touched by ``.dp`` since. The persisted frame
  keeps only that metadata, so its ``.dp`` starts a new ledger. Set the budget before
  deriving (or read ``.dp.ledger`` on the frame before persisting it);
* reading the same files again after every frame of the first read was garbage
  collected builds new metadata, hence a new ledger, as re-reading a file in pandas
  does.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import dask.dataframe as dd
import numpy as np
import pandas as pd
from dask.base import compute
from dask.delayed import delayed
from numpy.typing import NDArray

from dpframe import _aggregate, _ledger, _validation
from dpframe._accessor import DPAccessor
from dpframe.errors import (
    InvalidParameterError,
    InvalidParameterTypeError,
    LedgerConflictError,
    NoiseOverflowError,
)

__all__ = ["DaskDPAccessor", "DaskData", "dask_ledger"]

# Exact aggregates travel as int64; like the mechanisms, refuse magnitudes from 2**62 on
# so that adding partitions (and later noise) can never wrap around.
_INT_LIMIT = _validation.INT_LIMIT
# Partition results are added up in a tree of this fan-in (Dask's own default).
_FAN_IN = 8
_MASK_COLUMN = "__dpframe_where__"


# ---------------------------------------------------------------- the ledger


_Carrier = pd.DataFrame | pd.Series  # a pandas object whose ``attrs`` may hold a ledger handle


def _pandas_source(expr: Any) -> _Carrier | None:
    """The pandas frame a ``dd.from_pandas`` expression wraps (None for other expressions).

    Dask rebuilds the metadata of a column selection of such a frame from this source,
    not from the expression's metadata, so the source must carry the ledger too.
    """
    if not any(cls.__name__ == "FromPandas" for cls in type(expr).__mro__):
        return None
    wrapped = expr.operand("frame")
    source = getattr(wrapped, "_data", wrapped)  # Dask wraps it in a small holder
    return source if isinstance(source, pd.DataFrame | pd.Series) else None


def _carriers(frame: Any) -> list[_Carrier]:
    """Where a Dask frame's ledger may be held: its own metadata first, then the metadata
    of every other expression of its tree and the pandas frames it was built from."""
    found: dict[int, _Carrier] = {}
    for expr in frame.expr.walk():
        try:
            meta = expr._meta
        except NotImplementedError:  # e.g. the list of delayed objects under from_delayed
            meta = None
        for carrier in (meta, _pandas_source(expr)):
            if isinstance(carrier, pd.DataFrame | pd.Series):
                found.setdefault(id(carrier), carrier)
    return list(found.values())


def _ledgers(carriers: Sequence[_Carrier]) -> list[_ledger.Ledger]:
    """The distinct ledgers held by ``carriers``, in order."""
    found: list[_ledger.Ledger] = []
    for carrier in carriers:
        if _ledger.ATTRS_KEY not in carrier.attrs:
            continue
        ledger = _ledger.ledger_of(carrier, create=False)
        if ledger is not None and all(ledger is not seen for seen in found):
            found.append(ledger)
    return found


def _conflict(ledgers: Sequence[_ledger.Ledger], what: str) -> LedgerConflictError:
    ids = " and ".join(f"{ledger.id[:8]}…" for ledger in ledgers[:2])
    return LedgerConflictError(
        f"{what} comes from frames that spend different privacy budgets (ledgers {ids}), "
        f"for example a column assigned from, or an operation with, another budgeted "
        f"frame; one release cannot be charged to a single budget. Release from each frame "
        f"separately, or combine the raw data first and call .dp.set_budget once on the "
        f"combined frame."
    )


def dask_ledger(frame: Any) -> _ledger.Ledger:
    """The ledger of a Dask DataFrame: the one found in its expression tree, else a new one.

    The ledger is then stamped on every carrier of the tree that has none (the metadata
    of each expression, the pandas frames of ``dd.from_pandas``), so that frames Dask
    derives later, including the rewritten expressions of ``optimize()`` and
    ``persist()``, inherit it through pandas' ``attrs``.

    Raises
    ------
    LedgerConflictError
        When the tree holds two different ledgers.
    """
    carriers = _carriers(frame)
    found = _ledgers(carriers)
    if len(found) > 1:
        raise _conflict(found, "This Dask DataFrame")
    own = carriers[0]  # the frame's own metadata (walk yields the frame's expression first)
    ledger = found[0] if found else _ledger.ledger_of(own)
    if ledger is None:  # pragma: no cover - create=True always returns a ledger
        raise RuntimeError("internal error: no ledger")
    handle = own.attrs.get(_ledger.ATTRS_KEY)
    if handle is None:
        holder = next(c for c in carriers if _ledger.ledger_of(c, create=False) is ledger)
        handle = holder.attrs[_ledger.ATTRS_KEY]
    for carrier in carriers:
        if _ledger.ATTRS_KEY not in carrier.attrs:
            carrier.attrs[_ledger.ATTRS_KEY] = handle
    return ledger


# ---------------------------------------------------------------- what runs on each partition


@dataclass(frozen=True)
class _Filter:
    """A validated row filter: a boolean Dask Series co-partitioned with the frame."""

    series: Any


@dataclass(frozen=True)
class _Values:
    """A validated numeric column, read on the workers."""

    name: Any


@dataclass(frozen=True)
class _Query:
    """One exact aggregate, computed on each partition by ``_aggregate.PandasData``."""

    kind: str  # "rows", "counts", "total", "sums" or "log"
    groups: tuple[_aggregate.Group, ...] = ()
    values: Any = None
    grid: _aggregate.SumGrid | None = None
    mask: Any = None  # the name of the column holding the row filter


def _partition_aggregate(partition: pd.DataFrame, query: _Query) -> NDArray[np.int64]:
    """The exact aggregate of one partition, flat int64 (runs on a worker)."""
    data = _aggregate.PandasData(partition)
    where = None if query.mask is None else _validation.where_mask(partition, partition[query.mask])
    if query.kind == "rows":
        return np.array([data.row_count(where)], dtype=np.int64)
    if query.kind == "counts":
        return data.count_table(query.groups, where).reshape(-1)
    values = data.numeric(query.values, "column")
    if query.kind == "log":
        return data.log_histogram(values, where)
    if query.grid is None:  # pragma: no cover - built by DaskData with a grid
        raise RuntimeError("internal error: a sum without a grid")
    if query.kind == "total":
        return _checked(np.array([data.sum_total(values, query.grid, where)], dtype=object))
    return data.sum_table(values, query.grid, query.groups, where).reshape(-1)


def _checked(exact: NDArray[Any]) -> NDArray[np.int64]:
    """Exact integers (Python ints allowed) as int64, refusing magnitudes from 2**62 on."""
    if exact.size and int(np.max(np.abs(exact))) >= _INT_LIMIT:
        raise NoiseOverflowError(
            f"an exact aggregate reaches {int(np.max(np.abs(exact))):.3e} grid units, beyond "
            f"the +-2**62 that dpframe releases. Narrow bounds=(lo, hi), or release smaller "
            f"groups (by=, where=)."
        )
    return exact.astype(np.int64)


def _sum_arrays(*parts: NDArray[np.int64]) -> NDArray[np.int64]:
    """Cell-wise exact sum of partition results (runs on a worker).

    Every input is below 2**62 in magnitude; when two of them could wrap int64 the
    addition is redone with Python integers, and results from 2**62 on are refused.
    """
    total = parts[0]
    for part in parts[1:]:
        largest = max(_max_abs(total), _max_abs(part))
        if largest < 2**61:
            total = total + part  # both below 2**61: the int64 sum cannot wrap
        else:
            total = _checked(total.astype(object) + part.astype(object))
    return total


def _max_abs(values: NDArray[np.int64]) -> int:
    return int(np.max(np.abs(values))) if values.size else 0


# ---------------------------------------------------------------- the backend


class DaskData:
    """Exact aggregates of a Dask DataFrame: the same methods as ``_aggregate.PandasData``.

    ``column``, ``where`` and ``numeric`` validate against Dask's metadata only (no data
    is read); the aggregates (``row_count``, ``count_table``, ``sum_total``,
    ``sum_table``, ``log_histogram``) run ``PandasData`` on every partition, on the
    workers, add the per-partition int64 arrays exactly in a tree, and return the same
    types as ``PandasData`` (an int, or a numpy int64 array of the same shape).

    ``where`` and ``numeric`` return opaque handles (a lazy filter, a column name) that
    only the aggregate methods of the same object read.

    Parameters
    ----------
    frame : dask.dataframe.DataFrame
        The frame whose rows are aggregated.
    """

    def __init__(self, frame: Any) -> None:
        self.frame = frame

    @property
    def meta(self) -> pd.DataFrame:
        """Dask's metadata of the frame: an empty pandas frame with the real dtypes."""
        meta: pd.DataFrame = self.frame._meta
        return meta

    # ------------------------------------------------------------ validation (metadata only)

    def column(self, name: Any, param: str) -> Any:
        """The column ``name`` of the metadata (validated: it exists, once), with Dask's dtype.

        The dtype is what declares a domain: a Categorical with known categories, or
        bool. Dask's marker of unknown categories is refused by
        ``_validation.declared_domain``.
        """
        return _validation.column(self.meta, name, param)

    def where(self, where: Any) -> _Filter | None:
        """The validated row filter: None, or a lazy boolean Series of the frame's rows.

        Accepted: a pandas expression string (evaluated by Dask on each partition,
        checked on the metadata first), or a boolean Dask Series built from this frame
        (same partitions, e.g. ``ddf["Age"] >= 18``). In-memory arrays and pandas Series
        are refused: their rows cannot be matched to the partitions without reading the
        data.
        """
        if where is None:
            return None
        if isinstance(where, str):
            _validation.where_mask(self.meta, where)  # syntax, columns and boolean result
            return _Filter(self.frame.eval(where))
        if not isinstance(where, dd.Series):
            raise InvalidParameterTypeError(
                f'where on a Dask DataFrame must be an expression string (where="Age >= 18") '
                f'or a boolean Dask Series built from the same frame (where=ddf["Age"] >= 18); '
                f"got {type(where).__name__}."
            )
        dtype = where._meta.dtype
        if not (dtype == np.bool_ or str(dtype) in ("boolean", "bool[pyarrow]")):
            raise InvalidParameterTypeError(f"where must be boolean, got dtype {dtype}.")
        if where.npartitions != self.frame.npartitions or tuple(where.divisions) != tuple(
            self.frame.divisions
        ):
            raise InvalidParameterError(
                "where is a Dask Series partitioned differently from the frame; build it from "
                "the same frame, e.g. where=ddf['Age'] >= 18, or pass an expression string."
            )
        own = _ledgers(_carriers(self.frame))
        other = _ledgers(_carriers(where))
        foreign = [ledger for ledger in other if all(ledger is not mine for mine in own)]
        if foreign:
            raise _conflict([*own, *foreign] if own else foreign * 2, "where=")
        return _Filter(where)

    def numeric(self, name: Any, param: str) -> _Values:
        """A numeric column (validated on the metadata); its values are read on the workers."""
        _validation.numeric_values(self.column(name, param), name)
        return _Values(name)

    # ------------------------------------------------------------ exact aggregates

    def row_count(self, where: _Filter | None) -> int:
        return int(self._aggregate(_Query("rows"), [], where)[0])

    def count_table(
        self, groups: Sequence[_aggregate.Group], where: _Filter | None
    ) -> NDArray[np.int64]:
        query = _Query("counts", groups=tuple(groups))
        flat = self._aggregate(query, [g.name for g in groups], where)
        return flat.reshape([len(g.domain) for g in groups])

    def sum_total(self, values: _Values, grid: _aggregate.SumGrid, where: _Filter | None) -> int:
        query = _Query("total", values=values.name, grid=grid)
        return int(self._aggregate(query, [values.name], where)[0])

    def sum_table(
        self,
        values: _Values,
        grid: _aggregate.SumGrid,
        groups: Sequence[_aggregate.Group],
        where: _Filter | None,
    ) -> NDArray[np.int64]:
        query = _Query("sums", groups=tuple(groups), values=values.name, grid=grid)
        flat = self._aggregate(query, [values.name, *[g.name for g in groups]], where)
        return flat.reshape([len(g.domain) for g in groups])

    def log_histogram(self, values: _Values, where: _Filter | None) -> NDArray[np.int64]:
        query = _Query("log", values=values.name)
        return self._aggregate(query, [values.name], where)

    def _aggregate(
        self, query: _Query, columns: Sequence[Any], where: _Filter | None
    ) -> NDArray[np.int64]:
        """Run ``query`` on every partition and add the results exactly, in one Dask compute.

        Only the needed columns are selected, so Dask reads no others (column pruning
        reaches the parquet reader). The query travels to the workers once, as one graph
        key shared by every partition task.
        """
        frame = self.frame
        needed = list(dict.fromkeys(columns))
        if where is not None:
            mask = _MASK_COLUMN
            while mask in frame.columns:
                mask += "_"
            frame = frame.assign(**{mask: where.series})
            needed.append(mask)
            query = _Query(query.kind, query.groups, query.values, query.grid, mask)
        # Readable task names (dpframe-aggregate, dpframe-sum), unique to this call.
        token = uuid.uuid4().hex
        shared_query = delayed(query, name=f"dpframe-query-{token}")
        chunk, combine = delayed(_partition_aggregate), delayed(_sum_arrays)
        parts = [
            chunk(part, shared_query, dask_key_name=(f"dpframe-aggregate-{token}", i))
            for i, part in enumerate(frame[needed].to_delayed())
        ]
        level = 0
        while len(parts) > 1:
            level += 1
            parts = [
                combine(*parts[i : i + _FAN_IN], dask_key_name=(f"dpframe-sum-{token}", level, i))
                for i in range(0, len(parts), _FAN_IN)
            ]
        (total,) = compute(parts[0])  # type: ignore[no-untyped-call]  # dask: unannotated
        return cast(NDArray[np.int64], total)


# ---------------------------------------------------------------- the accessor


class DaskDPAccessor(DPAccessor):
    """``ddf.dp``: the pandas accessor's methods, on a Dask DataFrame.

    ``count``, ``crosstab``, ``sum`` (``bounds=(lo, hi)`` or ``"auto"``),
    ``threshold_decision``, ``set_budget`` and ``ledger`` are those of
    :class:`~dpframe.DPAccessor`, with the same arguments, results and ledger rules;
    ``where=`` takes an expression string or a boolean Dask Series built from the frame.

    Notes
    -----
    The privacy guarantee is the pandas accessor's, method by method: neighbouring data
    sets differ by one row, added or removed, wherever the row sits among the
    partitions. The workers compute exact aggregates only (counts, and clamped sums on
    the fixed-point grid, added as integers, so partitioning and summation order cannot
    change a sensitivity); the noise is drawn on the client, by the same mechanism
    code, once per release, from the default cryptographic source. Validation reads
    only Dask's metadata: a refused call computes nothing, draws nothing and charges
    nothing. Group keys come from declared domains (Categorical dtypes with known
    categories, or ``domain=``), never from the data.

    References
    ----------
    Seed ``003_ce3353c9005cacf5.txt`` (census workflow); Casacuberta et al.,
    "Widespread underestimation of sensitivity in differentially private libraries",
    CCS 2022 (exact sums).

    Examples
    --------
    >>> import dask.dataframe as dd
    >>> import dpframe  # with the dask extra, registers .dp on Dask DataFrames
    >>> from dpframe.datasets import census
    >>> ddf = dd.from_pandas(census(1000, seed=0), npartitions=4)
    >>> ddf.dp.set_budget(epsilon=1.0)
    >>> ddf.dp.crosstab("Occupation", "Sex", epsilon=0.5).shape
    (5, 2)
    >>> float(ddf.dp.ledger.remaining.epsilon)
    0.5
    """

    def __init__(self, frame: Any) -> None:
        if not isinstance(frame, dd.DataFrame):
            raise InvalidParameterTypeError(
                f"DaskDPAccessor needs a dask.dataframe.DataFrame, got {type(frame).__name__}; "
                f"for a pandas DataFrame use df.dp."
            )
        # Typed as a pandas frame by the base class; only `ledger` (overridden) reads it.
        self._frame = cast(Any, frame)
        self._data = DaskData(frame)

    @property
    def ledger(self) -> _ledger.Ledger:
        """The ledger of this frame's data: total, spent, remaining and the history of releases.

        Found in the metadata of the frame or of any frame it was derived from (see the
        module documentation for what Dask keeps); a frame without one gets a new,
        unlimited ledger.
        """
        return dask_ledger(self._frame)


dd.extensions.register_dataframe_accessor("dp")(  # type: ignore[no-untyped-call]  # dask: unannotated
    DaskDPAccessor
)
