"""Statistical helpers shared by the privacy and goodness-of-fit tests.

Every test built on these rejects only at a false-alarm rate of 1e-6 (``FALSE_ALARM``),
and every tolerance is derived from the sample size, never tuned by hand.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

FALSE_ALARM = 1e-6


def two_sided_geometric_pmf(noise: NDArray[np.int64], epsilon: float) -> NDArray[np.float64]:
    """P(N = n) = (1 - a)/(1 + a) a^|n|, a = exp(-epsilon), in float64 (relative error ~1e-15)."""
    a = math.exp(-epsilon)
    return np.asarray((-math.expm1(-epsilon)) / (1 + a) * np.exp(-epsilon * np.abs(noise)))


def truncated_geometric_pmf(
    true_value: int, bounds: tuple[int, int], epsilon: float
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Outputs lo..hi and their probabilities for clamp(v + N, lo, hi), end masses included."""
    lo, hi = bounds
    outputs = np.arange(lo, hi + 1)
    pmf = two_sided_geometric_pmf(outputs - true_value, epsilon)
    a = math.exp(-epsilon)

    # P(N >= k) = a^k / (1 + a) for k >= 1, and P(N >= 0) = 1 / (1 + a).
    def upper_tail(k: int) -> float:
        return 1 / (1 + a) if k <= 0 else a**k / (1 + a)

    pmf[-1] = upper_tail(hi - true_value)
    pmf[0] = upper_tail(true_value - lo)
    return outputs, pmf


def chi_square_pvalue(
    samples: ArrayLike,
    outputs: NDArray[np.int64],
    pmf: NDArray[np.float64],
    *,
    min_expected: float = 20,
) -> float:
    """Chi-square goodness of fit of integer samples against ``pmf`` on ``outputs``.

    Outputs with small expected counts are pooled into the two tails (everything below
    and above the well-populated range), and a tail whose expected count is itself below
    ``min_expected`` is merged into its neighbouring bin: otherwise one legitimate draw in
    a tail expected to hold 0.02 of a draw would make the statistic explode (a false alarm
    in about 2% of runs at sigma 0.5, not 1e-6). Outputs of probability 0 that occur still
    reject. ``outputs`` must start at or below the smallest possible output; mass beyond
    its end is pooled into the upper tail.
    """
    x = np.asarray(samples).reshape(-1)
    n = x.size
    expected = pmf * n
    keep = np.flatnonzero(expected >= min_expected)
    first, last = int(keep[0]), int(keep[-1])
    core = outputs[first : last + 1]
    observed_core = np.bincount(x[(x >= core[0]) & (x <= core[-1])] - core[0], minlength=core.size)
    observed = [int((x < core[0]).sum()), *observed_core.tolist(), int((x > core[-1]).sum())]
    # Mass missing from `pmf` (outputs beyond the listed ones) is counted above.
    mass_below = float(pmf[:first].sum())
    mass_above = max(0.0, 1.0 - mass_below - float(pmf[first : last + 1].sum()))
    exp = np.array([mass_below * n, *expected[first : last + 1].tolist(), mass_above * n])
    obs = np.array(observed, dtype=float)
    # Drop empty-expectation tails (possible with bounded outputs) after checking they are empty.
    mask = exp > 0
    if not np.all(obs[~mask] == 0):
        return 0.0
    obs, exp = obs[mask], exp[mask]
    if exp.size > 2 and exp[0] < min_expected:  # merge a thin lower tail into its neighbour
        obs, exp = (
            np.concatenate([[obs[0] + obs[1]], obs[2:]]),
            np.concatenate([[exp[0] + exp[1]], exp[2:]]),
        )
    if exp.size > 2 and exp[-1] < min_expected:  # and a thin upper tail
        obs = np.concatenate([obs[:-2], [obs[-2] + obs[-1]]])
        exp = np.concatenate([exp[:-2], [exp[-2] + exp[-1]]])
    chi2 = float(((obs - exp) ** 2 / exp).sum())
    dof = exp.size - 1
    return float(stats.chi2.sf(chi2, dof))


def delta_hat(a: NDArray[np.int64], b: NDArray[np.int64], epsilon: float) -> float:
    """Google's estimate of delta: sum over outputs of max(0, P_a(o) - e^eps P_b(o))."""
    lo = int(min(a.min(), b.min()))
    pa = np.bincount(a - lo) / a.size
    pb = np.bincount(b - lo) / b.size
    size = max(pa.size, pb.size)
    pa = np.pad(pa, (0, size - pa.size))
    pb = np.pad(pb, (0, size - pb.size))
    return float(np.maximum(0.0, pa - math.exp(epsilon) * pb).sum())


def delta_tolerance(
    pmf_a: NDArray[np.float64], pmf_b: NDArray[np.float64], n: int, epsilon: float
) -> float:
    """Threshold for ``delta_hat`` with false-alarm rate <= FALSE_ALARM when the truth is delta = 0.

    If P_a <= e^eps P_b pointwise, delta_hat <= |P^_a - P_a|_1 + e^eps |P^_b - P_b|_1.
    E|P^ - P|_1 <= sum_o sqrt(P(o)(1 - P(o)) / n) (Jensen), and McDiarmid's inequality
    (one sample moves the L1 distance by at most 2/n) gives
    P(|P^ - P|_1 >= E + t) <= exp(-n t^2 / 2). Each side gets half the false-alarm rate.
    """

    def expected_l1(p: NDArray[np.float64]) -> float:
        return float(np.sqrt(p * (1 - p) / n).sum())

    t = math.sqrt(2 * math.log(2 / FALSE_ALARM) / n)
    return expected_l1(pmf_a) + t + math.exp(epsilon) * (expected_l1(pmf_b) + t)


def audit(
    release: Callable[[int, int], NDArray[np.int64]],
    value: int,
    neighbour: int,
    pmf: Callable[[int], NDArray[np.float64]],
    epsilon: float,
    n: int = 1_000_000,
) -> tuple[float, float]:
    """Worst of the two directional delta_hat and the tolerance for an epsilon-DP release.

    ``release(value, n)`` draws ``n`` outputs for one true value; ``pmf(value)`` is the
    claimed output distribution over a support wide enough to hold nearly all mass
    (only used to size the tolerance).
    """
    a, b = release(value, n), release(neighbour, n)
    worst = max(delta_hat(a, b, epsilon), delta_hat(b, a, epsilon))
    return worst, delta_tolerance(pmf(value), pmf(neighbour), n, epsilon)
