"""Differentially private mechanisms: arrays in, arrays out, no pandas.

Every function here is vectorized (one call noises a whole array), draws its
randomness from a cryptographic source unless the caller passes ``rng=`` (which makes
the result reproducible and therefore not private), validates every parameter before
drawing anything, and states its privacy guarantee in its Notes.

The `.dp` accessor calls these functions; they can also be used on their own.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpframe import _geometric, _validation
from dpframe._decisions import decision_probability, threshold_decision
from dpframe._laplace import bounded_laplace, bounded_laplace_accuracy, laplace, laplace_accuracy
from dpframe._random import bit_source
from dpframe.errors import InvalidParameterError, InvalidParameterTypeError, NoiseOverflowError

__all__ = [
    "bounded_laplace",
    "bounded_laplace_accuracy",
    "decision_probability",
    "geometric",
    "geometric_accuracy",
    "laplace",
    "laplace_accuracy",
    "threshold_decision",
]


def geometric(
    values: ArrayLike,
    *,
    epsilon: float | Fraction,
    sensitivity: float | Fraction = 1,
    bounds: tuple[int, int] | None = None,
    constant_time: bool = False,
    out_of_range: str = "clamp",
    rng: Any = None,
) -> NDArray[np.int64]:
    """Add two-sided geometric noise to integers (the discrete Laplace mechanism).

    Parameters
    ----------
    values : array_like of int
        The exact integer results to release (counts, integer sums). Any shape.
    epsilon : float or Fraction
        Privacy-loss parameter, a finite number > 0. Floats are read as the simplest
        fraction that rounds to them (``0.1`` is exactly 1/10).
    sensitivity : float or Fraction, default 1
        The most one individual can change any one of ``values`` (1 for a count).
    bounds : tuple of int, optional
        ``(lo, hi)``: the truncated geometric mechanism. Values are clamped into the
        bounds first and every output is clamped into them too, so nothing outside
        ``[lo, hi]`` is ever released. Declare them without looking at the data, for
        example ``(0, n)`` for a count over ``n`` records.
    constant_time : bool, default False
        Draw the same number of random words and do the same work for every value,
        whatever the value and whatever noise comes out (requires ``bounds``).
    out_of_range : {"clamp", "resample"}, default "clamp"
        With ``bounds``: ``"clamp"`` is the truncated geometric mechanism above.
        ``"resample"`` is seed 002's section 2.4 variant: noisy results outside
        ``[lo, hi]`` are rejected and drawn again, with the noise drawn at
        ``ε' = ε - ln M``, ``M = max(1/L_n, 1/U_0, L_1, U_{n-1})`` (``n = hi - lo``,
        computed from ``α = exp(-epsilon/sensitivity)``), whenever that ``ε'`` is
        verified to give ``epsilon``-DP; where the seed's bound falls short, a smaller
        verified ``ε'`` (see Notes). The seed found the result nearly uniform over the
        bounds. Refused when no ``ε' > 0`` passes, or for widths above 10,000.
    rng : numpy.random.Generator or seed, optional
        For teaching and tests only: makes the output reproducible, hence not private.
        The default draws from an AES-256-CTR keystream keyed by ``os.urandom``.

    Returns
    -------
    numpy.ndarray of int64
        ``values`` plus noise, with the shape of ``values``.

    Raises
    ------
    InvalidParameterError, InvalidParameterTypeError
        For an epsilon or sensitivity that is not a finite number > 0, bounds that are
        not two integers with ``lo <= hi``, non-integer values, ``constant_time``
        without bounds, or ``out_of_range="resample"`` without bounds, with
        ``constant_time`` (rejection cannot take constant time) or with ``ε' <= 0``.
    NoiseOverflowError
        When values plus noise could leave int64: values beyond ±2**62 without bounds,
        bounds beyond ±2**61, or ``epsilon / sensitivity`` below 2e-17 without bounds.

    Notes
    -----
    **Privacy.** Two data sets are neighbours when one row is added or removed; the
    caller guarantees that this changes each entry of ``values`` by at most
    ``sensitivity`` (entries computed on disjoint groups of rows, such as the cells
    of one crosstab, may all change at once only if each changes by at most
    ``sensitivity`` and each row touches one entry). The release is then
    ``epsilon``-differentially private: the noise on each entry satisfies
    ``P(N = n) <= exp(epsilon / sensitivity) * P(N = n ± 1)`` for every ``n``, checked
    exactly as stated below. With ``bounds``, the end points receive the clamped tails
    and the ratio holds for them too (clamping after noise is post-processing).

    **The distribution.** ``P(N = n) = (1 - α)/(1 + α) · α^|n|`` with
    ``α = exp(-epsilon / sensitivity)`` (seed 002, eq. 2.1; seed 003 draws it as the
    difference of two geometric draws). dpframe draws ``N = 0`` with probability
    ``(1 - α)/(1 + α)``, else ``±(1 + G)`` with a fair sign and ``G`` one-sided
    geometric, built from its binary digits, which are independent coins
    (``P(digit i = 1) = α^(2^i) / (1 + α^(2^i))``); above the top digit ``K``,
    ``floor(G / 2^K)`` is itself geometric, drawn by tossing one more coin until it
    fails. With ``bounds``, only ``min(|N|, hi - lo)`` matters, so sampling stops
    there: at most ``hi - lo`` steps, in practice about ``log2(hi - lo)`` coins
    (seed 002, section 2.3).

    **What "exact" means here.** No floating-point inverse transform decides any
    output (Mironov 2012; seed 002's footnote). Each coin compares uniformly random
    64-bit words, read as one binary fraction, with the binary digits of its
    probability, extending the comparison word by word on a tie, so each coin's
    probability is exactly a stated dyadic rational. The coin probabilities are those
    of the ideal distribution with α raised by a relative ``epsilon · 2^-20`` (a hair
    more noise), then rounded to dyadic rationals with relative error far below that
    margin. The resulting output distribution is thus exactly known, and dpframe
    verifies in exact rational arithmetic, before using it, that every likelihood
    ratio the proof above needs is at most a rational ``L <= exp(epsilon/sensitivity)``.
    So the requested epsilon is what is guaranteed and charged; nothing is added to
    it. Every integer in the support of the ideal mechanism keeps a positive
    probability, so no output is possible for one input and impossible for a
    neighbouring one. Against the ideal probabilities, each realized one differs by a
    factor at most ``exp(2^-19 · (1 + |n| · epsilon/sensitivity))`` at noise ``n``.

    **Rejection.** With ``out_of_range="resample"`` the output is ``v + N``
    conditioned on landing in ``[lo, hi]``. For an output ``o``,
    ``P_v(o) / P_{v+1}(o) = [P(N = o-v) / P(N = o-v-1)] · [A(v+1) / A(v)]`` with
    ``A(v)`` the acceptance probability. Seed 002's factor ``M`` bounds the ratio of
    the *rejection* probabilities ``1 - A(v)``, which does not always bound the
    ratio of the ``A(v)`` (at epsilon 0.1 and width 3, ``ε - ln M`` would leak 0.118).
    dpframe computes every ``A(v)`` exactly from the coins it draws and checks
    ``L · max_v A(v±1)/A(v) <= exp(epsilon)``; it uses the seed's ``ε'`` when that
    passes (for instance at epsilon 0.1 and width 30), and otherwise the largest
    ``ε'`` of a short search toward ``ε/2`` that passes.

    **Constant time.** With ``constant_time=True`` every value consumes the same,
    fixed number of random words (a function of epsilon, sensitivity and the bounds
    only), and the same sequence of numpy operations runs on arrays of the same sizes,
    whatever the values and the noise: every coin draws all the words of its
    threshold for every element, and the results are combined with branch-free
    ``np.where``. To keep that fixed count small when ``hi - lo`` is far beyond the
    noise scale, the noise past about ``64 + log2(hi - lo)`` bits of decay is
    flattened onto a uniform tail of total probability about ``2^-64`` (this adds
    noise, never removes it, and the exact verification covers it). What dpframe
    cannot make constant: the CPU's cache and the timing of numpy's own kernels,
    which are branch-free loops but are not audited as constant time.

    References
    ----------
    Seed ``002_265e5b6700395d7e.txt`` and ``000_3a7e247f2899f9f9.txt`` (Covington,
    *Geometric Mechanism Notes*, Harvard Privacy Tools); seed ``003_ce3353c9005cacf5.txt``.
    A. Ghosh, T. Roughgarden, M. Sundararajan, "Universally utility-maximizing privacy
    mechanisms", SIAM J. Comput. 41(6), 2012. I. Mironov, "On significance of the least
    significant bits for differential privacy", CCS 2012.

    Examples
    --------
    >>> import dpframe.mechanisms as dpm
    >>> noisy = dpm.geometric([18, 19, 13, 16], epsilon=1.0)
    >>> noisy.shape
    (4,)
    >>> dpm.geometric([20], epsilon=0.1, bounds=(0, 30), constant_time=True).dtype
    dtype('int64')
    """
    unit_epsilon = _validation.epsilon(epsilon) / _validation.sensitivity(sensitivity)
    if not isinstance(constant_time, bool | np.bool_):
        raise InvalidParameterTypeError(
            f"constant_time must be True or False, got {constant_time!r}."
        )
    checked_bounds = None if bounds is None else _validation.integer_bounds(bounds)
    if constant_time and checked_bounds is None:
        raise InvalidParameterError(
            "constant_time=True needs bounds=(lo, hi): an unbounded noise value has no fixed "
            "number of steps. Declare the range of possible results, e.g. bounds=(0, n)."
        )
    resample = _validation.choice(out_of_range, "out_of_range", ("clamp", "resample")) == "resample"
    if resample and (checked_bounds is None or constant_time):
        raise InvalidParameterError(
            'out_of_range="resample" needs bounds=(lo, hi) and constant_time=False (rejection '
            'sampling takes a random number of rounds). Use the default out_of_range="clamp".'
        )
    array = _validation.integer_array(values)
    if unit_epsilon > _geometric.MAX_UNIT_EPSILON:
        raise InvalidParameterError(
            f"epsilon / sensitivity = {float(unit_epsilon):g} is above "
            f"{_geometric.MAX_UNIT_EPSILON}; such a release has no meaningful privacy. "
            f"Use a smaller epsilon (typical values are 0.01 to 10)."
        )
    if checked_bounds is None:
        _validation.check_unbounded_range(array)
        if unit_epsilon < _geometric.MIN_UNIT_EPSILON:
            raise NoiseOverflowError(
                f"epsilon / sensitivity = {float(unit_epsilon):g} makes noise beyond ±2**62 "
                f"too likely for int64. Use a larger epsilon, or pass bounds=(lo, hi)."
            )
        plan = _geometric.geometric_plan(unit_epsilon, None, False)
    else:
        lo, hi = checked_bounds
        if resample and hi > lo:
            rejection_epsilon = _geometric.usable_rejection_epsilon(unit_epsilon, hi - lo)
            plan = _geometric.geometric_plan(rejection_epsilon, hi - lo + 1, False)
        else:
            plan = _geometric.geometric_plan(unit_epsilon, hi - lo, bool(constant_time))
    source = bit_source(rng)
    flat = array.reshape(-1)
    if checked_bounds is None:
        noisy = flat + _geometric.geometric_noise(plan, flat.size, source, False)
    elif hi == lo:
        noisy = np.full(flat.size, lo, dtype=np.int64)
    elif resample:
        noisy = _geometric.rejection_noisy(np.clip(flat, lo, hi), lo, hi, plan, source)
    else:
        noise = _geometric.geometric_noise(plan, flat.size, source, bool(constant_time))
        noisy = np.clip(flat, lo, hi)  # clamp the values, add the noise, clamp the result
        noisy += noise
        np.clip(noisy, lo, hi, out=noisy)
    return noisy.reshape(array.shape)


def geometric_accuracy(
    *,
    epsilon: float | Fraction,
    sensitivity: float | Fraction = 1,
    alpha: float = 0.05,
    bounds: tuple[int, int] | None = None,
    constant_time: bool = False,
) -> int:
    """The error bar of :func:`geometric`: ``|noise| <= a`` with probability ``>= 1 - alpha``.

    Parameters
    ----------
    epsilon, sensitivity, bounds, constant_time
        As for :func:`geometric` (``out_of_range="clamp"``).
    alpha : float, default 0.05
        The probability that the error exceeds the half-width (0.05 gives a 95% bar).

    Returns
    -------
    int
        The smallest integer ``a >= 0`` with ``P(|output - clamp(value)| > a) <= alpha``
        for every true value (with bounds, the error is at most ``hi - lo``).

    Notes
    -----
    Computed exactly, not approximated: ``P(|N| > a)`` is evaluated in rational
    arithmetic from the very coins :func:`geometric` draws (so it accounts for the
    realized distribution, not only the ideal one), and ``a`` is found by bisection.
    For the ideal mechanism, ``P(|N| > a) = 2 α^(a+1) / (1 + α)``. Clamping into
    bounds can only shrink the error, so the bar holds for every true value. The
    accuracy depends only on public parameters and spends no privacy budget.

    References
    ----------
    Seed ``002_265e5b6700395d7e.txt`` (eq. 2.1, section 2.3).

    Examples
    --------
    >>> from dpframe.mechanisms import geometric_accuracy
    >>> geometric_accuracy(epsilon=1.0)
    3
    >>> geometric_accuracy(epsilon=0.01, bounds=(0, 30))
    30
    """
    unit_epsilon = _validation.epsilon(epsilon) / _validation.sensitivity(sensitivity)
    level = Fraction(_validation.probability(alpha, "alpha"))
    reach = None
    if constant_time and bounds is None:
        raise InvalidParameterError("constant_time=True needs bounds=(lo, hi), as in geometric().")
    if bounds is not None:
        lo, hi = _validation.integer_bounds(bounds)
        if hi == lo:
            return 0
        reach = hi - lo
    if unit_epsilon > _geometric.MAX_UNIT_EPSILON:
        raise InvalidParameterError(
            f"epsilon / sensitivity must be at most {_geometric.MAX_UNIT_EPSILON}."
        )
    if reach is None and unit_epsilon < _geometric.MIN_UNIT_EPSILON:
        raise NoiseOverflowError("epsilon / sensitivity is too small for unbounded noise.")
    plan = _geometric.geometric_plan(unit_epsilon, reach, bool(constant_time) and reach is not None)
    return _geometric.half_width(plan, level)
