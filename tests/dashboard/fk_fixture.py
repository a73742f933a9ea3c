"""The forward kinematics the dashboard must reproduce, computed by armd: for each robot model of
config/robots/, its `.kinematic.json` document (as the `model` topic carries it), its joints in
``q`` order and every link's pose at a few configurations within the limits.

``python -m tests.dashboard.fk_fixture`` rewrites dashboard/test/fk-fixture.json, the file that
``npm test`` (vitest) reads; tests/dashboard/test_fk.py checks that it is current."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from kinematics import KinematicTree, load_tree
from kinematics.models.kinematic_json import tree_to_dict

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "dashboard" / "test" / "fk-fixture.json"
MODELS = ("ur5.urdf", "panda.urdf", "so101.urdf")
CONFIGURATIONS = 4  # the zero configuration, then random ones within the limits
SEED = 15  # the number: any fixed seed keeps the file stable


def _configurations(tree: KinematicTree, rng: np.random.Generator) -> list[np.ndarray]:
    lower = np.maximum(tree.limits.lower, -math.pi)  # continuous joints: one turn is enough
    upper = np.minimum(tree.limits.upper, math.pi)
    return [np.zeros(tree.dof)] + [rng.uniform(lower, upper) for _ in range(CONFIGURATIONS - 1)]


def fixture() -> dict[str, Any]:
    """{model: {"model": document, "joints": [...], "cases": [{"q", "links"}]}}."""
    rng = np.random.default_rng(SEED)
    models: dict[str, Any] = {}
    for name in MODELS:  # the Panda's second finger is a mimic joint
        tree = load_tree(ROOT / "config" / "robots" / name)
        cases = []
        for q in _configurations(tree, rng):
            poses = tree.fk_all(q)
            cases.append(
                {
                    "q": dict(zip(tree.joint_names, map(float, q), strict=True)),
                    "links": {
                        name: {
                            "t": [float(v) for v in pose.translation],
                            "q": [float(v) for v in pose.quaternion],
                        }
                        for name, pose in poses.items()
                    },
                }
            )
        models[name] = {
            "model": tree_to_dict(tree),
            "joints": list(tree.joint_names),
            "cases": cases,
        }
    return models


def write(path: Path = FIXTURE) -> None:
    path.write_text(json.dumps(fixture(), indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    write()
    print(f"wrote {FIXTURE.relative_to(ROOT)}")
