"""The control protocol: every command the control loop takes and every event it emits, declared
once.

`ControlLoop.handle(command)` takes a command; the loop reports through one `emit(event)`. In the
daemon the two cross the process seam over `armd.link.channel` (the control process is
``loop.handle(link.recv())`` with ``emit = link.send``); in tests the same loop runs in-process
through the same two calls. `LoopPort` is the daemon's side: a sender and the latest `Sample`.

Commands (daemon → loop):

- `MoveTo`: a joint target at rest; the loop plans the jerk-limited motion from its commanded
  state (ruckig, microseconds), or from the state it was planned and checked from
  (`armd.link.handover`);
- `FollowPath`: a path planned and time-scaled before the seam: a `armd.motion.trajectory.TimedPath`
  starting where the arm is, at rest; or a `armd.motion.timed_trajectory.TimedTrajectory`, which the
  loop reaches from its commanded state by a jerk-limited approach to its first point;
- `StreamTarget`: the newest target of a stream (`armd.control.streaming`), followed each tick by a
  jerk-limited filter from the commanded state until a newer one, the stream's end, its timeout,
  a goal or a stop;
- `Stop`, `EngageEstop`, `Reset`, `Shutdown`;
- `LatchFault`: a fault the daemon found (``collision``: a measured state in collision;
  ``contact``: the momentum observer), latched as the loop's own are, a controlled stop, until
  a `Reset` once its cause is gone;
- `TorqueMap`: the daemon's linearised inverse dynamics near the commanded state, refreshed at
  every `Sample`, from which the loop computes each tick's torque feed-forward (gravity
  compensation; `armd.control.feedforward`).

Events (loop → daemon): `StatusUpdate` (of a goal), `FaultChanged`, `ModeChanged`, `Sample` (the
loop's state: every `LoopSettings.sample_every` ticks, the telemetry's rate, and at once after a
tick that changed its mode, the commands taken in, busy, moving, the fault or the missed ticks),
`Ready` (the first valid read), `Notice` (a line for systemd's
``STATUS=``).

Units are SI, arrays in q order (rad or m).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from armd.link.handover import Handover
from armd.link.messages import Fault, GoalStatus, Mode, StatusUpdate
from armd.motion.timed_trajectory import TimedTrajectory
from armd.motion.trajectory import MotionLimits, Setpoint, TimedPath
from drivers import DeviceFault

__all__ = [
    "STOP_REQUESTED",
    "STREAM_DISABLED",
    "Command",
    "EngageEstop",
    "Event",
    "FaultChanged",
    "FollowPath",
    "LatchFault",
    "LoopPort",
    "MeasuredState",
    "ModeChanged",
    "Move",
    "MoveTo",
    "Notice",
    "Ready",
    "Reset",
    "Sample",
    "Shutdown",
    "Stop",
    "StreamTarget",
    "TorqueMap",
    "superseded",
]

Array = NDArray[np.float64]


STOP_REQUESTED = "stop requested"  # the reason of a client's stop goal
STREAM_DISABLED = "stream: streaming is not enabled in the config (stream.enabled)"


def superseded(by: str | None) -> str:
    """The reason a goal replaced by a newer one (`by`, its id) before it started ends with."""
    return f"superseded by {by or 'a stop'} before it started"


# -- commands --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MeasuredState:
    """The arm's measured state in joint space (q order).

    position: rad or m (NaN for a joint never read); velocity: rad/s or m/s;
    timestamp: s, when each joint's reading was taken (-inf: never);
    faults: the device faults reported this tick, by joint name;
    effort: each joint's device effort in the device's units (NaN: not reported), or None.
    """

    position: Array
    velocity: Array
    timestamp: Array
    faults: tuple[tuple[str, DeviceFault], ...] = ()
    effort: Array | None = None

    def complete(self) -> bool:
        """Every joint has been read at least once."""
        return bool(np.isfinite(self.position).all())


@dataclass(frozen=True, slots=True)
class Grip:
    """Closing a gripper: once the device effort of joint `joint` (q index) reaches `effort` (in
    the device's units), the motion stops there and its goal succeeds, holding the object."""

    joint: int
    effort: float


@dataclass(frozen=True, slots=True)
class MoveTo:
    """Move every joint to `target` and stop there. The goal succeeds when every joint is within
    `tolerance` (rad or m, per joint; None: the loop's `joint_tolerance`) of it. `kept`: the
    joints (q indices) the goal leaves out, which the planner filled in from the commanded
    position it read (a held gripper among them keeps its grip: `armd.control.grip`)."""

    goal_id: str
    target: Array
    limits: MotionLimits
    tolerance: Array | None = None
    grip: Grip | None = None
    kept: frozenset[int] = frozenset()
    handover: Handover | None = None  # None: from wherever the arm is when the loop takes it


@dataclass(frozen=True, slots=True)
class FollowPath:
    """Follow `path`: a `TimedPath` from where the arm is, at rest (e.g. a straight tool line), or
    a `TimedTrajectory` after an approach to its first point (a ``trajectory`` goal);
    `tolerance` as for `MoveTo`, at the path's end; `kept` as for `MoveTo`."""

    goal_id: str
    path: TimedPath | TimedTrajectory
    tolerance: Array | None = None
    note: str | None = None  # the reason of the accepted status (how much it was slowed down)
    kept: frozenset[int] = frozenset()
    handover: Handover | None = None  # as for `MoveTo`


Move = MoveTo | FollowPath


@dataclass(frozen=True, slots=True)
class StreamTarget:
    """One message of a stream (docs/mqtt.md#stream), as the loop follows it.

    stream_id: the stream's id on ``goal/status``; session: numbered by the daemon, one per stream
    (a target of a session the loop has ended is dropped: the daemon had not yet seen it end);
    seq: the message's sequence number (a target not newer than the newest taken is dropped);
    position: (n,) rad or m; NaN keeps that joint's current stream target (the commanded position
    when the stream starts); velocity: (n,) rad/s or m/s at the target, NaN for none (0);
    end: the last message: the arm comes to rest at the target, then the stream succeeds.
    """

    stream_id: str
    session: int
    seq: int
    position: Array
    velocity: Array
    end: bool = False


@dataclass(frozen=True, slots=True)
class Stop:
    """Stop the motion, then hold. The goal being stopped ends as `outcome` with `reason`
    (``preempted`` when a newer goal asked for the stop, e.g. a linear move that starts at rest);
    a stop with a `goal_id` succeeds once the arm is at rest."""

    goal_id: str | None = None
    reason: str = STOP_REQUESTED
    outcome: GoalStatus = GoalStatus.ABORTED


@dataclass(frozen=True, slots=True)
class EngageEstop:
    """Stop at once and latch the e-stop until a `Reset`."""


@dataclass(frozen=True, slots=True)
class Reset:
    """Clear a latched e-stop or fault whose cause is gone; restart from the measured position."""


@dataclass(frozen=True, slots=True)
class LatchFault:
    """Latch `fault` at the next tick (unless a fault is latched already): a controlled stop,
    then hold (or disable) until a `Reset`. The daemon's own checks of the measured state, which
    need the kinematics the loop does not have, end here (``collision``, ``contact``)."""

    fault: Fault


@dataclass(frozen=True, slots=True)
class Shutdown:
    """Bring the arm to rest (its goal aborted), disable and close the drives."""


@dataclass(frozen=True, slots=True)
class TorqueMap:
    """The inverse dynamics of the commanded motion near `position`, linearised by the daemon
    (q order; N·m and N at the joints; zero rows for joints not compensated)::

        τ(q, q̈) = torque + stiffness @ (q - position) + mass @ q̈

    position: (n,) q0, the commanded position it was computed at, rad or m;
    torque: (n,) g(q0) + C(q0, q̇0) q̇0; stiffness: (n, n) ∂g/∂q at q0; mass: (n, n) M(q0).
    """

    position: Array
    torque: Array
    stiffness: Array
    mass: Array


Command = (
    MoveTo
    | FollowPath
    | StreamTarget
    | Stop
    | EngageEstop
    | Reset
    | Shutdown
    | TorqueMap
    | LatchFault
)


# -- events ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FaultChanged:
    fault: Fault | None  # None: cleared


@dataclass(frozen=True, slots=True)
class ModeChanged:
    mode: Mode


@dataclass(frozen=True, slots=True)
class Ready:
    """The first valid read of every joint: the daemon is ready (systemd's ``READY=1``)."""

    drivers: int


@dataclass(frozen=True, slots=True)
class Notice:
    """A line for systemd's ``STATUS=`` (e.g. drivers reconnected)."""

    text: str


@dataclass(frozen=True, slots=True)
class Sample:
    """The loop's state after one tick: what the daemon plans from and publishes.

    t: s, the tick's time (`time.monotonic`, the same clock in both processes);
    taken: how many motion commands the loop has taken in (the daemon counts those it sent);
    busy: moving, or a motion command waits for the next tick;
    values: (7, n) rows: measured position and velocity, commanded position, velocity and
        acceleration, measured effort (device units), and when each joint's reading was taken
        (s, the loop's clock; -inf: never); NaN rows while there is no measurement or no
        command, NaN efforts where the device reports none;
    held: the q index of the gripper joint while it holds an object (`armd.control.grip`; None:
        nothing held), so that the daemon plans the arm's moves around the grip;
    ahead: where a move sent now could take over (`armd.link.handover.Handover`s, the nearest
        first; none: the loop cannot tell: a stream under way, a command waiting, the drives
        off, or no forecast asked for);
    streaming: a stream is under way.
    """

    tick: int
    t: float
    mode: Mode
    taken: int
    busy: bool
    moving: bool
    missed_ticks: int
    fault: Fault | None
    values: Array
    held: int | None = None
    ahead: tuple[Handover, ...] = ()
    streaming: bool = False

    @classmethod
    def initial(cls, dof: int) -> Sample:
        return cls(0, 0.0, Mode.INACTIVE, 0, False, False, 0, None, np.full((7, dof), np.nan))

    @staticmethod
    def rows(measured: MeasuredState, commanded: Setpoint | None) -> Array:
        """The `values` rows of a measured state and the command (None: no command)."""
        values = np.full((7, len(measured.position)), np.nan)
        values[0], values[1] = measured.position, measured.velocity
        values[6] = measured.timestamp
        if measured.effort is not None:
            values[5] = measured.effort
        if commanded is not None:
            values[2], values[3], values[4] = (
                commanded.position,
                commanded.velocity,
                commanded.acceleration,
            )
        return values

    @property
    def measured_position(self) -> Array | None:
        row = self.values[0]
        return row if np.isfinite(row).all() else None

    @property
    def measured_velocity(self) -> Array:
        row: Array = self.values[1]
        return row

    @property
    def commanded_position(self) -> Array | None:
        row = self.values[2]
        return row if np.isfinite(row).all() else None

    @property
    def measured_effort(self) -> Array:
        row: Array = self.values[5]
        return row

    @property
    def measured_timestamp(self) -> Array | None:
        """When each joint's reading was taken (s); None in a sample without the row."""
        return self.values[6] if len(self.values) > 6 else None

    @property
    def commanded_velocity(self) -> Array:
        row: Array = self.values[3]
        return row

    def at_handover(self, handover: Handover) -> Sample:
        """This sample with its commanded state replaced by `handover`'s start: what a move that
        takes over there is planned from."""
        values = self.values.copy()
        start = handover.start
        values[2], values[3], values[4] = start.position, start.velocity, start.acceleration
        return replace(self, values=values)


Event = StatusUpdate | FaultChanged | ModeChanged | Sample | Ready | Notice


# -- the daemon's side -------------------------------------------------------------------------


class LoopPort:
    """The daemon's side of the loop: `send` commands, read the `latest` sample.

    Motion commands are coalesced here (newest wins): while one is on its way (sent, not yet taken
    in according to the latest sample), a newer one waits, and one that replaces a waiting one
    ends it as ``preempted`` through `report`. So at most one motion command per tick reaches the
    loop however fast goals arrive. Other commands are sent at once, in order: stream targets too
    (a stream's newest wins in the loop, which needs every message's arrival for its timeout)."""

    def __init__(
        self,
        transmit: Callable[[Command], None],
        report: Callable[[StatusUpdate], None],
        dof: int,
    ) -> None:
        self._transmit = transmit
        self._report = report
        self.latest = Sample.initial(dof)
        self._sent = 0  # motion commands transmitted
        self._held: Move | Stop | None = None

    @property
    def busy(self) -> bool:
        """Moving, or a motion command is on its way or waiting."""
        return self.latest.busy or not self.caught_up

    @property
    def caught_up(self) -> bool:
        """The latest sample comes after the loop took in every motion command sent."""
        return self._held is None and self._sent <= self.latest.taken

    def send(self, command: Command) -> None:
        if not isinstance(command, MoveTo | FollowPath | Stop):
            self._transmit(command)
            return
        if self._sent > self.latest.taken:
            replaced, self._held = self._held, command
            if replaced is not None and replaced.goal_id is not None:
                reason = superseded(command.goal_id)
                self._report(StatusUpdate(replaced.goal_id, GoalStatus.PREEMPTED, reason))
            return
        self._send_motion(command)

    def take(self, sample: Sample) -> None:
        """A new sample from the loop: the held command goes out once the last one is in."""
        self.latest = sample
        held = self._held
        if held is not None and self._sent <= sample.taken:
            self._held = None
            self._send_motion(held)

    def drop_held(self, reason: str) -> None:
        """End the waiting command's goal as ``aborted`` (the daemon stops)."""
        held, self._held = self._held, None
        if held is not None and held.goal_id is not None:
            self._report(StatusUpdate(held.goal_id, GoalStatus.ABORTED, reason))

    def _send_motion(self, command: Move | Stop) -> None:
        self._sent += 1
        self._transmit(command)
