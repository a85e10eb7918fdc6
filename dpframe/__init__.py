"""dpframe: differential privacy as a pandas one-liner.

``import dpframe`` registers the ``.dp`` accessor on every pandas DataFrame (and, with
the ``dask`` extra installed, on every Dask DataFrame)::

    df.dp.set_budget(epsilon=1.0)
    df.dp.crosstab("Occupation", "Sex", epsilon=0.5)

Underneath, :mod:`dpframe.mechanisms` holds the exact, vectorized, cryptographically
seeded mechanisms, and :mod:`dpframe.datasets` synthetic data to try them on.
"""

from __future__ import annotations

import importlib

from dpframe import datasets, errors, mechanisms, plotting
from dpframe._accessor import DPAccessor, dp
from dpframe._ledger import Budget, Ledger
from dpframe._results import DPFloat, DPInt, release_info

try:  # the optional "dask" extra: .dp on Dask DataFrames too
    importlib.import_module("dask.dataframe")
except ImportError:
    pass
else:
    from dpframe import _dask  # noqa: F401  (importing it registers the accessor)

__all__ = [
    "Budget",
    "DPAccessor",
    "DPFloat",
    "DPInt",
    "Ledger",
    "__version__",
    "datasets",
    "dp",
    "errors",
    "mechanisms",
    "plotting",
    "release_info",
]

__version__ = "0.1.0"
