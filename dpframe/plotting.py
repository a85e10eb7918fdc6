"""Plots for teaching: what the mechanisms release, how decisions behave, what noise costs.

Every function computes public quantities only (distributions and error bars depend on
the privacy parameters, never on data), draws on a matplotlib ``Axes`` and returns it.
Pass ``ax=`` to draw into an existing figure; otherwise a new figure is created.

matplotlib is imported only when a plot is drawn, so ``import dpframe.plotting`` works
without it; drawing without it raises :class:`~dpframe.errors.MissingDependencyError`, an
``ImportError`` that says how to install it (``pip install "dpframe[plot]"``).

:func:`output_distribution` returns the numbers behind :func:`plot_output_distribution`
for readers who want to print them rather than look at bars.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpframe import _validation
from dpframe._exact import show
from dpframe.errors import (
    InvalidParameterError,
    InvalidParameterTypeError,
    MissingDependencyError,
)
from dpframe.mechanisms import (
    decision_probability,
    geometric,
    geometric_accuracy,
    geometric_rejection_epsilon,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = [
    "output_distribution",
    "plot_decision_curves",
    "plot_error_vs_epsilon",
    "plot_output_distribution",
]

# An unbounded distribution is drawn over the outputs that hold all but this much of its mass.
_WINDOW_MASS = 1e-3
# Refuse to draw more bars than this per true value: the figure would be unreadable and slow.
_MAX_OUTPUTS = 10_001
_METHODS = ("laplace", "cutoff", "generalized")
# Legend text size: matplotlib's "small" (about 8.3 pt at the default 10 pt), the smallest
# that stays readable in a notebook; "x-small" (6.9 pt) is not.
_LEGEND_FONTSIZE = "small"


# ---------------------------------------------------------------- helpers


def _axes(ax: Any) -> Axes:
    """``ax`` checked, or a new figure's Axes; raises MissingDependencyError without matplotlib."""
    try:
        from matplotlib.axes import Axes
    except ImportError as exc:
        raise MissingDependencyError(
            "dpframe.plotting needs matplotlib, which is not installed. Install it with: pip "
            'install "dpframe[plot]" (or pip install matplotlib).'
        ) from exc
    if ax is None:
        import matplotlib.pyplot as plt

        _, new_ax = plt.subplots()
        return new_ax
    if not isinstance(ax, Axes):
        raise InvalidParameterTypeError(
            f"ax must be a matplotlib Axes, got {type(ax).__name__}. Pass ax=None for a new "
            f"figure, or one from fig, ax = plt.subplots()."
        )
    return ax


def _unit_epsilon(epsilon: Any, sensitivity: Any, bounds: Any) -> Fraction:
    """``epsilon / sensitivity``, refused where :func:`dpframe.mechanisms.geometric` refuses it.

    The range check is the mechanism's own: its error bar is computed (cheaply, and
    cached), which validates every parameter the way the mechanism does.
    """
    unit = _validation.epsilon(epsilon) / _validation.sensitivity(sensitivity)
    geometric_accuracy(epsilon=epsilon, sensitivity=sensitivity, bounds=bounds)
    return unit


def _rejection_unit(epsilon: Any, sensitivity: Any, bounds: Any, rule: str) -> float:
    """The rejection variant's ε' per unit of sensitivity, from the public function."""
    chosen = geometric_rejection_epsilon(
        epsilon=epsilon, sensitivity=sensitivity, bounds=bounds, rule=rule
    )
    if chosen <= 0:
        raise InvalidParameterError(
            f"seed 002's epsilon' = epsilon - ln M is {show(chosen)} here: no budget is left "
            f"for the noise. Use rejection_rule=\"largest\" (dpframe's verified epsilon'), a "
            f'larger epsilon, or out_of_range="clamp".'
        )
    return float(chosen / _validation.sensitivity(sensitivity))


def _true_values(values: Any) -> NDArray[np.int64]:
    """One or more true integer values, as a non-empty 1-D int64 array."""
    array = _validation.integer_array(np.atleast_1d(np.asarray(values)), "true_values")
    if array.ndim != 1 or array.size == 0:
        raise InvalidParameterError(
            f"true_values must be one integer or a flat list of integers, got shape "
            f"{array.shape}. Example: true_values=[19, 20, 21]."
        )
    return array


def _geometric_pmf(noise: NDArray[np.int64], unit: float) -> NDArray[np.float64]:
    """P(N = n) = (1 - a)/(1 + a) · a^|n| with a = exp(-unit); (1 - a)/(1 + a) = tanh(unit/2)."""
    return np.asarray(math.tanh(unit / 2) * np.exp(-unit * np.abs(noise).astype(np.float64)))


def _upper_tail(k: int, unit: float) -> float:
    """P(N >= k) = a^k / (1 + a) for k >= 1 and 1 / (1 + a) for k = 0 (a = exp(-unit))."""
    a = math.exp(-unit)
    return 1 / (1 + a) if k <= 0 else math.exp(-unit * k) / (1 + a)


def _check_outputs(size: int) -> None:
    if size > _MAX_OUTPUTS:
        raise InvalidParameterError(
            f"the distribution spans {size} outputs, more than the {_MAX_OUTPUTS} this plot "
            f"draws as bars. Pass bounds=(lo, hi) to the range of possible results, or use a "
            f"larger epsilon."
        )


# ---------------------------------------------------------------- output distribution


def output_distribution(
    true_value: int,
    *,
    epsilon: float | Fraction,
    sensitivity: float | Fraction = 1,
    bounds: tuple[int, int] | None = None,
    out_of_range: str = "clamp",
    rejection_rule: str = "largest",
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """The probability of each output of :func:`dpframe.mechanisms.geometric` for one true value.

    Parameters
    ----------
    true_value : int
        The exact integer result being released.
    epsilon, sensitivity : float or Fraction
        As for :func:`dpframe.mechanisms.geometric`.
    bounds : tuple of int, optional
        As for :func:`dpframe.mechanisms.geometric`.
    out_of_range : {"clamp", "resample"}, default "clamp"
        As for :func:`dpframe.mechanisms.geometric`.
    rejection_rule : {"largest", "seed"}, default "largest"
        With ``out_of_range="resample"``: the ``ε'`` of the distribution, as for
        :func:`dpframe.mechanisms.geometric_rejection_epsilon`. ``"largest"`` is what
        :func:`~dpframe.mechanisms.geometric` draws; ``"seed"`` is seed 002's
        ``ε - ln M``, to show its Figure 2.2 as the seed drew it (not always private,
        never used unchecked by the mechanism).

    Returns
    -------
    outputs : numpy.ndarray of int64
        Consecutive possible outputs: ``lo..hi`` with bounds; without bounds, the
        outputs within ``a`` of ``true_value``, where ``P(|N| > a) <= 0.001`` (the rest
        of the support, holding at most 0.1% of the mass, is left out).
    probabilities : numpy.ndarray of float64
        ``P(output = o)`` for each output ``o``.

    Raises
    ------
    InvalidParameterError, InvalidParameterTypeError
        For parameters :func:`dpframe.mechanisms.geometric` refuses, or when more than
        10,001 outputs would be returned.

    Notes
    -----
    These are the probabilities of the ideal mechanism, from its closed form, with
    ``α = exp(-epsilon/sensitivity)`` (seed 002):

    * no bounds: ``P(v + N = o) = (1 - α)/(1 + α) · α^|o - v|`` (eq. 2.1);
    * ``bounds=(lo, hi)``, ``out_of_range="clamp"`` (the truncated mechanism, section
      2.3): ``v`` is clamped into the bounds, the inner outputs keep eq. 2.1 and the
      end points receive the tails, ``P(o = hi) = P(N >= hi - v)`` with
      ``P(N >= k) = α^k/(1 + α)`` for ``k >= 1`` (and ``1/(1 + α)`` for ``k = 0``);
    * ``out_of_range="resample"`` (section 2.4): eq. 2.1 with ``ε'`` (per unit of
      sensitivity) in place of ``ε/sensitivity``, conditioned on landing in
      ``[lo, hi]``, i.e. ``P(o) ∝ α'^|o - v|`` normalized over ``lo..hi``. ``ε'`` is
      :func:`dpframe.mechanisms.geometric_rejection_epsilon`'s: by default the one the
      mechanism draws with, the largest its exact check accepts; with
      ``rejection_rule="seed"``, the seed's ``ε - ln M``.

    The probabilities the sampler realizes differ from these by a relative factor of
    at most ``exp(2^-19 · (1 + |n| · epsilon/sensitivity))`` at noise ``n`` (see
    :func:`dpframe.mechanisms.geometric`): invisible in a plot, and far below what any
    sample can detect. Computed in float64 (relative error about 1e-15). No privacy
    budget is spent: nothing here depends on data.

    References
    ----------
    Seed ``002_265e5b6700395d7e.txt`` (eq. 2.1, sections 2.3 and 2.4).

    Examples
    --------
    >>> from dpframe.plotting import output_distribution
    >>> outputs, probs = output_distribution(20, epsilon=0.1, bounds=(0, 30))
    >>> round(float(probs[0]), 4), round(float(probs[0] + probs[-1]), 4)
    (0.071, 0.2642)
    """
    values = _true_values(true_value)
    if values.size != 1:
        raise InvalidParameterError(
            f"true_value must be one integer, got {values.size} values. Call once per value, "
            f"or use plot_output_distribution for several."
        )
    resample = _validation.choice(out_of_range, "out_of_range", ("clamp", "resample")) == "resample"
    rule = _validation.choice(rejection_rule, "rejection_rule", ("largest", "seed"))
    unit = _unit_epsilon(epsilon, sensitivity, bounds)
    value = int(values[0])
    if bounds is None:
        if resample:
            raise InvalidParameterError(
                'out_of_range="resample" needs bounds=(lo, hi); without bounds nothing is '
                'out of range. Pass bounds, or leave out_of_range="clamp".'
            )
        # P(|N| > a) = 2 α^(a+1) / (1 + α) <= _WINDOW_MASS
        u = float(unit)
        reach = max(0, math.ceil(math.log(_WINDOW_MASS * (1 + math.exp(-u)) / 2) / -u) - 1)
        _check_outputs(2 * reach + 1)
        outputs = np.arange(value - reach, value + reach + 1, dtype=np.int64)
        return outputs, _geometric_pmf(outputs - value, u)
    lo, hi = _validation.integer_bounds(bounds)
    _check_outputs(hi - lo + 1)
    outputs = np.arange(lo, hi + 1, dtype=np.int64)
    value = min(max(value, lo), hi)
    if hi == lo:
        return outputs, np.ones(1)
    if resample:
        rejection = _rejection_unit(epsilon, sensitivity, (lo, hi), rule)
        weights = np.exp(-rejection * np.abs(outputs - value).astype(np.float64))
        return outputs, weights / weights.sum()
    u = float(unit)
    probabilities = _geometric_pmf(outputs - value, u)
    probabilities[0] = _upper_tail(value - lo, u)  # P(N <= lo - v) = P(N >= v - lo)
    probabilities[-1] = _upper_tail(hi - value, u)
    return outputs, probabilities


def plot_output_distribution(
    true_values: int | Sequence[int] | ArrayLike,
    *,
    epsilon: float | Fraction,
    sensitivity: float | Fraction = 1,
    bounds: tuple[int, int] | None = None,
    out_of_range: str = "clamp",
    samples: ArrayLike | Sequence[ArrayLike] | None = None,
    ax: Axes | None = None,
    rejection_rule: str = "largest",
) -> Axes:
    """Bars of the exact output distribution of :func:`dpframe.mechanisms.geometric`.

    One group of bars per true value, side by side, so that neighbouring values
    (``[19, 20, 21]``) can be compared: differential privacy means their bars differ
    by a factor of at most ``exp(epsilon)`` at every output. With ``samples``, the
    observed frequencies are drawn over the bars as dots.

    Parameters
    ----------
    true_values : int or sequence of int
        The true value(s) whose output distribution to draw.
    epsilon, sensitivity : float or Fraction
        As for :func:`dpframe.mechanisms.geometric`; see :func:`output_distribution`.
    bounds : tuple of int, optional
        As for :func:`dpframe.mechanisms.geometric`.
    out_of_range : {"clamp", "resample"}, default "clamp"
        As for :func:`dpframe.mechanisms.geometric`.
    samples : array_like of int, or a sequence of them, optional
        Outputs actually released, to compare with the exact distribution: one array
        for one true value, or one array per true value (in the same order). Their
        frequencies over the plotted outputs are drawn as dots (outputs beyond the
        plotted range widen it; without bounds the range otherwise holds all but 0.1%
        of the mass).
    ax : matplotlib.axes.Axes, optional
        Where to draw; a new figure by default.
    rejection_rule : {"largest", "seed"}, default "largest"
        As for :func:`output_distribution` (``"seed"`` draws seed 002's Figure 2.2 with
        its ``ε - ln M``).

    Returns
    -------
    matplotlib.axes.Axes
        The axes, holding one ``BarContainer`` (label ``"true value v"``) per true value
        and, with ``samples``, one line of dots (label ``"observed for v (n=...)"``) per
        true value, in the same order. The x ticks are integers (the outputs are), and
        the legend (one entry per true value, and one for all the dots) sits in a band
        kept free above the tallest bar.

    Raises
    ------
    InvalidParameterError, InvalidParameterTypeError
        As :func:`output_distribution`; for ``samples`` that are not integers or do not
        match ``true_values``; for an ``ax`` that is not an Axes.
    MissingDependencyError
        When matplotlib is not installed.

    Notes
    -----
    The bar heights are :func:`output_distribution`: the ideal probabilities of the
    mechanism (eq. 2.1 of seed 002, with the clamped end masses of the truncated
    mechanism or the conditional distribution of the rejection variant), which the
    sampler realizes to within a relative ``2^-19``-scale factor. Nothing here
    depends on data or spends privacy budget; ``samples`` are outputs that were
    already released.

    With ``true_values=[19, 20, 21]``, ``epsilon=0.1``, ``bounds=(0, 30)`` this is
    Figure 2.1 of seed 002; adding ``out_of_range="resample"`` gives Figure 2.2.

    References
    ----------
    Seed ``002_265e5b6700395d7e.txt`` (eq. 2.1, sections 2.3 and 2.4, Figures 2.1 and 2.2).

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from dpframe.plotting import plot_output_distribution
    >>> ax = plot_output_distribution([19, 20, 21], epsilon=0.1, bounds=(0, 30))
    >>> len(ax.containers)
    3
    """
    values = _true_values(true_values)
    resample = _validation.choice(out_of_range, "out_of_range", ("clamp", "resample")) == "resample"
    observed = _samples(samples, values.size)
    distributions = [
        output_distribution(
            int(v),
            epsilon=epsilon,
            sensitivity=sensitivity,
            bounds=bounds,
            out_of_range=out_of_range,
            rejection_rule=rejection_rule,
        )
        for v in values
    ]
    # One common range of outputs: the union of the distributions' and the samples'.
    first = min(int(o[0]) for o, _ in distributions)
    last = max(int(o[-1]) for o, _ in distributions)
    for array in observed:
        if array.size:
            first, last = min(first, int(array.min())), max(last, int(array.max()))
    _check_outputs(last - first + 1)
    axes = _axes(ax)
    outputs = np.arange(first, last + 1, dtype=np.int64)
    width = 0.8 / values.size
    handles: list[Any] = []
    top = 0.0
    for i, (v, (support, probabilities)) in enumerate(zip(values, distributions, strict=True)):
        heights = np.zeros(outputs.size)
        heights[support - first] = probabilities
        top = max(top, float(heights.max()))
        x = outputs + (i - (values.size - 1) / 2) * width
        bars = axes.bar(x, heights, width=width, label=f"true value {int(v)}", alpha=0.85)
        handles.append(bars)
        if observed:
            counts = np.bincount(observed[i] - first, minlength=outputs.size)
            frequencies = counts / max(observed[i].size, 1)
            top = max(top, float(frequencies.max()))
            axes.plot(
                x,
                frequencies,
                linestyle="none",
                marker="o",
                markersize=3,
                color=bars.patches[0].get_facecolor(),
                markeredgecolor="black",
                label=f"observed for {int(v)} (n={observed[i].size})",
            )
    unit = _validation.epsilon(epsilon) / _validation.sensitivity(sensitivity)
    title = f"geometric mechanism, ε/sensitivity = {show(unit)}"
    if bounds is not None:
        lo, hi = _validation.integer_bounds(bounds)
        if resample and hi > lo:
            rejection = _rejection_unit(epsilon, sensitivity, (lo, hi), rejection_rule)
            title += f"\nbounds ({lo}, {hi}), out of range resampled (ε' = {rejection:.4g})"
        else:
            title += f"\nbounds ({lo}, {hi}), clamped"
    axes.set_title(title)
    axes.set_xlabel("released value")
    axes.set_ylabel("probability")
    _integer_ticks(axes)  # outputs are integers: no tick at 2.5
    labels = [f"true value {int(v)}" for v in values]
    if observed:
        # One entry for every line of dots (each in its bars' colour): short enough to fit.
        from matplotlib.lines import Line2D

        sizes = sorted({a.size for a in observed})
        shown_n = f"n={sizes[0]} each" if len(sizes) == 1 else "n=" + "/".join(map(str, sizes))
        handles.append(
            Line2D(
                [],
                [],
                linestyle="none",
                marker="o",
                markersize=3,
                color="white",
                markeredgecolor="black",
            )
        )
        labels.append(f"observed, {shown_n}")
    # The legend sits in a band left free above the tallest bar: one row of up to three
    # entries, else two rows (the axes are seldom wide enough for four).
    columns = len(labels) if len(labels) <= 3 else math.ceil(len(labels) / 2)
    rows = math.ceil(len(labels) / columns)
    axes.set_ylim(0, top * (1.12 + 0.12 * rows))
    axes.legend(
        handles,
        labels,
        ncol=columns,
        loc="upper center",
        fontsize=_LEGEND_FONTSIZE,
        columnspacing=1.0,
        handlelength=1.5,
    )
    return axes


def _integer_ticks(axes: Axes) -> None:
    """Put the x-axis ticks on integers only (the outputs and counts drawn are integers)."""
    from matplotlib.ticker import MaxNLocator

    axes.xaxis.set_major_locator(MaxNLocator(integer=True))


def _samples(samples: Any, k: int) -> list[NDArray[np.int64]]:
    """``samples`` as k int64 arrays (k = number of true values); [] when None."""
    if samples is None:
        return []
    if k == 1:
        arrays = [samples]
    else:
        if isinstance(samples, str) or not isinstance(samples, Sequence | np.ndarray):
            raise InvalidParameterTypeError(
                f"samples must be one array of outputs per true value ({k} of them), got "
                f"{type(samples).__name__}."
            )
        arrays = list(samples)
        if len(arrays) != k:
            raise InvalidParameterError(
                f"samples must hold one array of outputs per true value: {k} true values, "
                f"{len(arrays)} arrays."
            )
    return [_validation.integer_array(a, "samples").reshape(-1) for a in arrays]


# ---------------------------------------------------------------- decision curves


def plot_decision_curves(
    counts: ArrayLike,
    *,
    min_count: int,
    epsilon: float,
    delta: float = 0.0,
    methods: Sequence[str] = _METHODS,
    p: float = 0.5,
    ax: Axes | None = None,
) -> Axes:
    """Curves of ``Pr(decision = True)`` against the true count, for seed 001's decision rules.

    Parameters
    ----------
    counts : array_like of int
        True counts ``N >= 0`` at which to draw the curves (sorted before drawing).
    min_count : int
        ``m``, the number of records that should count as enough.
    epsilon : float
        Privacy-loss parameter of every curve.
    delta : float, default 0.0
        The δ of the ``"generalized"`` curve (see below); must be 0 unless
        ``"generalized"`` is among ``methods``.
    methods : sequence of {"laplace", "cutoff", "generalized"}, default all three
        Which curves to draw.
    p : float, default 0.5
        ``Pr(True)`` at ``N = min_count`` for ``"laplace"`` and ``"generalized"``; must
        be 0.5 when ``"cutoff"`` is the only method (it has no such choice).
    ax : matplotlib.axes.Axes, optional
        Where to draw; a new figure by default.

    Returns
    -------
    matplotlib.axes.Axes
        One line per method (``gid`` the method's name, label with its ``(ε, δ)``, and
        ``p`` when it is not ½) whose y data is
        :func:`dpframe.mechanisms.decision_probability` at the sorted counts, and a
        dashed vertical line at ``min_count`` (``gid`` ``"min_count"``). The legend
        sits below the axes, where it cannot hide a curve; the x ticks are integers.

    Raises
    ------
    InvalidParameterError, InvalidParameterTypeError
        For an unknown or repeated method, a nonzero ``delta`` without
        ``"generalized"``, ``p != 0.5`` with ``"cutoff"`` alone, anything
        :func:`dpframe.mechanisms.decision_probability` refuses, or a bad ``ax``.
    MissingDependencyError
        When matplotlib is not installed.

    Notes
    -----
    Each rule has its own privacy cost, so each curve is drawn at the cost it really
    has, shown in its label:

    * ``"laplace"`` is pure ε-DP: drawn with δ = 0, whatever ``delta`` is.
    * ``"cutoff"`` is ``(ε, 1 - e^-ε)``-DP and nothing else (seed 001 §5): drawn with
      that δ, and with probability 1 at ``min_count`` (``p`` does not apply).
    * ``"generalized"`` is drawn with ``delta``: with ``delta = 0`` it coincides with
      the Laplace curve at ``p = 0.5``; with ``delta > 0`` it is the steepest curve that
      ``(ε, δ)``-DP allows (§6).

    The curves are public: they depend on the parameters only, so drawing them spends
    no privacy budget. The y values are the probabilities the sampler of
    :func:`dpframe.mechanisms.threshold_decision` realizes, rounded to float.

    References
    ----------
    Seed ``001_ac8d45847700a6b3.txt`` (§4 Laplace, §5 cutoff, §6 generalized).

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> from dpframe.plotting import plot_decision_curves
    >>> ax = plot_decision_curves(np.arange(0, 201), min_count=100, epsilon=0.1,
    ...                           delta=1e-3)
    >>> sorted(line.get_gid() for line in ax.lines)
    ['cutoff', 'generalized', 'laplace', 'min_count']
    """
    if isinstance(methods, str) or not isinstance(methods, Sequence) or not methods:
        raise InvalidParameterTypeError(
            f"methods must be a non-empty list of method names, got {methods!r}. Example: "
            f'methods=("laplace", "generalized").'
        )
    chosen = [_validation.choice(m, "methods", _METHODS) for m in methods]
    if len(set(chosen)) != len(chosen):
        raise InvalidParameterError(f"methods lists a method more than once: {list(methods)}.")
    eps = _validation.epsilon(epsilon)
    dlt = _validation.delta(delta)
    prob = _validation.probability(p, "p")
    if dlt != 0 and "generalized" not in chosen:
        raise InvalidParameterError(
            f"delta={delta!r} only applies to the 'generalized' curve ('laplace' spends no "
            f"delta and 'cutoff' always spends 1 - exp(-epsilon)); add 'generalized' to "
            f"methods or pass delta=0."
        )
    if prob != 0.5 and chosen == ["cutoff"]:
        raise InvalidParameterError(
            f"p={p!r} does not apply to the 'cutoff' curve, which is 1 at min_count; leave p "
            f"at 0.5 or add 'laplace' or 'generalized' to methods."
        )
    counts_array = np.sort(np.asarray(counts).reshape(-1))
    # The mechanism's own checks of min_count and the epsilon range, before any float below.
    decision_probability(np.zeros(0, dtype=np.int64), min_count=min_count, epsilon=epsilon)
    # 1 - e^-ε to float, kept below 1 (the float nearest it is accepted as the acknowledgement).
    cutoff_delta = min(-math.expm1(-float(eps)), math.nextafter(1.0, 0.0))
    settings: dict[str, tuple[Any, Any]] = {
        "laplace": (0.0, p),
        "cutoff": (cutoff_delta, 0.5),
        "generalized": (delta, p),
    }
    curves = []
    for method in chosen:  # all computed (and validated) before anything is drawn
        method_delta, method_p = settings[method]
        probabilities = decision_probability(
            counts_array,
            min_count=min_count,
            epsilon=epsilon,
            delta=method_delta,
            method=method,
            p=method_p,
        )
        curves.append((method, method_delta, probabilities))
    axes = _axes(ax)
    for method, method_delta, probabilities in curves:
        shown = show(method_delta)
        delta_text = f"1 − exp(−ε) ≈ {shown}" if method == "cutoff" else shown
        # p moves the curve (k = m + ln(2(1 - p))/ε for "laplace"): say so when it is not ½
        p_text = "" if method == "cutoff" or prob == 0.5 else f", p = {prob:.4g}"
        axes.plot(
            counts_array,
            probabilities,
            label=f"{method} (ε = {show(eps)}, δ = {delta_text}{p_text})",
            gid=method,
        )
    axes.axvline(
        int(min_count),
        color="grey",
        linestyle="--",
        label=f"min_count = {min_count}",
        gid="min_count",
    )
    axes.set_xlabel("true count N")
    axes.set_ylabel("Pr(decision = True)")
    axes.set_ylim(-0.02, 1.02)
    axes.set_title("threshold decisions: is N >= min_count?")
    _integer_ticks(axes)
    # Below the axes: inside, the box hides the steep part of some curve whatever the corner.
    axes.legend(
        loc="upper center",
        bbox_to_anchor=(0.5, -0.15),
        fontsize=_LEGEND_FONTSIZE,
        frameon=False,
    )
    return axes


# ---------------------------------------------------------------- error bars


def plot_error_vs_epsilon(
    epsilons: ArrayLike | Sequence[float | Fraction],
    *,
    sensitivity: float | Fraction = 1,
    alpha: float = 0.05,
    draws: int | None = None,
    ax: Axes | None = None,
) -> Axes:
    """The error bar of the geometric mechanism against epsilon (log scale).

    Parameters
    ----------
    epsilons : array_like of float (or Fraction)
        The privacy-loss parameters to compare (each > 0); drawn in increasing order.
    sensitivity : float or Fraction, default 1
        As for :func:`dpframe.mechanisms.geometric`.
    alpha : float, default 0.05
        The error exceeds the bar with probability at most ``alpha`` (0.05: a 95% bar).
    draws : int, optional
        If given, also draw this many noise values for each epsilon and plot the
        observed ``(1 - alpha)`` error: the smallest ``a`` that at least a fraction
        ``1 - alpha`` of the draws stay within (``|noise| <= a``).
    ax : matplotlib.axes.Axes, optional
        Where to draw; a new figure by default.

    Returns
    -------
    matplotlib.axes.Axes
        A line (``gid`` ``"error_bar"``) whose y data is
        :func:`dpframe.mechanisms.geometric_accuracy` at each sorted epsilon and, with
        ``draws``, points (``gid`` ``"observed"``) with the observed errors.

    Raises
    ------
    InvalidParameterError, InvalidParameterTypeError
        For an empty or non-numeric ``epsilons``, parameters
        :func:`dpframe.mechanisms.geometric_accuracy` refuses, a ``draws`` that is not
        a positive integer, or a bad ``ax``.
    MissingDependencyError
        When matplotlib is not installed.

    Notes
    -----
    The bar is exact: ``geometric_accuracy`` evaluates ``P(|N| > a)`` in rational
    arithmetic for the noise dpframe draws (``2 α^(a+1)/(1 + α)`` for the ideal
    mechanism, ``α = exp(-ε/sensitivity)``), so it shrinks like ``1/ε``: halving
    epsilon doubles the error. It depends on public parameters only and spends no
    privacy budget. The observed errors come from cryptographically random noise
    added to nothing (no data is involved); with many draws they sit on the bar.

    References
    ----------
    Seed ``002_265e5b6700395d7e.txt`` (eq. 2.1).

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from dpframe.plotting import plot_error_vs_epsilon
    >>> ax = plot_error_vs_epsilon([0.1, 1.0])
    >>> [int(y) for y in ax.lines[0].get_ydata()]
    [30, 3]
    """
    raw = np.asarray(epsilons)
    if raw.ndim > 1 or raw.size == 0 or raw.dtype.kind not in "iufO":
        raise InvalidParameterTypeError(
            f"epsilons must be a non-empty flat list of positive numbers, got {epsilons!r}. "
            f"Example: epsilons=[0.01, 0.1, 1.0]."
        )
    checked = sorted(_validation.epsilon(e, "epsilons") for e in raw.reshape(-1).tolist())
    for e in (checked[0], checked[-1]):  # they are drawn on a log axis of floats
        if not Fraction(1, 10**300) <= e <= 10**300:
            raise InvalidParameterError(
                f"epsilons must lie between 1e-300 and 1e300 to be drawn, got {show(e)}."
            )
    level = _validation.probability(alpha, "alpha")
    n = None if draws is None else _validation.positive_int(draws, "draws")
    bars = [geometric_accuracy(epsilon=e, sensitivity=sensitivity, alpha=alpha) for e in checked]
    observed: list[int] = []
    if n is not None:
        rank = math.ceil((1 - level) * n)  # the rank-th smallest |noise|, counting from 1
        for e in checked:
            noise = np.abs(
                geometric(np.zeros(n, dtype=np.int64), epsilon=e, sensitivity=sensitivity)
            )
            observed.append(int(np.partition(noise, rank - 1)[rank - 1]))
    axes = _axes(ax)
    x = [float(e) for e in checked]
    percent = f"{100 * (1 - level):g}%"
    axes.plot(x, bars, marker="o", label=f"{percent} error bar (exact)", gid="error_bar")
    if observed:
        axes.plot(
            x,
            observed,
            linestyle="none",
            marker="x",
            color="black",
            label=f"observed {percent} error ({draws} draws each)",
            gid="observed",
        )
    axes.set_xscale("log")
    if min(bars) > 0 and (not observed or min(observed) > 0):
        axes.set_yscale("log")
    else:
        axes.set_yscale("symlog", linthresh=1)
        axes.set_ylim(bottom=0)
    axes.set_xlabel("epsilon")
    axes.set_ylabel(f"|error| at {percent} confidence")
    axes.set_title(f"geometric mechanism, sensitivity {show(Fraction(sensitivity))}")
    axes.legend()
    return axes
