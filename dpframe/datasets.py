"""Synthetic data sets for demos, tests and teaching.

Nothing here is real data. :func:`census` generates records shaped like the census
notebook of seed 003 (sex, age, marital status, earnings, occupation), with every
categorical column typed as a pandas Categorical over its full code book.
:data:`CENSUS_DOMAINS` is that code book, to declare once per data set, as seed 003
declares its ``sexvalid`` and ``occvalid`` lists::

    df.dp.set_budget(epsilon=1.0, domains=CENSUS_DOMAINS)
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpframe._typing import RNGLike
from dpframe.errors import InvalidParameterError

__all__ = ["CENSUS_DOMAINS", "MARITAL_STATUSES", "OCCUPATIONS", "SEXES", "census"]

SEXES: tuple[str, ...] = ("M", "F")
MARITAL_STATUSES: tuple[str, ...] = ("M", "W", "S", "D", "N")
OCCUPATIONS: tuple[str, ...] = (
    "Statistician",
    "Economist",
    "Geographer",
    "IT Specialist",
    "Unicorn Wrangler",
)
#: The code book of :func:`census`: every possible key of its grouping columns, declared
#: without looking at any data (seed 003's ``sexvalid`` and ``occvalid``).
CENSUS_DOMAINS: dict[str, tuple[str, ...]] = {
    "Sex": SEXES,
    "Married": MARITAL_STATUSES,
    "Occupation": OCCUPATIONS,
}

_SEX_P = (0.5, 0.5)
_MARITAL_P = (0.478, 0.057, 0.109, 0.019, 0.337)
_OCCUPATION_P = (0.3, 0.3, 0.2, 0.19, 0.01)


def census(n: int = 100, *, rng: RNGLike | None = None) -> pd.DataFrame:
    """Generate ``n`` census-like records (the data set of seed 003, made reproducible).

    Parameters
    ----------
    n : int, default 100
        Number of records.
    rng : numpy Generator or seed, optional
        Randomness for the synthetic data (SPEC 7; this is the data, not the privacy
        noise). The default draws fresh data each time.

    Returns
    -------
    pandas.DataFrame
        Columns ``Sex``, ``Age``, ``Married``, ``Earnings`` and ``Occupation``.
        ``Sex``, ``Married`` and ``Occupation`` are Categoricals whose categories are
        the full code book (:data:`SEXES`, :data:`MARITAL_STATUSES`,
        :data:`OCCUPATIONS`), including the rare "Unicorn Wrangler". Declare it with
        ``df.dp.set_budget(..., domains=CENSUS_DOMAINS)`` before grouping by them.

    Notes
    -----
    Ages are normal(45, 10) rounded to integers and clipped to [16, 99]; earnings are
    10 to the power of a normal(5, 0.5) truncated to [3.5, 7], rounded to integers, as
    in seed 003. Not private data: use it to see what the mechanisms do.

    References
    ----------
    Seed ``003_ce3353c9005cacf5.txt`` (census-style geometric mechanism notebook).

    Examples
    --------
    >>> from dpframe.datasets import census
    >>> df = census(1000, rng=1)
    >>> list(df["Occupation"].cat.categories)[-1]
    'Unicorn Wrangler'
    """
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
        raise InvalidParameterError(f"n must be a non-negative integer, got {n!r}")
    gen = np.random.default_rng(rng)
    age = np.clip(np.rint(gen.normal(45, 10, size=n)), 16, 99).astype(np.int64)
    exponent = gen.normal(5, 0.5, size=n)
    bad = (exponent < 3.5) | (exponent > 7)
    while bad.any():  # truncate to [3.5, 7] by redrawing, as truncnorm(-3, 4) does
        exponent[bad] = gen.normal(5, 0.5, size=int(bad.sum()))
        bad = (exponent < 3.5) | (exponent > 7)
    earnings = np.rint(10.0**exponent).astype(np.int64)

    def categorical(domain: tuple[str, ...], p: tuple[float, ...]) -> pd.Categorical:
        codes = gen.choice(len(domain), size=n, p=p)
        dtype = pd.CategoricalDtype(list(domain))
        return pd.Categorical.from_codes(codes, dtype=dtype)

    return pd.DataFrame(
        {
            "Sex": categorical(SEXES, _SEX_P),
            "Age": age,
            "Married": categorical(MARITAL_STATUSES, _MARITAL_P),
            "Earnings": earnings,
            "Occupation": categorical(OCCUPATIONS, _OCCUPATION_P),
        }
    )
