"""Every benchmark script loads: its imports, in their order, and its module-level code.

The scripts are not run (they take minutes); a script that cannot even start (say, one
importing numpy before ``_timing`` pins the thread count) would otherwise go unnoticed
until someone needs its figures.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = sorted((Path(__file__).resolve().parents[1] / "benchmarks").glob("bench_*.py"))


def test_the_benchmarks_are_found() -> None:
    assert len(BENCHMARKS) >= 10


@pytest.mark.parametrize("script", BENCHMARKS, ids=lambda path: path.name)
def test_benchmark_script_loads(script: Path) -> None:
    code = f"import runpy; runpy.run_path({str(script)!r}, run_name='loaded_by_the_tests')"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
