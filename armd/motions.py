"""The control loop's motions: the command waiting for the next tick, the motion under way, and
the goal each belongs to.

`Motions` keeps the newest-wins rule for commands between two ticks, turns a motion command into
the `Motion` the loop samples (`armd.moves`), stops, and decides when a goal ends: ``succeeded``
when every joint is within its tolerance of the motion's end, ``aborted`` when it did not settle,
``preempted`` when a newer goal replaced it. Statuses go to `status`; the loop keeps the mode, the
commanded state and the drives, and is told which mode a change calls for.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from armd.messages import GoalStatus, Mode
from armd.moves import check_move, plan_motion
from armd.protocol import Grip, Move, MoveTo, Stop, superseded
from armd.safety import MeasuredState
from armd.trajectory import Motion, MotionLimits, PlanningError, Setpoint, StopMotion

__all__ = ["Ended", "Motions"]

log = logging.getLogger(__name__)
Array = NDArray[np.float64]
Status = Callable[[str | None, GoalStatus, str | None], None]


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
    ) -> None:
        self.joint_names = joint_names
        self.limits = limits
        self.period_s = period_s
        self.joint_tolerance = joint_tolerance
        self.settle_timeout_s = settle_timeout_s
        self._status = status
        self.pending: Move | Stop | None = None
        self.active: _Active | None = None
        self.taken = 0  # motion commands (moves and stops) taken in

    @property
    def moving(self) -> bool:
        """A motion or a stop is under way (the commanded state is changing)."""
        return self.active is not None

    @property
    def busy(self) -> bool:
        """Moving, or a command waits for the next tick."""
        return self.active is not None or self.pending is not None

    def take(self, command: Move | Stop) -> None:
        """The newest command waits for the next tick; the one it replaces is ``preempted``."""
        self.taken += 1
        replaced, self.pending = self.pending, command
        if replaced is not None and replaced.goal_id is not None:  # a stop with an id too
            self._status(replaced.goal_id, GoalStatus.PREEMPTED, superseded(command.goal_id))

    def drop_pending(self, reason: str) -> None:
        """The waiting command will not run: its goal is ``aborted`` (a stop's is served)."""
        pending, self.pending = self.pending, None
        if isinstance(pending, Stop):
            if pending.goal_id is not None:
                self._status(pending.goal_id, GoalStatus.SUCCEEDED, None)
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
        if commanded is None or mode not in (Mode.HOLDING, Mode.MOVING, Mode.STOPPING):
            latched = mode in (Mode.FAULT, Mode.ESTOP)
            reason = f"arm is {mode.value}" + (": reset first" if latched else "")
            self._status(command.goal_id, GoalStatus.ABORTED, reason)
            return None
        return self._start(command, commanded, tick, bounds)

    def _apply_stop(
        self, stop: Stop, commanded: Setpoint | None, tick: int, mode: Mode
    ) -> Mode | None:
        changed = None
        if mode == Mode.MOVING and commanded is not None:
            self.stop(commanded, tick, stop.reason, stop.outcome)
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

    def _start(
        self, move: Move, commanded: Setpoint, tick: int, bounds: tuple[Array, Array]
    ) -> Mode | None:
        try:
            check_move(move, bounds[0], bounds[1], self.limits)
            motion = plan_motion(move, commanded)
        except PlanningError as exc:
            self._status(move.goal_id, GoalStatus.ABORTED, str(exc))
            return None
        except Exception as exc:  # a command this loop cannot follow ends its goal, nothing more
            log.exception("goal %s: planning its motion failed", move.goal_id)
            reason = f"internal error: {type(exc).__name__}: {exc}"
            self._status(move.goal_id, GoalStatus.ABORTED, reason)
            return None
        previous = self.active
        if previous is not None and previous.goal_id is not None:  # a stop under way too
            self._status(previous.goal_id, GoalStatus.PREEMPTED, f"preempted by {move.goal_id}")
        self.active = _Active(move.goal_id, motion, tick, move=move)
        return Mode.MOVING

    @property
    def grip(self) -> Grip | None:
        """The grip of the motion under way, if it closes a gripper."""
        move = self.active.move if self.active is not None else None
        return move.grip if isinstance(move, MoveTo) else None

    def held_reason(self, measured: MeasuredState) -> str:
        grip = self.grip
        if grip is None or measured.effort is None:
            return "held"
        joint = grip.joint
        effort, position = measured.effort[joint], measured.position[joint]
        return f"held: {self.joint_names[joint]} effort {effort:.3f} at {position:.4f}"

    @staticmethod
    def _holding(active: _Active, measured: MeasuredState) -> bool:
        """A closing gripper's effort reached its grip (NaN, unreported, never does)."""
        move = active.move
        if not isinstance(move, MoveTo) or move.grip is None or measured.effort is None:
            return False
        return bool(abs(measured.effort[move.grip.joint]) >= move.grip.effort)

    def _time(self, active: _Active, tick: int) -> float:
        """Time into the motion of this tick's setpoint: a motion planned at tick k starts from
        the state commanded at tick k - 1, so tick k samples it one period in."""
        return (tick - active.start_tick + 1) * self.period_s

    def setpoint(self, commanded: Setpoint, tick: int) -> Setpoint:
        """The state wanted at this tick (before the limiter)."""
        active = self.active
        return commanded if active is None else active.motion.sample(self._time(active, tick))

    def starting(self, tick: int) -> str | None:
        """The goal whose motion issues its first command at this tick, if any."""
        active = self.active
        if active is None or active.is_stop or active.start_tick != tick:
            return None
        return active.goal_id

    def track(self, measured: MeasuredState, tick: int) -> Ended | None:
        """Whether the motion under way ended at this tick (its goal's final status sent)."""
        active = self.active
        if active is None:
            return None
        t = self._time(active, tick)
        if self._holding(active, measured):
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
        if np.all(error <= (self.joint_tolerance if tolerance is None else tolerance)):
            self._status(active.goal_id, GoalStatus.SUCCEEDED, None)
        elif t - active.motion.duration > self.settle_timeout_s:
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
