"""A gripper's grip on an object, as the control loop keeps it (docs/mqtt.md, the gripper goal).

A ``gripper`` goal that closes on an object ends where the gripper's device effort reaches its
`Grip`: the gripper is then commanded at rest where it met the object, and the object keeps it
from getting there. That position error is the grip: the drive pushes at about the grip's
effort for as long as the command stays inside the object. `Held` is that state, and the loop
keeps it until a command moves the gripper elsewhere:

- a motion whose positions for the gripper joint are the command it holds at (a goal or stream
  that does not name the gripper, a stop) keeps the grip; its success does not wait for the
  gripper to reach a command it never reaches (`Held.ignore`);
- any other command for the gripper joint (a gripper goal, a joints goal, named pose or
  trajectory naming it, a stream target naming it) releases the grip: the joint is an ordinary
  joint of that motion again;
- a reset of the e-stop or of a fault keeps it: the gripper stays commanded where it held rather
  than restarting at its measured position, which would let go of the object
  (`Held.restore`); drives turned off lose it (`safety.on_fault: disable`, a reset through
  disabled drives), and so does a stall of the gripper, whose protection commands it where it is.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from armd.link.protocol import FollowPath, Grip, MeasuredState, Move, MoveTo, StreamTarget
from armd.motion.timed_trajectory import TimedTrajectory

__all__ = ["KEPT", "Held", "closed_on_object", "held_reason"]

Array = NDArray[np.float64]
KEPT = 1e-9  # rad (m): a gripper position this close to the one it holds at leaves it there


@dataclass(frozen=True, slots=True)
class Held:
    """The gripper joint `joint` (q index) holds an object, closed at `effort` (device units)."""

    joint: int
    effort: float

    def kept_by(self, move: Move, commanded: Array) -> bool:
        """Whether every position `move` commands the gripper joint at is where it holds now
        (`commanded`, the loop's command)."""
        column = _positions(move)[:, self.joint]
        return bool(np.all(np.abs(column - commanded[self.joint]) <= KEPT))

    def kept_by_target(self, target: StreamTarget, commanded: Array) -> bool:
        """Whether a stream's target leaves the gripper where it holds: it does not name the
        gripper joint (NaN), or names it there at rest."""
        position = target.position[self.joint]
        if np.isnan(position):
            return True
        velocity = target.velocity[self.joint]
        at_rest = bool(np.isnan(velocity) or velocity == 0.0)
        return at_rest and abs(position - commanded[self.joint]) <= KEPT

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
