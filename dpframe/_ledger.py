"""The privacy ledger: a budget that belongs to the data, not to one Python object.

A :class:`Ledger` holds a total privacy budget ``(epsilon, delta)``, what has been
spent so far and one record per release, all in exact rational arithmetic. The ``.dp``
accessor finds the ledger of a frame with :func:`ledger_of` and follows "check, then
draw, then charge" for every release: :meth:`Ledger.check` refuses a release that does
not fit before any noise is drawn, and :meth:`Ledger.charge` re-checks and records it.

How a ledger follows its data
-----------------------------
pandas 3 builds a new accessor object on every ``df.dp`` access, so nothing can be kept
on the accessor. The ledger lives instead in ``frame.attrs["dpframe"]`` behind a small
handle object, :class:`_LedgerHandle`, which pandas carries to derived frames:

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
  rebuilds it from the saved state.

A module-level registry maps ids to live ledgers (weak references: a ledger lives as
long as some frame holds its handle) and keeps, for every ledger that was ever charged
or given a budget, a high-water mark (its lowest total and highest spent amount). A
saved copy restored later can therefore never lower what this process knows was spent,
even after every frame of the original ledger has been garbage-collected. Whenever a
saved record meets a ledger (reconnect or rebuild), the result keeps the lowest total
and the highest spent amount of the two; spending the ledger did not know of appears
as one history row, method ``"(restored)"``, so ``spent`` is always the exact sum of
the history.

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

Not caught, because pandas gives no hook:

* combining with a frame whose ``attrs`` are empty (never budgeted, or built from
  values): pandas drops ``attrs`` and the result has no ledger, so ``.dp`` on it starts
  a new, unlimited one;
* frames whose ``attrs`` also differ in another key: pandas drops ``attrs`` silently
  unless it happens to compare the ``"dpframe"`` key first (then it raises);
* binary operations between two frames or Series (``df1 + df2``, ``df1 == df2``) keep
  the *right* operand's ledger; ``combine``, ``combine_first``, ``where``/``mask``
  with another frame, ``update`` and ``align`` keep the left one's;
* ``pd.DataFrame(df)``, ``value_counts``, ``groupby(...).size()`` and ``pd.crosstab``
  return results without a ledger;
* two frames read from files and combined before either was touched by ``.dp`` hold
  plain dicts, which pandas compares by content: different ledgers drop ``attrs``;
* whoever holds the raw data can leave the ledger behind: ``to_numpy()``, ``to_csv``
  (writes no metadata), clearing ``df.attrs``, editing a saved file, or restoring a
  pickle in another process after the original went on spending.
"""

from __future__ import annotations

import dataclasses
import datetime
import html
import math
import numbers
import threading
import uuid
import weakref
from collections.abc import Mapping, Sequence
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from dpframe import _validation
from dpframe._exact import simplest_rational
from dpframe.errors import (
    BudgetExceededError,
    InvalidParameterError,
    InvalidParameterTypeError,
    LedgerConflictError,
)

__all__ = ["Budget", "Ledger"]

#: The key of ``DataFrame.attrs`` under which a frame's ledger handle is stored.
ATTRS_KEY = "dpframe"

# The marker and version of the JSON-serializable ledger record (to_dict, attrs, files).
_FORMAT = "dpframe.ledger"
_VERSION = 1

_ZERO = Fraction(0)

# A terminating decimal with more significant digits than this is shown as a fraction.
_MAX_SHOWN_DIGITS = 20

HISTORY_COLUMNS = (
    "time",
    "method",
    "columns",
    "mechanism",
    "epsilon",
    "delta",
    "noise_scale",
    "private",
)

# ------------------------------------------------------------------ exact display


def _decimal_text(exact: Decimal) -> str:
    """A terminating decimal in plain notation, or scientific when very large or small."""
    with localcontext() as ctx:
        ctx.prec = 2 * _MAX_SHOWN_DIGITS
        normal = exact.normalize()
        if -7 < normal.adjusted() < 16:
            return format(normal, "f")
        return format(normal, "e")


def exact_text(value: Fraction | float) -> str:
    """Show an exact amount without float artefacts.

    Integers show as integers (``1``), fractions with a terminating decimal expansion
    as that exact decimal (``3/10`` as ``0.3``, ``1/1000000`` as ``0.000001``,
    ``1/10**9`` as ``1e-9``), and every other fraction as ``numerator/denominator``
    followed by a 6-significant-digit approximation (``1/3 (≈0.333333)``). ``math.inf``
    shows as ``inf``.
    """
    if not isinstance(value, Fraction):
        return "inf" if value == math.inf else repr(value)
    if value.denominator == 1:
        return str(value.numerator)
    rest, twos, fives = value.denominator, 0, 0
    while rest % 2 == 0:
        rest //= 2
        twos += 1
    while rest % 5 == 0:
        rest //= 5
        fives += 1
    if rest == 1:
        places = max(twos, fives)
        scaled = value.numerator * 10**places // value.denominator  # exact: 10**places divides
        if len(str(abs(scaled)).strip("0")) <= _MAX_SHOWN_DIGITS:
            return _decimal_text(Decimal(f"{scaled}E-{places}"))
    return f"{value.numerator}/{value.denominator} (≈{float(value):.6g})"


def _fraction_text(value: Fraction | float) -> str:
    """The exact machine-readable form stored in records: ``"1/11"``, ``"0"``, ``"inf"``."""
    return str(value) if isinstance(value, Fraction) else "inf"


# ------------------------------------------------------------------ Budget


def _budget_amount(value: Any, name: str) -> Fraction | float:
    """A budget component: ``math.inf`` or an exact non-negative Fraction."""
    if isinstance(value, float) and value == math.inf:
        return math.inf
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise InvalidParameterTypeError(
            f"Budget.{name} must be a number, got {value!r} of type {type(value).__name__}. "
            f"Pass a Fraction, an int, a float or math.inf."
        )
    if isinstance(value, numbers.Integral):
        exact = Fraction(int(value))
    elif isinstance(value, Fraction):
        exact = value
    else:
        as_float = float(value)
        if math.isnan(as_float) or as_float == -math.inf:
            raise InvalidParameterError(f"Budget.{name} must be >= 0 or math.inf, got {value!r}.")
        if as_float == math.inf:
            return math.inf
        exact = simplest_rational(as_float)
    if exact < 0:
        raise InvalidParameterError(f"Budget.{name} must be >= 0, got {value!r}.")
    return exact


@dataclasses.dataclass(frozen=True, repr=False)
class Budget:
    """A privacy budget or amount: ``(epsilon, delta)``, exact.

    Parameters
    ----------
    epsilon : Fraction or float
        The privacy-loss amount, ``math.inf`` when unlimited.
    delta : Fraction or float
        The failure-probability amount, ``math.inf`` when unlimited.

    Notes
    -----
    Finite components are stored as :class:`fractions.Fraction`; a float given here is
    read as the simplest fraction that rounds to it (``0.1`` is exactly 1/10), and
    ``math.inf`` stays a float. ``repr`` and ``str`` show finite components exactly:
    ``Budget(epsilon=0.3, delta=0)``, never ``0.30000000000000004``; a fraction whose
    decimal expansion does not terminate shows as ``1/3 (≈0.333333)``, the exact value
    first and a 6-significant-digit approximation after it. Ledgers add amounts under
    basic sequential composition: releases of ``(ε1, δ1)`` and ``(ε2, δ2)`` on the same
    data together cost ``(ε1 + ε2, δ1 + δ2)``.

    Examples
    --------
    >>> from fractions import Fraction
    >>> from dpframe._ledger import Budget
    >>> Budget(epsilon=Fraction(1, 10) + Fraction(2, 10), delta=0)
    Budget(epsilon=0.3, delta=0)
    >>> Budget(epsilon=Fraction(1, 3), delta=Fraction(1, 10**6))
    Budget(epsilon=1/3 (≈0.333333), delta=0.000001)
    """

    epsilon: Fraction | float
    delta: Fraction | float

    def __post_init__(self) -> None:
        # frozen: normalize through object.__setattr__ (ints and floats become Fractions).
        object.__setattr__(self, "epsilon", _budget_amount(self.epsilon, "epsilon"))
        object.__setattr__(self, "delta", _budget_amount(self.delta, "delta"))

    @property
    def unlimited(self) -> bool:
        """True when neither component is limited (both are ``math.inf``)."""
        return self.epsilon == math.inf and self.delta == math.inf

    def __repr__(self) -> str:
        return f"Budget(epsilon={exact_text(self.epsilon)}, delta={exact_text(self.delta)})"


# ------------------------------------------------------------------ releases


@dataclasses.dataclass(frozen=True)
class _Release:
    """One recorded release, with its exact cost."""

    time: datetime.datetime
    method: str
    columns: str
    mechanism: str
    epsilon: Fraction
    delta: Fraction
    noise_scale: float | None
    private: bool

    def to_record(self) -> dict[str, Any]:
        return {
            "time": self.time.isoformat(),
            "method": self.method,
            "columns": self.columns,
            "mechanism": self.mechanism,
            "epsilon": _fraction_text(self.epsilon),
            "delta": _fraction_text(self.delta),
            "noise_scale": self.noise_scale,
            "private": self.private,
        }


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _cost(value: Any, name: str) -> Fraction:
    """A release cost: an exact rational >= 0 (and < 1 for delta). Never a float."""
    fix = (
        f"Convert user input with dpframe._validation.{name}(), which returns an exact "
        f"Fraction (0.1 becomes exactly 1/10) and refuses NaN, infinities and negatives."
    )
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise InvalidParameterTypeError(
            f"The {name} cost must be a fractions.Fraction, got {value!r} of type "
            f"{type(value).__name__}. {fix}"
        )
    if not isinstance(value, numbers.Rational):
        # Floats (NaN and infinities included) never reach the ledger: float sums drift
        # (eleven charges of 1/11 would exceed 1) and NaN compares false with everything.
        raise InvalidParameterError(
            f"The {name} cost must be exact (a fractions.Fraction), got the "
            f"{type(value).__name__} {value!r}. {fix}"
        )
    exact = Fraction(int(value)) if isinstance(value, numbers.Integral) else Fraction(value)
    if exact < 0:
        raise InvalidParameterError(
            f"The {name} cost must be >= 0, got {exact}: a negative cost would refund "
            f"privacy budget. {fix}"
        )
    if name == "delta" and exact >= 1:
        raise InvalidParameterError(
            f"The delta cost must be below 1, got {exact}: a release with delta >= 1 has "
            f"no privacy guarantee. {fix}"
        )
    return exact


# ------------------------------------------------------------------ the ledger


class Ledger:
    """The privacy budget of one data set: its total, what was spent and on what.

    A new ledger is unlimited (``total`` is ``Budget(epsilon=inf, delta=inf)``) until
    :meth:`set_budget` is called; it records spending either way, so a budget set later
    accounts for everything released before.

    Notes
    -----
    **Accounting.** Costs add under basic sequential composition (Dwork and Roth 2014,
    Theorem 3.16): a sequence of releases of costs ``(ε_i, δ_i)`` on the same data is
    ``(Σ ε_i, Σ δ_i)``-differentially private, neighbouring data sets differing by one
    added or removed row. A release is allowed only when ``spent + cost <= total`` in
    both components. Every amount is an exact :class:`~fractions.Fraction`: eleven
    charges of 1/11 fit exactly in a budget of 1, and ``0.1 + 0.2`` is spent as 3/10.

    **Check, then draw, then charge.** Callers call :meth:`check` before drawing any
    noise (it never changes state, so a refused release costs nothing and draws
    nothing), then draw, then :meth:`charge`, which re-checks and records the release
    atomically under the ledger's lock. If two threads race for the last of the budget
    and :meth:`charge` refuses, the caller must discard what it drew.

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
    >>> from dpframe._ledger import Ledger
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
        "_handle",
        "_id",
        "_lock",
        "_releases",
        "_spent_delta",
        "_spent_epsilon",
        "_total_delta",
        "_total_epsilon",
    )

    _id: str
    _lock: threading.RLock
    _total_epsilon: Fraction | float
    _total_delta: Fraction | float
    _spent_epsilon: Fraction
    _spent_delta: Fraction
    _releases: list[_Release]
    _handle: _LedgerHandle

    def __init__(self) -> None:
        self._setup(uuid.uuid4().hex)
        _register(self)

    def _setup(self, ledger_id: str) -> None:
        self._id = ledger_id
        self._lock = threading.RLock()
        self._total_epsilon = math.inf
        self._total_delta = math.inf
        self._spent_epsilon = _ZERO
        self._spent_delta = _ZERO
        self._releases = []
        self._handle = _LedgerHandle(self)

    # ---------------------------------------------------------------- state

    @property
    def id(self) -> str:
        """The ledger's identifier (a uuid4 in hex), kept through pickle and parquet."""
        return self._id

    @property
    def total(self) -> Budget:
        """The total budget; ``Budget(epsilon=inf, delta=inf)`` until one is set."""
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

        Columns: ``time`` (UTC timestamp), ``method``, ``columns``, ``mechanism`` (str),
        ``epsilon``, ``delta`` (float64, the exact costs are kept internally and in
        :meth:`to_dict`), ``noise_scale`` (float64, NaN when the release has none) and
        ``private`` (bool: False for releases drawn from a seeded generator).
        """
        with self._lock:
            releases = list(self._releases)
        return _history_frame(releases)

    def to_dict(self) -> dict[str, Any]:
        """The ledger's state as JSON-serializable data.

        Returns
        -------
        dict
            ``{"format": "dpframe.ledger", "version": 1, "id": ..., "total": {"epsilon":
            ..., "delta": ...}, "spent": {...}, "history": [...]}``. Amounts are exact
            fraction strings (``"1/11"``, ``"0"``, ``"inf"``), times ISO 8601 strings
            in UTC, ``noise_scale`` a float or None.
        """
        with self._lock:
            return {
                "format": _FORMAT,
                "version": _VERSION,
                "id": self._id,
                "total": self._total_record(),
                "spent": self._spent_record(),
                "history": [release.to_record() for release in self._releases],
            }

    def _total_record(self) -> dict[str, str]:
        return {
            "epsilon": _fraction_text(self._total_epsilon),
            "delta": _fraction_text(self._total_delta),
        }

    def _spent_record(self) -> dict[str, str]:
        return {
            "epsilon": _fraction_text(self._spent_epsilon),
            "delta": _fraction_text(self._spent_delta),
        }

    # ---------------------------------------------------------------- budget

    def set_budget(self, epsilon: float | Fraction, delta: float | Fraction = 0.0) -> None:
        """Set the total privacy budget (first time), or lower it.

        Parameters
        ----------
        epsilon : float or Fraction
            Total privacy-loss budget, a finite number > 0.
        delta : float or Fraction, default 0.0
            Total failure-probability budget, in ``[0, 1)``. Both components are set:
            ``set_budget(0.5)`` on a ledger with ``delta=1e-6`` sets ``delta`` to 0.

        Raises
        ------
        InvalidParameterError, InvalidParameterTypeError
            For an epsilon that is not a finite number > 0 or a delta outside
            ``[0, 1)`` (NaN, infinities, bools and strings are refused), or when a
            budget is already set and either component would be raised.
        BudgetExceededError
            When the new total is below what has already been spent.

        Notes
        -----
        A ledger starts unlimited. The first call may set any total at least equal to
        what was spent meanwhile. Later calls may keep or lower each component, never
        raise it, and never go below the spent amount. Raising is refused because it
        would refund spent privacy: if the data owner grants a new budget, build a new
        frame from the source data. Nothing changes when a call is refused.
        """
        new_epsilon = _validation.epsilon(epsilon)
        new_delta = _validation.delta(delta)
        with self._lock:
            already_set = self._total_epsilon != math.inf or self._total_delta != math.inf
            if already_set and (new_epsilon > self._total_epsilon or new_delta > self._total_delta):
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
            self._after_change()

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
        cost_epsilon = _cost(epsilon, "epsilon")
        cost_delta = _cost(delta, "delta")
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

    def charge(
        self,
        *,
        method: str,
        columns: Sequence[str],
        mechanism: str,
        epsilon: Fraction,
        delta: Fraction,
        noise_scale: float | None,
        private: bool,
    ) -> None:
        """Record a release: re-check that it fits, then add its cost, atomically.

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
        self.charge_many(
            [
                {
                    "method": method,
                    "columns": columns,
                    "mechanism": mechanism,
                    "epsilon": epsilon,
                    "delta": delta,
                    "noise_scale": noise_scale,
                    "private": private,
                }
            ]
        )

    def charge_many(self, parts: Sequence[Mapping[str, Any]]) -> None:
        """Record several parts of one release (same keywords as :meth:`charge`), all or none.

        The summed cost is re-checked under the ledger's lock, so a concurrent release
        cannot leave some parts charged and others refused.
        """
        releases = [
            _Release(
                time=_now(),
                method=_text(part["method"], "method"),
                columns=_columns_text(part["columns"]),
                mechanism=_text(part["mechanism"], "mechanism"),
                epsilon=_cost(part["epsilon"], "epsilon"),
                delta=_cost(part["delta"], "delta"),
                noise_scale=_noise_scale(part["noise_scale"]),
                private=_flag(part["private"], "private"),
            )
            for part in parts
        ]
        total_epsilon = sum((r.epsilon for r in releases), _ZERO)
        total_delta = sum((r.delta for r in releases), _ZERO)
        with self._lock:
            self._check_locked(total_epsilon, total_delta)
            for release in releases:
                self._record(release)

    def _record(self, release: _Release) -> None:
        """Append a release and its cost (caller holds the lock and has checked)."""
        self._releases.append(release)
        self._spent_epsilon += release.epsilon
        self._spent_delta += release.delta
        self._handle._append(release.to_record())
        self._after_change()

    def _after_change(self) -> None:
        """Mirror the totals into the handle and raise the high-water mark (lock held)."""
        self._handle._refresh()
        _HIGH_WATER[self._id] = (
            self._total_epsilon,
            self._total_delta,
            self._spent_epsilon,
            self._spent_delta,
        )

    def _absorb(
        self,
        total: tuple[Fraction | float, Fraction | float],
        spent: tuple[Fraction, Fraction],
        why: str,
    ) -> None:
        """Merge another copy's state conservatively: lowest total, highest spent.

        A spent amount above ours is recorded as one release row holding the difference,
        so that ``spent`` stays the exact sum of the history.
        """
        with self._lock:
            missing_epsilon = max(_ZERO, spent[0] - self._spent_epsilon)
            missing_delta = max(_ZERO, spent[1] - self._spent_delta)
            lower_total = total[0] < self._total_epsilon or total[1] < self._total_delta
            if missing_epsilon or missing_delta:
                self._releases.append(
                    _Release(
                        time=_now(),
                        method="(restored)",
                        columns="",
                        mechanism=why,
                        epsilon=missing_epsilon,
                        delta=missing_delta,
                        noise_scale=None,
                        private=True,
                    )
                )
                self._spent_epsilon += missing_epsilon
                self._spent_delta += missing_delta
                self._handle._append(self._releases[-1].to_record())
            if lower_total:
                self._total_epsilon = min(self._total_epsilon, total[0])
                self._total_delta = min(self._total_delta, total[1])
            if missing_epsilon or missing_delta or lower_total:
                self._after_change()

    # ---------------------------------------------------------------- copying

    def __copy__(self) -> Ledger:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Ledger:
        return self

    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any]]]:
        return (_unpickle_ledger, (self.to_dict(),))

    # ---------------------------------------------------------------- display

    def __repr__(self) -> str:
        with self._lock:
            return (
                f"Ledger(total={self.total}, spent={self.spent}, "
                f"remaining={self.remaining}, releases={len(self._releases)})"
            )

    def _repr_html_(self) -> str:
        """An HTML summary for notebooks: total, spent and remaining, then the history."""
        with self._lock:
            rows = [("total", self.total), ("spent", self.spent), ("remaining", self.remaining)]
            releases = list(self._releases)
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
        return f'<div class="dpframe-ledger">{summary}{history}</div>'


def _remaining(total: Fraction | float, spent: Fraction) -> Fraction | float:
    if not isinstance(total, Fraction):
        return math.inf
    return max(_ZERO, total - spent)


def _history_frame(releases: Sequence[_Release]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "time": pd.DatetimeIndex([r.time for r in releases], dtype="datetime64[us, UTC]"),
            "method": pd.array([r.method for r in releases], dtype="str"),
            "columns": pd.array([r.columns for r in releases], dtype="str"),
            "mechanism": pd.array([r.mechanism for r in releases], dtype="str"),
            "epsilon": np.array([float(r.epsilon) for r in releases], dtype=np.float64),
            "delta": np.array([float(r.delta) for r in releases], dtype=np.float64),
            "noise_scale": np.array(
                [math.nan if r.noise_scale is None else r.noise_scale for r in releases],
                dtype=np.float64,
            ),
            "private": np.array([r.private for r in releases], dtype=np.bool_),
        },
        columns=list(HISTORY_COLUMNS),
    )


def _text(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise InvalidParameterTypeError(
            f"{name} must be a str, got {value!r} of type {type(value).__name__}."
        )
    return value


def _columns_text(columns: Any) -> str:
    if isinstance(columns, str):
        return columns
    if not isinstance(columns, Sequence | pd.Index):
        raise InvalidParameterTypeError(
            f"columns must be a sequence of column labels, got {columns!r} of type "
            f"{type(columns).__name__}."
        )
    return ", ".join(str(label) for label in columns)


def _noise_scale(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise InvalidParameterTypeError(
            f"noise_scale must be a number or None, got {value!r} of type {type(value).__name__}."
        )
    scale = float(value)
    if not (math.isfinite(scale) and scale >= 0):
        raise InvalidParameterError(
            f"noise_scale must be a finite number >= 0, or None when the release has no "
            f"noise scale; got {value!r}."
        )
    return scale


def _flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool | np.bool_):
        raise InvalidParameterTypeError(f"{name} must be True or False, got {value!r}.")
    return bool(value)


# ------------------------------------------------------------------ the handle in attrs


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
        super().__init__()
        self.ledger = ledger
        self["format"] = _FORMAT
        self["version"] = _VERSION
        self["id"] = ledger.id
        self["total"] = {}
        self["spent"] = {}
        self["history"] = []

    def _refresh(self) -> None:
        self["total"] = self.ledger._total_record()
        self["spent"] = self.ledger._spent_record()

    def _append(self, record: dict[str, Any]) -> None:
        self["history"].append(record)

    def __copy__(self) -> _LedgerHandle:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> _LedgerHandle:
        return self

    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any]]]:
        return (_unpickle_handle, (self.ledger.to_dict(),))

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, tuple[dict[str, Any]]]:
        return self.__reduce__()

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        other_id = _record_id(other)
        if other_id is None:
            return False
        if other_id == self.ledger.id:
            return True
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


def _record_id(value: object) -> str | None:
    """The ledger id of a handle or of a saved ledger record; None for anything else."""
    if isinstance(value, _LedgerHandle):
        return value.ledger.id
    if isinstance(value, Mapping) and value.get("format") == _FORMAT:
        found = value.get("id")
        return found if isinstance(found, str) else None
    return None


# ------------------------------------------------------------------ registry and restore

_REGISTRY_LOCK = threading.Lock()
_LIVE: weakref.WeakValueDictionary[str, Ledger] = weakref.WeakValueDictionary()
# id -> (total epsilon, total delta, spent epsilon, spent delta), for every ledger that
# was ever charged or given a budget in this process; a few hundred bytes each.
_HIGH_WATER: dict[str, tuple[Fraction | float, Fraction | float, Fraction, Fraction]] = {}


def _register(ledger: Ledger) -> None:
    with _REGISTRY_LOCK:
        _LIVE[ledger.id] = ledger


@dataclasses.dataclass(frozen=True)
class _Saved:
    ledger_id: str
    total: tuple[Fraction | float, Fraction | float]
    spent: tuple[Fraction, Fraction]
    releases: tuple[_Release, ...]


class _BadRecordError(InvalidParameterError):
    """A saved ledger record that cannot be read (raised as InvalidParameterError)."""


def _bad_record(reason: str) -> _BadRecordError:
    return _BadRecordError(
        f"frame.attrs[{ATTRS_KEY!r}] (or the pickled ledger) is not a valid dpframe ledger "
        f"record: {reason}. Restore the file it came from, or, if you own the data and mean "
        f"to start a new budget, delete it with `del df.attrs[{ATTRS_KEY!r}]`."
    )


def _parse_amount(value: Any, what: str, *, allow_inf: bool) -> Fraction | float:
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
    return exact


def _parse_finite(value: Any, what: str) -> Fraction:
    exact = _parse_amount(value, what, allow_inf=False)
    if not isinstance(exact, Fraction):  # pragma: no cover - allow_inf=False
        raise _bad_record(f"{what} is not finite")
    return exact


def _parse_release(record: Any, index: int) -> _Release:
    where = f"history[{index}]"
    if not isinstance(record, Mapping):
        raise _bad_record(f"{where} is not a mapping")
    try:
        time = datetime.datetime.fromisoformat(str(record["time"]))
        scale = record["noise_scale"]
        release = _Release(
            time=time if time.tzinfo else time.replace(tzinfo=datetime.UTC),
            method=_text(record["method"], f"{where}.method"),
            columns=_text(record["columns"], f"{where}.columns"),
            mechanism=_text(record["mechanism"], f"{where}.mechanism"),
            epsilon=_parse_finite(record["epsilon"], f"{where}.epsilon"),
            delta=_parse_finite(record["delta"], f"{where}.delta"),
            noise_scale=_noise_scale(scale),
            private=_flag(record["private"], f"{where}.private"),
        )
    except _BadRecordError:
        raise
    except KeyError as error:
        raise _bad_record(f"{where} lacks the field {error}") from error
    except (TypeError, ValueError) as error:
        raise _bad_record(f"{where} is malformed ({error})") from error
    return release


def _parse_state(state: Any) -> _Saved:
    if not isinstance(state, Mapping):
        raise _bad_record(f"expected a mapping, got {type(state).__name__}")
    if state.get("format") != _FORMAT:
        raise _bad_record(f"its 'format' is {state.get('format')!r}, not {_FORMAT!r}")
    if state.get("version") != _VERSION:
        raise _bad_record(
            f"its version is {state.get('version')!r}; this dpframe reads version {_VERSION}"
        )
    ledger_id = state.get("id")
    if not isinstance(ledger_id, str) or not ledger_id:
        raise _bad_record("it has no id")
    total, spent, history = state.get("total"), state.get("spent"), state.get("history")
    if not isinstance(total, Mapping) or not isinstance(spent, Mapping):
        raise _bad_record("'total' and 'spent' must be mappings")
    if not isinstance(history, Sequence) or isinstance(history, str):
        raise _bad_record("'history' must be a list")
    return _Saved(
        ledger_id=ledger_id,
        total=(
            _parse_amount(total.get("epsilon"), "total.epsilon", allow_inf=True),
            _parse_amount(total.get("delta"), "total.delta", allow_inf=True),
        ),
        spent=(
            _parse_finite(spent.get("epsilon"), "spent.epsilon"),
            _parse_finite(spent.get("delta"), "spent.delta"),
        ),
        releases=tuple(_parse_release(record, i) for i, record in enumerate(history)),
    )


def _restore(state: Any) -> Ledger:
    """The live ledger a saved record belongs to, or one rebuilt from the record.

    Whichever it is absorbs the record conservatively (lowest total, highest spent), as
    well as this process's high-water mark for that id, so a saved copy never refunds.
    """
    saved = _parse_state(state)
    with _REGISTRY_LOCK:
        ledger = _LIVE.get(saved.ledger_id)
        if ledger is None:
            ledger = Ledger.__new__(Ledger)
            ledger._setup(saved.ledger_id)
            with ledger._lock:
                for release in saved.releases:
                    ledger._releases.append(release)
                    ledger._spent_epsilon += release.epsilon
                    ledger._spent_delta += release.delta
                    ledger._handle._append(release.to_record())
                ledger._handle._refresh()
            _LIVE[saved.ledger_id] = ledger
            mark = _HIGH_WATER.get(saved.ledger_id)
            if mark is not None:
                ledger._absorb(
                    (mark[0], mark[1]), (mark[2], mark[3]), "spent after this copy was saved"
                )
        ledger._absorb(saved.total, saved.spent, "spent in another copy of this ledger")
    return ledger


def _unpickle_handle(state: dict[str, Any]) -> _LedgerHandle:
    return _restore(state)._handle


def _unpickle_ledger(state: dict[str, Any]) -> Ledger:
    return _restore(state)


# ------------------------------------------------------------------ frames


def ledger_of(frame: pd.DataFrame | pd.Series[Any], *, create: bool = True) -> Ledger | None:
    """The ledger attached to this frame's data.

    Parameters
    ----------
    frame : DataFrame or Series
        A frame, possibly derived from a budgeted one (filters, copies, column
        selections, concat/merge of frames with the same ledger, a pickle or parquet
        round trip...).
    create : bool, default True
        When the frame has no ledger: attach a new unlimited one and return it (True),
        or return None (False).

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
        ledger = _restore(value)
    elif create:
        ledger = Ledger()
    else:
        return None
    frame.attrs[ATTRS_KEY] = ledger._handle
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
        frame has one, a new unlimited ledger is attached to all of them.

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
        frame.attrs[ATTRS_KEY] = shared._handle
    return shared
