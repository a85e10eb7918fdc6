"""Extreme parameters (issue 13): an answer or dpframe's own error, never a raw error or a hang.

Every numeric parameter of every public function of :mod:`dpframe.mechanisms` and
:mod:`dpframe.plotting` is drawn across the float64 range (subnormals, 5e-324, 1e-300,
1e300, ±1e308, infinities, NaN) and as exact Fractions of any size. Each call must
return a result of the documented kind or raise a :class:`~dpframe.errors.DPFrameError`
whose message names the parameter or the usable range. pytest-timeout's per-test limit
detects hangs (it is not a speed assertion: it is far above the normal running time).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dpframe  # noqa: F401  (registers .dp)
import dpframe.mechanisms as dpm
from dpframe import _validation, plotting
from dpframe.errors import DPFrameError, InvalidParameterError, NoiseOverflowError

HANG_LIMIT = 120  # seconds per test; the tests take a few seconds each

SPECIAL_FLOATS = [
    0.0,
    -0.0,
    5e-324,
    2.2250738585072014e-308,  # smallest normal
    1e-300,
    1e-30,
    1e-17,
    1e-9,
    1e-3,
    0.05,
    0.5,
    1.0,
    1.0 - 2**-53,
    2.0,
    200.0,
    201.0,
    1e9,
    1e20,
    1e300,
    1e308,
    1.7976931348623157e308,
    -1e308,
    -1.0,
    -5e-324,
    math.inf,
    -math.inf,
    math.nan,
]
SPECIAL_FRACTIONS = [
    Fraction(1, 10**400),
    Fraction(10**400),
    Fraction(-1, 10**400),
    Fraction(1) - Fraction(1, 10**400),
    Fraction(1) + Fraction(1, 10**400),
    Fraction(10**400 + 1, 10**400 - 1),
    Fraction(1, 3),
    Fraction(0),
]

floats = st.one_of(st.sampled_from(SPECIAL_FLOATS), st.floats(allow_nan=True, allow_infinity=True))
fractions = st.one_of(
    st.sampled_from(SPECIAL_FRACTIONS),
    st.builds(
        Fraction,
        st.integers(-(10**500), 10**500),
        st.integers(1, 10**500),
    ),
)
numbers = st.one_of(floats, fractions, st.integers(-(10**30), 10**30))
integers = st.one_of(
    st.sampled_from([0, 1, 2, 30, 10**6, 2**61, 2**61 + 1, 2**62, 2**62 + 1, -1, -(2**61)]),
    st.integers(-(10**30), 10**30),
)
widths = st.sampled_from([0, 1, 2, 3, 30, 100, 1000])
int_bounds = st.one_of(
    st.none(),
    st.tuples(integers, integers),
    st.builds(lambda lo, w: (lo, lo + w), st.integers(-100, 100), widths),
)
real_bounds = st.one_of(
    st.tuples(numbers, numbers),
    st.builds(lambda lo, w: (lo, lo + w), st.sampled_from([-1e308, -1000.0, 0.0, 1e15]), floats),
    st.just((0.0, 2.0)),
)

SETTINGS = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def _answer_or_own_error(call: Callable[[], Any]) -> Any:
    """Run ``call``: a result, or a DPFrameError with a message that says what to do."""
    try:
        return call()
    except DPFrameError as error:
        message = str(error)
        assert len(message) > 20, message
        return error


# ---------------------------------------------------------------- the mechanisms


@pytest.mark.timeout(HANG_LIMIT)
@SETTINGS
@given(epsilon=numbers, sensitivity=numbers, bounds=int_bounds, constant_time=st.booleans())
def test_geometric(epsilon: Any, sensitivity: Any, bounds: Any, constant_time: bool) -> None:
    result = _answer_or_own_error(
        lambda: dpm.geometric(
            [0, 5, 17],
            epsilon=epsilon,
            sensitivity=sensitivity,
            bounds=bounds,
            constant_time=constant_time and bounds is not None,
        )
    )
    if not isinstance(result, DPFrameError):
        assert result.shape == (3,)
        if bounds is not None:
            assert np.all((result >= bounds[0]) & (result <= bounds[1]))


@pytest.mark.timeout(HANG_LIMIT)
@SETTINGS
@given(
    epsilon=numbers,
    sensitivity=numbers,
    lo=st.integers(-50, 50),
    width=st.sampled_from([1, 2, 3, 30, 300]),
)
def test_geometric_resample(epsilon: Any, sensitivity: Any, lo: int, width: int) -> None:
    result = _answer_or_own_error(
        lambda: dpm.geometric(
            [lo, lo + width],
            epsilon=epsilon,
            sensitivity=sensitivity,
            bounds=(lo, lo + width),
            out_of_range="resample",
        )
    )
    if not isinstance(result, DPFrameError):
        assert np.all((result >= lo) & (result <= lo + width))


@pytest.mark.timeout(HANG_LIMIT)
@SETTINGS
@given(epsilon=numbers, sensitivity=numbers, bounds=int_bounds, alpha=numbers)
def test_geometric_accuracy(epsilon: Any, sensitivity: Any, bounds: Any, alpha: Any) -> None:
    result = _answer_or_own_error(
        lambda: dpm.geometric_accuracy(
            epsilon=epsilon, sensitivity=sensitivity, bounds=bounds, alpha=alpha
        )
    )
    if not isinstance(result, DPFrameError):
        assert isinstance(result, int)
        assert result >= 0


@pytest.mark.timeout(HANG_LIMIT)
@SETTINGS
@given(
    epsilon=numbers,
    alpha=numbers,
    terms=st.one_of(st.sampled_from([1, 2, 30, 10**4, 10**6, 2**40, 2**41]), integers),
    absolute=st.booleans(),
)
def test_geometric_accuracy_of_sums(epsilon: Any, alpha: Any, terms: Any, absolute: bool) -> None:
    result = _answer_or_own_error(
        lambda: dpm.geometric_accuracy(epsilon=epsilon, alpha=alpha, terms=terms, absolute=absolute)
    )
    if not isinstance(result, DPFrameError):
        assert result >= 0


@pytest.mark.timeout(HANG_LIMIT)
@SETTINGS
@given(epsilon=numbers, sensitivity=numbers, lo=st.integers(-5, 5), width=widths)
def test_geometric_rejection_epsilon(epsilon: Any, sensitivity: Any, lo: int, width: int) -> None:
    for rule in ("largest", "seed"):
        result = _answer_or_own_error(
            lambda rule=rule: dpm.geometric_rejection_epsilon(
                epsilon=epsilon, sensitivity=sensitivity, bounds=(lo, lo + width), rule=rule
            )
        )
        if not isinstance(result, DPFrameError) and rule == "largest":
            assert 0 < result < _validation.epsilon(epsilon)  # epsilon as dpframe reads it


@pytest.mark.timeout(HANG_LIMIT)
@SETTINGS
@given(epsilon=numbers, sensitivity=numbers, bounds=real_bounds)
def test_laplace(epsilon: Any, sensitivity: Any, bounds: Any) -> None:
    result = _answer_or_own_error(
        lambda: dpm.laplace([0.0, 1.5], epsilon=epsilon, sensitivity=sensitivity, bounds=bounds)
    )
    if not isinstance(result, DPFrameError):
        assert np.all(np.isfinite(result))
        assert np.all((result >= float(bounds[0])) & (result <= float(bounds[1])))


@pytest.mark.timeout(HANG_LIMIT)
@SETTINGS
@given(epsilon=numbers, sensitivity=numbers, bounds=real_bounds, alpha=numbers)
def test_laplace_accuracy(epsilon: Any, sensitivity: Any, bounds: Any, alpha: Any) -> None:
    result = _answer_or_own_error(
        lambda: dpm.laplace_accuracy(
            epsilon=epsilon, sensitivity=sensitivity, bounds=bounds, alpha=alpha
        )
    )
    if not isinstance(result, DPFrameError):
        assert 0 <= result <= float(bounds[1]) - float(bounds[0])


@pytest.mark.timeout(HANG_LIMIT)
@SETTINGS
@given(epsilon=numbers, delta=numbers, sensitivity=numbers, bounds=real_bounds)
def test_bounded_laplace(epsilon: Any, delta: Any, sensitivity: Any, bounds: Any) -> None:
    result = _answer_or_own_error(
        lambda: dpm.bounded_laplace(
            [0.0, 1.5], epsilon=epsilon, delta=delta, sensitivity=sensitivity, bounds=bounds
        )
    )
    if not isinstance(result, DPFrameError):
        assert np.all((result >= float(bounds[0])) & (result <= float(bounds[1])))


@pytest.mark.timeout(HANG_LIMIT)
@SETTINGS
@given(epsilon=numbers, delta=numbers, sensitivity=numbers, bounds=real_bounds, alpha=numbers)
def test_bounded_laplace_accuracy(
    epsilon: Any, delta: Any, sensitivity: Any, bounds: Any, alpha: Any
) -> None:
    result = _answer_or_own_error(
        lambda: dpm.bounded_laplace_accuracy(
            epsilon=epsilon, delta=delta, sensitivity=sensitivity, bounds=bounds, alpha=alpha
        )
    )
    if not isinstance(result, DPFrameError):
        assert 0 <= result <= float(bounds[1]) - float(bounds[0])


METHODS = st.sampled_from(["laplace", "cutoff", "generalized"])


@pytest.mark.timeout(HANG_LIMIT)
@SETTINGS
@given(
    min_count=integers,
    epsilon=numbers,
    delta=numbers,
    method=METHODS,
    p=numbers,
    count=st.one_of(st.sampled_from([0, 1, 100, 2**62]), st.integers(0, 2**62)),
)
def test_threshold_decision_and_probability(
    min_count: Any, epsilon: Any, delta: Any, method: str, p: Any, count: int
) -> None:
    kwargs = {"min_count": min_count, "epsilon": epsilon, "delta": delta, "method": method, "p": p}
    decided = _answer_or_own_error(lambda: dpm.threshold_decision(count, **kwargs))
    curve = _answer_or_own_error(lambda: dpm.decision_probability([0, count, 2**62], **kwargs))
    assert isinstance(decided, DPFrameError) == isinstance(curve, DPFrameError)
    if not isinstance(curve, DPFrameError):
        assert isinstance(decided, bool)
        assert np.all((curve >= 0) & (curve <= 1))


# ---------------------------------------------------------------- plotting


@pytest.fixture(autouse=True)
def _close_figures() -> Any:
    yield
    plt.close("all")


@pytest.mark.timeout(HANG_LIMIT)
@SETTINGS
@given(
    epsilon=numbers,
    sensitivity=numbers,
    bounds=st.one_of(st.none(), st.builds(lambda w: (0, w), widths)),
    resample=st.booleans(),
)
def test_output_distribution(epsilon: Any, sensitivity: Any, bounds: Any, resample: bool) -> None:
    out_of_range = "resample" if resample and bounds is not None else "clamp"
    result = _answer_or_own_error(
        lambda: plotting.output_distribution(
            3, epsilon=epsilon, sensitivity=sensitivity, bounds=bounds, out_of_range=out_of_range
        )
    )
    if not isinstance(result, DPFrameError):
        outputs, probabilities = result
        assert outputs.shape == probabilities.shape
        assert np.all(np.isfinite(probabilities))
        assert abs(probabilities.sum() - 1) < 1e-2


@pytest.mark.timeout(HANG_LIMIT)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    epsilon=numbers,
    sensitivity=numbers,
    bounds=st.one_of(st.none(), st.builds(lambda w: (0, w), widths)),
)
def test_plot_output_distribution(epsilon: Any, sensitivity: Any, bounds: Any) -> None:
    _answer_or_own_error(
        lambda: plotting.plot_output_distribution(
            [1, 2], epsilon=epsilon, sensitivity=sensitivity, bounds=bounds
        )
    )
    plt.close("all")


@pytest.mark.timeout(HANG_LIMIT)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(min_count=integers, epsilon=numbers, delta=numbers, p=numbers)
def test_plot_decision_curves(min_count: Any, epsilon: Any, delta: Any, p: Any) -> None:
    _answer_or_own_error(
        lambda: plotting.plot_decision_curves(
            np.arange(0, 50), min_count=min_count, epsilon=epsilon, delta=delta, p=p
        )
    )
    plt.close("all")


@pytest.mark.timeout(HANG_LIMIT)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(epsilon=numbers, sensitivity=numbers, alpha=numbers)
def test_plot_error_vs_epsilon(epsilon: Any, sensitivity: Any, alpha: Any) -> None:
    _answer_or_own_error(
        lambda: plotting.plot_error_vs_epsilon(
            [epsilon, 1.0], sensitivity=sensitivity, alpha=alpha, draws=10
        )
    )
    plt.close("all")


# ---------------------------------------------------------------- the cases issue 13 measured


@pytest.mark.timeout(HANG_LIMIT)
def test_the_reported_hangs_and_raw_errors_are_dpframe_errors() -> None:
    """Each of these hung or raised a raw error before (issue 13); now each is refused."""
    cases: list[tuple[Callable[[], Any], str]] = [
        (
            lambda: dpm.bounded_laplace([0.5], epsilon=1e20, sensitivity=1.0, bounds=(0.0, 1.0)),
            "epsilon",
        ),
        (
            lambda: dpm.geometric([5], epsilon=1e-9, bounds=(0, 10), out_of_range="resample"),
            "resample",
        ),
        (lambda: dpm.geometric([5], epsilon=Fraction(1, 10**400)), "epsilon"),
        (lambda: dpm.geometric([5], epsilon=5e-324, bounds=(0, 10)), "epsilon"),
        (lambda: dpm.geometric([5], epsilon=1e20), "epsilon"),
        (lambda: dpm.geometric_accuracy(epsilon=1.0, alpha=Fraction(1, 10**400)), "alpha"),
        (lambda: dpm.laplace([0.5], epsilon=1e20, sensitivity=1.0, bounds=(0.0, 1.0)), "epsilon"),
        (
            lambda: dpm.threshold_decision(
                5, min_count=5, epsilon=1.0, p=Fraction(1) - Fraction(1, 10**400)
            ),
            "p",
        ),
    ]
    for call, word in cases:
        with pytest.raises((InvalidParameterError, NoiseOverflowError)) as caught:
            call()
        assert re.search(word, str(caught.value)), str(caught.value)


@pytest.mark.timeout(HANG_LIMIT)
def test_valid_extremes_still_answer() -> None:
    """Validity twin: the edges of the usable ranges are accepted, not refused wholesale."""
    assert dpm.geometric([1], epsilon=1e-18, bounds=(0, 10))[0] in range(11)
    assert dpm.geometric([1], epsilon=200)[0] == 1  # noise 0 but with probability ~e^-200
    assert dpm.geometric_accuracy(epsilon=1.0, alpha=1e-300) > 0
    wide = dpm.geometric([5], epsilon=0.01, bounds=(0, 10), out_of_range="resample")
    assert wide[0] in range(11)
    assert dpm.bounded_laplace([0.5], epsilon=1e6, sensitivity=1.0, bounds=(0.0, 1.0))[0] >= 0.0
    assert dpm.threshold_decision(5, min_count=5, epsilon=2.0**-64) in (True, False)
    assert dpm.threshold_decision(5, min_count=5, epsilon=1.0, p=1e-300) in (True, False)


# ---------------------------------------------------------------- the accessor


def _frame() -> Any:
    import pandas as pd

    frame = pd.DataFrame(
        {
            "unit": np.repeat(np.arange(50), 2),
            "k": np.tile(["a", "b"], 50),
            "x": np.linspace(0.0, 10.0, 100),
        }
    )
    frame.dp.set_budget(epsilon=math.inf, delta=0.5, domains={"k": ["a", "b"]}, privacy_unit="unit")
    return frame


ACCESSOR_CALLS: dict[str, Callable[..., Any]] = {
    "count": lambda f, e, b, m: f.dp.count(epsilon=e, by="k", max_rows=m, max_groups=2),
    "crosstab": lambda f, e, b, m: f.dp.crosstab("k", "k", epsilon=e, max_rows=m, max_groups=1),
    "sum": lambda f, e, b, m: f.dp.sum("x", epsilon=e, bounds=b, by="k", max_rows=m, max_groups=2),
    "mean": lambda f, e, b, m: f.dp.mean("x", epsilon=e, bounds=b, max_rows=m),
    "std": lambda f, e, b, m: f.dp.std("x", epsilon=e, bounds=b, max_rows=m),
    "median": lambda f, e, b, m: f.dp.median("x", epsilon=e, bounds=b, max_rows=m),
    "value_counts": lambda f, e, b, m: f.dp.value_counts("k", epsilon=e, max_rows=m, max_groups=1),
    "gaussian count": lambda f, e, b, m: f.dp.count(
        noise="gaussian", rho=e, by="k", max_rows=m, max_groups=2
    ),
    "gaussian mean": lambda f, e, b, m: f.dp.mean(
        "x", noise="gaussian", epsilon=e, delta=1e-6, bounds=b, max_rows=m
    ),
    "describe": lambda f, e, b, m: f.dp.describe(epsilon=e, bounds={"x": b}, max_rows=m),
    "gaussian describe": lambda f, e, b, m: f.dp.describe(
        noise="gaussian", rho=e, bounds={"x": b}, max_rows=m
    ),
    "private keys": lambda f, e, b, m: f.dp.count(
        epsilon=e, delta=1e-9, by="x", private_keys=True, max_rows=m, max_groups=1
    ),
}


@pytest.mark.timeout(HANG_LIMIT)
@pytest.mark.parametrize("method", sorted(ACCESSOR_CALLS))
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    epsilon=numbers,
    bounds=st.one_of(real_bounds, st.just((0.0, 10.0))),
    max_rows=st.one_of(integers, st.just(1), floats),
)
def test_accessor_methods(method: str, epsilon: Any, bounds: Any, max_rows: Any) -> None:
    """Every accessor method, on a unit-protected frame, with extreme epsilon (or rho),
    bounds and contribution bounds: a result or dpframe's error, in bounded time, and a
    refused call charges nothing."""
    frame = _frame()
    result = _answer_or_own_error(lambda: ACCESSOR_CALLS[method](frame, epsilon, bounds, max_rows))
    if isinstance(result, DPFrameError):
        assert frame.dp.ledger.history.empty


@pytest.mark.timeout(HANG_LIMIT)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(min_count=integers, epsilon=numbers, delta=numbers, p=numbers, max_rows=integers)
def test_accessor_threshold_decision(
    min_count: Any, epsilon: Any, delta: Any, p: Any, max_rows: Any
) -> None:
    frame = _frame()
    result = _answer_or_own_error(
        lambda: frame.dp.threshold_decision(
            min_count=min_count,
            epsilon=epsilon,
            delta=delta,
            method="generalized",
            p=p,
            by="k",
            max_rows=max_rows,
            max_groups=2,
        )
    )
    if isinstance(result, DPFrameError):
        assert frame.dp.ledger.history.empty


def test_constant_time_bounds_too_wide_for_its_coins_are_refused() -> None:
    # Bounds 2**62 wide at epsilon 2**-60 need 62 head coins: an "internal error" before.
    wide = (-(2**61), 2**61)
    with pytest.raises(InvalidParameterError, match="constant_time"):
        dpm.geometric(np.zeros(4, dtype=np.int64), epsilon=2.0**-60, bounds=wide,
                             constant_time=True)  # fmt: skip
    zeros = np.zeros(4, dtype=np.int64)  # without constant_time, no coin limit: released
    assert np.abs(dpm.geometric(zeros, epsilon=2.0**-60, bounds=wide)).max() <= 2**61
    narrower = (-(2**61), 2**61 - 1)  # validity twin: 2**61 wide, 61 coins, released
    out = dpm.geometric(
        np.zeros(4, dtype=np.int64), epsilon=2.0**-50, bounds=narrower, constant_time=True
    )
    assert ((out >= narrower[0]) & (out <= narrower[1])).all()


def test_accuracy_below_the_smallest_alpha_is_refused_everywhere() -> None:
    # quantile_accuracy read alpha=1e-320 as 0 (the bar of the smallest float, silently);
    # discrete_gaussian_accuracy raised OverflowError. geometric_accuracy refused it.
    calls = [
        lambda a: dpm.geometric_accuracy(epsilon=1.0, alpha=a),
        lambda a: dpm.quantile_accuracy(0.5, epsilon=1.0, bounds=(0, 10), alpha=a),
        lambda a: dpm.discrete_gaussian_accuracy(sigma=3.0, alpha=a),
    ]
    for call in calls:
        for tiny in (1e-310, Fraction(1, 10**400)):
            with pytest.raises(InvalidParameterError, match="alpha"):
                call(tiny)
        assert call(0.05) > 0


def test_automatic_bounds_at_a_huge_epsilon_are_refused_with_a_dpframe_error() -> None:
    # exp(-epsilon) is 0.0 in floats from ~745 on: the threshold's log(0) raised a bare
    # ValueError ("math domain error").
    frame = pd.DataFrame({"x": np.full(1000, 5.0)})
    frame.dp.set_budget(epsilon=math.inf)
    for epsilon in (3000.0, 1e6):
        with pytest.raises(InvalidParameterError, match="meaningful privacy"):
            frame.dp.sum("x", epsilon=epsilon, bounds="auto")
    assert frame.dp.ledger.spent.epsilon == 0
    frame.dp.sum("x", epsilon=1.0, bounds="auto")  # twin: a usual epsilon is released
    assert frame.dp.ledger.spent.epsilon == 1
