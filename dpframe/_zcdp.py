"""zCDP accounting math: exact or rigorously rounded, never understating epsilon.

Zero-concentrated differential privacy (Bun & Steinke 2016) bounds the Rényi divergence
of every order ``α > 1`` between neighbouring outputs by ``α·rho``. It composes by adding
the ``rho`` of each release, and converts to ``(epsilon, delta)``-DP. These functions are
the arithmetic the ledger needs; they hold no state.

Every returned value is a :class:`~fractions.Fraction`. Costs are exact where they are
rational (``rho`` of a Gaussian or of a pure-DP release); conversions involve logarithms,
so they are computed with outward-rounded interval arithmetic in :mod:`decimal` and then
rounded in the safe direction: ``epsilon`` and ``delta`` up, the ``rho`` that fits a
budget down. The conversion (Canonne, Kamath, Steinke 2020, Proposition 12 and Corollary
13) holds at *every* order ``α > 1``; the order is chosen numerically to make the bound
tightest, and the bound is then evaluated rigorously at that order, so a slightly
suboptimal order can only cost a hair of tightness, never validity.
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Callable, Iterable
from decimal import Decimal
from fractions import Fraction
from typing import Any

from dpframe import _validation
from dpframe.errors import InvalidParameterError

__all__ = [
    "delta_of_zcdp",
    "epsilon_of_composition",
    "epsilon_of_zcdp",
    "rho_for_budget",
    "rho_of_discrete_gaussian",
    "rho_of_pure_dp",
]

# Decimal digits of the interval arithmetic; results are then rounded to 64 significant bits.
_DIGITS = 60
_SIGNIFICANT_BITS = 64
# Above this epsilon a release protects nothing; rho_for_budget converts this much.
_LARGEST_CONVERTED_EPSILON = Fraction(2**20)
# delta below this is reported as this (rounded up: still a valid delta).
SMALLEST_DELTA = Fraction(1, 2**1074)
# Above this rho a release protects nothing; conversions answer with a simple valid bound.
_LARGEST_CONVERTED_RHO = Fraction(2**40)


def _log(value: Fraction) -> float:
    """ln(value) for a positive Fraction, also below the smallest float (a delta of 1e-400)."""
    return math.log(value.numerator) - math.log(value.denominator)


# ---------------------------------------------------------------- parameters


def _nonnegative(value: Any, name: str) -> Fraction:
    """A finite real >= 0 as an exact Fraction (floats read as their simplest fraction)."""
    result = _validation.real(value, name)
    if result < 0:
        raise InvalidParameterError(f"{name} must be >= 0, got {value!r}.")
    return result


# ---------------------------------------------------------------- interval arithmetic


def _ctx(rounding: str) -> decimal.Context:
    return decimal.Context(prec=_DIGITS, rounding=rounding, Emin=-(10**17), Emax=10**17)


_DOWN, _UP = _ctx(decimal.ROUND_FLOOR), _ctx(decimal.ROUND_CEILING)


class _Interval:
    """A closed interval [lo, hi] of Decimals that contains the true value.

    +, -, ×, ÷ round the lower end down and the upper end up (IEEE-style directed
    rounding, which :mod:`decimal` performs exactly); ln and exp are correctly rounded
    to nearest by :mod:`decimal`, so their ends are moved out by two units in the last
    place.
    """

    __slots__ = ("hi", "lo")

    def __init__(self, lo: Decimal, hi: Decimal) -> None:
        self.lo, self.hi = lo, hi

    @staticmethod
    def of(x: Fraction) -> _Interval:
        n, d = Decimal(x.numerator), Decimal(x.denominator)
        return _Interval(_DOWN.divide(n, d), _UP.divide(n, d))

    def __add__(self, other: _Interval) -> _Interval:
        return _Interval(_DOWN.add(self.lo, other.lo), _UP.add(self.hi, other.hi))

    def __sub__(self, other: _Interval) -> _Interval:
        return _Interval(_DOWN.subtract(self.lo, other.hi), _UP.subtract(self.hi, other.lo))

    def __mul__(self, other: _Interval) -> _Interval:
        ends = [(a, b) for a in (self.lo, self.hi) for b in (other.lo, other.hi)]
        return _Interval(
            min(_DOWN.multiply(a, b) for a, b in ends), max(_UP.multiply(a, b) for a, b in ends)
        )

    def __truediv__(self, other: _Interval) -> _Interval:
        if other.lo <= 0:
            raise ValueError("internal error: interval division by a non-positive interval")
        ends = [(a, b) for a in (self.lo, self.hi) for b in (other.lo, other.hi)]
        return _Interval(
            min(_DOWN.divide(a, b) for a, b in ends), max(_UP.divide(a, b) for a, b in ends)
        )

    def ln(self) -> _Interval:
        if self.lo <= 0:
            raise ValueError("internal error: logarithm of a non-positive interval")
        return _Interval(_nudge(_DOWN.ln(self.lo), -1), _nudge(_UP.ln(self.hi), 1))

    def exp(self) -> _Interval:
        return _Interval(
            max(Decimal(0), _nudge(_DOWN.exp(self.lo), -1)), _nudge(_UP.exp(self.hi), 1)
        )


def _nudge(x: Decimal, direction: int) -> Decimal:
    """Two units in the last place outward: covers a correctly rounded ln or exp."""
    for _ in range(2):
        x = _DOWN.next_minus(x) if direction < 0 else _UP.next_plus(x)
    return x


def _rounded(x: Decimal, *, up: bool) -> Fraction:
    """``x`` rounded to 64 significant bits, up or down, as a compact Fraction."""
    exact = Fraction(x)
    if exact == 0:
        return exact
    size = abs(exact)
    exponent = size.numerator.bit_length() - size.denominator.bit_length()
    shift = _SIGNIFICANT_BITS - exponent
    scaled = exact * Fraction(2) ** shift
    mantissa = math.ceil(scaled) if up else math.floor(scaled)
    return Fraction(mantissa) / Fraction(2) ** shift


# ---------------------------------------------------------------- the bounds at one order


def _log_delta(alpha: Fraction, rho: Fraction, epsilon: Fraction) -> _Interval:
    """ln δ(α) = (α-1)(αρ-ε) + α ln(1-1/α) - ln(α-1)  (CKS 2020, Proposition 12 at τ = αρ)."""
    first = _Interval.of((alpha - 1) * (alpha * rho - epsilon))
    second = _Interval.of(alpha) * _Interval.of(1 - 1 / alpha).ln()
    return first + second - _Interval.of(alpha - 1).ln()


def _epsilon_at(alpha: Fraction, rho: Fraction, delta: Fraction) -> _Interval:
    """ε(α) = αρ + (ln(1/δ) + (α-1) ln(1-1/α) - ln α) / (α-1)  (CKS 2020, Corollary 13)."""
    inner = (
        _Interval.of(1 / delta).ln()
        + _Interval.of(alpha - 1) * _Interval.of(1 - 1 / alpha).ln()
        - _Interval.of(alpha).ln()
    )
    return _Interval.of(alpha * rho) + inner / _Interval.of(alpha - 1)


def _rho_at(alpha: Fraction, epsilon: Fraction, delta: Fraction) -> _Interval:
    """ρ(α) = [ε + (ln δ + ln(α-1) - α ln(1-1/α)) / (α-1)] / α: the largest ρ with δ(α) <= δ."""
    inner = (
        _Interval.of(delta).ln()
        + _Interval.of(alpha - 1).ln()
        - _Interval.of(alpha) * _Interval.of(1 - 1 / alpha).ln()
    )
    return (_Interval.of(epsilon) + inner / _Interval.of(alpha - 1)) / _Interval.of(alpha)


# ---------------------------------------------------------------- choosing the order


def _order(t: float) -> Fraction:
    """α = 1 + e^t exactly (the float e^t as a Fraction), so α > 1 even when e^t is tiny."""
    return 1 + Fraction(math.exp(t))


def _log_one_minus_inverse(t: float) -> float:
    """ln(1 - 1/α) for α = 1 + e^t, without forming α: t - ln(1 + e^t)."""
    return t - math.log1p(math.exp(t))


def _order_root(slope: Callable[[float], float]) -> Fraction:
    """The order α = 1 + e^t > 1 where slope(t), increasing in t, crosses 0 (bisection on t).

    Used with the derivative of a convex bound, so the root is the tightest order. Only
    tightness depends on this search: every α > 1 yields a valid bound.
    """
    lo, hi = -60.0, 80.0  # α - 1 from e^-60 to e^80
    for _ in range(200):
        mid = (lo + hi) / 2
        if slope(mid) < 0:
            lo = mid
        else:
            hi = mid
    return _order((lo + hi) / 2)


def _best_order(objective: Callable[[float], float]) -> Fraction:
    """The order α = 1 + e^t minimizing a unimodal objective(t), by golden section on t."""
    lo, hi = -60.0, 80.0
    ratio = (math.sqrt(5) - 1) / 2
    a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    fa, fb = objective(a), objective(b)
    for _ in range(200):
        if fa <= fb:
            hi, b, fb = b, a, fa
            a = hi - ratio * (hi - lo)
            fa = objective(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + ratio * (hi - lo)
            fb = objective(b)
    return _order((lo + hi) / 2)


# ---------------------------------------------------------------- the public functions


def rho_of_discrete_gaussian(
    sigma: float | Fraction,
    l2_sensitivity: float | Fraction | None = None,
    *,
    l2_sensitivity_squared: float | Fraction | None = None,
) -> Fraction:
    """The zCDP cost of discrete Gaussian noise: ``rho = l2_sensitivity² / (2 sigma²)``, exactly.

    Parameters
    ----------
    sigma : float or Fraction
        The noise scale of :func:`dpframe.mechanisms.discrete_gaussian`.
    l2_sensitivity : float or Fraction, optional
        The most one individual can change the noised vector, in Euclidean norm.
    l2_sensitivity_squared : float or Fraction, optional
        Its square instead, for a sensitivity that is irrational (``√k`` for a person
        in ``k`` cells): ``l2_sensitivity_squared=k`` is exact, ``math.sqrt(k)`` is not.

    Returns
    -------
    Fraction
        ``rho``, exact (floats are read as the simplest fraction that rounds to them,
        as everywhere in dpframe).

    See Also
    --------
    dpframe.mechanisms.discrete_gaussian : the mechanism.
    epsilon_of_zcdp : what this rho means in (epsilon, delta).

    Notes
    -----
    Canonne, Kamath, Steinke 2020, Theorem 4 (one value, integer-valued query with
    sensitivity ``Δ``) and Theorem 14 (independent noise on each coordinate, L2
    sensitivity): adding ``N_Z(0, sigma²)`` noise satisfies ``Δ²/(2 sigma²)``-zCDP, the
    same as the continuous Gaussian. Exact: no rounding is involved. A float such as
    ``math.sqrt(3)`` is a rational number near √3, possibly below it, which would
    understate rho by about 1e-16: pass the square instead.

    References
    ----------
    C. Canonne, G. Kamath, T. Steinke, "The Discrete Gaussian for Differential
    Privacy", NeurIPS 2020 (arXiv:2004.00010).

    Examples
    --------
    >>> rho_of_discrete_gaussian(10, 1)
    Fraction(1, 200)
    >>> rho_of_discrete_gaussian(2, l2_sensitivity_squared=3)  # one person in 3 cells
    Fraction(3, 8)
    """
    s = _validation.sensitivity(sigma, "sigma")
    if (l2_sensitivity is None) == (l2_sensitivity_squared is None):
        raise InvalidParameterError(
            "pass exactly one of l2_sensitivity (e.g. 1 for a count) and "
            "l2_sensitivity_squared (e.g. 3 for a person in 3 cells, sensitivity √3)."
        )
    if l2_sensitivity is not None:
        delta = _validation.sensitivity(l2_sensitivity, "l2_sensitivity")
        squared = delta * delta
    else:
        squared = _validation.sensitivity(l2_sensitivity_squared, "l2_sensitivity_squared")
    return squared / (2 * s * s)


def rho_of_pure_dp(epsilon: float | Fraction) -> Fraction:
    """The zCDP cost of an ``epsilon``-DP release: ``rho = epsilon² / 2``, exactly.

    Parameters
    ----------
    epsilon : float or Fraction
        The pure differential privacy parameter, > 0.

    Returns
    -------
    Fraction
        ``epsilon² / 2``.

    See Also
    --------
    epsilon_of_composition : pure and zCDP releases together.

    Notes
    -----
    Bun & Steinke 2016, Proposition 1.4: ``epsilon``-DP implies ``(epsilon²/2)``-zCDP.
    Worth using for many small releases; for a few large ones, counting ``epsilon``
    directly is cheaper (see :func:`epsilon_of_composition`, which picks).

    References
    ----------
    M. Bun, T. Steinke, "Concentrated Differential Privacy: Simplifications, Extensions,
    and Lower Bounds", TCC 2016 (arXiv:1605.02065).

    Examples
    --------
    >>> rho_of_pure_dp(0.1)
    Fraction(1, 200)
    """
    eps = _validation.epsilon(epsilon)
    return eps * eps / 2


def delta_of_zcdp(rho: float | Fraction, epsilon: float | Fraction) -> Fraction:
    """The smallest delta with rho-zCDP ⇒ (epsilon, delta)-DP, by CKS 2020, rounded up.

    Parameters
    ----------
    rho : float or Fraction
        The zCDP parameter, >= 0.
    epsilon : float or Fraction
        The target epsilon, >= 0.

    Returns
    -------
    Fraction
        ``delta`` in ``[0, 1]``: 0 when ``rho = 0``; at least ``2**-1074`` otherwise.

    See Also
    --------
    epsilon_of_zcdp : the inverse direction.

    Notes
    -----
    Canonne, Kamath, Steinke 2020, Proposition 12 with ``τ = αρ`` (Corollary 13):
    rho-zCDP implies (epsilon, delta)-DP with
    ``delta = inf_{α>1} exp((α-1)(αρ-ε)) / (α-1) · (1-1/α)^α``. The infimum is
    approached at the order where the derivative of the bound vanishes, located in
    floating point (the bound holds at every order); the value there is evaluated in
    outward-rounded interval arithmetic (60 digits) and rounded up to 64 significant
    bits. Never below the true value of the bound; above it by about 1e-19
    (relative) in the tests against an independent mpmath computation. Values below
    ``2**-1074`` are reported as ``2**-1074``, and values above 1 as 1.

    References
    ----------
    C. Canonne, G. Kamath, T. Steinke, "The Discrete Gaussian for Differential
    Privacy", NeurIPS 2020 (arXiv:2004.00010), Proposition 12, Corollary 13.

    Examples
    --------
    >>> round(float(delta_of_zcdp(1 / 32, 0)), 12)  # OpenDP's figure: 0.1508457845622862
    0.150845784562
    """
    r = _nonnegative(rho, "rho")
    eps = _nonnegative(epsilon, "epsilon")
    if r == 0:
        return Fraction(0)
    if r > _LARGEST_CONVERTED_RHO:
        return Fraction(1)  # always a valid delta
    # delta falls as epsilon grows: converting a smaller epsilon gives a valid (larger) delta.
    eps = min(eps, _LARGEST_CONVERTED_EPSILON)
    rho_f, eps_f = float(r), float(eps)
    # d/dα ln δ(α) = (2α - 1)ρ - ε + ln(1 - 1/α): increasing, zero at the best order.
    alpha = _order_root(lambda t: (1 + 2 * math.exp(t)) * rho_f - eps_f + _log_one_minus_inverse(t))
    upper = _log_delta(alpha, r, eps).hi
    if upper >= 0:
        return Fraction(1)
    if upper < -744:  # below 2**-1074 (e^-744.4)
        return SMALLEST_DELTA
    bound = _Interval(upper, upper).exp().hi
    return min(Fraction(1), max(SMALLEST_DELTA, _rounded(bound, up=True)))


def epsilon_of_zcdp(rho: float | Fraction, delta: float | Fraction) -> Fraction:
    """The smallest epsilon with rho-zCDP ⇒ (epsilon, delta)-DP, by CKS 2020, rounded up.

    Parameters
    ----------
    rho : float or Fraction
        The zCDP parameter, >= 0 (the sum of the rho of the releases composed).
    delta : float or Fraction
        The target delta, in (0, 1).

    Returns
    -------
    Fraction
        ``epsilon >= 0``, never below the true value of the bound.

    See Also
    --------
    delta_of_zcdp : the inverse direction.
    rho_for_budget : the largest rho that fits an (epsilon, delta) budget.

    Notes
    -----
    Canonne, Kamath, Steinke 2020, Corollary 13: rho-zCDP implies (epsilon, delta)-DP
    for ``epsilon = inf_{α>1} αρ + (ln(1/δ) + (α-1) ln(1-1/α) - ln α) / (α-1)``, the
    tightest standard conversion (better than Bun & Steinke's
    ``ρ + 2 sqrt(ρ ln(1/δ))``). The infimum is at the order where
    ``ρ(α-1)² = ln(1/δ) - ln α``, located in floating point; any order gives a valid
    epsilon, so the search only affects tightness. The value at that order is
    evaluated in outward-rounded interval arithmetic and rounded up to 64
    significant bits: this never understates epsilon, and overstates the bound by
    about 1e-19 (relative) in the tests against an independent mpmath computation.
    This computes the bound directly rather than by bisection on ``delta_of_zcdp``;
    the two are inverse to each other within their roundings (the tests check
    ``delta_of_zcdp(rho, epsilon_of_zcdp(rho, delta))`` against ``delta`` to 1e-15).

    References
    ----------
    C. Canonne, G. Kamath, T. Steinke, "The Discrete Gaussian for Differential
    Privacy", NeurIPS 2020 (arXiv:2004.00010), Corollary 13. M. Bun, T. Steinke,
    "Concentrated Differential Privacy", TCC 2016, Proposition 1.3.

    Examples
    --------
    >>> round(float(epsilon_of_zcdp(1 / 32, 1e-3)), 12)  # OpenDP's figure: 0.6880024554878086
    0.688002455488
    >>> epsilon_of_zcdp(0, 1e-6)
    Fraction(0, 1)
    """
    r = _nonnegative(rho, "rho")
    d = _validation.delta(delta, allow_zero=False)
    if r == 0:
        return Fraction(0)
    if r > _LARGEST_CONVERTED_RHO:  # rho + 2 sqrt(rho ln(1/delta)) <= 2 rho + ln(1/delta)
        return 2 * r + math.ceil(-_log(d)) + 1
    rho_f, log_inv_delta = float(r), -_log(d)
    # dε/dα = ρ - (ln(1/δ) - ln α)/(α - 1)²: increasing, zero at the best order.
    alpha = _order_root(
        lambda t: rho_f * math.exp(2 * t) - (log_inv_delta - math.log1p(math.exp(t)))
    )
    upper = _epsilon_at(alpha, r, d).hi
    return max(Fraction(0), _rounded(upper, up=True))


def rho_for_budget(epsilon: float | Fraction, delta: float | Fraction) -> Fraction:
    """The largest rho with rho-zCDP ⇒ (epsilon, delta)-DP, by CKS 2020, rounded down.

    Parameters
    ----------
    epsilon : float or Fraction
        The budget's epsilon, > 0.
    delta : float or Fraction
        The budget's delta, in (0, 1).

    Returns
    -------
    Fraction
        ``rho >= 0``: every release or composition of releases with total zCDP cost at
        most this satisfies (epsilon, delta)-DP.

    See Also
    --------
    epsilon_of_zcdp : the inverse direction.

    Notes
    -----
    From CKS 2020, Proposition 12 at ``τ = αρ``: ``δ(α) <= delta`` exactly when
    ``ρ <= [ε + (ln δ + ln(α-1) - α ln(1-1/α)) / (α-1)] / α``; the result is the
    supremum over ``α > 1`` of that bound, taken at an order found numerically,
    evaluated in outward-rounded interval arithmetic and rounded down to 64
    significant bits. The result is then verified with the function the ledger checks
    spending with: ``epsilon_of_zcdp(rho, delta) <= epsilon`` must hold (it can fail
    only by the 1e-16 or so of tightness either side leaves); if not, rho is lowered
    by a relative ``2**-40`` until it does. So a ledger that grants ``rho`` never
    refuses a release that spends exactly that much.

    References
    ----------
    C. Canonne, G. Kamath, T. Steinke, "The Discrete Gaussian for Differential
    Privacy", NeurIPS 2020 (arXiv:2004.00010), Proposition 12, Corollary 13.

    Examples
    --------
    >>> round(float(rho_for_budget(1.0, 1e-6)), 6)
    0.024356
    """
    eps = _validation.epsilon(epsilon)
    d = _validation.delta(delta, allow_zero=False)
    # rho grows with epsilon, so converting a smaller epsilon is a valid (lower) answer;
    # capping keeps the float search in range for any epsilon (even beyond 1e308).
    eps = min(eps, _LARGEST_CONVERTED_EPSILON)
    eps_f, log_d = float(eps), _log(d)

    def negative_rho(t: float) -> float:
        u = math.exp(t)  # α - 1
        inner = log_d + t - (1 + u) * _log_one_minus_inverse(t)
        return -(eps_f + inner / u) / (1 + u)

    alpha = _best_order(negative_rho)
    rho = _rounded(_rho_at(alpha, eps, d).lo, up=False)
    # Verify with the very function the ledger will check spending with.
    for _ in range(64):
        if rho <= 0:
            return Fraction(0)
        if epsilon_of_zcdp(rho, d) <= eps:
            return rho
        rho = _rounded(_Interval.of(rho * (1 - Fraction(1, 2**40))).lo, up=False)
    return Fraction(0)


def epsilon_of_composition(
    delta: float | Fraction,
    *,
    rhos: Iterable[float | Fraction] = (),
    pure_epsilons: Iterable[float | Fraction] = (),
) -> Fraction:
    """The epsilon of zCDP and pure-DP releases composed, at a given delta, rounded up.

    Parameters
    ----------
    delta : float or Fraction
        The delta at which to state the result, in (0, 1) (used only when some release
        is counted in zCDP).
    rhos : iterable of float or Fraction
        The rho of each zCDP release (discrete Gaussian noise).
    pure_epsilons : iterable of float or Fraction
        The epsilon of each pure-DP release (geometric, Laplace).

    Returns
    -------
    Fraction
        An epsilon such that the composition is (epsilon, delta)-DP (or
        (epsilon, 0)-DP when there is no zCDP release and no pure release is
        converted): the smallest over the choices below, rounded up.

    See Also
    --------
    epsilon_of_zcdp, rho_of_pure_dp

    Notes
    -----
    A pure ``ε``-DP release is both ``(ε²/2)``-zCDP (Bun & Steinke 2016, Proposition
    1.4) and ``(ξ = ε, ρ = 0)``-zCDP (its Rényi divergences are at most its max
    divergence ``ε``). Releases compose in ``(ξ, ρ)``-zCDP by adding both parameters,
    adaptively (Bun & Steinke 2016, Lemma 2.3), and ``(ξ, ρ)``-zCDP converts to
    ``(ξ + epsilon_of_zcdp(ρ, δ), δ)``-DP (CKS 2020, Proposition 12 with
    ``τ = ξ + αρ``). Each pure release may be counted either way; converting the
    small ones pays (``ε²/2`` is tiny), converting the large ones does not. This
    returns the best of the ``n + 1`` choices that convert the ``k`` smallest pure
    releases, ``k = 0..n``; every choice is a valid bound. Approximate
    ``(ε, δ)``-DP releases are not covered here.

    References
    ----------
    M. Bun, T. Steinke, "Concentrated Differential Privacy: Simplifications,
    Extensions, and Lower Bounds", TCC 2016 (arXiv:1605.02065). C. Canonne,
    G. Kamath, T. Steinke, NeurIPS 2020 (arXiv:2004.00010).

    Examples
    --------
    >>> float(epsilon_of_composition(1e-6, pure_epsilons=[0.5, 0.5]))  # plain sum
    1.0
    >>> many = epsilon_of_composition(1e-6, pure_epsilons=[0.01] * 1000)
    >>> float(many) < 10 * 0.5  # zCDP beats the sum of 1000 × 0.01 = 10 by far
    True
    """
    d = _validation.delta(delta, allow_zero=False)
    zcdp = sum((_nonnegative(r, "rhos") for r in rhos), Fraction(0))
    pure = sorted(_validation.epsilon(e, "pure_epsilons") for e in pure_epsilons)
    best: Fraction | None = None
    converted = zcdp
    remaining = sum(pure, Fraction(0))
    for k in range(len(pure) + 1):
        if k:
            converted += pure[k - 1] ** 2 / 2
            remaining -= pure[k - 1]
        total = remaining + (epsilon_of_zcdp(converted, d) if converted > 0 else Fraction(0))
        if best is None or total < best:
            best = total
    if best is None:
        raise InvalidParameterError("internal error: no composition evaluated; please report")
    return best
