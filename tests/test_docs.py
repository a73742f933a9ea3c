"""The project describes itself: the README and docs/ link only to files that exist (and to
headings that exist in them), and nothing there points outside the repository's documentation."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"```.*?```", re.S)


def _id(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _anchors(document: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    headings = re.findall(r"^#+ (.+)$", FENCE.sub("", document.read_text(encoding="utf-8")), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_the_docs_folder_has_the_four_documents() -> None:
    names = {path.name for path in DOCUMENTS}
    assert {"mqtt.md", "architecture.md", "safety.md", "kinematic-json.md"} <= names


@pytest.mark.parametrize("document", DOCUMENTS, ids=_id)
def test_every_relative_link_resolves(document: Path) -> None:
    text = FENCE.sub("", document.read_text(encoding="utf-8"))
    links = [link for link in LINK.findall(text) if not re.match(r"[a-z]+:", link)]
    for link in links:
        target, _, anchor = link.partition("#")
        path = (document.parent / target).resolve() if target else document
        assert path.exists(), f"{_id(document)}: link {link!r}: {path} does not exist"
        assert path.is_relative_to(ROOT), f"{_id(document)}: link {link!r} leaves the repository"
        if anchor and path.suffix == ".md":
            assert anchor in _anchors(path), f"{_id(document)}: link {link!r}: no such heading"


@pytest.mark.parametrize(
    "path",
    [*DOCUMENTS, ROOT / "config" / "armd.example.yaml", ROOT / "config" / "mosquitto" / "armd.acl"],
    ids=_id,
)
def test_the_documentation_does_not_point_to_the_original_design(path: Path) -> None:
    assert "DESIGN.md" not in path.read_text(encoding="utf-8")
