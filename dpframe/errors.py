"""The exceptions dpframe raises.

Every privacy mistake raises one of these; none is a warning. Each subclasses the
built-in exception a Python user would expect (``ValueError``, ``TypeError``,
``KeyError``), so ``except ValueError`` keeps working, and each message names the
parameter at fault and how to fix it.
"""

from __future__ import annotations

__all__ = [
    "BudgetExceededError",
    "BudgetNotSetError",
    "DPFrameError",
    "DomainError",
    "InvalidParameterError",
    "InvalidParameterTypeError",
    "LedgerConflictError",
    "MissingColumnError",
    "MissingDependencyError",
    "NoiseOverflowError",
    "NotAReleaseError",
    "PrivacyUnitError",
]


class DPFrameError(Exception):
    """Base class of every exception raised by dpframe."""


class InvalidParameterError(DPFrameError, ValueError):
    """A parameter has the right type but a value that would break the privacy guarantee.

    Examples: ``epsilon=0``, ``epsilon=float("nan")``, ``bounds=(5, 1)``.
    """


class InvalidParameterTypeError(DPFrameError, TypeError):
    """A parameter has a type dpframe cannot use (a string for ``epsilon``, floats as counts)."""


class NoiseOverflowError(DPFrameError, ValueError):
    """Values plus noise could leave the range of the integer or float type used to release them."""


class DomainError(DPFrameError, ValueError):
    """A grouping column has no declared domain, or the declared domain is unusable.

    Group keys must never be read off the data: releasing only the keys present in
    the data reveals who is in it.
    """


class MissingColumnError(DPFrameError, KeyError):
    """A column named in a call does not exist in the frame."""

    def __str__(self) -> str:
        # KeyError.__str__ would wrap the message in quotes.
        return str(self.args[0]) if self.args else ""


class BudgetExceededError(DPFrameError, ValueError):
    """A release would spend more than the privacy budget that remains. Nothing was charged."""


class PrivacyUnitError(DPFrameError, ValueError):
    """Rows no longer belong to one person each (or one privacy unit each), as a release needs.

    For example ``pd.concat([df, df])`` gives every person two rows, which would double the
    privacy loss actually spent. Nothing was charged.
    """


class BudgetNotSetError(DPFrameError, ValueError):
    """A release was asked of data that has no privacy budget. Nothing was charged.

    Set one with ``df.dp.set_budget(epsilon=...)``; the message also lists the pandas
    operations that drop a frame's ledger.
    """


class NotAReleaseError(DPFrameError, TypeError):
    """A value passed to :func:`dpframe.release_info` is not a release dpframe made.

    Values derived from a release by arithmetic, slicing or reindexing are not releases:
    the release's metadata (its error bars above all) does not describe them.
    """


class LedgerConflictError(DPFrameError, ValueError):
    """Frames that spend different privacy budgets were combined."""


class MissingDependencyError(DPFrameError, ImportError):
    """An optional dependency is not installed (matplotlib, for :mod:`dpframe.plotting`)."""
