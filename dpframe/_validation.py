"""Every check of a user-supplied parameter, in one place.

Each checker either returns the parameter in the exact form the rest of dpframe uses
(privacy parameters as :class:`~fractions.Fraction`, bounds as Python ints or floats)
or raises a dpframe error whose message names the parameter and the fix. Nothing here
looks at data values except :func:`integer_array`, which checks their type and range.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, cast

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dpframe._exact import simplest_rational
from dpframe.errors import (
    DomainError,
    InvalidParameterError,
    InvalidParameterTypeError,
    MissingColumnError,
    NoiseOverflowError,
)

__all__: list[str] = []

# Integers released by the geometric family stay inside ±2**62 so that value + noise
# can never wrap around int64.
INT_LIMIT = 2**62


def flag(value: Any, name: str) -> bool:
    """A yes/no parameter: ``True`` or ``False`` (numpy bools too), nothing else."""
    if not isinstance(value, bool | np.bool_):
        raise InvalidParameterTypeError(f"{name} must be True or False, got {value!r}.")
    return bool(value)


def text(value: Any, name: str) -> str:
    """A ``str`` parameter."""
    if not isinstance(value, str):
        raise InvalidParameterTypeError(
            f"{name} must be a str, got {value!r} of type {type(value).__name__}."
        )
    return value


def label_texts(labels: Any, name: str) -> tuple[str, ...]:
    """Column labels shown as text: one label (a str) or a sequence of them."""
    if isinstance(labels, str):
        return (labels,)
    if not isinstance(labels, Sequence | pd.Index):
        raise InvalidParameterTypeError(
            f"{name} must be a sequence of column labels, got {labels!r} of type "
            f"{type(labels).__name__}."
        )
    return tuple(str(label) for label in labels)


def noise_scale(value: Any) -> float | None:
    """A noise scale for display: a finite number >= 0, or None."""
    if value is None:
        return None
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise InvalidParameterTypeError(
            f"noise_scale must be a number or None, got {value!r} of type {type(value).__name__}."
        )
    scale = float(value)
    if not (math.isfinite(scale) and scale >= 0):
        raise InvalidParameterError(
            f"noise_scale must be a finite number >= 0, or None when the release has no "
            f"noise scale; got {value!r}."
        )
    return scale


def _real(value: Any, name: str, fix: str) -> Fraction:
    """``value`` as an exact Fraction, refusing non-numbers, bools, NaN and infinities."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise InvalidParameterTypeError(
            f"{name} must be a real number, got {value!r} of type {type(value).__name__}. {fix}"
        )
    if isinstance(value, numbers.Integral):
        return Fraction(int(value))
    if isinstance(value, Fraction):
        return value
    as_float = float(value)
    if not math.isfinite(as_float):
        raise InvalidParameterError(f"{name} must be finite, got {value!r}. {fix}")
    return simplest_rational(as_float)


def epsilon(value: Any, name: str = "epsilon") -> Fraction:
    """A privacy-loss parameter: a finite real number > 0."""
    fix = f"Pass a positive number such as {name}=1.0 (smaller means more privacy, more noise)."
    result = _real(value, name, fix)
    if result <= 0:
        raise InvalidParameterError(f"{name} must be > 0, got {value!r}. {fix}")
    return result


def delta(value: Any, name: str = "delta", *, allow_zero: bool = True) -> Fraction:
    """A failure probability: a finite real in [0, 1) (or (0, 1) when ``allow_zero`` is False)."""
    fix = f"Pass {name}=0 for pure DP, or a small probability such as {name}=1e-6."
    result = _real(value, name, fix)
    if result < 0 or result >= 1 or (result == 0 and not allow_zero):
        interval = "[0, 1)" if allow_zero else "(0, 1)"
        raise InvalidParameterError(f"{name} must be in {interval}, got {value!r}. {fix}")
    return result


def budget(epsilon_value: Any, delta_value: Any) -> tuple[Fraction | float, Fraction | float]:
    """A total budget: epsilon > 0 or ``math.inf``; delta in [0, 1) (default 0), or inf.

    ``math.inf`` epsilon is an explicitly unlimited budget (for teaching); its delta
    defaults to ``math.inf`` too.
    """
    unlimited = isinstance(epsilon_value, float | int) and epsilon_value == math.inf
    total_epsilon: Fraction | float = math.inf if unlimited else epsilon(epsilon_value)
    if delta_value is None:
        return total_epsilon, (math.inf if unlimited else Fraction(0))
    if unlimited and isinstance(delta_value, float | int) and delta_value == math.inf:
        return total_epsilon, math.inf
    return total_epsilon, delta(delta_value)


def cost(value: Any, name: str) -> Fraction:
    """A release cost handed to the ledger: an exact rational >= 0 (and < 1 for delta).

    Floats never reach the ledger: float sums drift (eleven charges of 1/11 would exceed
    1) and NaN compares false with everything.
    """
    fix = (
        f"Convert user input with dpframe._validation.{name}(), which returns an exact "
        f"Fraction (0.1 becomes exactly 1/10) and refuses NaN, infinities and negatives."
    )
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise InvalidParameterTypeError(
            f"The {name} cost must be a fractions.Fraction, got {value!r} of type "
            f"{type(value).__name__}. {fix}"
        )
    if not isinstance(value, numbers.Rational):
        raise InvalidParameterError(
            f"The {name} cost must be exact (a fractions.Fraction), got the "
            f"{type(value).__name__} {value!r}. {fix}"
        )
    exact = Fraction(int(value)) if isinstance(value, numbers.Integral) else Fraction(value)
    if exact < 0:
        raise InvalidParameterError(
            f"The {name} cost must be >= 0, got {exact}: a negative cost would refund "
            f"privacy budget. {fix}"
        )
    if name == "delta" and exact >= 1:
        raise InvalidParameterError(
            f"The delta cost must be below 1, got {exact}: a release with delta >= 1 has "
            f"no privacy guarantee. {fix}"
        )
    return exact


def sensitivity(value: Any, name: str = "sensitivity") -> Fraction:
    """A sensitivity: a finite real number > 0."""
    fix = (
        f"{name} is the most one person's row can change the result "
        f"(1 for a count); pass a positive number."
    )
    result = _real(value, name, fix)
    if result <= 0:
        raise InvalidParameterError(f"{name} must be > 0, got {value!r}. {fix}")
    return result


def probability(value: Any, name: str) -> float:
    """A probability strictly inside (0, 1), as a float."""
    fix = f"Pass {name} strictly between 0 and 1, for example {name}=0.5."
    result = _real(value, name, fix)
    if not 0 < result < 1:
        raise InvalidParameterError(
            f"{name} must be strictly between 0 and 1, got {value!r}. {fix}"
        )
    return float(value)


def positive_int(value: Any, name: str) -> int:
    """A positive integer (bools refused), as a Python int."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Integral):
        raise InvalidParameterTypeError(
            f"{name} must be a positive integer, got {value!r} of type {type(value).__name__}."
        )
    if int(value) < 1:
        raise InvalidParameterError(f"{name} must be a positive integer, got {value!r}.")
    return int(value)


def choice(value: Any, name: str, allowed: tuple[str, ...]) -> str:
    """One of a fixed set of strings."""
    if not isinstance(value, str) or value not in allowed:
        options = ", ".join(repr(a) for a in allowed)
        raise InvalidParameterError(f"{name} must be one of {options}; got {value!r}.")
    return value


def integer_bounds(value: Any, name: str = "bounds") -> tuple[int, int]:
    """A pair ``(lo, hi)`` of integers with ``lo <= hi``, inside ±2**61."""
    fix = f"Pass {name}=(lo, hi) with two integers, lo <= hi, declared without looking at the data."
    if isinstance(value, str) or not isinstance(value, tuple | list) or len(value) != 2:
        raise InvalidParameterTypeError(f"{name} must be a pair (lo, hi), got {value!r}. {fix}")
    pair: list[int] = []
    for end in value:
        if isinstance(end, bool | np.bool_) or not isinstance(end, numbers.Integral):
            raise InvalidParameterTypeError(
                f"{name} must hold integers, got {end!r} of type {type(end).__name__}. {fix}"
            )
        pair.append(int(end))
    lo, hi = pair
    if lo > hi:
        raise InvalidParameterError(
            f"{name} must have lo <= hi, got {value!r}. Swap them: {name}=({hi}, {lo})."
        )
    if max(abs(lo), abs(hi)) > INT_LIMIT // 2:
        raise NoiseOverflowError(
            f"{name}={value!r} is too wide: both ends must lie within ±2**61 so that value "
            f"plus noise fits in int64. Use narrower bounds."
        )
    return lo, hi


def real_bounds(value: Any, name: str = "bounds") -> tuple[float, float]:
    """A pair ``(lo, hi)`` of finite real numbers with ``lo < hi``, as floats."""
    fix = (
        f"Pass {name}=(lo, hi) with two finite numbers, lo < hi, "
        f"declared without looking at the data."
    )
    if isinstance(value, str) or not isinstance(value, tuple | list) or len(value) != 2:
        raise InvalidParameterTypeError(f"{name} must be a pair (lo, hi), got {value!r}. {fix}")
    pair: list[float] = []
    for end in value:
        if isinstance(end, bool | np.bool_) or not isinstance(end, numbers.Real):
            raise InvalidParameterTypeError(
                f"{name} must hold numbers, got {end!r} of type {type(end).__name__}. {fix}"
            )
        if not math.isfinite(float(end)):
            raise InvalidParameterError(f"{name} must be finite, got {value!r}. {fix}")
        pair.append(float(end))
    lo, hi = pair
    if lo >= hi:
        hint = f" Swap them: {name}=({hi}, {lo})." if lo > hi else ""
        raise InvalidParameterError(f"{name} must have lo < hi, got {value!r}.{hint} {fix}")
    return lo, hi


def sum_bounds(value: Any, name: str = "bounds") -> tuple[float, float]:
    """Bounds of one summed value: :func:`real_bounds` within a magnitude of 2**-960 .. 2**960.

    Sums run on a fixed-point grid scaled to the bounds; beyond that range the scale
    factor would overflow a float.
    """
    lo, hi = real_bounds(value, name)
    largest = max(abs(lo), abs(hi))
    if not 2.0**-960 <= largest <= 2.0**960:
        raise InvalidParameterError(
            f"{name}={value!r} is outside the range dpframe sums on (the larger bound in "
            f"magnitude must lie between 2**-960 and 2**960). Rescale the column first."
        )
    return lo, hi


def real_array(values: Any, name: str = "values") -> NDArray[np.float64]:
    """``values`` as a float64 array; refuses NaN, non-numbers and bools (±inf are allowed)."""
    array = np.asarray(values)
    if array.dtype == np.bool_ or array.dtype.kind not in "iuf":
        raise InvalidParameterTypeError(
            f"{name} must hold real numbers, got dtype {array.dtype}. Convert first, for "
            f"example with np.asarray(x, dtype=float)."
        )
    result = array.astype(np.float64, copy=False)
    if np.isnan(result).any():
        raise InvalidParameterError(
            f"{name} contains NaN, which has no place in a sum or a clamp. Drop or fill the "
            f"missing values first (for example with .dropna() or .fillna(0))."
        )
    return result


def integer_array(values: Any, name: str = "values") -> NDArray[np.int64]:
    """``values`` as an int64 array; refuses floats, bools, objects and out-of-range integers."""
    array = np.asarray(values)
    if array.dtype == np.bool_ or array.dtype.kind not in "iu":
        raise InvalidParameterTypeError(
            f"{name} must hold integers (the geometric mechanism releases integers), got "
            f"dtype {array.dtype}. Round or cast first, for example np.rint(x).astype('int64'), "
            f"or use dpframe.mechanisms.laplace for real-valued data."
        )
    if array.size and array.dtype.kind == "u" and int(array.max()) > INT_LIMIT:
        raise NoiseOverflowError(
            f"{name} holds integers above 2**62; value plus noise could overflow int64. "
            f"Pass bounds=(lo, hi) to clamp them first."
        )
    return array.astype(np.int64, copy=False)


def check_unbounded_range(values: NDArray[np.int64], name: str = "values") -> None:
    """Refuse integers whose magnitude leaves no room for noise inside int64."""
    if values.size and (int(values.max()) > INT_LIMIT or int(values.min()) < -INT_LIMIT):
        raise NoiseOverflowError(
            f"{name} holds integers beyond ±2**62; value plus noise could overflow int64. "
            f"Pass bounds=(lo, hi) to clamp them first."
        )


# ---------------------------------------------------------------- frame-level checks


def column(frame: pd.DataFrame, name: Hashable, param: str) -> pd.Series[Any]:
    """The Series ``frame[name]``, refusing missing and duplicated column names."""
    if isinstance(name, list | tuple | set | dict) or name is None:
        raise InvalidParameterTypeError(
            f"{param} must name one column, got {name!r}. Pass a column name such as "
            f"{param}={next(iter(frame.columns), 'col')!r}."
        )
    if name not in frame.columns:
        close = [c for c in frame.columns if str(c).lower() == str(name).lower()]
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise MissingColumnError(
            f"{param}={name!r} is not a column of the frame.{hint} Columns: {list(frame.columns)}."
        )
    selected: object = frame[name]  # a DataFrame when the label is duplicated
    if isinstance(selected, pd.DataFrame):
        raise InvalidParameterError(
            f"{param}={name!r} names {selected.shape[1]} columns of the frame (duplicate column "
            f"names). Rename them first, e.g. df.columns = [...]."
        )
    return cast("pd.Series[Any]", selected)


def column_names(value: object, param: str) -> list[Hashable]:
    """One column name or a list of them, as a list (at least one)."""
    names = list(value) if isinstance(value, list | tuple) else [value]
    if not names:
        raise InvalidParameterError(f"{param} must name at least one column.")
    return cast(list[Hashable], names)


def declared_domain(dtype: Any, name: Hashable, domain: object) -> pd.Index:
    """The declared domain of a grouping column, as a pandas Index; never read from the data.

    The domain comes from ``domain[name]`` if given, else from a Categorical dtype's
    categories, else from a bool dtype ({False, True}). Anything else is refused.
    """
    if domain is not None and not isinstance(domain, Mapping):
        raise InvalidParameterTypeError(
            f"domain must be a dict mapping column names to lists of keys, got {domain!r}. "
            f'Example: domain={{"{name}": ["a", "b", "c"]}}.'
        )
    if domain is not None and name in domain:
        keys = domain[name]
        if isinstance(keys, str) or not isinstance(keys, list | tuple | pd.Index | np.ndarray):
            raise InvalidParameterTypeError(
                f"domain[{name!r}] must be a list of keys, got {keys!r}. "
                f'Example: domain={{"{name}": ["a", "b"]}}.'
            )
        index: pd.Index = pd.Index(list(keys))
        if index.hasnans:
            raise DomainError(f"domain[{name!r}] contains a missing value; list only real keys.")
        if not index.is_unique:
            dupes = list(index[index.duplicated()].unique())
            raise DomainError(f"domain[{name!r}] lists keys more than once: {dupes}.")
        if len(index) == 0:
            raise DomainError(f"domain[{name!r}] is empty; list every possible key.")
        return index
    if isinstance(dtype, pd.CategoricalDtype):
        if len(dtype.categories) == 0:
            raise DomainError(
                f"column {name!r} is a Categorical with no categories; declare its domain with "
                f'domain={{"{name}": [...]}}.'
            )
        categories: pd.Index = pd.Index(dtype.categories)
        return categories
    if dtype == np.bool_ or str(dtype) == "boolean":
        return pd.Index([False, True])
    raise DomainError(
        f"column {name!r} has no declared domain, and dpframe never reads group keys from the "
        f"data (releasing only the keys present reveals who is in it). Declare every possible "
        f'key: pass domain={{"{name}": ["key1", "key2", ...]}}, or make the column a '
        f'Categorical: df["{name}"] = df["{name}"].astype(pd.CategoricalDtype([...]))).'
    )


def where_mask(frame: pd.DataFrame, where: object) -> NDArray[np.bool_] | None:
    """A row filter: None, a boolean array/Series of the frame's length, or a query string."""
    if where is None:
        return None
    if isinstance(where, str):
        try:
            where = frame.eval(where)
        except Exception as exc:  # pandas raises many kinds; report them all as our own
            raise InvalidParameterError(
                f"where={where!r} could not be evaluated on the frame ({exc}). Use a pandas "
                f'expression such as where="Age >= 18" or a boolean Series.'
            ) from exc
    if isinstance(where, pd.Series):
        if not where.index.equals(frame.index):
            raise InvalidParameterError(
                "where is a Series whose index differs from the frame's; build it from the same "
                "frame, e.g. where=df['Age'] >= 18."
            )
        if not (where.dtype == np.bool_ or str(where.dtype) in ("boolean", "bool[pyarrow]")):
            raise InvalidParameterTypeError(f"where must be boolean, got dtype {where.dtype}.")
        return np.asarray(where.fillna(False).to_numpy(dtype=bool))
    mask = np.asarray(where)
    if mask.dtype != np.bool_ or mask.shape != (len(frame),):
        raise InvalidParameterTypeError(
            f"where must be a boolean array with one entry per row ({len(frame)}), a boolean "
            f"Series, or an expression string; got {type(where).__name__} of dtype "
            f"{getattr(mask, 'dtype', None)} and shape {getattr(mask, 'shape', None)}."
        )
    return mask


def numeric_dtype(dtype: Any, name: Hashable) -> None:
    """Refuse a column dtype that is not a real number (bools count as 0/1)."""
    if (
        isinstance(dtype, pd.CategoricalDtype)
        or pd.api.types.is_complex_dtype(dtype)
        or not (pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype))
    ):
        raise InvalidParameterTypeError(
            f"column {name!r} has dtype {dtype}, not a number; a sum needs numeric values. "
            f"Convert it first, e.g. pd.to_numeric(df[{name!r}], errors='coerce')."
        )


def numeric_values(series: pd.Series[Any], name: Hashable) -> NDArray[np.float64]:
    """A numeric column as float64, missing values (NaN, NA, None) as NaN."""
    numeric_dtype(series.dtype, name)
    if series.dtype == np.float64:
        return np.asarray(series.to_numpy())  # a view: NaN already marks missing values
    return np.asarray(series.to_numpy(dtype=np.float64, na_value=np.nan))


# ---------------------------------------------------------------- crosstab options

_NORMALIZE = (False, True, "all", "index", "columns", 0, 1)


def normalize(value: object) -> bool | str | int:
    """``pd.crosstab``'s ``normalize=``: False, True, "all", "index", "columns", 0 or 1."""
    if isinstance(value, float) or value not in _NORMALIZE:
        raise InvalidParameterError(
            f"normalize must be one of False, True, 'all', 'index' or 'columns', got {value!r}."
        )
    return value


def aggfunc(value: object) -> str:
    """The ``aggfunc=`` of a crosstab of values: only sums are released."""
    if value not in ("sum", np.sum, sum):
        raise InvalidParameterError(
            f'aggfunc must be "sum", got {value!r}. For a mean, use df.dp.mean(..., by=[...]) '
            f"or divide a noisy sum table by a noisy count table."
        )
    return "sum"


@dataclass(frozen=True)
class CrosstabOptions:
    """The validated options of a crosstab (everything but the groupings)."""

    bounds: tuple[float, float] | None  # set when cells are sums of ``values``
    margins: bool
    margins_name: str
    normalize: bool | str | int
    nonnegative: bool

    @property
    def post_processing(self) -> tuple[str, ...]:
        """What is done to the noisy cells, in order (free of privacy cost)."""
        steps = ["negative cells set to 0"] if self.nonnegative else []
        steps += ["margins from the noisy cells"] if self.margins else []
        steps += [f"normalized ({self.normalize})"] if self.normalize is not False else []
        return tuple(steps)


def crosstab_options(
    values: object,
    aggfunc_value: object,
    bounds: object,
    margins: object,
    margins_name: object,
    normalize_value: object,
    nonnegative: object,
) -> CrosstabOptions:
    """Check a crosstab's options together (values, aggfunc and bounds go together)."""
    keep_nonnegative = flag(nonnegative, "nonnegative")
    with_margins = flag(margins, "margins")
    checked_normalize = normalize(normalize_value)
    if not isinstance(margins_name, str):
        raise InvalidParameterTypeError(f"margins_name must be a string, got {margins_name!r}.")
    checked_bounds = None
    if values is not None or aggfunc_value is not None:
        if values is None or aggfunc_value is None:
            raise InvalidParameterError(
                'values and aggfunc go together: pass values="column", aggfunc="sum", '
                "bounds=(lo, hi) for clamped sums per cell."
            )
        aggfunc(aggfunc_value)
        if bounds is None:
            raise InvalidParameterError(
                "a crosstab of sums needs bounds=(lo, hi), the declared range of one value."
            )
        checked_bounds = sum_bounds(bounds)
        if keep_nonnegative and checked_bounds[0] < 0:
            raise InvalidParameterError(
                "nonnegative=True sets negative noisy sums to 0, which is only sound when no "
                f"value can be negative; bounds={bounds!r} allows negatives. Drop "
                "nonnegative=True, or declare bounds with lo >= 0."
            )
    elif bounds is not None:
        raise InvalidParameterError('bounds is only used with values= and aggfunc="sum".')
    return CrosstabOptions(
        checked_bounds, with_margins, margins_name, checked_normalize, keep_nonnegative
    )


# ---------------------------------------------------------------- sums and randomness


def sum_bounds_choice(
    bounds: object, bounds_epsilon: object, total: Fraction
) -> tuple[tuple[float, float] | None, Fraction]:
    """The declared bounds of a sum (None for ``"auto"``) and the epsilon spent on bounds."""
    if isinstance(bounds, str) and bounds == "auto":
        share = total / 4 if bounds_epsilon is None else epsilon(bounds_epsilon, "bounds_epsilon")
        if share >= total:
            raise InvalidParameterError(
                f"bounds_epsilon ({float(share):g}) must be less than epsilon "
                f"({float(total):g}): it is the share of epsilon spent on the bounds."
            )
        return None, share
    if bounds_epsilon is not None:
        raise InvalidParameterError(
            'bounds_epsilon is only used with bounds="auto"; remove it, or pass bounds="auto".'
        )
    if bounds is None:
        raise InvalidParameterError(
            "sum needs bounds=(lo, hi), the declared range of one value (for example "
            'bounds=(0, 150000) for earnings), or bounds="auto" to estimate them privately.'
        )
    return sum_bounds(bounds), Fraction(0)


def rng(value: object) -> np.random.Generator | None:
    """A caller's ``rng=`` as one numpy Generator for the whole call (None: cryptographic).

    SPEC 7: a Generator, or anything ``numpy.random.default_rng`` accepts (a seed, a
    SeedSequence, a BitGenerator). One Generator serves every draw of a call, so a call
    that draws twice never reuses a seed's stream.
    """
    if value is None or isinstance(value, np.random.Generator):
        return value
    if isinstance(value, bool) or not isinstance(
        value, int | np.integer | np.random.SeedSequence | np.random.BitGenerator
    ):
        raise InvalidParameterTypeError(
            f"rng must be None (cryptographic randomness, private), a numpy Generator, or a "
            f"seed; got {value!r}. Leave rng=None for real releases: a caller's rng makes "
            f"them reproducible and so not private."
        )
    return np.random.default_rng(value)
