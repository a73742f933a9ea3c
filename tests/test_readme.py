"""The README's Python examples run as written (from the repository root, as a reader would)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)


def test_the_readme_has_python_examples() -> None:
    assert BLOCKS


@pytest.mark.parametrize("source", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_example_runs(source: str, capsys: pytest.CaptureFixture[str]) -> None:
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        exec(compile(source, "README.md", "exec"), {})  # our own documentation
    finally:
        os.chdir(cwd)
    assert capsys.readouterr().out.strip()
