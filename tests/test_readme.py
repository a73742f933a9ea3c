"""The Python examples of the README and of docs/kinematics.md (the kinematics package's whole
example) run as written (from the repository root, as a reader would)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", ROOT / "docs" / "kinematics.md"]
BLOCKS = [
    (document, source)
    for document in DOCUMENTS
    for source in re.findall(r"```python\n(.*?)```", document.read_text(encoding="utf-8"), re.S)
]


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_the_document_has_python_examples(document: Path) -> None:
    assert any(path == document for path, _ in BLOCKS)


@pytest.mark.parametrize(
    ("document", "source"),
    BLOCKS,
    ids=[f"{path.name}-block{i}" for i, (path, _) in enumerate(BLOCKS)],
)
def test_readme_example_runs(
    document: Path, source: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        exec(compile(source, document.name, "exec"), {})  # our own documentation
    finally:
        os.chdir(cwd)
    assert capsys.readouterr().out.strip()
