"""How a ledger follows its data through pandas: a handle in ``frame.attrs["dpframe"]``.

This is the one module that depends on how pandas propagates ``attrs``; its tests
(``tests/test_attrs.py``) pin that behaviour, so a pandas release that changes it fails
them rather than silently dropping budgets.

pandas 3 builds a new accessor object on every ``df.dp`` access, so nothing can be kept
on the accessor. The ledger lives instead behind a small handle object,
:class:`_LedgerHandle`, which pandas carries to derived frames:

* pandas propagates ``attrs`` with ``copy.deepcopy``; the handle returns itself from
  ``__copy__`` and ``__deepcopy__``, so every derived frame holds the *same* handle and
  therefore the same ledger (copy, filters, column selection, ``df["a"]``, assign, head,
  sample, sort_values, set_index, reset_index, ``copy.deepcopy`` ...).
* ``pd.concat``, ``merge`` and ``join`` keep ``attrs`` only when every input has
  non-empty ``attrs`` and all compare equal with ``==``. The handle compares equal to
  the handle of the same ledger (or to a saved record of it) and *raises*
  :class:`~dpframe.errors.LedgerConflictError` when compared with another ledger's
  handle, so combining frames that spend different budgets is refused.
* The handle subclasses ``dict`` and mirrors the ledger's state (id, total, spent,
  history, exact values as strings such as ``"1/11"``), so ``json.dumps(df.attrs)``
  works and ``to_parquet`` stores the state in the file. ``read_parquet`` gives back a
  plain dict, which :func:`ledger_of` recognizes.
* Pickling the handle stores the ledger's state; unpickling (``read_pickle``,
  ``pickle.loads``) reconnects to the live ledger with the same id in this process, or
  rebuilds it from the saved state (:mod:`dpframe._persistence`).

What is and is not caught (verified with pandas 3.1.1)
------------------------------------------------------
Shared ledger (the derived frame spends the same budget): ``copy()``, boolean
filters, ``df[[...]]``, ``df["a"]`` and ``df.a``, ``loc``/``iloc``, ``query``,
``assign``, ``head``, ``sample``, ``sort_values``, ``set_index``, ``reset_index``,
``astype``, ``dropna``, ``to_frame``, ``groupby(...).sum()``, ``pivot_table``,
``copy.copy``, ``copy.deepcopy``, pickle (bytes and ``to_pickle``), parquet, and
``concat``/``merge``/``join`` of frames with the same ledger.

Refused with :class:`~dpframe.errors.LedgerConflictError`: ``pd.concat`` (rows or
columns, DataFrames or Series), ``merge``, ``join`` (one frame or a list),
``merge_asof``, ``merge_ordered`` and ``DataFrame.compare`` of frames whose ledgers
differ, including a frame read from parquet (plain record) against another ledger.

Not caught, because pandas gives no hook (the README's table lists them all):

* combining with a frame whose ``attrs`` are empty (never budgeted, or built from
  values): pandas drops ``attrs`` and the result has no ledger (``df.dp.merge`` and
  ``df.dp.join`` keep it);
* frames whose ``attrs`` also differ in another key: pandas drops ``attrs`` silently
  unless it happens to compare the ``"dpframe"`` key first (then it raises);
* binary operations between two frames or Series (``df1 + df2``, ``df1 == df2``) keep
  the *right* operand's ledger; ``combine``, ``combine_first``, ``where``/``mask``
  with another frame, ``update`` and ``align`` keep the left one's;
* ``pd.DataFrame(df)``, ``value_counts``, ``groupby(...).size()``, ``pivot`` and
  ``pd.crosstab`` return results without a ledger;
* whoever holds the raw data can leave the ledger behind: ``to_numpy()``, ``to_csv``
  (writes no metadata), clearing ``df.attrs``, editing a saved file, or restoring a
  pickle in another process after the original went on spending.

A frame without a ledger gets a new one, with no budget: the accessor refuses to release
from it until ``set_budget`` is called, so a lost ledger is never silently unlimited.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from dpframe import _persistence
from dpframe._ledger import Ledger
from dpframe._release import JSONValue, Release
from dpframe.errors import (
    InvalidParameterError,
    InvalidParameterTypeError,
    LedgerConflictError,
)

__all__ = ["ATTRS_KEY", "attach", "combined_ledger", "handle_of", "ledger_of"]

#: The key of ``DataFrame.attrs`` under which a frame's ledger handle is stored.
ATTRS_KEY = "dpframe"


class _LedgerHandle(dict[str, Any]):
    """What ``frame.attrs["dpframe"]`` holds: a JSON-friendly mirror tied to one ledger.

    * ``copy.copy`` / ``copy.deepcopy`` return the handle itself, so frames derived
      through pandas' deep copy of ``attrs`` share the ledger.
    * ``==`` is True for the same ledger (its handle, or a saved record with its id),
      False for anything that is not a ledger record, and raises
      :class:`~dpframe.errors.LedgerConflictError` for a different ledger: pandas
      compares ``attrs`` with ``==`` in concat and merge, so the conflict surfaces there.
    * The dict contents mirror :meth:`Ledger.to_dict` and are updated on every change,
      so ``json.dumps`` (and ``to_parquet``) store the current state.
    * Pickling stores the ledger's state (taken from the ledger, not from the mirror);
      unpickling reconnects to the live ledger or rebuilds it.
    """

    __slots__ = ("ledger",)

    def __init__(self, ledger: Ledger) -> None:
        super().__init__(ledger.to_dict())
        self.ledger = ledger

    def refresh(self, added: Sequence[Release]) -> None:
        """Mirror the ledger's state, and append the records of ``added``.

        Everything but the history and the domains is copied again (the unit, the row
        count and the budget change with ``set_budget`` and restores); the domains only
        when some were declared (they are only ever added to), and the history grows by
        ``added`` only, so a release costs no re-encoding of what came before.
        """
        self.update(self.ledger._state_record())
        if len(self["domains"]) != len(self.ledger.domains):
            self["domains"] = self.ledger._domains_record()
        history: list[JSONValue] = self["history"]
        history.extend(release.record() for release in added)

    def __copy__(self) -> _LedgerHandle:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> _LedgerHandle:
        return self

    def __reduce__(self) -> tuple[Any, tuple[dict[str, JSONValue], str]]:
        ledger = self.ledger
        # Dask's distributed scheduler pickles graphs on its own thread while a long call
        # (agg) holds the ledger for its whole compute: waiting for the ledger there never
        # ends. This mirror of the ledger (refreshed under its lock after every change)
        # then stands in for its record; the live ledger is found by its instance name in
        # this process, and worker processes release nothing.
        if not ledger._lock.acquire(blocking=False):
            mirror = {**self, "history": list(self["history"]), "domains": list(self["domains"])}
            return (_unpickle_handle, (mirror, ledger._instance))
        try:
            return (_unpickle_handle, (ledger.to_dict(), ledger._instance))
        finally:
            ledger._lock.release()

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, tuple[dict[str, JSONValue], str]]:
        return self.__reduce__()

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        other_id = _record_id(other)
        if other_id is None:
            return False
        if other_id == self.ledger.id:
            return True
        if _unused(other) or _unused(self):
            return False  # a ledger nobody budgeted or spent (a peek at .dp): pandas drops attrs
        raise LedgerConflictError(
            f"These frames spend different privacy budgets (ledger {self.ledger.id[:8]}… "
            f"and ledger {other_id[:8]}…), so combining them would silently drop one "
            f"budget. Release from each frame separately, or combine the raw data first "
            f"and call .dp.set_budget once on the combined frame."
        )

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = None

    def __repr__(self) -> str:
        return f"<dpframe ledger {self.ledger.id[:8]}…: {self.ledger!r}>"


class _Mirror:
    """Observes every ledger and keeps its handle's dict contents current."""

    def created(self, ledger: Ledger) -> None:
        """Nothing to do: a handle is made when a frame first needs one."""

    def changed(self, ledger: Ledger, added: Sequence[Release]) -> None:
        handle = ledger._attachment
        if isinstance(handle, _LedgerHandle):
            handle.refresh(added)


Ledger._observers.append(_Mirror())


def handle_of(ledger: Ledger) -> _LedgerHandle:
    """The one handle of ``ledger`` (made on first use)."""
    handle = ledger._attachment
    if not isinstance(handle, _LedgerHandle):
        handle = _LedgerHandle(ledger)
        ledger._attachment = handle
    return handle


def _unused(value: object) -> bool:
    """Whether a handle or record belongs to a ledger with no budget and no spending."""
    if isinstance(value, _LedgerHandle):
        return not value.ledger.budget_set and not len(value.ledger.history)
    if isinstance(value, dict):
        return value.get("budget_set") is False and not value.get("history")
    return False


def _record_id(value: object) -> str | None:
    """The ledger id of a handle or of a saved ledger record; None for anything else."""
    if isinstance(value, _LedgerHandle):
        return value.ledger.id
    return _persistence.record_id(value)


def _unpickle_handle(state: dict[str, Any], instance: str | None = None) -> _LedgerHandle:
    return handle_of(_persistence.restore(state, instance))


def attach(frame: pd.DataFrame | pd.Series[Any], ledger: Ledger) -> None:
    """Make ``frame`` (and frames derived from it from now on) spend ``ledger``."""
    frame.attrs[ATTRS_KEY] = handle_of(ledger)


def ledger_of(frame: pd.DataFrame | pd.Series[Any], *, create: bool = True) -> Ledger | None:
    """The ledger attached to this frame's data.

    Parameters
    ----------
    frame : DataFrame or Series
        A frame, possibly derived from a budgeted one (filters, copies, column
        selections, concat/merge of frames with the same ledger, a pickle or parquet
        round trip...).
    create : bool, default True
        When the frame has no ledger: attach a new one (with no budget) and return it
        (True), or return None (False).

    Returns
    -------
    Ledger or None

    Raises
    ------
    InvalidParameterError
        When ``frame.attrs["dpframe"]`` holds something that is not a ledger record.
    InvalidParameterTypeError
        When ``frame`` is not a DataFrame or Series.

    Notes
    -----
    A record read back from a file (``read_parquet`` gives a plain dict) is reconnected
    to the live ledger with the same id, or rebuilt from the record, and the frame's
    ``attrs`` entry is replaced by the live ledger's handle.
    """
    if not isinstance(frame, pd.DataFrame | pd.Series):
        raise InvalidParameterTypeError(
            f"Expected a pandas DataFrame or Series, got {type(frame).__name__}."
        )
    if not isinstance(create, bool):
        raise InvalidParameterTypeError(f"create must be True or False, got {create!r}.")
    value = frame.attrs.get(ATTRS_KEY)
    if isinstance(value, _LedgerHandle):
        return value.ledger
    if value is not None:
        ledger = _persistence.restore(value)
    elif create:
        ledger = Ledger()
    else:
        return None
    attach(frame, ledger)
    return ledger


def combined_ledger(frames: Sequence[pd.DataFrame | pd.Series[Any]]) -> Ledger:
    """The one ledger shared by several frames used in one release.

    Parameters
    ----------
    frames : sequence of DataFrame or Series
        The inputs of a release (at least one).

    Returns
    -------
    Ledger
        The ledger of the frames that have one; frames without a ledger adopt it (they
        are attached to it, so their later releases spend the same budget). When no
        frame has one, a new ledger (no budget) is attached to all of them.

    Raises
    ------
    LedgerConflictError
        When two frames carry different ledgers. Nothing is attached then.
    InvalidParameterError, InvalidParameterTypeError
        For an empty sequence, a non-frame or an invalid record in ``attrs``.
    """
    given: object = frames  # checked at run time whatever the annotation says
    if isinstance(given, pd.DataFrame | pd.Series) or not isinstance(given, Sequence):
        raise InvalidParameterTypeError(
            "frames must be a list of DataFrames or Series, e.g. [left, right]."
        )
    if not frames:
        raise InvalidParameterError("frames must hold at least one DataFrame or Series.")
    found: list[Ledger] = []
    for frame in frames:
        ledger = ledger_of(frame, create=False)
        if ledger is not None and all(ledger is not other for other in found):
            found.append(ledger)
    if len(found) > 1:
        raise LedgerConflictError(
            f"These {len(frames)} frames spend {len(found)} different privacy budgets, so "
            f"one release cannot be charged to a single budget. Release from each frame "
            f"separately, or combine the raw data first and call .dp.set_budget once on "
            f"the combined frame."
        )
    shared = found[0] if found else Ledger()
    for frame in frames:
        attach(frame, shared)
    return shared
