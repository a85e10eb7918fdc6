"""dpframe: differential privacy as a pandas one-liner.

``import dpframe`` registers the ``.dp`` accessor on every pandas DataFrame, and on Dask
DataFrames as soon as ``dask.dataframe`` is imported (before or after dpframe; dpframe
never imports Dask itself)::

    df.dp.set_budget(epsilon=1.0)
    df.dp.crosstab("Occupation", "Sex", epsilon=0.5)

Underneath, :mod:`dpframe.mechanisms` holds the exact, vectorized, cryptographically
seeded mechanisms, and :mod:`dpframe.datasets` synthetic data to try them on.
"""

from __future__ import annotations

from dpframe import _attrs, _persistence, _series, datasets, errors, mechanisms, plotting
from dpframe._accessor import DPAccessor, dp
from dpframe._backends import pandas_backend
from dpframe._budget import Budget
from dpframe._dask_hook import register_dask_when_imported
from dpframe._groupby import DPGroupBy, DPSeriesGroupBy
from dpframe._ledger import Ledger
from dpframe._results import DPBool, DPFloat, DPInt, release_info
from dpframe._series import DPSeriesAccessor

register_dask_when_imported()

# Imported for their side effects: the ledger's observers, the pandas backend and the
# Series accessor.
del _attrs, _persistence, _series, pandas_backend

__all__ = [
    "Budget",
    "DPAccessor",
    "DPBool",
    "DPFloat",
    "DPGroupBy",
    "DPInt",
    "DPSeriesAccessor",
    "DPSeriesGroupBy",
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
