"""One release, one type: :class:`Release`.

A :class:`Release` describes one noisy value that dpframe handed out: what was released
(method, columns, filter, grouping, bounds), how (mechanism, sensitivity, noise scale),
what it cost (exact, in its own measure: pure epsilon, approximate (epsilon, delta), or
zCDP rho), its error bar, and whether it is private. It is
built *before* the noise is drawn, from public parameters only; the ledger keeps it as its
history row, and :func:`dpframe.release_info` shows its :meth:`Release.metadata`.

This module is a leaf: it imports nothing else of dpframe, and nothing of pandas.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Literal, TypeAlias

import numpy as np
from numpy.typing import NDArray

__all__ = ["ErrorBound", "JSONValue", "Measure", "Release", "call_metadata"]

JSONValue: TypeAlias = (
    bool | int | float | str | list["JSONValue"] | dict[str, "JSONValue"] | None
)  #: A 95% half-width: one number for the whole result, or one per cell, shaped like it.
ErrorBound: TypeAlias = float | NDArray[np.float64] | None
#: How a release's privacy cost is measured: pure epsilon-DP (delta 0), approximate
#: (epsilon, delta)-DP, or rho-zCDP (zero-concentrated DP, Bun and Steinke 2016).
Measure: TypeAlias = Literal["pure", "approx", "zCDP"]

#: What the error bars of dpframe cover; stated in every release's metadata.
NOISE_ONLY = "noise only"
NOISE_ONLY_CLAMPED = "noise only; the bias from clamping values into the bounds is not included"


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _jsonable(value: object) -> JSONValue:
    """Plain JSON data for ``value`` (arrays become nested lists, Fractions floats)."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "iub" or (value.dtype.kind == "f" and np.isfinite(value).all()):
            nested: list[JSONValue] = value.tolist()  # plain Python numbers, at C speed
            return nested
        return [_jsonable(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        return _jsonable(value.item())
    if isinstance(value, int):
        return value
    if isinstance(value, Fraction | float):
        number = float(value)
        return number if math.isfinite(number) else str(number)
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return str(value)


@dataclasses.dataclass(frozen=True, eq=False)
class Release:
    """What one release consists of: built before its noise is drawn, never changed after.

    Attributes
    ----------
    method : str
        The releasing method (``"count"``, ``"crosstab"``, ``"sum"``, ...).
    columns : tuple of str
        The columns the release aggregates and groups by (a ``where`` condition, kept
        in ``where``, may read others).
    mechanism : str
        The noise mechanism (``"geometric"``, ...).
    epsilon, delta : Fraction
        The exact cost charged for this release, for a pure (``delta = 0``) or
        approximate release; both 0 for a zCDP release.
    sensitivity : float or None
        The most one row can change one released value (in the released units).
    noise_scale : float or None
        The noise's scale parameter (``sensitivity / epsilon`` for the geometric).
    private : bool
        False when the noise came from a caller's ``rng=`` (reproducible, so not private).
    alpha : float or None
        The error bars hold with probability at least ``1 - alpha``.
    noise_error_bound : float, numpy array or None
        The ``1 - alpha`` half-width of the noise of each released value: a number, or an
        array shaped like the released table.
    error_bound_covers : str
        What the error bar covers (the noise only; clamping bias never, since it would
        need the data).
    where : str or None
        The row filter, as given (an expression), or a description of it.
    by : tuple of str
        The grouping columns.
    bounds : tuple of float or None
        The declared (or privately estimated) range of one value, for sums.
    post_processing : tuple of str
        What was done to the noisy values afterwards (free of privacy cost).
    details : tuple of (str, JSON value) pairs
        Further facts specific to the method (grid step, threshold, ...).
    time : datetime
        When the release was built (UTC).
    rho : Fraction or None
        The exact zCDP cost of a zCDP release (discrete Gaussian noise), whose
        ``epsilon`` and ``delta`` are then 0: a release is measured in one measure only
        (see :attr:`measure`). None for pure and approximate releases.
    privacy_unit : tuple of str or None
        The columns identifying the protected entity when the ledger declares one (then
        ``sensitivity`` is what one *unit* can change); None when one row is one unit.
    max_rows, max_groups : int or None
        The contribution bounds enforced before the release on a unit-protected frame:
        the most rows one unit kept per cell, and the most cells it kept rows in.
    """

    method: str
    columns: tuple[str, ...]
    mechanism: str
    epsilon: Fraction
    delta: Fraction
    sensitivity: float | None
    noise_scale: float | None
    private: bool
    alpha: float | None = 0.05
    noise_error_bound: ErrorBound = None
    error_bound_covers: str = NOISE_ONLY
    where: str | None = None
    by: tuple[str, ...] = ()
    bounds: tuple[float, float] | None = None
    post_processing: tuple[str, ...] = ()
    details: tuple[tuple[str, JSONValue], ...] = ()
    time: datetime.datetime = dataclasses.field(default_factory=_now)
    rho: Fraction | None = None
    privacy_unit: tuple[str, ...] | None = None
    max_rows: int | None = None
    max_groups: int | None = None

    @property
    def measure(self) -> Measure:
        """``"zCDP"`` when ``rho`` is set, ``"approx"`` when ``delta > 0``, else ``"pure"``."""
        if self.rho is not None:
            return "zCDP"
        return "approx" if self.delta > 0 else "pure"

    def _rho_fields(self) -> dict[str, JSONValue]:
        if self.rho is None:
            return {}
        return {"rho": float(self.rho), "rho_exact": str(self.rho)}

    def replace(self, **changes: object) -> Release:
        """A copy with some fields changed (the release itself never changes)."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def _unit_fields(self) -> dict[str, JSONValue]:
        return {
            "privacy_unit": None if self.privacy_unit is None else list(self.privacy_unit),
            "max_rows": self.max_rows,
            "max_groups": self.max_groups,
        }

    def metadata(self) -> dict[str, JSONValue]:
        """What :func:`dpframe.release_info` shows: plain, JSON-serializable data."""
        return {
            "method": self.method,
            "columns": list(self.columns),
            "where": self.where,
            "by": list(self.by),
            "mechanism": self.mechanism,
            "epsilon": float(self.epsilon),
            "epsilon_exact": str(self.epsilon),  # "1/2", "1/11": exact
            "delta": float(self.delta),
            "delta_exact": str(self.delta),
            "measure": self.measure,
            **self._rho_fields(),
            "sensitivity": self.sensitivity,
            "noise_scale": self.noise_scale,
            "bounds": None if self.bounds is None else list(self.bounds),
            "alpha": self.alpha,
            "noise_error_bound": _jsonable(self.noise_error_bound),
            "error_bound_covers": self.error_bound_covers,
            "private": self.private,
            **self._unit_fields(),
            "post_processing": list(self.post_processing),
            **{key: _jsonable(value) for key, value in self.details},
        }

    def record(self) -> dict[str, JSONValue]:
        """The ledger's record of this release: exact amounts as strings, JSON data.

        Read back by :func:`dpframe._persistence.parse_release`. A table's error bar is
        kept as its largest cell or margin bar. A zCDP release adds ``"rho"`` (an exact
        fraction string); records without it (version 2) are pure or approximate. A
        release on a unit-protected frame adds ``"privacy_unit"``, ``"max_rows"`` and
        ``"max_groups"``.
        """
        bound = self.noise_error_bound
        if isinstance(bound, np.ndarray):
            bound = float(bound.max()) if bound.size else None
        extra: dict[str, JSONValue] = {} if self.rho is None else {"rho": str(self.rho)}
        if self.privacy_unit is not None:
            extra.update(self._unit_fields())
        return {
            "time": self.time.isoformat(),
            "method": self.method,
            "columns": list(self.columns),
            "where": self.where,
            "by": list(self.by),
            "bounds": None if self.bounds is None else list(self.bounds),
            "mechanism": self.mechanism,
            "epsilon": str(self.epsilon),
            "delta": str(self.delta),
            "sensitivity": self.sensitivity,
            "noise_scale": self.noise_scale,
            "alpha": self.alpha,
            "noise_error_bound": None if bound is None else float(bound),
            "private": self.private,
            **extra,
        }

    def summary(self) -> dict[str, JSONValue]:
        """The short form used for the parts of a multi-part call."""
        return {
            "method": self.method,
            "mechanism": self.mechanism,
            "epsilon": float(self.epsilon),
            "epsilon_exact": str(self.epsilon),
            "delta": float(self.delta),
            "delta_exact": str(self.delta),
            "measure": self.measure,
            **self._rho_fields(),
            "private": self.private,
        }


def call_metadata(parts: Sequence[Release], summary: Release | None = None) -> dict[str, JSONValue]:
    """The metadata of a call, costing all of its parts.

    A call may draw noise more than once (``bounds="auto"`` first releases a noisy
    histogram, then the sum; a mean releases a count and a sum): the result is described
    by ``summary`` (by default the last part), its ``epsilon`` and ``delta`` (the pure and
    approximate parts) and ``rho`` (the zCDP parts) are the whole cost of the call, with
    every part listed under ``"parts"``. Its ``measure`` is the parts' measure, or their
    measures joined by ``" + "`` when they differ.
    """
    main = parts[-1] if summary is None else summary
    info = main.metadata()
    if len(parts) > 1:
        epsilon = sum((p.epsilon for p in parts), Fraction(0))
        delta = sum((p.delta for p in parts), Fraction(0))
        measures = list(dict.fromkeys(p.measure for p in parts))
        rhos = [p.rho for p in parts if p.rho is not None]
        info.update(
            epsilon=float(epsilon),
            epsilon_exact=str(epsilon),
            delta=float(delta),
            delta_exact=str(delta),
            measure=" + ".join(measures),
            private=all(p.private for p in parts),
            parts=[p.summary() for p in parts],
        )
        if rhos:
            rho = sum(rhos, Fraction(0))
            info.update(rho=float(rho), rho_exact=str(rho))
    return info
