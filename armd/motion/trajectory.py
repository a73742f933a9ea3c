"""Time-parameterised motions in joint space, sampled by the control loop once per tick.

Every motion starts from the loop's current *commanded* state (position, velocity, acceleration),
so switching motions (pre-emption, stops) is continuous. Jerk-limited profiles come from ruckig
(state-to-state only; its intermediate-waypoint feature calls a cloud service and is never used):

- `JointMotion`: a synchronised move of all joints to a target at rest: phase-synchronised, so
  that from rest it is a straight line in joint space (what the daemon checks for collisions);
- `PathMotion`: a precomputed joint path (e.g. the IK solutions along a straight tool line),
  followed by a 1-DOF jerk-limited profile of the path parameter whose limits are derived from the
  path's joint derivatives (`plan_path`, before the control process: a `TimedPath`), so that no
  joint exceeds its limits;
- `StopMotion`: every joint brought to rest at maximum deceleration (velocity interface, no
  synchronisation), then held;
- `Hold`: a constant position.

Arrays are in q order: rad (m), rad/s, rad/s².
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from ruckig import (
    ControlInterface,
    InputParameter,
    Result,
    Ruckig,
    Synchronization,
    Trajectory,
)

from armd.errors import ArmdError
from armd.motion.ruckig_pieces import RuckigPieces

__all__ = [
    "Hold",
    "JointMotion",
    "Motion",
    "MotionLimits",
    "PathMotion",
    "PlanningError",
    "Setpoint",
    "StopMotion",
    "TimedPath",
    "path_positions",
    "path_speed_bounds",
    "plan_path",
]

Array = NDArray[np.float64]


class PlanningError(ArmdError):
    """No trajectory satisfies the request (the message says which input and why)."""


@dataclass(frozen=True, slots=True)
class Setpoint:
    """A commanded state: position, velocity and acceleration per joint."""

    position: Array
    velocity: Array
    acceleration: Array

    @classmethod
    def at_rest(cls, position: Array) -> Setpoint:
        zeros = np.zeros_like(position)
        return cls(position.copy(), zeros, zeros.copy())


@dataclass(frozen=True, slots=True)
class MotionLimits:
    """Per-joint velocity, acceleration and jerk bounds (all > 0, finite)."""

    velocity: Array
    acceleration: Array
    jerk: Array

    def covering(self, state: Setpoint) -> MotionLimits:
        """These limits, raised where needed to include the current velocity and acceleration:
        a slower goal pre-empting a faster motion slows down along its new profile instead of
        being refused. Per joint, the speed scale is raised by the factor k that covers the
        state (velocity × k, acceleration × k², jerk × k³, as in `scaled`): raising velocity or
        acceleration alone would leave a jerk or deceleration so small that the profile overshoots
        by metres or radians. Callers pass scaled limits and the state respects the joints'
        limits, so the raised ones stay within the joints'."""
        if not (state.velocity.any() or state.acceleration.any()):
            return self  # at rest (a goal's usual start): k = 1 everywhere
        k = np.maximum.reduce(
            [
                np.ones_like(self.velocity),
                np.abs(state.velocity) / self.velocity,
                np.sqrt(np.abs(state.acceleration) / self.acceleration),
            ]
        )
        return MotionLimits(self.velocity * k, self.acceleration * k**2, self.jerk * k**3)

    def scaled(self, speed: float) -> MotionLimits:
        """Limits for a move at `speed` ∈ (0, 1]: time slowed uniformly by `speed`, i.e.
        velocity × speed, acceleration × speed², jerk × speed³ (same path, 1/speed as long)."""
        if not 0.0 < speed <= 1.0:
            raise PlanningError(f"speed: {speed} must be in (0, 1]")
        return MotionLimits(
            self.velocity * speed, self.acceleration * speed**2, self.jerk * speed**3
        )


class Motion(abc.ABC):
    """A motion sampled at times t ≥ 0 since its start."""

    duration: float

    @abc.abstractmethod
    def sample(self, t: float) -> Setpoint:
        """The commanded state at t (clamped to [0, duration]: after the end, the final state)."""

    def done(self, t: float) -> bool:
        return t >= self.duration


def _ruckig_input(start: Setpoint, limits: MotionLimits) -> InputParameter:
    n = start.position.shape[0]
    inp = InputParameter(n)
    inp.current_position = start.position.tolist()
    inp.current_velocity = start.velocity.tolist()
    inp.current_acceleration = start.acceleration.tolist()
    inp.max_velocity = limits.velocity.tolist()
    inp.max_acceleration = limits.acceleration.tolist()
    inp.max_jerk = limits.jerk.tolist()
    return inp


def _calculate(inp: InputParameter, what: str) -> Trajectory:
    """ruckig's trajectory for `inp`, or `PlanningError`. ruckig reports failures as result codes,
    as exceptions (`RuckigError`, which derives from no standard error) or as codes its own enum
    lacks (e.g. -101): every one of them becomes a `PlanningError` naming `what`."""
    trajectory = Trajectory(inp.degrees_of_freedom)
    try:
        result = Ruckig(inp.degrees_of_freedom).calculate(inp, trajectory)
        finished = result in (Result.Working, Result.Finished)
        name = getattr(result, "name", str(result))
    except Exception as exc:
        detail = " ".join(str(exc).split())  # ruckig's messages start with a line break
        raise PlanningError(f"{what}: no trajectory ({detail})") from exc
    if not finished:
        raise PlanningError(f"{what}: no trajectory ({name})")
    if not np.isfinite(trajectory.duration):
        raise PlanningError(f"{what}: no trajectory (duration {trajectory.duration})")
    return trajectory


class _RuckigMotion(Motion):
    def __init__(self, trajectory: Trajectory) -> None:
        self._trajectory = trajectory
        self.duration = float(trajectory.duration)
        self._table: RuckigPieces | None = None

    def sample(self, t: float) -> Setpoint:
        p, v, a = self._trajectory.at_time(min(max(t, 0.0), self.duration))
        return Setpoint(np.array(p), np.array(v), np.array(a))

    def positions(self, times: Array) -> Array:
        """The positions (k, n) at each of the k `times` (s, clamped to [0, duration]), all at
        once (`RuckigPieces`, equal to `sample` to rounding): for checking the whole motion
        before the seam (the daemon's collision checks)."""
        return self._pieces().positions(times)

    def speed_bounds(self, pieces: int) -> tuple[Array, Array]:
        """(times (m + 1,), bounds (m, n)): each joint's largest |q̇| between consecutive times,
        over at least `pieces` equal parts of the motion (`RuckigPieces.speed_bounds`)."""
        return self._pieces().speed_bounds(pieces)

    def _pieces(self) -> RuckigPieces:
        if self._table is None:  # built on the daemon's first use; the loop never needs it
            self._table = RuckigPieces(self._trajectory)
        return self._table


class JointMotion(_RuckigMotion):
    """Synchronised, time-optimal (under the limits) move from `start` to `target` at rest.

    Phase synchronisation: when it is possible (always from rest, and whenever the start's
    velocity and acceleration point along the move) every joint covers the same fraction of its
    way at every instant, so the motion is the straight line from `start` to `target` in joint
    space; otherwise ruckig falls back to time synchronisation (every joint arrives together)."""

    def __init__(self, start: Setpoint, target: Array, limits: MotionLimits) -> None:
        if target.shape != start.position.shape or not np.isfinite(target).all():
            raise PlanningError(f"target {target.tolist()} must be {start.position.size} numbers")
        inp = _ruckig_input(start, limits.covering(start))
        inp.synchronization = Synchronization.Phase
        inp.target_position = target.tolist()
        inp.target_velocity = [0.0] * target.size
        inp.target_acceleration = [0.0] * target.size
        super().__init__(_calculate(inp, "joint motion"))
        self.target = target.copy()


class StopMotion(_RuckigMotion):
    """Each joint decelerates to rest as fast as its limits allow, then holds."""

    def __init__(self, start: Setpoint, limits: MotionLimits) -> None:
        inp = _ruckig_input(start, limits)
        inp.control_interface = ControlInterface.Velocity
        inp.synchronization = Synchronization.No
        inp.target_velocity = [0.0] * start.position.size
        inp.target_acceleration = [0.0] * start.position.size
        # A start beyond the velocity limit (it cannot be: the limiter forbids it) would make
        # ruckig refuse; clip so that a stop is always possible.
        inp.current_velocity = np.clip(start.velocity, -limits.velocity, limits.velocity).tolist()
        super().__init__(_calculate(inp, "stop"))
        self.target = np.array(self._trajectory.at_time(self.duration)[0])


class Hold(Motion):
    """Hold a position."""

    def __init__(self, position: Array) -> None:
        self.duration = 0.0
        self.target = position.copy()
        self._setpoint = Setpoint.at_rest(position)

    def sample(self, t: float) -> Setpoint:
        return self._setpoint


@dataclass(frozen=True, slots=True)
class TimedPath:
    """A joint path and the bounds of its time scaling, planned before it reaches the loop
    (`plan_path`): the loop turns it into a `PathMotion` in microseconds.

    waypoints: (m, n), m ≥ 2, samples of the path at uniform steps of s ∈ [0, 1];
    s_velocity, s_acceleration, s_jerk: bounds of ṡ (1/s), s̈ (1/s²) and s⃛ (1/s³) that keep
    every joint within its limits along the path.
    """

    waypoints: Array
    s_velocity: float
    s_acceleration: float
    s_jerk: float


def plan_path(
    waypoints: Array, limits: MotionLimits, rate_limit: float = float("inf")
) -> TimedPath:
    """The time-scaling bounds of a path through `waypoints` (see `PathMotion`) under `limits`;
    `rate_limit` (1/s) caps ṡ further, e.g. from a Cartesian speed limit. Raises `PlanningError`
    for fewer than 2 finite waypoints. Costs milliseconds for a few hundred waypoints: it runs
    before the seam, never inside a tick."""
    if waypoints.ndim != 2 or waypoints.shape[0] < 2 or not np.all(np.isfinite(waypoints)):
        raise PlanningError("a path needs at least 2 finite waypoints")
    d1, d2 = _derivative_bounds(waypoints)
    s_velocity = float(np.min(limits.velocity / np.maximum(d1, 1e-12)))
    # Split the acceleration budget: half for q' s̈, half for q'' ṡ² at the top speed.
    s_velocity = min(
        s_velocity, float(np.min(np.sqrt(0.5 * limits.acceleration / np.maximum(d2, 1e-12))))
    )
    s_velocity = min(s_velocity, rate_limit)
    s_acceleration = float(np.min(0.5 * limits.acceleration / np.maximum(d1, 1e-12)))
    s_jerk = float(np.min(limits.jerk / np.maximum(d1, 1e-12))) * 0.5
    return TimedPath(waypoints.copy(), s_velocity, s_acceleration, s_jerk)


def path_positions(waypoints: Array, s: Array) -> Array:
    """The positions (k, n) of `PathMotion`'s curve through `waypoints` at the k values of the
    path parameter `s` in [0, 1]."""
    return _Hermite(waypoints).many(np.asarray(s, dtype=float))[0]


def path_speed_bounds(waypoints: Array) -> tuple[Array, Array]:
    """(s (m,), bounds (m - 1, n)): the largest |dq/ds| per joint on each segment of
    `PathMotion`'s curve through the m `waypoints`, between their values of s, exactly (to
    rounding): on a segment dq/ds is a parabola in s (the curve is cubic), largest at an end or
    at its vertex."""
    curve = _Hermite(waypoints)
    segments = np.arange(curve.segments)
    _, dq0, ddq0 = curve._combine(segments, np.zeros((curve.segments, 1)))
    _, dq1, ddq1 = curve._combine(segments, np.ones((curve.segments, 1)))
    s = np.linspace(0.0, 1.0, curve.segments + 1)
    ends = np.abs(np.stack([dq0, dq1])).max(axis=0)
    crossing = ddq0 * ddq1 < 0.0
    with np.errstate(divide="ignore", invalid="ignore"):  # only where the ends' signs differ
        vertex = dq0 - ddq0 * ddq0 * np.diff(s)[:, None] / (2.0 * (ddq1 - ddq0))
    return s, np.where(crossing, np.maximum(ends, np.abs(vertex)), ends)


def _derivative_bounds(waypoints: Array) -> tuple[Array, Array]:
    """The largest |dq/ds| and |d²q/ds²| per joint, sampled densely along the path."""
    curve = _Hermite(waypoints)
    _, dq, ddq = curve.many(np.linspace(0.0, 1.0, 8 * curve.segments + 1))
    # Sampling can miss the exact maximum between samples: keep a margin.
    return np.abs(dq).max(axis=0) * 1.05, np.abs(ddq).max(axis=0) * 1.05


class PathMotion(Motion):
    """Follow a `TimedPath` — samples of a path at uniform steps of its parameter s ∈ [0, 1] —
    starting and ending at rest.

    q(s) is a cubic Hermite (Catmull-Rom) interpolation of the waypoints, hence C¹. s(t) is a
    jerk-limited 1-DOF profile within the path's bounds, which keep every joint within its
    limits: q̇ = q'(s) ṡ and q̈ = q'(s) s̈ + q''(s) ṡ², bounded with the largest |q'| and |q''|
    along the path (`plan_path`).
    """

    def __init__(self, path: TimedPath) -> None:
        waypoints = path.waypoints
        if waypoints.ndim != 2 or waypoints.shape[0] < 2 or not np.all(np.isfinite(waypoints)):
            raise PlanningError("a path needs at least 2 finite waypoints")
        bounds = np.array([path.s_velocity, path.s_acceleration, path.s_jerk])
        if not np.all(np.isfinite(bounds) & (bounds > 0.0)):
            raise PlanningError(f"path time scaling bounds {bounds.tolist()} must be > 0, finite")
        self._curve = _Hermite(waypoints)
        self.target = waypoints[-1].copy()
        inp = _ruckig_input(
            Setpoint.at_rest(np.zeros(1)),
            MotionLimits(bounds[:1], bounds[1:2], bounds[2:]),
        )
        inp.target_position = [1.0]
        inp.target_velocity = [0.0]
        inp.target_acceleration = [0.0]
        self._profile = _calculate(inp, "path time scaling")
        self.duration = float(self._profile.duration)

    def sample(self, t: float) -> Setpoint:
        s, s_dot, s_ddot = (x[0] for x in self._profile.at_time(min(max(t, 0.0), self.duration)))
        q, dq, ddq = self._curve.at(s)
        return Setpoint(q, dq * s_dot, dq * s_ddot + ddq * s_dot * s_dot)


class _Hermite:
    """The Catmull-Rom curve through waypoints (m, n) at uniform steps of s ∈ [0, 1]."""

    def __init__(self, waypoints: Array) -> None:
        self._q = waypoints
        self.segments = waypoints.shape[0] - 1
        self._tangents = self._catmull_rom_tangents(waypoints)

    @staticmethod
    def _catmull_rom_tangents(q: Array) -> Array:
        """dq/du per segment parameter u ∈ [0, 1] at each waypoint (one-sided at the ends)."""
        tangents = np.empty_like(q)
        tangents[1:-1] = 0.5 * (q[2:] - q[:-2])
        tangents[0] = q[1] - q[0]
        tangents[-1] = q[-1] - q[-2]
        return tangents

    def at(self, s: float) -> tuple[Array, Array, Array]:
        """q, dq/ds, d²q/ds² at s ∈ [0, 1] (per tick: plain floats for the basis, fast)."""
        x = min(max(s, 0.0), 1.0) * self.segments
        i = min(int(x), self.segments - 1)
        return self._combine(i, x - i)

    def many(self, s: Array) -> tuple[Array, Array, Array]:
        """q, dq/ds, d²q/ds² (k × n) at each of the k values of `s` in [0, 1], at once."""
        x = np.clip(s, 0.0, 1.0) * self.segments
        i = np.minimum(x.astype(np.intp), self.segments - 1)
        return self._combine(i, (x - i)[:, None])

    def _combine(self, i: Any, u: Any) -> tuple[Array, Array, Array]:
        """The cubic Hermite basis at u ∈ [0, 1] of segment(s) i (a float and an index, or
        arrays of them) applied to the segment's end points and tangents."""
        p0, p1, m0, m1 = self._q[i], self._q[i + 1], self._tangents[i], self._tangents[i + 1]
        h00, h10, h01, h11 = (
            2 * u**3 - 3 * u**2 + 1,
            u**3 - 2 * u**2 + u,
            -2 * u**3 + 3 * u**2,
            u**3 - u**2,
        )
        d00, d10, d01, d11 = (
            6 * u**2 - 6 * u,
            3 * u**2 - 4 * u + 1,
            -6 * u**2 + 6 * u,
            3 * u**2 - 2 * u,
        )
        e00, e10, e01, e11 = 12 * u - 6, 6 * u - 4, -12 * u + 6, 6 * u - 2
        n = self.segments
        q = h00 * p0 + h10 * m0 + h01 * p1 + h11 * m1
        dq = (d00 * p0 + d10 * m0 + d01 * p1 + d11 * m1) * n
        ddq = (e00 * p0 + e10 * m0 + e01 * p1 + e11 * m1) * n * n
        return q, dq, ddq
