"""The official ODrive DBC (``odrive-cansimple-0.6.x.dbc``), found inside the installed
``odrive-can`` package at test time (nothing of it is copied into the repository)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest


def dbc_path() -> Path:
    spec = importlib.util.find_spec("odrive_can")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("odrive-can (the official DBC's package) is not installed")
    folder = Path(next(iter(spec.submodule_search_locations))) / "dbc"
    paths = sorted(folder.glob("odrive-cansimple-0.6.*.dbc"))
    assert paths, f"no odrive-cansimple-0.6.x.dbc in {folder}"
    return paths[-1]


def load_dbc() -> Any:
    """The DBC as a cantools database (strict: overlapping signals would be an error)."""
    cantools = pytest.importorskip("cantools")
    return cantools.database.load_file(str(dbc_path()), strict=True)
