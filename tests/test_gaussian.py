"""The exact discrete Gaussian: distribution, privacy audit, exactness of each path, inputs.

Statistical tests reject at p < FALSE_ALARM = 1e-6 (tests/_stats.py); each has a twin on a
deliberately wrong sampler that must be rejected, so that no test passes vacuously.
"""

from __future__ import annotations

import dataclasses
import doctest
import functools
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats

import dpframe.mechanisms as dpm
from dpframe import _gaussian
from dpframe._random import GeneratorBitSource
from dpframe.errors import (
    DPFrameError,
    InvalidParameterError,
    InvalidParameterTypeError,
    NoiseOverflowError,
)
from tests._stats import FALSE_ALARM, chi_square_pvalue
from tests.conftest import WordCounter

N = 1_000_000


def exact_pmf(sigma: float, reach: float = 14) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """P(N = n) ∝ exp(-n²/2σ²) on |n| <= reach·σ + 3, normalized over that range (the rest
    is below e^-98), in float64 from the log weights."""
    top = math.ceil(reach * sigma) + 3
    outputs = np.arange(-top, top + 1)
    weights = np.exp(-(outputs.astype(np.float64) ** 2) / (2 * sigma * sigma))
    return outputs, weights / weights.sum()


def noise(sigma: float | Fraction, n: int = N, **kwargs: object) -> NDArray[np.int64]:
    return dpm.discrete_gaussian(np.zeros(n, dtype=np.int64), sigma=sigma, **kwargs)  # type: ignore[arg-type]


# ---------------------------------------------------------------- goodness of fit


def coarse_pvalue(
    samples: NDArray[np.int64],
    outputs: NDArray[np.int64],
    pmf: NDArray[np.float64],
    bins: int = 200,
) -> float:
    """Chi-square in about 200 bins of nearly equal probability under ``pmf``: less
    sensitive to single outputs than the fine test, much more to a wrong scale."""
    cdf = np.cumsum(pmf)
    cut = np.unique(np.searchsorted(cdf, np.linspace(0, 1, bins + 1)[1:-1]))
    probs = np.diff(np.concatenate([[0.0], cdf[cut], [1.0]]))
    return _cdf_bins_pvalue(samples, outputs[cut], probs)


@pytest.mark.statistical
@pytest.mark.parametrize("sigma", [0.5, 1, 10, 1000])
def test_matches_the_exact_pmf(sigma: float) -> None:
    """Fine (every output) and coarse chi-square tests, each at half the false-alarm rate."""
    outputs, pmf = exact_pmf(sigma)
    samples = noise(sigma)
    assert chi_square_pvalue(samples, outputs, pmf) > FALSE_ALARM / 2
    assert coarse_pvalue(samples, outputs, pmf) > FALSE_ALARM / 2


@pytest.mark.statistical
@pytest.mark.parametrize("sigma", [0.5, 1, 10, 1000])
def test_twin_goodness_of_fit_rejects_too_little_noise(sigma: float) -> None:
    outputs, pmf = exact_pmf(sigma)
    assert coarse_pvalue(noise(sigma * 0.99), outputs, pmf) < FALSE_ALARM / 2


@pytest.mark.statistical
def test_twin_goodness_of_fit_rejects_rounded_normals() -> None:
    """The fine test tells the discrete Gaussian from the rounded continuous one at σ = 1."""
    outputs, pmf = exact_pmf(1)
    rounded = np.rint(np.random.default_rng().normal(0, 1, N)).astype(np.int64)
    assert chi_square_pvalue(rounded, outputs, pmf) < FALSE_ALARM / 2


def _cdf_bins_pvalue(
    samples: NDArray[np.int64], edges: NDArray[np.int64], probs: NDArray[np.float64]
) -> float:
    """Chi-square of samples in bins (-inf, e0], (e0, e1], ... with given probabilities."""
    counts = np.bincount(np.searchsorted(edges, samples, side="left"), minlength=probs.size)
    expected = probs * samples.size
    return float(stats.chisquare(counts, expected).pvalue)


@pytest.mark.statistical
@pytest.mark.parametrize("sigma", [100_000, 2**40])
def test_wide_noise_matches_its_distribution(sigma: int) -> None:
    """The per-proposal threshold path (no tables): 200 equiprobable bins.

    Bin probabilities come from the continuous normal at half-integers: for σ >= 1e5 the
    discrete Gaussian's CDF equals Φ((y + 1/2)/σ) to within 1e-15 (Euler–Maclaurin),
    far below what 1e6 samples can see.
    """
    plan = _gaussian.gaussian_plan(Fraction(sigma) ** 2)
    assert plan.lo is None  # the formula path
    quantiles = stats.norm.ppf(np.linspace(0, 1, 201)[1:-1]) * sigma
    edges = np.floor(quantiles).astype(np.int64)  # bin b: y in (edges[b-1], edges[b]]
    cdf = stats.norm.cdf((edges + 0.5) / sigma)
    probs = np.diff(np.concatenate([[0.0], cdf, [1.0]]))
    samples = noise(sigma)
    assert _cdf_bins_pvalue(samples, edges, probs) > FALSE_ALARM
    # Twin: 1% too little noise is visible to the same test.
    assert _cdf_bins_pvalue(noise(sigma * 0.99), edges, probs) < FALSE_ALARM


@pytest.mark.statistical
def test_exact_path_alone_matches_the_pmf() -> None:
    """Every proposal decided by the decimal path: widen the uncertain band to everything."""
    sigma = 1
    plan = _gaussian.gaussian_plan(Fraction(sigma))
    assert plan.lo is not None
    assert plan.hi is not None
    assert plan.tabulated
    everything = dataclasses.replace(
        plan,
        lo=np.zeros_like(plan.lo),
        hi=np.full_like(plan.hi, np.iinfo(np.uint64).max),
        band=2**64 - 1,
    )
    source = GeneratorBitSource(np.random.default_rng())
    samples = _gaussian.gaussian_noise(everything, 20_000, source)
    outputs, pmf = exact_pmf(sigma)
    assert chi_square_pvalue(samples, outputs, pmf) > FALSE_ALARM
    # Twin: the same test on 20,000 rounded normals rejects.
    rounded = np.rint(np.random.default_rng().normal(0, sigma, 20_000)).astype(np.int64)
    assert chi_square_pvalue(rounded, outputs, pmf) < FALSE_ALARM


# ---------------------------------------------------------------- privacy: Rényi audit


def renyi_lower_bound(
    a: NDArray[np.int64], b: NDArray[np.int64], order: float, edges: NDArray[np.int64]
) -> float:
    """A lower confidence bound on D_order(P_a || P_b), false alarm <= FALSE_ALARM.

    Binning outputs (data processing) can only lower the divergence; in each bin,
    Clopper–Pearson bounds at FALSE_ALARM / (2 bins) each hold simultaneously (union
    bound); p^α q^(1-α) rises with p and falls with q (α > 1), so lower p and upper q
    give a lower bound on every term, hence on the divergence of the binned outputs.
    """
    bins = edges.size + 1
    ca = np.bincount(np.searchsorted(edges, a, side="left"), minlength=bins)
    cb = np.bincount(np.searchsorted(edges, b, side="left"), minlength=bins)
    level = FALSE_ALARM / (2 * bins)
    p_lo = np.where(ca > 0, stats.beta.ppf(level, ca, a.size - ca + 1), 0.0)
    q_hi = np.where(cb < b.size, stats.beta.ppf(1 - level, cb + 1, b.size - cb), 1.0)
    terms = np.where(p_lo > 0, p_lo**order * q_hi ** (1 - order), 0.0)
    return math.log(terms.sum()) / (order - 1)


@pytest.mark.statistical
@pytest.mark.parametrize("sigma", [1, 3])
def test_renyi_divergence_of_neighbours_within_rho(sigma: float) -> None:
    """D_α(M(0) || M(1)) <= α ρ with ρ = 1/(2σ²) (CKS Theorem 4), audited at α = 2, 4, 8,
    both directions; the twin with 0.7σ (ρ about doubled) claiming the same ρ is caught."""
    rho = 1 / (2 * sigma * sigma)
    edges = np.arange(-math.ceil(7 * sigma), math.ceil(7 * sigma) + 2)

    def neighbours(s: float) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        zeros = np.zeros(N, dtype=np.int64)
        return dpm.discrete_gaussian(zeros, sigma=s), dpm.discrete_gaussian(zeros + 1, sigma=s)

    at_zero, at_one = neighbours(sigma)
    for order in (2, 4, 8):
        assert renyi_lower_bound(at_zero, at_one, order, edges) <= order * rho
        assert renyi_lower_bound(at_one, at_zero, order, edges) <= order * rho
    weak_zero, weak_one = neighbours(0.7 * sigma)
    for order in (2, 4):
        assert renyi_lower_bound(weak_zero, weak_one, order, edges) > order * rho


# ---------------------------------------------------------------- exactness of the fast path


def _acceptance(plan: _gaussian.GaussianPlan, x: int) -> mpmath.mpf:
    """A(x) = T(x) / (M P(x)), computed independently in 60-digit mpmath.

    Tabulated plans: P(x) = P(Q = q)·n_r/2**b with P(Q = q) = (1 - 2**-2**s) 2**-(q·2**s),
    T(x) = exp(-x²/2σ²) halved at 0, M = e**log_bound. Formula plans (CKS with
    t = 2**k/ln 2): A(x) = exp(-(x - σ²/t)²/2σ² - R ln2/2**k), halved at 0.
    """
    with mpmath.workdps(60):
        var = mpmath.mpf(plan.variance.numerator) / plan.variance.denominator
        step = 1 << plan.k
        q, r = divmod(x, step)
        log2 = mpmath.log(2)
        if plan.tabulated:
            q >>= 0
            p_q = (1 - mpmath.mpf(2) ** -(1 << plan.shift)) * mpmath.mpf(2) ** -(q << plan.shift)
            proposal = p_q * plan.weights[r] / mpmath.mpf(2) ** plan.v_bits
            target = mpmath.exp(-(mpmath.mpf(x) ** 2) / (2 * var)) / (2 if x == 0 else 1)
            return target / (mpmath.exp(mpmath.mpf(plan.log_bound)) * proposal)
        c = var * log2 / step
        phi = (x - c) ** 2 / (2 * var) + r * log2 / step
        return mpmath.exp(-phi) / (2 if x == 0 else 1)


def _prefix_thresholds(plan: _gaussian.GaussianPlan, index: int) -> tuple[int, int]:
    """(lo, hi) on the 24-bit prefix from the word thresholds of a table entry."""
    assert plan.lo is not None
    assert plan.hi is not None
    return int(plan.lo[index]) >> 40, (int(plan.hi[index]) + 1) >> 40


@pytest.mark.parametrize("sigma", [Fraction(1, 8), 0.5, 1, 2.5, 10, 333, 2000])
def test_table_thresholds_bracket_the_acceptance_probability(sigma: float) -> None:
    """Every tabulated (q, r): a < lo => U < A and a >= hi => U >= A, with A <= 1 (M is
    an upper bound of T/P); far entries (lo, hi) = (0, 1) need A < 2**-24."""
    plan = _gaussian.gaussian_plan(Fraction(sigma) ** 2)
    assert plan.tabulated
    assert plan.band < 4 << 40  # the uncertain band stays a few prefixes wide
    width, step = plan.q_cap + 1, 1 << plan.k
    rng = np.random.default_rng()
    entries = [(q, r) for q in range(plan.q_cap) for r in range(step)]
    if len(entries) > 3000:
        chosen = rng.choice(len(entries), 3000, replace=False)
        entries = [entries[i] for i in chosen] + [(0, 0), (0, 1), (plan.q_cap - 1, step - 1)]
    too_generous = 0  # twin: lo raised by 2**-20 of A·2**24 (+2) must break the check
    for q, r in entries:
        x = (q << plan.k) + r
        exact = _acceptance(plan, x)
        low, high = _prefix_thresholds(plan, r * width + q)
        assert exact <= 1
        assert low <= exact * 2**24
        assert high >= exact * 2**24
        too_generous += low + 2 + exact * 2**4 > exact * 2**24
    assert too_generous > 0
    # Past the table (x >= beyond, and q >= q_cap, which all map to (0, 1)): A < 2**-24.
    for x in (plan.beyond, plan.beyond + 7, 3 * plan.beyond, (plan.q_cap << plan.k) + step - 1):
        assert _acceptance(plan, x) < mpmath.mpf(2) ** -24


@pytest.mark.parametrize("sigma", [10_000, 123_456, 2**50])
def test_formula_thresholds_bracket_the_acceptance_probability(sigma: float) -> None:
    """The proved bound |p̂ - A| <= 2**-26 A, and a < lo => U < A, a >= hi => U >= A."""
    plan = _gaussian.gaussian_plan(Fraction(sigma) ** 2)
    assert not plan.tabulated
    rng = np.random.default_rng()
    xs = rng.integers(0, plan.beyond, 3000)
    xs = np.unique(np.concatenate([xs, [0, 1, plan.beyond - 1]])).astype(np.int64)
    rs = xs & ((1 << plan.k) - 1)
    p_hat = _gaussian._fast_probability(plan, xs, rs)
    lo, hi = _gaussian._fast_thresholds(plan, xs)
    too_generous = 0
    for x, p, low, high in zip(xs.tolist(), p_hat.tolist(), lo.tolist(), hi.tolist(), strict=True):
        exact = _acceptance(plan, x)
        assert abs(p - exact) <= exact * mpmath.mpf(2) ** -26
        assert low <= exact * 2**24
        assert high >= exact * 2**24
        too_generous += low + 2 + exact * 2**4 > exact * 2**24
    assert too_generous > 0


@pytest.mark.parametrize("sigma", [3, 10**5])
def test_exact_bounds_bracket_and_tighten(sigma: int) -> None:
    plan = _gaussian.gaussian_plan(Fraction(sigma) ** 2)
    for x in (0, 1, 2, 5, 31, 10**6, 2**70):
        q, r = divmod(x, 1 << plan.k)
        exact = _acceptance(plan, x)
        lower, upper = _gaussian._exact_bounds(plan, x, q, r, 60)
        with mpmath.workdps(80):
            lo = mpmath.mpf(lower.numerator) / lower.denominator
            hi = mpmath.mpf(upper.numerator) / upper.denominator
            assert lo <= exact <= hi
            if x < 100:
                assert hi - lo <= mpmath.mpf(10) ** -48 * exact


def test_far_tail_counts_are_read_exactly() -> None:
    """A zero Q field (probability 2**-q_bits) is resolved by reading more words."""

    class Words:
        private = False
        words_drawn = 0

        def __init__(self, queue: list[int]) -> None:
            self.queue = queue

        def words(self, n: int) -> NDArray[np.uint64]:
            out = np.array(self.queue[:n], dtype=np.uint64)
            del self.queue[:n]
            return out

    assert _gaussian._true_q(Words([0, 0b1000]), 0, 28) == 28 + 64 + 3
    assert _gaussian._true_q(Words([]), 0b100, 28) == 2


# ---------------------------------------------------------------- accuracy


@functools.lru_cache(maxsize=16)
def _tails_mp(sigma: Fraction) -> list[mpmath.mpf]:
    """P(|N| > a) for every a, by direct summation in 30-digit mpmath (beyond 14σ + 10
    the terms are below e^-98: far below the alphas tested)."""
    with mpmath.workdps(30):
        var = mpmath.mpf(sigma.numerator) ** 2 / mpmath.mpf(sigma.denominator) ** 2
        top = int(14 * float(sigma)) + 10
        f = [mpmath.exp(-(mpmath.mpf(y) ** 2) / (2 * var)) for y in range(top)]
        suffix = [mpmath.mpf(0)] * (top + 1)
        for y in range(top - 1, -1, -1):
            suffix[y] = suffix[y + 1] + f[y]
        z = 2 * suffix[0] - 1
        return [2 * suffix[a + 1] / z for a in range(top)]


def _tail_mp(sigma: float | Fraction, a: int) -> mpmath.mpf:
    return _tails_mp(Fraction(sigma))[a]


@pytest.mark.parametrize("sigma", [Fraction(1, 8), 0.5, 1, 3, 10, 100, 1000])
@pytest.mark.parametrize("alpha", [0.05, 0.01, 1e-6])
def test_accuracy_is_the_exact_smallest_half_width(sigma: float, alpha: float) -> None:
    a = dpm.discrete_gaussian_accuracy(sigma=sigma, alpha=alpha)
    assert _tail_mp(sigma, a) <= alpha
    assert a == 0 or _tail_mp(sigma, a - 1) > alpha


@pytest.mark.parametrize("sigma", [1025, 4096])
def test_wide_accuracy_is_exact_or_one_wider(sigma: int) -> None:
    for alpha in (0.05, 1e-3):
        a = dpm.discrete_gaussian_accuracy(sigma=sigma, alpha=alpha)
        assert _tail_mp(sigma, a) <= alpha  # never too narrow
        assert _tail_mp(sigma, a - 2) > alpha  # at most one wider than the exact answer


def test_accuracy_of_huge_sigma_follows_the_normal_quantile() -> None:
    for sigma in (10**6, 2**40, 2**58):
        a = dpm.discrete_gaussian_accuracy(sigma=sigma)
        # erfc((a+1)/(σ√2)) ≈ 0.05 at a ≈ 1.959964σ - 1, up to O(1/σ) relative.
        assert abs(a / sigma - 1.959963984540054) < 1e-5


def test_rho_forms_agree() -> None:
    assert dpm.discrete_gaussian_accuracy(rho=Fraction(1, 200)) == dpm.discrete_gaussian_accuracy(
        sigma=10
    )
    assert dpm.discrete_gaussian_accuracy(
        rho=Fraction(3, 8), sensitivity_squared=3
    ) == dpm.discrete_gaussian_accuracy(sigma=2)
    a = np.arange(12).reshape(3, 4)
    assert np.array_equal(
        dpm.discrete_gaussian(a, rho=Fraction(1, 8), rng=7),
        dpm.discrete_gaussian(a, sigma=2, rng=7),
    )
    assert np.array_equal(
        dpm.discrete_gaussian(a, rho=Fraction(1, 2), sensitivity=2, rng=7),
        dpm.discrete_gaussian(a, sigma=2, rng=7),
    )


@pytest.mark.statistical
def test_error_bar_covers_at_the_stated_rate() -> None:
    """P(|N| > a) <= alpha, seen on samples; twin: a - 1 is exceeded too often."""
    sigma, alpha = 10, 0.05
    a = dpm.discrete_gaussian_accuracy(sigma=sigma, alpha=alpha)
    beyond = int((np.abs(noise(sigma)) > a).sum())
    assert stats.binom.sf(beyond - 1, N, alpha) > FALSE_ALARM  # not significantly above alpha
    beyond_narrow = int((np.abs(noise(sigma)) > a - 2).sum())
    assert stats.binom.sf(beyond_narrow - 1, N, alpha) < FALSE_ALARM


# ---------------------------------------------------------------- inputs, randomness, shapes


BAD_CALLS: list[tuple[dict[str, object], type[Exception]]] = [
    ({"sigma": 0}, InvalidParameterError),
    ({"sigma": -1.0}, InvalidParameterError),
    ({"sigma": float("nan")}, InvalidParameterError),
    ({"sigma": float("inf")}, InvalidParameterError),
    ({"sigma": "1"}, InvalidParameterTypeError),
    ({"sigma": True}, InvalidParameterTypeError),
    ({}, InvalidParameterError),
    ({"sigma": 1, "rho": 0.5}, InvalidParameterError),
    ({"sigma": 1, "sensitivity": 1}, InvalidParameterError),
    ({"rho": 0.5, "sensitivity": 1, "sensitivity_squared": 1}, InvalidParameterError),
    ({"rho": 0}, InvalidParameterError),
    ({"rho": 1, "sensitivity": 0}, InvalidParameterError),
    ({"sigma": 0.1}, InvalidParameterError),  # the exact value would be released
    ({"rho": 33}, InvalidParameterError),  # sigma = 1/sqrt(66) < 1/8
    ({"sigma": 2.0**58 * 1.01}, NoiseOverflowError),
    ({"sigma": Fraction(2**9000 + 1, 2**9000)}, InvalidParameterError),
]


@pytest.mark.parametrize(("kwargs", "error"), BAD_CALLS)
def test_bad_parameters_are_refused_before_any_randomness(
    kwargs: dict[str, object], error: type[Exception], word_counter: WordCounter
) -> None:
    with pytest.raises(error):
        dpm.discrete_gaussian([1, 2, 3], **kwargs)  # type: ignore[arg-type]
    with pytest.raises(error):
        dpm.discrete_gaussian_accuracy(**kwargs)  # type: ignore[arg-type]
    assert word_counter.words == 0


@pytest.mark.parametrize(
    ("values", "error"),
    [
        ([1.5, 2.0], InvalidParameterTypeError),
        ([True, False], InvalidParameterTypeError),
        (["a"], InvalidParameterTypeError),
        ([2**62 + 1], NoiseOverflowError),
        ([-(2**62) - 1], NoiseOverflowError),
        (np.array([2**63], dtype=np.uint64), NoiseOverflowError),
    ],
)
def test_bad_values_are_refused_before_any_randomness(
    values: object, error: type[Exception], word_counter: WordCounter
) -> None:
    with pytest.raises(error):
        dpm.discrete_gaussian(values, sigma=1)  # type: ignore[arg-type]
    assert word_counter.words == 0


def test_bad_alpha_is_refused() -> None:
    for alpha in (0, 1, -0.1, float("nan"), "0.05"):
        with pytest.raises((InvalidParameterError, InvalidParameterTypeError)):
            dpm.discrete_gaussian_accuracy(sigma=1, alpha=alpha)  # type: ignore[arg-type]


def test_errors_are_the_builtin_kinds_users_expect() -> None:
    with pytest.raises(ValueError, match="sigma"):
        dpm.discrete_gaussian([1], sigma=0)
    with pytest.raises(TypeError, match="sigma"):
        dpm.discrete_gaussian([1], sigma="1")  # type: ignore[arg-type]


def test_extreme_but_valid_parameters_answer() -> None:
    huge_fraction = Fraction(10**600 + 1, 10**599)  # about 10, exactly
    assert dpm.discrete_gaussian([0, 0], sigma=huge_fraction).shape == (2,)
    assert dpm.discrete_gaussian_accuracy(sigma=huge_fraction) == 20
    extremes = np.array([2**62, -(2**62), 0])
    out = dpm.discrete_gaussian(extremes, sigma=2**58)
    assert out.dtype == np.int64
    assert np.all(np.abs(out - extremes) < 2**62)
    assert np.array_equal(dpm.discrete_gaussian([5, -5], sigma=Fraction(1, 8), rng=1), [5, -5])


def test_rng_makes_results_reproducible_and_defaults_are_cryptographic(
    word_counter: WordCounter,
) -> None:
    values = np.arange(1000)
    first = dpm.discrete_gaussian(values, sigma=10, rng=42)
    assert np.array_equal(first, dpm.discrete_gaussian(values, sigma=10, rng=42))
    assert np.array_equal(
        first, dpm.discrete_gaussian(values, sigma=10, rng=np.random.default_rng(42))
    )
    assert not np.array_equal(first, dpm.discrete_gaussian(values, sigma=10, rng=43))
    assert word_counter.words == 0  # rng= never touches the cryptographic source
    np.random.seed(0)  # noqa: NPY002 - the legacy global seed must have no effect
    a = dpm.discrete_gaussian(values, sigma=10)
    np.random.seed(0)  # noqa: NPY002
    b = dpm.discrete_gaussian(values, sigma=10)
    assert not np.array_equal(a, b)
    assert word_counter.words > 0


def test_shapes_and_dtypes() -> None:
    assert dpm.discrete_gaussian(np.zeros((3, 4, 5), dtype=np.int32), sigma=2).shape == (3, 4, 5)
    assert dpm.discrete_gaussian(np.array([], dtype=np.int64), sigma=2).shape == (0,)
    assert dpm.discrete_gaussian(7, sigma=2).shape == ()
    assert dpm.discrete_gaussian(np.arange(5, dtype=np.uint16), sigma=2).dtype == np.int64


def test_words_per_sample_are_lean(word_counter: WordCounter) -> None:
    """One 64-bit word per proposal (two for wide noise), over the acceptance rate."""
    for sigma in (1, 10, 1000, 100_000):
        plan = _gaussian.gaussian_plan(Fraction(sigma) ** 2)
        per_proposal = 1 if plan.tabulated else 2
        before = word_counter.words
        noise(sigma, 200_000)
        assert (word_counter.words - before) / 200_000 < per_proposal / plan.acceptance * 1.1
        assert plan.acceptance > (0.9 if plan.tabulated else 0.45)


def test_unverifiable_plan_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    _gaussian.gaussian_plan.cache_clear()
    monkeypatch.setattr(_gaussian, "_fast_error_bound", lambda *a: (1.0, 60.0))
    with pytest.raises(DPFrameError, match="internal error"):
        _gaussian.gaussian_plan(Fraction(10**10))  # a formula plan
    monkeypatch.setattr(_gaussian, "_REACH", 1)  # the far tail no longer negligible
    with pytest.raises(DPFrameError, match="internal error"):
        _gaussian.gaussian_plan(Fraction(4))  # a tabulated plan
    monkeypatch.undo()
    _gaussian.gaussian_plan.cache_clear()


def test_docstring_examples_run() -> None:
    failures, tried = doctest.testmod(_gaussian, raise_on_error=False)
    assert tried > 0
    assert failures == 0
