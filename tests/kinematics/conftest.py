"""Shared fixtures of the kinematics tests: the robot models of config/robots and the test data."""

from __future__ import annotations

from pathlib import Path

import pytest

from kinematics import KinematicTree, load_tree

DATA = Path(__file__).resolve().parent / "data"
ROBOTS = Path(__file__).resolve().parents[2] / "config" / "robots"
PANDA_URDF = ROBOTS / "panda.urdf"
UR5_URDF = ROBOTS / "ur5.urdf"
DESIGN_EXAMPLE = DATA / "design_example.kinematic.json"
SLIDER_MIMIC = DATA / "slider_mimic.kinematic.json"


@pytest.fixture(scope="session")
def panda() -> KinematicTree:
    return load_tree(PANDA_URDF)


@pytest.fixture(scope="session")
def ur5() -> KinematicTree:
    return load_tree(UR5_URDF)


@pytest.fixture(scope="session")
def slider_mimic() -> KinematicTree:
    """A chain with a prismatic joint, a mimic joint and poses before the motions."""
    return load_tree(SLIDER_MIMIC)
