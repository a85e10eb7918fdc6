"""Private quantiles: report-noisy-max of integer rank scores over a declared candidate grid.

How one quantile is released (every step vectorized):

* The candidates ``c_0 < ... < c_{m-1}`` lie inside the declared bounds and are fixed by
  public parameters only (by default ``2**12 + 1`` evenly spaced points). Candidate
  ``c_j`` owns the *cell* ``[b_j, b_{j+1})`` between the midpoints of its neighbours
  (``b_0 = -inf``, ``b_m = +inf``), so every value falls in exactly one cell, and
  clamping a value into the bounds never changes its cell.
* One pass over the values counts them per cell (a lookup-table guess of the cell, checked
  exactly against its two edges; a binary search for the rare misses), so 10M values
  cost about one ``np.bincount``.
* With ``q`` read as the fraction ``p/d``, cell ``j`` scores the integer
  ``s_j = max(d A_j - p n, p n - d B_j, 0)``, ``d`` times the distance from the target
  rank ``q n`` to the ranks ``[A_j, B_j]`` the cell holds (``A_j`` values lie below it,
  ``B_j`` below its end). The cell holding rank ``q n`` scores 0.
* Each score gets independent exact two-sided geometric noise; the candidate with the
  highest ``noise - score`` is released, ties broken uniformly at random.

Nothing here uses floating point to decide an output: scores and noise are integers,
the noise comes from the geometric engine's exact dyadic coins, and the tie-break is an
exact uniform integer drawn by rejection from random words.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpframe import _validation
from dpframe._exact import show, simplest_rational, simplest_rational_in_type
from dpframe._geometric import (
    MAX_UNIT_EPSILON,
    MIN_UNIT_EPSILON,
    SLACK,
    GeometricPlan,
    checked_alpha,
    geometric_noise,
    geometric_plan,
)
from dpframe._random import BitSource, bit_source
from dpframe.errors import InvalidParameterError, InvalidParameterTypeError, NoiseOverflowError

__all__ = [
    "candidate_cells",
    "cell_edges",
    "quantile",
    "quantile_accuracy",
    "quantile_of_counts",
    "quantile_resolution",
    "row_cells",
]

RandomState = np.random.Generator | np.random.BitGenerator | np.random.SeedSequence | int | None

# Default grid: 2**12 + 1 evenly spaced candidates, from lo to hi.
DEFAULT_GRID_POINTS = 2**12 + 1
MAX_CANDIDATES = 2**24
# q is read as a fraction p/d with d <= 2**20 (exactly q for every q with up to 6 decimals).
MAX_DENOMINATOR = 2**20
_Q_TOLERANCE = Fraction(1, 2**40)  # how far q may move onto that grid (see _read_q)
# One row moves every score by at most max(p, d - p), but the winner's score and the best
# rival's can move in opposite directions: the noise is calibrated for twice that.
SCORE_SPREAD = 2
# Scores are at most d * n; with |noise| <= 2**62 their difference stays inside int64.
_SCORE_LIMIT = 2**61
_BLOCK = 1 << 16  # values per block when counting cells: the scratch arrays stay in cache
_NOISE_BLOCK = 1 << 20  # noise values drawn at once
_MAX_BUCKETS = 1 << 16  # lookup table of cells: 512 KiB at most
# The rank bar is computed for the ideal noise a hair wider than the noise drawn (as the
# geometric engine's bars are), then its tail is multiplied by this to cover the coins.
_TAIL_MARGIN = 1 + 2.0**-12


# ---------------------------------------------------------------- validation


def _values(values: ArrayLike) -> NDArray[np.float64]:
    """``values`` as a 1-D float64 array (no copy for float64 input).

    NaN is refused while the cells are counted (one block at a time, before anything is
    drawn), which spares a pass and a full-size temporary over the values.
    """
    raw = np.asarray(values)
    if raw.dtype == np.bool_ or raw.dtype.kind not in "iuf":
        raise InvalidParameterTypeError(
            f"values must hold real numbers, got dtype {raw.dtype}. Convert first, for "
            f"example with np.asarray(x, dtype=float)."
        )
    if raw.ndim != 1:
        raise InvalidParameterError(
            f"values must be 1-D, got shape {raw.shape}. Pass one column, e.g. x.ravel()."
        )
    return raw.astype(np.float64, copy=False)


@dataclass(frozen=True)
class _Quantiles:
    """The requested quantiles: the distinct fractions, and which one each request is."""

    distinct: tuple[Fraction, ...]
    which: NDArray[np.intp]
    scalar: bool

    @property
    def count(self) -> int:
        return int(self.which.size)


def _quantile_fractions(q: Any) -> _Quantiles:
    """``q`` as exact fractions in [0, 1] (each distinct value read once)."""
    fix = "Pass q as a number in [0, 1] (0.5 for the median) or a list of them, like pandas."
    if isinstance(q, np.ndarray) and q.ndim == 0:
        q = q[()]  # a numpy scalar: its dtype tells how it is read (see _level_of)
    scalar = isinstance(q, numbers.Real)
    if scalar:
        flat = np.empty(1, dtype=object)
        flat[0] = q
    elif isinstance(q, Sequence | np.ndarray) and not isinstance(q, str | bytes):
        try:
            flat = np.asarray(q, dtype=object)
        except ValueError:  # ragged nesting
            flat = np.empty((0, 0), dtype=object)
        if flat.ndim != 1:
            raise InvalidParameterError(f"q must be a number or a flat list, got {q!r}. {fix}")
        if not flat.size:
            raise InvalidParameterError(f"q is empty; pass at least one quantile. {fix}")
    else:
        raise InvalidParameterTypeError(
            f"q must be a number or a list of numbers, got {q!r}. {fix}"
        )
    numeric = _numeric_array(q) if not scalar else None
    if numeric is not None:  # one read per distinct value, without a Python loop over q
        values, inverse = np.unique(numeric, return_inverse=True)
        read = [_read_q(_level_of(v), fix) for v in values]
        unique = list(dict.fromkeys(read))  # two floats may read as the same fraction
        remap = np.array([unique.index(f) for f in read], dtype=np.intp)
        return _Quantiles(tuple(unique), remap[inverse.reshape(-1)], scalar)
    seen: dict[Any, int] = {}
    which = np.empty(flat.size, dtype=np.intp)
    distinct: list[Fraction] = []
    for i, item in enumerate(flat.tolist()):
        if isinstance(item, bool | np.bool_) or not isinstance(item, numbers.Real):
            raise InvalidParameterTypeError(
                f"q must hold numbers, got {item!r} of type {type(item).__name__}. {fix}"
            )
        key = (type(item), item)
        if key not in seen:
            if isinstance(item, numbers.Rational):
                value = _read_q(Fraction(int(item.numerator), int(item.denominator)), fix)
            else:
                value = _read_q(_level_of(item), fix)
            if value in distinct:
                seen[key] = distinct.index(value)
            else:
                seen[key] = len(distinct)
                distinct.append(value)
        which[i] = seen[key]
    return _Quantiles(tuple(distinct), which, scalar)


def _level_of(item: Any) -> float | Fraction:
    """A float quantile as given: a float16 or float32 is read as the simplest fraction that
    rounds to it *in its own type* (float32 0.1 is 1/10, as typed, not 0.10000000149...)."""
    if isinstance(item, np.floating) and item.dtype.itemsize < 8 and np.isfinite(item):
        return simplest_rational_in_type(item)
    return float(item)


def _numeric_array(q: Any) -> NDArray[np.floating[Any]] | None:
    """``q`` as a 1-D float array when numpy reads it as plain numbers (not bools), else None
    (floats keep their own width; see :func:`_level_of`)."""
    if not isinstance(q, np.ndarray) and any(isinstance(x, bool | np.bool_) for x in q):
        return None  # numpy would read True as 1.0
    try:
        array = np.asarray(q)
    except (TypeError, ValueError, OverflowError):
        return None
    if array.ndim != 1 or array.dtype == np.bool_ or array.dtype.kind not in "iuf":
        return None
    if array.dtype.kind in "iu" and array.size and np.abs(array).max() > 2**52:
        return None  # integers far beyond [0, 1]: let the exact path name the culprit
    return array if array.dtype.kind == "f" else array.astype(np.float64)


@functools.lru_cache(maxsize=4096)
def _read_q(item: float | Fraction, fix: str) -> Fraction:
    """One quantile as an exact fraction ``p/d`` in [0, 1] with ``d <= MAX_DENOMINATOR``."""
    if isinstance(item, float):
        if not math.isfinite(item):
            raise InvalidParameterError(f"q must be finite, got {item!r}. {fix}")
        value = simplest_rational(item)
    else:
        value = item
    if not 0 <= value <= 1:
        raise InvalidParameterError(f"q must lie in [0, 1], got {item!r}. {fix}")
    if value.denominator > MAX_DENOMINATOR:
        # A nearby fraction moves the target rank by |dq| * n, which the rank error bound
        # does not include: below 2**-40 (float noise, as 0.30000000000000004 for 3/10)
        # that is under one rank for n < 10**12; above it (1e-7 became 0: 100 ranks at
        # n = 1e9), q is refused.
        nearest = value.limit_denominator(MAX_DENOMINATOR)
        if abs(nearest - value) <= _Q_TOLERANCE:
            return nearest
        raise InvalidParameterError(
            f"q={item!r} needs more than 6 decimals: quantiles are computed at exact levels "
            f"p/d with d <= 2**20, and the nearest, {float(nearest)!r}, would move the "
            f"target rank by up to |dq| * n, which no error bound states. Round q to 6 "
            f"decimals (q={float(nearest)!r}, or round(q, 6)). {fix}"
        )
    return value


def _grid(bounds: Any, candidates: ArrayLike | None) -> tuple[float, float, NDArray[np.float64]]:
    """Validated bounds and candidate grid (sorted, distinct, finite, inside the bounds)."""
    lo, hi = _validation.real_bounds(bounds)
    if not math.isfinite(hi - lo):
        raise InvalidParameterError(
            f"bounds={bounds!r} are too wide: hi - lo overflows float64. Rescale the values "
            f"first (for example to thousands)."
        )
    if candidates is None:
        # np.unique drops repeats when (hi - lo) is too small for 2**12 distinct floats.
        return lo, hi, np.unique(np.linspace(lo, hi, DEFAULT_GRID_POINTS))
    fix = (
        "Pass candidates as a sorted 1-D array of distinct finite numbers inside bounds, "
        "declared without looking at the data (e.g. np.arange(0, 121) for ages)."
    )
    raw = np.asarray(candidates)
    if raw.dtype == np.bool_ or raw.dtype.kind not in "iuf":
        raise InvalidParameterTypeError(
            f"candidates must hold real numbers, got dtype {raw.dtype}. {fix}"
        )
    grid = raw.astype(np.float64)
    if grid.ndim != 1 or grid.size == 0:
        raise InvalidParameterError(
            f"candidates must be a non-empty 1-D array, got shape {grid.shape}. {fix}"
        )
    if grid.size > MAX_CANDIDATES:
        raise InvalidParameterError(
            f"candidates has {grid.size:,} points; at most {MAX_CANDIDATES:,} are supported. {fix}"
        )
    if not np.isfinite(grid).all():
        raise InvalidParameterError(f"candidates must be finite (no NaN or inf). {fix}")
    if grid.size > 1 and not (np.diff(grid) > 0).all():
        raise InvalidParameterError(
            f"candidates must be strictly increasing (sorted, no repeats as float64). {fix}"
        )
    if grid[0] < lo or grid[-1] > hi:
        raise InvalidParameterError(
            f"candidates must lie inside bounds=({lo!r}, {hi!r}), got the range "
            f"[{grid[0]!r}, {grid[-1]!r}]. {fix}"
        )
    return lo, hi, grid


def cell_edges(grid: NDArray[np.float64]) -> NDArray[np.float64]:
    """The m - 1 inner cell edges: midpoints of neighbouring candidates.

    Halving each term first cannot overflow; rounding is monotone, so every edge stays
    within its two candidates.
    """
    return np.asarray(grid[:-1] / 2 + grid[1:] / 2)


def _plans(quantiles: _Quantiles, epsilon: Fraction) -> list[GeometricPlan]:
    """One verified noise plan per distinct quantile: epsilon / k each, on its score scale."""
    each = epsilon / quantiles.count
    plans = []
    for fraction in quantiles.distinct:
        unit = each / (SCORE_SPREAD * _score_sensitivity(fraction))
        if unit > MAX_UNIT_EPSILON:
            raise InvalidParameterError(
                f"epsilon per quantile ({show(each)}) is so large that the release would "
                f"have no meaningful privacy. Use a smaller epsilon (typical values are 0.01 "
                f"to 10)."
            )
        if unit < MIN_UNIT_EPSILON:
            raise NoiseOverflowError(
                f"epsilon per quantile ({show(each)}) is too small: the rank noise would "
                f"overflow int64. Use a larger epsilon or fewer quantiles per call."
            )
        plans.append(geometric_plan(unit, None, False))
    return plans


def _score_sensitivity(fraction: Fraction) -> int:
    """Most one added or removed row moves any score ``max(d A - p n, p n - d B, 0)``."""
    p, d = fraction.numerator, fraction.denominator
    return max(p, d - p)


# ---------------------------------------------------------------- exact aggregation


def cell_counts(
    values: NDArray[np.float64], grid: NDArray[np.float64], edges: NDArray[np.float64]
) -> NDArray[np.int64]:
    """How many values fall in each candidate's cell ``[b_j, b_{j+1})``, exactly.

    Each value's cell is guessed from evenly spaced buckets (see :class:`_BucketLookup`);
    the guess, and if it fails the next cell, is checked against both cell edges, and
    the rare values still unplaced (rounding, or buckets that several edges cross) are
    placed by binary search. The checks are exact float comparisons, so the counts never
    depend on rounding, only the speed does.
    """
    m = grid.size
    if m == 1:
        return np.array([values.size], dtype=np.int64)
    bounded = np.concatenate([[-np.inf], edges, [np.inf]])
    lookup = _BucketLookup.build(grid, edges)
    counts = np.zeros(m, dtype=np.int64)
    scratch = np.empty(min(values.size, _BLOCK), dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):  # huge values: every guess is checked
        for start in range(0, values.size, _BLOCK):
            block = values[start : start + _BLOCK]
            if np.isnan(block).any():
                raise InvalidParameterError(
                    "values contain NaN, which has no rank. Drop the missing values first "
                    "(for example with .dropna()); nothing was drawn."
                )
            cells = lookup.cells(block, edges, bounded, scratch[: block.size])
            counts += np.bincount(cells, minlength=m)
    return counts


@dataclass(frozen=True)
class _BucketLookup:
    """A first guess of each value's cell, from evenly spaced buckets over the candidates.

    On an evenly spaced grid the buckets are the cells themselves (the guess is the
    nearest candidate, one multiply and one rounding); otherwise there are four buckets
    per cell (at most ``_MAX_BUCKETS``), each mapped by ``table`` to the cell holding
    its start.
    """

    origin: float
    inverse_width: float
    offset: float
    table: NDArray[np.intp] | None

    @classmethod
    def build(cls, grid: NDArray[np.float64], edges: NDArray[np.float64]) -> _BucketLookup:
        m = grid.size
        origin, span = float(grid[0]), float(grid[-1]) - float(grid[0])
        with np.errstate(over="ignore", invalid="ignore"):
            spacing = span / (m - 1)
            if np.abs(grid - (origin + spacing * np.arange(m))).max() <= spacing / 4:
                return cls(origin, (m - 1) / span, 0.5, None)
            buckets = min(_MAX_BUCKETS, 4 * m)
            starts = origin + (span / buckets) * np.arange(buckets)
        table = np.asarray(np.searchsorted(edges, starts, side="right"), dtype=np.intp)
        return cls(origin, buckets / span, 0.0, table)

    def cells(
        self,
        block: NDArray[np.float64],
        edges: NDArray[np.float64],
        bounded: NDArray[np.float64],
        scratch: NDArray[np.float64],
    ) -> NDArray[np.intp]:
        """The cell of each value: the guess, else the next cell, else a binary search."""
        np.subtract(block, self.origin, out=scratch)
        scratch *= self.inverse_width
        scratch += self.offset
        top = edges.size if self.table is None else self.table.size - 1
        np.clip(scratch, 0, top, out=scratch)  # also catches ±inf
        guess = scratch.astype(np.intp)
        cells = guess if self.table is None else self.table[guess]
        miss = np.flatnonzero(~((bounded[cells] <= block) & (block < bounded[cells + 1])))
        if miss.size:
            later = np.minimum(cells[miss] + 1, edges.size)
            found = (bounded[later] <= block[miss]) & (block[miss] < bounded[later + 1])
            cells[miss[found]] = later[found]
            rest = miss[~found]
            cells[rest] = np.searchsorted(edges, block[rest], side="right")
        return cells


def rank_scores(counts: NDArray[np.int64], fraction: Fraction) -> NDArray[np.int64]:
    """``d`` times each cell's distance, in ranks, from the target rank ``q n`` (integers).

    Computed in Python integers when ``d n`` could leave int64, and capped at 2**61: the
    cap depends on no data (it is a fixed 1-Lipschitz map of each score), so it keeps
    the sensitivity, and only changes scores far beyond any noise.
    """
    p, d = fraction.numerator, fraction.denominator
    n = int(counts.sum())
    exact: Any = np.int64 if d * n < _SCORE_LIMIT else object
    below = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(exact)  # A_j
    through = below + counts.astype(exact)  # B_j
    target = p * n  # d times the target rank
    scores = np.maximum(np.maximum(d * below - target, target - d * through), 0)
    return np.asarray(np.minimum(scores, _SCORE_LIMIT).astype(np.int64))


# ---------------------------------------------------------------- exact selection


def _uniform_below(source: BitSource, sizes: NDArray[np.int64]) -> NDArray[np.int64]:
    """One exact uniform integer in ``[0, size)`` per entry, by rejection on the top bits."""
    out = np.zeros(sizes.size, dtype=np.int64)
    # Bits needed for size - 1: frexp's exponent is the bit length (exact below 2**53).
    bits = np.frexp(np.maximum(sizes - 1, 1).astype(np.float64))[1].astype(np.uint64)
    pending = np.flatnonzero(sizes > 1)
    while pending.size:  # each round accepts with probability > 1/2
        draw = (source.words(pending.size) >> (np.uint64(64) - bits[pending])).astype(np.int64)
        ok = draw < sizes[pending]
        out[pending[ok]] = draw[ok]
        pending = pending[~ok]
    return out


def noisy_argmax(noisy: NDArray[np.int64], source: BitSource) -> NDArray[np.intp]:
    """Per row, the position of the maximum, ties broken uniformly at random (exactly)."""
    top = noisy.max(axis=1, keepdims=True)
    tied = noisy == top
    winners: NDArray[np.intp] = np.argmax(tied, axis=1)
    n_tied = tied.sum(axis=1)
    several = np.flatnonzero(n_tied > 1)
    if several.size:
        pick = _uniform_below(source, n_tied[several].astype(np.int64))
        rank_in_row = np.cumsum(tied[several], axis=1)  # 1 at the first tie, 2 at the second...
        winners[several] = np.argmax(rank_in_row > pick[:, None], axis=1)
    return winners


def _select(
    scores: NDArray[np.int64], copies: int, plan: GeometricPlan, source: BitSource
) -> NDArray[np.intp]:
    """``copies`` independent report-noisy-max draws over one score vector."""
    m = scores.size
    rows_per_block = max(1, _NOISE_BLOCK // m)
    out = np.empty(copies, dtype=np.intp)
    for start in range(0, copies, rows_per_block):
        rows = min(rows_per_block, copies - start)
        noise = geometric_noise(plan, rows * m, source, False).reshape(rows, m)
        noise -= scores
        out[start : start + rows] = noisy_argmax(noise, source)
    return out


# ---------------------------------------------------------------- the public functions


@overload
def quantile(
    values: ArrayLike,
    q: float,
    *,
    epsilon: float | Fraction,
    bounds: tuple[float, float],
    candidates: ArrayLike | None = None,
    rng: RandomState = None,
) -> float: ...


@overload
def quantile(
    values: ArrayLike,
    q: Sequence[float] | NDArray[np.floating[Any]],
    *,
    epsilon: float | Fraction,
    bounds: tuple[float, float],
    candidates: ArrayLike | None = None,
    rng: RandomState = None,
) -> NDArray[np.float64]: ...


def quantile(
    values: ArrayLike,
    q: float | Sequence[float] | NDArray[np.floating[Any]],
    *,
    epsilon: float | Fraction,
    bounds: tuple[float, float],
    candidates: ArrayLike | None = None,
    rng: RandomState = None,
) -> float | NDArray[np.float64]:
    """Private quantiles of real values: a candidate of a declared grid, chosen by noisy rank.

    Parameters
    ----------
    values : array_like of float, 1-D
        The values (NaN already removed by the caller: NaN is refused). Values outside
        ``bounds`` are clamped into them; ±inf are allowed and clamped.
    q : float or sequence of float
        Quantile(s) in [0, 1], as in pandas (0.5 is the median). Read as the simplest
        fraction ``p/d`` that rounds to it (0.1 is exactly 1/10; any q with up to 6
        decimals is read exactly); a q more than 2**-40 from every fraction with
        ``d <= 2**20`` is refused (within it, float noise such as 0.30000000000000004 is
        read as 3/10).
    epsilon : float or Fraction
        Total privacy budget of the call (> 0). With ``k`` quantiles, each gets
        ``epsilon / k`` (exactly, as fractions).
    bounds : (lo, hi)
        Declared range of the values, ``lo < hi``, never read from the data.
    candidates : array_like of float, optional
        The grid the release is chosen from: sorted, distinct, finite, inside
        ``bounds``, at most 2**24 points, declared without looking at the data (for
        example ``np.arange(0, 121)`` for ages in whole years). Default: ``2**12 + 1``
        evenly spaced points from ``lo`` to ``hi`` (``np.linspace``).
    rng : numpy.random.Generator or seed, optional
        For teaching and tests only: makes the output reproducible, hence not private.

    Returns
    -------
    float or numpy.ndarray of float64
        One candidate per quantile: a float for a scalar ``q``, else an array in the
        order of ``q``.

    Raises
    ------
    InvalidParameterError, InvalidParameterTypeError
        Before anything is drawn: NaN or non-numeric values, values that are not 1-D,
        ``q`` outside [0, 1] or not a number, an empty list of quantiles, epsilon not a
        finite number > 0 (or so large that the release has no privacy), bounds not two
        finite numbers with ``lo < hi``, or an unusable candidate grid.
    NoiseOverflowError
        Before anything is drawn, when epsilon per quantile is so small that the rank
        noise could overflow int64.

    See Also
    --------
    quantile_accuracy : The rank bar of a release.
    quantile_resolution : The value resolution of the candidate grid.
    geometric : The noise used on the scores.

    Notes
    -----
    **The mechanism: report-noisy-max of integer rank scores.** Candidate ``c_j`` owns
    the cell between the midpoints to its neighbours (the outer cells extend to the
    bounds). With ``A_j`` values below its cell and ``B_j`` below its end, the cell holds
    the ranks ``[A_j, B_j]`` of the sorted clamped values, and with ``q = p/d`` its
    score is the integer ``s_j = max(d A_j - p n, p n - d B_j, 0)``: ``d`` times the
    distance from the target rank ``q n`` to those ranks. Some cell always holds rank
    ``q n`` and scores 0. Every score gets independent two-sided geometric noise, and
    the candidate with the largest ``noise - score`` is released; ties are broken
    uniformly at random. Scoring cells rather than points makes a value that sits
    between two candidates count for the nearer one, so data concentrated between
    candidates still get an accurate release.

    **Privacy.** Neighbouring data sets differ by one added or removed row. That row
    falls in one cell; it moves ``n`` by one and ``A_j``, ``B_j`` by at most one, so every
    score moves by at most ``Δ = max(p, d - p)`` (``Δ = 1`` for the median). Scores move
    in both directions (a row below the target raises some scores and lowers others),
    so the winner's score and its best rival's may move ``Δ`` apart each: the noise is
    calibrated for ``2Δ``, with ``P(N = k) ∝ exp(-ε_q |k| / (2Δ))``, ``ε_q`` the
    quantile's share. For fixed noise on the other candidates, candidate ``j`` wins
    exactly when its own noise reaches an integer threshold, which moves by at most
    ``2Δ`` between neighbours; the geometric engine verifies in exact rational
    arithmetic that ``P(N = k) <= exp(ε_q / (2Δ)) P(N = k ± 1)`` for the noise it
    draws, hence ``P(N >= t) <= exp(ε_q) P(N >= t + 2Δ)``: each release is
    ``ε_q``-DP. A uniform tie-break is a data-independent mixture of fixed
    tie-breaking orders, each of which keeps the threshold argument, so it keeps
    ``ε_q``-DP. The ``k`` quantiles of one call are independent releases
    (sequential composition): ``epsilon`` in total. The candidates must not depend on
    the data. (For ``q = 0`` or 1 all scores move the same way and half the noise
    would do; dpframe does not special-case them.)

    **Exactness.** Scores are integers computed exactly (one exact count per cell), the
    noise is the geometric engine's exact dyadic-coin noise, and the tie-break is an
    exact uniform integer drawn by rejection from random words: no floating-point
    inverse transform decides the output, and the output distribution is exactly that
    of the construction above over the engine's realized noise.

    **Several quantiles.** ``epsilon`` is split evenly; the releases are independent
    and may cross (a released 0.25-quantile above the released median); sorting them
    is post-processing and costs no privacy.

    **Accuracy.** :func:`quantile_accuracy` gives the rank bar ``r``: with probability
    at least ``1 - alpha`` the released candidate's cell lies within ``r`` ranks of the
    target rank ``q n``. :func:`quantile_resolution` gives ``h``, the farthest a
    candidate lies from the ends of its cell. Together: with ``x_(1) <= ... <=
    x_(n)`` the clamped values (``x_(k) = lo`` for ``k < 1``, ``hi`` for ``k > n``),
    ``x_(ceil(qn - r)) - h <= release <= x_(floor(qn + r) + 1) + h``. The bar excludes
    clamping bias: if the true quantile lies outside the bounds, the target is the
    clamped one.

    **Running time** depends on the number of values and, slightly, on the data (values
    within rounding of a cell edge take a binary search; ties take an extra draw) and
    on the noise; dpframe makes no constant-time promise here.

    References
    ----------
    A. Smith, "Privacy-preserving statistical estimation with optimal convergence
    rates", STOC 2011 (the exponential mechanism on rank scores). C. Dwork, A. Roth,
    *The Algorithmic Foundations of Differential Privacy*, 2014, section 3.3
    (report-noisy-max). OpenDP's ``make_quantile_score_candidates`` (scores over a
    candidate grid). Seed ``002_265e5b6700395d7e.txt`` (the exact geometric noise).

    Examples
    --------
    >>> import numpy as np
    >>> import dpframe.mechanisms as dpm
    >>> ages = np.repeat(np.arange(20, 70), 40).astype(float)
    >>> median = dpm.quantile(ages, 0.5, epsilon=1.0, bounds=(0, 120),
    ...                       candidates=np.arange(0, 121))
    >>> float(median).is_integer() and 0 <= median <= 120
    True
    >>> dpm.quantile(ages, [0.25, 0.75], epsilon=1.0, bounds=(0, 120)).shape
    (2,)
    """
    array = _values(values)
    quantiles = _quantile_fractions(q)
    eps = _validation.epsilon(epsilon)
    _, _, grid = _grid(bounds, candidates)
    plans = _plans(quantiles, eps)
    counts = cell_counts(array, grid, cell_edges(grid))
    released = _released(counts[np.newaxis, :], quantiles, plans, grid, bit_source(rng))[0]
    return float(released[0]) if quantiles.scalar else released


def _released(
    counts: NDArray[np.int64],
    quantiles: _Quantiles,
    plans: list[GeometricPlan],
    grid: NDArray[np.float64],
    source: BitSource,
) -> NDArray[np.float64]:
    """Report-noisy-max per group (a row of ``counts``) and per quantile, vectorized.

    Shape ``(groups, len(q))``. Each group's rows are disjoint from the others', so the
    groups' releases compose in parallel; the quantiles of one group split epsilon.
    """
    groups = counts.shape[0]
    released = np.empty((groups, quantiles.count), dtype=np.float64)
    for index, (fraction, plan) in enumerate(zip(quantiles.distinct, plans, strict=True)):
        where = np.flatnonzero(quantiles.which == index)
        scores = np.stack([rank_scores(row, fraction) for row in counts])
        for column in where:  # one independent draw per requested copy of this quantile
            noise = geometric_noise(plan, scores.size, source, False).reshape(scores.shape)
            noise -= scores
            released[:, column] = grid[noisy_argmax(noise, source)]
    return released


def candidate_cells(
    bounds: tuple[float, float], candidates: ArrayLike | None
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The validated candidate grid of a quantile and the inner edges of its cells.

    Backends count the rows of each cell (:func:`row_cells`); :func:`quantile_of_counts`
    then releases from those exact counts.
    """
    _, _, grid = _grid(bounds, candidates)
    return grid, cell_edges(grid)


def row_cells(
    values: NDArray[np.float64], grid: NDArray[np.float64], edges: NDArray[np.float64]
) -> NDArray[np.intp]:
    """Each value's candidate cell (0 .. m-1), exactly; -1 for NaN (no cell)."""
    cells = np.full(values.size, -1, dtype=np.intp)
    if grid.size == 1:
        cells[~np.isnan(values)] = 0
        return cells
    bounded = np.concatenate([[-np.inf], edges, [np.inf]])
    lookup = _BucketLookup.build(grid, edges)
    scratch = np.empty(min(values.size, _BLOCK), dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        for start in range(0, values.size, _BLOCK):
            block = values[start : start + _BLOCK]
            present = ~np.isnan(block)
            chosen = block if present.all() else np.where(present, block, grid[0])
            found = lookup.cells(chosen, edges, bounded, scratch[: block.size])
            cells[start : start + block.size] = np.where(present, found, -1)
    return cells


def quantile_of_counts(
    counts: ArrayLike,
    q: float | Sequence[float] | NDArray[np.floating[Any]],
    *,
    epsilon: float | Fraction,
    bounds: tuple[float, float],
    candidates: ArrayLike | None = None,
    rng: RandomState = None,
) -> NDArray[np.float64]:
    """Private quantiles from exact counts of values per candidate cell, per group.

    Parameters
    ----------
    counts : array_like of int, shape (m,) or (groups, m)
        Exact counts of (clamped) values in each candidate's cell
        (:func:`candidate_cells`, :func:`row_cells`), one row per group.
    q : float or sequence of float
        As for :func:`quantile`.
    epsilon : float or Fraction
        As for :func:`quantile` (per group: groups hold disjoint rows).
    bounds : tuple of float
        As for :func:`quantile`.
    candidates : array_like of float, optional
        As for :func:`quantile`.
    rng : numpy.random.Generator or seed, optional
        As for :func:`quantile`.

    Returns
    -------
    numpy.ndarray of float64
        Shape ``(groups, len(q))`` (``(groups, 1)`` for a scalar ``q``).

    See Also
    --------
    quantile : The same from the values themselves.

    Notes
    -----
    The mechanism of :func:`quantile`, applied to counts an exact aggregation computed
    (a backend, possibly on many workers): the counts are the only way the data enters.
    """
    quantiles = _quantile_fractions(q)
    eps = _validation.epsilon(epsilon)
    _, _, grid = _grid(bounds, candidates)
    plans = _plans(quantiles, eps)
    table = _validation.integer_array(counts, "counts")
    table = table.reshape(1, -1) if table.ndim == 1 else table
    if table.ndim != 2 or table.shape[1] != grid.size:
        raise InvalidParameterError(
            f"counts must have one column per candidate ({grid.size}), got shape "
            f"{np.shape(counts)}."
        )
    if table.size and int(table.min()) < 0:
        raise InvalidParameterError("counts must be >= 0: they count values per cell.")
    # Each group's total, in Python integers: an int64 sum (and the rank scores) would wrap.
    largest = int(table.max()) if table.size else 0
    if largest * table.shape[1] > 2**62 and max(sum(map(int, row)) for row in table) > 2**62:
        raise InvalidParameterError("counts must add up to at most 2**62 per group.")
    return _released(table, quantiles, plans, grid, bit_source(rng))


def _difference_tail(unit_epsilon: Fraction, start: int) -> float:
    """``P(N1 - N2 >= start)`` for two independent noise values, start >= 1 (an upper bound).

    For the two-sided geometric with parameter ``a``, ``P(N1 - N2 = k) = c² a^k (k + 1 +
    2a²/(1 - a²))`` for ``k >= 0`` (``c = (1 - a)/(1 + a)``), whose tail from ``s`` sums
    to ``a^s (s (1 - a) + a + (1 + a²)/(1 + a)) / (1 + a)²``. It is evaluated in
    logarithms (tiny tails keep their relative accuracy) at the parameter
    ``a = exp(-ε'(1 - 2^-18))``, a hair wider than the ``exp(-ε'(1 - 2^-20))`` the
    engine targets. Each realized probability is within ``exp(2^-19 (1 + |k| ε'))`` of
    the target's (see :func:`dpframe.mechanisms.geometric`); against the wider
    parameter that leaves a factor below ``1 + 2^-16`` on each of the two values, so
    multiplying the tail by ``1 + 2^-12`` bounds the realized tail, float rounding
    included.
    """
    log_a = -float(unit_epsilon) * (1 - 4 * float(SLACK))
    a = math.exp(log_a)
    one_minus_a = -math.expm1(log_a)
    bracket = start * one_minus_a + a + (1 + a * a) / (1 + a)
    return math.exp(start * log_a + math.log(bracket) - 2 * math.log1p(a)) * _TAIL_MARGIN


def _rank_bar(fraction: Fraction, each: Fraction, m: int, alpha: float) -> float:
    """Smallest ``t / d`` with ``(m - 1) P(N_j - N_b >= t + 1) <= alpha``: the rank bar."""
    if m == 1:
        return 0.0
    unit = each / (SCORE_SPREAD * _score_sensitivity(fraction))

    def fits(t: int) -> bool:
        return (m - 1) * _difference_tail(unit, t + 1) <= alpha

    lo, hi = -1, 1  # invariant: lo fails (or is -1), hi fits
    while not fits(hi):
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    return float(Fraction(hi, fraction.denominator))


@overload
def quantile_accuracy(
    q: float,
    *,
    epsilon: float | Fraction,
    bounds: tuple[float, float],
    candidates: ArrayLike | None = None,
    alpha: float = 0.05,
) -> float: ...


@overload
def quantile_accuracy(
    q: Sequence[float] | NDArray[np.floating[Any]],
    *,
    epsilon: float | Fraction,
    bounds: tuple[float, float],
    candidates: ArrayLike | None = None,
    alpha: float = 0.05,
) -> NDArray[np.float64]: ...


def quantile_accuracy(
    q: float | Sequence[float] | NDArray[np.floating[Any]],
    *,
    epsilon: float | Fraction,
    bounds: tuple[float, float],
    candidates: ArrayLike | None = None,
    alpha: float = 0.05,
) -> float | NDArray[np.float64]:
    """The rank bar of :func:`quantile`: how many ranks the release may be from ``q n``.

    Parameters
    ----------
    q : float or sequence of float
        As for :func:`quantile`.
    epsilon : float or Fraction
        As for :func:`quantile` (the bar depends on ``epsilon`` per quantile, on ``q``
        and on the number of candidates; never on the data).
    bounds : tuple of float
        As for :func:`quantile`.
    candidates : array_like of float, optional
        As for :func:`quantile`.
    alpha : float, default 0.05
        Probability that the error exceeds the bar (0.05 gives a 95% bar).

    Returns
    -------
    float or numpy.ndarray of float64
        ``r`` per quantile: with probability at least ``1 - alpha``, the released
        candidate's cell holds a rank within ``r`` of the target rank ``q n`` (``n``
        the number of values), whatever the data.

    See Also
    --------
    quantile : The release this bounds.
    quantile_resolution : The value resolution of the candidate grid.

    Notes
    -----
    **Derivation.** Some cell ``b`` holds rank ``q n`` and scores 0. A candidate ``j``
    with score ``s_j`` beats it only if ``N_j - N_b >= s_j``. So if every candidate
    with ``s_j >= t + 1`` loses, the winner's score is at most ``t``, that is its cell
    is within ``t / d`` ranks of ``q n``. By the union bound over the ``m - 1`` other
    candidates, that fails with probability at most ``(m - 1) P(N1 - N2 >= t + 1)``;
    ``t`` is the smallest integer making this at most ``alpha``. The tail of the
    difference of two noise values is computed in closed form (see the source) for
    noise a hair wider than the noise drawn, with a margin for the realized coins: a
    conservative bound, not an approximation. The union bound makes the bar
    conservative when few candidates compete (data spread over few cells).

    **From ranks to values.** The bar is in ranks because turning it into values needs
    the data. With ``x_(1) <= ... <= x_(n)`` the values clamped into the bounds
    (``x_(k) = lo`` for ``k < 1`` and ``hi`` for ``k > n``) and ``h`` from
    :func:`quantile_resolution`, with probability at least ``1 - alpha``::

        x_(ceil(q n - r)) - h  <=  release  <=  x_(floor(q n + r) + 1) + h

    ``h`` is the grid's resolution: the release is a candidate, at most ``h`` from any
    point of its cell. Publishing the value interval itself would reveal the order
    statistics; publish ``r`` and ``h``.

    **What it excludes.** Clamping bias: the target is the quantile of the clamped
    values, so if the true quantile lies below ``lo`` or above ``hi`` the bar says
    nothing about the distance to it. With several quantiles per call, each bar holds
    with probability ``1 - alpha`` on its own (use ``alpha / k`` for all at once).

    References
    ----------
    C. Dwork, A. Roth, *The Algorithmic Foundations of Differential Privacy*, 2014,
    section 3.3.

    Examples
    --------
    >>> from dpframe.mechanisms import quantile_accuracy
    >>> r = quantile_accuracy(0.5, epsilon=1.0, bounds=(0, 120), candidates=range(121))
    >>> 0 < r < 20
    True
    """
    quantiles = _quantile_fractions(q)
    eps = _validation.epsilon(epsilon)
    # At least 1e-300, as for geometric_accuracy: below it float(alpha) is 0 and the bar
    # was that of the smallest float, silently.
    level = float(checked_alpha(alpha))
    _, _, grid = _grid(bounds, candidates)
    _plans(quantiles, eps)  # the same refusals as quantile()
    each = eps / quantiles.count
    distinct = np.array([_rank_bar(f, each, grid.size, level) for f in quantiles.distinct])
    bars = distinct[quantiles.which]
    return float(bars[0]) if quantiles.scalar else bars


def quantile_resolution(
    *, bounds: tuple[float, float], candidates: ArrayLike | None = None
) -> float:
    """The value resolution of :func:`quantile`'s grid: how far a candidate is from its cell's ends.

    Parameters
    ----------
    bounds : tuple of float
        As for :func:`quantile`.
    candidates : array_like of float, optional
        As for :func:`quantile`.

    Returns
    -------
    float
        ``h``, the largest distance from a candidate to a point of its cell inside the
        bounds (half the widest gap between neighbouring candidates, or the distance
        from an end candidate to its bound), rounded up.

    See Also
    --------
    quantile : The release this describes.
    quantile_accuracy : The rank bar of a release.

    Notes
    -----
    Candidate ``c_j``'s cell runs from the midpoint to its lower neighbour to the midpoint
    to its upper one (the outer cells to the bounds, after clamping). The release is a
    candidate whose cell is close in rank to the quantile (:func:`quantile_accuracy`),
    so in values it may be up to ``h`` beyond the order statistics that bar names. The
    default grid of ``2**12 + 1`` points has ``h = (hi - lo) / 2**13``. Depends on
    public parameters only.

    Examples
    --------
    >>> from dpframe.mechanisms import quantile_resolution
    >>> quantile_resolution(bounds=(0, 120), candidates=range(121))
    0.5
    >>> quantile_resolution(bounds=(0, 8192))
    1.0
    """
    lo, hi, grid = _grid(bounds, candidates)
    cell_ends = np.concatenate([[lo], cell_edges(grid), [hi]])
    with np.errstate(over="ignore", invalid="ignore"):
        below = _difference_up(grid, cell_ends[:-1])
        above = _difference_up(cell_ends[1:], grid)
    return float(np.maximum(below, above).max())


def _difference_up(x: NDArray[np.float64], y: NDArray[np.float64]) -> NDArray[np.float64]:
    """``x - y`` rounded up: the float difference, raised one step where it fell short.

    Knuth's two-sum gives the exact rounding error of the float subtraction.
    """
    diff = x - y
    back = diff - x
    error = (x - (diff - back)) + (-y - back)
    return np.where(error > 0, np.nextafter(diff, np.inf), diff)
