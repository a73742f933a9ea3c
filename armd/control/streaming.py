"""The control loop's stream follower: one stream session (docs/mqtt.md#stream) tracked tick by
tick.

Each tick the follower plans, with ruckig's online mode (state to state, never its intermediate
waypoints, which call a cloud service), a jerk-limited step from the loop's *commanded* state
toward the newest target, and the loop's limiter checks that step like any other. Re-planning from
the commanded state every tick is what makes the stream safe to start, change, pause or end at any
moment: the next command always continues the last one (no jump), within the velocity,
acceleration and jerk limits, whatever the targets do.

Targets are held to the joint limits here: a position beyond a limit is clamped onto it (its
velocity set to 0, so that the arm arrives there at rest), a velocity beyond the limit is clipped.
A target's velocity means the target moves: between messages it is extrapolated at that velocity
(a leader at 30 Hz sends a target every 8 ticks of a 250 Hz loop). Each tick's plan ends at rest:
on a point ahead of the target by the distance a joint needs to stop from the target's velocity.
A joint tracking a steadily moving target then rides that plan's start, level with the target at
its speed, and a target that stops is reached without turning back more than that distance.
Planning to *arrive* at the target's velocity instead (ruckig's target velocity) is time-optimal
toward a point that has moved on by the time it is reached: the arm overtakes it, backs up to
gain a run-up and oscillates around any moving target.

`StreamFollower` keeps no time of its own: the loop's tick counts and period are its clock.
"""

from __future__ import annotations

import logging

import numpy as np
from numpy.typing import NDArray
from ruckig import InputParameter, OutputParameter, Result, Ruckig, Synchronization

from armd.link.protocol import StreamTarget
from armd.motion.trajectory import MotionLimits, PlanningError, Setpoint

__all__ = ["StreamFollower", "timeout_reason"]

log = logging.getLogger(__name__)
Array = NDArray[np.float64]
_AT_TARGET = 1e-9  # rad (m), rad/s: the filter has arrived


def timeout_reason(timeout_s: float) -> str:
    """The reason a stream that went quiet ends with (its status is ``aborted``)."""
    return f"stream timeout: no message for {timeout_s:g} s"


class StreamFollower:
    """One stream session: its newest target and the filter that follows it.

    `take` a target at a tick (False: dropped, not newer than the newest taken); `step` the
    commanded state one tick toward it; `quiet` says when no target came for the timeout;
    `settled` when the stream ended and the command is at rest on the last target.
    `lower`/`upper` are the position bounds the limiter enforces, `limits` the joints' motion
    limits.
    """

    def __init__(
        self,
        first: StreamTarget,
        start: Setpoint,
        tick: int,
        *,
        joint_names: tuple[str, ...],
        bounds: tuple[Array, Array],
        limits: MotionLimits,
        period_s: float,
        timeout_ticks: int,
    ) -> None:
        self.stream_id = first.stream_id
        self.session = first.session
        self.joint_names = joint_names
        self.lower, self.upper = bounds
        self.limits = limits
        self.period_s = period_s
        self.timeout_ticks = timeout_ticks
        n = len(joint_names)
        self.seq = -1
        self.position = start.position.copy()  # the target as of `target_tick`
        self.velocity = np.zeros(n)
        self.target_tick = tick
        self.end = False
        self.taken = 0
        self.dropped = 0  # not newer than the newest taken
        self.clamped = 0  # targets moved into the limits
        self._last: Setpoint | None = None  # the last step returned
        self._otg = Ruckig(n, period_s)
        self._input = InputParameter(n)
        self._output = OutputParameter(n)
        # Each joint follows its own target as fast as it may: synchronising them would hold
        # every joint to the slowest one's plan, a lag on all of them.
        self._input.synchronization = Synchronization.No
        self._input.target_velocity = [0.0] * n
        self._input.target_acceleration = [0.0] * n
        self.take(first, tick)

    def take(self, target: StreamTarget, tick: int) -> bool:
        """Make `target` the newest (taken at `tick`); False when it is dropped: out of order, or
        after the stream's end (which fixed its last target: a later target of the same stream
        must not set it moving again without a timeout)."""
        if target.seq <= self.seq or self.end:
            self.dropped += 1
            return False
        self.seq = target.seq
        self.taken += 1
        named = np.isfinite(target.position)
        # The joints a message does not name keep their target where it is now (extrapolated).
        position = np.where(named, target.position, self._target_position(tick))
        velocity = np.where(named, np.nan_to_num(target.velocity, nan=0.0), self.velocity)
        clamped = np.clip(position, self.lower, self.upper)
        outside = clamped != position
        if np.any(outside):
            self._say_clamped(position, outside)
        v_max = self.limits.velocity
        velocity = np.where(outside, 0.0, np.clip(velocity, -v_max, v_max))
        if target.end:
            velocity = np.zeros_like(velocity)  # the stream ends: arrive at rest
        self.position, self.velocity, self.target_tick = clamped, velocity, tick
        self.end = target.end
        return True

    def _say_clamped(self, position: Array, outside: Array) -> None:
        """Say once per stream that targets were clamped into the limits (and which first)."""
        self.clamped += 1
        if self.clamped > 1:
            return
        joint = int(np.argmax(outside))
        log.warning(
            "stream %s: target %s = %.6g outside [%.6g, %.6g]: clamped into the limits "
            "(said once per stream)",
            self.stream_id,
            self.joint_names[joint],
            position[joint],
            self.lower[joint],
            self.upper[joint],
        )

    def _stopping_distance(self, velocity: Array) -> Array:
        """How far a joint at `velocity` (at constant speed) travels while it stops within its
        acceleration and jerk limits, signed like the velocity: ``v²/2a + v·a/2j`` once the stop
        reaches full deceleration (|v| ≥ a²/j), else ``v·sqrt(|v|/j)``."""
        a, j = self.limits.acceleration, self.limits.jerk
        speed = np.abs(velocity)
        full = speed * speed / (2.0 * a) + speed * a / (2.0 * j)
        return np.sign(velocity) * np.where(speed >= a * a / j, full, speed * np.sqrt(speed / j))

    def _target_position(self, tick: int) -> Array:
        """The target at `tick`: the newest position moved on at its velocity, in the limits."""
        if not self.velocity.any():
            return self.position
        elapsed = (tick - self.target_tick) * self.period_s
        return np.clip(self.position + self.velocity * elapsed, self.lower, self.upper)

    def quiet(self, tick: int) -> bool:
        """No target was taken for the timeout (an ended stream has no timeout: it settles)."""
        return not self.end and tick - self.target_tick > self.timeout_ticks

    def step(self, commanded: Setpoint, tick: int) -> Setpoint:
        """The state to command at `tick`: one period of the jerk-limited motion from `commanded`
        toward the target. Raises `PlanningError` when ruckig finds none (never expected: the
        commanded state is within the limits the limiter enforces)."""
        inp, out = self._input, self._output
        last = self._last
        if (
            last is not None
            and np.array_equal(last.position, commanded.position)
            and np.array_equal(last.velocity, commanded.velocity)
        ):
            # The limiter passed the last step unchanged: continue from its exact state. The
            # loop's commanded acceleration is the mean over the tick, not the one at its end,
            # and re-planning from it each tick would drift into a limit cycle near targets.
            commanded = last
        limits = self.limits.covering(commanded)  # a state a goal left faster still is followed
        inp.max_velocity = limits.velocity.tolist()
        inp.max_acceleration = limits.acceleration.tolist()
        inp.max_jerk = limits.jerk.tolist()
        inp.current_position = commanded.position.tolist()
        inp.current_velocity = commanded.velocity.tolist()
        inp.current_acceleration = commanded.acceleration.tolist()
        aim = self._target_position(tick) + self._stopping_distance(self.velocity)
        inp.target_position = np.clip(aim, self.lower, self.upper).tolist()
        result = self._update()
        if result not in (Result.Working, Result.Finished):
            raise PlanningError(f"stream {self.stream_id}: no trajectory ({result})")
        self._last = Setpoint(
            np.array(out.new_position), np.array(out.new_velocity), np.array(out.new_acceleration)
        )
        return self._last

    def _update(self) -> object:
        try:
            return self._otg.update(self._input, self._output)
        except Exception as exc:  # ruckig raises its own error type for invalid input
            return " ".join(str(exc).split())

    def settled(self, commanded: Setpoint) -> bool:
        """The stream ended and the command is at rest on its last target."""
        return bool(
            self.end
            and np.all(np.abs(commanded.position - self.position) <= _AT_TARGET)
            and np.all(np.abs(commanded.velocity) <= _AT_TARGET)
        )
