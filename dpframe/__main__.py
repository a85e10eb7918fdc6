"""``python -m dpframe``: seed 003's census workflow, end to end."""

from __future__ import annotations

import pandas as pd

from dpframe import datasets, mechanisms


def main() -> None:
    """Print the true table, a DP table, and the error tables for a synthetic census."""
    df = datasets.census(1000, seed=2026)
    epsilon = 0.5
    true = pd.crosstab(df["Occupation"], df["Sex"], dropna=False)
    true = true.reindex(
        index=list(datasets.OCCUPATIONS), columns=list(datasets.SEXES), fill_value=0
    )
    noisy_values = mechanisms.geometric(true.to_numpy(), epsilon=epsilon)
    noisy = pd.DataFrame(noisy_values, index=true.index, columns=true.columns).clip(lower=0)
    error = (noisy - true).abs()
    with pd.option_context("display.width", 120):
        print(f"True table ({len(df)} synthetic records):\n{true}\n")
        print(f"DP table (geometric mechanism, epsilon={epsilon}, negatives set to 0):\n{noisy}\n")
        print(f"Cell-by-cell absolute error:\n{error}\n")
        print(f"Cell-by-cell relative error:\n{(error / true).round(3)}\n")
        total = int(error.to_numpy().sum())
        print(f"Total L1 error: {total}")
        print(f"Relative L1 error: {100 * total / int(true.to_numpy().sum()):.2f}%")


if __name__ == "__main__":
    main()
