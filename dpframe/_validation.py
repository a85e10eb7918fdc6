"""Every check of a user-supplied parameter, in one place.

Each checker either returns the parameter in the exact form the rest of dpframe uses
(privacy parameters as :class:`~fractions.Fraction`, bounds as Python ints or floats)
or raises a dpframe error whose message names the parameter and the fix. Nothing here
looks at data values except :func:`integer_array`, which checks their type and range.
"""

from __future__ import annotations

import ast
import collections
import datetime
import functools
import math
import numbers
import re
import sys
import types
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal, ParamSpec, TypeVar, cast

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dpframe._exact import show, simplest_rational
from dpframe._typing import Where as _Where
from dpframe.errors import (
    DomainError,
    DPFrameError,
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


def real(value: Any, name: str, fix: str = "") -> Fraction:
    """``value`` as an exact Fraction, refusing non-numbers, bools, NaN and infinities."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        kind = type(value).__name__
        raise InvalidParameterTypeError(
            f"{name} must be a real number, got {value!r} of type {kind}. {fix}".rstrip()
        )
    if isinstance(value, numbers.Integral):
        return Fraction(int(value))
    if isinstance(value, Fraction):
        return value
    as_float = float(value)
    if not math.isfinite(as_float):
        raise InvalidParameterError(f"{name} must be finite, got {value!r}. {fix}".rstrip())
    return simplest_rational(as_float)


def epsilon(value: Any, name: str = "epsilon") -> Fraction:
    """A privacy-loss parameter: a finite real number > 0."""
    fix = f"Pass a positive number such as {name}=1.0 (smaller means more privacy, more noise)."
    result = real(value, name, fix)
    if result <= 0:
        raise InvalidParameterError(f"{name} must be > 0, got {value!r}. {fix}")
    return result


def delta(value: Any, name: str = "delta", *, allow_zero: bool = True) -> Fraction:
    """A failure probability: a finite real in [0, 1) (or (0, 1) when ``allow_zero`` is False)."""
    fix = f"Pass {name}=0 for pure DP, or a small probability such as {name}=1e-6."
    result = real(value, name, fix)
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
        "Convert user input to an exact Fraction first (dpframe._validation.epsilon and "
        "delta turn 0.1 into exactly 1/10 and refuse NaN, infinities and negatives)."
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
    result = real(value, name, fix)
    if result <= 0:
        raise InvalidParameterError(f"{name} must be > 0, got {value!r}. {fix}")
    return result


def probability(value: Any, name: str) -> float:
    """A probability strictly inside (0, 1), as a float."""
    fix = f"Pass {name} strictly between 0 and 1, for example {name}=0.5."
    result = real(value, name, fix)
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
    """A pair ``(lo, hi)`` of finite real numbers with ``lo < hi``, as floats.

    An exact end (an integer or a Fraction) that float64 cannot hold, such as 2**53 + 1,
    is refused: read as its nearest float it could move outward, and releases would step
    past the declared range.
    """
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
        try:
            as_float = float(end)
        except OverflowError:  # an int or Fraction beyond float64's range
            as_float = math.inf
        if not math.isfinite(as_float):
            raise InvalidParameterError(
                f"{name} must be finite numbers within float64's range, got {value!r}. {fix}"
            )
        if (
            Fraction(as_float) != Fraction(end)
            if isinstance(end, numbers.Rational)
            else bool(as_float != end)  # np.longdouble holds more than float64
        ):
            above = as_float > end
            down = math.nextafter(as_float, -math.inf) if above else as_float
            up = as_float if above else math.nextafter(as_float, math.inf)
            raise InvalidParameterError(
                f"{name} has an end float64 cannot hold exactly: {end!r} lies between "
                f"{down!r} and {up!r}. Pass one of those, the one inside the range you mean."
            )
        pair.append(as_float)
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


def _not_masked(values: Any, name: str) -> None:
    """Refuse a masked array: np.asarray drops its mask, and the hidden values would be read."""
    if isinstance(values, np.ma.MaskedArray):
        raise InvalidParameterTypeError(
            f"{name} is a masked array, whose masked entries would be read and released "
            f"(numpy drops the mask). Pass {name}.compressed() to leave them out, or "
            f"{name}.filled(value) to replace them."
        )


def real_array(values: Any, name: str = "values") -> NDArray[np.float64]:
    """``values`` as a float64 array; refuses NaN, non-numbers and bools (±inf are allowed)."""
    _not_masked(values, name)
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
    _not_masked(values, name)
    array = np.asarray(values)
    if array.dtype == np.bool_ or array.dtype.kind not in "iu":
        raise InvalidParameterTypeError(
            f"{name} must hold integers (this mechanism releases integers), got "
            f"dtype {array.dtype}. Round or cast first, for example np.rint(x).astype('int64'), "
            f"or use dpframe.mechanisms.laplace for real-valued data."
        )
    if array.size and array.dtype.kind == "u" and int(array.max()) > INT_LIMIT:
        raise NoiseOverflowError(
            f"{name} holds unsigned integers above 2**62, which int64 cannot hold with room "
            f"for noise (bounds cannot help: the values are read as int64 before the clamp). "
            f"Clamp them first, e.g. np.minimum({name}, 2**62).astype('int64')."
        )
    return array.astype(np.int64, copy=False)


def check_unbounded_range(values: NDArray[np.int64], name: str = "values") -> None:
    """Refuse integers whose magnitude leaves no room for noise inside int64."""
    if values.size and (int(values.max()) > INT_LIMIT or int(values.min()) < -INT_LIMIT):
        raise NoiseOverflowError(
            f"{name} holds integers beyond ±2**62; value plus noise could overflow int64. "
            f"Clamp them into the range the data can take first (bounds=(lo, hi) where the "
            f"function takes them, or np.clip)."
        )


# ---------------------------------------------------------------- frame-level checks


def column(frame: pd.DataFrame, name: Hashable, param: str) -> pd.Series[Any]:
    """The Series ``frame[name]``, refusing missing and duplicated column names.

    A tuple names one column when it is a label of the frame (MultiIndex columns).
    """
    if isinstance(name, tuple) and _is_label(name, frame.columns):
        pass
    elif isinstance(name, list | tuple | set | dict) or name is None:
        raise InvalidParameterTypeError(
            f"{param} must name one column, got {name!r}. Pass a column name such as "
            f"{param}={next(iter(frame.columns), 'col')!r}."
        )
    if name not in frame.columns:
        close = [c for c in frame.columns if str(c).lower() == str(name).lower()]
        hint = f" Did you mean {close[0]!r}?" if close else ""
        index_names = getattr(frame.index, "names", [frame.index.name])  # Dask: one name
        if name in index_names:
            hint = " It is in the index: use df.reset_index(), which makes it a column."
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


def column_names(value: object, param: str, columns: pd.Index | None = None) -> list[Hashable]:
    """One column name (or a Series of the frame) or a list of them, as a list (at least one).

    A tuple that is a label of ``columns`` is one name, as pandas reads it (``by=("m",
    "v")`` on MultiIndex columns); any other tuple is a list of names.
    """
    if isinstance(value, tuple) and columns is not None and _is_label(value, columns):
        return [value]
    names = list(value) if isinstance(value, list | tuple) else [value]
    if not names:
        raise InvalidParameterError(f"{param} must name at least one column.")
    return cast(list[Hashable], names)


def _is_label(name: tuple[Any, ...], columns: pd.Index) -> bool:
    """Whether a tuple is one column label (not a list of labels)."""
    try:
        return name in columns
    except (TypeError, ValueError):  # unhashable parts
        return False


def _missing(key: object) -> bool:
    """Whether a key is a missing value (None, NaN, NA, NaT): the missing-value cell."""
    try:
        return bool(pd.isna(key))  # type: ignore[call-overload]
    except (TypeError, ValueError):  # list-like keys: pd.isna gives an array
        return False


def domain_keys(keys: object, name: Hashable) -> pd.Index:
    """Declared keys as an Index: any ordered list-like of distinct keys (one may be missing).

    A missing key (None or NaN) declares the missing-value cell: rows whose key is missing
    are counted there, like ``dropna=False`` in pandas. Sets are refused: a table needs
    its keys in an order.
    """
    example = f'{{"{name}": ["key1", "key2", ...]}}'
    # A DataFrame iterates over its column labels: codebook[["occ"]] would declare "occ".
    if isinstance(keys, str | bytes | Mapping | set | frozenset | pd.DataFrame) or not isinstance(
        keys, Iterable
    ):
        raise InvalidParameterTypeError(
            f"the keys declared for {name!r} must be an ordered list-like (a list, a tuple, a "
            f"range, a pd.Index such as df[{name!r}].cat.categories), got "
            f"{type(keys).__name__}. Example: {example}."
        )
    values = list(keys)
    missing = [i for i, key in enumerate(values) if _missing(key)]
    if len(missing) > 1:
        raise DomainError(f"the keys declared for {name!r} list a missing value more than once.")
    index: pd.Index = keys_index(values, bool(missing))
    if not index.is_unique:
        dupes = list(index[index.duplicated()].unique())
        raise DomainError(f"the keys declared for {name!r} list keys more than once: {dupes}.")
    if len(index) == 0:
        raise DomainError(f"the keys declared for {name!r} are empty; list every possible key.")
    return index


def keys_index(values: list[Any], missing: bool) -> pd.Index:
    """The keys as an Index that keeps their values.

    pandas infers float64 for integers next to a missing key, which rounds integers
    beyond 2**53 (and turns 1 into 1.0): such keys become the nullable ``Int64`` (or
    stay objects, beyond int64).
    """
    present = [key for key in values if not _missing(key)]
    integers = all(
        isinstance(key, int | np.integer) and not isinstance(key, bool | np.bool_)
        for key in present
    )
    if missing and present and integers:
        if all(-(2**63) <= int(key) < 2**63 for key in present):
            return pd.Index([pd.NA if _missing(key) else key for key in values], dtype="Int64")
        exact: pd.Index = pd.Index(values, dtype=object)
        return exact
    inferred: pd.Index = pd.Index(values, tupleize_cols=False)
    return inferred


def _key_fits(dtype: Any, key: object) -> bool:
    """Whether ``key`` can equal a value of a column of ``dtype`` (the dtype only)."""
    if _missing(key):
        return True
    if isinstance(dtype, pd.CategoricalDtype):
        return key in dtype.categories
    if pd.api.types.is_bool_dtype(dtype):
        return isinstance(key, bool | np.bool_)
    if pd.api.types.is_integer_dtype(dtype):
        # A key beyond the dtype's range (300 on int8) is a cell no row reaches, as for a
        # code book shared by columns of several widths: allowed, like any unused key.
        return isinstance(key, int | np.integer) and not isinstance(key, bool | np.bool_)
    if isinstance(dtype, pd.PeriodDtype):  # a Period of another frequency never equals
        return isinstance(key, pd.Period) and key.freq == dtype.freq
    if pd.api.types.is_datetime64_any_dtype(dtype):
        if _arrow_date(dtype) and type(key) is datetime.date:
            return True
        if not isinstance(key, pd.Timestamp | datetime.datetime | np.datetime64):
            return False
        # A time zone on one side only: pandas never finds them equal.
        return (pd.Timestamp(key).tz is None) == (_column_tz(dtype) is None)
    if pd.api.types.is_timedelta64_dtype(dtype):
        return isinstance(key, pd.Timedelta | datetime.timedelta | np.timedelta64)
    if pd.api.types.is_string_dtype(dtype) and not pd.api.types.is_object_dtype(dtype):
        return isinstance(key, str)
    return True  # object and other dtypes: any key may occur


def _column_tz(dtype: Any) -> object:
    """The time zone of a datetime column's dtype (numpy, pandas or Arrow), or None."""
    if isinstance(dtype, pd.DatetimeTZDtype):
        return dtype.tz
    arrow_type = getattr(dtype, "pyarrow_dtype", None)
    return getattr(arrow_type, "tz", None)


def _arrow_date(dtype: Any) -> bool:
    """Whether a column holds Arrow dates (``date32``/``date64``), whose values are dates."""
    arrow_type = getattr(dtype, "pyarrow_dtype", None)
    return arrow_type is not None and str(arrow_type).startswith("date")


def _check_keys_fit(keys: pd.Index, dtype: Any, name: Hashable) -> None:
    wrong = [key for key in keys if not _key_fits(dtype, key)]
    if not wrong:
        return
    if isinstance(dtype, pd.CategoricalDtype):
        raise DomainError(
            f"the keys declared for {name!r} include {wrong[:5]!r}, which are not categories of "
            f"its Categorical dtype {list(dtype.categories)[:10]!r}: no row can hold them (a "
            f"typo?). Declare keys among the categories, or change the dtype."
        )
    hint = ""
    if isinstance(dtype, pd.PeriodDtype):
        hint = (
            " Declare periods of the column's frequency, e.g. "
            f"pd.period_range(..., freq={dtype.freq.freqstr!r})."
        )
    elif pd.api.types.is_datetime64_any_dtype(dtype) and any(
        isinstance(k, pd.Timestamp | datetime.datetime) for k in wrong
    ):
        zone = _column_tz(dtype)
        hint = (
            f" The column's timestamps are in time zone {zone}: declare keys in it, e.g. "
            f"pd.to_datetime([...]).tz_localize({str(zone)!r})."
            if zone is not None
            else " The column's timestamps have no time zone: declare keys without one, "
            "e.g. keys.tz_convert(None)."
        )
    elif pd.api.types.is_datetime64_any_dtype(dtype):
        hint = (
            f" Declare dates as timestamps, e.g. pd.to_datetime([...]) or "
            f"pd.Timestamp({wrong[0]!r})."
        )
    elif pd.api.types.is_integer_dtype(dtype):
        hint = " Declare integers, e.g. range(16, 96)."
    elif pd.api.types.is_string_dtype(dtype):
        hint = " Declare strings, or convert the column first."
    raise DomainError(
        f"the keys declared for {name!r} do not match its dtype {dtype}: "
        f"{[f'{k!r} ({type(k).__name__})' for k in wrong[:5]]} can never equal a value of the "
        f"column, so every row would fall outside the table.{hint}"
    )


def declared_domain(
    dtype: Any,
    name: Hashable,
    call_domain: Mapping[Hashable, object] | None,
    data_set_domains: Mapping[Hashable, pd.Index],
) -> pd.Index:
    """The declared domain of a grouping column; never read from the data.

    In order: ``domain[name]`` of this call, the keys declared for the data set
    (``set_budget(domains=...)``), ``{False, True}`` for a bool column. A Categorical's
    categories are not a declaration: ``astype("category")`` reads them from the data.
    Keys are checked against the column's dtype (which reveals nothing about the data).
    """
    if pd.api.types.is_float_dtype(dtype):
        raise DomainError(
            f"column {name!r} holds floats, and grouping by float values compares them for "
            f"exact equality. Cut it into declared bins first, e.g. "
            f'df["{name}_band"] = pd.cut(df["{name}"], bins=[0, 18, 65, 120]), and declare '
            f"the bins' labels as the domain."
        )
    arrow_type = getattr(dtype, "pyarrow_dtype", None)
    if arrow_type is not None and arrow_type.num_fields > 0:
        # lists, structs, maps: no key of theirs can be grouped (pandas cannot factorize them)
        raise DomainError(
            f"column {name!r} holds nested values ({arrow_type}), which cannot be grouped: "
            f"keys must be hashable scalars. Turn them into strings first."
        )
    if call_domain is not None and name in call_domain:
        keys = domain_keys(call_domain[name], name)
    elif name in data_set_domains:
        keys = data_set_domains[name]
    elif pd.api.types.is_bool_dtype(dtype):
        return pd.Index([False, True])
    else:
        categorical = isinstance(dtype, pd.CategoricalDtype)
        raise DomainError(
            f"column {name!r} has no declared domain, and dpframe never reads group keys from "
            f"the data (releasing only the keys present reveals who is in it). Declare every "
            f"possible key, for this call with domain={{{name!r}: [...]}}, or once for the "
            f"data set with df.dp.set_budget(..., domains={{{name!r}: [...]}}). When the keys "
            f"cannot be listed (free text, codes), count and sum can select them privately: "
            f"private_keys=True, delta=1e-6."
            + (
                f" Its Categorical categories are not enough: astype('category') takes them "
                f"from the data; if they come from a code book, say so with "
                f"domains={{{name!r}: df[{name!r}].cat.categories}}."
                if categorical
                else ""
            )
        )
    _check_keys_fit(keys, dtype, name)
    return keys


def check_domain_columns(
    call_domain: object, grouped: Sequence[Hashable]
) -> Mapping[Hashable, Iterable[object]] | None:
    """``domain=`` of a call: a mapping whose every column is one the call groups by."""
    if call_domain is None:
        return None
    if not isinstance(call_domain, Mapping):
        raise InvalidParameterTypeError(
            f"domain must be a dict mapping column names to lists of keys, got "
            f'{type(call_domain).__name__}. Example: domain={{"Sex": ["F", "M"]}}.'
        )
    unused = [name for name in call_domain if name not in grouped]
    if unused and not grouped:
        raise DomainError(
            f"domain= declares keys for {unused!r}, but this call is not grouped. Group by "
            f"them (by={unused[0]!r}, a forgotten by=?), or remove domain=."
        )
    if unused:
        raise DomainError(
            f"domain= declares keys for {unused!r}, which this call does not group by "
            f"(it groups by {list(grouped)!r}). Remove them, or group by them (a typo?)."
        )
    return cast(Mapping[Hashable, Iterable[object]], call_domain)


# Methods and attributes that act on each row alone, allowed in a where= expression.
_ROW_WISE_ATTRIBUTES = frozenset(
    {
        # missing values, membership, ranges, comparisons, elementwise arithmetic
        "isna", "notna", "isnull", "notnull", "isin", "between", "abs", "round", "astype",
        "eq", "ne", "lt", "le", "gt", "ge", "add", "sub", "mul", "div", "truediv",
        "floordiv", "mod", "pow", "clip",
        # strings, one value at a time
        "str", "startswith", "endswith", "contains", "match", "fullmatch", "len", "lower",
        "upper", "strip", "lstrip", "rstrip", "casefold", "isdigit", "isalpha", "isnumeric",
        "isspace", "islower", "isupper", "slice",
        # dates and times, one value at a time
        "dt", "year", "month", "day", "hour", "minute", "second", "dayofweek", "weekday",
        "dayofyear", "day_of_week", "day_of_year", "quarter", "date", "days",
        # (not .cat.codes: a category's code is its rank among the categories, which
        # astype("category") builds from every row's value)
    }
)  # fmt: skip
# The elementwise functions DataFrame.eval knows.
_ELEMENTWISE_FUNCTIONS = frozenset(
    {
        "abs", "sqrt", "log", "log10", "log1p", "exp", "expm1", "sin", "cos", "tan",
        "arcsin", "arccos", "arctan", "arctan2", "sinh", "cosh", "tanh", "arcsinh",
        "arccosh", "arctanh", "floor", "ceil",
    }
)  # fmt: skip
_ALLOWED_NODES = (
    ast.Expression, ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.Compare, ast.Name, ast.Load,
    ast.Constant, ast.List, ast.Tuple, ast.Attribute, ast.Call, ast.keyword, ast.Subscript,
    ast.Slice, ast.boolop, ast.operator, ast.unaryop, ast.cmpop,
)  # fmt: skip


def _literal(value: object, name: str, text: str) -> str:
    """A caller's ``@name`` as literal text: plain scalars and lists of them only."""
    if isinstance(value, np.datetime64 | np.timedelta64):  # .item() would give an int
        raise InvalidParameterTypeError(
            f"where={text!r}: @{name} is a numpy {type(value).__name__}; write the date as a "
            f"string (where=\"visit >= '2020-01-01'\") or pass a boolean Series."
        )
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_literal(item, name, text) for item in value) + "]"
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidParameterError(f"where={text!r}: @{name} is {value!r}; pass a finite number.")
    if isinstance(value, int | float) and not isinstance(value, bool) and value < 0:
        # In parentheses: pasted as text, -3 in "x > @v ** 2" would read as -(3 ** 2).
        return f"({value!r})"
    if value is None or isinstance(value, bool | int | float | str):
        return repr(value)
    raise InvalidParameterTypeError(
        f"where={text!r}: @{name} is a {type(value).__name__}; a where= expression takes "
        f"numbers, strings, booleans and lists of them (a threshold, a list of keys). For "
        f"anything else, pass a boolean Series instead, e.g. where=df['Age'] >= {name}."
    )


def _pieces(text: str) -> list[tuple[str, int, str]]:
    """``text`` cut into code, string literals and backticked names, in order.

    Each piece is ``(kind, start, text)``: ``"code"``; ``"string"``, quotes included (a
    backslash escapes the next character); ``"name"``, the text between two backticks. A
    backtick inside a string literal is part of the string. The ``@name`` substitution
    and the row-wise check both read ``where=`` through this one cut, so they agree on
    what is code.
    """
    pieces: list[tuple[str, int, str]] = []
    start = i = 0
    while i < len(text):
        char = text[i]
        if char not in "'\"`":
            i += 1
            continue
        if start < i:
            pieces.append(("code", start, text[start:i]))
        if char == "`":
            end = text.find("`", i + 1)
            if end < 0:
                raise InvalidParameterError(f"where={text!r} has a backtick that is not closed.")
            pieces.append(("name", i, text[i + 1 : end]))
        else:
            end = i + 1
            while end < len(text) and text[end] != char:
                end += 2 if text[end] == "\\" else 1
            pieces.append(("string", i, text[i : end + 1]))
        start = i = end + 1
    if start < len(text):
        pieces.append(("code", start, text[start:]))
    return pieces


def _substitute_locals(text: str, scope: Mapping[str, object]) -> str:
    """``text`` with every ``@name`` outside quotes and backticks replaced by its value."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            raise InvalidParameterError(f"where={text!r}: '@' must be followed by a name.")
        if name not in scope:
            raise InvalidParameterError(
                f"where={text!r}: @{name} is not a variable where df.dp was called. "
                f"Define it first, e.g. {name} = 30."
            )
        return _literal(scope[name], name, text)

    return "".join(
        re.sub(r"@([A-Za-z_][A-Za-z0-9_]*)?", value, piece)
        if kind == "code"
        else f"`{piece}`"
        if kind == "name"
        else piece
        for kind, _, piece in _pieces(text)
    )


def _without_backticks(text: str, names: dict[str, str] | None = None) -> str:
    """``text`` with each backticked column name as a plain name, ``_col<position>``;
    ``names`` (if given) receives each placeholder and the name it stands for."""
    out: list[str] = []
    for kind, start, piece in _pieces(text):
        if kind == "name":
            if names is not None:
                names[f"_col{start}"] = piece
            piece = f"_col{start}"
        out.append(piece)
    return "".join(out)


def _membership_of_other_rows(node: ast.AST) -> bool:
    """``x in col`` or ``x.isin(col)`` against anything but a literal list: membership in
    the values of other rows (a column, an expression of columns)."""
    literal = (ast.List, ast.Tuple, ast.Set, ast.Constant)
    if isinstance(node, ast.Compare):
        return any(
            isinstance(op, ast.In | ast.NotIn) and not isinstance(right, literal)
            for op, right in zip(node.ops, node.comparators, strict=True)
        )
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "isin"
    ):
        given = [*node.args, *(k.value for k in node.keywords)]
        return any(not isinstance(arg, literal) for arg in given)
    return False


# astype targets whose result for a row depends on that row alone. Not "str": a datetime
# or timedelta column is formatted alike for all rows (the time shows only if some row
# has one); no keywords: errors="ignore" converts the column only if every row converts.
# Nor integer types: a cast of NaN, 0.5 or a too large value raises for that row only,
# and an error that depends on one person's value would answer about them.
_ROW_WISE_CASTS = frozenset(
    {"float", "float32", "float64", "Float32", "Float64", "bool", "boolean"}
)


def _conversion_of_the_whole_column(node: ast.AST) -> bool:
    """``x.astype(...)`` to anything but a plain number or bool type, or with keywords."""
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "astype"
    ):
        return False
    if node.keywords or len(node.args) != 1:
        return True
    target = node.args[0]
    if isinstance(target, ast.Constant) and isinstance(target.value, str):
        return target.value not in _ROW_WISE_CASTS
    return True


def _power_that_can_fail(node: ast.AST) -> bool:
    """``x ** e`` or ``x.pow(e)`` with ``e`` not a constant number: an integer to a
    negative power raises, and it would raise for some rows' values only."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        exponent = node.right
        if isinstance(exponent, ast.UnaryOp) and isinstance(exponent.op, ast.USub | ast.UAdd):
            exponent = exponent.operand
        return not (isinstance(exponent, ast.Constant) and isinstance(exponent.value, int | float))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr in ("pow", "rpow")
    return False


# What an object column (values of any Python type) may take part in: comparisons for
# equality and membership in literals, and missing-value tests. Anything else (ordering,
# arithmetic, .str, .dt, casts) can raise on one value's type, and .str infers from the
# values which rows are strings.
_OBJECT_SAFE_CALLS = frozenset({"isin", "isna", "notna", "isnull", "notnull"})


def _object_column_misuse(text: str, object_columns: set[str]) -> str | None:
    """The first use of an object column other than equality, membership or a NaN test."""
    backticked: dict[str, str] = {}
    tree = ast.parse(_without_backticks(text, backticked).strip(), mode="eval")
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Name) and backticked.get(node.id, node.id) in object_columns):
            continue
        parent = parents.get(node)
        if isinstance(parent, ast.Compare) and all(
            isinstance(op, ast.Eq | ast.NotEq | ast.In | ast.NotIn) for op in parent.ops
        ):
            continue
        if isinstance(parent, ast.Attribute) and parent.attr in _OBJECT_SAFE_CALLS:
            continue
        return backticked.get(node.id, node.id)
    return None


def where_names(text: str) -> set[str]:
    """The names a checked ``where=`` string reads: bare, and between backticks."""
    backticked: dict[str, str] = {}
    tree = ast.parse(_without_backticks(text, backticked).strip(), mode="eval")
    called = {
        node.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }
    read = {
        node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and node.id not in called
    }
    return {backticked.get(name, name) for name in read}


def _check_row_wise(text: str) -> None:
    """Refuse expressions that look at other rows (aggregates, shifts, ranks, indexing)."""
    placeholder = _without_backticks(text)
    try:
        tree = ast.parse(placeholder.strip(), mode="eval")
    except SyntaxError as error:
        raise InvalidParameterError(
            f"where={text!r} could not be evaluated: it is not an expression dpframe can check "
            f"({error.msg}). Use a "
            f"pandas condition such as where=\"Age >= 18 and Sex == 'F'\", or a boolean Series."
        ) from error
    for node in ast.walk(tree):
        offending: str | None = None
        if not isinstance(node, _ALLOWED_NODES):
            offending = type(node).__name__
        elif isinstance(node, ast.Attribute) and node.attr not in _ROW_WISE_ATTRIBUTES:
            offending = node.attr
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id not in _ELEMENTWISE_FUNCTIONS:
                offending = node.func.id
        elif isinstance(node, ast.Call) and not isinstance(node.func, ast.Attribute):
            offending = "a call"
        elif isinstance(node, ast.Subscript) and not (
            isinstance(node.value, ast.Attribute) and node.value.attr == "str"
        ):
            offending = "indexing"
        elif _membership_of_other_rows(node):
            offending = "membership in a column (the values of other rows)"
        elif _conversion_of_the_whole_column(node):
            offending = "astype to text, or with options (its result depends on every row)"
        elif _power_that_can_fail(node):
            offending = "a power whose exponent is not a number (it can fail on one value)"
        if offending is not None:
            raise InvalidParameterError(
                f"where={text!r} is not a row-wise condition: {offending!r} can depend on "
                f"other rows (an aggregate such as mean or max, a rank, a shift, indexing), so "
                f"one person's value could move the filter for everyone and the release would "
                f"not be private. Use a condition on each row's own values with public "
                f"constants (where='Age > @threshold', threshold = 65), or a boolean Series "
                f"built the same way."
            )


#: Code of dpframe's decorators around public methods, skipped when reading @names.
WRAPPER_CODE: set[types.CodeType] = set()

_P = ParamSpec("_P")
_R = TypeVar("_R")
_PER_ROW = "Epsilon figures above are per row"


def in_call_terms(method: Callable[_P, _R]) -> Callable[_P, _R]:
    """Say how an epsilon quoted by a refusal relates to the one the caller passed.

    The engines refuse the epsilon at which noise is drawn for one row: the call's,
    halved for private key selection and divided by ``max_rows * max_groups`` on a
    unit-protected frame (by ``max_groups`` for threshold decisions and the selection).
    Without this, ``epsilon=2000`` was refused as "epsilon=250". Refusals that quote the
    caller's own epsilon, or refuse a bad epsilon, are left as they are.
    """

    def in_call_terms(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return method(*args, **kwargs)
        except (InvalidParameterError, NoiseOverflowError) as refused:
            note = _per_row_note(method.__name__, kwargs, str(refused))
            if note is None:
                raise
            raise type(refused)(f"{refused} {note}") from refused.__cause__

    WRAPPER_CODE.add(in_call_terms.__code__)
    return functools.wraps(method)(in_call_terms)


def _per_row_note(method: str, kwargs: Mapping[str, object], text: str) -> str | None:
    """The note :func:`in_call_terms` adds, or None when the figures are the caller's."""
    asked = kwargs.get("epsilon")
    if kwargs.get("rho") is not None:
        return None  # a zCDP cost: no epsilon is divided
    try:
        caller = epsilon(asked)
    except (DPFrameError, TypeError, ValueError):  # a bad epsilon: its refusal says so
        return None
    if _PER_ROW in text or re.search(rf"epsilon[= ]\(?{re.escape(show(caller))}\b", text):
        return None
    # a figure quoted as an epsilon ("epsilon=250", "epsilon 1.25e-18", "epsilon per
    # quantile (6.25e+04)"), not a word of a sentence about rho
    if not re.search(r"epsilon(?:=| | per quantile \()[0-9]", text):
        return None
    rows, groups = kwargs.get("max_rows"), kwargs.get("max_groups")
    if not all(
        v is None or (isinstance(v, numbers.Integral) and not isinstance(v, bool))
        for v in (rows, groups)
    ):
        return None
    cells = 1 if groups is None else int(cast(numbers.Integral, groups))
    noise = cells * (1 if rows is None else int(cast(numbers.Integral, rows)))
    steps = []
    selecting = kwargs.get("private_keys") is True
    if selecting:
        steps.append("halved for private key selection")
    if method == "threshold_decision":
        if cells > 1:
            steps.append(f"divided by max_groups = {cells} for each cell's decision")
    elif noise > 1 or (selecting and cells > 1):
        by_groups = f", by max_groups = {cells} for the selection" if selecting else ""
        steps.append(
            f"divided by max_rows * max_groups = {noise} for noise (the most rows one unit "
            f"moves){by_groups}"
        )
    if steps and "per quantile" in text:
        steps.append("split between the quantiles")
    if not steps:
        return None
    return f"{_PER_ROW}: the call's epsilon, {', then '.join(steps)}."


def where_in_caller(where: _Where) -> _Where:
    """``where=`` checked row-wise, its ``@names`` read where the public method was called.

    Call it first thing in every public method that takes ``where``: frame 0 is this
    function, 1 the public method, 2 the user's code (a method delegating to another
    resolves first, so that nothing is read from dpframe's own frames).
    """
    if isinstance(where, str) and "@" in where:
        caller = sys._getframe(2)
        while caller.f_code in WRAPPER_CODE and caller.f_back is not None:
            caller = caller.f_back  # a decorator of the public method: not the user's code
        scope = collections.ChainMap(caller.f_locals, caller.f_globals)
        return cast(_Where, where_condition(where, scope))
    return cast(_Where, where_condition(where, {}))


def where_condition(where: object, scope: Mapping[str, object]) -> object:
    """A ``where=`` string with its ``@names`` resolved from ``scope``, checked row-wise.

    Other kinds of ``where`` (None, a boolean Series or array) pass through unchanged;
    the backends check them against the frame.
    """
    if not isinstance(where, str):
        return where
    _refuse_ambiguous_quoting(where)
    resolved = _substitute_locals(where, scope)
    _refuse_ambiguous_quoting(resolved)  # a pasted string may hold a backslash
    _check_row_wise(resolved)
    return resolved


def _refuse_ambiguous_quoting(text: str) -> None:
    """Refuse quoting that dpframe's check and pandas' parser could read differently.

    The check follows quotes to find backticked names and ``@names`` outside strings;
    pandas' backtick splitter treats any quote after a backslash as escaped, and triple
    quotes open a string the character scan would close at once. Either mismatch could
    hide code (an aggregate) from the check, so neither is accepted.
    """
    if "'''" in text or '"""' in text:
        raise InvalidParameterError(
            f"where={text!r} holds a triple-quoted string; write strings in single quotes "
            f"('text'), or pass a boolean Series."
        )
    if re.search(r"\\['\"`]", text):
        raise InvalidParameterError(
            f"where={text!r} has a backslash before a quote or backtick, which pandas and "
            f"dpframe's row-wise check could read differently; pass a boolean Series built "
            f"the same way instead (where=df['path'] == root)."
        )


def where_mask(frame: pd.DataFrame, where: object) -> NDArray[np.bool_] | None:
    """A row filter: None, a boolean array/Series of the frame's length, or a query string."""
    if where is None:
        return None
    if isinstance(where, str):
        return _string_mask(frame, where)
    if isinstance(where, pd.Series):
        if not where.index.equals(frame.index):
            raise InvalidParameterError(
                "where is a Series whose index differs from the frame's; build it from the same "
                "frame, e.g. where=df['Age'] >= 18."
            )
        if not (where.dtype == np.bool_ or str(where.dtype) in ("boolean", "bool[pyarrow]")):
            raise InvalidParameterTypeError(f"where must be boolean, got dtype {where.dtype}.")
        return np.asarray(where.fillna(False).to_numpy(dtype=bool))
    mask = _boolean_array(where)
    if mask.dtype != np.bool_ or mask.shape != (len(frame),):
        raise InvalidParameterTypeError(
            f"where must be a boolean array with one entry per row of the frame, a boolean "
            f"Series, or an expression string; got {type(where).__name__} of dtype "
            f"{getattr(mask, 'dtype', None)} and shape {getattr(mask, 'shape', None)}."
        )
    return mask


def _boolean_array(where: object) -> NDArray[Any]:
    """``where`` as a numpy array; a missing value in a boolean mask is False.

    pandas' boolean arrays (``boolean``, ``bool[pyarrow]``) turn into an object array
    only when they hold a missing value (``.to_numpy()`` too): read them as booleans with
    NA as False, as a boolean Series is, so that whether a mask is accepted never depends
    on whether some person's value is missing.
    """
    dtype = str(getattr(where, "dtype", ""))
    if isinstance(where, pd.api.extensions.ExtensionArray) and dtype in (
        "boolean",
        "bool[pyarrow]",
    ):
        return _missing_as_false(pd.Series(where))
    mask = np.asarray(where)
    if (
        mask.dtype == object
        and mask.ndim == 1
        and pd.api.types.infer_dtype(mask, skipna=True) in ("boolean", "empty")
    ):
        return _missing_as_false(pd.Series(mask, dtype=object))
    return mask


def _missing_as_false(flags: pd.Series[Any]) -> NDArray[np.bool_]:
    return np.asarray(flags.astype("boolean").fillna(False).to_numpy(dtype=bool))


def _string_mask(frame: pd.DataFrame, where: str) -> NDArray[np.bool_]:
    """A checked ``where=`` string evaluated on ``frame``, without a data-dependent error.

    Whether the evaluation fails must not depend on the data: a condition that raises for
    one person's value only (a cast of 0.5 to an integer, an integer to a negative power)
    would answer a yes/no question about that person, through a refusal that charges
    nothing. So the condition is first evaluated on one made-up row per dtype (schema
    errors are refused there, whatever the data); on the data, rows whose evaluation
    raises are left out (a block that raises is split until its rows are evaluated one
    by one), and nothing is reported.
    """
    names = where_names(where)
    # pandas resolves a name that is not a column (backticked or not) to the index or a
    # level of it: a row's position among the others, with the default index.
    unknown = sorted(names - {str(c) for c in frame.columns} - {"inf", "Inf", "nan", "NaN"})
    if unknown:
        raise InvalidParameterError(
            f"where={where!r} reads {unknown!r}, which are not columns of the frame (pandas "
            f"would read the index, or a level of it: a row's position among the others "
            f"with the default index). Use columns only; to filter on the index, make it "
            f"a column first (df.reset_index()), and name values with @variables."
        )
    object_columns = {
        str(c)
        for c in frame.columns
        if str(c) in names
        and not isinstance(frame[c], pd.DataFrame)
        and pd.api.types.is_object_dtype(frame[c].dtype)
    }
    misused = _object_column_misuse(where, object_columns) if object_columns else None
    if misused is not None:
        raise InvalidParameterError(
            f"where={where!r} uses {misused!r}, a column of Python objects (dtype object), in "
            f"something other than ==, !=, in or isin: on objects, .str, ordering, arithmetic "
            f"and casts can fail on one value's type, and a failure that depends on one person "
            f"would answer about them. Give the column a type first, e.g. "
            f"df.astype({{{misused!r}: 'string'}}), or compare with == and isin."
        )
    if "astype" in where and any(
        pd.api.types.is_datetime64_any_dtype(frame[c].dtype)
        or pd.api.types.is_timedelta64_dtype(frame[c].dtype)
        for c in frame.columns
        if str(c) in names and not isinstance(frame[c], pd.DataFrame)
    ):  # a datetime's integer value is in the column's unit, set by every row
        raise InvalidParameterError(
            f"where={where!r} converts a date or duration with astype, whose result depends on "
            f"the unit of the whole column; compare dates (where=\"visit >= '2020-01-01'\") "
            f"or use .dt fields (visit.dt.year)."
        )
    try:
        schema = frame.iloc[:0].eval(where)
        example = _example_row(frame, names).eval(where)
    except Exception as exc:  # pandas raises many kinds; report them all as our own
        raise InvalidParameterError(
            f"where={where!r} could not be evaluated on the frame's columns "
            f"({type(exc).__name__}: check its column names and types). Use a pandas "
            f'expression such as where="Age >= 18" or a boolean Series.'
        ) from None  # made-up values only: nothing of the data
    for result in (schema, example):
        dtype = getattr(result, "dtype", None)
        if not (dtype == np.bool_ or str(dtype) in ("boolean", "bool[pyarrow]")):
            raise InvalidParameterTypeError(f"where must be boolean, got dtype {dtype}.")
    mask = np.zeros(len(frame), dtype=bool)
    pending = [(0, len(frame))]
    while pending:
        start, stop = pending.pop()
        try:
            block = frame.iloc[start:stop].eval(where)
            mask[start:stop] = np.asarray(pd.Series(block).fillna(False).to_numpy(dtype=bool))
        except Exception:  # any error of a value: its rows are left out, unreported
            if stop - start > 1:
                middle = (start + stop) // 2
                pending += [(start, middle), (middle, stop)]
    return mask


def _example_row(frame: pd.DataFrame, names: set[str]) -> pd.DataFrame:
    """One made-up row of the columns ``names`` reads, in their dtypes (0, "", False, the
    epoch; missing where no value is public, as for a categorical)."""
    frame = frame.loc[:, [str(c) in names for c in frame.columns]]
    values: dict[Any, Any] = {}
    for position, dtype in enumerate(frame.dtypes):
        if isinstance(dtype, pd.CategoricalDtype) or str(dtype) == "object":
            value: Any = None  # no category is public, and objects may hold anything
        elif pd.api.types.is_bool_dtype(dtype):
            value = False
        elif pd.api.types.is_numeric_dtype(dtype):
            value = 0
        elif pd.api.types.is_datetime64_any_dtype(dtype):
            value = pd.Timestamp(0, tz=getattr(dtype, "tz", None))
        elif pd.api.types.is_timedelta64_dtype(dtype):
            value = pd.Timedelta(0)
        elif pd.api.types.is_string_dtype(dtype):
            value = ""
        else:
            value = None
        try:
            values[position] = pd.array([value], dtype=dtype)
        except (TypeError, ValueError):  # a dtype without a missing value (intervals of int)
            values[position] = frame.iloc[:0, position].reindex(range(1))
    example = pd.DataFrame(values)
    example.columns = frame.columns
    return example


def is_real_dtype(dtype: Any) -> bool:
    """Whether a column dtype holds real numbers (bools count as 0/1).

    A sparse dtype is judged by the type of its values (pandas calls a sparse column of
    dates or durations numeric; their values are nanoseconds, not numbers).
    """
    if isinstance(dtype, pd.SparseDtype):
        dtype = dtype.subtype
    try:
        return not (
            isinstance(dtype, pd.CategoricalDtype)
            or pd.api.types.is_complex_dtype(dtype)
            or not (pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype))
        )
    except (NotImplementedError, TypeError):  # Arrow types pandas cannot map (intervals)
        return False


def numeric_dtype(dtype: Any, name: Hashable) -> None:
    """Refuse a column dtype that is not a real number (bools count as 0/1)."""
    if not is_real_dtype(dtype):
        raise InvalidParameterTypeError(
            f"column {name!r} has dtype {dtype}, not a number; this statistic reads numbers. "
            f"Convert it first, e.g. pd.to_numeric(df[{name!r}], errors='coerce')."
        )


def selectable_keys(dtype: Any, name: Hashable) -> None:
    """Refuse, for private key selection, a key column whose labels could tell the data.

    Released labels are built from the selected keys alone. Interval keys are usually
    cut from the values themselves (``pd.cut(x, bins=4)`` reads the minimum and
    maximum); a categorical of Python objects that are not all strings mixes types, and
    which of the equal keys 1, 1.0 and True labels a cell would depend on the rows (an
    object column is checked as its keys are read: :func:`selectable_object_keys`).
    """
    values = dtype.categories.dtype if isinstance(dtype, pd.CategoricalDtype) else dtype
    if isinstance(values, pd.IntervalDtype):
        raise DomainError(
            f"private_keys=True cannot select intervals ({name!r} holds {dtype}): interval "
            f"keys are usually cut from the values (pd.cut(x, bins=4) reads their minimum "
            f"and maximum), and their labels would tell them. Declare the bins instead, "
            f"and release every one: domains={{{name!r}: pd.IntervalIndex.from_breaks([...])}}, "
            f"without private_keys."
        )
    if isinstance(dtype, pd.CategoricalDtype):
        selectable_object_keys(dtype.categories, dtype.categories.dtype, name)


def selectable_object_keys(keys: pd.Index, dtype: Any, name: Hashable) -> None:
    """Refuse object keys that are not all strings (private key selection).

    Equal keys of different types (1, 1.0, True, np.int64(1)) are one key, labelled by
    whichever the rows hold first, and mixed types change how keys sort: the labels of
    selected keys would tell other rows. Read from the data for an object column: the
    refusal tells that some row holds a value that is not a string (see the README's
    threat model).
    """
    if pd.api.types.is_object_dtype(dtype) and not all(isinstance(k, str) for k in keys):
        raise DomainError(
            f"private_keys=True selects keys of one type: {name!r} ({dtype}) holds Python "
            f"objects that are not all strings, and which of equal keys (1, 1.0, True) "
            f"labels a cell would depend on other rows. Convert the column first, e.g. "
            f"df[{name!r}].astype(str), or .astype('Int64') for integers."
        )


def numeric_values(series: pd.Series[Any], name: Hashable) -> NDArray[np.float64]:
    """A numeric column as float64, missing values (NaN, NA, None) as NaN."""
    numeric_dtype(series.dtype, name)
    if series.dtype == np.float64:
        return np.asarray(series.to_numpy())  # a view: NaN already marks missing values
    if isinstance(series.dtype, pd.SparseDtype):
        # pandas cannot make a dense array of a sparse one whose fill value is NA (it
        # raises only when some row holds the fill value): fill the rows by hand.
        sparse = series.array
        fill = sparse.fill_value
        dense = np.full(len(sparse), np.nan if pd.isna(fill) else float(fill))
        dense[sparse.sp_index.indices] = np.asarray(sparse.sp_values, dtype=np.float64)
        return dense
    return np.asarray(series.to_numpy(dtype=np.float64, na_value=np.nan))


# ---------------------------------------------------------------- crosstab options

Normalize = Literal[False, "all", "index", "columns"]


def normalize(value: object) -> Normalize:
    """``pd.crosstab``'s ``normalize=`` in one spelling: False, "all", "index" or "columns".

    pandas also takes True (for "all"), 0 (for "index") and 1 (for "columns"); they are
    read as those names here, so that no later test confuses True with 1 or False with 0.
    """
    if isinstance(value, bool | np.bool_):
        return "all" if value else False
    if isinstance(value, str) and value in ("all", "index", "columns"):
        return cast(Normalize, value)
    if isinstance(value, int | np.integer) and value in (0, 1):
        return "index" if value == 0 else "columns"
    raise InvalidParameterError(
        f"normalize must be one of False, True, 'all', 'index' or 'columns' (or 0, 1), got "
        f"{value!r}."
    )


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
    normalize: Normalize
    nonnegative: bool
    dropna: bool
    rownames: tuple[Hashable, ...] | None
    colnames: tuple[Hashable, ...] | None

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
    dropna: object = True,
    rownames: object = None,
    colnames: object = None,
) -> CrosstabOptions:
    """Check a crosstab's options together (values, aggfunc and bounds go together)."""
    keep_nonnegative = flag(nonnegative, "nonnegative")
    drop_missing = flag(dropna, "dropna")
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
        checked_bounds,
        with_margins,
        margins_name,
        checked_normalize,
        keep_nonnegative,
        drop_missing,
        _level_names(rownames, "rownames"),
        _level_names(colnames, "colnames"),
    )


def _level_names(value: object, param: str) -> tuple[Hashable, ...] | None:
    """``rownames=``/``colnames=``: a sequence of labels (a single label for one level)."""
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Sequence):
        value = [value]
    return tuple(cast(Sequence[Hashable], value))


def check_level_names(names: tuple[Hashable, ...] | None, levels: int, param: str) -> None:
    """``rownames`` or ``colnames`` must name every level of its axis, as in pd.crosstab."""
    if names is not None and len(names) != levels:
        raise InvalidParameterError(
            f"{param} has {len(names)} name(s) for {levels} grouping(s); give one per grouping."
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
                f"bounds_epsilon ({show(share)}) must be less than epsilon "
                f"({show(total)}): it is the share of epsilon spent on the bounds."
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
    if isinstance(value, int | np.integer) and value < 0:
        raise InvalidParameterError(f"an rng seed must be a non-negative integer, got {value}.")
    return np.random.default_rng(value)


def describe_percentiles(value: object) -> tuple[float, ...]:
    """``describe``'s ``percentiles=``: distinct numbers in [0, 1], sorted, as pandas reads them.

    pandas refuses duplicates and a scalar, and sorts the rest; an empty list is refused
    here too, since ``describe`` spends half its budget on the percentiles.
    """
    fix = "Pass a list of numbers in [0, 1], like pandas: percentiles=[0.25, 0.5, 0.75]."
    if isinstance(value, np.ndarray) and value.ndim == 1:
        items = value.tolist()
    elif isinstance(value, Sequence) and not isinstance(value, str | bytes):
        items = list(value)
    else:
        raise InvalidParameterTypeError(f"percentiles must be a list, got {value!r}. {fix}")
    if not items:
        raise InvalidParameterError(
            "percentiles is empty, but describe gives half of each column's budget to "
            "them; for count, mean and std alone use df.dp.var or df.dp.std, whose "
            "metadata holds the count and mean parts."
        )
    levels = []
    for item in items:
        if isinstance(item, bool | np.bool_) or not isinstance(item, numbers.Real):
            raise InvalidParameterTypeError(
                f"percentiles must hold numbers, got {item!r} of type {type(item).__name__}. {fix}"
            )
        level = float(item)
        if not 0 <= level <= 1:  # NaN fails too
            raise InvalidParameterError(f"percentiles must lie in [0, 1], got {item!r}. {fix}")
        levels.append(level)
    if len(set(levels)) != len(levels):
        raise InvalidParameterError(
            f"percentiles cannot contain duplicates (as in pandas), got {items!r}."
        )
    return tuple(sorted(levels))


def describe_bounds(value: object) -> dict[Hashable, tuple[float, float]]:
    """``describe``'s ``bounds=``: ``{column: (lo, hi)}`` for at least one column."""
    if not isinstance(value, Mapping) or not value:
        raise InvalidParameterTypeError(
            f"bounds must be a dict of the columns to describe and their declared ranges, "
            f'got {type(value).__name__}. Example: bounds={{"Age": (0, 120)}}.'
        )
    return {name: sum_bounds(pair, f"bounds[{name!r}]") for name, pair in value.items()}
