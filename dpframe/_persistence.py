"""How a ledger survives pickle and parquet: its records, and the registry of live ledgers.

A ledger is saved as the JSON-serializable record of :meth:`Ledger.to_dict` (in a
pickle, or in ``frame.attrs`` written by ``to_parquet``). Reading a record back
(:func:`restore`) reconnects to the live ledger with the same id in this process, or
rebuilds one from the record.

A registry maps ids to live ledgers (weak references: a ledger lives as long as some
frame holds it) and keeps, for every ledger that was ever charged or given a budget, a
high-water mark (its lowest total and highest spent amount). A saved copy restored later
can therefore never lower what this process knows was spent, even after every frame of
the original ledger was garbage-collected. Whenever a saved record meets a ledger
(reconnect or rebuild), the result keeps the lowest total and the highest spent amount
of the two; spending the ledger did not know of appears as one history row, method
``"(restored)"``, so ``spent`` is always the exact sum of the history.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import sys
import threading
import weakref
from collections.abc import Hashable, Mapping, Sequence
from fractions import Fraction
from typing import Any

import pandas as pd

from dpframe import _validation
from dpframe._composition import Total
from dpframe._ledger import FORMAT, FORMAT_VERSION, Ledger
from dpframe._release import Release
from dpframe.errors import DPFrameError, InvalidParameterError

__all__ = ["parse_release", "record_id", "restore", "unpickle_ledger"]

_LOCK = threading.RLock()
_LIVE: weakref.WeakValueDictionary[str, Ledger] = weakref.WeakValueDictionary()


@dataclasses.dataclass(frozen=True)
class _Mark:
    """What a ledger had reached: total, exact sums of the costs by measure (epsilon,
    delta, rho), whether a budget was set, and what set_budget declared with it."""

    total: Total
    spent: tuple[Fraction, Fraction, Fraction]
    budget_set: bool
    domains: dict[Hashable, pd.Index]
    privacy_unit: tuple[Hashable, ...] | None
    row_labels: tuple[Hashable, ...] | None
    row_count: int | None
    #: The ledger's own history (the live list: no copy per charge), so that a copy read
    #: back after the ledger died learns which releases were made, not only their sums.
    releases: Sequence[Release]
    #: Why copies of the ledger could not be merged (every release refused), or None.
    conflict: str | None = None


# id -> its mark, for every ledger that was ever charged or given a budget in this
# process (a few hundred bytes each, plus its declared domains).
_HIGH_WATER: dict[str, _Mark] = {}


class _Registry:
    """Observes every ledger: registers it as live, and raises its high-water mark."""

    def created(self, ledger: Ledger) -> None:
        with _LOCK:
            _LIVE[ledger.id] = ledger

    def changed(self, ledger: Ledger, added: Sequence[Release]) -> None:
        total, spent, budget_set = ledger._state()
        if not all(isinstance(amount, Fraction) for amount in spent):
            raise DPFrameError("internal error: a spent amount is not exact")
        mark = _Mark(
            total,
            spent,
            budget_set,
            dict(ledger.domains),
            ledger.privacy_unit,
            ledger.row_labels,
            ledger.row_count,
            ledger._releases,
            ledger._conflict,
        )
        with _LOCK:
            _HIGH_WATER[ledger.id] = mark


Ledger._observers.append(_Registry())


class _BadRecordError(InvalidParameterError):
    """A saved ledger record that cannot be read (raised as InvalidParameterError)."""


def _bad_record(reason: str) -> _BadRecordError:
    return _BadRecordError(
        f'frame.attrs["dpframe"] (or the pickled ledger) is not a valid dpframe ledger '
        f"record: {reason}. Restore the file it came from, or, if you own the data and mean "
        f'to start a new budget, delete it with `del df.attrs["dpframe"]`.'
    )


def record_id(value: object) -> str | None:
    """The ledger id of a saved ledger record; None for anything else."""
    if isinstance(value, Mapping) and value.get("format") == FORMAT:
        found = value.get("id")
        return found if isinstance(found, str) else None
    return None


def _parse_amount(value: object, what: str, *, allow_inf: bool) -> Fraction | float:
    if not isinstance(value, str):
        raise _bad_record(f"{what} should be a string such as '1/11', got {value!r}")
    if allow_inf and value == "inf":
        return math.inf
    try:
        exact = Fraction(value)
    except (ValueError, ZeroDivisionError) as error:
        raise _bad_record(f"{what} is not an exact number: {value!r}") from error
    if exact < 0:
        raise _bad_record(f"{what} is negative: {value!r}")
    if exact > _LARGEST:  # no budget or cost dpframe writes is beyond float64's range
        raise _bad_record(f"{what} is too large: {value!r:.40}")
    return exact


_LARGEST = Fraction(sys.float_info.max)


def _parse_finite(value: object, what: str) -> Fraction:
    exact = _parse_amount(value, what, allow_inf=False)
    if not isinstance(exact, Fraction):  # pragma: no cover - allow_inf=False
        raise _bad_record(f"{what} is not finite")
    return exact


def _optional_float(value: object, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _bad_record(f"{what} should be a number or null, got {value!r}")
    try:
        return float(value)
    except OverflowError as error:  # an integer beyond float64's range
        raise _bad_record(f"{what} is too large: {value!r:.40}") from error


def _number(value: object, what: str) -> float:
    number = _optional_float(value, what)
    if number is None:
        raise _bad_record(f"{what} should be a number, got null")
    return number


def _labels(value: object, what: str) -> tuple[str, ...]:
    if isinstance(value, str):  # version 1 stored "a, b"
        return tuple(part for part in value.split(", ") if part)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _bad_record(f"{what} should be a list of strings, got {value!r}")
    return tuple(value)


def _parse_rho(value: object, what: str) -> Fraction | None:
    return None if value is None else _parse_finite(value, what)


def _parse_unit(record: Mapping[str, object], where: str) -> dict[str, Any]:
    """The privacy unit and contribution bounds of a release record (absent: per row)."""
    unit = record.get("privacy_unit")
    if unit is None:
        return {}
    limits = {}
    for name in ("max_rows", "max_groups"):
        value = record.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise _bad_record(f"{where}.{name} should be a positive integer, got {value!r}")
        limits[name] = value
    return {"privacy_unit": _labels(unit, f"{where}.privacy_unit"), **limits}


def parse_release(record: object, index: int) -> Release:
    """A :class:`Release` from its record (:meth:`Release.record`), refusing malformed ones."""
    where = f"history[{index}]"
    if not isinstance(record, Mapping):
        raise _bad_record(f"{where} is not a mapping")
    release = _parse_release(record, where)
    if release.rho is not None and (release.epsilon or release.delta):
        raise _bad_record(f"{where} is a zCDP release (rho) that also costs epsilon or delta")
    return release


def _parse_release(record: Mapping[str, object], where: str) -> Release:
    try:
        time = datetime.datetime.fromisoformat(str(record["time"]))
        bounds = record.get("bounds")
        filter_text = record.get("where")
        if filter_text is not None and not isinstance(filter_text, str):
            raise _bad_record(f"{where}.where should be a string or null")
        if bounds is not None and (not isinstance(bounds, list) or len(bounds) != 2):
            raise _bad_record(f"{where}.bounds should be [lo, hi] or null")
        return Release(
            time=time if time.tzinfo else time.replace(tzinfo=datetime.UTC),
            method=_validation.text(record["method"], f"{where}.method"),
            columns=_labels(record["columns"], f"{where}.columns"),
            where=filter_text,
            by=_labels(record.get("by", []), f"{where}.by"),
            bounds=None
            if bounds is None
            else (_number(bounds[0], f"{where}.bounds"), _number(bounds[1], f"{where}.bounds")),
            mechanism=_validation.text(record["mechanism"], f"{where}.mechanism"),
            epsilon=_parse_finite(record["epsilon"], f"{where}.epsilon"),
            delta=_parse_finite(record["delta"], f"{where}.delta"),
            sensitivity=_optional_float(record.get("sensitivity"), f"{where}.sensitivity"),
            noise_scale=_validation.noise_scale(record["noise_scale"]),
            alpha=_optional_float(record.get("alpha"), f"{where}.alpha"),
            noise_error_bound=_optional_float(
                record.get("noise_error_bound"), f"{where}.noise_error_bound"
            ),
            private=_validation.flag(record["private"], f"{where}.private"),
            rho=_parse_rho(record.get("rho"), f"{where}.rho"),
            **_parse_unit(record, where),
        )
    except _BadRecordError:
        raise
    except KeyError as error:
        raise _bad_record(f"{where} lacks the field {error}") from error
    except (TypeError, ValueError, OverflowError) as error:
        raise _bad_record(f"{where} is malformed ({error})") from error


def _decode_key(value: object, what: str) -> object:
    """A declared key from its record (see :func:`dpframe._ledger.encode_key`)."""
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, Mapping) and len(value) == 1:
        ((kind, text),) = value.items()
        if kind == "timestamp" and isinstance(text, str):
            return pd.Timestamp(text)
        if kind == "timedelta" and isinstance(text, str):
            return pd.Timedelta(text)
    raise _bad_record(f"{what} holds a key dpframe cannot read: {value!r}")


def _parse_domains(value: object) -> dict[Hashable, pd.Index]:
    if value is None:
        return {}
    if not isinstance(value, list):
        raise _bad_record("'domains' must be a list of [column, [keys]] pairs")
    domains: dict[Hashable, pd.Index] = {}
    for i, pair in enumerate(value):
        if not isinstance(pair, list) or len(pair) != 2 or not isinstance(pair[1], list):
            raise _bad_record(f"domains[{i}] must be [column, [keys]]")
        name = _decode_key(pair[0], f"domains[{i}]")
        if not isinstance(name, Hashable):
            raise _bad_record(f"domains[{i}] has an unusable column name")
        keys = [_decode_key(key, f"domains[{i}]") for key in pair[1]]
        # As declared: integers next to a missing key stay integers (nullable), not floats.
        domains[name] = _validation.keys_index(keys, any(key is None for key in keys))
    return domains


@dataclasses.dataclass(frozen=True)
class _Saved:
    ledger_id: str
    budget_set: bool
    domains: dict[Hashable, pd.Index]
    row_labels: tuple[Hashable, ...] | None
    row_count: int | None
    privacy_unit: tuple[Hashable, ...] | None
    total: Total
    spent: tuple[Fraction, Fraction, Fraction]
    releases: tuple[Release, ...]
    conflict: str | None = None


def _parse_total(total: Mapping[str, object]) -> Total:
    """``{"epsilon": ..., "delta": ...}`` (``"inf"``: unlimited) or ``{"rho": ...}``."""
    if "rho" in total:
        if "epsilon" in total or "delta" in total:
            raise _bad_record("'total' holds both an (epsilon, delta) budget and a rho budget")
        rho = _parse_amount(total.get("rho"), "total.rho", allow_inf=False)
        if not isinstance(rho, Fraction) or rho <= 0:
            raise _bad_record(f"total.rho must be > 0, got {total.get('rho')!r}")
        return Total(rho=rho)
    epsilon = _parse_amount(total.get("epsilon"), "total.epsilon", allow_inf=True)
    delta = _parse_amount(total.get("delta"), "total.delta", allow_inf=True)
    if epsilon != math.inf and delta == math.inf:
        raise _bad_record("total.delta is unlimited while total.epsilon is not")
    if delta != math.inf and not delta < 1:
        raise _bad_record(f"total.delta must be below 1, got {total.get('delta')!r}")
    return Total(epsilon, delta)


def _parse_state(state: object) -> _Saved:
    if not isinstance(state, Mapping):
        raise _bad_record(f"expected a mapping, got {type(state).__name__}")
    if state.get("format") != FORMAT:
        raise _bad_record(f"its 'format' is {state.get('format')!r}, not {FORMAT!r}")
    version = state.get("version")
    if version not in (1, 2, FORMAT_VERSION):
        raise _bad_record(
            f"its version is {version!r}; this dpframe reads versions 1 to {FORMAT_VERSION}"
        )
    ledger_id = state.get("id")
    if not isinstance(ledger_id, str) or not ledger_id:
        raise _bad_record("it has no id")
    total, spent, history = state.get("total"), state.get("spent"), state.get("history")
    if not isinstance(total, Mapping) or not isinstance(spent, Mapping):
        raise _bad_record("'total' and 'spent' must be mappings")
    if not isinstance(history, Sequence) or isinstance(history, str):
        raise _bad_record("'history' must be a list")
    parsed_total = _parse_total(total)
    # Version 1 had no "budget_set": a finite total means a budget was set.
    budget_set = state.get("budget_set", not parsed_total.unlimited)
    if not isinstance(budget_set, bool):
        raise _bad_record("'budget_set' must be true or false")
    labels = state.get("row_labels")
    if labels is not None and not isinstance(labels, list):
        raise _bad_record("'row_labels' must be a list of index names, or null")
    row_labels = (
        None if labels is None else tuple(_decode_key(name, "row_labels") for name in labels)
    )
    row_count = state.get("row_count")
    if row_count is not None and (
        isinstance(row_count, bool) or not isinstance(row_count, int) or row_count < 0
    ):
        raise _bad_record("'row_count' must be a number of rows, or null")
    unit = state.get("privacy_unit")
    if unit is not None and not isinstance(unit, list):
        raise _bad_record("'privacy_unit' must be a list of column names, or null")
    privacy_unit = (
        None if unit is None else tuple(_decode_key(name, "privacy_unit") for name in unit)
    )
    conflict = state.get("conflict")
    if conflict is not None and (not isinstance(conflict, str) or not conflict):
        raise _bad_record("'conflict' must be a text, or absent")
    return _Saved(
        conflict=conflict,
        ledger_id=ledger_id,
        privacy_unit=privacy_unit,
        budget_set=budget_set,
        domains=_parse_domains(state.get("domains")),
        row_labels=row_labels,
        row_count=row_count,
        total=parsed_total,
        spent=(
            _parse_finite(spent.get("epsilon"), "spent.epsilon"),
            _parse_finite(spent.get("delta"), "spent.delta"),
            _parse_rho(spent.get("rho"), "spent.rho") or Fraction(0),
        ),
        releases=tuple(parse_release(record, i) for i, record in enumerate(history)),
    )


def restore(state: object, instance: str | None = None) -> Ledger:
    """The live ledger a saved record belongs to, or one rebuilt from the record.

    Whichever it is absorbs the record conservatively (lowest total, highest spent), as
    well as this process's high-water mark for that id, so a saved copy never refunds.
    A record pickled from the very ledger object that is alive here (``instance``, that
    object's own name: Dask pickling a graph in this process) knows nothing the ledger
    does not (a ledger only ever spends more, lowers its total or learns declarations),
    so it is returned without waiting for the ledger's lock, which a long call such as
    ``agg`` holds while Dask computes (the scheduler unpickles the graph meanwhile).
    """
    if instance is not None:  # checked before the record is parsed (Dask: every task)
        ledger_id = record_id(state)
        with _LOCK:
            live = None if ledger_id is None else _LIVE.get(ledger_id)
        if live is not None and live._instance == instance:
            return live
    saved = _parse_state(state)
    # _LOCK is never held while waiting for a live ledger's lock: a charge holds its
    # ledger's lock while it updates the registries (under _LOCK), and a long call holds
    # its ledger throughout (agg), so waiting there with _LOCK held would deadlock. A
    # ledger rebuilt here is touched under _LOCK only while no other thread can reach it
    # (it is found through _LIVE, which _LOCK guards).
    with _LOCK:
        ledger = _LIVE.get(saved.ledger_id)
        if ledger is None:
            mark = _HIGH_WATER.get(saved.ledger_id)
            ledger = Ledger._rebuilt(
                saved.ledger_id,
                saved.total,
                saved.releases,
                budget_set=saved.budget_set,
                domains=saved.domains,
                row_labels=saved.row_labels,
                privacy_unit=saved.privacy_unit,
                row_count=saved.row_count,
            )
            if mark is not None:  # what the ledger reached after this copy was saved
                _absorb(ledger, mark, "spent after this copy was saved")
    _absorb(ledger, saved, "spent in another copy of this ledger")
    return ledger


def _absorb(ledger: Ledger, copy: _Mark | _Saved, why: str) -> None:
    """Merge what another copy of the ledger knows into ``ledger`` (see Ledger._absorb)."""
    ledger._absorb(
        copy.total,
        copy.spent,
        why,
        budget_set=copy.budget_set,
        domains=copy.domains,
        privacy_unit=copy.privacy_unit,
        row_labels=copy.row_labels,
        row_count=copy.row_count,
        releases=copy.releases,
        conflict=copy.conflict,
    )


def unpickle_ledger(state: dict[str, Any], instance: str | None = None) -> Ledger:
    """What ``pickle`` calls to load a :class:`Ledger` (see ``Ledger.__reduce__``)."""
    return restore(state, instance)


def is_live(ledger_id: str) -> bool:
    """Whether a ledger with this id is alive in this process (for tests and diagnostics)."""
    with _LOCK:
        return ledger_id in _LIVE
