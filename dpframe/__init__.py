"""dpframe: differential privacy as a pandas one-liner.

``import dpframe`` registers the ``.dp`` accessor on every pandas DataFrame::

    df.dp.set_budget(epsilon=1.0)
    df.dp.crosstab("Occupation", "Sex", epsilon=0.5)

Underneath, :mod:`dpframe.mechanisms` holds the exact, vectorized, cryptographically
seeded mechanisms, and :mod:`dpframe.datasets` synthetic data to try them on.
"""

from __future__ import annotations

from dpframe import datasets, errors, mechanisms, plotting
from dpframe._accessor import DPAccessor, dp
from dpframe._ledger import Budget, Ledger
from dpframe._results import DPFloat, DPInt, release_info

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
