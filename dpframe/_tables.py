"""Labelling noisy cells like pandas: the index of a grouping, and ``pd.crosstab``'s layout.

Post-processing only: everything here takes values that were already released.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Hashable, Mapping, Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dpframe._backends import Group
from dpframe._backends.kernels import nullable_dtype
from dpframe._moments import moment_estimate
from dpframe._plans import ALPHA, DescribeSplit, MomentRelease, TableBars, TablePlan, covers_like
from dpframe._release import JSONValue, Release, call_metadata
from dpframe._results import DPFloat, frame, real, series
from dpframe._validation import CrosstabOptions
from dpframe.errors import InvalidParameterError

__all__ = [
    "crosstab_frame",
    "crosstab_result",
    "describe_result",
    "labels",
    "quantile_result",
    "share_intervals",
    "value_counts_result",
]


def _level(group: Group) -> pd.Index:
    """The labels of one grouping, in the column's dtype as pandas labels a grouping.

    With ``dropna=False`` the domain ends in a missing-key cell: it stays a category
    (NaN) of a categorical, and an integer column's labels become the nullable integer
    type (``<NA>``) rather than floats, so that the keys keep their values. A nullable
    integer column (``Int64``) is labelled in its dtype, as pandas does.
    """
    dtype, domain = group.dtype, group.domain
    missing = domain.hasnans
    keys = domain[:-1] if missing else domain
    if isinstance(dtype, pd.CategoricalDtype) and _same_keys(dtype.categories, keys):
        level: pd.Index = pd.CategoricalIndex(domain, dtype=dtype, name=group.name)
        return level
    nullable = nullable_dtype(dtype) if missing else dtype
    # Only integer keys: string dtypes differ between pandas ("str") and Dask ("string"),
    # and a plain index labels them alike.
    if isinstance(nullable, pd.api.extensions.ExtensionDtype) and pd.api.types.is_integer_dtype(
        nullable
    ):
        values = [pd.NA if _is_missing(key) else key for key in domain]
        try:
            typed: pd.Index = pd.Index(values, dtype=nullable, name=group.name)
        except (TypeError, ValueError, OverflowError):  # keys the dtype cannot hold: plain labels
            pass
        else:
            if not missing or typed[:-1].equals(keys):  # no key changed value on the way
                return typed
    plain: pd.Index = pd.Index(domain, name=group.name)
    return plain


def _same_keys(categories: pd.Index, keys: pd.Index) -> bool:
    """Whether the declared keys are the categories (an integer domain may be nullable)."""
    return categories.astype(object).equals(keys.astype(object))


def labels(groups: Sequence[Group]) -> pd.Index:
    """The labels of the cells of ``groups``, in the order of their declared domains."""
    if len(groups) == 1:
        return _level(groups[0])
    product: pd.Index = pd.MultiIndex.from_product(
        [_level(g) for g in groups], names=[g.name for g in groups]
    )
    return product


def released_labels(groups: Sequence[Group], chosen: slice | NDArray[np.bool_]) -> pd.Index:
    """The labels of the released cells: every cell, or the keys selection chose.

    Selected keys are labelled from themselves alone, in the type of the column's values
    (a categorical's categories): the categories, or a dtype inferred from every key
    found, would show keys that were not selected.
    """
    if isinstance(chosen, slice):
        return labels(groups)[chosen]
    (group,) = groups
    dtype = group.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        dtype = dtype.categories.dtype
    keys = list(group.domain[chosen])
    if pd.api.types.is_object_dtype(dtype):  # strings only (selectable_object_keys)
        return pd.Index([str(key) for key in keys], dtype=object, name=group.name)
    if pd.api.types.is_float_dtype(dtype):
        keys = [key + 0.0 for key in keys]  # -0.0 and 0.0 are one key: one spelling
    released: pd.Index = pd.Index(pd.array(keys, dtype=dtype), name=group.name)
    return released


def _long_labels(
    groups: Sequence[Group], *, repeat: int = 1, tile: int = 1
) -> list[pd.Series[Any]]:
    """One label Series per grouping column, with one entry per cell of the table.

    The categories are the keys' *positions* in their domains, restored afterwards by
    :func:`_restore_keys`: pandas cannot take every key as a category (NaN, NaT, tuples).
    """
    sizes = [len(g.domain) for g in groups]
    out = []
    for level, group in enumerate(groups):
        later = math.prod(sizes[level + 1 :])
        codes = np.tile(np.repeat(np.arange(sizes[level]), later), math.prod(sizes[:level]))
        codes = np.tile(np.repeat(codes, repeat), tile)
        categorical = pd.Categorical.from_codes(codes, categories=pd.RangeIndex(sizes[level]))
        out.append(pd.Series(categorical, name=group.name))
    return out


def _is_missing(key: object) -> bool:
    return (
        key is None or key is pd.NA or key is pd.NaT or (isinstance(key, float) and math.isnan(key))
    )


def _restore_keys(index: pd.Index, groups: Sequence[Group]) -> pd.Index:
    """``index`` of pandas' crosstab on positions, with each position back to its key.

    The margins' labels (``margins_name``, and pandas' ``""`` filling a MultiIndex) are
    strings, never positions, and stay as they are.
    """
    levels = [_level(group) for group in groups]

    def key(position: object, level: pd.Index) -> object:
        if isinstance(position, int | np.integer) and not isinstance(position, bool):
            return level[int(position)]
        return position

    if len(groups) == 1:
        return pd.Index([key(p, levels[0]) for p in index], dtype=object, name=index.name)
    tuples = [tuple(key(p, level) for p, level in zip(t, levels, strict=True)) for t in index]
    return pd.MultiIndex.from_tuples(tuples, names=index.names)


def crosstab_frame(
    cells: NDArray[Any],
    rows: Sequence[Group],
    columns: Sequence[Group],
    *,
    margins: bool,
    margins_name: str,
    normalize: bool | str | int,
) -> pd.DataFrame:
    """The released table; margins and normalization exactly as ``pd.crosstab`` does them."""
    row_index, col_index = labels(rows), labels(columns)
    plain = pd.DataFrame(cells, index=row_index, columns=col_index)
    if not margins and normalize is False:
        return plain
    # Re-run pandas' own crosstab on the noisy cells (one row per cell), so margins and
    # normalization follow its exact semantics; categoricals keep the declared order.
    result = pd.crosstab(
        _long_labels(rows, repeat=len(col_index)),
        _long_labels(columns, tile=len(row_index)),
        values=cells.reshape(-1),
        aggfunc="sum",
        margins=margins,
        margins_name=margins_name,
        normalize=normalize,  # type: ignore[arg-type]
        dropna=False,
    )
    if not margins:
        result.index, result.columns = row_index, col_index
    else:
        result.index, result.columns = (
            _restore_keys(result.index, rows),
            _restore_keys(result.columns, columns),
        )
    return result


def share_intervals(
    raw: NDArray[np.float64],
    bars: NDArray[np.float64],
    normalize: bool | str | int,
    *,
    shares_in_unit_interval: bool,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Intervals for the true shares of a normalized table, from its noisy cells and margins.

    ``raw`` is the noisy table with margins (last row and column), ``bars`` the half-width
    of each of its values at level alpha/2. A share is ``v / V`` (a cell or margin over
    its row, column or grand total); with probability at least 1 - alpha the true ``v``
    and ``V`` lie within their bars of the noisy ones, so the true share lies between the
    extremes of the ratio over that box (union bound). Counts and sums of non-negative
    values have shares in [0, 1], and the intervals are clipped to it; a signed sum whose
    total's box contains 0 gets an unbounded interval. Post-processing only.
    """
    if normalize == "all":
        denominator = np.full_like(raw, raw[-1, -1])
        denominator_bar = np.full_like(raw, bars[-1, -1])
    elif normalize == "index":
        denominator = np.repeat(raw[:, -1:], raw.shape[1], axis=1)
        denominator_bar = np.repeat(bars[:, -1:], raw.shape[1], axis=1)
    else:  # "columns"
        denominator = np.repeat(raw[-1:, :], raw.shape[0], axis=0)
        denominator_bar = np.repeat(bars[-1:, :], raw.shape[0], axis=0)
    straddles = (denominator - denominator_bar <= 0) & (denominator + denominator_bar >= 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        corners = [
            (raw + sign_n * bars) / (denominator + sign_d * denominator_bar)
            for sign_n in (-1.0, 1.0)
            for sign_d in (-1.0, 1.0)
        ]
        low = np.minimum.reduce(corners)
        high = np.maximum.reduce(corners)
    if shares_in_unit_interval:
        low = np.where(straddles, 0.0, np.clip(np.nan_to_num(low, nan=0.0), 0.0, 1.0))
        high = np.where(straddles, 1.0, np.clip(np.nan_to_num(high, nan=1.0), 0.0, 1.0))
    else:
        low = np.where(straddles, -np.inf, low)
        high = np.where(straddles, np.inf, high)
    return low, high


def _normalized_part(values: NDArray[np.float64], options: CrosstabOptions) -> NDArray[np.float64]:
    """The cells of a with-margins array that ``pd.crosstab``'s normalized table shows."""
    if not options.margins:
        return values[:-1, :-1]
    if options.normalize == "index":
        return values[:, :-1]
    if options.normalize == "columns":
        return values[:-1, :]
    return values


#: What the intervals of a normalized table cover.
_SHARES_COVER = (
    "noise only: each share's interval holds the true share with probability at least "
    "1 - alpha (union bound over its cell and its total); clamping bias is not included"
)


_BOUNDED_MARGINS = (
    "each cell's bar is the smallest that holds with probability at least 1 - alpha; each "
    "margin's holds with at least 1 - alpha by a tail or union bound on a sum of cells' "
    "noise, wider than the smallest such bar"
)


def crosstab_result(
    cells: NDArray[Any],
    rows: Sequence[Group],
    columns: Sequence[Group],
    options: CrosstabOptions,
    plan: TablePlan,
) -> tuple[pd.DataFrame, Release]:
    """The released table, laid out like ``pd.crosstab``, and its release with its bars.

    Post-processing of the noisy cells: negatives set to 0 (``nonnegative``), margins,
    normalization, level names. A normalized table gets an interval for every share
    instead of a half-width (a ratio of noisy values has no symmetric bar).
    """
    shape = (len(labels(rows)), len(labels(columns)))
    cells = cells.reshape(shape)
    if options.nonnegative:
        cells = np.maximum(cells, 0)
    table = crosstab_frame(
        cells,
        rows,
        columns,
        margins=options.margins,
        margins_name=options.margins_name,
        normalize=options.normalize,
    )
    if options.normalize is False:
        release = plan.release.replace(noise_error_bound=plan.bars.shaped(table.shape))
        if options.margins and (plan.sensitivity_squared or options.nonnegative):
            # Geometric margins are exact (the law of a sum of cells' noise); these are not.
            covers = f"{release.error_bound_covers}; {_BOUNDED_MARGINS}"
            release = release.replace(error_bound_covers=covers)
    else:
        raw = crosstab_frame(
            cells, rows, columns, margins=True, margins_name=options.margins_name, normalize=False
        ).to_numpy(dtype=np.float64)
        low, high = share_intervals(
            raw,
            plan.bars.shaped(raw.shape),
            options.normalize,
            shares_in_unit_interval=plan.shares_in_unit_interval,
        )
        interval: dict[str, JSONValue] = {
            "low": _normalized_part(low, options).tolist(),
            "high": _normalized_part(high, options).tolist(),
        }
        release = plan.release.replace(
            noise_error_bound=None,
            error_bound_covers=covers_like(plan.release, _SHARES_COVER),
            details=(*plan.release.details, ("noise_interval", interval)),
        )
    if options.rownames is not None:
        table.index = table.index.set_names(list(options.rownames))
    if options.colnames is not None:
        table.columns = table.columns.set_names(list(options.colnames))
    return table, release


def quantile_result(
    released: NDArray[np.float64],
    q: float | Sequence[float],
    groups: Sequence[Group],
    column: Hashable,
    info: dict[str, JSONValue],
) -> DPFloat | pd.Series[float]:
    """Quantiles labelled as pandas labels them (``released`` has one row per group).

    ``Series.quantile(0.5)`` is a float and ``Series.quantile([...])`` a Series indexed by
    ``q``; ``groupby(by)[column].quantile(...)`` is indexed by the groups, then ``q``.
    """
    scalar = np.ndim(q) == 0
    qs = pd.Index(np.atleast_1d(np.asarray(q, dtype=np.float64)))
    name = column
    if not groups:
        if scalar:
            return real(float(released[0, 0]), info)
        return series(released[0], qs, name, info)
    if scalar:
        return series(released[:, 0], labels(groups), name, info)
    group_labels = labels(groups)
    levels = [group_labels.get_level_values(i) for i in range(group_labels.nlevels)]
    index = pd.MultiIndex.from_arrays(
        [*(np.repeat(level, len(qs)) for level in levels), np.tile(qs, len(group_labels))],
        names=[*group_labels.names, None],
    )
    return series(released.reshape(-1), index, name, info)


def value_counts_result(
    noisy: NDArray[np.int64],
    groups: Sequence[Group],
    release: Release,
    share_bars: TableBars | None,
    normalize: bool,
    sort: bool,
    ascending: bool,
    nonnegative: bool,
    *,
    multi_index: bool = False,
) -> pd.Series[float]:
    """``value_counts``' Series from the noisy counts (post-processing only).

    ``multi_index`` labels one grouping with a one-level MultiIndex (a list of columns).

    ``share_bars`` are the bars of the counts and of their total at level alpha/2, from
    the noise actually drawn (needed when ``normalize``).
    """
    counts = np.maximum(noisy, 0) if nonnegative else noisy
    index = labels(groups)
    if multi_index and not isinstance(index, pd.MultiIndex):
        index = pd.MultiIndex.from_arrays([index])
    post = [*release.post_processing, *(["negative counts set to 0"] if nonnegative else [])]
    details = release.details
    values: NDArray[Any] = counts
    low = high = None
    if normalize:
        if share_bars is None:  # pragma: no cover - the accessor plans them
            raise InvalidParameterError("internal error: shares without their bars")
        bars = share_bars
        total = float(counts.sum())
        raw = np.column_stack([np.append(counts, total), np.append(counts, total)])
        low, high = share_intervals(
            raw.astype(np.float64), bars.shaped(raw.shape), "all", shares_in_unit_interval=True
        )
        low, high = low[:-1, 0], high[:-1, 0]
        with np.errstate(divide="ignore", invalid="ignore"):
            values = counts / total
        post.append("normalized by the noisy total")
    order = np.argsort(-values if not ascending else values, kind="stable") if sort else None
    if order is not None:
        values, index = values[order], index[order]
        post.append("sorted")
        low, high = (None, None) if low is None else (low[order], high[order])  # type: ignore[index]
    if low is not None and high is not None:
        interval: dict[str, JSONValue] = {"low": low.tolist(), "high": high.tolist()}
        details = (*details, ("noise_interval", interval))
        release = release.replace(
            noise_error_bound=None,
            error_bound_covers=covers_like(release, _SHARES_COVER),
            details=details,
        )
    release = release.replace(method="value_counts", post_processing=tuple(post))
    name = "proportion" if normalize else "count"
    return series(np.asarray(values), index, name, call_metadata([release]))


def percentile_labels(percentiles: Sequence[float]) -> list[str]:
    """Row labels of percentiles as ``DataFrame.describe`` writes them: ``"25%"``, ``"33.3%"``.

    pandas' own rule (``format_percentiles``): whole percents are written as integers; the
    others with the fewest decimals (at least one) that keep the percentiles, and 0% and
    100%, apart, found from the gaps between them.
    """
    percents = 100 * np.asarray(percentiles, dtype=np.float64)
    rounded = percents.round(_label_decimals(percents)).astype(int)
    whole = np.isclose(rounded, percents)
    if whole.all():
        return [f"{text}%" for text in rounded.astype(str)]
    decimals = _label_decimals(np.unique(percents))
    out = np.empty(len(percents), dtype=object)
    out[whole] = percents[whole].round().astype(int).astype(str)
    out[~whole] = percents[~whole].round(decimals).astype(str)
    return [f"{text}%" for text in out]


def _label_decimals(percents: NDArray[np.float64]) -> int:
    """Decimals that keep sorted percents (and 0 and 100) apart: at least one."""
    before = percents[0] if percents[0] > 0 else None
    after = 100 - percents[-1] if percents[-1] < 100 else None
    gaps = np.abs(np.ediff1d(percents, to_begin=before, to_end=after))
    gaps = gaps[gaps > 0]  # levels equal once scaled to percents: the same label, as in pandas
    return max(1, int(-np.floor(np.log10(np.min(gaps))))) if gaps.size else 1


def describe_result(
    columns: Mapping[Hashable, tuple[float, float]],
    percentiles: Sequence[float],
    stats: Sequence[tuple[MomentRelease, list[NDArray[np.float64]], NDArray[np.float64]]],
    parts: Sequence[Release],
    split: DescribeSplit,
    percentile_releases: Mapping[Hashable, Release],
) -> pd.DataFrame:
    """``describe``'s table from each column's moment parts and percentiles.

    ``percentile_releases`` describe each column's percentiles together (their bars);
    ``parts`` are what was charged, each percentile its own release.
    """
    rows = ["count", "mean", "std", *percentile_labels(percentiles)]
    table = pd.DataFrame(index=pd.Index(rows), columns=pd.Index(list(columns)), dtype=np.float64)
    intervals: dict[str, JSONValue] = {}
    for column, (moment, noisy, released) in zip(columns, stats, strict=True):
        plan = moment.plan
        mean_plan = dataclasses.replace(plan, statistic="mean", parts=plan.parts[:2])
        mean = moment_estimate(mean_plan, noisy[:2], alpha=ALPHA)
        spread = moment_estimate(plan, noisy, alpha=ALPHA)
        table[column] = [float(noisy[0][0]), mean.estimate[0], spread.estimate[0], *released]
        intervals[str(column)] = {
            "mean": [float(mean.lower[0]), float(mean.upper[0])],
            "std": [float(spread.lower[0]), float(spread.upper[0])],
        }
    first = parts[0]
    shown: dict[str, JSONValue] = {str(c): split.shown() for c in columns}
    # The percentiles' bars, from their releases: in ranks, plus the grid's resolution.
    rank_bars: dict[str, JSONValue] = {}
    resolutions: dict[str, JSONValue] = {}
    for column, release in percentile_releases.items():
        found = dict(release.details)
        rank_bars[str(column)] = found["rank_error_bound"]
        resolutions[str(column)] = found["value_resolution"]
    declared: dict[str, JSONValue] = {
        str(c): [float(lo), float(hi)] for c, (lo, hi) in columns.items()
    }
    moments = "geometric" if split.rho is None else "discrete Gaussian"
    summary = Release(
        method="describe",
        columns=tuple(str(c) for c in columns),
        where=first.where,
        by=(),
        mechanism=f"{moments} on fixed-point grids; report-noisy-max of rank scores",
        epsilon=sum((p.epsilon for p in parts), Fraction(0)),
        delta=Fraction(0),
        sensitivity=None,
        noise_scale=None,
        private=all(p.private for p in parts),
        error_bound_covers=covers_like(
            first,
            "noise only: noise_interval for mean and std (95% each), rank_error_bound (in "
            "ranks) and value_resolution for the percentiles, per column; clamping bias is "
            "not included",
        ),
        details=(
            ("split", shown),
            ("bounds", declared),
            ("noise_interval", intervals),
            ("rank_error_bound", rank_bars),
            ("value_resolution", resolutions),
        ),
        privacy_unit=first.privacy_unit,
        max_rows=first.max_rows,
        max_groups=first.max_groups,
    )
    return frame(table, call_metadata(parts, summary))
