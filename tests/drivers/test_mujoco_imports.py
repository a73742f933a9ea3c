"""MuJoCo is an optional extra (`physics`): only the mujoco driver imports it, so that armd, the
kinematics and every other driver import without it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("kinematics", "drivers", "armd")


def _imports_mujoco(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(
            alias.name.split(".")[0] == "mujoco" for alias in node.names
        ):
            return True
        if (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module or "").split(".")[0] == "mujoco"
        ):
            return True
    return False


def test_only_the_mujoco_driver_imports_mujoco() -> None:
    importers = {
        path.relative_to(ROOT).as_posix()
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if _imports_mujoco(path)
    }
    assert "drivers/mujoco/scene.py" in importers
    assert {path for path in importers if not path.startswith("drivers/mujoco/")} == set()
