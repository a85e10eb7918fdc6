"""The exact discrete Gaussian, vectorized: rejection sampling from proposals drawn from bits.

The target is ``P(N = n) ∝ exp(-n²/(2σ²))`` on the integers. Canonne, Kamath and Steinke
(2020, Algorithm 3) sample it by rejection: propose ``Y`` from a discrete Laplace and
accept with probability ``T(Y) / (M·P(Y))``, ``T`` the target's weight, ``P`` the
proposal's probability and ``M`` any bound on ``T/P``; accepted proposals are exactly
distributed as the target. dpframe keeps that step and chooses proposals that random
bits produce *exactly* (no coin of irrational probability), with ``x = |Y|`` and a fair
sign bit (``T`` is halved at 0, so ``±0`` counts once):

* **Tabulated** (σ up to about 5500): ``x = q·2**k + r``. ``q`` comes from the trailing
  zeros of a bit field taken in groups of ``2**s`` (``P(Q >= q) = 2**-(q·2**s)``), and
  ``r`` from ``b`` uniform bits ``V`` through a map that gives each ``r`` exactly ``n_r``
  of the ``2**b`` values of ``V``. The ``n_r`` are fitted to the Gaussian so that ``M``
  is small: 91 to 99.97% of the proposals are accepted below σ = 3000 (at least 75% up to
  the table limit). The acceptance thresholds of every ``(q, r)`` are tabulated once per σ.
* **Formula** (wider noise): CKS's discrete Laplace with ``t = 2**k / ln 2``: whole steps
  of ``2**k`` (trailing zeros again) plus ``k`` uniform bits, with acceptance
  ``exp(-(x - σ²/t)²/(2σ²) - r·ln2/2**k)``; about 50% accepted, thresholds computed per
  proposal.

Each proposal takes one random 64-bit word (two for wide noise): its top 24 bits are the
first bits of a uniform ``U``, then the sign, ``V`` and the ``q`` field. Acceptance is
``U < A(x)``. Float thresholds bracket ``A(x)`` with a *proved* relative error of
``2**-26`` (correctly rounded IEEE operations and tables of ``exp`` computed in decimal
arithmetic, never ``np.exp``), so the 24-bit prefix decides unless it falls within
about ``2**-24`` of ``A(x)``; those proposals (about one in ``2**22``) go to an exact
path that draws further bits of ``U`` and bounds ``A(x)`` in decimal arithmetic until the
comparison is decided. Every decision has exactly probability ``A(x)``: the output is
the discrete Gaussian itself, not an approximation of it.
"""

from __future__ import annotations

import decimal
import functools
import math
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpframe import _validation
from dpframe._exact import show
from dpframe._geometric import checked_alpha
from dpframe._random import BitSource, bit_source
from dpframe._validation import INT_LIMIT
from dpframe.errors import (
    DPFrameError,
    InvalidParameterError,
    NoiseOverflowError,
)

__all__ = ["discrete_gaussian", "discrete_gaussian_accuracy"]

# Below σ = 1/8 the noise is 0 with probability above 1 - 3e-14: the exact value would be
# released. Above 2**58, noise beyond ±2**62 (int64 overflow) has probability above e^-128.
MIN_SIGMA = Fraction(1, 8)
MAX_SIGMA = Fraction(2**58)
# σ² as an exact fraction whose parts exceed this many bits is refused (decimal digits ~ 0.3x).
MAX_VARIANCE_BITS = 8192
# Proposals per block: the working arrays stay inside the CPU cache.
_BLOCK = 1 << 16
# Relative margin of the fast acceptance test; the proved error of the float thresholds
# is 2**-26 (see _exp_of and _thresholds_of), so the margin holds with a factor 4 to spare.
_MARGIN = 2.0**-24
# Bits of U the fast test reads: the rest of the word carries the sign, V and Q.
_UNIFORM_BITS = 24
_TWO_U = float(2**_UNIFORM_BITS)
# The far tail starts _REACH σ past the peak of the envelope: there A(x) < e^-30.
_REACH = 10
# Steps of the exp table: exp(-j/256) for 0 <= j < 256·(φ_max + 2).
_TABLE_STEPS = 256
# The exact path stops refining exp(-φ) past φ = _PHI_CAP (the bound e^-φ_cap < 2**-14000).
_PHI_CAP = 10_000
_MAX_ROUNDS = 200


def _context(digits: int) -> decimal.Context:
    return decimal.Context(
        prec=digits, rounding=decimal.ROUND_HALF_EVEN, Emin=-(10**17), Emax=10**17
    )


# ---------------------------------------------------------------- parameters


def _as_fraction(value: Any, name: str) -> Fraction:
    fix = f"Pass a positive number such as {name}=1.0."
    result = _validation.real(value, name, fix)
    if result <= 0:
        raise InvalidParameterError(f"{name} must be > 0, got {show(result)}. {fix}")
    return result


def variance(
    sigma: Any = None, rho: Any = None, sensitivity: Any = None, sensitivity_squared: Any = None
) -> Fraction:
    """σ² as an exact fraction from ``sigma=`` or from ``rho=`` (and the sensitivity).

    ``sigma`` is primary; the zCDP form gives ``σ² = sensitivity² / (2 rho)``, which is
    rational, so no rounding is involved in either form.
    """
    given_sensitivity = sensitivity is not None or sensitivity_squared is not None
    if sigma is not None and (rho is not None or given_sensitivity):
        raise InvalidParameterError(
            "pass either sigma=, or rho= (with sensitivity=, default 1), not both: sigma "
            "fixes the noise on its own. Example: sigma=10, or rho=0.005, sensitivity=1."
        )
    if sigma is None and rho is None:
        raise InvalidParameterError(
            "the discrete Gaussian needs its scale: pass sigma= (e.g. sigma=10), or the zCDP "
            "budget rho= (e.g. rho=0.005) with the L2 sensitivity= (default 1)."
        )
    if sensitivity is not None and sensitivity_squared is not None:
        raise InvalidParameterError(
            "pass sensitivity= or sensitivity_squared=, not both (sensitivity_squared=k is "
            "the exact way to give an irrational sensitivity √k)."
        )
    if sigma is not None:
        s = _as_fraction(sigma, "sigma")
        result = s * s
    else:
        r = _as_fraction(rho, "rho")
        if sensitivity_squared is not None:
            squared = _as_fraction(sensitivity_squared, "sensitivity_squared")
        else:
            delta = Fraction(1) if sensitivity is None else _as_fraction(sensitivity, "sensitivity")
            squared = delta * delta
        result = squared / (2 * r)
    if max(result.numerator.bit_length(), result.denominator.bit_length()) > MAX_VARIANCE_BITS:
        raise InvalidParameterError(
            f"the noise variance given as an exact Fraction has a numerator or denominator "
            f"beyond {MAX_VARIANCE_BITS} bits; round sigma (or rho and sensitivity) to a "
            f"simpler number first, e.g. Fraction(x).limit_denominator(10**12)."
        )
    if result < MIN_SIGMA**2:
        raise InvalidParameterError(
            f"sigma = {_show_sqrt(result)} is below {MIN_SIGMA} (= 0.125): the "
            f"noise would be 0 with probability above 1 - 3e-14, releasing the exact value. "
            f"Use sigma >= 1/8 (a smaller rho, or a larger sensitivity)."
        )
    if result > MAX_SIGMA**2:
        raise NoiseOverflowError(
            f"sigma = {_show_sqrt(result)} is above 2**58: noise beyond ±2**62 "
            f"would no longer be negligible and could overflow int64. Use sigma <= 2**58 "
            f"(a larger rho), or rescale the values."
        )
    return result


def _show_sqrt(variance: Fraction) -> str:
    """sqrt(variance) for a message, also for variances beyond float64's range."""
    bits = variance.numerator.bit_length() - variance.denominator.bit_length()
    if abs(bits) < 1000:
        return f"{math.sqrt(float(variance)):.6g}"
    return f"about 2**{bits // 2}"


# ---------------------------------------------------------------- the plan

# One 64-bit word per proposal: its top 24 bits are the first bits of U; bit 39 is the
# sign; below it, V (``v_bits`` uniform bits that pick R through the map, tables only)
# and the Q field, whose count of trailing zeros + 1 is ``count`` (P(count = c) = 2**-c;
# an all-zero field, count 64, is resolved exactly from further words).
_LOW_BITS = 64 - _UNIFORM_BITS
_SIGN_SHIFT = 64 - _LOW_BITS  # word << this moves the sign bit to the top
_FIELD_TOP = _LOW_BITS - 1  # the field and V share bits 0..38
# Largest tabulated σ-range: threshold tables and the V map stay cache-sized.
_MAX_TABLE_ENTRIES = 1 << 16
_MAX_V_BITS = 17
# Tabulated proposals whose φ exceeds this are treated as the far tail (A < e^-60 < 2**-24).
_PHI_TABLE_CAP = 60.0


@dataclass(frozen=True)
class GaussianPlan:
    """Everything the sampler needs for one σ², fixed by public parameters only.

    Two kinds of plans share the acceptance machinery. *Tabulated* (σ up to about
    2000): x = q·2**k + r with q = (count - 1) >> shift and r = map[V], a dyadic
    approximation of the best envelope, and the thresholds of every (q, r) in a table
    indexed ``r·(q_cap + 1) + min(q, q_cap)``. *Formula* (wider): CKS's proposal with a
    uniform R (the top k bits of a second word), thresholds computed per proposal.
    """

    variance: Fraction
    tabulated: bool
    k: int  # the block size is 2**k
    shift: int  # Q = (count - 1) >> shift: P(Q >= q) = 2**-(q·2**shift)
    v_bits: int  # uniform bits of V (tabulated only)
    weights: tuple[int, ...]  # n_r: V values mapping to each r (tabulated only)
    log_bound: float  # ln M >= sup ln(T/P), exactly this float's value (tabulated only)
    beyond: int  # x >= beyond implies A(x) < 2**-30 (tabulated) or < 2**-72 (formula)
    q_cap: int  # q >= q_cap implies x >= beyond
    q_bits: int  # width of the Q field
    center: float  # formula: c = σ² ln2 / 2**k, rounded
    inv_two_var: float  # 1 / (2σ²), rounded
    ln2_step: float  # formula: ln2 / 2**k, rounded
    exp_table: NDArray[np.float64]  # exp(-j/256), each within 3.1·2**-53 relative
    error_bound: float  # proved bound on |φ̂ - φ| wherever the float thresholds are used
    lo: NDArray[np.uint64] | None  # word < lo accepts (per table index)
    hi: NDArray[np.uint64] | None  # word > hi rejects
    magnitudes: NDArray[np.int64] | None  # x for each table index
    r_index: NDArray[np.int64] | None  # V -> r·(q_cap + 1)
    band: int  # every hi - lo is at most this (the rare uncertain band)
    acceptance: float  # expected acceptance rate of one proposal (for sizing only)
    center_upper: float  # an upper bound of c, for the exact path's error bound


def _normalizer_estimate(var: float) -> float:
    if var >= 4:
        return math.sqrt(2 * math.pi * var)
    return 1 + 2 * sum(math.exp(-(y * y) / (2 * var)) for y in range(1, 64))


def _shifted(
    lo: NDArray[np.int64], hi: NDArray[np.int64]
) -> tuple[NDArray[np.uint64], NDArray[np.uint64]]:
    """Thresholds on the prefix a (top 24 bits) as thresholds on the word w:
    a < lo <=> w < lo·2**40, and a >= hi <=> w > hi·2**40 - 1."""
    lo_w = lo.astype(np.uint64) << np.uint64(_LOW_BITS)
    hi_w = (hi.astype(np.uint64) << np.uint64(_LOW_BITS)) - np.uint64(1)
    return lo_w, hi_w


@functools.lru_cache(maxsize=16)  # a plan holds up to ~2.5 MB of tables
def gaussian_plan(var: Fraction) -> GaussianPlan:
    """The plan for N_Z(0, σ²): tabulated when σ allows, else per-proposal thresholds."""
    plan = _tabulated_plan(var)
    return plan if plan is not None else _formula_plan(var)


def _log_envelope(var: float, shift: int, k: int, beyond: int) -> NDArray[np.float64]:
    """ln w(r) = max_q ln T(q·2**k + r) - ln P(Q = q), over the blocks below ``beyond``.

    The proposal P(x) = P(Q = q)·n_r/2**b fits best with n_r ∝ w(r); then the acceptance
    rate is Σ_{x>=0} T(x) / Σ_r w(r). T(x) = exp(-x²/2σ²), halved at 0 (±0 is one value).
    """
    step = 1 << k
    blocks = -(-beyond // step)
    q = np.arange(blocks + 1, dtype=np.float64)[:, None]
    x = q * step + np.arange(step, dtype=np.float64)[None, :]
    log_t = -(x * x) / (2 * var) - np.where(x == 0, math.log(2), 0.0)
    decay = (1 << shift) * math.log(2)
    log_p_q = math.log(-math.expm1(-decay)) - q * decay
    w: NDArray[np.float64] = (log_t - log_p_q).max(axis=0)
    return w


def _far_start(var: Fraction, shift: int, k: int) -> int:
    """``beyond`` = floor(x* + 10σ) + 2, x* = σ²·2**shift·ln2 / 2**k the peak of the
    parabola that bounds ln(T/P) (q <= x / 2**k); past it the bound falls, by 50 at beyond."""
    with decimal.localcontext(_context(60)):
        s_d = Decimal(var.numerator) / Decimal(var.denominator)
        peak = s_d * (1 << shift) * Decimal(2).ln() / (Decimal(2) ** k)
        edge = peak + _REACH * s_d.sqrt()
        return int(edge.to_integral_value(rounding=decimal.ROUND_FLOOR)) + 2


def _tabulated_plan(var: Fraction) -> GaussianPlan | None:
    """Choose (shift, k) for the best acceptance within the table budget; None if none fits."""
    var_f = float(var)
    z_half = _normalizer_estimate(var_f) / 2  # Σ_{x>=0} T(x) with T(0) halved
    sigma = math.sqrt(var_f)
    centre = max(0, round(math.log2(max(sigma, 1))))
    best: tuple[float, int, int] | None = None
    for shift in range(5):
        for k in range(max(0, centre - 6), centre + 3):
            v_bits = min(k + 5, _MAX_V_BITS) if k > 0 else 0
            if k > _MAX_V_BITS - 2:
                continue
            beyond = _far_start(var, shift, k)
            q_cap = -(-beyond >> k)
            if (q_cap + 1) << k > _MAX_TABLE_ENTRIES:
                continue
            log_w = _log_envelope(var_f, shift, k, beyond)
            top = float(log_w.max())
            # The dyadic map costs up to one V value per r: acceptance ≈ Z/2 / (Σ w)(1 + 2**k/2**b).
            log_sum = top + math.log(float(np.exp(log_w - top).sum()))
            rate = math.exp(math.log(z_half) - log_sum)
            rate /= 1 + (1 << k) / (1 << v_bits) if v_bits else 1
            if best is None or rate > best[0] * 1.02:  # a smaller table unless clearly better
                best = (rate, shift, k)
    if best is None:
        return None
    _, shift, k = best
    return _build_tabulated(var, shift, k)


def _allocate(log_w: NDArray[np.float64], total: int) -> NDArray[np.int64]:
    """Integers n_r >= 1 summing to ``total`` that keep M = max_r w(r)·2**b/n_r small.

    n_r = max(1, ceil(w_r/λ)) with the smallest λ whose sum fits (bisection), so every
    ratio w_r/n_r is at most λ; the few values left over go where w_r/n_r is largest.
    Every r keeps at least one V value, so every x stays possible.
    """
    w = np.exp(log_w - log_w.max())

    def needed(scale: float) -> NDArray[np.int64]:
        result: NDArray[np.int64] = np.maximum(1, np.ceil(w / scale)).astype(np.int64)
        return result

    lo, hi = float(w.sum()) / total / 2, float(w.max())  # needed(hi) is all ones
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if needed(mid).sum() > total else (lo, mid)
    n = needed(hi)
    left = total - int(n.sum())
    while left > 0:
        order = np.argsort(-(w / n))[:left]
        n[order] += 1
        left = total - int(n.sum())
    return n


def _build_tabulated(var: Fraction, shift: int, k: int) -> GaussianPlan:
    var_f = float(var)
    step = 1 << k
    v_bits = min(k + 5, _MAX_V_BITS) if k > 0 else 0
    beyond = _far_start(var, shift, k)
    q_cap = -(-beyond >> k)
    log_w = _log_envelope(var_f, shift, k, beyond)
    weights = _allocate(log_w, 1 << v_bits)
    with decimal.localcontext(_context(60)):
        ln2 = Decimal(2).ln()
        log_q0 = (1 - Decimal(2) ** -(1 << shift)).ln()  # ln P(Q = 0) = ln(1 - 2**-2**s)
        distinct, where = np.unique(weights, return_inverse=True)  # ln of each n_r once
        log_n = [float(Decimal(int(n)).ln()) for n in distinct]
        log_n = [log_n[i] for i in where.tolist()]
        inv_two_var = float(1 / (2 * (Decimal(var.numerator) / Decimal(var.denominator))))
        decay, v_ln2, q0_f = float((1 << shift) * ln2), float(v_bits * ln2), float(log_q0)
        ln2_f = float(ln2)
    # ψ(x) = ln T(x) - ln P(x) = -x²/2σ² - [x=0] ln2 + q·2**s ln2 - ln P(Q=0) - ln n_r + b ln2.
    q = np.arange(q_cap, dtype=np.int64)[:, None]
    r = np.arange(step, dtype=np.int64)[None, :]
    x = (q << k) + r
    square = x.astype(np.float64) ** 2 * inv_two_var
    zero = np.where(x == 0, ln2_f, 0.0)
    blocks = q * decay
    ln_n = np.asarray(log_n)[None, :]
    psi = -square - zero + blocks - q0_f - ln_n + v_ln2
    magnitude_sum = square + zero + blocks + abs(q0_f) + ln_n + v_ln2
    inside = x < beyond
    # Each term is within 2 roundings (2**-52) and the five sums add 5·2**-53 of the
    # partial sums: |ψ̂ - ψ| <= Σ|terms|·2**-50 (generous); ln M then sits 2**-20 above.
    psi_error = float(magnitude_sum[inside].max()) * 2.0**-50
    log_bound = float(psi[inside].max()) + psi_error + 2.0**-20
    # Past beyond, ψ(x) <= -x²/2σ² + x·2**s ln2/2**k - ln P(Q=0) - ln min n_r + b ln2 falls.
    far = -(beyond**2) * inv_two_var + beyond * decay / step - q0_f - min(log_n) + v_ln2 + 2 * ln2_f
    error_bound = (float(magnitude_sum[inside].max()) + abs(log_bound)) * 2.0**-49
    if far - log_bound > -30 or error_bound > 2.0**-32:
        raise DPFrameError(f"internal error: no verified discrete Gaussian table for {var}")
    phi = log_bound - psi  # A(x) = exp(-φ(x)) <= 1
    usable = inside & (phi <= _PHI_TABLE_CAP)
    exp_table = _exp_table(math.ceil(_PHI_TABLE_CAP + error_bound) + 2)
    p = np.zeros(x.shape)
    p[usable] = _exp_of(phi[usable], exp_table)
    lo, hi = _thresholds_of(p)
    lo[~usable], hi[~usable] = 0, 1  # A < 2**-24: any prefix >= 1 rejects
    # Table index r·(q_cap + 1) + q, with q = q_cap standing for every far block.
    width = q_cap + 1
    lo_t = np.zeros((step, width), dtype=np.int64)
    hi_t = np.ones((step, width), dtype=np.int64)
    lo_t[:, :q_cap], hi_t[:, :q_cap] = lo.T, hi.T
    mags = np.zeros((step, width), dtype=np.int64)
    mags[:, :q_cap] = x.T
    mags[:, q_cap] = (q_cap << k) + np.arange(step)
    lo_w, hi_w = _shifted(lo_t.reshape(-1), hi_t.reshape(-1))
    r_index = np.repeat(np.arange(step, dtype=np.int64) * width, weights)
    return GaussianPlan(
        variance=var,
        tabulated=True,
        k=k,
        shift=shift,
        v_bits=v_bits,
        weights=tuple(int(n) for n in weights),
        log_bound=log_bound,
        beyond=beyond,
        q_cap=q_cap,
        q_bits=_FIELD_TOP - v_bits,
        center=0.0,
        inv_two_var=inv_two_var,
        ln2_step=0.0,
        exp_table=exp_table,
        error_bound=error_bound,
        lo=lo_w,
        hi=hi_w,
        magnitudes=mags.reshape(-1),
        r_index=r_index,
        band=int((hi_w - lo_w).max()),
        acceptance=_normalizer_estimate(var_f) / 2 / math.exp(log_bound),
        center_upper=0.0,
    )


def _acceptance_rate(var: float, k: int, z: float) -> float:
    """Formula plans: P(accept) = 2**-(k+2) e^{-κ} Z, κ = σ² ln²2 / (2·4**k) (k > 0).

    The proposal is uniform within each step of 2**k, so P(x)·2**q = 2**-(k+1) and
    Σ_x P(x) A(x) = e^{-κ} 2**-(k+1) Σ_{x>=0} T(x) = 2**-(k+2) e^{-κ} Z.
    """
    kappa = var * math.log(2) ** 2 / (2 * 4.0**k)
    return 2.0 ** -(k + 2) * math.exp(-kappa) * z


# hi - lo <= 2·2**-24·A·2**24 + 2 <= 4 prefixes (see _thresholds_of); doubled for margin.
_FORMULA_BAND = 8 << _LOW_BITS


def _formula_plan(var: Fraction) -> GaussianPlan:
    """CKS's proposal with t = 2**k / ln 2 and a uniform R; thresholds per proposal."""
    var_f = float(var)
    z = _normalizer_estimate(var_f)
    k = max(range(1, 62), key=lambda j: _acceptance_rate(var_f, j, z))
    with decimal.localcontext(_context(60)):
        s_d = Decimal(var.numerator) / Decimal(var.denominator)
        ln2 = Decimal(2).ln()
        step = Decimal(2) ** k
        c = s_d * ln2 / step
        sigma = s_d.sqrt()
        # The 60-digit values are within 1e-50 relative: +2 covers every rounding.
        beyond = int((c + _REACH * sigma).to_integral_value(rounding=decimal.ROUND_FLOOR)) + 2
        center, inv_two_var = float(c), float(1 / (2 * s_d))
        ln2_step = float(ln2 / step)
        center_upper = float(c) * (1 + 2.0**-40) + 1e-300
    error_bound, phi_max = _fast_error_bound(beyond, center, inv_two_var)
    if error_bound > 2.0**-32:
        raise DPFrameError(f"internal error: no verified discrete Gaussian plan for {var}")
    return GaussianPlan(
        variance=var,
        tabulated=False,
        k=k,
        shift=0,
        v_bits=0,
        weights=(),
        log_bound=0.0,
        beyond=beyond,
        q_cap=-(-beyond >> k),
        q_bits=_FIELD_TOP,
        center=center,
        inv_two_var=inv_two_var,
        ln2_step=ln2_step,
        exp_table=_exp_table(math.ceil(phi_max + error_bound) + 2),
        error_bound=error_bound,
        lo=None,
        hi=None,
        magnitudes=None,
        r_index=None,
        band=_FORMULA_BAND,
        acceptance=_acceptance_rate(var_f, k, z),
        center_upper=center_upper,
    )


def _fast_error_bound(beyond: int, c: float, s: float) -> tuple[float, float]:
    """Formula plans: a proved bound on |φ̂ - φ| for 0 <= x < beyond, and an upper bound on φ.

    With u = 2**-53 (IEEE round-to-nearest): x_f, c_f and d = fl(x_f - c_f) err by at most
    u(x + c) + u|d̂| <= 2u·max(x, c)·(1 + 2u) =: e_d in total; fl(fl(d·d)·s_f) has
    relative error <= 3u(1 + u) on d̂² s; |d̂² - d²| s <= s e_d (2|d| + e_d); the R term
    fl(fl(R)·fl(ln2/2**k)) errs by <= 3.1u·ln2 (R < 2**k); the final sum adds u·φ.
    The factor 2 on the total covers the second-order terms and the rounding of this
    very computation.
    """
    u = 2.0**-53
    big = max(float(beyond), c) * (1 + 1e-12)
    dist = max(c, beyond - c) + 1
    e_d = 2 * u * big * (1 + 4 * u)
    phi_max = (dist + e_d) ** 2 * s * (1 + 1e-12) + math.log(2)
    total = (dist + e_d) ** 2 * s * 4 * u + s * e_d * (2 * dist + e_d) + 4 * u + u * (phi_max + 1)
    return 2 * total, phi_max


@functools.lru_cache(maxsize=64)
def _exp_table(whole: int) -> NDArray[np.float64]:
    """exp(-j/256) for 0 <= j < 256·whole, each within 3u·(1 + u) relative (u = 2**-53).

    Built as the outer product of exp(-a) and exp(-b/256), each correctly rounded from
    60-digit Decimal values (within u each), times one rounded product (u).
    """
    with decimal.localcontext(_context(60)):
        ones = np.array([float((-Decimal(a)).exp()) for a in range(whole)])
        steps = np.array([float((Decimal(-b) / _TABLE_STEPS).exp()) for b in range(_TABLE_STEPS)])
    table: NDArray[np.float64] = np.multiply.outer(ones, steps).reshape(-1)
    return table


def _exp_of(phi: NDArray[np.float64], table: NDArray[np.float64]) -> NDArray[np.float64]:
    """exp(-φ̂) within 2**-26.4 relative, for -2**-32 <= φ̂ < len(table)/256 (no np.exp).

    exp(-φ̂) = T[j]·exp(-g) with j = trunc(256 φ̂) and g = φ̂ - j/256 in [-2**-32, 2**-8)
    computed exactly (both terms are multiples of ulp(φ̂)); 1 - g + g²/2 is within
    g³/6 <= 2**-26.5 relative of exp(-g), its float evaluation within 4u, T[j] within
    3.1u, the product within u.
    """
    scaled = phi * _TABLE_STEPS
    j = scaled.astype(np.int64)  # φ̂ >= -2**-32, so truncation is floor except near 0
    g = scaled - j
    g *= 1.0 / _TABLE_STEPS
    p = g * -0.5
    p += 1.0
    p *= g
    np.subtract(1.0, p, out=p)
    p *= table[j]
    return p


def _thresholds_of(p: NDArray[np.float64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Integer thresholds on the 24-bit prefix a of U: a < lo accepts, a >= hi rejects.

    p̂ is within 2**-26 of A (relative; the exp error 2**-26.4 with e^{±E}, E <= 2**-32).
    With b = 24: lo = ceil(fl(fl(p̂·(1 - 2**-24)·2**b) - 1)) <= p̂(1 - 2**-24)2**b <= A·2**b
    and hi = ceil(p̂·(1 + 2**-24)·2**b) >= A·2**b, each rounding being 2**-53 relative.
    So a < lo gives a + 1 <= lo, U < (a + 1)/2**b <= A; a >= hi gives U >= a/2**b >= A.
    """
    lo = np.ceil(p * ((1 - _MARGIN) * _TWO_U) - 1)
    hi = np.ceil(p * ((1 + _MARGIN) * _TWO_U))
    np.maximum(lo, 0, out=lo)
    np.minimum(hi, _TWO_U, out=hi)
    np.maximum(hi, 1, out=hi)
    return lo.astype(np.int64), hi.astype(np.int64)


def _fast_probability(
    plan: GaussianPlan, x: NDArray[np.int64], r: NDArray[np.int64] | None
) -> NDArray[np.float64]:
    """Formula plans: p̂(x) within 2**-26 of A(x), for 0 <= x < plan.beyond.

    φ̂ is within E <= 2**-32 of φ (_fast_error_bound); _exp_of adds 2**-26.4.
    """
    xf = x.astype(np.float64)
    d = xf - plan.center
    phi = d * d
    phi *= plan.inv_two_var
    if r is not None:
        phi += r.astype(np.float64) * plan.ln2_step
    p = _exp_of(phi, plan.exp_table)
    zeros = np.flatnonzero(x == 0)
    if zeros.size:
        p[zeros] *= 0.5  # exact: A(0) = exp(-φ(0)) / 2
    return p


def _fast_thresholds(
    plan: GaussianPlan, x: NDArray[np.int64], r: NDArray[np.int64] | None = None
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Formula plans: prefix thresholds for 0 <= x < beyond (see _thresholds_of)."""
    if r is None:
        r = x & ((1 << plan.k) - 1)
    return _thresholds_of(_fast_probability(plan, x, r))


# ---------------------------------------------------------------- the exact path


def _exact_bounds(
    plan: GaussianPlan, x: int, q: int, r: int, digits: int
) -> tuple[Fraction, Fraction]:
    """Rational bounds A_lo <= A(x) <= A_hi, within about 10**-(digits - 8) relative.

    Each Decimal operation at ``digits`` digits errs by u = 10**(1-digits)/2 relative.
    Tabulated: φ = ln M + x²/2σ² - q·2**s ln2 - b ln2 + ln P(Q=0) + ln n_r + [x=0] ln2,
    a sum of a few terms each within 4u, so |φ̂ - φ| <= 10**(3-digits)·Σ|terms|.
    Formula: φ = (x - c)²/2σ² + r ln2/2**k, |φ̂ - φ| <= 10**(3-digits)(φ̂ + 1 + (x + c)²/σ²)
    (the subtraction x - c is the only cancellation, bounded absolutely). exp is
    correctly rounded.
    """
    var, k = plan.variance, plan.k
    with decimal.localcontext(_context(digits)):
        s_d = Decimal(var.numerator) / Decimal(var.denominator)
        ln2 = Decimal(2).ln()
        unit = Decimal(10) ** (1 - digits)
        if plan.tabulated:
            terms = [
                Decimal(plan.log_bound),  # exact: the float's own value
                Decimal(x) ** 2 / (2 * s_d),
                -(q << plan.shift) * ln2,
                -plan.v_bits * ln2,
                (1 - Decimal(2) ** -(1 << plan.shift)).ln(),
                Decimal(plan.weights[r]).ln(),
                ln2 if x == 0 else Decimal(0),
            ]
            phi = sum(terms, Decimal(0))
            err = sum((abs(t) for t in terms), Decimal(1)) * Decimal(10) ** (3 - digits)
            halve = False
        else:
            step = Decimal(2) ** k
            c = s_d * ln2 / step
            d = Decimal(x) - c
            phi = d * d / (2 * s_d) + Decimal(r) * ln2 / step
            spread = (Decimal(abs(x)) + Decimal(repr(plan.center_upper)) + 1) ** 2 / s_d
            err = (phi + 1 + spread) * Decimal(10) ** (3 - digits)
            halve = x == 0
        if phi - err > _PHI_CAP:
            lower, upper = Decimal(0), (-Decimal(_PHI_CAP)).exp() * (1 + unit)
        else:
            lower = (-(phi + err)).exp() * (1 - 2 * unit)
            upper = min(Decimal(1), (-(phi - err)).exp() * (1 + 2 * unit))
        if halve:
            lower, upper = lower / 2 * (1 - unit), upper / 2 * (1 + unit)
    return Fraction(lower), Fraction(upper)


def _accept_exactly(
    plan: GaussianPlan, source: BitSource, x: int, q: int, r: int, prefix: int
) -> bool:
    """Decide U < A(x) exactly, U = (prefix + V) / 2**24 with V uniform and fresh.

    Draws 64 more bits of U and adds 40 digits to the bounds of A(x) until the interval
    of U falls on one side; A(x) is irrational, so this stops with probability 1, after
    one round in all but a 2**-60 fraction of the calls.
    """
    known, bits, digits = prefix, _UNIFORM_BITS, 60
    for _ in range(_MAX_ROUNDS):
        lower, upper = _exact_bounds(plan, x, q, r, digits)
        if Fraction(known + 1, 1 << bits) <= lower:
            return True
        if Fraction(known, 1 << bits) >= upper:
            return False
        known = (known << 64) | int(source.words(1)[0])
        bits += 64
        digits += 40
    raise DPFrameError("internal error: exact acceptance did not settle; please report")


# ---------------------------------------------------------------- the sampler


def _true_q(source: BitSource, field: int, width: int) -> int:
    """Trailing zeros of the Q field of ``width`` bits, reading more words while all zero."""
    zeros = 0
    while field == 0:  # probability 2**-width, then 2**-64 per word
        zeros += width
        field, width = int(source.words(1)[0]), 64
    return zeros + (field & -field).bit_length() - 1


def _propose(plan: GaussianPlan, source: BitSource, n: int) -> NDArray[np.int64]:
    """``n`` proposals; returns the accepted ones, signed, in order (a compact array)."""
    word = source.words(n)
    field = word & np.uint64((1 << plan.q_bits) - 1)
    low = field - np.uint64(1)
    low ^= field
    count = np.bitwise_count(low)  # trailing zeros + 1; 64 for an all-zero field
    empty = np.flatnonzero(count == 64)
    r_words: NDArray[np.uint64] | None = None
    if plan.tabulated and plan.lo is not None and plan.r_index is not None:
        count -= 1
        count >>= np.uint8(plan.shift)
        np.minimum(count, np.uint8(plan.q_cap), out=count)  # q, far blocks clipped
        if plan.v_bits:
            v = word >> np.uint64(plan.q_bits)
            v &= np.uint64((1 << plan.v_bits) - 1)
            key = np.take(plan.r_index, v.view(np.int64))
            key += count
        else:
            key = count.astype(np.int64)
        lo = np.take(plan.lo, key)
        hi_table = plan.hi
    else:
        r_words = source.words(n) >> np.uint64(64 - plan.k)
        key = _clipped_magnitude(plan, count, r_words)
        lo, hi_formula = _formula_thresholds(plan, key, r_words)
        hi_table = None
    accept = word < lo
    # The uncertain band lo <= w <= hi is narrow: a cheap superset first, then exactly.
    gap = word - lo  # wraps around to a huge number where w < lo
    near = np.flatnonzero(gap <= np.uint64(plan.band))
    hi = np.take(hi_table, key[near]) if hi_table is not None else hi_formula[near]
    unsure = near[word[near] <= hi]
    exact: dict[int, int] = {}
    for i in sorted({*unsure.tolist(), *empty.tolist()}):  # about one in 2**21 proposals
        q_i = _true_q(source, int(word[i]) & ((1 << plan.q_bits) - 1), plan.q_bits)
        if plan.tabulated:
            q_i >>= plan.shift
            v_i = (int(word[i]) >> plan.q_bits) & ((1 << plan.v_bits) - 1)
            r_i = _r_of_v(plan, v_i)
        else:
            r_i = 0 if r_words is None else int(r_words[i])
        x_i = (q_i << plan.k) + r_i
        accept[i] = _accept_exactly(plan, source, x_i, q_i, r_i, int(word[i]) >> _LOW_BITS)
        if accept[i]:
            if x_i >= INT_LIMIT:
                raise NoiseOverflowError(
                    "the discrete Gaussian noise drawn exceeded 2**62 (probability below "
                    "2**-100 for the accepted sigma); nothing was released. Use a smaller sigma."
                )
            exact[i] = x_i
    chosen = np.compress(accept, key)
    if plan.tabulated and plan.magnitudes is not None:
        chosen = np.take(plan.magnitudes, chosen)
    if exact:  # values decided by the exact path, possibly from the far tail
        positions = np.cumsum(accept) - 1
        for i, x_i in exact.items():
            chosen[positions[i]] = x_i
    # Branch-free sign from bit 39: s = 0 or -1, and (x ^ s) - s is x or -x.
    sign = (np.compress(accept, word) << np.uint64(_SIGN_SHIFT)).view(np.int64) >> 63
    chosen ^= sign
    chosen -= sign
    return chosen


def _r_of_v(plan: GaussianPlan, v: int) -> int:
    """R for a V value: the map assigns the first n_0 values to 0, the next n_1 to 1, ..."""
    total = 0
    for r, n in enumerate(plan.weights):
        total += n
        if v < total:
            return r
    raise DPFrameError("internal error: V outside the map; please report")


def _clipped_magnitude(
    plan: GaussianPlan, count: NDArray[np.uint8], r: NDArray[np.uint64]
) -> NDArray[np.int64]:
    """Formula plans: x for each proposal, counts past the far tail (or 64) clipped."""
    q = np.minimum(count, np.uint8(plan.q_cap + 1)).astype(np.int64)
    q -= 1
    q <<= plan.k
    q |= r.view(np.int64)
    return q


def _formula_thresholds(
    plan: GaussianPlan, x: NDArray[np.int64], r: NDArray[np.uint64]
) -> tuple[NDArray[np.uint64], NDArray[np.uint64]]:
    """Thresholds computed per proposal (wide σ); x >= beyond gets (0, 1), as in the tables."""
    outside = x >= plan.beyond
    inside_x = np.minimum(x, plan.beyond - 1)
    lo, hi = _fast_thresholds(plan, inside_x, r.view(np.int64))
    far = np.flatnonzero(outside)
    if far.size:
        lo[far] = 0
        hi[far] = 1
    return _shifted(lo, hi)


def gaussian_noise(plan: GaussianPlan, n: int, source: BitSource) -> NDArray[np.int64]:
    """``n`` independent exact discrete Gaussian values: the first n accepted proposals.

    Accepted proposals are independent draws of the target, so keeping the first n of
    them (and dropping the surplus of the last block) changes nothing in distribution.
    """
    noise = np.empty(n, dtype=np.int64)
    filled = 0
    while filled < n:
        wanted = n - filled
        batch = min(_BLOCK, math.ceil(wanted / plan.acceptance * 1.05) + 32)
        accepted = _propose(plan, source, batch)
        take = min(accepted.size, wanted)
        noise[filled : filled + take] = accepted[:take]
        filled += take
    return noise


# ---------------------------------------------------------------- accuracy (exact)


_EXACT_SUM_SIGMA = 1024


def _pi(digits: int) -> tuple[Decimal, Decimal]:
    """Bounds on π from Machin's formula in integer fixed point (each floor loses < 1 unit).

    π = 16 arctan(1/5) - 4 arctan(1/239); the alternating arctan series is cut where the
    next term is below one unit, so each sum is within (terms + 1) units of the truth.
    """
    scale = 10 ** (digits + 10)

    def arctan_inverse(m: int) -> tuple[int, int]:
        total, power, k, sign, terms = 0, scale // m, 0, 1, 0
        while power:
            total += sign * (power // (2 * k + 1))
            power //= m * m
            k, sign, terms = k + 1, -sign, terms + 1
        return total, terms + 2

    a, ea = arctan_inverse(5)
    b, eb = arctan_inverse(239)
    mid, err = 16 * a - 4 * b, 16 * ea + 4 * eb
    with decimal.localcontext(_context(digits + 20)):
        return Decimal(mid - err) / scale, Decimal(mid + err) / scale


def _erfc_bounds(x: Decimal, digits: int) -> tuple[Decimal, Decimal]:
    """Bounds on erfc(x), x >= 0, within about 10**-digits relative.

    erf(x) = (2/√π) e^{-x²} Σ_k x (2x²)^k / (1·3···(2k+1)): positive terms, so the sum
    has no cancellation; it is cut once the term ratio is below 1/2 and the term below
    10**-(work) of the sum (the rest is then below the last term). Working with
    ``work = digits + x²/ln10 + 20`` digits keeps 1 - erf(x) accurate. Each of the K
    terms costs two roundings; the total relative error of erf is below (4K + x² + 20)u.
    """
    x2_float = float(x) ** 2
    work = digits + math.ceil(x2_float / math.log(10)) + 20
    pi_lo, pi_hi = _pi(work)
    with decimal.localcontext(_context(work)):
        x2 = x * x
        term, total, k = x, x, 0
        tiny = Decimal(10) ** -work
        while True:
            ratio = 2 * x2 / (2 * k + 3)
            term = term * ratio
            total += term
            k += 1
            if ratio < Decimal("0.5") and term < tiny * total:
                break
        total += 2 * term  # the rest of the series is below the last term
        u = Decimal(10) ** (1 - work)
        scale = (-x2).exp() * 2
        slack = (4 * k + Decimal(x2_float) + 20) * u
        erf_hi = scale * total / pi_lo.sqrt() * (1 + slack)
        erf_lo = scale * (total - 2 * term) / pi_hi.sqrt() * (1 - slack)
        return max(Decimal(0), 1 - erf_hi), 1 - erf_lo


def _tail_bounds_wide(var: Fraction, a: int, digits: int = 40) -> tuple[Fraction, Fraction]:
    """Bounds on P(|N| > a) for wide noise (σ > 1024), by Poisson and Euler–Maclaurin.

    Z = √(2πσ²)·θ with 1 <= θ <= 1 + 3e^{-2π²σ²} (Poisson summation), and with n = a + 1,
    Σ_{y>=n} f(y) = ∫_n^∞ f + f(n)/2 + n f(n)/(12σ²) + R, |R| <= V/12, V the variation
    of f' on [n, ∞) (|f'(n)| if n >= σ, else at most 2e^{-1/2}/σ). Since
    2∫_n^∞ f / √(2πσ²) = erfc(n/(σ√2)):
    P(|N| > a) = [erfc(n/(σ√2)) + (f(n)(1 + n/(6σ²)) ± 2R)/√(2πσ²)] / θ.
    """
    n = a + 1
    with decimal.localcontext(_context(digits + 10)):
        s_d = Decimal(var.numerator) / Decimal(var.denominator)
        sigma = s_d.sqrt()
        x = Decimal(n) / (sigma * Decimal(2).sqrt())
    erfc_lo, erfc_hi = _erfc_bounds(x, digits)
    pi_lo, pi_hi = _pi(digits + 10)
    with decimal.localcontext(_context(digits + 10)):
        f_n = (-(Decimal(n) ** 2) / (2 * s_d)).exp()
        # f' rises to 0 beyond σ (f'' > 0); before σ it dips to -e^{-1/2}/σ first.
        variation = Decimal(n) * f_n / s_d if n >= sigma else 2 * Decimal("-0.5").exp() / sigma
        rest = variation / 12
        root_lo, root_hi = (2 * pi_lo * s_d).sqrt(), (2 * pi_hi * s_d).sqrt()
        main = f_n * (1 + Decimal(n) / (6 * s_d))
        slack = 1 + Decimal(10) ** (5 - digits)
        upper = (erfc_hi + (main + 2 * rest) / root_lo) * slack
        lower = (erfc_lo + (main - 2 * rest) / root_hi) / slack  # θ - 1 < 1e-8e6 here
    return Fraction(max(lower, Decimal(0))), Fraction(upper)


class _ExactTails:
    """Bounds on P(|N| > a) for every a up to where it is far below alpha (σ <= 1024).

    f(y) = exp(-y²/2σ²) by the recurrence f(y+1) = f(y)·g_y, g_y = ρ^{2y+1}, ρ = e^{-1/2σ²}.
    With u = 10**(1-digits)/2: ρ̂ is within 2u(1 + 1/2σ²) relative, so f̂(y) = ρ̂^{y²}
    (with 2y roundings) is within (y² + 1)·4u(1 + 1/σ²) + 4yu relative; sums add Y·u.
    Beyond Y, Σ_{y>Y} f(y) <= f(Y)·γ/(1 - γ) with γ = ρ^{2Y+1} (the ratio only falls).
    """

    def __init__(self, var: Fraction, alpha: Fraction, digits: int) -> None:
        depth = math.log(1 / float(alpha)) + math.log(10) * (digits + 5)
        top = math.ceil(math.sqrt(2 * float(var) * depth)) + 2
        self.context = _context(digits)
        with decimal.localcontext(self.context):
            s_d = Decimal(var.numerator) / Decimal(var.denominator)
            rho = (-1 / (2 * s_d)).exp()
            rho2 = rho * rho
            f, g = Decimal(1), rho
            values = [f]
            for _ in range(top):
                f *= g
                g *= rho2
                values.append(f)
            self.tail = f * g / (1 - g)  # g = ρ^{2·top+1} now
            u = Decimal(10) ** (1 - digits)
            self.eta = ((top * top + 1) * 4 * (1 + 1 / s_d) + 6 * top) * u
            suffix = [Decimal(0)] * (top + 2)
            for y in range(top, 0, -1):
                suffix[y] = suffix[y + 1] + values[y]  # Σ_{y <= y' <= top} f(y')
            self.suffix = suffix
            self.z_lo = 1 + 2 * suffix[1] * (1 - self.eta)
            self.z_hi = 1 + 2 * (suffix[1] + self.tail) * (1 + self.eta)
        self.top = top

    def lower(self, a: int) -> Fraction:
        with decimal.localcontext(self.context):
            return Fraction(2 * self.suffix[a + 1] * (1 - self.eta) / self.z_hi)

    def upper(self, a: int) -> Fraction:
        with decimal.localcontext(self.context):
            bound = 2 * (self.suffix[a + 1] + self.tail) * (1 + self.eta) / self.z_lo
            return Fraction(bound)


@functools.lru_cache(maxsize=8)  # up to ~3 MB of decimals each
def _exact_tails(var: Fraction, alpha: Fraction, digits: int) -> _ExactTails:
    return _ExactTails(var, alpha, digits)


def half_width(var: Fraction, alpha: Fraction) -> int:
    """Smallest integer a >= 0 with P(|N| > a) <= alpha for N ~ N_Z(0, σ²).

    Exact for σ <= 1024: every comparison with alpha is decided on rigorous bounds,
    refined until it is (alpha, rational, never equals the irrational tail). For wider
    noise, the smallest a whose upper bound fits: exact unless alpha lies within about
    (a/σ)²/(6σ²) (relative) of P(|N| > a - 1), where it is the safe, larger a.
    """
    if var > _EXACT_SUM_SIGMA**2:
        return _wide_half_width(var, alpha)
    a = 0
    for digits in (50, 90, 170, 330):
        tails = _exact_tails(var, alpha, digits)
        lo, hi = -1, tails.top - 1  # the upper bound falls with a; it fits at top - 1
        if tails.upper(hi) > alpha:
            raise DPFrameError("internal error: tail table too short; please report")
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if tails.upper(mid) <= alpha else (mid, hi)
        a = hi
        if a == 0 or tails.lower(a - 1) > alpha:
            return a
    return a  # not decided at 330 digits (never seen): the safe choice


def _wide_half_width(var: Fraction, alpha: Fraction) -> int:
    sigma = math.sqrt(float(var))
    target = float(alpha)

    def approx_tail(a: float) -> float:
        return math.erfc((a + 1) / (sigma * math.sqrt(2)))

    lo_a, hi_a = 0.0, sigma * 40
    for _ in range(200):
        mid = (lo_a + hi_a) / 2
        lo_a, hi_a = (lo_a, mid) if approx_tail(mid) <= target else (mid, hi_a)
    guess = max(0, int(hi_a))

    def fits(a: int) -> bool:
        return a >= 0 and _tail_bounds_wide(var, a)[1] <= alpha

    step = 1
    if fits(guess):
        hi, lo = guess, guess - 1
        while lo >= 0 and fits(lo):
            hi, step = lo, 2 * step
            lo = hi - step
        lo = max(lo, -1)
    else:
        lo, hi = guess, guess + 1
        while not fits(hi):
            lo, step = hi, 2 * step
            hi = lo + step
    while hi - lo > 1:  # invariant: lo does not fit (or is -1), hi fits
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    return hi


# ---------------------------------------------------------------- the public functions


def discrete_gaussian(
    values: ArrayLike,
    *,
    sigma: float | Fraction | None = None,
    rho: float | Fraction | None = None,
    sensitivity: float | Fraction | None = None,
    sensitivity_squared: float | Fraction | None = None,
    rng: Any = None,
) -> NDArray[np.int64]:
    """Add exact discrete Gaussian noise to integers (the discrete Gaussian mechanism).

    Parameters
    ----------
    values : array_like of int
        The exact integer results to release (counts, integer sums). Any shape; every
        entry within ±2**62.
    sigma : float or Fraction, optional
        The noise scale: ``P(N = n) ∝ exp(-n²/(2 sigma²))`` on the integers. Between 1/8
        and 2**58. Floats are read as the simplest fraction that rounds to them
        (``0.1`` is exactly 1/10). Give either ``sigma`` or ``rho``.
    rho : float or Fraction, optional
        The zCDP budget of the release instead of ``sigma``: the noise then has
        ``sigma² = sensitivity² / (2 rho)``, exactly (a rational number, no rounding).
    sensitivity : float or Fraction, optional
        With ``rho``: the L2 sensitivity of ``values`` (default 1, a count): the most
        one individual can change the vector, in Euclidean norm.
    sensitivity_squared : float or Fraction, optional
        With ``rho``, instead of ``sensitivity``: its square, the exact way to give an
        irrational sensitivity (``sensitivity_squared=k`` for a person in ``k`` cells;
        ``math.sqrt(k)`` is a float slightly off √k, possibly below it).
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
        For a sigma, rho or sensitivity that is not a finite number > 0, both or neither
        of ``sigma`` and ``rho``, ``sensitivity`` with ``sigma``, sigma below 1/8 (the
        noise would almost never move the value), an exact Fraction too large to work
        with, or non-integer values.
    NoiseOverflowError
        For values beyond ±2**62 or sigma above 2**58 (value plus noise could leave
        int64).

    See Also
    --------
    discrete_gaussian_accuracy : The error bar of this noise.
    geometric : Pure epsilon-DP integer noise (the discrete Laplace).
    dpframe._zcdp.epsilon_of_zcdp : (epsilon, delta) from rho.

    Notes
    -----
    **Privacy.** If one individual changes ``values`` by at most ``sensitivity`` in L2
    norm, the release satisfies ``rho``-zero-concentrated DP with
    ``rho = sensitivity² / (2 sigma²)`` (Canonne, Kamath, Steinke 2020, Theorem 4; for
    vectors of independent noise, Theorem 14): the Rényi divergence of every order
    ``α > 1`` between neighbouring outputs is at most ``α rho``. zCDP releases compose
    by adding their rho, and convert to ``(epsilon, delta)``-DP (CKS 2020, Corollary
    13; :func:`dpframe._zcdp.epsilon_of_zcdp`). It is not pure DP: the ratio of
    neighbouring probabilities grows without bound in the tails. ``sigma`` is the
    primary parameter because the noise is what this function draws; the privacy it
    buys depends on the sensitivity, which only the caller knows. The ``rho`` form is
    the same mechanism with ``sigma² = sensitivity²/(2 rho)``, exact, so the ``rho``
    charged is exactly the ``rho`` obtained.

    **The algorithm.** CKS 2020, Algorithm 3, is rejection sampling: propose ``Y``
    from a discrete Laplace with scale ``t = floor(sigma) + 1`` and accept with
    probability ``exp(-(|Y| - sigma²/t)²/(2 sigma²))``; the accepted ``Y`` follows the
    target exactly. dpframe keeps the rejection step and changes the proposal so that
    random bits produce it exactly. For sigma up to about 5500 the proposal is
    ``|Y| = q·2**k + r`` with ``q`` geometric (trailing zero bits, counted in groups)
    and ``r`` drawn through a map of uniform bits whose proportions are fitted to the
    Gaussian: 91 to 99.97% of proposals are accepted below sigma = 3000, at least 75%
    above (CKS's proposal: 46 to 76%), and the acceptance thresholds are tabulated
    once per sigma. For wider noise it is CKS's
    own discrete Laplace with ``t = 2**k / ln 2`` (whole steps of ``2**k`` plus ``k``
    uniform bits, the remainder of the Laplace shape folded into the acceptance
    test), about 50% accepted. In both cases the acceptance probability ``A = T/(M·P)``
    uses the proposal's exact probability ``P`` and a verified bound ``M >= T/P``.

    **What "exact" means here.** Every output has exactly the probability
    ``exp(-n²/(2 sigma²)) / Σ_m exp(-m²/(2 sigma²))``; nothing is approximated or
    added to rho. The one irrational decision per proposal, ``U < A`` with ``U``
    uniform, compares the first 24 bits of ``U`` with thresholds that bracket ``A``
    within ``2**-24`` (relative, plus one unit); the thresholds come from correctly
    rounded float operations and tables of ``exp`` computed in decimal arithmetic,
    with an error bound proved in the code and checked for each sigma before use
    (``np.exp`` is never trusted). When ``U`` falls inside the bracket (about once in
    ``2**22`` proposals), further bits of ``U`` are drawn and ``A`` is bounded in
    high-precision decimal arithmetic until the comparison is decided. This is the
    alternative to the paper's ``Bernoulli(exp(-γ))`` built from ``Bernoulli(γ/k)``
    coins: those need a rational ``γ`` per element (big integers for most sigma) and
    tens of coins per proposal, where this takes one 64-bit word per proposal and a
    fixed handful of array operations.

    **What running time reveals.** The number of proposals, which is independent of
    the outputs (rejection sampling accepts independently of how many tries it took),
    and, about once in ``2**22`` proposals, that a proposal fell near its acceptance
    threshold or far in the tail, which depends on that proposal's value. The values
    themselves do not affect the work; the first call for a new sigma also builds its
    tables (up to a fraction of a second), which depends on sigma only. This is not a
    constant-time sampler.

    References
    ----------
    C. Canonne, G. Kamath, T. Steinke, "The Discrete Gaussian for Differential
    Privacy", NeurIPS 2020 (arXiv:2004.00010), Algorithm 3, Theorems 4 and 14.
    M. Bun, T. Steinke, "Concentrated Differential Privacy: Simplifications,
    Extensions, and Lower Bounds", TCC 2016.

    Examples
    --------
    >>> import dpframe.mechanisms as dpm
    >>> noisy = dpm.discrete_gaussian([18, 19, 13, 16], sigma=3)
    >>> noisy.shape, noisy.dtype
    ((4,), dtype('int64'))
    >>> dpm.discrete_gaussian([[5, 7]], rho=0.125, sensitivity=1, rng=1).shape
    (1, 2)
    """
    var = variance(sigma, rho, sensitivity, sensitivity_squared)
    array = _validation.integer_array(values)
    _validation.check_unbounded_range(array)
    plan = gaussian_plan(var)
    source = bit_source(rng)
    flat = array.reshape(-1)
    noisy = flat + gaussian_noise(plan, flat.size, source)
    return noisy.reshape(array.shape)


def discrete_gaussian_accuracy(
    *,
    sigma: float | Fraction | None = None,
    rho: float | Fraction | None = None,
    sensitivity: float | Fraction | None = None,
    sensitivity_squared: float | Fraction | None = None,
    alpha: float | Fraction = 0.05,
) -> int:
    """The error bar of :func:`discrete_gaussian`: ``|noise| <= a`` with probability >= 1 - alpha.

    Parameters
    ----------
    sigma, rho, sensitivity, sensitivity_squared : float or Fraction, optional
        As for :func:`discrete_gaussian`.
    alpha : float, default 0.05
        The probability that the error exceeds the half-width (0.05 gives a 95% bar).

    Returns
    -------
    int
        The smallest integer ``a >= 0`` with ``P(|N| > a) <= alpha``.

    See Also
    --------
    discrete_gaussian : The noise this bounds.
    geometric_accuracy : The same for geometric noise.

    Notes
    -----
    The sampler is exact, so the distribution realized is the discrete Gaussian itself
    and ``P(|N| > a) = 2 Σ_{n > a} exp(-n²/2σ²) / Σ_n exp(-n²/2σ²)``. For sigma up to
    1024 both sums are evaluated in decimal arithmetic with rigorous error bounds (a
    finite sum plus a geometric bound on the rest), and every comparison with
    ``alpha`` is decided on those bounds: the result is exact. For wider noise the
    normalizer comes from Poisson summation (``√(2π)σ`` times a factor within
    ``1 + 3e^{-2π²σ²}`` of 1) and the tail sum from the Euler–Maclaurin formula with
    its remainder bounded, the integral being an ``erfc`` computed in decimal
    arithmetic by a positive series with a rigorous truncation bound: exact unless
    ``alpha`` is within about ``0.1/σ²`` (relative) of a tail probability, where the
    safe, larger ``a`` is returned. The accuracy depends only on public parameters
    and spends no privacy budget. For a continuous Gaussian the half-width at
    ``alpha = 0.05`` would be about ``1.96 σ``.

    References
    ----------
    C. Canonne, G. Kamath, T. Steinke, "The Discrete Gaussian for Differential
    Privacy", NeurIPS 2020 (arXiv:2004.00010), Section 2.

    Examples
    --------
    >>> from dpframe.mechanisms import discrete_gaussian_accuracy
    >>> discrete_gaussian_accuracy(sigma=1)
    2
    >>> discrete_gaussian_accuracy(sigma=10)
    20
    >>> discrete_gaussian_accuracy(rho=0.005, sensitivity=1)
    20
    """
    var = variance(sigma, rho, sensitivity, sensitivity_squared)
    return _cached_half_width(var, checked_alpha(alpha))  # at least 1e-300, as the others


@functools.lru_cache(maxsize=256)
def _cached_half_width(var: Fraction, alpha: Fraction) -> int:
    return half_width(var, alpha)
