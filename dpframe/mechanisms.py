"""Differentially private mechanisms: arrays in, arrays out, no pandas.

Every function here is vectorized (one call noises a whole array), draws its
randomness from a cryptographic source unless the caller passes ``rng=`` (which makes
the result reproducible and therefore not private), validates every parameter before
drawing anything, and states its privacy guarantee in its Notes.

This module is a façade: it holds no code of its own, only the public names of the
engines (``_geometric``, ``_laplace``, ``_decisions``). The ``.dp`` accessor and
:mod:`dpframe.plotting` reach every engine through these names only, noise and error
bars alike, so each mechanism has one route in.
"""

from __future__ import annotations

from dpframe._decisions import decision_probability, key_selection, threshold_decision
from dpframe._gaussian import discrete_gaussian, discrete_gaussian_accuracy
from dpframe._geometric import geometric, geometric_accuracy, geometric_rejection_epsilon
from dpframe._laplace import bounded_laplace, bounded_laplace_accuracy, laplace, laplace_accuracy
from dpframe._quantiles import (
    quantile,
    quantile_accuracy,
    quantile_of_counts,
    quantile_resolution,
)

__all__ = [
    "bounded_laplace",
    "bounded_laplace_accuracy",
    "decision_probability",
    "discrete_gaussian",
    "discrete_gaussian_accuracy",
    "geometric",
    "geometric_accuracy",
    "geometric_rejection_epsilon",
    "key_selection",
    "laplace",
    "laplace_accuracy",
    "quantile",
    "quantile_accuracy",
    "quantile_of_counts",
    "quantile_resolution",
    "threshold_decision",
]
