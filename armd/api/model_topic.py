"""The retained ``model`` message: what a client needs to draw and check an arm without its files.

Published by the bridge on every connection (docs/mqtt.md#model): the kinematic tree as a
``.kinematic.json`` document (docs/kinematic-json.md) carrying the limits the daemon enforces
(the model's, tightened by the config and the calibration), the degrees of freedom in the order
of ``state``, the tool link, the named poses, the gripper and the collision model
(`kinematics.collision.CollisionModel.to_dict`). The dashboard draws the arm from it;
Home Assistant's discovery (`armd.api.homeassistant`) takes the named poses from the same setup.
"""

from __future__ import annotations

from typing import Any

from armd import __version__
from armd.config.load import ArmSetup
from kinematics.models.kinematic_json import tree_to_dict

__all__ = ["FORMAT", "model_json"]

FORMAT = "armd-model/1"  # bumped only by an incompatible change; fields may be added


def model_json(setup: ArmSetup) -> dict[str, Any]:
    """The ``model`` payload of `setup` (docs/mqtt.md#model)."""
    gripper = setup.config.gripper
    return {
        "format": FORMAT,
        "name": setup.name,
        "armd": __version__,
        "root": setup.tree.links[0].name,
        "tool_link": setup.tool_link,
        "joints": list(setup.tree.joint_names),
        "fixed_joints": dict(setup.fixed_joints),
        "model": tree_to_dict(setup.tree),
        "poses": {name: dict(positions) for name, positions in setup.config.poses.items()},
        "gripper": (
            None
            if gripper is None
            else {"joint": gripper.joint, "open": gripper.open, "closed": gripper.closed}
        ),
        "loop_hz": setup.loop_hz,
        "telemetry_hz": setup.telemetry_hz,
        "collision": None if setup.collision is None else setup.collision.to_dict(),
    }
