"""The control loop's motions: the command waiting for the next tick, the motion under way, and
the goal each belongs to.

`Motions` keeps the newest-wins rule for commands between two ticks, turns a motion command into
the `Motion` the loop samples (`armd.control.moves`), stops, and decides when a goal ends:
``succeeded`` when every joint is within its tolerance of the motion's end, ``aborted`` when it did
not settle, ``preempted`` when a newer goal replaced it. Statuses go to `status`; the loop keeps
the mode, the commanded state and the drives, and is told which mode a change calls for.

A move that arrives while the arm holds still is planned at once, between ticks (`prepare`).

A stream (`StreamTarget`s of one session) is a motion like a goal's: its first target starts an
`armd.control.streaming.StreamFollower` (``accepted``), later ones retarget it; it pre-empts the
motion under way and is pre-empted by a goal or a stop; it ends ``succeeded`` at rest after its end
message, ``aborted`` when it goes quiet for the timeout (the loop then stops the arm).

A gripper that closed on an object holds it (`held`, `armd.control.grip`) through the motions that
leave it out or where it holds: the gripper stays at its grip, and their success does not wait
for it; one that commands it elsewhere releases it.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from armd.control.grip import GripSettle, Held, closed_on_object
from armd.control.moves import Prepared, motion_for, prepare
from armd.control.streaming import StreamFollower
from armd.link.handover import Handover
from armd.link.messages import GoalStatus, Mode
from armd.link.protocol import (
    STOP_REQUESTED,
    STREAM_DISABLED,
    FollowPath,
    Grip,
    MeasuredState,
    Move,
    MoveTo,
    Stop,
    StreamTarget,
    superseded,
)
from armd.motion.trajectory import Hold, Motion, MotionLimits, PlanningError, Setpoint, StopMotion

__all__ = ["Ended", "Motions"]

log = logging.getLogger(__name__)
Array = NDArray[np.float64]
Status = Callable[[str | None, GoalStatus, str | None], None]


def moved_on(handover: Handover, tick: int) -> str:
    """The reason a move is not started: the arm left the state it was planned from."""
    late = tick - handover.tick
    when = f"{late} ticks after its handover" if late > 0 else "at its handover"
    return (
        f"the arm moved on from the state the goal was planned and checked from ({when}): "
        "not started; send it again"
    )


class Ended(enum.Enum):
    """What `Motions.track` saw end at this tick."""

    MOVE = "move"
    STOP = "stop"
    HELD = "held"  # a gripper closing met its object: stop there, the goal succeeded


@dataclass
class _Active:
    goal_id: str | None
    motion: Motion
    start_tick: int
    is_stop: bool = False
    move: Move | None = None
    stream: StreamFollower | None = None
    settled_tick: int | None = None  # a stream that ended: when its command came to rest


class Motions:
    """See the module docstring. Ticks are the loop's tick counts; `period_s` its period."""

    def __init__(
        self,
        joint_names: tuple[str, ...],
        limits: MotionLimits,
        period_s: float,
        joint_tolerance: float,
        settle_timeout_s: float,
        status: Status,
        stream_timeout_s: float | None = None,
    ) -> None:
        """`stream_timeout_s`: a stream's timeout (None: streaming is not enabled)."""
        self.joint_names = joint_names
        self.limits = limits
        self.period_s = period_s
        self.joint_tolerance = joint_tolerance
        self.settle_timeout_s = settle_timeout_s
        self._status = status
        self.stream_timeout_s = stream_timeout_s
        self.pending: Move | Stop | StreamTarget | None = None
        self.active: _Active | None = None
        self._prepared: Prepared | None = None
        self.taken = 0  # motion commands (moves and stops) taken in
        self._newest_session = -1  # the newest stream session started (or refused)
        self.held: Held | None = None  # the gripper's grip on an object (`armd.control.grip`)

    @property
    def moving(self) -> bool:
        """A motion or a stop is under way (the commanded state is changing)."""
        return self.active is not None

    @property
    def streaming(self) -> bool:
        """A stream is under way."""
        return self.active is not None and self.active.stream is not None

    @property
    def busy(self) -> bool:
        """Moving, or a command waits for the next tick."""
        return self.active is not None or self.pending is not None

    def take(self, command: Move | Stop | StreamTarget) -> None:
        """The newest command waits for the next tick; the one it replaces is ``preempted``
        (a stream's target replaces an older one of its stream silently)."""
        replaced = self.pending
        by: str | None
        if isinstance(command, StreamTarget):
            if isinstance(replaced, StreamTarget) and replaced.session == command.session:
                if command.seq > replaced.seq and not replaced.end:  # nothing follows an end
                    self.pending = command
                return
            by = command.stream_id
        else:
            self.taken += 1
            by = command.goal_id
        self.pending = command
        if isinstance(replaced, StreamTarget):
            if replaced.session > self._newest_session:  # a stream that never started
                self._newest_session = replaced.session
                self._status(replaced.stream_id, GoalStatus.PREEMPTED, superseded(by))
        elif replaced is not None and replaced.goal_id is not None:  # a stop with an id too
            self._status(replaced.goal_id, GoalStatus.PREEMPTED, superseded(by))

    def prepare(self, commanded: Setpoint, bounds: tuple[Array, Array]) -> None:
        """Plan the waiting move now if the arm holds still at `commanded`
        (`armd.control.moves.prepare`: the tick that starts it only checks that nothing changed
        since)."""
        if isinstance(self.pending, MoveTo | FollowPath) and self.active is None:
            move = self.pending
            if self.held is not None and self.held.kept_by(move, commanded.position):
                move = self.pending = self.held.keep(move, commanded.position)
            self._prepared = prepare(move, commanded, bounds, self.limits)

    def drop_pending(self, reason: str) -> None:
        """The waiting command will not run: its goal is ``aborted`` (a stop's is served)."""
        pending, self.pending = self.pending, None
        if isinstance(pending, Stop):
            if pending.goal_id is not None:
                self._status(pending.goal_id, GoalStatus.SUCCEEDED, None)
        elif isinstance(pending, StreamTarget):
            if pending.session > self._newest_session:  # its stream had not started
                self._newest_session = pending.session
                self._status(pending.stream_id, GoalStatus.ABORTED, reason)
        elif pending is not None:
            self._status(pending.goal_id, GoalStatus.ABORTED, reason)

    def stop(
        self, commanded: Setpoint, tick: int, reason: str, outcome: GoalStatus = GoalStatus.ABORTED
    ) -> None:
        """A controlled stop from the commanded state; the goal under way ends as `outcome`."""
        active = self.active
        if active is not None and active.goal_id is not None and not active.is_stop:
            self._status(active.goal_id, outcome, reason)
        goal_id = active.goal_id if active is not None and active.is_stop else None
        self.active = _Active(goal_id, StopMotion(commanded, self.limits), tick, is_stop=True)

    def apply(
        self,
        commanded: Setpoint | None,
        tick: int,
        mode: Mode,
        bounds: tuple[Array, Array],
    ) -> Mode | None:
        """Start the waiting command at this tick; the mode it calls for (None: unchanged).
        `commanded` is None while the drives are off; `bounds` are the position bounds the
        limiter enforces now."""
        command, self.pending = self.pending, None
        if command is None:
            return None
        if isinstance(command, Stop):
            return self._apply_stop(command, commanded, tick, mode)
        if isinstance(command, StreamTarget):
            return self._apply_stream(command, commanded, tick, mode, bounds)
        if commanded is None or mode not in (Mode.HOLDING, Mode.MOVING, Mode.STOPPING):
            latched = mode in (Mode.FAULT, Mode.ESTOP)
            reason = f"arm is {mode.value}" + (": reset first" if latched else "")
            self._status(command.goal_id, GoalStatus.ABORTED, reason)
            return None
        return self._start(command, commanded, tick, bounds)

    def ahead(self, commanded: Setpoint, tick: int, now: float, lead: int) -> tuple[Handover, ...]:
        """Where a move sent after this tick (due at `now`) could take over
        (`armd.link.handover`): holding still, from here at the next tick; in a motion, `lead`,
        twice and four times `lead` ticks on (at least 2), where the motion will be then. None
        at all when that cannot be told: a command waiting, a stream (its targets are yet to
        come), the limiter still braking after a motion ended."""
        if self.pending is not None:
            return ()
        active = self.active
        if active is None:
            if commanded.velocity.any() or commanded.acceleration.any():
                return ()
            return (Handover(tick + 1, now + self.period_s, commanded),)
        if active.stream is not None:
            return ()
        return tuple(self._forecast(active, tick, now, max(k * lead, 2)) for k in (1, 2, 4))

    def _forecast(self, active: _Active, tick: int, now: float, lead: int) -> Handover:
        """The state `active`'s motion will command at `lead` - 1 ticks from `tick`."""
        at = tick + lead
        before = active.motion.sample(self._time(active, at - 2))
        start = active.motion.sample(self._time(active, at - 1))
        acceleration = (start.velocity - before.velocity) / self.period_s
        setpoint = Setpoint(start.position, start.velocity, acceleration)
        return Handover(at, now + lead * self.period_s, setpoint)

    def _apply_stop(
        self, stop: Stop, commanded: Setpoint | None, tick: int, mode: Mode
    ) -> Mode | None:
        changed = None
        if mode == Mode.MOVING and commanded is not None:
            outcome = stop.outcome
            streaming = self.active is not None and self.active.stream is not None
            if streaming and stop.reason == STOP_REQUESTED:
                outcome = GoalStatus.PREEMPTED  # a client's stop goal pre-empts a stream
            self.stop(commanded, tick, stop.reason, outcome)
            changed = Mode.STOPPING
        active = self.active
        if active is not None and active.is_stop:
            # The stop under way now answers this command; an earlier stop's id is answered.
            if stop.goal_id is not None:
                if active.goal_id is not None:
                    reason = f"preempted by {stop.goal_id}"
                    self._status(active.goal_id, GoalStatus.PREEMPTED, reason)
                active.goal_id = stop.goal_id
        elif stop.goal_id is not None:
            self._status(stop.goal_id, GoalStatus.SUCCEEDED, None)
        return changed

    def _apply_stream(
        self,
        target: StreamTarget,
        commanded: Setpoint | None,
        tick: int,
        mode: Mode,
        bounds: tuple[Array, Array],
    ) -> Mode | None:
        """Retarget the stream under way, or start a new one (an old session's target, which
        the daemon sent before it saw that stream end, is dropped)."""
        active = self.active
        stream = active.stream if active is not None else None
        if stream is not None and stream.session == target.session:
            if stream.take(target, tick):
                self._keep_grip(target, commanded)
            return None
        if target.session <= self._newest_session:
            return None
        self._newest_session = target.session
        if self.stream_timeout_s is None:
            self._status(target.stream_id, GoalStatus.REJECTED, STREAM_DISABLED)
            return None
        if commanded is None or mode not in (Mode.HOLDING, Mode.MOVING, Mode.STOPPING):
            latched = mode in (Mode.FAULT, Mode.ESTOP)
            reason = f"arm is {mode.value}" + (": reset first" if latched else "")
            self._status(target.stream_id, GoalStatus.ABORTED, reason)
            return None
        self._keep_grip(target, commanded)
        follower = StreamFollower(
            target,
            commanded,
            tick,
            joint_names=self.joint_names,
            bounds=bounds,
            limits=self.limits,
            period_s=self.period_s,
            timeout_ticks=max(1, round(self.stream_timeout_s / self.period_s)),
        )
        if active is not None and active.goal_id is not None:  # a goal, a stop or a stream
            reason = f"preempted by {target.stream_id}"
            self._status(active.goal_id, GoalStatus.PREEMPTED, reason)
        self._status(target.stream_id, GoalStatus.ACCEPTED, None)
        hold = Hold(commanded.position)
        self.active = _Active(target.stream_id, hold, tick, stream=follower)
        return Mode.MOVING

    def _keep_grip(self, target: StreamTarget, commanded: Setpoint | None) -> None:
        """A stream target that names the gripper elsewhere releases its grip."""
        if self.held is not None and not (
            commanded is not None and self.held.kept_by_target(target, commanded.position)
        ):
            self.held = None

    def _start(
        self, move: Move, commanded: Setpoint, tick: int, bounds: tuple[Array, Array]
    ) -> Mode | None:
        handover = move.handover
        if handover is not None:
            if tick < handover.tick:
                self.pending = move  # it takes over at its tick
                return None
            if not handover.matches(commanded):
                self._status(move.goal_id, GoalStatus.ABORTED, moved_on(handover, tick))
                return None
            commanded = handover.start
        prepared, self._prepared = self._prepared, None
        held = self.held
        kept = held is not None and held.kept_by(move, commanded.position)
        if held is not None and kept:
            move = held.keep(move, commanded.position)  # the gripper stays at its grip
        try:
            motion = motion_for(move, commanded, bounds, self.limits, prepared)
        except PlanningError as exc:
            self._status(move.goal_id, GoalStatus.ABORTED, str(exc))
            return None
        except Exception as exc:  # a command this loop cannot follow ends its goal, nothing more
            log.exception("goal %s: planning its motion failed", move.goal_id)
            reason = f"internal error: {type(exc).__name__}: {exc}"
            self._status(move.goal_id, GoalStatus.ABORTED, reason)
            return None
        if not kept:
            self.held = None  # the move commands the gripper: it lets go of its object
        previous = self.active
        if previous is not None and previous.goal_id is not None:  # a stop under way too
            self._status(previous.goal_id, GoalStatus.PREEMPTED, f"preempted by {move.goal_id}")
        self.active = _Active(move.goal_id, motion, tick, move=move)
        return Mode.MOVING

    def settle_grip(self, commanded: Setpoint, tick: int, reason: str) -> None:
        """The gripper goal under way closed on its object (`held`): it succeeds with `reason`,
        and the arm stops from `commanded`, this tick's command, the gripper back at its grip
        (`armd.control.grip.GripSettle`)."""
        active, held = self.active, self.held
        assert active is not None
        assert held is not None
        self._status(active.goal_id, GoalStatus.SUCCEEDED, reason)
        motion = GripSettle(commanded, held.joint, held.position, self.limits)
        # It starts from this tick's command: the next tick samples it one period in.
        self.active = _Active(None, motion, tick + 1, is_stop=True)

    @property
    def grip(self) -> Grip | None:
        """The grip of the motion under way, if it closes a gripper."""
        move = self.active.move if self.active is not None else None
        return move.grip if isinstance(move, MoveTo) else None

    def _time(self, active: _Active, tick: int) -> float:
        """Time into the motion of this tick's setpoint: a motion planned at tick k starts from
        the state commanded at tick k - 1, so tick k samples it one period in."""
        return (tick - active.start_tick + 1) * self.period_s

    def setpoint(self, commanded: Setpoint, tick: int) -> Setpoint:
        """The state wanted at this tick (before the limiter)."""
        active = self.active
        if active is None:  # holding: at rest where the command is
            if commanded.velocity.any():  # a motion just ended with the limiter still braking
                zeros = np.zeros_like(commanded.velocity)
                return Setpoint(commanded.position, zeros, zeros)
            return commanded
        if active.stream is not None:
            return active.stream.step(commanded, tick)
        return active.motion.sample(self._time(active, tick))

    def quiet(self, tick: int) -> bool:
        """A stream is under way and no target came for its timeout (the loop stops it before
        this tick's command, so that the stop starts from the last one)."""
        active = self.active
        return active is not None and active.stream is not None and active.stream.quiet(tick)

    def track(self, measured: MeasuredState, tick: int, commanded: Setpoint) -> Ended | None:
        """Whether the motion under way ended at this tick (its goal's final status sent).
        `commanded` is this tick's command."""
        active = self.active
        if active is None:
            return None
        if active.stream is not None:
            return self._track_stream(active, active.stream, measured, tick, commanded)
        t = self._time(active, tick)
        grip = closed_on_object(active.move, measured)
        if grip is not None:
            self.held = Held(grip.joint, grip.effort, float(commanded.position[grip.joint]))
            return Ended.HELD
        if not active.motion.done(t):
            return None
        if active.is_stop:
            self.active = None
            if active.goal_id is not None:
                self._status(active.goal_id, GoalStatus.SUCCEEDED, None)
            return Ended.STOP
        error = np.abs(measured.position - active.motion.sample(t).position)
        tolerance = active.move.tolerance if active.move is not None else None
        return self._settle(active, error, tolerance, t - active.motion.duration)

    def _settle(
        self, active: _Active, error: Array, tolerance: Array | None, late_s: float
    ) -> Ended | None:
        """A motion whose command reached its end `late_s` ago, its joints `error` from it:
        ``succeeded`` within tolerance, ``aborted`` when that took longer than the settle
        timeout, else (None) not yet. A gripper holding an object (the motion kept its grip)
        does not count."""
        if self.held is not None:
            error = self.held.ignore(error)
        if (error <= (self.joint_tolerance if tolerance is None else tolerance)).all():
            self._status(active.goal_id, GoalStatus.SUCCEEDED, None)
        elif late_s > self.settle_timeout_s:
            worst = int(np.argmax(error))
            reason = (
                f"did not settle: joint {self.joint_names[worst]!r} {error[worst]:.4f} from its "
                f"target after {self.settle_timeout_s:g} s"
            )
            self._status(active.goal_id, GoalStatus.ABORTED, reason)
        else:
            return None
        self.active = None
        return Ended.MOVE

    def _track_stream(
        self,
        active: _Active,
        stream: StreamFollower,
        measured: MeasuredState,
        tick: int,
        commanded: Setpoint,
    ) -> Ended | None:
        """After its end message, a stream ends once its command is at rest on the last target
        and the joints are within tolerance of it."""
        if active.settled_tick is None:
            if not stream.settled(commanded):
                return None
            active.settled_tick = tick
        error = np.abs(measured.position - stream.position)
        return self._settle(active, error, None, (tick - active.settled_tick) * self.period_s)
