"""The Dask backend: exact aggregates computed by Dask's workers, the same privacy code.

Importing this module registers the backend and the ``.dp`` accessor on
``dask.dataframe.DataFrame``; ``import dpframe`` arranges for that to happen as soon as
``dask.dataframe`` is imported, and never imports Dask itself. Nothing about privacy is
re-implemented here: ``ddf.dp`` is :class:`~dpframe.DPAccessor` (validate, check the
ledger, aggregate, add noise, charge, wrap), and this backend only

* computes the exact aggregates: :class:`DaskRows` runs the pandas backend on every
  partition, on the workers, and adds up the small per-partition arrays of exact
  aggregates in a tree. The client receives one exact table (a few kilobytes), and the
  accessor adds the noise to it there, once, with the same mechanism as for pandas;
* finds the ledger in the metadata of the Dask expression (see below).

Validation looks only at Dask's metadata (``ddf._meta``, an empty pandas frame with
the real dtypes), so a refused call reads no data, draws no noise and charges nothing.
Group keys come from declared domains only: a Categorical dtype whose categories Dask
knows without reading the data (``ddf.astype({"c": pd.CategoricalDtype([...])})``), or
``domain=``. Dask Categoricals with unknown categories are refused unless ``domain=``
declares their keys.

How the ledger follows a Dask DataFrame (verified with dask 2026.8.0, pandas 3.1.1)
-----------------------------------------------------------------------------------
A Dask DataFrame is a tree of expressions, and every expression caches its ``_meta``,
an empty pandas frame. The ledger handle is stored in ``ddf._meta.attrs["dpframe"]``,
exactly as on a pandas frame, and pandas copies ``attrs`` (the handle returns itself
from ``deepcopy``) whenever Dask computes the metadata of a derived frame from its
parent's. Dask needs more than that:

* a frame's metadata may have been computed before the budget was set, and Dask gives
  equal expressions one shared object (so ``ddf[ddf.Age >= 18]`` written again after
  ``set_budget`` is the old expression, with the old metadata). The ledger is
  therefore looked up in the ``_meta`` of *every* expression of the frame's tree: a
  frame spends the budget of any frame it was derived from, and two different budgets
  in one tree are refused with :class:`~dpframe.errors.LedgerConflictError`;
* pandas keeps ``attrs`` through ``concat`` and ``merge`` only when every input has
  them, so the metadata of a combination with a frame that has no ledger (a lookup
  table) has none: the lookup through the tree finds the budgeted input's;
* ``optimize()`` and ``persist()`` rewrite the tree (a column selection is pushed down
  into the parquet reader or ``from_pandas``) and rebuild metadata from the sources'.
  So whenever the ledger is looked up, it is also stamped on the metadata of every
  expression derived from the budgeted data that has none, including the parquet
  reader's base metadata and the copy of the pandas frame that ``dd.from_pandas``
  wraps (the caller's frame is not touched). It is *not* stamped on the other inputs
  of a concat or merge: a lookup table stamped with one budget could not be merged
  with a frame of another budget afterwards. A budget set on a frame that had none is
  stamped on what the frame was derived from, up to the inputs of a concat or merge;
* a ledger with no budget (made when ``.dp`` was used on a frame that had none) has
  charged nothing, so next to a budgeted ledger in the same tree it is ignored:
  reading ``u.dp.ledger`` does not break ``dd.concat([a, u])``;
* Dask names ``dd.from_pandas(frame)`` (also of a Series, with ``sort=False`` or
  ``chunksize=``, and the pandas frames Dask wraps itself: ``from_dict``, the pandas
  side of a merge) by a token of the content, and equal names are one expression,
  with the metadata of the first one built. So this module extends Dask's token of a
  pandas DataFrame or Series that carries a ledger with the ledger's id
  (:class:`_LedgerToken`, registered on ``dask.base.normalize_token``): equal data
  with another ledger, or with none, is another expression, and
  ``dd.from_pandas(frame)`` always carries ``frame``'s own ledger. Data without a
  ledger keeps Dask's token, and equal data with the same ledger one expression.

One person, one row: through a ``dd.concat``, ``merge`` or ``join`` of two frames
derived from the same budgeted data (``dd.concat([a, a[a.Age > 60]])``, a frame merged
with its own aggregates), a person's row can appear several times and a count would
move by more than one. The tree shows it, and without a privacy unit such frames are
refused. With a privacy unit, every release bounds each unit's rows (``max_rows=``,
``max_groups=``), so repeated rows are allowed, as in pandas: a concat, and a merge
that pairs rows on equal values of all the unit's columns (``on=["nr", ...]``, or
``left_on`` equal to ``right_on``: Dask cannot tell them apart). A merge of the data
with itself on other keys, on the index (``join``), on differently named columns or
with ``merge_asof`` can put another unit's values in a unit's rows, which no bound on
that unit limits: it is refused, as ``df.dp.merge`` refuses it on pandas frames.

Dask's expression optimizer drops the inputs of a ``dd.concat`` that hold none of the
selected columns, with their rows, and raises ``IndexError`` when none is left
(dask/dask#12147): :class:`DaskRows` computes a tree holding a concat without it (every
column of the inputs is read), so its aggregates are exact.

Shared ledger (tested): filters (``ddf[ddf.Age >= 18]``, ``query``), column selection,
``assign``, ``astype``, ``rename``, ``drop``, ``fillna``, ``dropna``, ``reset_index``,
``set_index``, ``shuffle``, ``sample``, ``copy``, ``repartition``, ``map_partitions``
(with or without ``meta=``), ``optimize``, ``persist`` (also after a column selection
or a filter), frames derived *before* the budget was set, a second ``dd.read_parquet``
of the same files (or ``dd.from_pandas`` of equal data with the same ledger, or of
equal data without one) while a frame of the first is alive (Dask reuses the
expression: equal inputs share one budget), ``dd.from_pandas`` of a budgeted pandas
frame (also when equal data without a budget, or with another, was seen first: each
keeps its own ledger), ``compute()`` of a ``dd.from_pandas`` frame (its
partitions carry the handle), a parquet round trip of a ``dd.from_pandas`` frame
(each file stores its partition's handle; ``read_parquet`` reconnects to the live
ledger); and the combinations of a budgeted frame with inputs that carry no ledger:
``dd.concat`` with an unbudgeted frame (either order), ``merge`` with a pandas lookup
table (either side) or a Dask one, and ``repartition``, ``set_index``, ``map_partitions`` and
a parquet round trip of such a concat (the round trip when its first file holds
budgeted rows). The other inputs stay unbudgeted, and one lookup table serves frames
with different budgets.

Refused (tested): with :class:`~dpframe.errors.LedgerConflictError`, ``dd.concat``
and ``merge`` of frames with different ledgers (raised by pandas while Dask builds the
metadata), and a release from a frame holding columns (``assign``) or operands
(``a + b``) of a frame with another budget, or with a ``where=`` filter built from
one; with :class:`~dpframe.errors.PrivacyUnitError`, a release from a frame that
can repeat a person's row, or with a privacy unit pair rows of two units (above);
with :class:`~dpframe.errors.BudgetNotSetError`, a release from frames none of whose
inputs has a budget.

Not covered (Dask gives no hook):

* ``head()``, ``compute()``, ``to_delayed()`` and ``to_parquet`` of frames read from
  files hand over raw rows without the ledger: that is the data holder's own view,
  like ``to_numpy()`` in pandas. Read back, such files have no budget, so releases
  from them are refused with ``BudgetNotSetError`` until a budget is set: set what
  remains of the original one (``ddf.dp.ledger.remaining``), not a new one;
* ``persist()`` of a frame whose metadata had no ledger when it was persisted: one
  derived before the budget was set, or ``map_partitions(..., meta=...)`` with a
  ``meta`` built from scratch, neither touched by ``.dp`` since, and any concat or
  merge with an input that carries no ledger (pandas dropped it from the metadata,
  and persist keeps nothing else). Releases from it are refused with
  ``BudgetNotSetError``. Persist the inputs and combine them afterwards
  (``dd.concat([a.persist(), u.persist()])``), or set the budget before deriving;
* likewise, ``to_parquet`` of such a combination: ``read_parquet`` takes the metadata
  of the first file, which has no ledger when it holds the unbudgeted input's rows;
* once persisted or written to files, a frame that repeats a person's row no longer
  shows it: release from the combination before persisting it (a ``merge`` whose keys
  repeat in a lookup table is refused while the merge is in the tree: the lookup table,
  public, is read to tell);
* reading the same files again after every frame of the first read was garbage
  collected builds new metadata, hence a new ledger, as re-reading a file in pandas
  does;
* a budget set on a Dask frame built from data without one (``dd.from_pandas(raw)``,
  then ``.dp.set_budget``) is stamped on an expression named by the content alone, so
  while that frame lives, ``dd.from_pandas`` of equal data without a budget is the
  same expression and spends the same budget (one budget for the same people: never
  more privacy than charged, but ``set_budget`` on either lowers both). Set the budget
  on the pandas frame before ``dd.from_pandas`` to give equal data separate budgets.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import dask.dataframe as dd
import numpy as np
import pandas as pd
from dask.base import compute, normalize_token
from dask.dataframe.dask_expr import new_collection  # type: ignore[attr-defined]  # dask: re-exported, not in __all__
from dask.dataframe.utils import pyarrow_strings_enabled
from dask.delayed import delayed
from numpy.typing import NDArray

from dpframe import _attrs, _persistence, _validation
from dpframe._accessor import DPAccessor
from dpframe._backends import Group, SumGrid, register_backend
from dpframe._backends.bounding import ContributionBounds
from dpframe._backends.pandas_backend import PandasRows, observed_domain, refuse_repeated_rows
from dpframe._ledger import Ledger
from dpframe._typing import ColumnLabel, Domain, Where
from dpframe.errors import (
    DomainError,
    DPFrameError,
    InvalidParameterError,
    InvalidParameterTypeError,
    LedgerConflictError,
    PrivacyUnitError,
)

__all__ = ["DaskBackend", "DaskRows", "dask_ledger"]

# Partition results are added up in a tree of this fan-in (Dask's own default).
_FAN_IN = 8
_MASK_COLUMN = "__dpframe_where__"
# Dask's marker for categories it does not know without reading the data.
_UNKNOWN_CATEGORIES = "__UNKNOWN_CATEGORIES__"


# ---------------------------------------------------------------- the ledger


_Carrier = pd.DataFrame | pd.Series  # a pandas object whose ``attrs`` may hold a ledger handle


def _ledger_id(carrier: _Carrier) -> str | None:
    """The id of the ledger ``carrier.attrs`` holds (a handle or a saved record), else None.

    Never raises: it runs inside Dask's tokenization, where a malformed record is left
    for :func:`dpframe._attrs.ledger_of` to refuse when the frame is released from.
    """
    value = carrier.attrs.get(_attrs.ATTRS_KEY)
    if isinstance(value, _attrs._LedgerHandle):
        return value.ledger.id
    return _persistence.record_id(value)


@dataclass(frozen=True)
class _LedgerToken:
    """Dask's token of a pandas DataFrame or Series, extended with the id of its ledger.

    Dask names ``dd.from_pandas(frame)`` (and ``from_dict``, the pandas side of a merge,
    ``assign`` of a pandas Series...) by a token of the frame's content, and gives equal
    names one shared expression, with the metadata of the first one built. Without the
    ledger in the token, ``dd.from_pandas(budgeted)`` after ``dd.from_pandas(equal data
    without a budget)`` was the earlier expression: the budget was lost, and a budget
    set on it next was found by every later frame of equal data. With it, equal data
    with different ledgers (or none) gives different expressions; equal data with the
    same ledger still shares one. Data without a ledger keeps Dask's own token.
    """

    content_token: Callable[[Any], Any]  # the function Dask registered for this type

    def __call__(self, obj: _Carrier) -> Any:
        content = self.content_token(obj)
        ledger_id = _ledger_id(obj)
        if ledger_id is None:
            return content
        _note_split_units(obj)
        return [content, "dpframe-ledger", ledger_id]


# Ids equal in pandas keep equal texts when Dask turns an object column into strings
# only if every id is of one of these kinds (pandas.api.types.infer_dtype): 7 and 7.0
# become "7" and "7.0", 1 and True "1" and "True", 0.0 and -0.0 "0.0" and "-0.0".
_TEXT_SAFE_KINDS = frozenset({"string", "integer", "boolean", "bytes", "empty"})
# Ledgers whose unit column dd.from_pandas turned into strings that split equal ids: the
# ledger's id, and the column and kind of its ids. Noted when Dask tokenizes the pandas
# frame (dd.from_pandas does at once), so the refusal holds after persist() too.
_SPLIT_UNITS: dict[str, tuple[ColumnLabel, str]] = {}


def _split_unit(source: _Carrier, unit: Sequence[ColumnLabel]) -> tuple[ColumnLabel, str] | None:
    """A column of ``source`` whose ids Dask's string conversion would split, and the
    kind of its ids; None when every column that may hold the unit converts safely.

    Those are the unit's columns when ``source`` has them all; else (the unit's ids were
    renamed or copied after ``dd.from_pandas``) every column of Python objects."""
    frame = source.to_frame() if isinstance(source, pd.Series) else source
    has_unit = all(name in frame.columns for name in unit)
    for position, label in enumerate(frame.columns):
        may_hold_unit = label in unit or not has_unit
        if may_hold_unit and pd.api.types.is_object_dtype(frame.dtypes.iloc[position]):
            kind = pd.api.types.infer_dtype(frame.iloc[:, position], skipna=True)
            if kind not in _TEXT_SAFE_KINDS:
                return label, kind
    return None


def _note_split_units(carrier: _Carrier) -> None:
    """Note a ledger whose unit ids ``dd.from_pandas(carrier)`` would split (never raises:
    it runs inside Dask's tokenization; the release refuses, see DaskBackend.check_unit)."""
    handle = carrier.attrs.get(_attrs.ATTRS_KEY)
    if not isinstance(handle, _attrs._LedgerHandle) or not pyarrow_strings_enabled():
        return
    unit = handle.ledger.privacy_unit
    split = None if unit is None else _split_unit(carrier, unit)
    if split is not None:
        _SPLIT_UNITS[handle.ledger.id] = split


def _register_tokenization() -> None:
    """Make Dask's tokens of pandas frames and Series name their ledger (once)."""
    for kind in (pd.DataFrame, pd.Series):
        # dispatch also runs Dask's lazy registration of its pandas tokens.
        current = normalize_token.dispatch(kind)  # type: ignore[no-untyped-call]  # dask: unannotated
        if not isinstance(current, _LedgerToken):
            normalize_token.register(kind, _LedgerToken(current))  # type: ignore[no-untyped-call]  # dask: unannotated


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


def _expression_meta(expr: Any) -> _Carrier | None:
    """An expression's metadata, or None when it has none (a delayed object's list...)."""
    try:
        meta = getattr(expr, "_meta", None)
    except NotImplementedError:  # e.g. the list of delayed objects under from_delayed
        return None
    return meta if isinstance(meta, pd.DataFrame | pd.Series) else None


def _combination(expr: Any) -> str | None:
    """How an expression combines frames: ``"concat"`` (``dd.concat`` of rows),
    ``"merge"`` (``merge``, ``join``), ``"columns"`` (``dd.concat(axis=1)``), ``"repeat"``
    (one frame's rows repeated: ``explode``, ``melt``, ``sample(replace=True)``, ``loc`` or
    ``partitions`` lists naming one twice), ``"selection"`` (rows kept by their rank
    among the others: ``nlargest``, ``nsmallest``, ``head``, ``tail``, ``partitions[...]``
    of some partitions), or None."""
    classes = {cls.__name__ for cls in type(expr).__mro__}
    if classes & {"Merge", "JoinRecursive"}:
        return "merge"
    if classes & {"ExplodeFrame", "ExplodeSeries"}:
        return "repeat"
    if "Sample" in classes and expr.operand("replace"):
        return "repeat"
    melts = "func" in expr._parameters and getattr(expr.operand("func"), "method", None) == "melt"
    if "MapPartitions" in classes and melts:
        return "repeat"  # ddf.melt: a row per melted column
    if classes & {"NLargest", "Head", "Tail"}:  # NSmallest is an NLargest
        return "selection"
    # A row computed from the rows before or after it (shift, diff, cumsum, rolling,
    # map_overlap), or from its group's rows (groupby().shift/transform/cumsum): it
    # carries other rows' values, another person's unless the group is the unit.
    if classes & (_NEIGHBOURS | _LOWERED_NEIGHBOURS):
        return "neighbours"
    if classes & _GROUP_NEIGHBOURS:
        return "group neighbours"
    # After optimize(): nlargest and drop_duplicates become tree reductions of the rows,
    # and partitions[...] a selection baked into the reader.
    if classes & _LOWERED_SELECTIONS and _reduced_by(expr) in _SELECTING_REDUCTIONS:
        return "selection"
    if "_partitions" in expr._parameters and expr.operand("_partitions") is not None:
        return "repeat" if _repeats(expr.operand("_partitions")) else "selection"
    if "DropDuplicates" in classes and expr.operand("subset") is not None:
        return "dedupe"  # a selection unless the rows compared are one unit's
    # ddf.loc[[i, i]] and ddf.partitions[[0, 0]] give a row once per repeat of its label
    # or partition in the list.
    if "LocList" in classes and _repeats(expr.operand("iindexer")):
        return "repeat"
    if "Partitions" in classes:
        # partitions[...] / get_partition keep rows by their position among the others
        # (partition boundaries come from the data: from_pandas splits the sorted index,
        # sort_values().partitions splits the values), unless every partition is kept.
        chosen = expr.operand("partitions")
        if _repeats(chosen):
            return "repeat"
        return None if _every_partition(chosen, expr.frame.npartitions) else "selection"
    if "ConcatUnindexed" in classes:  # what concat(axis=1) is lowered to
        return "columns"
    if "Concat" in classes:
        return "concat" if expr.operand("axis") in (0, "index") else "columns"
    return None


_NEIGHBOURS = {"Shift", "Diff", "CumulativeAggregations", "RollingReduction", "MapOverlap"}
# What optimize() lowers them to (Dask 2026.8): cumulative blocks and their carries, and
# partitions that overlap their neighbours' rows (shift, diff, rolling).
_LOWERED_NEIGHBOURS = {
    "CumulativeBlockwise",
    "CumulativeFinalize",
    "TakeLast",
    "CreateOverlappingPartitions",
}
_LOWERED_SELECTIONS = {"TreeReduce", "Aggregate"}
# The reductions whose lowered form keeps some rows (a sum or a mean lowers to the same
# classes, and gives a value, not rows).
_SELECTING_REDUCTIONS = {"NLargest", "NSmallest", "DropDuplicates", "Head", "Tail"}


def _reduced_by(expr: Any) -> str:
    """The reduction a lowered TreeReduce, Chunk or Aggregate computes (its ``kind``); ""
    when it has none."""
    kind = expr.operand("kind") if "kind" in expr._parameters else None
    return str(getattr(kind, "__name__", ""))


# groupby shift, transform, apply and cumulative aggregations, and what optimize() lowers
# them to.
_GROUP_NEIGHBOURS = {
    "GroupByApply",
    "GroupByCumulative",
    "GroupByUDFBlockwise",
    "GroupByCumulativeFinalizer",
}


def _every_partition(selection: object, count: int) -> bool:
    """Whether a partitions selection keeps every one of ``count`` partitions (once)."""
    every = list(range(count))
    try:
        chosen = every[selection] if isinstance(selection, slice) else list(selection)  # type: ignore[call-overload]
        return sorted(chosen) == every
    except (TypeError, ValueError):
        return False


def _repeats(selection: object) -> bool:
    """Whether a list of labels or partitions names one twice (True when unsure)."""
    if isinstance(selection, int | slice | str):
        return False
    try:
        index = pd.Index(list(selection))  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return True
    return index.dtype != bool and bool(index.has_duplicates)  # a boolean mask repeats nothing


def _keeps_other_rows(expr: Any) -> tuple[bool, ...]:
    """Whether a merge or join keeps each input's unmatched rows (in the order of its
    inputs); empty for any other expression. ``merge_asof`` keeps every left row (a left
    join); a join of several frames keeps the first frame's rows (``how="left"``), or
    every frame's (another ``how``, at worst)."""
    classes = {cls.__name__ for cls in type(expr).__mro__}
    if "JoinRecursive" in classes:
        others = len(_inputs(expr)) - 1
        every = expr.operand("how") not in ("left", "inner")
        return (expr.operand("how") != "inner", *([every] * others))
    if "MergeAsof" in classes:
        return (True, False)
    if "Merge" not in classes:
        return ()
    how = expr.operand("how")
    return (how in ("left", "outer"), how in ("right", "outer"))


def _as_list(names: object) -> list[Any]:
    return list(names) if isinstance(names, list | tuple) else [names]


def _merge_keys(expr: Any) -> tuple[Any, ...] | None:
    """The columns a merge pairs rows on, when it pairs them on equal values of columns
    with the same names on both sides (``on=``, or ``left_on`` equal to ``right_on``);
    None for any other expression or merge (on the index, on differently named columns,
    ``merge_asof``, a ``join`` of several frames).

    Dask turns ``on=`` into ``left_on=right_on=``, so the two cannot be told apart.
    """
    classes = {cls.__name__ for cls in type(expr).__mro__}
    if "DropDuplicates" in classes:  # the columns it compares
        subset = expr.operand("subset")
        return None if subset is None else tuple(_as_list(subset))
    if classes & _GROUP_NEIGHBOURS:  # the columns it groups on
        by = getattr(expr, "by", None)
        if not isinstance(by, list | tuple) or any(
            type(key).__module__.startswith("dask") for key in by
        ):
            return None  # grouped on a Series or an expression: not on columns
        if "GroupByCumulativeFinalizer" in classes:  # optimize() renames them _by_<name>
            return tuple(
                key[4:] if isinstance(key, str) and key.startswith("_by_") else key for key in by
            )
        return tuple(by)
    if "Merge" not in classes or "MergeAsof" in classes:
        return None
    if expr.operand("left_index") or expr.operand("right_index"):
        return None
    left, right = expr.operand("left_on"), expr.operand("right_on")
    if left is None or right is None:
        return None
    keys = [left] if not isinstance(left, list | tuple) else list(left)
    other = [right] if not isinstance(right, list | tuple) else list(right)
    return tuple(keys) if keys == other else None


# How a merge's input is matched (_side_keys): on these columns, on its index, or on
# something else (keys given as arrays or Series, a level of the index...).
_INDEX, _UNKNOWN = "index", "unknown"
_SideKeys = tuple[Any, ...] | str


def _side_keys(expr: Any) -> tuple[_SideKeys, ...]:
    """For a merge or join, the keys each input (in the order of its dependencies) pairs
    rows on: a tuple of column names, ``_INDEX`` or ``_UNKNOWN``. Empty for any other
    expression, and for ``merge_asof``, which pairs a row with one row at most."""
    classes = {cls.__name__ for cls in type(expr).__mro__}
    if "JoinRecursive" in classes:  # ddf.join([a, b]): on the index
        return tuple(_INDEX for _ in _inputs(expr))
    if "Merge" not in classes or "MergeAsof" in classes:
        return ()
    sides: list[_SideKeys] = []
    for side in ("left", "right"):
        if expr.operand(f"{side}_index"):
            sides.append(_INDEX)
            continue
        keys = expr.operand(f"{side}_on")
        names = _as_list(keys) if keys is not None else []
        simple = names and all(isinstance(name, str | int | float | tuple) for name in names)
        sides.append(tuple(names) if simple else _UNKNOWN)
    return tuple(sides)


def _keys_repeat(expr: Any, keys: _SideKeys) -> bool:
    """Whether ``keys`` match two rows or more of the frame ``expr`` computes: a public
    input (a lookup table, a frame with no budget), whose data may be read. Missing keys
    count as one key, as pandas matches them with each other. True when unsure (keys
    that are not columns of the input). Read at every release, not cached: a pandas
    lookup changed in place after ``dd.from_pandas`` keeps its expression's name."""
    frame = new_collection(expr)
    if keys == _UNKNOWN or not isinstance(frame, dd.DataFrame):
        repeats = True
    elif keys == _INDEX:
        counts = frame.index.to_series().value_counts(dropna=False)
        repeats = bool(counts.max().compute() > 1) if frame.npartitions else False
    elif not set(keys) <= set(frame.columns):
        repeats = True
    else:
        sizes = frame.groupby(list(keys), dropna=False).size()
        repeats = bool(sizes.max().compute() > 1)
    return repeats


@dataclass(frozen=True)
class _Node:
    """One expression of a Dask frame's tree, as the ledger lookup sees it."""

    carriers: tuple[_Carrier, ...]  # its metadata, and the pandas frame of dd.from_pandas
    dependencies: tuple[str, ...]  # the names of its inputs (an input given twice counts twice)
    combination: str | None  # see _combination
    merge_keys: tuple[Any, ...] | None = None  # see _merge_keys (or drop_duplicates' subset)
    keeps_unmatched: tuple[bool, ...] = ()  # see _keeps_other_rows
    source: _Carrier | None = None  # the pandas frame (or Series) of dd.from_pandas
    inputs: tuple[Any, ...] = ()  # the input expressions, in the order of dependencies
    side_keys: tuple[_SideKeys, ...] = ()  # see _side_keys
    keeps_labels: bool = False  # see _keeps_labels
    fused_root: str | None = None  # a Fused block's output expression (its labels)
    has_rows: bool = True  # a frame or Series of rows, not a reduction (see _has_rows)
    moves_rows: bool = False  # see _moves_rows
    unique_labels: bool = False  # dd.from_pandas of a frame with a RangeIndex


# Row-wise expressions that change index labels (ddf.index = ..., reset_index, a mapped
# index), and row movers that keep them (a sort or shuffle moves rows with their labels).
_RELABELS = {"ResetIndex", "AssignIndex", "FunctionMapIndex", "PropertyMapIndex"}
_MOVES_ROWS = {
    "Filter",
    "Projection",
    "SortValues",
    "SortIndex",
    "RearrangeByColumn",
    "AssignPartitioningIndex",  # a shuffle's partition column (after optimize())
}


def _keeps_labels(expr: Any) -> bool:
    """Whether each row of ``expr`` has the index label its row had in the first input:
    row-wise expressions (Dask's ``Elemwise``: arithmetic, ``assign``, ``astype``...),
    filters, projections, sorts, shuffles, repartitions, shifts and groupby transforms
    (these last two are refused for their values, not their labels), but not
    ``set_index``, ``reset_index``, a renamed index, ``map_partitions`` (any function),
    merges, concats, nor anything unknown."""
    classes = {cls.__name__ for cls in type(expr).__mro__}
    if classes & _RELABELS:
        return False
    if "RenameSeries" in classes:  # a new name keeps the labels; a mapper changes them
        index = expr.operand("index")
        return not (callable(index) or isinstance(index, dict | pd.Series | pd.Index))
    # Values from neighbouring rows keep their rows' labels (refused for their values).
    if classes & (_MOVES_ROWS | _NEIGHBOURS | _LOWERED_NEIGHBOURS | _GROUP_NEIGHBOURS):
        return True
    if "Elemwise" in classes:
        return True
    if "UFuncElemwise" in classes:  # np.log1p(ddf.x): a numpy ufunc, value by value
        return True
    if "MapPartitions" in classes:  # Dask's own steps of a lowered groupby keep them; a
        func = expr.operand("func")  # function of the user's may relabel the rows
        if isinstance(func, np.ufunc):  # ddf.x.map_partitions(np.sign): value by value
            return True
        return str(getattr(func, "__module__", "")).startswith("dask.")
    return any(name.startswith(("Repartition", "Dropna")) or "Shuffle" in name for name in classes)


def _moves_rows(expr: Any) -> bool:
    """Whether ``expr`` moves rows to other partitions, with their labels (a sort, a
    shuffle, a repartition, a groupby transform's shuffle): put beside the data again,
    its rows are found by label, across partitions."""
    classes = _class_names(expr)
    if classes & ({"SortValues", "SortIndex", "RearrangeByColumn"} | _GROUP_NEIGHBOURS):
        return True
    return any(name.startswith("Repartition") or "Shuffle" in name for name in classes)


def _label_roots(
    tree: dict[str, _Node], derived: set[str], *, stop_at_moves: bool
) -> dict[str, str]:
    """For each expression derived from the budgeted data, where its rows' index labels
    come from: itself, unless it keeps its first derived input's labels
    (:func:`_keeps_labels`; an ``optimize()`` block has its output's), followed down to
    the first expression that does not: the label *origin*. Two inputs of one origin
    carry the same rows' labels; of two origins, a row can meet another row's values.

    With ``stop_at_moves``, the walk also stops at an expression that moves rows to other
    partitions (:func:`_moves_rows`): the *layout*. Two inputs of one origin and two
    layouts are paired by Dask by label, across partitions.
    """
    roots: dict[str, str] = {}
    for start in derived:
        path: list[str] = []
        name = start
        while name not in roots:
            node = tree[name]
            first = next((dep for dep in node.dependencies if dep in derived), None)
            if node.fused_root is not None and node.fused_root in tree:
                first = node.fused_root
            elif not node.keeps_labels or (stop_at_moves and node.moves_rows):
                first = None
            if first is None:
                roots[name] = name
                break
            path.append(name)
            name = first
        for walked in path:
            roots[walked] = roots[name]
    return roots


def _has_rows(expr: Any) -> bool:
    """Whether ``expr`` gives rows (aligned with others by index label), not a reduction:
    ``ddf.x.mean()`` is a scalar, ``ddf.mean()`` a Series of the columns, both broadcast."""
    classes = _class_names(expr)
    if classes & {"Reduction", "ApplyConcatApply"}:
        return False
    if classes & _LOWERED_SELECTIONS or "Chunk" in classes:
        return _reduced_by(expr) in _SELECTING_REDUCTIONS
    return isinstance(_expression_meta(expr), pd.DataFrame | pd.Series)


def _class_names(expr: Any) -> set[str]:
    return {cls.__name__ for cls in type(expr).__mro__}


def _inputs(expr: Any) -> list[Any]:
    """The expressions ``expr`` is computed from: its dependencies, and the frames of a
    ``join`` of several frames (``JoinRecursive`` holds them in a list, not as
    dependencies)."""
    inputs = list(expr.dependencies())
    if "JoinRecursive" in {cls.__name__ for cls in type(expr).__mro__}:
        inputs += [frame for frame in expr.operand("frames") if hasattr(frame, "_name")]
    return inputs


def _expressions(root: Any) -> list[Any]:
    """Every expression of a tree, ``root`` first, including the frames of a join of
    several frames and the expressions inside the ``Fused`` blocks of ``optimize()``
    (whose own inputs are only the block's external ones: the merge, filter or shift in
    the block would otherwise not be seen)."""
    found: dict[str, Any] = {}
    pending = [root]
    while pending:
        expr = pending.pop()
        if expr._name in found:
            continue
        found[expr._name] = expr
        pending.extend(_inputs(expr))
        if "Fused" in {cls.__name__ for cls in type(expr).__mro__}:
            pending.extend(expr.operand("exprs"))
    return list(found.values())


def _tree(frame: Any) -> dict[str, _Node]:
    """Every expression of a Dask collection's tree, by name, the collection's own first
    (see :func:`_expressions`)."""
    nodes: dict[str, _Node] = {}
    for expr in _expressions(frame.expr):
        source = _pandas_source(expr)
        carriers = (_expression_meta(expr), source)
        inputs = _inputs(expr)
        nodes[expr._name] = _Node(
            tuple(c for c in carriers if c is not None),
            tuple(dep._name for dep in inputs),
            _combination(expr),
            _merge_keys(expr),
            _keeps_other_rows(expr),
            source,
            tuple(inputs),
            _side_keys(expr),
            _keeps_labels(expr),
            expr.operand("exprs")[0]._name if "Fused" in _class_names(expr) else None,
            _has_rows(expr),
            _moves_rows(expr),
            source is not None and isinstance(source.index, pd.RangeIndex),
        )
    return nodes


def _held(carrier: _Carrier) -> Ledger | None:
    """The ledger ``carrier`` holds (a saved record is reconnected to its live ledger)."""
    if _attrs.ATTRS_KEY not in carrier.attrs:
        return None
    return _attrs.ledger_of(carrier, create=False)


def _ledgers(tree: dict[str, _Node]) -> list[Ledger]:
    """The distinct ledgers held anywhere in ``tree``, in the order of Dask's walk."""
    found: list[Ledger] = []
    for node in tree.values():
        for carrier in node.carriers:
            ledger = _held(carrier)
            if ledger is not None and all(ledger is not seen for seen in found):
                found.append(ledger)
    return found


def _derived_from(tree: dict[str, _Node], ledger: Ledger) -> set[str]:
    """The expressions that hold ``ledger``, and every expression computed from them.

    These are the budgeted data and the frames derived from it. The other inputs of a
    concat, a merge or an assign (a public lookup table, a frame with no budget) are
    not among them: their data is not this budget's, and they may be combined with
    other budgeted frames later.
    """
    users: dict[str, list[str]] = {name: [] for name in tree}
    for name, node in tree.items():
        for dependency in node.dependencies:
            users[dependency].append(name)
    pending = [
        name for name, node in tree.items() if any(_held(c) is ledger for c in node.carriers)
    ]
    derived: set[str] = set()
    while pending:
        name = pending.pop()
        if name not in derived:
            derived.add(name)
            pending.extend(users[name])
    return derived


def _lineage(tree: dict[str, _Node], root: str) -> set[str]:
    """``root`` and the expressions it is computed from, up to (and with) a concat or merge.

    A budget set on a frame covers the data it was derived from (a parquet reader, the
    pandas frame of ``dd.from_pandas``), but not the inputs of a combination: they may
    be lookup tables, or data combined with other budgeted frames later.
    """
    lineage: set[str] = set()
    pending = [root]
    while pending:
        name = pending.pop()
        if name not in lineage:
            lineage.add(name)
            if tree[name].combination is None:
                pending.extend(tree[name].dependencies)
    return lineage


def _conflict(ledgers: Sequence[Ledger], what: str) -> LedgerConflictError:
    ids = " and ".join(f"{ledger.id[:8]}…" for ledger in ledgers[:2])
    unset = (
        " One of them has no budget yet: .dp made it when it was first used on a frame "
        "that had none."
        if any(not ledger.budget_set for ledger in ledgers[:2])
        else ""
    )
    return LedgerConflictError(
        f"{what} comes from frames that spend different privacy budgets (ledgers {ids}), "
        f"for example a column assigned from, or an operation with, another budgeted "
        f"frame; one release cannot be charged to a single budget.{unset} Release from each "
        f"frame separately, or combine the raw data first and call .dp.set_budget once on "
        f"the combined frame."
    )


def _resolve(frame: Any) -> tuple[Ledger, dict[str, _Node], set[str]]:
    """The frame's ledger, its tree, and the expressions derived from the budgeted data.

    See :func:`dask_ledger`.
    """
    tree = _tree(frame)
    found = _ledgers(tree)
    budgeted = [ledger for ledger in found if ledger.budget_set]
    if len(budgeted) > 1:
        raise _conflict(budgeted, "This Dask DataFrame")
    own: _Carrier = frame._meta  # the frame's own metadata
    if budgeted:
        # Ledgers with no budget charge nothing: their frames count as unbudgeted inputs.
        ledger, derived = budgeted[0], _derived_from(tree, budgeted[0])
    elif found:
        mine = _held(own)
        if len(found) > 1 and mine is None:
            raise _conflict(found, "This Dask DataFrame")
        ledger = found[0] if mine is None else mine
        derived = _derived_from(tree, ledger)
    else:  # a new ledger, with no budget yet, starts on the frame's own metadata
        created = _attrs.ledger_of(own)
        if created is None:  # pragma: no cover - create=True always returns a ledger
            raise DPFrameError("internal error: no ledger")
        ledger, derived = created, _lineage(tree, frame.expr._name)
    for name in derived:
        for carrier in tree[name].carriers:
            if _attrs.ATTRS_KEY not in carrier.attrs:
                _attrs.attach(carrier, ledger)
    return ledger, tree, derived


def dask_ledger(frame: Any) -> Ledger:
    """The ledger of a Dask DataFrame: the one found in its expression tree, else a new one.

    The ledger is then stamped on every expression of the tree that holds none and is
    derived from the budgeted data (its metadata, and the pandas frame that
    ``dd.from_pandas`` wraps), so that frames Dask derives later, including the
    rewritten expressions of ``optimize()`` and ``persist()``, inherit it through
    pandas' ``attrs``. The other inputs of a concat or merge (a lookup table, a frame
    with no budget) are left alone. A new ledger (no budget yet) starts on the frame's
    own metadata and is stamped on what the frame was derived from, up to the inputs of
    a concat or merge.

    Ledgers with no budget (made when ``.dp`` was used on a frame that had none) have
    charged nothing: when the tree also holds a budgeted ledger, their frames count as
    inputs without a ledger, so looking at an input's ``.dp.ledger`` does not break a
    combination made from it.

    Raises
    ------
    LedgerConflictError
        When the tree holds two ledgers with a budget, or, with no budget anywhere,
        two ledgers neither of which is the frame's own.
    """
    return _resolve(frame)[0]


def _repeated_rows(
    tree: dict[str, _Node], derived: set[str], unit: tuple[Any, ...] | None
) -> str | None:
    """A combination of two inputs derived from the budgeted data that the release cannot
    bound, or None.

    Through a concat or merge of two such inputs, one person's row can reach the frame
    twice or more. Without a privacy unit, that is refused (``"concat"``, ``"merge"``).
    With one, contribution bounding at release time limits every unit's rows, whatever
    was repeated; only a merge that can pair rows of *different* units is refused
    (``"unit merge"``): one not on equal values of all the unit's columns. This is the
    rule of ``df.dp.merge`` on pandas frames (:func:`dpframe._accessor._check_unit_self_merge`).
    Columns put side by side from inputs whose index labels come from different
    expressions (:func:`_label_roots`) are refused with or without a unit
    (``"misaligned"``): a row can carry another unit's value.
    """
    origins = _label_roots(tree, derived, stop_at_moves=False)
    layouts = _label_roots(tree, derived, stop_at_moves=True)
    misaligned = realigned = False  # refused last: the others name their cause more exactly
    for name, node in tree.items():
        budgeted_inputs = sum(dependency in derived for dependency in node.dependencies)
        # A reader of the budgeted data can select itself (optimize() bakes partitions[...]
        # into it): counted as reading one budgeted input.
        budgeted_inputs += not node.dependencies and name in derived
        if node.combination == "selection" and budgeted_inputs:
            return "selection"  # whether a row is kept depends on the other rows
        # drop_duplicates keeps the first row of each subset key: rows of different people
        # compete, unless the subset holds the unit (only one unit's rows are compared).
        one_units_rows = unit is not None and set(unit) <= set(node.merge_keys or ())
        if node.combination == "dedupe" and budgeted_inputs and not one_units_rows:
            return "selection"
        if node.combination == "neighbours" and budgeted_inputs:
            return "neighbours"
        if node.combination == "group neighbours" and budgeted_inputs and not one_units_rows:
            return "neighbours"
        if node.combination == "repeat" and budgeted_inputs and unit is None:
            return "repeat"  # one input, its rows repeated: bounded only with a unit
        if node.combination == "merge" and budgeted_inputs == 1 and unit is None:
            # The other input's unmatched rows belong to nobody, and exist only when no
            # person has their key (with a unit, rows without one are left out).
            sides = zip(node.dependencies, node.keeps_unmatched, strict=False)
            if any(kept and name not in derived for name, kept in sides):
                return "rows of nobody"
            # A key that repeats in the other input (a lookup table) gives each person's row
            # once per match.
            public = zip(node.dependencies, node.inputs, node.side_keys, strict=False)
            if any(name not in derived and _keys_repeat(e, k) for name, e, k in public):
                return "repeating keys"
        # Columns side by side (assign, concat(axis=1), arithmetic, where): pandas aligns
        # them by index label, so each input must carry the same rows' labels.
        if node.combination not in ("concat", "merge"):
            inputs = {dep for dep in node.dependencies if dep in derived and tree[dep].has_rows}
            sources = {origins[dep] for dep in inputs}
            misaligned |= len(sources) > 1
            # One origin, moved differently: Dask pairs rows by label across partitions,
            # row to row only when no label repeats (a RangeIndex from dd.from_pandas).
            realigned |= (
                len(sources) == 1
                and len({layouts[dep] for dep in inputs}) > 1
                and not tree[next(iter(sources))].unique_labels
            )
            continue
        if budgeted_inputs < 2:
            continue
        if unit is None:
            return node.combination
        keys = node.merge_keys
        if node.combination == "merge" and (keys is None or not set(unit) <= set(keys)):
            return "unit merge"
    return "misaligned" if misaligned else "realigned" if realigned else None


def _refuse_repeated_rows(ledger: Ledger, combination: str) -> PrivacyUnitError:
    if combination == "unit merge":
        unit = list(ledger.privacy_unit or ())
        return PrivacyUnitError(
            f"This Dask DataFrame is built with a merge or join of two frames derived from "
            f"the same budgeted data (ledger {ledger.id[:8]}…) that does not pair rows on the "
            f"privacy unit's columns {unit!r}, so its rows can carry another unit's values, "
            f"which no bound on this unit limits. Merge on them: "
            f"ddf.merge(other, on={unit!r} + [...]) (not on the index, nor on differently "
            f"named columns)."
        )
    if combination == "selection":
        return PrivacyUnitError(
            "This Dask DataFrame keeps rows by their rank among the other rows (nlargest, "
            "nsmallest, head, tail, partitions[...], drop_duplicates(subset=...) of rows of "
            "several people): "
            "one person's presence can push another person's row "
            "out, so a release would move in two places for the charge of one. Filter on "
            "each row's own values instead (ddf[ddf['age'] < 25]): a row is then kept or "
            "not whoever else is in the data."
        )
    if combination == "neighbours":
        declared = ledger.privacy_unit
        within = (
            f"within each unit (ddf.groupby({list(declared)!r})[...].shift())"
            if declared is not None
            else "only within a declared privacy unit (set_budget(..., privacy_unit=...))"
        )
        return PrivacyUnitError(
            f"This Dask DataFrame has values computed from other rows (shift, diff, "
            f"cumsum, rolling, map_overlap, or a groupby transform on columns that are not "
            f"the privacy unit's): a row then carries another person's values, so one "
            f"person moves several rows, and a release would spend more than it charges. "
            f"Compute lags and running values {within}."
        )
    if combination == "realigned":
        return PrivacyUnitError(
            "This Dask DataFrame puts beside the data a column of a sorted, shuffled, "
            "repartitioned or grouped copy of it: Dask finds each row's value by index "
            "label, across partitions, which pairs a row with its own only when no label "
            "repeats, and this index is not known to be unique (set from a column, reset "
            "per partition, or read from files): rows sharing a label could swap values. "
            "Start from dd.from_pandas(frame.reset_index(drop=True)) (a RangeIndex), or "
            "compute the column on the same frame without moving its rows."
        )
    if combination == "misaligned":
        return PrivacyUnitError(
            "This Dask DataFrame puts side by side (assign, concat(axis=1), arithmetic) "
            "columns of the budgeted data whose index was rebuilt differently (set_index, "
            "reset_index, a renamed index, map_partitions): pandas aligns them by index "
            "label, so a row can carry another person's value, and one person's value "
            "several rows. Derive the columns from one frame after the same index change "
            "(x = ddf.set_index('k'); x.assign(w=x['v'] * 2)), or merge on a column."
        )
    if combination == "repeating keys":
        return PrivacyUnitError(
            "This Dask DataFrame is built with a merge or join whose keys repeat in the other "
            "table (a lookup table with two rows for one key), so each person's row is "
            "repeated once per match: one person would move several rows, and a release "
            "would spend more than it charges. Merge only on keys that are unique in the "
            "other table (lookup.drop_duplicates(subset=[...]), or aggregate it first), or "
            "declare a privacy unit (set_budget(..., privacy_unit=...)): then every release "
            "bounds each unit's rows."
        )
    if combination == "rows of nobody":
        return PrivacyUnitError(
            "This Dask DataFrame is built with an outer (or right) merge, or a merge_asof "
            "with the table on the left, that keeps the rows of a table's keys no person "
            "has (or gives each of them a person's row), so whether such a row exists "
            "depends on the people in the data: one person would move several rows, and a "
            "release would spend more than it charges. Merge with how='left' (the budgeted "
            "frame on the left) or how='inner'."
        )
    if combination == "repeat":
        return PrivacyUnitError(
            f"This Dask DataFrame repeats rows of the budgeted data (ledger "
            f"{ledger.id[:8]}…) with explode, melt, sample(replace=True), or a loc[[...]] or "
            f"partitions[[...]] list naming one label or partition twice, so one person's row can "
            f"appear in it more than once, and a release from it would cost more privacy than "
            f"the epsilon charged. Release from the frame before the repeat, or declare the "
            f"person (set_budget(..., privacy_unit=...)): each release then bounds every "
            f"unit's rows."
        )
    what = "dd.concat" if combination == "concat" else "a merge or join"
    return PrivacyUnitError(
        f"This Dask DataFrame is built with {what} of two frames derived from the same "
        f"budgeted data (ledger {ledger.id[:8]}…), so one person's row can appear in it more "
        f"than once, and a release from it would cost more privacy than the epsilon charged. "
        f"Release from each frame separately (both are charged to the same budget), or "
        f"select the rows with one filter instead, e.g. "
        f'ddf[(ddf["Age"] < 18) | (ddf["Age"] >= 65)] or where=. With a privacy unit '
        f"(set_budget(..., privacy_unit=...)), each release bounds every unit's rows."
    )


# ---------------------------------------------------------------- what runs on each partition


@dataclass(frozen=True)
class _Query:
    """One exact aggregate, computed on each partition by the pandas backend's rows."""

    kind: str  # "rows", "counts", "total", "sums", "parts", "cells" or "log"
    groups: tuple[Group, ...] = ()
    column: Any = None
    grid: SumGrid | None = None
    mask: Any = None  # the name of the column holding the row filter
    grids: tuple[SumGrid, ...] = ()  # "parts": several sums of one column
    candidates: NDArray[np.float64] | None = None  # "cells": a quantile's candidate grid
    bounding: _Bounding | None = None  # contribution bounding, on unit-complete partitions


@dataclass(frozen=True)
class _Bounding:
    """Contribution bounding to apply on each partition (all rows of a unit in one)."""

    unit: tuple[Any, ...]
    bounds: ContributionBounds
    groups: tuple[Group, ...]
    seed: int | None  # a caller's rng (tests): one derived stream per partition


def _partition_where(partition: pd.DataFrame, where: str) -> pd.Series[bool]:
    """A ``where=`` string on one partition, as :func:`dpframe._validation.where_mask`."""
    mask = _validation.where_mask(partition, where)
    return pd.Series(mask, index=partition.index, dtype=bool)


def _partition_aggregate(partition: pd.DataFrame, query: _Query) -> NDArray[Any]:
    """The exact aggregate of one partition, flat (runs on a worker)."""
    mask = None
    if query.mask is not None:
        mask = _validation.where_mask(partition, partition[query.mask])
    rows = PandasRows(partition, mask)
    if query.bounding is not None:
        b = query.bounding
        # Each partition draws its own randomness: fresh cryptographic keys on the worker,
        # or, for a caller's rng, a stream derived from its seed and the partition's data
        # (tests only: such releases are not private).
        rng = None if b.seed is None else np.random.default_rng([b.seed, len(partition)])
        # This query's one aggregate: a count of the cells the rows were bounded for.
        counts_only = query.kind in ("rows", "counts") and query.groups == b.groups
        rows = rows.bounded(b.unit, b.bounds, b.groups, rng, counts_only=counts_only)
    if query.kind == "rows":
        return np.array([rows.count()], dtype=np.int64)
    if query.kind == "counts":
        return rows.count_table(query.groups).reshape(-1)
    if query.kind == "log":
        return rows.log_histogram(query.column)
    if query.kind == "units":
        return rows.unit_counts(query.column, query.groups).reshape(-1)
    if query.kind == "parts":  # every part flat, one after the other (Python ints if large)
        parts = rows.sum_tables(query.column, query.grids, query.groups)
        return np.concatenate([np.asarray(p, dtype=object).reshape(-1) for p in parts])
    if query.kind == "cells" and query.candidates is not None:
        return rows.cell_table(query.column, query.candidates, query.groups).reshape(-1)
    if query.grid is None:  # pragma: no cover - built by DaskRows with a grid
        raise InvalidParameterError("internal error: a sum without a grid")
    if query.kind == "total":
        return np.array([rows.sum(query.column, query.grid)], dtype=object)
    return rows.sum_table(query.column, query.grid, query.groups).reshape(-1)


def _sum_arrays(*parts: NDArray[Any]) -> NDArray[Any]:
    """Cell-wise exact sum of partition results (runs on a worker).

    int64 inputs below 2**61 in magnitude add in int64 (the sum cannot wrap); anything
    larger is added as Python integers, so any number of rows is summed exactly.
    """
    total = parts[0]
    for part in parts[1:]:
        small = all(
            p.dtype == np.int64 and (not p.size or int(np.abs(p).max()) < 2**61)
            for p in (total, part)
        )
        total = total + part if small else total.astype(object) + part.astype(object)
    return total


# ---------------------------------------------------------------- the backend


def _safe_to_optimize(frame: Any) -> bool:
    """Whether Dask's expression optimizer computes ``frame``'s rows exactly (no concat).

    Dask (2026.8.0) pushes a column selection into each input of a ``dd.concat`` and
    drops the inputs that hold none of the selected columns, with their rows: a count
    over ``dd.concat([a, b])[["x"]]`` misses ``b``'s rows when ``b`` has no ``x``, and
    when no input is left (a count selects no column) it raises ``IndexError``
    (dask/dask#12147). So a tree holding a concat is computed as written: every column
    of its inputs is read, and the aggregates are exact.
    """
    return not any(_combination(e) in ("concat", "columns") for e in _expressions(frame.expr))


def _present_values(values: pd.Series) -> pd.Series:
    """Whether each value of a numeric column is there (NaN, Arrow's included, is missing)."""
    as_float = _validation.numeric_values(values, values.name)
    return pd.Series(~np.isnan(as_float), index=values.index, name=values.name)


@dataclass(frozen=True)
class _Filter:
    """A validated row filter: a boolean Dask Series co-partitioned with the frame."""

    series: Any


class DaskRows:
    """The rows of a Dask frame selected by a filter; every aggregate is one Dask compute.

    Each aggregate runs the pandas backend on every partition, on the workers, adds the
    per-partition arrays exactly in a tree, and returns the same types as the pandas
    backend (an int, or a numpy array of the same shape).
    """

    def __init__(
        self, frame: dd.DataFrame, where: _Filter | None, bounding: _Bounding | None = None
    ) -> None:
        self._frame = frame
        self._where = where
        self._bounding = bounding

    def present(self, column: ColumnLabel) -> DaskRows:
        present = self._frame[column].map_partitions(
            _present_values, meta=pd.Series(dtype=bool, name=column)
        )
        where = present if self._where is None else self._where.series & present
        return DaskRows(self._frame, _Filter(where), self._bounding)

    def bounded(
        self,
        unit: Sequence[ColumnLabel],
        bounds: ContributionBounds,
        groups: Sequence[Group],
        rng: np.random.Generator | None,
        *,
        counts_only: bool = False,
    ) -> DaskRows:
        """Bounded on the workers, after a shuffle that puts all rows of a unit together.

        Each aggregate is one query, bounded afresh on each partition: a count query's
        partitions count each unit's kept rows without choosing them, whatever
        ``counts_only`` says.
        """
        seed = None if rng is None else int(rng.integers(2**62))
        bounding = _Bounding(tuple(unit), bounds, tuple(groups), seed)
        return DaskRows(self._frame, self._where, bounding)

    def count(self) -> int:
        return int(self._aggregate(_Query("rows"), [])[0])

    def count_table(self, groups: Sequence[Group]) -> NDArray[np.int64]:
        flat = self._aggregate(_Query("counts", groups=tuple(groups)), [g.name for g in groups])
        return flat.reshape([len(g.domain) for g in groups])

    def sum(self, column: ColumnLabel, grid: SumGrid) -> int:
        return int(self._aggregate(_Query("total", column=column, grid=grid), [column])[0])

    def sum_table(
        self, column: ColumnLabel, grid: SumGrid, groups: Sequence[Group]
    ) -> NDArray[np.generic]:
        query = _Query("sums", groups=tuple(groups), column=column, grid=grid)
        flat = self._aggregate(query, [column, *[g.name for g in groups]])
        return flat.reshape([len(g.domain) for g in groups])

    def sum_tables(
        self, column: ColumnLabel, grids: Sequence[SumGrid], groups: Sequence[Group]
    ) -> list[NDArray[np.generic]]:
        query = _Query("parts", groups=tuple(groups), column=column, grids=tuple(grids))
        flat = self._aggregate(query, [column, *[g.name for g in groups]])
        shape = [len(g.domain) for g in groups]
        return [np.asarray(part).reshape(shape) for part in np.split(flat, len(grids))]

    def cell_table(
        self, column: ColumnLabel, grid: NDArray[np.float64], groups: Sequence[Group]
    ) -> NDArray[np.int64]:
        query = _Query("cells", groups=tuple(groups), column=column, candidates=grid)
        flat = self._aggregate(query, [column, *[g.name for g in groups]])
        return flat.reshape([*(len(g.domain) for g in groups), grid.size])

    def log_histogram(self, column: ColumnLabel) -> NDArray[np.int64]:
        return self._aggregate(_Query("log", column=column), [column])

    def unit_counts(
        self, unit: Sequence[ColumnLabel], groups: Sequence[Group]
    ) -> NDArray[np.int64]:
        """Per partition, after the shuffle that puts each unit's rows in one partition."""
        if self._bounding is None:  # pragma: no cover - the accessor bounds rows first
            raise InvalidParameterError("internal error: unit counts of unbounded rows")
        query = _Query("units", groups=tuple(groups), column=tuple(unit))
        flat = self._aggregate(query, [*unit, *[g.name for g in groups]])
        return flat.reshape([len(g.domain) for g in groups])

    def _aggregate(self, query: _Query, columns: Sequence[Any]) -> NDArray[Any]:
        """Run ``query`` on every partition and add the results exactly, in one Dask compute.

        Only the needed columns are selected, so Dask reads no others (column pruning
        reaches the parquet reader), except below a ``dd.concat`` (see
        :func:`_safe_to_optimize`). The query travels to the workers once, as one graph key
        shared by every partition task.
        """
        frame = self._frame
        needed = list(dict.fromkeys(columns))
        if self._where is not None:
            mask = _MASK_COLUMN
            while mask in frame.columns:
                mask += "_"
            frame = frame.assign(**{mask: self._where.series})
            needed.append(mask)
            query = dataclasses.replace(query, mask=mask)
        if self._bounding is not None:
            needed += [c for c in self._bounding.unit if c not in needed]
            needed += [g.name for g in self._bounding.groups if g.name not in needed]
            query = dataclasses.replace(query, bounding=self._bounding)
        selected = frame[needed]
        if self._bounding is not None:  # every row of a unit in one partition
            selected = selected.shuffle(on=list(self._bounding.unit))
        partitions = selected.to_delayed(optimize_graph=_safe_to_optimize(selected))
        # Readable task names (dpframe-aggregate, dpframe-sum), unique to this call.
        token = uuid.uuid4().hex
        shared_query = delayed(query, name=f"dpframe-query-{token}")
        chunk, combine = delayed(_partition_aggregate), delayed(_sum_arrays)
        parts = [
            chunk(part, shared_query, dask_key_name=(f"dpframe-aggregate-{token}", i))
            for i, part in enumerate(partitions)
        ]
        level = 0
        while len(parts) > 1:
            level += 1
            parts = [
                combine(*parts[i : i + _FAN_IN], dask_key_name=(f"dpframe-sum-{token}", level, i))
                for i in range(0, len(parts), _FAN_IN)
            ]
        (total,) = compute(parts[0])  # type: ignore[no-untyped-call]  # dask: unannotated
        return cast(NDArray[Any], total)


def _known(dtype: Any) -> Any:
    """The dtype keys are checked against: Dask's unknown categories accept any key."""
    if isinstance(dtype, pd.CategoricalDtype) and _UNKNOWN_CATEGORIES in dtype.categories:
        return np.dtype(object)
    return dtype


class DaskBackend:
    """A Dask DataFrame seen by the accessor (see :class:`dpframe._backends.Backend`).

    Validation (columns, dtypes, domains, filters) reads only Dask's metadata
    (``ddf._meta``, an empty pandas frame with the real dtypes), so a refused call reads
    no data, draws no noise and charges nothing.
    """

    def __init__(self, frame: dd.DataFrame) -> None:
        self._frame = frame

    @property
    def _meta(self) -> pd.DataFrame:
        meta: pd.DataFrame = self._frame._meta
        return meta

    @property
    def ledger(self) -> Ledger:
        """Found in the metadata of the frame or of any frame it was derived from."""
        return dask_ledger(self._frame)

    def group(self, name: ColumnLabel, domain: Domain | None, param: str) -> Group:
        column = _validation.column(self._meta, name, param)
        dtype = column.dtype
        declared_here = (domain is not None and name in domain) or name in self.ledger.domains
        if (
            not declared_here
            and isinstance(dtype, pd.CategoricalDtype)
            and _UNKNOWN_CATEGORIES in dtype.categories
        ):
            raise DomainError(
                f"column {name!r} is a Dask Categorical with unknown categories; learning them "
                f"(ddf.categorize()) would read the keys from the data. Declare them instead, "
                f'for this call with domain={{"{name}": [...]}}, or once for the data set with '
                f'ddf.dp.set_budget(..., domains={{"{name}": [...]}}) (and give the column the '
                f"same categories with astype(pd.CategoricalDtype([...])), which reads nothing)."
            )
        declared = _validation.declared_domain(_known(dtype), name, domain, self.ledger.domains)
        return Group(name, declared, column.dtype)

    def observed_group(self, name: ColumnLabel, param: str) -> Group:
        column = _validation.column(self._meta, name, param)
        found = self._frame[name].dropna().unique().compute()
        keys = pd.Index(pd.unique(np.asarray(found, dtype=object)), dtype=object)
        return Group(name, observed_domain(keys, _known(column.dtype), name), column.dtype)

    def column_label(self, key: object, param: str) -> ColumnLabel:
        if not isinstance(key, dd.Series):
            return key
        name = key.name
        if name not in self._frame.columns or key._name != self._frame[name]._name:
            raise InvalidParameterError(
                f"{param} got a Dask Series that is not a column of this frame ({name!r}). Pass "
                f'a column of the frame (ddf["col"]) or its name; add a derived key as a '
                f"column first (ddf.assign(...))."
            )
        return cast(ColumnLabel, name)

    def check_columns(self, names: Iterable[ColumnLabel], param: str) -> dict[ColumnLabel, Any]:
        return {name: _known(_validation.column(self._meta, name, param).dtype) for name in names}

    def check_unit(self, unit: Sequence[ColumnLabel]) -> None:
        # Dask's shuffle puts a unit's rows in one partition by a hash of each id's text,
        # and dd.from_pandas turns object columns into strings: ids equal in pandas (7 and
        # 7.0) must not become two units, each bounded on its own.
        for name in unit:
            if pd.api.types.is_object_dtype(self._meta[name].dtype):
                raise PrivacyUnitError(
                    f"the privacy unit column {name!r} is a Dask column of Python objects. "
                    f"Dask's shuffle, which puts each unit's rows in one partition, hashes "
                    f"their text, so ids equal in pandas (7 and 7.0, 1 and True) can land in "
                    f"different partitions and count as several units, each bounded on its "
                    f"own. Give the column one type first: "
                    f"ddf[{name!r}].astype('int64') (or 'float64', or 'string' for text ids)."
                )
        split = _SPLIT_UNITS.get(self.ledger.id)
        for expr in _expressions(self._frame.expr):
            if split is not None:
                break
            source = _pandas_source(expr)
            if source is not None and expr.operand("pyarrow_strings_enabled"):
                split = _split_unit(source, unit)
        if split is not None:
            name, kind = split
            raise PrivacyUnitError(
                f"column {name!r} held Python objects ({kind}) in the pandas frame given to "
                f"dd.from_pandas, which turns them into strings: ids equal in pandas, such as "
                f"7 and 7.0 or 1 and True, became different strings, so if the privacy "
                f"unit's ids come from it one person would count as several units, each "
                f"bounded on its own. Give the column one type in pandas, before "
                f"dd.from_pandas: df[{name!r}] = df[{name!r}].astype('int64') (or 'float64', "
                f"or 'string' for text ids)."
            )

    def check_rows_apart(self) -> None:
        # Dask labels are not read (each partition may number its rows from 0): repeats
        # are found in the expression tree, and pandas copies are checked by row count.
        return None

    def check_keys(self, groups: Sequence[Group]) -> None:
        # Dask reads object columns as Arrow strings by default; with
        # dataframe.convert-string off, an object column could hold lists, which only a
        # pass over the data would find: refused from its dtype instead.
        for group in groups:
            if pd.api.types.is_object_dtype(group.dtype):
                raise DomainError(
                    f"{group.name!r} is a Dask column of Python objects, whose values cannot "
                    f"be checked as keys before bounds='auto' charges its share. Convert it "
                    f"first (ddf[{group.name!r}].astype(str)), or declare bounds=(lo, hi)."
                )

    @property
    def row_labels(self) -> tuple[Any, ...] | None:
        # Not recorded: Dask numbers each partition's rows from 0 after reset_index, so
        # the labels of a pandas copy (compute()) repeat without any row repeating.
        return None

    @property
    def row_count(self) -> int | None:
        # Known for dd.from_pandas (its pandas frame is in memory): pandas copies of this
        # data (compute()) then refuse more rows, as pandas budgets do. Otherwise unknown
        # without reading the data (the expression tree shows repeats).
        source = _pandas_source(self._frame.expr)
        return None if source is None else len(source)

    def numeric_column(self, name: ColumnLabel, param: str) -> ColumnLabel:
        _validation.numeric_dtype(_validation.column(self._meta, name, param).dtype, name)
        return name

    def rows(self, where: Where | dd.Series) -> DaskRows:
        """The rows selected by ``where``: an expression string, or a boolean Dask Series.

        A string is checked on the metadata (syntax, columns, boolean result) and
        evaluated by Dask on each partition; a Dask Series must come from this frame
        (same partitions, e.g. ``ddf["Age"] >= 18``). In-memory arrays and pandas Series
        are refused: their rows cannot be matched to the partitions without reading the
        data.
        """
        # The ledger the release will be charged to; refuse data that repeats its rows.
        ledger, tree, derived = _resolve(self._frame)
        # With a privacy unit, repeated rows are bounded per unit at release time.
        repeated = _repeated_rows(tree, derived, ledger.privacy_unit)
        if repeated is not None:
            raise _refuse_repeated_rows(ledger, repeated)
        for name in derived:  # a pandas frame wrapped by dd.from_pandas: pandas' checks
            source = tree[name].source
            if source is not None:
                refuse_repeated_rows(source, ledger)
        if where is None:
            return DaskRows(self._frame, None)
        if isinstance(where, str):
            _validation.where_mask(self._meta, where)  # syntax, columns and boolean result
            # Each partition through dpframe's own evaluation, not Dask's eval: a row whose
            # evaluation raises is left out there, as on pandas, instead of failing the
            # compute (an error that depends on one person's value would answer about them).
            mask = self._frame.map_partitions(  # type: ignore[no-untyped-call]  # dask: unannotated
                _partition_where, where, meta=pd.Series(dtype=bool)
            )
            return DaskRows(self._frame, _Filter(mask))
        if not isinstance(where, dd.Series):
            raise InvalidParameterTypeError(
                f'where on a Dask DataFrame must be an expression string (where="Age >= 18") '
                f'or a boolean Dask Series built from the same frame (where=ddf["Age"] >= 18); '
                f"got {type(where).__name__}."
            )
        dtype = where._meta.dtype
        if not (dtype == np.bool_ or str(dtype) in ("boolean", "bool[pyarrow]")):
            raise InvalidParameterTypeError(f"where must be boolean, got dtype {dtype}.")
        if where.npartitions != self._frame.npartitions or tuple(where.divisions) != tuple(
            self._frame.divisions
        ):
            raise InvalidParameterError(
                "where is a Dask Series partitioned differently from the frame; build it from "
                "the same frame, e.g. where=ddf['Age'] >= 18, or pass an expression string."
            )
        where_tree = _tree(where)
        foreign = [
            other for other in _ledgers(where_tree) if other is not ledger and other.budget_set
        ]
        if foreign:
            raise _conflict([ledger, foreign[0]], "where=")
        repeated = _repeated_rows(
            where_tree, _derived_from(where_tree, ledger), ledger.privacy_unit
        )
        if repeated is not None:
            raise _refuse_repeated_rows(ledger, repeated)
        return DaskRows(self._frame, _Filter(where))


_register_tokenization()
register_backend(dd.DataFrame, DaskBackend)
dd.extensions.register_dataframe_accessor("dp")(  # type: ignore[no-untyped-call]  # dask: unannotated
    DPAccessor
)
