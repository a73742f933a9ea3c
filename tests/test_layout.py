"""The dependency direction of docs/architecture.md: armd -> kinematics, armd -> drivers;
kinematics and drivers never import each other or armd."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("kinematics", "drivers", "armd")
FORBIDDEN = {
    "kinematics": {"drivers", "armd"},
    "drivers": {"kinematics", "armd"},
    "armd": set(),
}


def imported_top_level_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", PACKAGES)
def test_package_imports_follow_the_dependency_direction(package: str) -> None:
    sources = sorted((ROOT / package).rglob("*.py"))
    assert sources, f"package {package} has no modules"
    offenders = {
        str(path.relative_to(ROOT)): sorted(imported_top_level_names(path) & FORBIDDEN[package])
        for path in sources
    }
    assert {path: bad for path, bad in offenders.items() if bad} == {}


def test_kinematics_imports_only_numpy_numba_and_the_standard_library() -> None:
    # trimesh: imported only when a URDF's collision mesh is read (kinematics.collision.mesh_fit)
    allowed = {"numpy", "numba", "trimesh", "kinematics", *sys.stdlib_module_names}
    extra = set()
    for path in (ROOT / "kinematics").rglob("*.py"):
        extra |= imported_top_level_names(path) - allowed
    assert extra == set()
