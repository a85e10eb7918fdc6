"""Fixtures shared by the test modules."""

from __future__ import annotations

import math
import os
import secrets

import numpy as np
import pandas as pd
import pytest
from hypothesis import settings
from numpy.typing import NDArray

import dpframe  # noqa: F401  (registers .dp)
from dpframe import _random

# Hypothesis: CI, which gates every landing, draws the same examples on each run
# (derandomized, so a failure there replays as is); everywhere else each run explores
# new ones, and a failure prints the blob that replays it (@reproduce_failure). Explore
# further with `pytest tests/test_extreme_parameters.py --hypothesis-seed=<n>`.
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "explore")


class WordCounter:
    """Counts the random words the default (cryptographic) source hands out."""

    def __init__(self) -> None:
        self.words = 0
        self.calls: list[int] = []


@pytest.fixture
def word_counter(monkeypatch: pytest.MonkeyPatch) -> WordCounter:
    """Instrument ``CryptoBitSource.words``: refused calls must draw nothing, constant-time
    calls a fixed number of words."""
    counter = WordCounter()
    original = _random.CryptoBitSource.words

    def counting(self: _random.CryptoBitSource, n: int) -> NDArray[np.uint64]:
        counter.words += n
        counter.calls.append(n)
        return original(self, n)

    monkeypatch.setattr(_random.CryptoBitSource, "words", counting)
    return counter


def budgeted(
    frame: pd.DataFrame, epsilon: float = math.inf, delta: float | None = None
) -> pd.DataFrame:
    """``frame`` with a budget set (unlimited by default, as for classroom exploration),
    declaring the categories of its Categorical columns as their domains: the tests build
    those categories from code books, never from the data."""
    schema = getattr(frame, "_meta", frame)  # a Dask frame's dtypes live in its _meta
    domains = {
        name: dtype.categories
        for name, dtype in schema.dtypes.items()
        if isinstance(dtype, pd.CategoricalDtype)
        and len(dtype.categories)
        and "__UNKNOWN_CATEGORIES__" not in dtype.categories
    }
    frame.dp.set_budget(epsilon=epsilon, delta=delta, domains=domains)
    return frame


@pytest.fixture
def test_rng() -> np.random.Generator:
    """A test-only generator (for data and shuffles, never for privacy noise) whose seed is
    printed, so that a failing run can be replayed: ``DPFRAME_TEST_SEED=<seed> pytest ...``
    (pytest shows a failing test's captured output)."""
    seed = int(os.environ.get("DPFRAME_TEST_SEED") or secrets.randbits(63))
    print(f"test generator seed: {seed} (replay with DPFRAME_TEST_SEED={seed})")
    return np.random.default_rng(seed)
