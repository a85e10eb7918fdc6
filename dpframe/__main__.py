"""``python -m dpframe``: seed 003's census workflow as a drop-in change to pandas."""

from __future__ import annotations

import numpy as np
import pandas as pd

import dpframe  # registers the .dp accessor
from dpframe import datasets


def main() -> None:
    """Print the true table, the DP table, the error tables and the ledger."""
    df = datasets.census(1000, rng=2026)
    # Declare the valid keys once, as seed 003 does with its sexvalid and occvalid lists.
    df.dp.set_budget(epsilon=1.0, domains=datasets.CENSUS_DOMAINS)
    epsilon = 0.5

    true = pd.crosstab(df["Occupation"], df["Sex"], dropna=False)
    noisy = df.dp.crosstab("Occupation", "Sex", epsilon=epsilon, nonnegative=True)
    error = (noisy - true).abs()
    relative = error / true  # inf where the true count is 0: a real zero made visible
    total_error = int(error.to_numpy().sum())
    total = int(true.to_numpy().sum())
    bound = np.asarray(dpframe.release_info(noisy)["noise_error_bound"])[0, 0]

    with pd.option_context("display.width", 120, "display.precision", 3):
        print(f"True table ({len(df)} synthetic records; never publish this):\n{true}\n")
        print(
            f"DP table: df.dp.crosstab('Occupation', 'Sex', epsilon={epsilon}, "
            f"nonnegative=True)\n{noisy}\n"
        )
        print(f"Each cell is within ±{bound:g} of the truth with probability 95%.\n")
        print(f"Cell-by-cell absolute error:\n{error}\n")
        print(f"Cell-by-cell relative error:\n{relative}\n")
        print(f"Total L1 error: {total_error}")
        print(f"Relative L1 error: {100 * total_error / total:.2f}%\n")
        print(f"Privacy ledger:\n{df.dp.ledger}\n")
        print(df.dp.ledger.history.to_string())


if __name__ == "__main__":
    main()
