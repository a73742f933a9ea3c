"""The dependency direction of docs/architecture.md.

Between the three packages: armd -> kinematics, armd -> drivers; kinematics and drivers never
import each other or armd. Inside armd, the rooms import downwards only (`ROOMS`): the control
process's packages (`control`, and the `link` and `motion` it shares with the daemon) import
nothing of the MQTT API, planning, config loading or `kinematics`; the link imports no side; no
room imports the command line. Every import counts, the lazy ones inside functions too.

The size of the rooms is checked here too: no folder of the three packages holds more than
`MAX_MODULES_PER_FOLDER` modules, no module passes `MAX_MODULE_LINES` lines.
"""

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

# room -> the rooms of armd it may import (besides itself and armd's root modules)
ROOMS: dict[str, set[str]] = {
    "motion": set(),
    "link": {"motion"},
    "control": {"link", "motion"},
    "config": {"control", "link", "motion"},
    "api": {"config", "link", "motion"},
    "planning": {"api", "config", "link", "motion"},
    "daemon": {"api", "config", "control", "link", "motion", "planning"},
    "tools": {"api", "config", "control", "daemon", "link", "motion", "planning"},
    "cli": {"api", "config", "control", "daemon", "link", "motion", "planning", "tools"},
}
# the root modules (errors, logs, ratelimit, reasons, lock) are shared by every room
ROOT_MODULES = {"__init__", "errors", "logs", "ratelimit", "reasons", "lock"}
# what the control process's rooms may import beyond the standard library and armd
CONTROL_THIRD_PARTY = {"numpy", "ruckig", "drivers"}
MAX_MODULES_PER_FOLDER = 15
MAX_MODULE_LINES = 450  # the hard ceiling; the style guide asks for ~400


def imported_names(path: Path) -> set[str]:
    """Every absolute module name `path` imports (``from a.b import c`` counts as ``a.b.c`` too,
    since c may be a module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def imported_top_level_names(path: Path) -> set[str]:
    return {name.split(".")[0] for name in imported_names(path)}


def room_of(path: Path) -> str:
    """The armd room a source file belongs to ("" for armd's root modules)."""
    parts = path.relative_to(ROOT / "armd").parts
    return parts[0] if len(parts) > 1 else ""


def armd_rooms_imported(path: Path) -> set[str]:
    rooms = set()
    for name in imported_names(path):
        parts = name.split(".")
        if parts[0] == "armd" and len(parts) > 1 and parts[1] in ROOMS:
            rooms.add(parts[1])
    return rooms


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


def test_every_armd_module_sits_in_a_room() -> None:
    loose = {
        path.stem
        for path in (ROOT / "armd").glob("*.py")
        if path.stem not in ROOT_MODULES | {"__main__"}
    }
    rooms = {path.name for path in (ROOT / "armd").iterdir() if (path / "__init__.py").exists()}
    assert loose == set()
    assert rooms == set(ROOMS)


@pytest.mark.parametrize("room", sorted(ROOMS))
def test_rooms_import_downwards_only(room: str) -> None:
    offenders = {}
    for path in sorted((ROOT / "armd" / room).rglob("*.py")):
        bad = armd_rooms_imported(path) - ROOMS[room] - {room}
        if bad:
            offenders[str(path.relative_to(ROOT))] = sorted(bad)
    assert offenders == {}


def test_root_modules_import_no_room() -> None:
    offenders = {
        path.name: sorted(armd_rooms_imported(path))
        for path in (ROOT / "armd").glob("*.py")
        if path.stem in ROOT_MODULES and armd_rooms_imported(path)
    }
    assert offenders == {}


@pytest.mark.parametrize("room", ["motion", "link", "control"])
def test_the_control_process_rooms_stay_lean(room: str) -> None:
    """No kinematics, no numba, no MQTT, no pydantic in what the control process imports."""
    allowed = {"armd", *CONTROL_THIRD_PARTY, *sys.stdlib_module_names}
    offenders = {}
    for path in sorted((ROOT / "armd" / room).rglob("*.py")):
        extra = imported_top_level_names(path) - allowed
        if extra:
            offenders[str(path.relative_to(ROOT))] = sorted(extra)
    assert offenders == {}


def test_no_folder_hides_rooms() -> None:
    """A folder of armd/, drivers/ or kinematics/ (theirs and their rooms') holds at most
    `MAX_MODULES_PER_FOLDER` modules besides its __init__.py."""
    crowded = {}
    for package in PACKAGES:
        for folder in [ROOT / package, *(ROOT / package).rglob("*/")]:
            if "__pycache__" in folder.parts:
                continue
            modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
            if len(modules) > MAX_MODULES_PER_FOLDER:
                crowded[str(folder.relative_to(ROOT))] = len(modules)
    assert crowded == {}


def test_no_module_passes_the_line_ceiling() -> None:
    """A module is about one thing and stays under ~400 lines (the style guide); 450 is the hard
    ceiling enforced here, above the guide, so that a module a little over it is a prompt to
    split it by concern, not a failing build."""
    long = {
        str(path.relative_to(ROOT)): lines
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def imported_modules(path: Path, modules: set[str]) -> set[str]:
    """The modules of `modules` that `path` imports: ``from a import b`` imports the module a.b
    when there is one, else a (b is a name in it)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            candidates = [
                f"{node.module}.{alias.name}"
                if f"{node.module}.{alias.name}" in modules
                else node.module
                for alias in node.names
            ]
        else:
            continue
        for candidate in candidates:
            name = candidate
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name:
                found.add(name)
    return found


def module_graph(package: str) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports (eager and lazy imports alike; a
    module importing its own package's __init__ is not counted)."""
    modules = {}
    for path in (ROOT / package).rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return {
        name: {
            target
            for target in imported_modules(path, set(modules))
            if target != name and not name.startswith(target + ".")
        }
        for name, path in modules.items()
    }


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of `graph` (empty when there is none)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = 2
        stack.pop()
        return []

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return []


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycles(package: str) -> None:
    """Modules import each other in one direction (a package's __init__ re-exporting its
    submodules is not a cycle: the submodules never import it back)."""
    assert find_cycle(module_graph(package)) == []
