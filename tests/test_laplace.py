"""The Laplace family: snapping (laplace), bounded_laplace, their accuracy, bad input.

Statistical tests reject at FALSE_ALARM = 1e-6 and each privacy test has a validity twin
that must fail on a deliberately weakened mechanism.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import optimize, stats

from dpframe import _geometric, _laplace, _random
from dpframe._coins import Coin, lazy_bernoulli, make_coin
from dpframe._exact import exp_decimal, precise, simplest_rational
from dpframe.errors import InvalidParameterError, InvalidParameterTypeError, NoiseOverflowError
from dpframe.mechanisms import bounded_laplace, bounded_laplace_accuracy, laplace, laplace_accuracy
from tests._stats import FALSE_ALARM, audit, chi_square_pvalue, two_sided_geometric_pmf
from tests.conftest import WordCounter

N_GOF = 1_000_000
N_COVERAGE = 200_000


def _exact(x: float) -> Fraction:
    """A float parameter as dpframe reads it (the simplest rational that rounds to it)."""
    return simplest_rational(x)


# ---------------------------------------------------------------- helpers: snapping PMF


def _laplace_cdf(t: NDArray[np.float64], scale: float) -> NDArray[np.float64]:
    return np.where(
        t < 0, 0.5 * np.exp(np.minimum(t, 0) / scale), 1 - 0.5 * np.exp(-np.maximum(t, 0) / scale)
    )


def snapped_support_and_pmf(
    x: float, scale: float, grid: float, bounds: tuple[float, float]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Outputs of the ideal snapping mechanism (lo, interior multiples of Λ, hi) and their PMF.

    An interior point kΛ gets the Laplace mass of [kΛ − Λ/2, kΛ + Λ/2) around x; ``lo``
    gets everything that rounds to a grid point <= lo, ``hi`` everything rounding >= hi.
    """
    lo, hi = bounds
    k_lo, k_hi = math.floor(lo / grid), math.ceil(hi / grid)
    interior = np.arange(k_lo + 1, k_hi) * grid
    support = np.concatenate([[lo], interior, [hi]])
    edges = (np.arange(k_lo, k_hi) + 0.5) * grid - x  # upper edge of each cell, lo's included
    cdf = _laplace_cdf(edges, scale)
    pmf = np.diff(np.concatenate([[0.0], cdf, [1.0]]))
    return support, pmf


def to_index(outputs: NDArray[np.float64], support: NDArray[np.float64]) -> NDArray[np.int64]:
    index = np.searchsorted(support, outputs)
    assert np.array_equal(support[np.minimum(index, support.size - 1)], outputs)
    return index.astype(np.int64)


# ---------------------------------------------------------------- helpers: the porosity attack


def numpy_laplace_noise(u: float, scale: float) -> float:
    """numpy's Generator.laplace(scale=scale) for the uniform double ``u``, bit for bit."""
    if u >= 0.5:
        return 0.0 - scale * math.log(2.0 - u - u)
    return 0.0 + scale * math.log(u + u)


def naive_laplace_outputs(x: float, scale: float, window: tuple[float, float]) -> set[float]:
    """Every output of the textbook float Laplace ``x + rng.laplace(scale=scale)`` in ``window``.

    numpy draws ``U = k·2^-53`` (k an integer) and maps it to the noise above, an
    increasing function of k. Only the k whose noise lands in ``window − x`` matter:
    they lie between the preimages of the window's ends, widened by 8 to cover the
    rounding of exp, log and the sum, so enumerating them lists the reachable outputs
    exhaustively. ``window − x`` must not contain 0.
    """
    w0, w1 = window
    y0, y1 = w0 - x, w1 - x
    if y0 > 0:  # positive noise: 2 − 2U = exp(−y/scale), U >= 1/2
        k_first = math.floor(2**53 * (1 - math.exp(-y0 / scale) / 2)) - 8
        k_last = math.ceil(2**53 * (1 - math.exp(-y1 / scale) / 2)) + 8
    elif y1 < 0:  # negative noise: 2U = exp(y/scale), U < 1/2
        k_first = math.floor(2**52 * math.exp(y0 / scale)) - 8
        k_last = math.ceil(2**52 * math.exp(y1 / scale)) + 8
    else:
        raise ValueError("the window must not contain x")
    outputs = {x + numpy_laplace_noise(k * 2.0**-53, scale) for k in range(k_first, k_last + 1)}
    return {out for out in outputs if w0 <= out <= w1}


def test_naive_helper_reproduces_numpy_laplace() -> None:
    for scale in (1.0, 3.0):
        uniforms = np.random.default_rng(5).random(20_000)
        numpy_draws = np.random.default_rng(5).laplace(scale=scale, size=20_000)
        mine = np.array([numpy_laplace_noise(float(u), scale) for u in uniforms])
        assert np.array_equal(mine, numpy_draws)


def test_naive_float_laplace_is_porous() -> None:
    """Mironov's attack: outputs possible for x = 0 and impossible for its neighbour x = 1."""
    scale = 3.0  # sensitivity 1, epsilon 1/3, as in Mironov's example
    start = 2.5 * scale
    window = (start, start + 4000 * math.ulp(start))
    from_zero = naive_laplace_outputs(0.0, scale, window)
    from_one = naive_laplace_outputs(1.0, scale, window)
    only_zero, only_one = from_zero - from_one, from_one - from_zero
    # Each of these outputs identifies the input with certainty.
    assert only_zero
    assert only_one
    assert len(only_zero | only_one) > 0.5 * len(from_zero | from_one)
    # The float grid is porous: most of the 4001 doubles in the window are unreachable.
    assert len(from_zero | from_one) < 4001 / 2


def test_snapping_outputs_of_neighbours_share_one_grid() -> None:
    """The fix: both inputs' outputs are multiples of Λ, and every nearby multiple occurs."""
    epsilon, bounds = 1 / 3, (-1000.0, 1000.0)
    _, grid = _laplace.snapping_scale(Fraction(1, 3), Fraction(1), bounds)
    for x in (0.0, 1.0):
        out = laplace(np.full(200_000, x), epsilon=epsilon, sensitivity=1.0, bounds=bounds)
        assert np.all(out / grid == np.round(out / grid))
        near = np.unique(out[np.abs(out) <= 4 * grid])
        assert np.array_equal(near, np.arange(-4, 5) * grid)  # all 9, for both inputs


# ---------------------------------------------------------------- snapping: distribution


SNAP_CASES = [
    # epsilon, sensitivity, bounds, x
    (1.0, 1.0, (-20.0, 20.0), 3.3),
    (0.5, 1.0, (0.0, 30.0), 0.0),  # an end
    (1.3, 2.0, (0.3, 10.7), 10.0),  # bounds off the grid
    (2.0, 0.1, (-1.0, 1.0), -0.62),
    (0.1, 1.0, (-100.0, 100.0), 250.0),  # clamped into the bounds first
]


@pytest.mark.parametrize(("epsilon", "sensitivity", "bounds", "x"), SNAP_CASES)
def test_snapping_outputs_are_on_the_grid_and_in_bounds(
    epsilon: float, sensitivity: float, bounds: tuple[float, float], x: float
) -> None:
    lo, hi = bounds
    _, grid = _laplace.snapping_scale(_exact(epsilon), _exact(sensitivity), (float(lo), float(hi)))
    out = laplace(np.full(100_000, x), epsilon=epsilon, sensitivity=sensitivity, bounds=bounds)
    assert out.dtype == np.float64
    assert np.all((out >= lo) & (out <= hi))
    interior = out[(out > lo) & (out < hi)]
    assert np.all(interior / grid == np.floor(interior / grid))


@pytest.mark.parametrize(
    "bounds",
    [
        (0, 2**53 + 1),
        (-(2**60) - 1, 0),
        (Fraction(1, 3), 1),
        (np.int64(2**62 + 1), 2**63),
        pytest.param(
            (0, np.longdouble(1) - np.longdouble(2) ** -60),
            marks=pytest.mark.skipif(
                np.finfo(np.longdouble).nmant < 60, reason="long double is a double here"
            ),
        ),
    ],
)
def test_exact_bounds_float64_cannot_hold_are_refused(bounds: tuple[Any, Any]) -> None:
    # Read as the nearest float, 2**53 + 1 became 2**53 + 2: outputs past the declared end.
    for call in (laplace, bounded_laplace):
        with pytest.raises(InvalidParameterError, match="cannot hold exactly"):
            call(np.zeros(4), epsilon=1.0, sensitivity=1.0, bounds=bounds)
    # Validity twin: ends float64 holds exactly (big powers of two included) are read.
    held = (0, 2**53) if bounds[1] != 1 else (0.25, 1)
    assert np.all(laplace(np.zeros(4), epsilon=1.0, sensitivity=1.0, bounds=held) <= held[1])


@pytest.mark.parametrize(("epsilon", "sensitivity", "bounds", "x"), SNAP_CASES)
def test_snapping_matches_the_exact_snapped_pmf(
    epsilon: float, sensitivity: float, bounds: tuple[float, float], x: float
) -> None:
    scale, grid = _laplace.snapping_scale(
        _exact(epsilon), _exact(sensitivity), (float(bounds[0]), float(bounds[1]))
    )
    out = laplace(np.full(N_GOF, x), epsilon=epsilon, sensitivity=sensitivity, bounds=bounds)
    clamped = min(max(x, bounds[0]), bounds[1])
    support, pmf = snapped_support_and_pmf(clamped, scale, grid, bounds)
    p = chi_square_pvalue(to_index(out, support), np.arange(support.size), pmf)
    assert p > FALSE_ALARM


def test_snapping_goodness_of_fit_rejects_25_percent_less_noise() -> None:
    """Validity twin: the same test rejects noise drawn for epsilon / 0.75 (same grid Λ = 1)."""
    bounds = (-20.0, 20.0)
    scale, grid = _laplace.snapping_scale(Fraction(1), _exact(0.9), bounds)
    weak_grid = _laplace.snapping_scale(_exact(1 / 0.75), _exact(0.9), bounds)[1]
    assert weak_grid == grid
    out = laplace(np.full(N_GOF, 3.3), epsilon=1 / 0.75, sensitivity=0.9, bounds=bounds)
    support, pmf = snapped_support_and_pmf(3.3, scale, grid, bounds)
    assert chi_square_pvalue(to_index(out, support), np.arange(support.size), pmf) < FALSE_ALARM


# ---------------------------------------------------------------- snapping: neighbour audit


# Sensitivity 0.9 keeps the grid of the weakened twin (epsilon / 0.75) equal to the real one.
AUDIT_SENSITIVITY = 0.9


def _snapping_release(
    epsilon: float, bounds: tuple[float, float], support: NDArray[np.float64]
) -> Callable[[int, int], NDArray[np.int64]]:
    """Grid indices of outputs for the true value ``value * 0.9`` (neighbours: value ± 1)."""

    def draw(value: int, n: int) -> NDArray[np.int64]:
        x = np.full(n, value * AUDIT_SENSITIVITY)
        out = laplace(x, epsilon=epsilon, sensitivity=AUDIT_SENSITIVITY, bounds=bounds)
        return to_index(out, support)

    return draw


def _snapping_pmf(
    epsilon: float, bounds: tuple[float, float]
) -> tuple[NDArray[np.float64], Callable[[int], NDArray[np.float64]]]:
    scale, grid = _laplace.snapping_scale(_exact(epsilon), _exact(AUDIT_SENSITIVITY), bounds)

    def pmf(value: int) -> NDArray[np.float64]:
        return snapped_support_and_pmf(value * AUDIT_SENSITIVITY, scale, grid, bounds)[1]

    return snapped_support_and_pmf(0.0, scale, grid, bounds)[0], pmf


SNAP_AUDITS = [
    pytest.param(1.0, (0.0, 30.0), 10, 11, id="interior"),
    pytest.param(1.0, (0.0, 27.0), 29, 30, id="end"),  # 29 * 0.9 = 26.1, 30 * 0.9 = 27
    pytest.param(0.5, (-10.0, 10.0), 0, 1, id="epsilon-0.5"),
]


@pytest.mark.parametrize(("epsilon", "bounds", "value", "neighbour"), SNAP_AUDITS)
def test_snapping_neighbour_audit(
    epsilon: float, bounds: tuple[float, float], value: int, neighbour: int
) -> None:
    support, pmf = _snapping_pmf(epsilon, bounds)
    release = _snapping_release(epsilon, bounds, support)
    worst, tolerance = audit(release, value, neighbour, pmf, epsilon)
    assert worst < tolerance


@pytest.mark.parametrize(("epsilon", "bounds", "value", "neighbour"), SNAP_AUDITS)
def test_snapping_neighbour_audit_catches_25_percent_less_noise(
    epsilon: float, bounds: tuple[float, float], value: int, neighbour: int
) -> None:
    """Validity twin: noise for epsilon / 0.75 must fail the audit at the true epsilon."""
    support, pmf = _snapping_pmf(epsilon, bounds)
    assert np.array_equal(support, _snapping_pmf(epsilon / 0.75, bounds)[0])  # same grid
    release = _snapping_release(epsilon / 0.75, bounds, support)
    worst, tolerance = audit(release, value, neighbour, pmf, epsilon)
    assert worst > tolerance


# ---------------------------------------------------------------- snapping: the uniform


def _uniforms(n: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    exponent, mantissa, _ = _laplace._full_precision_uniform(_random.bit_source(None), n)
    return exponent, mantissa


def test_full_precision_uniform_reaches_tiny_values() -> None:
    """P(U* < 2^-20) = 2^-20: the exponent is geometric far into the tail."""
    n = 1 << 24
    exponent, _ = _uniforms(n)
    below = int(np.count_nonzero(exponent >= 21))  # U* in [2^-e, 2^(1-e)) is below 2^-20
    p = stats.binomtest(below, n, 2.0**-20).pvalue
    assert p > FALSE_ALARM
    assert below > 0


def test_full_precision_exponent_is_geometric() -> None:
    exponent, _ = _uniforms(1 << 22)
    values = exponent.astype(np.int64) - 1
    support = np.arange(60)
    pmf = 0.5 ** (support + 1.0)
    assert chi_square_pvalue(values, support, pmf) > FALSE_ALARM


def lowest_mantissa_bit_pvalue(u: NDArray[np.float64]) -> float:
    """Binomial p-value that the last mantissa bit of the uniforms below 2^-8 is fair."""
    small = u[(u > 0) & (u < 2.0**-8)]
    ones = int(np.count_nonzero(small.view(np.uint64) & np.uint64(1)))
    return float(stats.binomtest(ones, small.size, 0.5).pvalue)


def test_full_precision_uniform_has_random_low_bits_at_small_values() -> None:
    n = 1 << 22
    exponent, mantissa = _uniforms(n)
    u = np.ldexp(mantissa, -exponent.astype(np.int64))
    assert lowest_mantissa_bit_pvalue(u) > FALSE_ALARM


def test_low_bit_test_rejects_a_53_bit_uniform() -> None:
    """Validity twin: numpy's k·2^-53 uniforms have zero low bits below 2^-8."""
    u = np.random.default_rng().random(1 << 22)
    assert lowest_mantissa_bit_pvalue(u) < FALSE_ALARM


class _ScriptedSource:
    """A BitSource that replays given words (then zeros), for deterministic unit tests."""

    private = False

    def __init__(self, words: list[int]) -> None:
        self._words = [np.uint64(w) for w in words]
        self.words_drawn = 0

    def words(self, n: int) -> NDArray[np.uint64]:
        take = [self._words.pop(0) if self._words else np.uint64(0) for _ in range(n)]
        self.words_drawn += n
        return np.array(take, dtype=np.uint64)


def test_full_precision_uniform_has_no_floor() -> None:
    """Exponent bits that are all zero keep the exponent growing: no floor at 2^-1074."""
    # the word: sign 0, mantissa 1.1000... (bit 62), 11 zero exponent bits; then 53
    # zeros; then 52 zeros and a one (the top 53 bits of 1 << 11).
    source = _ScriptedSource([1 << 62, 0, 1 << 11])
    exponent, mantissa, sign = _laplace._full_precision_uniform(source, 1)
    assert exponent[0] == 11 + 53 + 53
    assert mantissa[0] == 1.5
    assert sign[0] == 0
    # the first one in the 11 low bits decides at once: bit 10 set -> e = 1, bit 0 -> 11
    for low, expected in [(1 << 10, 1), (1 << 9 | 1, 2), (1, 11)]:
        exponent, _, sign = _laplace._full_precision_uniform(_ScriptedSource([low | 1 << 63]), 1)
        assert exponent[0] == expected
        assert sign[0] == np.uint64(1 << 63)


class _LowZeroSource:
    """Seeded words with the 11 exponent bits cleared in every third (forcing more words)."""

    private = False

    def __init__(self, seed: int) -> None:
        self._generator = np.random.default_rng(seed)
        self.words_drawn = 0

    def words(self, n: int) -> NDArray[np.uint64]:
        self.words_drawn += n
        out = self._generator.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True)
        out[::3] &= ~np.uint64(2047)
        out[1::5] = 0  # continuation words that are all zero: a third word and more
        return out


def _reference_snap_noise(n: int, snap: Any, source: Any) -> NDArray[np.float64]:
    """``n`` values ``±λ·(e·ln 2 − ln m)`` from full-precision uniforms: the plain form of
    what ``_laplace._SnapKernel`` computes from the same words."""
    exponent, m, sign = _laplace._full_precision_uniform(source, n)
    noise = exponent * _laplace._LN2  # -ln(U*) = e·ln 2 − ln m
    noise -= np.log(m)
    noise *= snap.scale
    bits = noise.view(np.uint64)
    np.bitwise_xor(bits, sign, out=bits)  # a fair sign, exactly
    return np.asarray(noise)


def _reference_snap_round(z: NDArray[np.float64], snap: Any, lo: float, hi: float) -> None:
    """Round ``z`` to the nearest multiple of Λ (ties to even) and clamp, in place."""
    grid = snap.grid
    np.clip(z, lo - grid, hi + grid, out=z)  # keeps z / Λ small: the rounding is exact
    z *= 1.0 / grid
    np.rint(z, out=z)
    z *= grid
    np.clip(z, lo, hi, out=z)
    z += 0.0  # every zero released as +0.0: its sign would tell which side it came from


@pytest.mark.parametrize(
    ("epsilon", "bounds"), [(1.0, (-1000.0, 1000.0)), (0.1, (0.0, 2.0)), (3.0, (-5.0, 7.5))]
)
def test_snapping_kernel_is_the_reference_computation_bit_for_bit(
    epsilon: float, bounds: tuple[float, float]
) -> None:
    """The fused kernel performs the reference float64 operations exactly."""
    snap = _laplace._snapping(_exact(epsilon), Fraction(1), *bounds)
    n = 5000
    kernel = _laplace._SnapKernel(snap, *bounds, n)
    x = np.random.default_rng(0).uniform(-2000.0, 2000.0, n)
    x[:10], x[10:20] = np.inf, -np.inf
    for seed in range(4):
        for make in (_random.bit_source, _LowZeroSource):
            reference = _reference_snap_noise(n, snap, make(seed))
            noise = kernel.noise(n, make(seed))
            assert np.array_equal(reference.view(np.uint64), noise.view(np.uint64))
            rounded = np.clip(x, *bounds) + reference
            _reference_snap_round(rounded, snap, *bounds)
            fused = np.empty(n)
            kernel.finish(x, noise, fused)
            assert np.array_equal(rounded.view(np.uint64), fused.view(np.uint64))
    # Inputs inside the bounds (including both ends) and noise far beyond them
    # (the kernel skips the clamp that keeps the rounding exact): still the same bits.
    inside = np.random.default_rng(1).uniform(*bounds, n)
    inside[0], inside[1] = bounds
    far = np.array([2.0**52 + 1, 2.0**52 + 1.5, 2.0**53 + 3, 2.0**60, 2.0**600]) * snap.grid
    far = np.concatenate([far, [1e300, np.finfo(np.float64).max / 2]])
    edges = np.array([bounds[1] - bounds[0] + k * snap.grid / 4 for k in range(-8, 9)])
    magnitudes = np.concatenate([far, edges, np.abs(_reference_snap_noise(n, snap, make(0)))])
    for sign in (1.0, -1.0):
        noise = (sign * magnitudes)[:n]
        rounded = np.clip(inside, *bounds) + noise
        _reference_snap_round(rounded, snap, *bounds)
        fused = np.empty(n)
        kernel.finish(inside, noise, fused)
        assert np.array_equal(rounded.view(np.uint64), fused.view(np.uint64))


def test_bit_for_bit_check_catches_a_reordered_product() -> None:
    """Validity twin: λ·(e·ln 2) − λ·ln m, mathematically equal, differs in some last bit."""
    snap = _laplace._snapping(Fraction(1), Fraction(1), -1000.0, 1000.0)
    n = 5000
    exponent, m, sign = _laplace._full_precision_uniform(_random.bit_source(1), n)
    reordered = exponent * _laplace._LN2 * snap.scale - np.log(m) * snap.scale
    reordered.view(np.uint64)[:] ^= sign
    noise = _laplace._SnapKernel(snap, -1000.0, 1000.0, n).noise(n, _random.bit_source(1))
    assert np.allclose(reordered, noise, rtol=0, atol=1e-12)
    assert not np.array_equal(reordered.view(np.uint64), noise.view(np.uint64))


def test_numpy_log_error_is_below_one_ulp() -> None:
    """The snapping analysis assumes numpy's log on [1, 2) errs by at most 2 ulp."""
    if np.finfo(np.longdouble).nmant < 60:
        pytest.skip("needs an extended-precision long double as reference")
    rng = np.random.default_rng()
    bits = rng.integers(0, 2**52, size=1_000_000, dtype=np.uint64)
    bits[:4] = [0, 1, 2**52 - 1, 2**51]
    m = (bits | np.uint64(0x3FF0000000000000)).view(np.float64)
    computed = np.log(m)
    reference = np.log(m.astype(np.longdouble))
    ulps = np.abs(computed.astype(np.longdouble) - reference) / np.spacing(
        np.maximum(computed, 2.0**-60)
    ).astype(np.longdouble)
    assert float(ulps.max()) < 1.0


# ---------------------------------------------------------------- snapping: scale and accuracy


def test_snapping_scale_meets_mironovs_bound_and_conditions() -> None:
    for epsilon, sensitivity, bounds in [
        (Fraction(1), Fraction(1), (0.0, 10.0)),
        (Fraction(1, 10), Fraction(3), (-1e6, 1e6)),
        (Fraction(5), Fraction(1, 100), (0.0, 1.0)),
    ]:
        scale, grid = _laplace.snapping_scale(epsilon, sensitivity, bounds)
        big_b = max(abs(Fraction(bounds[0])), abs(Fraction(bounds[1])), 2 * sensitivity / epsilon)
        lam = Fraction(scale)
        assert (sensitivity + Fraction(1, 2**49) * big_b) / lam <= epsilon  # Theorem 1
        assert (sensitivity + Fraction(1, 2**44) * big_b) / lam <= epsilon
        assert lam < big_b < 2**46 * lam
        assert grid >= scale > grid / 2
        assert math.frexp(grid)[0] == 0.5  # a power of two


@pytest.mark.parametrize(
    ("epsilon", "sensitivity", "bounds", "x"),
    [
        (1.0, 0.99, (0.0, 100.0), 50.0),  # Λ ≈ λ
        (1.0, 1.0, (0.0, 100.0), 0.0),  # Λ ≈ 2λ, at an end
        (0.2, 1.0, (-5.0, 5.0), 0.0),  # noise wider than the domain
    ],
)
def test_snapping_accuracy_covers(
    epsilon: float, sensitivity: float, bounds: tuple[float, float], x: float
) -> None:
    alpha = 0.05
    a = laplace_accuracy(epsilon=epsilon, sensitivity=sensitivity, bounds=bounds, alpha=alpha)
    out = laplace(np.full(N_COVERAGE, x), epsilon=epsilon, sensitivity=sensitivity, bounds=bounds)
    misses = int(np.count_nonzero(np.abs(out - x) > a))
    assert stats.binom.sf(misses - 1, N_COVERAGE, alpha) > FALSE_ALARM


def test_snapping_accuracy_coverage_test_catches_a_short_bar() -> None:
    """Validity twin: 75% of the half-width misses far more than alpha of the time."""
    alpha = 0.05
    a = laplace_accuracy(epsilon=1.0, sensitivity=0.99, bounds=(0.0, 100.0), alpha=alpha)
    out = laplace(np.full(N_COVERAGE, 50.0), epsilon=1.0, sensitivity=0.99, bounds=(0.0, 100.0))
    misses = int(np.count_nonzero(np.abs(out - 50.0) > 0.75 * a))
    assert stats.binom.sf(misses - 1, N_COVERAGE, alpha) < FALSE_ALARM


def test_snapping_accuracy_against_the_closed_form() -> None:
    for alpha in (0.5, 0.05, 1e-6):
        bounds = (-1e6, 1e6)
        scale, grid = _laplace.snapping_scale(Fraction(1, 2), Fraction(1), bounds)
        a = laplace_accuracy(epsilon=0.5, sensitivity=1.0, bounds=bounds, alpha=alpha)
        closed_form = scale * math.log(1 / alpha)  # Laplace without snapping
        assert closed_form < a <= closed_form + grid / 2 + 1e-6
    # The bar never exceeds the domain.
    assert laplace_accuracy(epsilon=0.01, sensitivity=1.0, bounds=(0.0, 1.0)) == 1.0


# ---------------------------------------------------------------- bounded Laplace: helpers


def realized_log_weights(plan: Any) -> NDArray[np.float64]:
    """ln w(n) for n = −M..M of the sampler the plan uses, from its coins' exact probabilities.

    Computed here independently of dpframe._laplace's bounds on these weights.
    """
    steps = plan.steps
    n = np.arange(-steps, steps + 1)
    magnitude = np.abs(n)

    def log(p: Fraction) -> float:
        return math.log(p.numerator) - math.log(p.denominator)

    if plan.geometric is None:
        logw = np.zeros(n.size)
        for table in plan.accept:
            size = table.prefix.size
            logs = np.array([log(table.probability(k)) for k in range(size)])
            logw += logs[(magnitude >> table.shift) & (size - 1)]
        return logw
    geo = plan.geometric
    c = np.maximum(magnitude - 1, 0)
    k = len(geo.head)
    w = geo.overflow.probability
    logw = (c >> k) * log(w) + log(1 - w) + log((1 - geo.zero.probability) / 2)
    logw = logw.astype(np.float64)
    for i, coin in enumerate(geo.head):
        bit = (c >> i) & 1
        logw += np.where(bit == 1, log(coin.probability), log(1 - coin.probability))
    return np.where(n == 0, log(geo.zero.probability), logw)


def ideal_log_weights(steps: int, unit: float) -> NDArray[np.float64]:
    return -unit * np.abs(np.arange(-steps, steps + 1)).astype(np.float64)


class Conditional:
    """Output distributions P(j | v) = w(j − v) / Σ_j' w(j' − v) on indices 0..M."""

    def __init__(self, logw: NDArray[np.float64]) -> None:
        self.steps = (logw.size - 1) // 2
        self.logw = logw - logw.max()
        cumulative = np.concatenate([[0.0], np.cumsum(np.exp(self.logw))])
        self._cumulative = cumulative

    def log_pmf(self, v: int) -> NDArray[np.float64]:
        m = self.steps
        window = slice(m - v, 2 * m - v + 1)  # n = j − v for j = 0..M
        total = self._cumulative[2 * m - v + 1] - self._cumulative[m - v]
        return self.logw[window] - math.log(total)


def privacy_loss(
    cond: Conditional, pairs: list[tuple[int, int]], epsilon: float
) -> tuple[float, float]:
    """Largest log-ratio max_j ln P(j|v)/P(j|v') and largest hockey-stick divergence at e^ε."""
    worst_ratio, worst_delta = -math.inf, 0.0
    for v, w in pairs:
        a, b = cond.log_pmf(v), cond.log_pmf(w)
        worst_ratio = max(worst_ratio, float((a - b).max()))
        excess = np.exp(a) - math.exp(epsilon) * np.exp(b)
        worst_delta = max(worst_delta, float(excess[excess > 0].sum()))
    return worst_ratio, worst_delta


def neighbour_pairs(
    plan: Any, sensitivity: float, bounds: tuple[float, float]
) -> list[tuple[int, int]]:
    """Index pairs of neighbouring inputs: a grid of true values (ends included, and beyond)
    with both neighbours x ± sensitivity, plus the index pairs at the largest distance s."""
    lo, hi = bounds
    xs = np.concatenate(
        [
            np.linspace(lo - sensitivity, hi + sensitivity, 41),
            [lo, hi, lo + sensitivity, hi - sensitivity],
        ]
    )
    pairs: set[tuple[int, int]] = set()
    for x in xs:
        for neighbour in (x - sensitivity, x + sensitivity):
            index = _laplace._grid_index(np.clip(np.array([x, neighbour]), lo, hi), plan)
            pairs.add((int(index[0]), int(index[1])))
    m, s = plan.steps, plan.reach
    for v in {0, 1, s - 1, s, m // 4, m // 2, m - s, m - 1, m}:
        for w in (v - s, v + s, v - 1, v + 1):
            if 0 <= v <= m and 0 <= w <= m:
                pairs.add((v, w))
    return sorted(pairs)


BOUNDED_CASES = [
    # epsilon, delta, sensitivity, bounds, expected sampler
    pytest.param(2.0, 0.0, 1.0, (0.0, 2.0), "geometric", id="geometric-cap"),
    pytest.param(8.0, 0.0, 1.0, (0.0, 2.0), "geometric", id="geometric-repeat"),
    pytest.param(0.5, 0.0, 1.0, (0.0, 2.0), "uniform", id="uniform"),
    pytest.param(2.0, 1e-3, 1.0, (-1.0, 1.0), "geometric", id="delta-geometric"),
    pytest.param(0.3, 1e-3, 1.0, (-1.25, 1.25), "uniform", id="delta-uniform"),
    pytest.param(2.0, 0.0, 1.0, (0.0, 1.2), "geometric", id="sensitivity-above-half-width"),
]


def _plan(epsilon: float, delta: float, sensitivity: float, bounds: tuple[float, float]) -> Any:
    return _laplace._bounded_plan(_exact(epsilon), _exact(delta), _exact(sensitivity), *bounds)


# ---------------------------------------------------------------- bounded Laplace: privacy


@pytest.mark.parametrize(("epsilon", "delta", "sensitivity", "bounds", "sampler"), BOUNDED_CASES)
def test_bounded_privacy_loss_across_the_domain(
    epsilon: float, delta: float, sensitivity: float, bounds: tuple[float, float], sampler: str
) -> None:
    """Exact (float64 on exact coin probabilities) output distributions of the realized sampler."""
    plan = _plan(epsilon, delta, sensitivity, bounds)
    assert plan.sampler == sampler
    if sampler == "geometric":
        assert plan.geometric.on_overflow == ("repeat" if epsilon == 8.0 else "cap")
    cond = Conditional(realized_log_weights(plan))
    ratio, excess = privacy_loss(cond, neighbour_pairs(plan, sensitivity, bounds), epsilon)
    if delta == 0:
        assert ratio <= epsilon + 1e-10
    else:
        assert excess <= delta + 1e-12
        assert ratio <= epsilon - math.log1p(-delta) + 1e-10


@pytest.mark.parametrize(("epsilon", "delta", "sensitivity", "bounds", "sampler"), BOUNDED_CASES)
def test_bounded_privacy_check_fails_for_the_uninflated_scale(
    epsilon: float, delta: float, sensitivity: float, bounds: tuple[float, float], sampler: str
) -> None:
    """Validity twin: the plain Laplace scale b = sensitivity/epsilon breaks the check."""
    plan = _plan(epsilon, delta, sensitivity, bounds)
    cond = Conditional(ideal_log_weights(plan.steps, plan.grid * epsilon / sensitivity))
    ratio, excess = privacy_loss(cond, neighbour_pairs(plan, sensitivity, bounds), epsilon)
    if delta == 0:
        assert ratio > epsilon + 1e-3
    else:
        assert excess > delta


def holohan_scale(epsilon: float, delta: float, sensitivity: float, width: float) -> float:
    """The continuous fixed point b = Δ / (ε − ln ΔC(b) − ln(1 − δ)) of Holohan et al."""

    def delta_c(b: float) -> float:
        return (2 - math.exp(-sensitivity / b) - math.exp(-(width - sensitivity) / b)) / (
            -math.expm1(-width / b)
        )

    def gap(b: float) -> float:
        return sensitivity / b + math.log(delta_c(b)) - (epsilon - math.log1p(-delta))

    lower = sensitivity / (epsilon - math.log1p(-delta))
    return float(optimize.brentq(gap, lower, 100 * lower, xtol=1e-14, rtol=1e-14))


@pytest.mark.parametrize(
    ("epsilon", "delta", "sensitivity", "bounds"),
    [
        (1.0, 0.0, 1.0, (0.0, 10.0)),
        (0.5, 0.0, 2.0, (-5.0, 5.0)),
        (1.0, 1e-3, 1.0, (0.0, 4.0)),
        (2.0, 0.0, 1.0, (0.0, 1.2)),  # sensitivity above half the width
    ],
)
def test_bounded_scale_matches_the_continuous_fixed_point(
    epsilon: float, delta: float, sensitivity: float, bounds: tuple[float, float]
) -> None:
    b = _laplace.bounded_laplace_scale(_exact(epsilon), _exact(delta), _exact(sensitivity), bounds)
    expected = holohan_scale(epsilon, delta, sensitivity, bounds[1] - bounds[0])
    assert b > sensitivity / epsilon  # inflated
    assert abs(b / expected - 1) < 2e-6


def test_coin_rounding_margin_is_negligible() -> None:
    for case in BOUNDED_CASES:
        epsilon, delta, sensitivity, bounds, _ = case.values
        plan = _plan(epsilon, delta, sensitivity, bounds)
        assert plan.margin < Decimal(2) ** -30
        assert plan.far < Decimal(2) ** -90
    # A domain 10^12 noise scales wide: the far weights are lumped, the margin stays small.
    wide = _plan(1.0, 0.0, 1.0, (0.0, 1e12))
    assert wide.sampler == "geometric"
    assert wide.margin < Decimal(2) ** -30


# ---------------------------------------------------------------- bounded Laplace: distribution


def binned_pvalue(
    indices: NDArray[np.int64], log_pmf: NDArray[np.float64], bins: int = 200
) -> float:
    """Chi-square on ``bins`` bins of (roughly) equal expected mass."""
    pmf = np.exp(log_pmf)
    pmf /= pmf.sum()
    cdf = np.cumsum(pmf)
    edges = np.unique(np.searchsorted(cdf, np.linspace(0, 1, bins + 1)[1:-1]))
    bin_of = np.searchsorted(edges, indices, side="right")
    mass = np.add.reduceat(pmf, np.concatenate([[0], edges]))
    return chi_square_pvalue(bin_of, np.arange(mass.size), mass)


@pytest.mark.parametrize(("epsilon", "delta", "sensitivity", "bounds", "sampler"), BOUNDED_CASES)
@pytest.mark.parametrize("where", ["low end", "inside", "high end"])
def test_bounded_matches_the_exact_conditional_distribution(
    epsilon: float,
    delta: float,
    sensitivity: float,
    bounds: tuple[float, float],
    sampler: str,
    where: str,
) -> None:
    lo, hi = bounds
    x = {"low end": lo - 1.0, "inside": lo + 0.3 * (hi - lo), "high end": hi}[where]
    plan = _plan(epsilon, delta, sensitivity, bounds)
    out = bounded_laplace(
        np.full(N_GOF, x), epsilon=epsilon, delta=delta, sensitivity=sensitivity, bounds=bounds
    )
    assert np.all((out >= lo) & (out <= hi))
    indices = np.round(out / plan.grid).astype(np.int64) - plan.first
    assert np.array_equal((indices + plan.first) * plan.grid, out)  # on the grid
    v = int(_laplace._grid_index(np.array([min(max(x, lo), hi)]), plan)[0])
    ideal = Conditional(ideal_log_weights(plan.steps, float(plan.unit))).log_pmf(v)
    assert binned_pvalue(indices, ideal) > FALSE_ALARM


# A zero coin of probability about 1/3: the zero part of a redraw is visible.
_THIRD = Coin(6148914691236517206, 1)


def _zero_share_pvalue(zeros: int, n: int) -> float:
    """Two-sided binomial p-value that ``zeros`` of ``n`` redraws end at 0 with the exact
    probability 2z / (1 + z) of redrawing the zero-or-sign until it is not the bad sign."""
    z = _THIRD.probability
    p = float(2 * z / (1 + z))
    return float(stats.binomtest(zeros, n, p).pvalue)


def test_redraws_end_at_zero_with_the_exact_probability() -> None:
    n = 400_000
    landed = _laplace._ends_at_zero(_THIRD, n, _random.bit_source(None))
    assert np.all(np.diff(landed) > 0)  # distinct elements, in order
    assert _zero_share_pvalue(landed.size, n) > FALSE_ALARM


def test_zero_share_test_catches_a_single_coin() -> None:
    """Validity twin: one zero coin per element (flipping the bad sign instead of drawing
    again) leaves P(0) at z, not 2z / (1 + z)."""
    n = 400_000
    landed = np.flatnonzero(lazy_bernoulli(_random.bit_source(None), _THIRD, n))
    assert _zero_share_pvalue(landed.size, n) < FALSE_ALARM


def _halving_reflection(plan: Any, batch: int, source: Any) -> NDArray[np.int64]:
    """A broken end-of-domain stream: a negative N is reflected with half its magnitude."""
    noise = _geometric.geometric_noise(plan.geometric, batch, source, False)
    j = np.where(noise < 0, -noise // 2, noise)
    return j[j <= plan.steps]


def test_end_goodness_of_fit_catches_a_wrong_sign_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    """Validity twin: the end-of-domain test sees a sign fix that changes the magnitudes."""
    epsilon, delta, sensitivity, bounds, _ = BOUNDED_CASES[0].values
    plan = _plan(epsilon, delta, sensitivity, bounds)
    monkeypatch.setattr(_laplace, "_accepted_from_zero", _halving_reflection)
    out = bounded_laplace(
        np.full(N_GOF, bounds[0]), epsilon=epsilon, sensitivity=sensitivity, bounds=bounds
    )
    indices = np.round(out / plan.grid).astype(np.int64) - plan.first
    ideal = Conditional(ideal_log_weights(plan.steps, float(plan.unit))).log_pmf(0)
    assert binned_pvalue(indices, ideal) < FALSE_ALARM


@pytest.mark.parametrize(
    ("epsilon", "sampler", "streamed"),
    [(2.0, "geometric", True), (0.5, "uniform", True), (0.1, "uniform", False)],
)
def test_bounded_mixes_ends_and_inside_in_place(
    epsilon: float, sampler: str, streamed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inputs at either end share one stream of proposals (unless the uniform sampler
    rarely rejects there) and the others run their own rejection loop: on an array with
    interleaved blocks and whole blocks at each end, every position gets its own law,
    and exactly the inputs at an end of a streamed plan go through the stream."""
    delta, sensitivity, bounds = 0.0, 1.0, (0.0, 2.0)
    lo, hi = bounds
    plan = _plan(epsilon, delta, sensitivity, bounds)
    assert plan.sampler == sampler
    share = 1 - _laplace._STREAM_MIN_REJECTION
    assert (sampler == "geometric" or _laplace._end_acceptance(plan) < share) == streamed
    inputs = np.array([lo, hi, lo + 0.3 * (hi - lo), hi + 5.0])
    values = np.concatenate(
        [np.tile(inputs, N_GOF // 8), np.full(N_GOF // 4, lo), np.full(N_GOF // 4, hi + 5.0)]
    )
    streamed_inputs: list[int] = []
    from_the_lower_end = _laplace._from_the_lower_end

    def spy(plan: Any, n: int, source: Any) -> NDArray[np.int64]:
        streamed_inputs.append(n)
        return from_the_lower_end(plan, n, source)

    monkeypatch.setattr(_laplace, "_from_the_lower_end", spy)
    out = bounded_laplace(
        values, epsilon=epsilon, delta=delta, sensitivity=sensitivity, bounds=bounds
    )
    at_an_end = int(np.count_nonzero(values != inputs[2]))
    assert sum(streamed_inputs) == (at_an_end if streamed else 0)
    indices = np.round(out / plan.grid).astype(np.int64) - plan.first
    weights = Conditional(ideal_log_weights(plan.steps, float(plan.unit)))
    for x in inputs:
        v = int(_laplace._grid_index(np.array([min(max(x, lo), hi)]), plan)[0])
        assert binned_pvalue(indices[values == x], weights.log_pmf(v)) > FALSE_ALARM


def test_bounded_goodness_of_fit_rejects_the_uninflated_scale() -> None:
    """Validity twin: samples drawn for epsilon / 0.75 fail against the plan's distribution."""
    epsilon, sensitivity, bounds = 2.0, 1.0, (0.0, 2.0)
    plan = _plan(epsilon, 0.0, sensitivity, bounds)
    weak = _plan(epsilon / 0.75, 0.0, sensitivity, bounds)
    out = bounded_laplace(
        np.full(N_GOF, 0.6), epsilon=epsilon / 0.75, sensitivity=1.0, bounds=bounds
    )
    indices = np.round(out / weak.grid).astype(np.int64) - plan.first
    v = int(_laplace._grid_index(np.array([0.6]), plan)[0])
    ideal = Conditional(ideal_log_weights(plan.steps, float(plan.unit))).log_pmf(v)
    assert binned_pvalue(indices, ideal) < FALSE_ALARM


def test_geometric_continuation_is_exactly_geometric() -> None:
    """The engine's continuation past the head, capped: a 2-digit head overflows often."""
    unit = Fraction(1, 2)
    base = _geometric.geometric_plan(unit, 2001, False)
    with precise():
        target = unit * (1 - _geometric.SLACK)
        overflow = make_coin(exp_decimal(-target * 4), 40)
    plan = dataclasses.replace(base, head=base.head[:2], overflow=overflow, on_overflow="repeat")
    noise = _geometric.geometric_noise(plan, N_GOF, _random.bit_source(None), False)
    assert np.abs(noise).max() <= 2001
    support = np.arange(-80, 81)
    pmf = two_sided_geometric_pmf(support, float(target))
    assert chi_square_pvalue(noise, support, pmf) > FALSE_ALARM
    assert np.count_nonzero(np.abs(noise) > 5) > 0.05 * N_GOF  # many continuations


def test_grid_index_is_exact_rounding() -> None:
    plan = _plan(1.0, 0.0, 1.0, (-3.0, 7.0))
    x = np.random.default_rng().uniform(-3.0, 7.0, 10_000)
    x[:4] = [-3.0, 7.0, (plan.first + 5.5) * plan.grid, (plan.first + 6.5) * plan.grid]
    got = _laplace._grid_index(x, plan)
    for xi, gi in zip(x.tolist(), got.tolist(), strict=True):
        q = Fraction(xi) / Fraction(plan.grid)
        expected = math.floor(q + Fraction(1, 2)) - plan.first
        assert gi == min(max(expected, 0), plan.steps)


# ---------------------------------------------------------------- bounded Laplace: accuracy


ACCURACY_CASES = [
    pytest.param(1.0, 0.0, 1.0, (0.0, 100.0), id="wide"),
    pytest.param(0.5, 0.0, 1.0, (0.0, 2.0), id="narrow"),
    pytest.param(1.0, 1e-3, 1.0, (-1.0, 1.0), id="delta"),
]


@pytest.mark.parametrize(("epsilon", "delta", "sensitivity", "bounds"), ACCURACY_CASES)
@pytest.mark.parametrize("where", [0.0, 0.5, 1.0])
def test_bounded_accuracy_covers(
    epsilon: float, delta: float, sensitivity: float, bounds: tuple[float, float], where: float
) -> None:
    alpha = 0.05
    lo, hi = bounds
    x = lo + where * (hi - lo)
    a = bounded_laplace_accuracy(
        epsilon=epsilon, delta=delta, sensitivity=sensitivity, bounds=bounds, alpha=alpha
    )
    out = bounded_laplace(
        np.full(N_COVERAGE, x), epsilon=epsilon, delta=delta, sensitivity=sensitivity, bounds=bounds
    )
    misses = int(np.count_nonzero(np.abs(out - x) > a))
    assert stats.binom.sf(misses - 1, N_COVERAGE, alpha) > FALSE_ALARM


def test_bounded_accuracy_coverage_test_catches_a_short_bar() -> None:
    """Validity twin: 75% of the worst-case half-width misses too often at an end."""
    alpha = 0.05
    a = bounded_laplace_accuracy(epsilon=1.0, sensitivity=1.0, bounds=(0.0, 100.0), alpha=alpha)
    out = bounded_laplace(np.zeros(N_COVERAGE), epsilon=1.0, sensitivity=1.0, bounds=(0.0, 100.0))
    misses = int(np.count_nonzero(np.abs(out) > 0.75 * a))
    assert stats.binom.sf(misses - 1, N_COVERAGE, alpha) < FALSE_ALARM


def test_bounded_accuracy_against_the_closed_form() -> None:
    """Wide domain: the worst input is the middle, where the tail is about 2γ^(m+1)/(1+γ)."""
    for alpha in (0.2, 0.05, 1e-4):
        plan = _plan(1.0, 0.0, 1.0, (0.0, 1000.0))
        a = bounded_laplace_accuracy(
            epsilon=1.0, sensitivity=1.0, bounds=(0.0, 1000.0), alpha=alpha
        )
        b = plan.scale
        closed_form = b * math.log(2 / ((1 + math.exp(-plan.grid / b)) * alpha))
        assert abs(a - closed_form) <= 3 * plan.grid
    # Noise far wider than the domain: the bar is capped at the width.
    assert bounded_laplace_accuracy(epsilon=0.01, sensitivity=1.0, bounds=(0.0, 1.0)) <= 1.0


# ---------------------------------------------------------------- randomness and shapes


MECHANISMS: list[tuple[str, Callable[..., NDArray[np.float64]]]] = [
    (
        "laplace",
        lambda v, **kw: laplace(v, epsilon=1.0, sensitivity=1.0, bounds=(-50.0, 50.0), **kw),
    ),
    (
        "bounded",
        lambda v, **kw: bounded_laplace(
            v, epsilon=1.0, sensitivity=1.0, bounds=(-50.0, 50.0), **kw
        ),
    ),
]


@pytest.mark.parametrize(("name", "mechanism"), MECHANISMS)
def test_default_randomness_differs_between_calls_and_ignores_numpy_seed(
    name: str, mechanism: Callable[..., NDArray[np.float64]]
) -> None:
    values = np.zeros(1000)
    np.random.seed(0)  # noqa: NPY002 - the legacy global seed must have no effect
    first = mechanism(values)
    np.random.seed(0)  # noqa: NPY002 - the legacy global seed must have no effect
    second = mechanism(values)
    assert not np.array_equal(first, second)


@pytest.mark.parametrize(("name", "mechanism"), MECHANISMS)
def test_caller_rng_is_reproducible(
    name: str, mechanism: Callable[..., NDArray[np.float64]]
) -> None:
    values = np.linspace(-60, 60, 100)
    a = mechanism(values, rng=np.random.default_rng(7))
    b = mechanism(values, rng=7)
    assert np.array_equal(a, b)


@pytest.mark.parametrize(("name", "mechanism"), MECHANISMS)
def test_shapes(name: str, mechanism: Callable[..., NDArray[np.float64]]) -> None:
    out = mechanism(np.arange(12.0).reshape(3, 4))
    assert out.shape == (3, 4)
    assert out.dtype == np.float64
    assert mechanism(5.0).shape == ()
    assert mechanism(np.array([])).shape == (0,)
    assert mechanism([7, 8]).shape == (2,)  # integers are read as reals
    extremes = mechanism(np.array([-np.inf, np.inf]))
    assert np.all((extremes >= -50) & (extremes <= 50))


# ---------------------------------------------------------------- bad input


GOOD: dict[str, dict[str, Any]] = {
    "laplace": {"epsilon": 1.0, "sensitivity": 1.0, "bounds": (0.0, 10.0)},
    "bounded": {"epsilon": 1.0, "sensitivity": 1.0, "bounds": (0.0, 10.0)},
    "laplace_accuracy": {"epsilon": 1.0, "sensitivity": 1.0, "bounds": (0.0, 10.0)},
    "bounded_accuracy": {"epsilon": 1.0, "sensitivity": 1.0, "bounds": (0.0, 10.0)},
}
FUNCTIONS: dict[str, Callable[..., Any]] = {
    "laplace": lambda **kw: laplace([1.0, 2.0], **kw),
    "bounded": lambda **kw: bounded_laplace([1.0, 2.0], **kw),
    "laplace_accuracy": laplace_accuracy,
    "bounded_accuracy": bounded_laplace_accuracy,
}
NAN, INF = float("nan"), float("inf")
VALUE, TYPE = InvalidParameterError, InvalidParameterTypeError
BAD_POSITIVE = [
    (0, VALUE),
    (0.0, VALUE),
    (-1, VALUE),
    (-0.5, VALUE),
    (NAN, VALUE),
    (INF, VALUE),
    (-INF, VALUE),
    ("1", TYPE),
    (None, TYPE),
    (True, TYPE),
    ([1.0], TYPE),
]
BAD_DELTA = [
    (-0.1, VALUE),
    (1, VALUE),
    (1.0, VALUE),
    (1.5, VALUE),
    (NAN, VALUE),
    (INF, VALUE),
    ("0.1", TYPE),
    (None, TYPE),
    (True, TYPE),
]
BAD_BOUNDS = [
    ((5.0, 1.0), VALUE),
    ((1.0, 1.0), VALUE),
    ((0.0, NAN), VALUE),
    ((0.0, INF), VALUE),
    ((-INF, 0.0), VALUE),
    (("0", 3.0), TYPE),
    ((1.0,), TYPE),
    (5.0, TYPE),
    ((0.0, 1.0, 2.0), TYPE),
    ((True, 3.0), TYPE),
    ("ab", TYPE),
    (None, TYPE),
]
BAD_ALPHA = [
    (0, VALUE),
    (1, VALUE),
    (-0.1, VALUE),
    (1.5, VALUE),
    (NAN, VALUE),
    ("0.05", TYPE),
    (None, TYPE),
    (True, TYPE),
]


def _refused(
    counter: WordCounter,
    call: Callable[..., Any],
    match: str,
    error: type[Exception],
    **kwargs: Any,
) -> None:
    counter.words = 0
    with pytest.raises(error, match=match):
        call(**kwargs)
    assert counter.words == 0  # a refused call draws no randomness


@pytest.mark.parametrize("name", list(FUNCTIONS))
@pytest.mark.parametrize("parameter", ["epsilon", "sensitivity"])
@pytest.mark.parametrize(("bad", "error"), BAD_POSITIVE)
def test_bad_epsilon_and_sensitivity_are_refused(
    word_counter: WordCounter, name: str, parameter: str, bad: Any, error: type[Exception]
) -> None:
    kwargs = {**GOOD[name], parameter: bad}
    _refused(word_counter, FUNCTIONS[name], parameter, error, **kwargs)


@pytest.mark.parametrize("name", ["bounded", "bounded_accuracy"])
@pytest.mark.parametrize(("bad", "error"), BAD_DELTA)
def test_bad_delta_is_refused(
    word_counter: WordCounter, name: str, bad: Any, error: type[Exception]
) -> None:
    _refused(word_counter, FUNCTIONS[name], "delta", error, **{**GOOD[name], "delta": bad})


@pytest.mark.parametrize("name", list(FUNCTIONS))
@pytest.mark.parametrize(("bad", "error"), BAD_BOUNDS)
def test_bad_bounds_are_refused(
    word_counter: WordCounter, name: str, bad: Any, error: type[Exception]
) -> None:
    _refused(word_counter, FUNCTIONS[name], "bounds", error, **{**GOOD[name], "bounds": bad})


@pytest.mark.parametrize("name", ["laplace_accuracy", "bounded_accuracy"])
@pytest.mark.parametrize(("bad", "error"), BAD_ALPHA)
def test_bad_alpha_is_refused(
    word_counter: WordCounter, name: str, bad: Any, error: type[Exception]
) -> None:
    _refused(word_counter, FUNCTIONS[name], "alpha", error, **{**GOOD[name], "alpha": bad})


@pytest.mark.parametrize("mechanism", [laplace, bounded_laplace])
@pytest.mark.parametrize(
    ("bad", "error"),
    [
        ([1.0, NAN], InvalidParameterError),
        (["a"], InvalidParameterTypeError),
        ([True, False], InvalidParameterTypeError),
        (np.array([1.0], dtype=object), InvalidParameterTypeError),
    ],
)
def test_bad_values_are_refused(
    word_counter: WordCounter, mechanism: Callable[..., Any], bad: Any, error: type[Exception]
) -> None:
    _refused(
        word_counter,
        lambda: mechanism(bad, epsilon=1.0, sensitivity=1.0, bounds=(0.0, 1.0)),
        "values",
        error,
    )


@pytest.mark.parametrize("mechanism", [laplace, bounded_laplace])
@pytest.mark.parametrize("bad", ["seed", 1.5, True, object()])
def test_bad_rng_is_refused(mechanism: Callable[..., Any], bad: Any) -> None:
    with pytest.raises(InvalidParameterTypeError, match="rng"):
        mechanism([1.0], epsilon=1.0, sensitivity=1.0, bounds=(0.0, 1.0), rng=bad)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        # λ itself beyond the float range
        (
            {"epsilon": 1e-300, "sensitivity": 1e10, "bounds": (0.0, 1.0)},
            NoiseOverflowError,
            "epsilon",
        ),
        # seed 004: noise reaches the largest double with probability >= 2**-64
        (
            {"epsilon": 1.0, "sensitivity": 5e306, "bounds": (0.0, 1.0)},
            NoiseOverflowError,
            "epsilon",
        ),
        # outside Mironov's B < 2**46 λ
        (
            {"epsilon": 10.0, "sensitivity": 1.0, "bounds": (1e15, 1e15 + 10)},
            InvalidParameterError,
            "bounds",
        ),
        # the floating-point term cannot stay below epsilon (λ < B fails)
        (
            {"epsilon": 1e-14, "sensitivity": 1.0, "bounds": (0.0, 1.0)},
            InvalidParameterError,
            "epsilon",
        ),
        (
            {"epsilon": 1.0, "sensitivity": 1e-300, "bounds": (0.0, 1e-299)},
            InvalidParameterError,
            "sensitivity",
        ),
    ],
)
def test_snapping_refuses_unsafe_parameters(
    word_counter: WordCounter, kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    _refused(word_counter, lambda: laplace([0.5], **kwargs), match, error)
    _refused(word_counter, lambda: laplace_accuracy(**kwargs), match, error)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (
            {"epsilon": 1.0, "sensitivity": 1.0, "bounds": (1e15, 1e15 + 1e-3)},
            InvalidParameterError,
            "bounds",
        ),
        (
            {"epsilon": 1e-300, "sensitivity": 1e300, "bounds": (0.0, 1.0)},
            NoiseOverflowError,
            "epsilon",
        ),
    ],
)
def test_bounded_refuses_unsafe_parameters(
    word_counter: WordCounter, kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    _refused(word_counter, lambda: bounded_laplace([0.5], **kwargs), match, error)
    _refused(word_counter, lambda: bounded_laplace_accuracy(**kwargs), match, error)


def test_errors_subclass_builtins() -> None:
    assert issubclass(InvalidParameterError, ValueError)
    assert issubclass(InvalidParameterTypeError, TypeError)
    assert issubclass(NoiseOverflowError, ValueError)


# ---------------------------------------------------------------- acceptance tables


def test_acceptance_prefixes_are_the_exact_first_16_bits() -> None:
    """float64 computes the 16-bit prefixes; every one must equal the exact value's."""
    plan = _plan(0.5, 0.0, 1.0, (0.0, 2.0))
    assert plan.sampler == "uniform"
    for table in plan.accept:
        for k in range(0, table.prefix.size, 7):
            assert int(table.prefix[k]) == int(table.probability(k) * 2**16)


def test_acceptance_coin_after_a_tie_uses_the_rest() -> None:
    plan = _plan(0.5, 0.0, 1.0, (0.0, 2.0))
    table = plan.accept[-1]
    k = table.prefix.size - 1
    prefix = int(table.prefix[k])

    class Tied:
        private = True
        words_drawn = 0

        def __init__(self) -> None:
            self.inner = _random.bit_source(None)
            self.first = True

        def words(self, n: int) -> NDArray[np.uint64]:
            out = self.inner.words(n).copy()
            if self.first:
                self.first = False
                out.view(np.uint16)[:] = prefix
            return out

    n = 20_000
    accepted = int(table.draw(Tied(), np.full(n, k, dtype=np.int64)).sum())
    rest = table.probability(k) * 2**16 - prefix
    assert 0 < rest < 1
    from scipy import stats

    assert stats.binomtest(accepted, n, float(rest)).pvalue > FALSE_ALARM


# ---------------------------------------------------------------- uniform proposal index


class _Uint32Script:
    """A BitSource that hands out given 32-bit values in order (two per word)."""

    private = False
    words_drawn = 0

    def __init__(self, values: list[int]) -> None:
        self.queue = list(values)

    def words(self, count: int) -> NDArray[np.uint64]:
        taken, self.queue = self.queue[: 2 * count], self.queue[2 * count :]
        return np.array(taken, dtype=np.uint32).view(np.uint64)


def _lemire_rounds(values: list[int], steps: int, n: int) -> list[int]:
    """Lemire's method, rounds as dpframe draws them: a round draws one 32-bit value per
    pending element (from whole words), and keeps those whose low product reaches
    ``2**32 mod span``; the others are redrawn in the next round."""
    span, queue = steps + 1, list(values)
    floor = (1 << 32) % span
    out = [-1] * n
    pending = list(range(n))
    while pending:
        draws, queue = queue[: len(pending)], queue[2 * ((len(pending) + 1) // 2) :]
        again = []
        for k, r in zip(pending, draws, strict=True):
            if (r * span) & 0xFFFFFFFF >= floor:
                out[k] = (r * span) >> 32
            else:
                again.append(k)
        pending = again
    return out


@pytest.mark.parametrize("steps", [2**31, 2**21, 3 * 2**20 + 7])
def test_uniform_index_is_lemires_method(steps: int) -> None:
    """Accepted 32-bit draws map to (r·span) >> 32; rejected ones are redrawn."""
    n = 4000
    span = steps + 1
    floor = (1 << 32) % span
    rng = np.random.default_rng(5)
    values = rng.integers(0, 1 << 32, 3 * n, dtype=np.uint64).tolist()
    # Make the first 40 draws rejected ones, so the redraw path surely runs.
    rejected = [r for r in range(0, 1 << 32, 4099) if (r * span) & 0xFFFFFFFF < floor][:40]
    assert len(rejected) == 40
    values[:40] = rejected
    got = _laplace._uniform_index(_Uint32Script(values), n, steps)
    assert got.tolist() == _lemire_rounds(values, steps, n)
    assert np.all((got >= 0) & (got <= steps))


def test_lemire_check_catches_a_skipped_redraw() -> None:
    """Validity twin: keeping the rejected draws changes the first 40 outputs."""
    steps, n = 2**31, 4000
    span = steps + 1
    floor = (1 << 32) % span
    values = np.random.default_rng(5).integers(0, 1 << 32, 3 * n, dtype=np.uint64).tolist()
    rejected = [r for r in range(0, 1 << 32, 4099) if (r * span) & 0xFFFFFFFF < floor][:40]
    values[:40] = rejected
    kept = [(r * span) >> 32 for r in values[:n]]
    assert kept != _lemire_rounds(values, steps, n)


def test_a_zero_output_carries_no_sign() -> None:
    # rint of a sum just below 0 gave -0.0: the sign told whether value + noise was
    # negative before snapping, finer than the grid of multiples of Λ.
    out = laplace(np.full(20_000, -0.3), epsilon=1.0, sensitivity=1, bounds=(-10, 10))
    zeros = out[out == 0]
    assert zeros.size > 1000
    assert not np.signbit(zeros).any()
