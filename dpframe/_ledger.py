"""The privacy ledger's accounting: a budget, what was spent, and on which releases.

A :class:`Ledger` holds a total privacy budget, ``(epsilon, delta)`` or ``rho`` (zCDP),
what has been spent so far and one :class:`~dpframe._release.Release` per release, each
costed in its own measure (pure epsilon, approximate (epsilon, delta), or zCDP rho), all
in exact rational arithmetic. The accessor spends through :meth:`Ledger.transaction`:
the whole cost of a call is checked on entry, and on exit every part whose noise was
drawn is charged, also when a later step failed; a call refused before any draw charges
nothing. How costs of different measures compose is :mod:`dpframe._composition`.

This module is only the accounting. How a ledger follows its data through pandas
(``frame.attrs``) is :mod:`dpframe._attrs`; how it survives pickle and parquet, and the
registry of live ledgers, is :mod:`dpframe._persistence`. Both observe the ledger through
:class:`LedgerObserver`, so the ledger knows neither.
"""

from __future__ import annotations

import contextlib
import datetime
import html
import json
import math
import threading
import types
import uuid
from collections.abc import Hashable, Iterator, Mapping, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np
import pandas as pd

from dpframe import _composition, _validation
from dpframe._budget import Budget, budget_rho, exact_text, fraction_text
from dpframe._composition import RESTORED, Account, Cost, Total
from dpframe._release import JSONValue, Release
from dpframe.errors import (
    BudgetExceededError,
    BudgetNotSetError,
    DomainError,
    DPFrameError,
    InvalidParameterError,
    InvalidParameterTypeError,
    LedgerConflictError,
    PrivacyUnitError,
)

if TYPE_CHECKING:
    from dpframe._typing import PrivacyAmount

__all__ = ["FORMAT", "FORMAT_VERSION", "HISTORY_COLUMNS", "Ledger", "LedgerObserver", "Transaction"]

#: The marker and version of the JSON-serializable ledger record (to_dict, attrs, files).
#: Version 3 added zCDP: rho budgets, and a "rho" cost on zCDP releases. Readers of
#: version 2 refuse version 3, so they never read zCDP spending as free.
FORMAT = "dpframe.ledger"
FORMAT_VERSION = 3

_ZERO = Fraction(0)

HISTORY_COLUMNS = (
    "time",
    "method",
    "columns",
    "where",
    "by",
    "bounds",
    "mechanism",
    "measure",
    "epsilon",
    "delta",
    "rho",
    "noise_scale",
    "noise_error_bound",
    "private",
    "privacy_unit",
    "max_rows",
    "max_groups",
)

#: Where pandas drops ``attrs`` (and so the ledger), said in the no-budget error.
_LEDGER_LOST = (
    "pandas drops the ledger (kept in df.attrs) when it builds a frame that is not derived "
    "from this one through attrs: pd.DataFrame(df), pivot, groupby(...).agg(func), "
    "value_counts, pd.crosstab, a merge/join/concat with a frame that carries no ledger "
    "(use df.dp.merge or df.dp.join, which keep it), a concat of parts read back from "
    "files saved at different moments of the ledger (touch part.dp.ledger on each part "
    "first, then concat: do not set a new budget, the parts' data already spent some), "
    "reading a CSV, or a frame "
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
    **Measures.** Each release is recorded in its own measure: pure ``epsilon``-DP
    (geometric, Laplace), approximate ``(epsilon, delta)``-DP (``delta > 0``), or
    ``rho``-zCDP (discrete Gaussian noise, zero-concentrated DP). A budget is
    ``(epsilon, delta)`` or ``rho``. Neighbouring data sets differ by one added or
    removed row (or by one privacy unit's rows, see :attr:`privacy_unit`).

    **Accounting** is a privacy filter, valid when each release's cost is chosen after
    seeing earlier results. Against an ``(epsilon, delta)`` budget, pure and approximate
    costs add up (basic composition: Rogers, Roth, Ullman and Vadhan 2016) until the
    first zCDP release; that release turns what remains, ``(ε_r, δ_r)``, into a zCDP
    account of ``rho_r``, the largest rho whose conversion (Canonne, Kamath and Steinke
    2020, Corollary 13, never understating epsilon) fits in ``(ε_r, δ_r)``. From then
    on zCDP releases add their ``rho``, pure ones ``epsilon²/2`` (Bun and Steinke 2016,
    Proposition 1.4), and approximate ones are refused. Against a ``rho`` budget the
    same zCDP account holds from the start. :mod:`dpframe._composition` gives each step
    with the theorem it rests on, and why dpframe does not pick, after the fact, the
    cheapest way to count each pure release. Every amount is an exact
    :class:`~fractions.Fraction` or, for conversions, rounded in the safe direction:
    eleven charges of 1/11 fit exactly in a budget of 1, and ``0.1 + 0.2`` is spent as
    3/10.

    **Check, then draw, then charge.** :meth:`transaction` checks the whole cost of a
    call before any noise is drawn (a refused call charges nothing and draws nothing)
    and charges, on exit, every part whose noise was drawn, re-checking atomically under
    the ledger's lock. If two threads race for the last of the budget and the charge is
    refused, the caller discards what it drew.

    **Budget rules.** The first :meth:`set_budget` may not go below what was already
    spent. Once a budget is set it can be lowered (or set again to the same value) but
    never raised: raising it would let anyone refund themselves. An ``(epsilon,
    delta)`` budget may be lowered to a ``rho`` budget whose conversion fits in it,
    never the other way (it would admit approximate releases, which have no zCDP
    guarantee).

    **What the ledger cannot stop.** Whoever holds the raw data can bypass it:
    ``to_numpy()``, building a new DataFrame from the values, clearing ``df.attrs``,
    editing a saved file. Its purpose is to stop honest mistakes (spending one budget
    twice, losing track of spending through a copy, a filter or a round trip to disk),
    not a hostile analyst with access to the data.

    References
    ----------
    C. Dwork and A. Roth, "The Algorithmic Foundations of Differential Privacy",
    Foundations and Trends in Theoretical Computer Science 9(3-4), 2014, Theorem 3.16.
    R. Rogers, A. Roth, J. Ullman, S. Vadhan, "Privacy Odometers and Filters:
    Pay-as-you-Go Composition", NeurIPS 2016 (arXiv:1605.08294v1, Lemma 3.5).
    V. Feldman, T. Zrnic, "Individual Privacy Accounting via a Rényi Filter", NeurIPS
    2021 (arXiv:2008.11193). S. Haney et al., "Concurrent Composition for Interactive
    Differential Privacy with Adaptive Privacy-Loss Parameters", CCS 2023
    (arXiv:2309.05901). M. Bun, T. Steinke, "Concentrated Differential Privacy", TCC
    2016 (arXiv:1605.02065). C. Canonne, G. Kamath, T. Steinke, "The Discrete Gaussian
    for Differential Privacy", NeurIPS 2020 (arXiv:2004.00010). Seed
    ``004_2d340d4f6924174c.txt`` (section "Privacy Budget": what spends budget).

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

    A zCDP budget: a Gaussian release adds its rho, a pure one epsilon²/2.

    >>> ledger = Ledger()
    >>> ledger.set_budget(rho=Fraction(1, 100))
    >>> ledger.charge(method="count", columns=["age"], mechanism="discrete_gaussian",
    ...               rho=Fraction(1, 200), noise_scale=10.0, private=True)
    >>> ledger.charge(method="count", columns=["age"], mechanism="geometric",
    ...               epsilon=Fraction(1, 10), noise_scale=10.0, private=True)
    >>> ledger.remaining
    Budget(rho=0)
    """

    __slots__ = (
        "__weakref__",
        "_account",
        "_attachment",
        "_budget_set",
        "_conflict",
        "_domains",
        "_id",
        "_instance",
        "_lock",
        "_privacy_unit",
        "_releases",
        "_row_count",
        "_row_labels",
        "_total",
    )

    #: Observers of every ledger (registered by dpframe._attrs and dpframe._persistence).
    _observers: ClassVar[list[LedgerObserver]] = []

    _id: str
    _instance: str  # this object's own random name: its pickles in this process say so
    _lock: threading.RLock
    _budget_set: bool
    _total: Total
    _account: Account
    _releases: list[Release]
    _attachment: object  # the attrs handle, owned by dpframe._attrs
    _domains: dict[Hashable, pd.Index]
    _row_labels: tuple[Hashable, ...] | None
    _row_count: int | None
    _privacy_unit: tuple[Hashable, ...] | None
    _conflict: str | None  # why copies of this ledger cannot be merged (releases refused)

    def __init__(self) -> None:
        self._setup(uuid.uuid4().hex)

    @classmethod
    def _rebuilt(
        cls,
        ledger_id: str,
        total: Total,
        releases: Sequence[Release],
        *,
        budget_set: bool,
        domains: Mapping[Hashable, pd.Index],
        row_labels: tuple[Hashable, ...] | None,
        privacy_unit: tuple[Hashable, ...] | None = None,
        row_count: int | None = None,
    ) -> Ledger:
        """A ledger rebuilt from a saved record (for :mod:`dpframe._persistence`).

        The history is replayed under the total; a history that does not fit (copies
        that together overspent) leaves the ledger exhausted, never refunded.
        """
        ledger = cls.__new__(cls)
        ledger._setup(ledger_id, announce=False)
        ledger._total = total
        ledger._budget_set = budget_set
        ledger._domains = dict(domains)
        ledger._row_labels = row_labels
        ledger._row_count = row_count
        ledger._privacy_unit = privacy_unit
        ledger._releases = list(releases)
        ledger._account = _composition.replay(total, map(_cost_of, releases), force=True)
        ledger._announce()
        return ledger

    def _setup(self, ledger_id: str, *, announce: bool = True) -> None:
        self._id = ledger_id
        self._instance = uuid.uuid4().hex
        self._lock = threading.RLock()
        self._budget_set = False
        self._total = _composition.UNLIMITED
        self._account = _composition.fresh_account(self._total)
        self._releases = []
        self._attachment = None
        self._domains = {}
        self._row_labels = None
        self._row_count = None
        self._privacy_unit = None
        self._conflict = None
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
    def row_count(self) -> int | None:
        """The number of rows of the frame given the budget (None: unknown, as with Dask).

        Without a privacy unit each row is a different person, so a frame derived from
        this data with more rows repeats someone's row (``pd.concat([df, df],
        ignore_index=True)``, ``explode``) and is refused, whatever its index.
        """
        return self._row_count

    @property
    def total(self) -> Budget:
        """The total budget: ``Budget(epsilon, delta)``, or ``Budget(rho=...)`` for zCDP.

        ``Budget(epsilon=inf, delta=inf)`` while none is set, and when unlimited.
        """
        with self._lock:
            return self._total.budget()

    @property
    def spent(self) -> Budget:
        """What the releases spent of the budget, in the forms the accounting has.

        Against an ``(epsilon, delta)`` budget and before any zCDP release: the exact
        sums ``(Σ epsilon, Σ delta)``. After the first zCDP release: the ``rho`` charged
        to the zCDP account since then (zCDP releases, and ``epsilon²/2`` for pure ones),
        and the ``(epsilon, delta)`` form of everything: the sums from before, plus the
        conversion of that ``rho`` at the ``delta`` the account reserved (all the delta
        that remained), epsilon rounded up. Against a ``rho`` budget: ``Budget(rho=...)``.
        With no budget or an unlimited one: the exact sums of each measure
        (``rho`` shown once a zCDP release was made).
        """
        with self._lock:
            return self._account.spent()

    @property
    def remaining(self) -> Budget:
        """What the budget still allows, in the forms the accounting has (never below 0).

        Against an ``(epsilon, delta)`` budget before any zCDP release: ``total - spent``
        in each component (:attr:`remaining_rho` tells how much of it a zCDP release
        could use). After the first zCDP release: the ``rho`` left in the zCDP account,
        which is what limits every further release, with the largest epsilon a pure
        release may still have (``sqrt(2 * rho)``: it costs ``epsilon**2 / 2``, rounded
        down) and delta 0 (all of it is reserved). Against a ``rho`` budget:
        ``Budget(rho=...)``. ``inf`` when unlimited.
        """
        with self._lock:
            return self._account.remaining()

    @property
    def remaining_rho(self) -> Fraction | float:
        """The largest zCDP cost (rho) the next release may have; ``inf`` when unlimited.

        Before any zCDP release against an ``(epsilon, delta)`` budget, the largest rho
        whose conversion fits in what remains (0 when no delta remains: zCDP never
        implies pure DP); after it, or against a ``rho`` budget, the rho left in the
        zCDP account. Rounded down.
        """
        with self._lock:
            account = self._account
            if self._total.epsilon_unlimited:
                return math.inf
            if account.in_zcdp:
                return account.remaining().rho or _ZERO
            left = account.remaining()
            if left.epsilon is None or left.delta is None or account.overspent:
                return _ZERO
            return _composition.rho_available(left.epsilon, left.delta)

    @property
    def history(self) -> pd.DataFrame:
        """One row per release, for display.

        Columns: ``time`` (UTC timestamp); ``method``, ``columns``, ``where``, ``by``,
        ``bounds``, ``mechanism`` (str; ``where`` and ``bounds`` empty when not used);
        ``measure`` (str: ``"pure"``, ``"approx"`` or ``"zCDP"``); ``epsilon``,
        ``delta`` (float64; 0 for a zCDP release) and ``rho`` (float64, NaN unless zCDP):
        the cost in the release's measure, exact internally and in :meth:`to_dict`;
        ``noise_scale`` and ``noise_error_bound`` (float64, NaN when the release has
        none; for a table, the largest bar of its cells and margins); ``private`` (bool:
        False for releases drawn from a caller's ``rng``); ``privacy_unit`` (str, empty
        when one row is one unit), ``max_rows`` and ``max_groups`` (nullable Int64: the
        contribution bounds of a release on a unit-protected frame).
        """
        with self._lock:
            releases = list(self._releases)
        return _history_frame(releases)

    def to_dict(self) -> dict[str, JSONValue]:
        """The ledger's state as JSON-serializable data.

        Returns
        -------
        dict
            ``{"format": "dpframe.ledger", "version": 3, "id": ..., "budget_set": ...,
            "total": {"epsilon": ..., "delta": ...} or {"rho": ...}, "spent": {...},
            "history": [...]}``. Amounts are exact fraction strings (``"1/11"``,
            ``"0"``, ``"inf"``), times ISO 8601 strings in UTC. ``spent`` holds the
            exact sums of the costs by measure (``"rho"`` only once a zCDP release was
            made); the accounting is replayed from the history when the record is read.
        """
        with self._lock:
            return {
                **self._state_record(),
                "history": [release.record() for release in self._releases],
                "domains": self._domains_record(),
            }

    def _state_record(self) -> dict[str, JSONValue]:
        """Every field of :meth:`to_dict` except ``history`` and ``domains`` (the long
        ones), for the attrs mirror to refresh after each change."""
        return {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "id": self._id,
            "budget_set": self._budget_set,
            "total": self._total_record(),
            "spent": self._spent_record(),
            "row_labels": None
            if self._row_labels is None
            else [encode_key(name) for name in self._row_labels],
            "row_count": self._row_count,
            "privacy_unit": None
            if self._privacy_unit is None
            else [encode_key(name) for name in self._privacy_unit],
            # Saved so that a copy of a conflicted ledger keeps refusing in a new process.
            **({} if self._conflict is None else {"conflict": self._conflict}),
        }

    def _domains_record(self) -> list[JSONValue]:
        """The declared domains as ``[[column, [key, ...]], ...]`` (see :func:`encode_key`)."""
        return [
            [encode_key(name), [encode_key(key) for key in keys]]
            for name, keys in self._domains.items()
        ]

    def _total_record(self) -> dict[str, JSONValue]:
        """The total as exact strings (``"1/2"``, ``"inf"``), or ``{"rho": ...}``."""
        return total_record(self._total)

    def _spent_record(self) -> dict[str, JSONValue]:
        """The exact sums of the costs by measure, as strings."""
        account = self._account
        record: dict[str, JSONValue] = {
            "epsilon": fraction_text(account.raw_epsilon),
            "delta": fraction_text(account.raw_delta),
        }
        if account.raw_rho:
            record["rho"] = fraction_text(account.raw_rho)
        return record

    def _state(self) -> tuple[Total, tuple[Fraction, Fraction, Fraction], bool]:
        """Total, exact sums by measure (epsilon, delta, rho), and whether a budget is set."""
        with self._lock:
            account = self._account
            raw = (account.raw_epsilon, account.raw_delta, account.raw_rho)
            return self._total, raw, self._budget_set

    # ---------------------------------------------------------------- budget

    def set_budget(
        self,
        epsilon: PrivacyAmount | None = None,
        delta: PrivacyAmount | None = None,
        *,
        rho: PrivacyAmount | None = None,
    ) -> None:
        """Set the total privacy budget (first time), or lower it.

        Pass ``epsilon`` (and ``delta``) for an ``(epsilon, delta)``-DP budget, or
        ``rho`` for a zero-concentrated DP (zCDP) budget; exactly one of the two forms.

        Parameters
        ----------
        epsilon : float or Fraction, optional
            Total privacy-loss budget: a number > 0, or ``math.inf`` for an explicitly
            unlimited budget (for teaching and exploration; shown as unlimited).
        delta : float or Fraction, optional
            Total failure-probability budget, in ``[0, 1)``; default 0, or ``math.inf``
            (unlimited) when ``epsilon`` is ``math.inf``. Both components are set:
            ``set_budget(0.5)`` on a ledger with ``delta=1e-6`` sets ``delta`` to 0.
            Gaussian (zCDP) releases need ``delta > 0``.
        rho : float or Fraction, optional
            Total zCDP budget, a number > 0 (``math.inf``: unlimited, as
            ``epsilon=math.inf``). Every release is then charged in zCDP: Gaussian
            releases their ``rho``, pure ones ``epsilon²/2``; approximate releases
            (``delta > 0``) are refused. ``rho``-zCDP implies ``(epsilon, delta)``-DP
            for every ``delta > 0`` (Canonne, Kamath, Steinke 2020, Corollary 13).

        Raises
        ------
        InvalidParameterError, InvalidParameterTypeError
            For both forms or neither, an epsilon or rho that is not a number > 0 (or
            ``math.inf``), a delta outside ``[0, 1)``, or when a budget is already set
            and the new one would raise it.
        BudgetExceededError
            When the releases already recorded do not fit in the new total.

        See Also
        --------
        remaining_rho : The zCDP cost that still fits.

        Notes
        -----
        The first call may set any total that the releases made meanwhile fit in. Later
        calls may keep or lower the budget, never raise it: each component of an
        ``(epsilon, delta)`` budget, the ``rho`` of a zCDP budget. An ``(epsilon,
        delta)`` budget may also become a ``rho`` budget whose conversion fits in it
        (that lowers it), never the other way. Raising is refused because it would refund
        spent privacy: if the data owner grants a new budget, build a new frame from the
        source data. Nothing changes when a call is refused.

        Examples
        --------
        >>> from dpframe import Ledger
        >>> ledger = Ledger()
        >>> ledger.set_budget(rho=0.015)  # Wikipedia's pageviews budget
        >>> ledger.total
        Budget(rho=0.015)
        """
        new_total = _parse_total(epsilon, delta, rho)
        with self._lock:
            account = self._account_under(new_total)
            self._total = new_total
            self._account = account
            self._budget_set = True
            self._changed(())

    def _account_under(self, new_total: Total) -> Account:
        """The account replayed under a new total, or the refusal of that total (lock held)."""
        old = self._total
        if self._budget_set and not _composition.within(new_total, old):
            raise InvalidParameterError(
                f"set_budget({_total_call(new_total)}) would raise the budget already "
                f"set, {old.budget()}; a budget can be lowered but never raised, since "
                f"raising it would refund privacy already spent. {_lower_fix(old)} If "
                f"the data owner grants a new budget, build a new frame from the source "
                f"data."
            )
        try:
            return _composition.replay(new_total, map(_cost_of, self._releases))
        except _composition.RefusedCostError as refused:
            raise BudgetExceededError(
                f"set_budget({_total_call(new_total)}) is below what this data has "
                f"already spent, {self._account.spent()}, over {len(self._releases)} "
                f"release(s): against it, release {refused.position} would not fit "
                f"({refused.reason}). {_below_fix(self._account)}"
            ) from None

    def _budget_and_declarations(
        self,
        epsilon: PrivacyAmount | None,
        delta: PrivacyAmount | None,
        rho: PrivacyAmount | None,
        domains: Mapping[Hashable, pd.Index],
        *,
        row_labels: tuple[Hashable, ...] | None,
        privacy_unit: tuple[Hashable, ...] | None,
        row_count: int | None,
    ) -> None:
        """``declare_domains`` and ``set_budget`` as one step: both checked, then both
        applied, so that a refused call changes nothing (the accessor's ``set_budget``)."""
        new_total = _parse_total(epsilon, delta, rho)
        with self._lock:
            account = self._account_under(new_total)
            self._check_declarations(domains, privacy_unit)
            self._apply_declarations(domains, row_labels, privacy_unit, row_count)
            self._total = new_total
            self._account = account
            self._budget_set = True
            self._changed(())

    def declare_domains(
        self,
        domains: Mapping[Hashable, pd.Index],
        *,
        row_labels: tuple[Hashable, ...] | None = None,
        privacy_unit: tuple[Hashable, ...] | None = None,
        row_count: int | None = None,
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
        row_count : int, optional
            The number of rows of the frame given the budget (see :attr:`row_count`).

        Raises
        ------
        DomainError
            When a column's keys were already declared differently: a data set's code book
            does not change between releases.
        """
        with self._lock:
            self._check_declarations(domains, privacy_unit)
            self._apply_declarations(domains, row_labels, privacy_unit, row_count)
            self._changed(())

    def _check_declarations(
        self, domains: Mapping[Hashable, pd.Index], privacy_unit: tuple[Hashable, ...] | None
    ) -> None:
        """Refuse declarations that contradict earlier ones, or that the ledger's record
        cannot hold (a tuple as a column name or key), before anything is applied (lock
        held; changes nothing)."""
        for name, keys in domains.items():
            encode_key(name)
            for key in keys:
                encode_key(key)
        for name in privacy_unit or ():
            encode_key(name)
        for name, keys in domains.items():
            known = self._domains.get(name)
            if known is not None and not known.equals(keys):
                raise DomainError(
                    f"the keys of {name!r} were already declared for this data set as "
                    f"{list(known)[:10]!r}; a data set's declared keys do not change. Pass "
                    f"other keys for one call with domain=, or leave them as declared."
                )
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

    def _apply_declarations(
        self,
        domains: Mapping[Hashable, pd.Index],
        row_labels: tuple[Hashable, ...] | None,
        privacy_unit: tuple[Hashable, ...] | None,
        row_count: int | None,
    ) -> None:
        """Record declarations already checked (lock held)."""
        self._domains.update(domains)
        if privacy_unit is not None:
            self._privacy_unit = privacy_unit
        if row_labels is not None and self._row_labels is None:
            self._row_labels = row_labels
        if row_count is not None and self._row_count is None:
            self._row_count = row_count

    # ---------------------------------------------------------------- spending

    # ---------------------------------------------------------------- spending

    def check(
        self, epsilon: Fraction = _ZERO, delta: Fraction = _ZERO, *, rho: Fraction = _ZERO
    ) -> None:
        """Refuse a release that does not fit in what remains. Never changes state.

        Parameters
        ----------
        epsilon : Fraction, default 0
            The epsilon cost of the pure and approximate parts, an exact rational >= 0
            (ints are accepted).
        delta : Fraction, default 0
            Their delta cost, an exact rational in ``[0, 1)``.
        rho : Fraction, default 0
            The zCDP cost of the zCDP parts (discrete Gaussian noise), exact, >= 0.

        Raises
        ------
        BudgetExceededError
            When the cost does not fit under the ledger's composition rule. The message
            states what was asked, what remains and how to fix it.
        InvalidParameterError
            For a negative cost, a delta cost >= 1, or a float cost (NaN and
            infinities included): costs must be exact.
        InvalidParameterTypeError
            For a cost that is not a number at all (str, None, bool).

        Notes
        -----
        The pure and approximate parts are checked first, as one release, then the zCDP
        parts, as one release: the order in which :meth:`charge_many` charges the parts
        of a call. Checking the pure parts as one release is never cheaper than charging
        them one by one (in zCDP, ``(Σ ε)²/2 >= Σ ε²/2``).
        """
        costs = _call_costs(epsilon, delta, rho)
        with self._lock:
            self._fold(costs)

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Hold this ledger for a call made of several releases: other threads wait.

        A call that checks its whole cost, then releases its parts one by one (``agg``),
        holds the ledger throughout, so that no other thread's release can take the budget
        between the check and its last part. The lock is re-entrant: the parts' own
        transactions run inside.

        Yields
        ------
        None
            While the ledger is held.

        See Also
        --------
        transaction : One release's check and charge.

        Examples
        --------
        >>> from dpframe._ledger import Ledger
        >>> ledger = Ledger()
        >>> with ledger.held():
        ...     ledger.set_budget(1.0)
        """
        with self._lock:
            yield

    def check_parts(self, parts: Sequence[Release]) -> None:
        """Refuse a call whose parts, charged one by one in this order, would not fit.

        Parameters
        ----------
        parts : sequence of Release
            The releases the call will draw (charged pure and approximate parts first, as
            :meth:`charge_many` does).

        Raises
        ------
        BudgetExceededError
            When the sequence does not fit under the ledger's composition rule.
        BudgetNotSetError
            When no budget was ever set on this ledger.

        See Also
        --------
        check : The same for a call's totals, checked as one release per measure.

        Examples
        --------
        >>> from fractions import Fraction
        >>> from dpframe._ledger import Ledger
        >>> from dpframe._release import Release
        >>> ledger = Ledger()
        >>> ledger.set_budget(rho=Fraction(1, 50))
        >>> part = Release(method="quantile", columns=("x",), mechanism="report-noisy-max",
        ...                epsilon=Fraction(1, 10), delta=Fraction(0), sensitivity=None,
        ...                noise_scale=None, private=True)
        >>> ledger.check_parts([part] * 4)  # 4 * 0.1**2 / 2 = 0.02 fits; (0.4)**2 / 2 would not
        """
        self.require_budget()
        # In the order charge_many charges them: pure and approximate parts first.
        ordered = sorted(parts, key=lambda r: r.rho is not None)  # stable
        costs = [_cost_of(part) for part in ordered]
        with self._lock:
            try:
                self._fold(costs)
            except _composition.RefusedCostError as refused:
                # The error of the part that did not fit quotes that part and what the
                # earlier parts of the call left: say it for the whole call instead.
                raise BudgetExceededError(self._parts_refusal(costs, refused)) from None

    def _parts_refusal(self, costs: Sequence[Cost], refused: _composition.RefusedCostError) -> str:
        """Why a call of several parts does not fit, in terms of the whole call (lock held)."""
        epsilon = sum((c.epsilon for c in costs if c.rho is None), _ZERO)
        delta = sum((c.delta for c in costs if c.rho is None), _ZERO)
        rho = sum((c.rho for c in costs if c.rho is not None), _ZERO)
        if self._account.in_zcdp:
            pure = sum((c.epsilon**2 / 2 for c in costs if c.rho is None), _ZERO)
            asked = (
                f"rho={exact_text(rho + pure)} in all (on a zCDP account each pure part of "
                f"epsilon e counts as rho=e**2/2)"
            )
        else:
            parts = []
            if epsilon or delta or not rho:
                parts.append(f"epsilon={exact_text(epsilon)}, delta={exact_text(delta)}")
            if rho:
                parts.append(f"rho={exact_text(rho)}")
            asked = " and ".join(parts) + " in all"
        # A shortfall's reason quotes what the call's own earlier parts left: not shown.
        shortfall = refused.reason.startswith("only ")
        why = "" if shortfall else f" ({refused.reason})"
        return (
            f"This call draws {len(costs)} parts costing {asked}, "
            f"but they do not fit in what remains of the budget {self._total.budget()}: "
            f"{self.remaining} after {len(self._releases)} release(s){why}. Nothing was "
            f"charged. Ask for less in this call, or "
            f"release fewer statistics; a budget, once set, cannot be raised."
        )

    def _fold(self, costs: Sequence[Cost]) -> Account:
        """The account after ``costs`` (lock held), or :class:`BudgetExceededError`."""
        account = self._account
        for cost in costs:
            account = _composition.spend(account, cost)
        return account

    def transaction(
        self,
        epsilon: Fraction = _ZERO,
        delta: Fraction = _ZERO,
        *,
        rho: Fraction = _ZERO,
        planned: Sequence[Release] | None = None,
    ) -> Transaction:
        """Spend on one call: check the whole cost now, charge the drawn parts on exit.

        Parameters
        ----------
        epsilon, delta : Fraction, default 0
            The whole cost of the call's pure and approximate parts.
        rho : Fraction, default 0
            The whole zCDP cost of the call's zCDP parts (``transaction(rho=...)`` for a
            call that only adds discrete Gaussian noise).
        planned : sequence of Release, optional
            The parts the call will draw, in order. Given, the check folds their costs
            one by one, exactly as they will be charged (on a zCDP account, pure parts
            of epsilon_i cost the sum of epsilon_i**2 / 2, less than the whole
            epsilon**2 / 2 the totals would be checked at); their sums must not exceed
            the totals.

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

        See Also
        --------
        check : The check made on entry.
        """
        self.require_budget()
        return Transaction(self, epsilon, delta, rho, planned)

    def require_budget(self) -> None:
        """Refuse to release from data whose ledger never had a budget set.

        Raises
        ------
        BudgetNotSetError
            When :meth:`set_budget` was never called on this ledger; the message says
            how a ledger is lost on the way from a budgeted frame.

        See Also
        --------
        transaction : Calls this first.

        Examples
        --------
        >>> from dpframe._ledger import Ledger
        >>> Ledger().require_budget()
        Traceback (most recent call last):
        ...
        dpframe.errors.BudgetNotSetError: This frame's data has no privacy budget, ...
        """
        if self._conflict is not None:
            raise LedgerConflictError(self._conflict)
        if not self._budget_set:
            raise BudgetNotSetError(
                "This frame's data has no privacy budget, so dpframe will not release from "
                "it. Call df.dp.set_budget(epsilon=...) with the total budget for this data "
                "(or df.dp.set_budget(epsilon=math.inf) to explore without a limit, in "
                "class). If you did set a budget on the frame this one came from, the "
                f"ledger was lost on the way: {_LEDGER_LOST}."
            )

    def charge(
        self,
        *,
        method: str,
        columns: Sequence[str] | str,
        mechanism: str,
        epsilon: Fraction = _ZERO,
        delta: Fraction = _ZERO,
        rho: Fraction | None = None,
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
        epsilon, delta : Fraction, default 0
            The exact cost of a pure or approximate release (see :meth:`check`).
        rho : Fraction, optional
            The exact cost of a zCDP release, whose epsilon and delta are then 0.
        noise_scale : float or None
            The scale of the noise (for display), a finite number >= 0, or None.
        private : bool
            False when the noise came from a seeded generator (``rng=``).

        Raises
        ------
        BudgetExceededError
            When the cost no longer fits (nothing is recorded; discard the release).
        InvalidParameterError, InvalidParameterTypeError
            For a bad cost (see :meth:`check`), a zCDP release with an epsilon or delta
            cost, or metadata of the wrong type.
        """
        release = Release(
            method=_validation.text(method, "method"),
            columns=_validation.label_texts(columns, "columns"),
            mechanism=_validation.text(mechanism, "mechanism"),
            epsilon=_validation.cost(epsilon, "epsilon"),
            delta=_validation.cost(delta, "delta"),
            rho=None if rho is None else _validation.cost(rho, "rho"),
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
        The cost is re-checked under the ledger's lock, so a concurrent release cannot
        leave some parts charged and others refused. Pure and approximate parts are
        charged (and recorded in the history) before zCDP parts, the order
        :meth:`check` assumes; the order of the draws within one call does not matter,
        since the whole call was checked, and its budget fixed, before any of them.
        """
        for release in releases:
            if not isinstance(release, Release):
                raise DPFrameError(f"internal error: charge_many got {release!r}")
            _cost_of(release)  # validates
        ordered = sorted(releases, key=lambda r: r.rho is not None)  # stable
        with self._lock:
            account = self._fold([_cost_of(r) for r in ordered])
            self._releases.extend(ordered)
            self._account = account
            self._changed(ordered)

    def _absorb(
        self,
        total: Total,
        spent: tuple[Fraction, Fraction, Fraction],
        why: str,
        *,
        budget_set: bool,
        domains: Mapping[Hashable, pd.Index] | None = None,
        privacy_unit: tuple[Hashable, ...] | None = None,
        row_labels: tuple[Hashable, ...] | None = None,
        row_count: int | None = None,
        releases: Sequence[Release] = (),
        conflict: str | None = None,
    ) -> None:
        """Merge another copy's state conservatively: lowest total, highest spent.

        ``spent`` is that copy's exact sums by measure (epsilon, delta, rho). A sum above
        ours is recorded as a history row holding the difference (method
        ``"(restored)"``: one for epsilon and delta, one for rho), charged at its worst
        whatever the budget: restoring never refunds; if the copies together overspent,
        the ledger is exhausted. ``releases`` is the other copy's history: its releases
        this one does not hold (made by that copy after the two parted, as in two
        processes that each spent a copy of the same file) are added first, so the
        spending of both counts, not only the larger. A privacy unit, row labels or row
        count the other copy knows and this one does not are adopted (a copy saved before
        ``set_budget`` knows none of them); of two row counts, the smaller is kept (the
        safe side). Two copies whose budgets were set with different privacy units (one of
        them possibly none, one row per person) cannot be accounted together: releases
        bounded for one unit are not bounded for the other (unless the copy without a unit
        made no release). The ledger is then marked, and every later release from it is
        refused (:meth:`require_budget`); the mark is saved with the ledger, and a copy
        that carries one (``conflict``) passes it on.
        """
        with self._lock:
            conflicted_now = False
            if conflict is not None and self._conflict is None:
                self._conflict, conflicted_now = conflict, True
            if budget_set and self._budget_set and privacy_unit != self._privacy_unit:
                # A copy with no unit that made no release yet adds no row-level release:
                # the unit declared in the other copy (allowed before any release) holds.
                if privacy_unit is None:
                    accounted_per_row = bool(releases)
                elif self._privacy_unit is None:
                    accounted_per_row = bool(self._releases)
                else:  # two different units
                    accounted_per_row = True
                if accounted_per_row and self._conflict is None:
                    self._conflict = _unit_conflict(self._privacy_unit, privacy_unit)
                    conflicted_now = True
            account = self._account
            known = {_identity(release) for release in self._releases}
            # "(restored)" rows count too: in a high-water mark they are the dead ledger's
            # own rows, and another copy's may hold spending this one never saw (the same
            # unknown spending restored in two copies is then counted twice: the safe side).
            foreign = [release for release in releases if _identity(release) not in known]
            foreign_costs = [_cost_of(release) for release in foreign]
            missing_epsilon = max(
                _ZERO,
                spent[0] - account.raw_epsilon - sum((c.epsilon for c in foreign_costs), _ZERO),
            )
            missing_delta = max(
                _ZERO, spent[1] - account.raw_delta - sum((c.delta for c in foreign_costs), _ZERO)
            )
            missing_rho = max(
                _ZERO,
                spent[2] - account.raw_rho - sum((c.rho or _ZERO for c in foreign_costs), _ZERO),
            )
            added: list[Release] = list(foreign)
            if missing_epsilon or missing_delta:
                added.append(_restored(why, epsilon=missing_epsilon, delta=missing_delta))
            if missing_rho:
                added.append(_restored(why, rho=missing_rho))
            lowered = _composition.lower_total(self._total, total)
            lower_total = lowered != self._total
            self._releases.extend(added)
            if lower_total:
                self._total = lowered
                self._account = _composition.replay(
                    lowered, map(_cost_of, self._releases), force=True
                )
            else:
                for release in added:
                    self._account = _composition.spend(self._account, _cost_of(release), force=True)
            set_now = budget_set and not self._budget_set
            self._budget_set = self._budget_set or budget_set
            new_domains = {
                name: keys for name, keys in (domains or {}).items() if name not in self._domains
            }
            self._domains.update(new_domains)
            learned = False
            if privacy_unit is not None and self._privacy_unit is None:
                self._privacy_unit, learned = privacy_unit, True
            if row_labels is not None and self._row_labels is None:
                self._row_labels, learned = row_labels, True
            if row_count is not None and (self._row_count is None or row_count < self._row_count):
                self._row_count, learned = row_count, True
            if added or lower_total or set_now or new_domains or learned or conflicted_now:
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

    def __reduce__(self) -> tuple[Any, tuple[dict[str, JSONValue], str]]:
        # Imported here: _persistence builds ledgers, so it imports this module.
        from dpframe._persistence import unpickle_ledger

        return (unpickle_ledger, (self.to_dict(), self._instance))

    # ---------------------------------------------------------------- display

    def _total_text(self) -> str:
        if not self._budget_set:
            return "not set"
        if self._total.unlimited:
            return "unlimited"
        return repr(self._total.budget())

    def __repr__(self) -> str:
        with self._lock:
            return (
                f"Ledger(total={self._total_text()}, spent={self._account.spent()}, "
                f"remaining={self._account.remaining() if self._budget_set else 'not set'}, "
                f"privacy_unit={self._unit_text(short=True)}, releases={len(self._releases)})"
            )

    def _unit_text(self, short: bool = False) -> str:
        """Who is protected, in words: the unit's columns, or one row."""
        if self._privacy_unit is None:
            return "one row" if short else "one row (each row a different person)"
        return ", ".join(str(name) for name in self._privacy_unit)

    def _accounting_note(self) -> str:
        """How the ledger accounts, in one sentence (for the HTML summary)."""
        account = self._account
        if account.overspent:
            return (
                "Copies of this ledger together spent more than its budget (see the "
                f"{RESTORED!r} rows): nothing more can be released."
            )
        if self._total.is_rho:
            return "Accounted in zCDP: Gaussian releases add their rho, pure ones epsilon²/2."
        if account.converted is not None:
            epsilon_left, delta_left = account.converted
            first = next((i for i, r in enumerate(self._releases, 1) if r.rho), len(self._releases))
            return (
                f"Release {first} was the first zCDP release: what remained then, "
                f"epsilon={exact_text(epsilon_left)}, delta={exact_text(delta_left)}, became a "
                f"zCDP account of rho={exact_text(account.rho_cap or _ZERO)}; since then "
                "Gaussian releases add their rho, pure ones epsilon²/2, and approximate "
                "ones are refused."
            )
        return ""

    def _repr_html_(self) -> str:
        """An HTML summary for notebooks: total, spent and remaining, then the history."""
        with self._lock:
            status = self._total_text()
            rows = [
                ("total", self._total.budget()),
                ("spent", self._account.spent()),
                ("remaining", self._account.remaining()),
            ]
            note = self._accounting_note()
            releases = list(self._releases)
        status_note = (
            "" if status.startswith("Budget") else f"<p>budget: <b>{html.escape(status)}</b></p>"
        )
        status_note += f"<p>privacy unit: <b>{html.escape(self._unit_text())}</b></p>"
        with_rho = any(amount.rho is not None for _, amount in rows)

        def cell(value: Fraction | float | None) -> str:
            return f"<td>{'' if value is None else html.escape(exact_text(value))}</td>"

        cells = "".join(
            f"<tr><th>{name}</th>{cell(amount.epsilon)}{cell(amount.delta)}"
            f"{cell(amount.rho) if with_rho else ''}</tr>"
            for name, amount in rows
        )
        rho_header = "<th>rho (zCDP)</th>" if with_rho else ""
        summary = (
            "<table><thead><tr><th>privacy budget</th><th>epsilon</th><th>delta</th>"
            f"{rho_header}</tr></thead><tbody>{cells}</tbody></table>"
        )
        if note:
            summary += f"<p>{html.escape(note)}</p>"
        if releases:
            shown = _history_frame(releases)
            # each cost in its own measure: a zCDP release shows its rho only
            shown["epsilon"] = [
                "" if r.rho is not None else exact_text(r.epsilon) for r in releases
            ]
            shown["delta"] = ["" if r.rho is not None else exact_text(r.delta) for r in releases]
            shown["rho"] = ["" if r.rho is None else exact_text(r.rho) for r in releases]
            history = f"<p>{len(releases)} release(s):</p>" + shown.to_html(index=False)
        else:
            history = "<p>No releases yet.</p>"
        return f'<div class="dpframe-ledger">{status_note}{summary}{history}</div>'


class Transaction:
    """One call's spending: the whole cost checked on entry, drawn parts charged on exit.

    Use it as ``with ledger.transaction(epsilon) as spending:`` (or
    ``ledger.transaction(rho=...)`` for zCDP parts) and call :meth:`drawn` right after
    each part's noise is drawn. On exit, normal or by an exception, every drawn part is
    charged at once (drawn noise is never free); when nothing was drawn, nothing is
    charged.
    """

    def __init__(
        self,
        ledger: Ledger,
        epsilon: Fraction,
        delta: Fraction,
        rho: Fraction = _ZERO,
        planned: Sequence[Release] | None = None,
    ) -> None:
        self._ledger = ledger
        self._epsilon = _validation.cost(epsilon, "epsilon")
        self._delta = _validation.cost(delta, "delta")
        self._rho = _validation.cost(rho, "rho")
        self._planned = None if planned is None else tuple(planned)
        self._parts: list[Release] = []

    @property
    def parts(self) -> tuple[Release, ...]:
        """The parts drawn so far, in order."""
        return tuple(self._parts)

    def __enter__(self) -> Transaction:
        if self._planned is None:
            self._ledger.check(self._epsilon, self._delta, rho=self._rho)
            return self
        self._within_cost(self._planned, "planned")  # so that drawn's check can hold
        self._ledger.check_parts(self._planned)
        return self

    def _within_cost(self, parts: Sequence[Release], what: str) -> None:
        """Refuse (an internal error) parts costing more than the call declared."""
        epsilon = sum((p.epsilon for p in parts), _ZERO)
        delta = sum((p.delta for p in parts), _ZERO)
        rho = sum((p.rho for p in parts if p.rho is not None), _ZERO)
        if epsilon > self._epsilon or delta > self._delta or rho > self._rho:
            raise DPFrameError(
                f"internal error: a call {what} more than the cost checked for it "
                f"(checked epsilon={self._epsilon}, delta={self._delta}, rho={self._rho}; "
                f"{what} epsilon={epsilon}, delta={delta}, rho={rho}); please report"
            )

    def drawn(self, *releases: Release) -> None:
        """Record that these releases' noise was drawn: charged on exit, whatever happens."""
        parts = [*self._parts, *releases]
        self._within_cost(parts, "drew")
        self._parts = parts

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: types.TracebackType | None,
    ) -> None:
        if not self._parts:
            return
        ledger = self._ledger
        with ledger._lock:
            # A unit declared by another thread after this call was planned (allowed while
            # the ledger had no release): the parts were planned per row, with no bound on
            # a unit's rows, so the result must not be released. Nothing is charged.
            unit = ledger._privacy_unit
            expected = None if unit is None else tuple(str(name) for name in unit)
            if kind is None and any(part.privacy_unit != expected for part in self._parts):
                raise PrivacyUnitError(
                    f"the privacy unit {list(expected or ())!r} was declared while this "
                    f"release was being computed for another unit "
                    f"({list(self._parts[0].privacy_unit or ['one row'])!r}); it is "
                    f"withheld and nothing was charged. Declare the unit before releasing, "
                    f"then release again."
                )
            ledger.charge_many(self._parts)


def _cost_of(release: Release) -> Cost:
    """A release's cost for the composition rule (validated: exact, in one measure)."""
    epsilon = _validation.cost(release.epsilon, "epsilon")
    delta = _validation.cost(release.delta, "delta")
    if release.rho is None:
        return Cost(epsilon, delta, restored=release.method == RESTORED)
    rho = _validation.cost(release.rho, "rho")
    if epsilon or delta:
        raise InvalidParameterError(
            f"a zCDP release (rho={rho}) must cost epsilon=0 and delta=0, got "
            f"epsilon={epsilon}, delta={delta}: a release is measured in one measure. "
            f"Record the pure or approximate part of a call as a release of its own."
        )
    return Cost(rho=rho, restored=release.method == RESTORED)


def _call_costs(epsilon: Fraction, delta: Fraction, rho: Fraction) -> list[Cost]:
    """The whole cost of one call, as the composition rule charges it (see Ledger.check)."""
    cost_epsilon = _validation.cost(epsilon, "epsilon")
    cost_delta = _validation.cost(delta, "delta")
    cost_rho = _validation.cost(rho, "rho")
    costs = []
    if cost_epsilon or cost_delta or not cost_rho:
        costs.append(Cost(cost_epsilon, cost_delta))
    if cost_rho:
        costs.append(Cost(rho=cost_rho))
    return costs


def _unit_conflict(ours: tuple[Hashable, ...] | None, theirs: tuple[Hashable, ...] | None) -> str:
    """Why two copies of one ledger with different privacy units cannot be merged."""

    def text(unit: tuple[Hashable, ...] | None) -> str:
        return "none (one row per person)" if unit is None else repr(list(unit))

    return (
        "Two copies of this data's ledger had their budgets set with different privacy "
        f"units ({text(ours)} in one, {text(theirs)} in the other), and a file read back "
        "in this process merged them. Releases bounded for one unit are not "
        "bounded for the other, so dpframe cannot say what either person has lost, and "
        "refuses every release from this data in this process. Read back only the copies "
        "whose budget was set with one unit, in a new Python process."
    )


def _identity(release: Release) -> str:
    """One release as saved (its record, time included): the same release in two copies
    of a ledger has the same identity; two releases never do."""
    return json.dumps(release.record(), sort_keys=True)


def _restored(
    why: str, *, epsilon: Fraction = _ZERO, delta: Fraction = _ZERO, rho: Fraction | None = None
) -> Release:
    return Release(
        method=RESTORED,
        columns=(),
        mechanism=why,
        epsilon=epsilon,
        delta=delta,
        rho=rho,
        sensitivity=None,
        noise_scale=None,
        private=True,
        alpha=None,
    )


def _parse_total(epsilon: object, delta: object, rho: object) -> Total:
    """The total of ``set_budget``: exactly one form, validated."""
    if rho is not None:
        if epsilon is not None or delta is not None:
            raise InvalidParameterError(
                f"set_budget got both forms of a budget, epsilon={epsilon!r}, "
                f"delta={delta!r} and rho={rho!r}; pass exactly one: "
                f"set_budget(epsilon=..., delta=...) for (epsilon, delta)-DP, or "
                f"set_budget(rho=...) for zCDP."
            )
        total_rho = budget_rho(rho)
        if not isinstance(total_rho, Fraction):
            return _composition.UNLIMITED
        return Total(rho=total_rho)
    if epsilon is None:
        raise InvalidParameterTypeError(
            "set_budget needs a number for epsilon (or rho): pass "
            "set_budget(epsilon=..., delta=...) for (epsilon, delta)-DP, set_budget(rho=...) "
            "for zCDP, or set_budget(epsilon=math.inf) to explore without a limit."
        )
    total_epsilon, total_delta = _validation.budget(epsilon, delta)
    return Total(total_epsilon, total_delta)


def _total_call(total: Total) -> str:
    if total.rho is not None:
        return f"rho={exact_text(total.rho)}"
    return f"epsilon={exact_text(total.epsilon)}, delta={exact_text(total.delta)}"


def _lower_fix(old: Total) -> str:
    if old.rho is not None:
        return f"Pass rho <= {exact_text(old.rho)}."
    fix = f"Pass epsilon <= {exact_text(old.epsilon)} and delta <= {exact_text(old.delta)}"
    if isinstance(old.epsilon, Fraction) and isinstance(old.delta, Fraction) and old.delta > 0:
        rho = _composition.rho_available(old.epsilon, old.delta)
        fix += f", or rho <= {exact_text(rho)}"
    return fix + "."


def _below_fix(account: Account) -> str:
    fix = (
        f"its pure and approximate releases alone need epsilon >= "
        f"{exact_text(account.raw_epsilon)} and delta >= {exact_text(account.raw_delta)}"
    )
    if account.raw_rho:
        fix += (
            f", and its zCDP releases rho={exact_text(account.raw_rho)} more, which needs "
            f"delta > 0 (or a rho budget)"
        )
    return f"Pass a total that holds them: {fix}."


def total_record(total: Total) -> dict[str, JSONValue]:
    """A total as exact strings: ``{"epsilon": "1/2", "delta": "0"}`` or ``{"rho": ...}``."""
    if total.rho is not None:
        return {"rho": fraction_text(total.rho)}
    return {"epsilon": fraction_text(total.epsilon), "delta": fraction_text(total.delta)}


def encode_key(key: object) -> JSONValue:
    """A declared key (or column name) as JSON data; missing keys become null.

    Strings, integers, booleans and floats are stored as they are; timestamps and time
    deltas as tagged ISO strings (``{"timestamp": "2020-01-01T00:00:00"}``).
    """
    if isinstance(key, np.generic):
        key = key.item()
    if key is None or key is pd.NA or key is pd.NaT or (isinstance(key, float) and math.isnan(key)):
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
            "measure": text([r.measure for r in releases]),
            "epsilon": np.array([float(r.epsilon) for r in releases], dtype=np.float64),
            "delta": np.array([float(r.delta) for r in releases], dtype=np.float64),
            "rho": np.array(
                [math.nan if r.rho is None else float(r.rho) for r in releases], dtype=np.float64
            ),
            "noise_scale": np.array(
                [math.nan if r.noise_scale is None else r.noise_scale for r in releases],
                dtype=np.float64,
            ),
            "noise_error_bound": np.array(
                [_largest(r.noise_error_bound) for r in releases], dtype=np.float64
            ),
            "private": np.array([r.private for r in releases], dtype=np.bool_),
            "privacy_unit": text([", ".join(r.privacy_unit or ()) for r in releases]),
            "max_rows": pd.array([r.max_rows for r in releases], dtype="Int64"),
            "max_groups": pd.array([r.max_groups for r in releases], dtype="Int64"),
        },
        columns=list(HISTORY_COLUMNS),
    )
