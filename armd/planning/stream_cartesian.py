"""Cartesian stream targets turned into joint targets, in the daemon: the control process imports
neither the kinematics nor numba (its memory and start-up stay small), so a ``pose`` or ``twist``
stream message becomes a joint target here, once per message, and the loop follows joints.

- A pose is solved with the seeded IK (`kinematics.ik`, no random restarts: a restart could jump
  to another branch of the arm), seeded from the stream's previous joint target. A target it
  cannot reach exactly gives the closest joint vector the solver found (within the limits and the
  configured "no branch jump" box): the arm goes as near as it can instead of the stream failing.
- A twist (the tool's linear and angular velocity, in the root or the tool frame) becomes joint
  velocities through the Jacobian with damped least squares, held until the next message: the
  joint target moves on at that velocity (the loop extrapolates it the same way). As MoveIt Servo
  does, the velocity is scaled down instead of failing: linearly to 0 as the Jacobian's condition
  number grows from `SINGULAR_SLOWDOWN` to `SINGULAR_STOP`, and as a joint moving toward a limit
  comes within `LIMIT_MARGIN` of it (all joints by the same factor: the tool keeps its direction).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from armd.link.messages import StreamPose, StreamTwist
from kinematics import KinematicTree, Pose, solve_ik
from kinematics.ik import IKOptions

__all__ = ["LIMIT_MARGIN", "SINGULAR_SLOWDOWN", "SINGULAR_STOP", "CartesianStream"]

Array = NDArray[np.float64]
SINGULAR_SLOWDOWN = 17.0  # Jacobian condition number: MoveIt Servo's defaults
SINGULAR_STOP = 30.0
LIMIT_MARGIN = 0.1  # rad (m): a joint this close to a limit slows down toward it
DAMPING = 1e-3  # damped least squares: λ² added to J Jᵀ (m², rad²)


class CartesianStream:
    """Joint targets for the Cartesian messages of streams on one arm. `movable` masks the joints
    a stream may move (fixed joints and the gripper stay where they are: at the seed)."""

    def __init__(
        self, tree: KinematicTree, ik: IKOptions, movable: Array, lower: Array, upper: Array
    ) -> None:
        self.tree = tree
        self.ik = ik
        self.movable = movable
        self._free = np.asarray(movable, dtype=bool)
        self.hold = tuple(
            name for name, free in zip(tree.joint_names, movable, strict=True) if not free
        )
        self.lower = lower
        self.upper = upper
        self.last_scale = 1.0  # the twist scaling of the last twist (1: none)

    def pose(self, message: StreamPose, seed: Array) -> Array:
        """The joint target that puts the message's link at its pose (or as near as the solver
        got), seeded from `seed`."""
        position = np.array(message.position)
        target = position if message.orientation is None else Pose(position, message.orientation)
        result = solve_ik(self.tree, target, seed, message.link, self.ik, hold=self.hold)
        return np.asarray(result.q, dtype=float)

    def twist(self, message: StreamTwist, q: Array, link: str) -> Array:
        """The joint velocities (rad/s or m/s) that move `link` at the message's twist from `q`,
        scaled down near singularities and joint limits."""
        linear, angular = np.array(message.linear), np.array(message.angular)
        if message.frame == "tool":
            rotation = self.tree.fk(q, link).rotation_matrix
            linear, angular = rotation @ linear, rotation @ angular
        jacobian = self.tree.jacobian(q, link) * self.movable  # fixed joints: zero columns
        twist = np.concatenate((linear, angular))
        weights = np.linalg.solve(jacobian @ jacobian.T + DAMPING * np.eye(6), twist)
        velocity: Array = jacobian.T @ weights
        singularity = self._singularity_scale(jacobian[:, self._free])
        scale = min(singularity, self._limit_scale(q, velocity))
        self.last_scale = scale
        return velocity * scale

    @staticmethod
    def _singularity_scale(jacobian: Array) -> float:
        """1 away from singularities, down to 0 as the condition number of the movable joints'
        Jacobian reaches the stop (an arm with fewer than 6 of them follows the twist's least-
        squares part, and its condition is over those joints' columns)."""
        singular = np.linalg.svd(jacobian, compute_uv=False)
        condition = singular[0] / singular[-1] if singular[-1] > 0.0 else np.inf
        return float(
            np.clip((SINGULAR_STOP - condition) / (SINGULAR_STOP - SINGULAR_SLOWDOWN), 0, 1)
        )

    def _limit_scale(self, q: Array, velocity: Array) -> float:
        """1 unless a joint moves toward a limit closer than `LIMIT_MARGIN`: then its distance
        over the margin (0 at the limit)."""
        room = np.where(
            velocity > 0.0, self.upper - q, np.where(velocity < 0.0, q - self.lower, np.inf)
        )
        return float(np.clip(np.min(room) / LIMIT_MARGIN, 0.0, 1.0))
