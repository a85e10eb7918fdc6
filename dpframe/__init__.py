"""dpframe: differential privacy as a pandas one-liner.

``import dpframe`` gives you exact, vectorized, cryptographically seeded mechanisms in
:mod:`dpframe.mechanisms` and the synthetic data of :mod:`dpframe.datasets`.
"""

from __future__ import annotations

from dpframe import datasets, errors, mechanisms

__all__ = ["__version__", "datasets", "errors", "mechanisms"]

__version__ = "0.1.0"
