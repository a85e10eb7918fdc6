"""The privacy ledger's accounting: a budget, what was spent, and on which releases.

A :class:`Ledger` holds a total privacy budget ``(epsilon, delta)``, what has been spent
so far and one :class:`~dpframe._release.Release` per release, all in exact rational
arithmetic. The accessor spends through :meth:`Ledger.transaction`: the whole cost of a
call is checked on entry, and on exit every part whose noise was drawn is charged, also
when a later step failed; a call refused before any draw charges nothing.

This module is only the accounting. How a ledger follows its data through pandas
(``frame.attrs``) is :mod:`dpframe._attrs`; how it survives pickle and parquet, and the
registry of live ledgers, is :mod:`dpframe._persistence`. Both observe the ledger through
:class:`LedgerObserver`, so the ledger knows neither.
"""

from __future__ import annotations

import datetime
import html
import math
import threading
import types
import uuid
from collections.abc import Hashable, Mapping, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np
import pandas as pd

from dpframe import _validation
from dpframe._budget import Budget, exact_text, fraction_text
from dpframe._release import JSONValue, Release
from dpframe.errors import (
    BudgetExceededError,
    BudgetNotSetError,
    DomainError,
    DPFrameError,
    InvalidParameterError,
    InvalidParameterTypeError,
)

if TYPE_CHECKING:
    from dpframe._typing import PrivacyAmount

__all__ = ["FORMAT", "FORMAT_VERSION", "HISTORY_COLUMNS", "Ledger", "LedgerObserver", "Transaction"]

#: The marker and version of the JSON-serializable ledger record (to_dict, attrs, files).
FORMAT = "dpframe.ledger"
FORMAT_VERSION = 2

_ZERO = Fraction(0)

HISTORY_COLUMNS = (
    "time",
    "method",
    "columns",
    "where",
    "by",
    "bounds",
    "mechanism",
    "epsilon",
    "delta",
    "noise_scale",
    "noise_error_bound",
    "private",
)

#: Where pandas drops ``attrs`` (and so the ledger), said in the no-budget error.
_LEDGER_LOST = (
    "pandas drops the ledger (kept in df.attrs) when it builds a frame that is not derived "
    "from this one through attrs: pd.DataFrame(df), pivot, groupby(...).agg(func), "
    "value_counts, pd.crosstab, a merge/join/concat with a frame that carries no ledger "
    "(use df.dp.merge or df.dp.join, which keep it), reading a CSV, or a frame "
    "derived from this data before set_budget was called (derive it again after); with "
    "Dask, persist() or to_parquet() of a concat or merge with a frame that has no ledger "
    "(persist the inputs, then combine them)"
)


class LedgerObserver(Protocol):
    """Something that follows every ledger: the attrs mirror, the registry of live ledgers."""

    def created(self, ledger: Ledger) -> None:
        """Called once for every new ledger (new, or rebuilt from a saved record)."""

    def changed(self, ledger: Ledger, added: Sequence[Release]) -> None:
        """Called after every change, under the ledger's lock, with the releases it added."""


class Ledger:
    """The privacy budget of one data set: its total, what was spent and on what.

    A new ledger has no budget: it records what is charged to it, but the ``.dp``
    accessor refuses to release from data whose ledger has none, until
    :meth:`set_budget` is called (``set_budget(epsilon=math.inf)`` explores without a
    limit, for teaching).

    Notes
    -----
    **Accounting.** Costs add under basic sequential composition (Dwork and Roth 2014,
    Theorem 3.16): a sequence of releases of costs ``(ε_i, δ_i)`` on the same data is
    ``(Σ ε_i, Σ δ_i)``-differentially private, neighbouring data sets differing by one
    added or removed row. A release is allowed only when ``spent + cost <= total`` in
    both components. Every amount is an exact :class:`~fractions.Fraction`: eleven
    charges of 1/11 fit exactly in a budget of 1, and ``0.1 + 0.2`` is spent as 3/10.

    **Check, then draw, then charge.** :meth:`transaction` checks the whole cost of a
    call before any noise is drawn (a refused call charges nothing and draws nothing)
    and charges, on exit, every part whose noise was drawn, re-checking atomically under
    the ledger's lock. If two threads race for the last of the budget and the charge is
    refused, the caller discards what it drew.

    **Budget rules.** The first :meth:`set_budget` may not go below what was already
    spent. Once a budget is set it can be lowered (or set again to the same value) but
    never raised in either component: raising it would let anyone refund themselves.

    **What the ledger cannot stop.** Whoever holds the raw data can bypass it:
    ``to_numpy()``, building a new DataFrame from the values, clearing ``df.attrs``,
    editing a saved file. Its purpose is to stop honest mistakes (spending one budget
    twice, losing track of spending through a copy, a filter or a round trip to disk),
    not a hostile analyst with access to the data.

    References
    ----------
    C. Dwork and A. Roth, "The Algorithmic Foundations of Differential Privacy",
    Foundations and Trends in Theoretical Computer Science 9(3-4), 2014, Theorem 3.16.
    Seed ``004_2d340d4f6924174c.txt`` (section "Privacy Budget": what spends budget).

    Examples
    --------
    >>> from fractions import Fraction
    >>> from dpframe import Ledger
    >>> ledger = Ledger()
    >>> ledger.set_budget(1.0)
    >>> for _ in range(11):
    ...     ledger.charge(method="count", columns=["age"], mechanism="geometric",
    ...                   epsilon=Fraction(1, 11), delta=Fraction(0), noise_scale=11.0,
    ...                   private=True)
    >>> ledger.remaining
    Budget(epsilon=0, delta=0)
    """

    __slots__ = (
        "__weakref__",
        "_attachment",
        "_budget_set",
        "_domains",
        "_id",
        "_lock",
        "_privacy_unit",
        "_releases",
        "_row_labels",
        "_spent_delta",
        "_spent_epsilon",
        "_total_delta",
        "_total_epsilon",
    )

    #: Observers of every ledger (registered by dpframe._attrs and dpframe._persistence).
    _observers: ClassVar[list[LedgerObserver]] = []

    _id: str
    _lock: threading.RLock
    _budget_set: bool
    _total_epsilon: Fraction | float
    _total_delta: Fraction | float
    _spent_epsilon: Fraction
    _spent_delta: Fraction
    _releases: list[Release]
    _attachment: object  # the attrs handle, owned by dpframe._attrs
    _domains: dict[Hashable, pd.Index]
    _row_labels: tuple[Hashable, ...] | None
    _privacy_unit: tuple[Hashable, ...] | None

    def __init__(self) -> None:
        self._setup(uuid.uuid4().hex)

    @classmethod
    def _rebuilt(
        cls,
        ledger_id: str,
        total: tuple[Fraction | float, Fraction | float],
        releases: Sequence[Release],
        *,
        budget_set: bool,
        domains: Mapping[Hashable, pd.Index],
        row_labels: tuple[Hashable, ...] | None,
        privacy_unit: tuple[Hashable, ...] | None = None,
    ) -> Ledger:
        """A ledger rebuilt from a saved record (for :mod:`dpframe._persistence`)."""
        ledger = cls.__new__(cls)
        ledger._setup(ledger_id, announce=False)
        ledger._total_epsilon, ledger._total_delta = total
        ledger._budget_set = budget_set
        ledger._domains = dict(domains)
        ledger._row_labels = row_labels
        ledger._privacy_unit = privacy_unit
        for release in releases:
            ledger._releases.append(release)
            ledger._spent_epsilon += release.epsilon
            ledger._spent_delta += release.delta
        ledger._announce()
        return ledger

    def _setup(self, ledger_id: str, *, announce: bool = True) -> None:
        self._id = ledger_id
        self._lock = threading.RLock()
        self._budget_set = False
        self._total_epsilon = math.inf
        self._total_delta = math.inf
        self._spent_epsilon = _ZERO
        self._spent_delta = _ZERO
        self._releases = []
        self._attachment = None
        self._domains = {}
        self._row_labels = None
        self._privacy_unit = None
        if announce:
            self._announce()

    def _announce(self) -> None:
        for observer in Ledger._observers:
            observer.created(self)

    # ---------------------------------------------------------------- state

    @property
    def id(self) -> str:
        """The ledger's identifier (a uuid4 in hex), kept through pickle and parquet."""
        return self._id

    @property
    def budget_set(self) -> bool:
        """True once :meth:`set_budget` was called (an unlimited budget counts as set)."""
        return self._budget_set

    @property
    def domains(self) -> Mapping[Hashable, pd.Index]:
        """The keys declared for the data set's grouping columns (read-only).

        See Also
        --------
        DPAccessor.set_budget : Declares them, with ``domains=``.
        """
        with self._lock:
            return types.MappingProxyType(dict(self._domains))

    @property
    def privacy_unit(self) -> tuple[Hashable, ...] | None:
        """The columns that identify the protected entity (a person, a household...), or None.

        None: each row is one unit (neighbouring data sets differ by one row). Otherwise
        neighbouring data sets differ by all the rows of one unit, and every release
        bounds each unit's contribution.
        """
        return self._privacy_unit

    @property
    def row_labels(self) -> tuple[Hashable, ...] | None:
        """The index level names of the frame given the budget, if its labels were unique.

        A frame derived from it with the same index (same names) that repeats labels
        (``pd.concat([df, df])``) gives some people several rows, and is refused. None
        when the labels were not unique, or are unknown (Dask).
        """
        return self._row_labels

    @property
    def total(self) -> Budget:
        """The total budget; ``Budget(epsilon=inf, delta=inf)`` while none is set."""
        with self._lock:
            return Budget(self._total_epsilon, self._total_delta)

    @property
    def spent(self) -> Budget:
        """The exact sum of the costs of every recorded release."""
        with self._lock:
            return Budget(self._spent_epsilon, self._spent_delta)

    @property
    def remaining(self) -> Budget:
        """``total - spent`` in each component (never below 0; ``inf`` when unlimited)."""
        with self._lock:
            return Budget(
                _remaining(self._total_epsilon, self._spent_epsilon),
                _remaining(self._total_delta, self._spent_delta),
            )

    @property
    def history(self) -> pd.DataFrame:
        """One row per release, for display.

        Columns: ``time`` (UTC timestamp); ``method``, ``columns``, ``where``, ``by``,
        ``bounds``, ``mechanism`` (str; ``where`` and ``bounds`` empty when not used);
        ``epsilon``, ``delta`` (float64; the exact costs are kept internally and in
        :meth:`to_dict`); ``noise_scale`` and ``noise_error_bound`` (float64, NaN when
        the release has none; for a table, the largest bar of its cells and margins);
        ``private`` (bool: False for releases drawn from a caller's ``rng``).
        """
        with self._lock:
            releases = list(self._releases)
        return _history_frame(releases)

    def to_dict(self) -> dict[str, JSONValue]:
        """The ledger's state as JSON-serializable data.

        Returns
        -------
        dict
            ``{"format": "dpframe.ledger", "version": 2, "id": ..., "budget_set": ...,
            "total": {"epsilon": ..., "delta": ...}, "spent": {...}, "history": [...]}``.
            Amounts are exact fraction strings (``"1/11"``, ``"0"``, ``"inf"``), times
            ISO 8601 strings in UTC.
        """
        with self._lock:
            return {
                "format": FORMAT,
                "version": FORMAT_VERSION,
                "id": self._id,
                "budget_set": self._budget_set,
                "total": self._total_record(),
                "spent": self._spent_record(),
                "history": [release.record() for release in self._releases],
                "domains": self._domains_record(),
                "row_labels": None
                if self._row_labels is None
                else [encode_key(name) for name in self._row_labels],
                "privacy_unit": None
                if self._privacy_unit is None
                else [encode_key(name) for name in self._privacy_unit],
            }

    def _domains_record(self) -> list[JSONValue]:
        """The declared domains as ``[[column, [key, ...]], ...]`` (see :func:`encode_key`)."""
        return [
            [encode_key(name), [encode_key(key) for key in keys]]
            for name, keys in self._domains.items()
        ]

    def _total_record(self) -> dict[str, JSONValue]:
        """The total as exact strings (``"1/2"``, ``"inf"``)."""
        return {
            "epsilon": fraction_text(self._total_epsilon),
            "delta": fraction_text(self._total_delta),
        }

    def _spent_record(self) -> dict[str, JSONValue]:
        """What was spent, as exact strings."""
        return {
            "epsilon": fraction_text(self._spent_epsilon),
            "delta": fraction_text(self._spent_delta),
        }

    # ---------------------------------------------------------------- budget

    def set_budget(self, epsilon: PrivacyAmount, delta: PrivacyAmount | None = None) -> None:
        """Set the total privacy budget (first time), or lower it.

        Parameters
        ----------
        epsilon : float or Fraction
            Total privacy-loss budget: a number > 0, or ``math.inf`` for an explicitly
            unlimited budget (for teaching and exploration; shown as unlimited).
        delta : float or Fraction, optional
            Total failure-probability budget, in ``[0, 1)``; default 0, or ``math.inf``
            (unlimited) when ``epsilon`` is ``math.inf``. Both components are set:
            ``set_budget(0.5)`` on a ledger with ``delta=1e-6`` sets ``delta`` to 0.

        Raises
        ------
        InvalidParameterError, InvalidParameterTypeError
            For an epsilon that is not a number > 0 (or ``math.inf``), a delta outside
            ``[0, 1)``, or when a budget is already set and either component would be
            raised.
        BudgetExceededError
            When the new total is below what has already been spent.

        Notes
        -----
        The first call may set any total at least equal to what was spent meanwhile.
        Later calls may keep or lower each component, never raise it, and never go below
        the spent amount. Raising is refused because it would refund spent privacy: if
        the data owner grants a new budget, build a new frame from the source data.
        Nothing changes when a call is refused.
        """
        new_epsilon, new_delta = _validation.budget(epsilon, delta)
        with self._lock:
            if self._budget_set and (
                new_epsilon > self._total_epsilon or new_delta > self._total_delta
            ):
                raise InvalidParameterError(
                    f"set_budget(epsilon={exact_text(new_epsilon)}, "
                    f"delta={exact_text(new_delta)}) would raise the budget already set, "
                    f"{self.total}; a budget can be lowered but never raised, since "
                    f"raising it would refund privacy already spent. Pass "
                    f"epsilon <= {exact_text(self._total_epsilon)} and "
                    f"delta <= {exact_text(self._total_delta)}; if the data owner grants "
                    f"a new budget, build a new frame from the source data."
                )
            if new_epsilon < self._spent_epsilon or new_delta < self._spent_delta:
                raise BudgetExceededError(
                    f"set_budget(epsilon={exact_text(new_epsilon)}, "
                    f"delta={exact_text(new_delta)}) is below what this data has already "
                    f"spent, {self.spent}, over {len(self._releases)} release(s). Pass "
                    f"epsilon >= {exact_text(self._spent_epsilon)} and "
                    f"delta >= {exact_text(self._spent_delta)}."
                )
            self._total_epsilon = new_epsilon
            self._total_delta = new_delta
            self._budget_set = True
            self._changed(())

    def declare_domains(
        self,
        domains: Mapping[Hashable, pd.Index],
        *,
        row_labels: tuple[Hashable, ...] | None = None,
        privacy_unit: tuple[Hashable, ...] | None = None,
    ) -> None:
        """Record the declared keys of grouping columns (already validated by the caller).

        Parameters
        ----------
        domains : mapping of column name to pandas.Index
            The keys of each column, in order; the accessor checks them against the
            frame's dtypes first.
        row_labels : tuple, optional
            The index level names of the frame given the budget, when its labels are
            unique (see :attr:`row_labels`).
        privacy_unit : tuple, optional
            The columns that identify a privacy unit (see :attr:`privacy_unit`).

        Raises
        ------
        DomainError
            When a column's keys were already declared differently: a data set's code book
            does not change between releases.
        """
        with self._lock:
            for name, keys in domains.items():
                known = self._domains.get(name)
                if known is not None and not known.equals(keys):
                    raise DomainError(
                        f"the keys of {name!r} were already declared for this data set as "
                        f"{list(known)[:10]!r}; a data set's declared keys do not change. Pass "
                        f"other keys for one call with domain=, or leave them as declared."
                    )
            self._domains.update(domains)
            if privacy_unit is not None and privacy_unit != self._privacy_unit:
                if self._privacy_unit is not None:
                    raise InvalidParameterError(
                        f"this data set's privacy unit is already {list(self._privacy_unit)!r}; "
                        f"it cannot change (releases were accounted for it)."
                    )
                if self._releases:
                    raise InvalidParameterError(
                        f"privacy_unit={list(privacy_unit)!r} comes after {len(self._releases)} "
                        f"release(s) accounted with one row as the unit; they would cost more "
                        f"per person than was charged. Declare the unit with the first "
                        f"set_budget, on a new frame from the source data."
                    )
                self._privacy_unit = privacy_unit
            if row_labels is not None and self._row_labels is None:
                self._row_labels = row_labels
            self._changed(())

    # ---------------------------------------------------------------- spending

    def check(self, epsilon: Fraction, delta: Fraction = _ZERO) -> None:
        """Refuse a release that does not fit in what remains. Never changes state.

        Parameters
        ----------
        epsilon : Fraction
            The release's epsilon cost, an exact rational >= 0 (ints are accepted).
        delta : Fraction, default 0
            The release's delta cost, an exact rational in ``[0, 1)``.

        Raises
        ------
        BudgetExceededError
            When ``spent + cost`` exceeds ``total`` in either component. The message
            states what was asked, what remains and how to fix it.
        InvalidParameterError
            For a negative cost, a delta cost >= 1, or a float cost (NaN and
            infinities included): costs must be exact.
        InvalidParameterTypeError
            For a cost that is not a number at all (str, None, bool).
        """
        cost_epsilon = _validation.cost(epsilon, "epsilon")
        cost_delta = _validation.cost(delta, "delta")
        with self._lock:
            self._check_locked(cost_epsilon, cost_delta)

    def _check_locked(self, epsilon: Fraction, delta: Fraction) -> None:
        over_epsilon = self._spent_epsilon + epsilon > self._total_epsilon
        over_delta = self._spent_delta + delta > self._total_delta
        if not (over_epsilon or over_delta):
            return
        remaining = self.remaining
        asked = f"epsilon={exact_text(epsilon)}, delta={exact_text(delta)}"
        fixes = []
        if over_epsilon:
            fixes.append(f"epsilon <= {exact_text(remaining.epsilon)}")
        if over_delta:
            fixes.append(f"delta <= {exact_text(remaining.delta)}")
        raise BudgetExceededError(
            f"This release needs {asked}, but only epsilon={exact_text(remaining.epsilon)}, "
            f"delta={exact_text(remaining.delta)} remains of the total budget "
            f"{self.total} ({len(self._releases)} release(s) so far). Nothing was charged. "
            f"Ask for {' and '.join(fixes)}, or release fewer statistics; a budget, once "
            f"set, cannot be raised."
        )

    def transaction(self, epsilon: Fraction, delta: Fraction = _ZERO) -> Transaction:
        """Spend on one call: check ``(epsilon, delta)`` now, charge the drawn parts on exit.

        Parameters
        ----------
        epsilon, delta : Fraction
            The whole cost of the call, every part included.

        Returns
        -------
        Transaction
            A context manager; call :meth:`Transaction.drawn` right after each part's
            noise is drawn.

        Raises
        ------
        BudgetNotSetError
            When no budget was ever set on this ledger.
        BudgetExceededError
            When the cost does not fit (nothing is drawn or charged).
        """
        if not self._budget_set:
            raise BudgetNotSetError(
                "This frame's data has no privacy budget, so dpframe will not release from "
                "it. Call df.dp.set_budget(epsilon=...) with the total budget for this data "
                "(or df.dp.set_budget(epsilon=math.inf) to explore without a limit, in "
                "class). If you did set a budget on the frame this one came from, the "
                f"ledger was lost on the way: {_LEDGER_LOST}."
            )
        return Transaction(self, epsilon, delta)

    def charge(
        self,
        *,
        method: str,
        columns: Sequence[str] | str,
        mechanism: str,
        epsilon: Fraction,
        delta: Fraction,
        noise_scale: float | None,
        private: bool,
    ) -> None:
        """Record one release described by keywords: re-check that it fits, then add its cost.

        Parameters
        ----------
        method : str
            The releasing method, e.g. ``"crosstab"``.
        columns : sequence of str
            The columns the release read (labels are shown with ``str``; a single
            string counts as one column).
        mechanism : str
            The noise mechanism, e.g. ``"geometric"``.
        epsilon, delta : Fraction
            The exact cost (see :meth:`check`).
        noise_scale : float or None
            The scale of the noise (for display), a finite number >= 0, or None.
        private : bool
            False when the noise came from a seeded generator (``rng=``).

        Raises
        ------
        BudgetExceededError
            When the cost no longer fits (nothing is recorded; discard the release).
        InvalidParameterError, InvalidParameterTypeError
            For a bad cost (see :meth:`check`) or metadata of the wrong type.
        """
        release = Release(
            method=_validation.text(method, "method"),
            columns=_validation.label_texts(columns, "columns"),
            mechanism=_validation.text(mechanism, "mechanism"),
            epsilon=_validation.cost(epsilon, "epsilon"),
            delta=_validation.cost(delta, "delta"),
            sensitivity=None,
            noise_scale=_validation.noise_scale(noise_scale),
            private=_validation.flag(private, "private"),
        )
        self.charge_many([release])

    def charge_many(self, releases: Sequence[Release]) -> None:
        """Record several releases (the parts of one call), all or none.

        Parameters
        ----------
        releases : sequence of Release
            The parts, each with its exact cost.

        Raises
        ------
        BudgetExceededError
            When their summed cost does not fit (nothing is recorded).

        Notes
        -----
        The summed cost is re-checked under the ledger's lock, so a concurrent release
        cannot leave some parts charged and others refused.
        """
        for release in releases:
            if not isinstance(release, Release):
                raise DPFrameError(f"internal error: charge_many got {release!r}")
            _validation.cost(release.epsilon, "epsilon")
            _validation.cost(release.delta, "delta")
        total_epsilon = sum((r.epsilon for r in releases), _ZERO)
        total_delta = sum((r.delta for r in releases), _ZERO)
        with self._lock:
            self._check_locked(total_epsilon, total_delta)
            for release in releases:
                self._releases.append(release)
                self._spent_epsilon += release.epsilon
                self._spent_delta += release.delta
            self._changed(releases)

    def _absorb(
        self,
        total: tuple[Fraction | float, Fraction | float],
        spent: tuple[Fraction, Fraction],
        why: str,
        *,
        budget_set: bool,
        domains: Mapping[Hashable, pd.Index] | None = None,
    ) -> None:
        """Merge another copy's state conservatively: lowest total, highest spent.

        A spent amount above ours is recorded as one release row holding the difference
        (method ``"(restored)"``), so that ``spent`` stays the exact sum of the history.
        """
        with self._lock:
            missing_epsilon = max(_ZERO, spent[0] - self._spent_epsilon)
            missing_delta = max(_ZERO, spent[1] - self._spent_delta)
            lower_total = total[0] < self._total_epsilon or total[1] < self._total_delta
            added: list[Release] = []
            if missing_epsilon or missing_delta:
                added.append(
                    Release(
                        method="(restored)",
                        columns=(),
                        mechanism=why,
                        epsilon=missing_epsilon,
                        delta=missing_delta,
                        sensitivity=None,
                        noise_scale=None,
                        private=True,
                        alpha=None,
                    )
                )
                self._releases.extend(added)
                self._spent_epsilon += missing_epsilon
                self._spent_delta += missing_delta
            if lower_total:
                self._total_epsilon = min(self._total_epsilon, total[0])
                self._total_delta = min(self._total_delta, total[1])
            set_now = budget_set and not self._budget_set
            self._budget_set = self._budget_set or budget_set
            new_domains = {
                name: keys for name, keys in (domains or {}).items() if name not in self._domains
            }
            self._domains.update(new_domains)
            if added or lower_total or set_now or new_domains:
                self._changed(added)

    def _changed(self, added: Sequence[Release]) -> None:
        """Tell the observers (lock held)."""
        for observer in Ledger._observers:
            observer.changed(self, added)

    # ---------------------------------------------------------------- copying

    def __copy__(self) -> Ledger:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Ledger:
        return self

    def __reduce__(self) -> tuple[Any, tuple[dict[str, JSONValue]]]:
        # Imported here: _persistence builds ledgers, so it imports this module.
        from dpframe._persistence import unpickle_ledger

        return (unpickle_ledger, (self.to_dict(),))

    # ---------------------------------------------------------------- display

    def _total_text(self) -> str:
        if not self._budget_set:
            return "not set"
        total = self.total
        if total.unlimited:
            return "unlimited"
        return repr(total)

    def __repr__(self) -> str:
        with self._lock:
            return (
                f"Ledger(total={self._total_text()}, spent={self.spent}, "
                f"remaining={self.remaining if self._budget_set else 'not set'}, "
                f"releases={len(self._releases)})"
            )

    def _repr_html_(self) -> str:
        """An HTML summary for notebooks: total, spent and remaining, then the history."""
        with self._lock:
            status = self._total_text()
            rows = [("total", self.total), ("spent", self.spent), ("remaining", self.remaining)]
            releases = list(self._releases)
        note = "" if status.startswith("Budget") else f"<p>budget: <b>{html.escape(status)}</b></p>"
        cells = "".join(
            f"<tr><th>{name}</th><td>{html.escape(exact_text(amount.epsilon))}</td>"
            f"<td>{html.escape(exact_text(amount.delta))}</td></tr>"
            for name, amount in rows
        )
        summary = (
            "<table><thead><tr><th>privacy budget</th><th>epsilon</th><th>delta</th></tr>"
            f"</thead><tbody>{cells}</tbody></table>"
        )
        if releases:
            shown = _history_frame(releases)
            shown["epsilon"] = [exact_text(r.epsilon) for r in releases]
            shown["delta"] = [exact_text(r.delta) for r in releases]
            history = f"<p>{len(releases)} release(s):</p>" + shown.to_html(index=False)
        else:
            history = "<p>No releases yet.</p>"
        return f'<div class="dpframe-ledger">{note}{summary}{history}</div>'


class Transaction:
    """One call's spending: the whole cost checked on entry, drawn parts charged on exit.

    Use it as ``with ledger.transaction(epsilon) as spending:`` and call
    :meth:`drawn` right after each part's noise is drawn. On exit, normal or by an
    exception, every drawn part is charged at once (drawn noise is never free); when
    nothing was drawn, nothing is charged.
    """

    def __init__(self, ledger: Ledger, epsilon: Fraction, delta: Fraction) -> None:
        self._ledger = ledger
        self._epsilon = _validation.cost(epsilon, "epsilon")
        self._delta = _validation.cost(delta, "delta")
        self._parts: list[Release] = []

    @property
    def parts(self) -> tuple[Release, ...]:
        """The parts drawn so far, in order."""
        return tuple(self._parts)

    def __enter__(self) -> Transaction:
        self._ledger.check(self._epsilon, self._delta)
        return self

    def drawn(self, *releases: Release) -> None:
        """Record that these releases' noise was drawn: charged on exit, whatever happens."""
        parts = [*self._parts, *releases]
        spent_epsilon = sum((p.epsilon for p in parts), Fraction(0))
        spent_delta = sum((p.delta for p in parts), Fraction(0))
        if spent_epsilon > self._epsilon or spent_delta > self._delta:
            raise DPFrameError(
                "internal error: a release drew more than the cost checked for its call; "
                "please report"
            )
        self._parts = parts

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: types.TracebackType | None,
    ) -> None:
        if self._parts:
            self._ledger.charge_many(self._parts)


def encode_key(key: object) -> JSONValue:
    """A declared key (or column name) as JSON data; missing keys become null.

    Strings, integers, booleans and floats are stored as they are; timestamps and time
    deltas as tagged ISO strings (``{"timestamp": "2020-01-01T00:00:00"}``).
    """
    if isinstance(key, np.generic):
        key = key.item()
    if key is None or (isinstance(key, float) and math.isnan(key)) or key is pd.NaT:
        return None
    if isinstance(key, str | bool | int | float):
        return key
    if isinstance(key, pd.Timestamp | datetime.datetime):
        return {"timestamp": pd.Timestamp(key).isoformat()}
    if isinstance(key, pd.Timedelta | datetime.timedelta):
        return {"timedelta": pd.Timedelta(key).isoformat()}
    raise InvalidParameterTypeError(
        f"a key of type {type(key).__name__} ({key!r}) cannot be declared for the data set "
        f"(it must survive a parquet file); declare it for one call with domain= instead."
    )


def _remaining(total: Fraction | float, spent: Fraction) -> Fraction | float:
    if not isinstance(total, Fraction):
        return math.inf
    return max(_ZERO, total - spent)


def _largest(bound: object) -> float:
    if bound is None:
        return math.nan
    if isinstance(bound, np.ndarray):
        return float(bound.max()) if bound.size else math.nan
    return float(bound)  # type: ignore[arg-type]


def _bounds_text(bounds: tuple[float, float] | None) -> str:
    return "" if bounds is None else f"({bounds[0]:g}, {bounds[1]:g})"


def _history_frame(releases: Sequence[Release]) -> pd.DataFrame:
    def text(values: list[str]) -> Any:
        return pd.array(values, dtype="str")

    return pd.DataFrame(
        {
            "time": pd.DatetimeIndex([r.time for r in releases], dtype="datetime64[us, UTC]"),
            "method": text([r.method for r in releases]),
            "columns": text([", ".join(r.columns) for r in releases]),
            "where": text([r.where or "" for r in releases]),
            "by": text([", ".join(r.by) for r in releases]),
            "bounds": text(
                [
                    "" if r.bounds is None else f"({r.bounds[0]:g}, {r.bounds[1]:g})"
                    for r in releases
                ]
            ),
            "mechanism": text([r.mechanism for r in releases]),
            "epsilon": np.array([float(r.epsilon) for r in releases], dtype=np.float64),
            "delta": np.array([float(r.delta) for r in releases], dtype=np.float64),
            "noise_scale": np.array(
                [math.nan if r.noise_scale is None else r.noise_scale for r in releases],
                dtype=np.float64,
            ),
            "noise_error_bound": np.array(
                [_largest(r.noise_error_bound) for r in releases], dtype=np.float64
            ),
            "private": np.array([r.private for r in releases], dtype=np.bool_),
        },
        columns=list(HISTORY_COLUMNS),
    )
