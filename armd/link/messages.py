"""Values exchanged between the daemon's tasks (control loop, goal pipeline, MQTT bridge); their
JSON form on the MQTT topics is `armd.api.contract`'s.

Units are SI (m, rad, s); quaternions ``[w, x, y, z]``. Everything here is immutable; the tasks
pass these values through queues and one-slot mailboxes, never shared mutable state.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "MAX_LOAD_COM_M",
    "MAX_LOAD_KG",
    "MAX_MOTION_DURATION_S",
    "EstopCommand",
    "Fault",
    "Goal",
    "GoalStatus",
    "GripperGoal",
    "JointsGoal",
    "KeypointsGoal",
    "Mode",
    "NamedGoal",
    "PoseGoal",
    "Rejection",
    "StatusUpdate",
    "StopGoal",
    "StreamEnd",
    "StreamJoints",
    "StreamMessage",
    "StreamPose",
    "StreamTwist",
    "Telemetry",
    "ToolLoad",
    "TrajectoryGoal",
]


# s: a longer motion is refused (`armd.control.moves`, the planner), and so are a trajectory
# goal's point times beyond it
MAX_MOTION_DURATION_S = 3600.0


class Mode(enum.StrEnum):
    """What the control loop is doing (the ``mode`` field of ``state``)."""

    INACTIVE = "inactive"  # drives disabled or not yet read
    HOLDING = "holding"  # enabled, commanding a fixed position
    MOVING = "moving"  # following a trajectory
    STOPPING = "stopping"  # controlled stop at maximum deceleration
    FAULT = "fault"  # latched fault: holding (or disabled) until reset
    ESTOP = "estop"  # latched e-stop: holding (or disabled) until reset


class GoalStatus(enum.StrEnum):
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    SUCCEEDED = "succeeded"
    ABORTED = "aborted"
    PREEMPTED = "preempted"

    @property
    def is_final(self) -> bool:
        return self is not GoalStatus.ACCEPTED


@dataclass(frozen=True, slots=True)
class StatusUpdate:
    """One message on ``goal/status``."""

    goal_id: str | None
    status: GoalStatus
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Fault:
    """The active fault, retained on ``fault``. `code` is a stable machine-readable name
    (e.g. ``stale_feedback``, ``following_error``, ``device_fault``, ``driver_lost``)."""

    code: str
    message: str
    joint: str | None = None


@dataclass(frozen=True, slots=True)
class Telemetry:
    """One ``state`` message: the measured joint state and the FK of the tool link."""

    t: float  # s, the robot computer's monotonic clock (CLOCK_MONOTONIC) at the loop's sample
    mode: Mode
    joints: Mapping[str, tuple[float, float, float]]  # name -> (position, velocity, effort)
    tcp_link: str
    tcp_position: tuple[float, float, float]
    tcp_orientation: tuple[float, float, float, float]
    missed_ticks: int = 0  # since start: ticks the loop could not run on time
    uptime: float | None = None  # s since the daemon started, at the sample (the clock of t)
    commands: Mapping[str, float] | None = None  # name -> commanded position (NaN: none)
    # a stream holding before a collision: the pair and its distance (m); None: not holding
    collision_hold: tuple[str, str, float] | None = None


@dataclass(frozen=True, slots=True)
class PoseGoal:
    """Move a link to a pose (orientation None: position only)."""

    goal_id: str
    position: tuple[float, float, float]
    orientation: tuple[float, float, float, float] | None = None
    link: str | None = None
    motion: Literal["joint", "linear"] = "joint"
    speed: float = 1.0  # 0 < speed ≤ 1, scales velocity, acceleration and jerk limits


@dataclass(frozen=True, slots=True)
class JointsGoal:
    """Move named joints to positions (the other joints keep their commanded position)."""

    goal_id: str
    positions: Mapping[str, float] = field(default_factory=dict)
    speed: float = 1.0


@dataclass(frozen=True, slots=True)
class KeypointsGoal:
    """Put the arm in the shape of another chain: align each segment between consecutive `links`
    (root first, each a descendant of the one before) with the segment between the matching
    `points` (m, root frame; only directions count, not lengths or where the points are)."""

    goal_id: str
    links: tuple[str, ...]
    points: tuple[tuple[float, float, float], ...]
    speed: float = 1.0


@dataclass(frozen=True, slots=True)
class StopGoal:
    """Controlled stop at maximum deceleration, then hold."""

    goal_id: str | None = None


@dataclass(frozen=True, slots=True)
class GripperGoal:
    """Open or close the configured gripper: `opening` from 0 (closed) to 1 (open). Closing ends
    where the grip reaches `effort` (0..1 of the gripper's `max_effort`; None: its configured
    default), which holds the object there instead of pushing on to the target."""

    goal_id: str
    opening: float
    effort: float | None = None
    speed: float = 1.0


@dataclass(frozen=True, slots=True)
class NamedGoal:
    """Move to the named pose `name` of the config's ``poses`` (joints it does not name keep their
    commanded position)."""

    goal_id: str
    name: str
    speed: float = 1.0


@dataclass(frozen=True, slots=True)
class TrajectoryGoal:
    """Follow timed waypoints of the named `joints` (the others keep their commanded position):
    at `times` (s, strictly increasing; only differences count), `positions` (one row per time,
    one value per joint) and, optionally, `velocities` (the same shape). The arm first moves to
    the first point; the whole is slowed down in time where the limits require it."""

    goal_id: str
    joints: tuple[str, ...]
    times: tuple[float, ...]
    positions: tuple[tuple[float, ...], ...]
    velocities: tuple[tuple[float, ...], ...] | None = None
    speed: float = 1.0


Goal = PoseGoal | JointsGoal | KeypointsGoal | GripperGoal | NamedGoal | TrajectoryGoal | StopGoal


MAX_LOAD_KG = 1000.0
"""The heaviest load at the tool link taken (config, MQTT), kg: a bound against typos."""

MAX_LOAD_COM_M = 10.0
"""The farthest centre of mass of a load taken, m from the tool link's origin, per coordinate."""


@dataclass(frozen=True, slots=True)
class ToolLoad:
    """A rigid load at the tool link (the ``payload`` topic; the config's ``payload``): its mass
    (kg), centre of mass (m, the tool link's frame) and inertia about the centre of mass (kg·m²,
    the tool link's axes, ``ixx, ixy, ixz, iyy, iyz, izz``; zeros: a point mass)."""

    mass: float
    com: tuple[float, float, float] = (0.0, 0.0, 0.0)
    inertia: tuple[float, float, float, float, float, float] = (0.0,) * 6


@dataclass(frozen=True, slots=True)
class EstopCommand:
    """``{"engage": true}`` latches a stop; ``{"reset": true}`` clears it (and latched faults).

    The e-stop fails safe: a payload that is not a well-formed reset engages it, and `problem`
    says what was wrong with it (None for a well-formed command)."""

    engage: bool
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class Rejection:
    """An input that was refused; `reason` names the field and why."""

    goal_id: str | None
    reason: str


# -- stream messages (``armd/<name>/stream``, docs/mqtt.md#stream) ---------------------------------


@dataclass(frozen=True, slots=True)
class StreamJoints:
    """Joint targets by name (the joints not named keep their stream target); `velocities`
    (rad/s or m/s) for some of the named joints: how fast their target moves."""

    stream_id: str
    seq: int
    positions: Mapping[str, float]
    velocities: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StreamPose:
    """A pose target for `link` in the root frame (orientation None: position only)."""

    stream_id: str
    seq: int
    position: tuple[float, float, float]
    orientation: tuple[float, float, float, float] | None
    link: str


@dataclass(frozen=True, slots=True)
class StreamTwist:
    """A tool velocity (m/s, rad/s) held until the next message, in the root or the tool frame."""

    stream_id: str
    seq: int
    linear: tuple[float, float, float]
    angular: tuple[float, float, float]
    frame: Literal["root", "tool"] = "root"


@dataclass(frozen=True, slots=True)
class StreamEnd:
    """The stream's last message: come to rest at the last target."""

    stream_id: str
    seq: int


StreamMessage = StreamJoints | StreamPose | StreamTwist | StreamEnd
