"""``import dpframe`` beside ``import numpy, pandas``, in fresh interpreters, interleaved.

Run: ``python benchmarks/bench_import.py``. Each case runs in a new subprocess (so nothing
is cached in the process), the cases alternate, and the medians of the runs are compared;
the ratio is what the packaging target is about (``import dpframe`` at most 1.3 times
``import numpy, pandas``, with the dask extra installed), since the machine is noisy.

Bytecode is compared like for like: numpy and pandas are installed with compiled ``.pyc``
files, so the subprocesses run without ``PYTHONDONTWRITEBYTECODE`` and one warm-up round
(not timed) lets Python cache dpframe's bytecode, as it does after any installation. With
that variable set, an editable checkout recompiles every dpframe module on each import
(about 0.1 s here), which measures the compiler, not the package.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

CASES = {
    "python -c pass": "pass",
    "import numpy, pandas": "import numpy, pandas",
    "import dpframe": "import dpframe",
    "import dask.dataframe (for scale)": "import dask.dataframe",
}
RUNS = 9
# Like an installed package: bytecode may be cached (see the module docstring).
ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def _seconds(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=ENV)
    return time.perf_counter() - start


def main() -> None:
    for code in CASES.values():  # warm-up, not timed: writes dpframe's .pyc files
        _seconds(code)
    times: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(RUNS):
        for name, code in CASES.items():  # interleaved: each round runs every case
            times[name].append(_seconds(code))
    medians = {name: statistics.median(values) for name, values in times.items()}
    for name, median in medians.items():
        print(f"  {name:<36} median {median * 1e3:7.0f} ms over {RUNS} runs")
    base, empty = medians["import numpy, pandas"], medians["python -c pass"]
    ratio = medians["import dpframe"] / base
    net = (medians["import dpframe"] - empty) / (base - empty)
    print(f"  import dpframe / import numpy, pandas: {ratio:.2f} (target <= 1.3)")
    print(f"  the same, interpreter start-up subtracted: {net:.2f}")


if __name__ == "__main__":
    main()
