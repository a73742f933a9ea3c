"""A gripper's grip on an object, as the control loop keeps it (docs/mqtt.md, the gripper goal).

A ``gripper`` goal that closes on an object ends where the gripper's device effort reaches its
`Grip`: the goal succeeds, and the gripper is commanded at rest at its grip, the position it was
commanded at then, which the object keeps it from reaching. That position error is the grip:
the drive pushes at about the grip's effort for as long as the command stays inside the object.
A gripper still moving then comes back to it within its limits (`GripSettle`), so that the
stop's travel does not squeeze harder than the goal asked. `Held` is that state, and the loop
keeps it until a command moves the gripper elsewhere:

- a motion that leaves the gripper out (a goal or stream that does not name it, a stop; the
  planner filled it in from the command it read: `MoveTo.kept`), or names it only where it
  holds, keeps the grip: the gripper stays at its grip through the motion (`Held.keep`), and
  the motion's success does not wait for it to reach a command it never reaches
  (`Held.ignore`);
- any other command for the gripper joint (a gripper goal, a joints goal, named pose or
  trajectory naming it, a stream target naming it) releases the grip: the joint is an ordinary
  joint of that motion again;
- a reset of the e-stop or of a fault keeps it: the gripper stays commanded where it held rather
  than restarting at its measured position, which would let go of the object
  (`Held.restore`); drives turned off lose it (`safety.on_fault: disable`, a reset through
  disabled drives), and so does a stall of the gripper, whose protection commands it where it is.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from armd.link.protocol import FollowPath, Grip, MeasuredState, Move, MoveTo, StreamTarget
from armd.motion.timed_trajectory import TimedTrajectory
from armd.motion.trajectory import JointMotion, Motion, MotionLimits, Setpoint, StopMotion

__all__ = ["KEPT", "GripSettle", "Held", "closed_on_object", "held_reason"]

Array = NDArray[np.float64]
KEPT = 1e-9  # rad (m): a gripper position this close to the one it holds at leaves it there


@dataclass(frozen=True, slots=True)
class Held:
    """The gripper joint `joint` (q index) holds an object, closed at `effort` (device units),
    its grip at `position` (rad or m: its command when the effort reached the grip)."""

    joint: int
    effort: float
    position: float

    def kept_by(self, move: Move, commanded: Array) -> bool:
        """Whether `move` keeps the grip: it leaves the gripper out (`kept`), or every position
        it names for it is where it holds (its grip, or `commanded`, the loop's command)."""
        if self.joint in move.kept:
            return True
        return self._holds_at(_positions(move)[:, self.joint], commanded)

    def kept_by_target(self, target: StreamTarget, commanded: Array) -> bool:
        """Whether a stream's target leaves the gripper where it holds: it does not name the
        gripper joint (NaN), or names it there at rest."""
        position = target.position[self.joint]
        if np.isnan(position):
            return True
        velocity = target.velocity[self.joint]
        at_rest = bool(np.isnan(velocity) or velocity == 0.0)
        return at_rest and self._holds_at(np.array([position]), commanded)

    def _holds_at(self, positions: Array, commanded: Array) -> bool:
        at_grip = np.abs(positions - self.position) <= KEPT
        at_command = np.abs(positions - commanded[self.joint]) <= KEPT
        return bool(np.all(at_grip | at_command))

    def keep(self, move: Move, commanded: Array) -> Move:
        """`move` (which keeps the grip) with the gripper at its grip throughout; a `TimedPath`,
        which starts where the arm is commanded, with the gripper where it is commanded (a stop
        may have ended short of the grip). `move` itself when it is so already."""
        path = move.path if isinstance(move, FollowPath) else None
        from_command = path is not None and not isinstance(path, TimedTrajectory)
        value = float(commanded[self.joint]) if from_command else self.position
        if np.all(_positions(move)[:, self.joint] == value):
            return move
        return _with_column(move, self.joint, value)

    def ignore(self, error: Array) -> Array:
        """A motion's errors from its end (per joint) with the gripper's left out: held, it stays
        short of its command by the object's width."""
        kept = error.copy()
        kept[self.joint] = 0.0
        return kept

    def restore(self, measured: Array, commanded: Array) -> Array:
        """The position a reset restarts from: the measured one, the gripper where it holds."""
        position = measured.copy()
        position[self.joint] = commanded[self.joint]
        return position


def _positions(move: Move) -> Array:
    """Every joint position `move` names, (m, n): its target, path samples or knots."""
    if isinstance(move, MoveTo):
        return np.asarray(move.target, dtype=float)[None, :]
    assert isinstance(move, FollowPath)
    path = move.path
    if isinstance(path, TimedTrajectory):
        return np.asarray(path.positions, dtype=float)
    return np.asarray(path.waypoints, dtype=float)


def _with_column(move: Move, joint: int, value: float) -> Move:
    """`move` with joint `joint` at `value` throughout (at rest, on a trajectory's knots)."""
    if isinstance(move, MoveTo):
        target = np.array(move.target, dtype=float)
        target[joint] = value
        return replace(move, target=target)
    path = move.path
    if isinstance(path, TimedTrajectory):
        positions, velocities, accelerations = (
            np.array(a, dtype=float) for a in (path.positions, path.velocities, path.accelerations)
        )
        positions[:, joint] = value
        velocities[:, joint] = accelerations[:, joint] = 0.0
        knots = replace(
            path, positions=positions, velocities=velocities, accelerations=accelerations
        )
        return replace(move, path=knots)
    waypoints = np.array(path.waypoints, dtype=float)
    waypoints[:, joint] = value
    return replace(move, path=replace(path, waypoints=waypoints))


class GripSettle(Motion):
    """The end of a gripper goal that closed on an object: every joint stops as in a
    `StopMotion`, but the gripper, whose command may still be moving when the grip is reached
    (a soft drive lags it), comes to rest back at its grip, `position`, within its limits."""

    def __init__(self, start: Setpoint, joint: int, position: float, limits: MotionLimits) -> None:
        self._stop = StopMotion(start, limits)
        one = slice(joint, joint + 1)
        gripper = Setpoint(start.position[one], start.velocity[one], start.acceleration[one])
        own = MotionLimits(limits.velocity[one], limits.acceleration[one], limits.jerk[one])
        self._grip = JointMotion(gripper, np.array([position]), own)
        self.joint = joint
        self.duration = max(self._stop.duration, self._grip.duration)
        self.target = self._stop.target.copy()
        self.target[joint] = position

    def sample(self, t: float) -> Setpoint:
        stop, grip = self._stop.sample(t), self._grip.sample(t)
        for row, value in zip(
            (stop.position, stop.velocity, stop.acceleration),
            (grip.position, grip.velocity, grip.acceleration),
            strict=True,
        ):
            row[self.joint] = value[0]
        return stop


def closed_on_object(move: Move | None, measured: MeasuredState) -> Grip | None:
    """The grip of `move` if it closes a gripper and its effort reached the grip (NaN, not
    reported, never does)."""
    if not isinstance(move, MoveTo) or move.grip is None or measured.effort is None:
        return None
    grip = move.grip
    return grip if bool(abs(measured.effort[grip.joint]) >= grip.effort) else None


def held_reason(grip: Grip, measured: MeasuredState, joint_names: tuple[str, ...]) -> str:
    """The reason a closing gripper's goal succeeds with: where it holds, at which effort."""
    if measured.effort is None:
        return "held"
    joint = grip.joint
    effort, position = measured.effort[joint], measured.position[joint]
    return f"held: {joint_names[joint]} effort {effort:.3f} at {position:.4f}"
