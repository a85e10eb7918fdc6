"""``import dpframe`` stays light: Dask is registered when imported by the user, never by dpframe.

Import *time* is measured by ``benchmarks/bench_import.py`` (no timed assertions here);
these tests check what the time depends on: which heavy modules get imported.
"""

from __future__ import annotations

import subprocess
import sys

import pytest


def _run(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    return result.stdout.strip()


def test_import_dpframe_imports_no_heavy_optional_module() -> None:
    out = _run(
        "import sys, dpframe\n"
        "heavy = ['dask', 'dask.dataframe', 'distributed', 'matplotlib', 'scipy']\n"
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    assert out == "[]"


def test_validity_the_check_sees_an_eager_import() -> None:
    out = _run("import sys, dpframe, dask.dataframe\nprint('dask.dataframe' in sys.modules)")
    assert out == "True"


@pytest.mark.parametrize(
    "order",
    ["import dpframe\nimport dask.dataframe as dd", "import dask.dataframe as dd\nimport dpframe"],
    ids=["dpframe first", "dask first"],
)
def test_dask_frames_get_dp_in_either_import_order(order: str) -> None:
    pytest.importorskip("dask.dataframe")
    out = _run(
        f"{order}\n"
        "import pandas as pd\n"
        "ddf = dd.from_pandas(pd.DataFrame({'x': [1, 2, 3]}), npartitions=1)\n"
        "print(type(ddf.dp).__name__, type(ddf.dp._backend).__name__)"
    )
    assert out == "DPAccessor DaskBackend"
