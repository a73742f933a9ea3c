"""The dashboard draws the arm with its own forward kinematics (dashboard/src/kinematics.ts): it
must put every link where armd does. dashboard/test/fk-fixture.json holds armd's poses (see
fk_fixture.py); vitest compares the dashboard's FK with them (dashboard/test/kinematics.test.ts)."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.dashboard.fk_fixture import FIXTURE, ROOT, fixture

DASHBOARD = ROOT / "dashboard"
VITEST = DASHBOARD / "node_modules" / ".bin" / "vitest"


def _close(expected: object, actual: object) -> bool:
    """Equal structure, numbers within 1e-12 (FK on another machine may round differently)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        return expected.keys() == actual.keys() and all(
            _close(expected[k], actual[k]) for k in expected
        )
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(map(_close, expected, actual))
    if isinstance(expected, float) and isinstance(actual, int | float):
        return math.isclose(expected, actual, rel_tol=0.0, abs_tol=1e-12)
    return expected == actual


def test_the_fixture_holds_armds_current_forward_kinematics() -> None:
    committed = json.loads(FIXTURE.read_text(encoding="utf-8"))
    assert _close(fixture(), committed), (
        f"{FIXTURE.relative_to(ROOT)} is out of date: run `python -m tests.dashboard.fk_fixture`"
    )


def test_the_dashboards_forward_kinematics_matches_armds(tmp_path: Path) -> None:
    if shutil.which("node") is None or not VITEST.exists():
        pytest.skip(
            "Node.js or the dashboard's npm packages are missing (scripts/build-dashboard.sh)"
        )
    current = tmp_path / "fk-fixture.json"
    current.write_text(json.dumps(fixture()), encoding="utf-8")  # armd's FK as of now
    done = subprocess.run(
        [str(VITEST), "run", "--reporter=json", f"--outputFile={tmp_path / 'report.json'}"],
        cwd=DASHBOARD,
        env={**os.environ, "ARMD_FK_FIXTURE": str(current), "NO_COLOR": "1", "CI": "1"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert report["numFailedTests"] == 0, done.stdout
    assert report["numPassedTests"] >= 4 * 4, "every model at every configuration"
