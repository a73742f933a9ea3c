"""The path a chain mapping walks (`kinematics.mapping.chain`): the links from the root to the last
keypoint link, the motors on it, and, at one joint vector, the keypoints' positions, the motors'
world axes and how each joint turns a segment's direction.

A *segment* is the vector between two consecutive keypoint links' origins (root frame, m); its
direction is what the mapping aligns.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from kinematics.mapping.rotation_family import cross, norm, rotate_by_quaternions
from kinematics.motors import JointMotor
from kinematics.tree import KinematicTree

__all__ = ["EFFECT", "ChainPath", "PathMotor", "link_path"]

Array = NDArray[np.float64]
EFFECT = 1e-9  # rad/rad: a joint that turns a segment less than this does not move it


@dataclass(frozen=True, slots=True, eq=False)
class PathMotor:
    index: int  # position on the root → last keypoint path
    revolute: bool
    axis: Array  # in the link's frame
    joint: int  # the q index of the joint driving it
    own: bool  # the joint's own motor (not a mimic follower)
    scale: float  # 1, or the mimic multiplier


def link_path(tree: KinematicTree, link: str) -> list[str]:
    """The links from the root to `link`, root first."""
    names: list[str] = []
    name: str | None = link
    while name is not None:
        names.append(name)
        name = tree.link(name).parent
    return names[::-1]


class ChainPath:
    """The path to the last of `links` (keypoint links, root first) and its motors."""

    def __init__(self, tree: KinematicTree, links: Sequence[str]) -> None:
        self.tree = tree
        path = link_path(tree, links[-1])
        self.keypoints = [path.index(name) for name in links]
        self.motors = self._motors(tree, path)
        self.axes = np.array([m.axis for m in self.motors]).reshape(-1, 3)
        self.needed = sorted({m.index for m in self.motors} | set(self.keypoints))
        self.path = path
        self.own_row = {m.joint: row for row, m in enumerate(self.motors) if m.own}

    @staticmethod
    def _motors(tree: KinematicTree, path: list[str]) -> list[PathMotor]:
        motors = []
        for index, name in enumerate(path):
            link = tree.link(name)
            motor = link.motor
            if not isinstance(motor, JointMotor):
                continue
            joint, scale = str(link.joint_name), 1.0
            if motor.mimic is not None:
                joint, scale = motor.mimic.joint, motor.mimic.multiplier
            revolute = motor.kind == "revolute"
            own = motor.mimic is None
            q_index = tree.joint_names.index(joint)
            motors.append(PathMotor(index, revolute, np.array(motor.axis), q_index, own, scale))
        return motors

    # -- geometry at one q -----------------------------------------------------------------------

    def frames(self, q: Array) -> tuple[Array, Array]:
        """(positions (path, 3) of the motor and keypoint links, world axes (motors, 3))."""
        positions = np.zeros((len(self.path), 3))
        quaternions = np.empty((len(self.motors), 4))
        row = 0
        for index in self.needed:
            pose = self.tree.fk(q, self.path[index])
            positions[index] = pose.translation
            if row < len(self.motors) and self.motors[row].index == index:
                quaternions[row] = pose.quaternion
                row += 1
        return positions, rotate_by_quaternions(quaternions, self.axes)

    def segment(self, positions: Array, seg: int) -> Array:
        vector: Array = positions[self.keypoints[seg + 1]] - positions[self.keypoints[seg]]
        return vector

    def effects(
        self, seg: int, positions: Array, axes: Array, joints: Collection[int]
    ) -> dict[int, tuple[Array, bool]]:
        """joint -> (d(segment direction)/dq (3,), whether one closed-form turn moves it: its own
        motor turns the whole segment and no other motor it drives changes the direction), for
        the `joints` that drive a motor before the segment's end."""
        start, end = self.keypoints[seg], self.keypoints[seg + 1]
        v = positions[end] - positions[start]
        length = norm(v)
        v_hat = v / length

        def tangent(d: Array) -> Array:
            along: Array = (d - float(d @ v_hat) * v_hat) / length
            return along

        totals: dict[int, Array] = {}
        others: dict[int, Array] = {}
        whole_turn: set[int] = set()
        for row, motor in enumerate(self.motors):
            if motor.index >= end:
                break
            if motor.joint not in joints:
                continue
            whole = motor.index <= start  # turns the whole segment (at or above its start)
            if motor.revolute:
                lever = v if whole else positions[end] - positions[motor.index]
                d = motor.scale * cross(axes[row], lever)
            else:
                d = np.zeros(3) if whole else motor.scale * axes[row]
            totals[motor.joint] = totals.get(motor.joint, 0.0) + d
            if motor.own and motor.revolute and whole:
                whole_turn.add(motor.joint)
            else:
                others[motor.joint] = others.get(motor.joint, 0.0) + d
        return {
            j: (
                tangent(d),
                j in whole_turn and (j not in others or norm(tangent(others[j])) <= EFFECT),
            )
            for j, d in totals.items()
        }
