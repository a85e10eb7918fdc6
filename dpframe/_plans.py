"""What each release will be, decided from public parameters before any noise is drawn.

Every function here builds the :class:`~dpframe._release.Release` of one part of an
accessor call (its mechanism, sensitivity, noise scale, cost and error bars) from the
call's public parameters only: epsilon, bounds, the sizes of the declared domains. The
error bars come from the public accuracy functions of :mod:`dpframe.mechanisms`, the
same route the noise takes, and those functions also refuse parameters the mechanism
cannot serve, so an unusable call fails here, before the ledger is touched.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from dpframe import mechanisms
from dpframe._backends import SumGrid
from dpframe._backends.kernels import LOG_EDGES, SUM_GRID_BITS
from dpframe._release import NOISE_ONLY, NOISE_ONLY_CLAMPED, JSONValue, Release
from dpframe.errors import InvalidParameterError

__all__ = [
    "ALPHA",
    "Scope",
    "TableBars",
    "bounds_from_histogram",
    "bounds_release",
    "check_sum_epsilon",
    "count_release",
    "decision_release",
    "sum_release",
    "table_bars",
]

#: Error bars are 95% half-widths.
ALPHA = 0.05


@dataclass(frozen=True)
class Scope:
    """What a release read: its columns, filter and grouping (for the records)."""

    method: str
    columns: tuple[str, ...]
    where: str | None
    by: tuple[str, ...]
    private: bool


def count_release(scope: Scope, epsilon: Fraction, post: Sequence[str] = ()) -> Release:
    """A count (or table of counts): sensitivity 1, exact geometric noise."""
    bar = mechanisms.geometric_accuracy(epsilon=epsilon, alpha=ALPHA)
    return Release(
        method=scope.method,
        columns=scope.columns,
        where=scope.where,
        by=scope.by,
        mechanism="geometric",
        epsilon=epsilon,
        delta=Fraction(0),
        sensitivity=1.0,
        noise_scale=float(1 / epsilon),
        private=scope.private,
        alpha=ALPHA,
        noise_error_bound=float(bar),
        error_bound_covers=NOISE_ONLY,
        post_processing=tuple(post),
    )


def sum_release(
    scope: Scope, epsilon: Fraction, grid: SumGrid, post: Sequence[str] = ()
) -> Release:
    """A clamped sum (or table of sums) on ``grid``: geometric noise in grid steps."""
    units = grid.sensitivity_units
    bar = mechanisms.geometric_accuracy(epsilon=epsilon, sensitivity=units, alpha=ALPHA)
    details: tuple[tuple[str, JSONValue], ...] = (("grid_step", grid.step),)
    return Release(
        method=scope.method,
        columns=scope.columns,
        where=scope.where,
        by=scope.by,
        mechanism="geometric on a fixed-point grid",
        epsilon=epsilon,
        delta=Fraction(0),
        sensitivity=units * grid.step,
        noise_scale=units * grid.step / float(epsilon),
        private=scope.private,
        alpha=ALPHA,
        noise_error_bound=bar * grid.step,
        error_bound_covers=NOISE_ONLY_CLAMPED,
        bounds=(grid.lo, grid.hi),
        post_processing=tuple(post),
        details=details,
    )


@dataclass(frozen=True)
class TableBars:
    """95% half-widths of a table's cells and margins, computed before any noise is drawn."""

    cell: float
    row_margin: float | None  # a row's margin adds one row's cells
    column_margin: float | None
    total: float | None

    def shaped(self, shape: tuple[int, int]) -> NDArray[np.float64]:
        """The bar of every released cell, margins last (as ``pd.crosstab`` lays them out)."""
        bars = np.full(shape, self.cell)
        if self.total is not None:
            bars[:-1, -1] = self.row_margin
            bars[-1, :-1] = self.column_margin
            bars[-1, -1] = self.total
        return bars


def table_bars(
    epsilon: Fraction,
    sensitivity: int,
    step: float,
    shape: tuple[int, int],
    *,
    margins: bool,
    nonnegative: bool,
) -> TableBars:
    """The bars of a table of ``shape`` cells (and of its margins, which add cells' noise).

    With negatives set to 0 the cells' errors no longer cancel in a margin, so the
    margin's bar bounds the sum of the cells' absolute errors instead.
    """
    cell = mechanisms.geometric_accuracy(epsilon=epsilon, sensitivity=sensitivity, alpha=ALPHA)
    if not margins:
        return TableBars(cell * step, None, None, None)

    def margin(k: int) -> float:
        width = mechanisms.geometric_accuracy(
            epsilon=epsilon, sensitivity=sensitivity, alpha=ALPHA, terms=k, absolute=nonnegative
        )
        return width * step

    n_rows, n_cols = shape
    return TableBars(cell * step, margin(n_cols), margin(n_rows), margin(n_rows * n_cols))


def check_sum_epsilon(epsilon: Fraction) -> None:
    """Refuse, before anything is drawn, a sum epsilon too small for any grid.

    One row moves a sum by at most 2**32 grid steps, so the noise's epsilon per step can
    be as small as ``epsilon / 2**32``; the geometric mechanism refuses what it cannot draw.
    """
    mechanisms.geometric_accuracy(epsilon=epsilon, sensitivity=2**SUM_GRID_BITS)


# ---------------------------------------------------------------- automatic bounds


def bounds_release(scope: Scope, epsilon: Fraction) -> tuple[Release, int]:
    """The noisy log-histogram of ``bounds="auto"``, and the count a bin must exceed.

    The bins are fixed in advance (:data:`LOG_EDGES`, for non-negative and negative
    values); one row falls in one bin, so the noisy counts are ``epsilon``-DP. A bin is
    "occupied" when its noisy count exceeds the threshold, chosen so that an empty bin
    passes it with probability below 1e-9 in total over all bins.
    """
    n_bins = 2 * len(LOG_EDGES)
    alpha = math.exp(-float(epsilon))
    # P(N > t) = alpha^(t+1) / (1 + alpha); union over all bins below 1e-9.
    threshold = math.ceil(math.log(1e-9 * (1 + alpha) / n_bins) / math.log(alpha))
    release = Release(
        method="sum bounds (auto)",
        columns=scope.columns,
        where=scope.where,
        by=(),
        mechanism="geometric log-histogram",
        epsilon=epsilon,
        delta=Fraction(0),
        sensitivity=1.0,
        noise_scale=float(1 / epsilon),
        private=scope.private,
        alpha=None,
        details=(("threshold", threshold),),
    )
    mechanisms.geometric_accuracy(epsilon=epsilon)  # refuses an unusable epsilon up front
    return release, threshold


def bounds_from_histogram(noisy: NDArray[np.int64], threshold: int) -> tuple[float, float]:
    """The outer edges of the outermost occupied bins (post-processing of the histogram)."""
    n_bins = len(LOG_EDGES)
    occupied_pos = np.flatnonzero(noisy[:n_bins] > threshold)
    occupied_neg = np.flatnonzero(noisy[n_bins:] > threshold)
    if not occupied_pos.size and not occupied_neg.size:
        raise InvalidParameterError(
            f'bounds="auto" found no bin with more than {threshold} rows (noisy), so it cannot '
            f"place the bounds; its share of epsilon was spent. Pass bounds=(lo, hi) "
            f"yourself, or a larger bounds_epsilon."
        )
    hi = float(LOG_EDGES[occupied_pos.max()]) if occupied_pos.size else 0.0
    lo = -float(LOG_EDGES[occupied_neg.max()]) if occupied_neg.size else 0.0
    if lo == hi:  # only the [0, 1] bin: keep a non-empty range
        hi = 1.0
    return lo, hi


# ---------------------------------------------------------------- decisions


def decision_release(scope: Scope, epsilon: Fraction, delta: Fraction, method: str) -> Release:
    """A threshold decision of seed 001 (no noise scale: the output is one exact coin)."""
    return Release(
        method=scope.method,
        columns=scope.columns,
        where=scope.where,
        by=scope.by,
        mechanism=f"{method} decision",
        epsilon=epsilon,
        delta=delta,
        sensitivity=1.0,
        noise_scale=None,
        private=scope.private,
        alpha=None,
        error_bound_covers=NOISE_ONLY,
    )
