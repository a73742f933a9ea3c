"""Timed joint trajectories (the ``trajectory`` goal): waypoints with times, interpolated C² and
time-scaled within the velocity, acceleration and jerk limits before they reach the loop.

- `plan_trajectory` (before the process seam, milliseconds for a thousand points) turns the
  goal's points into the knots of a `TimedTrajectory`: positions, velocities and accelerations at
  each time. Without velocities they come from the clamped cubic spline through the positions
  (the smoothest C² curve through them); with velocities, accelerations are their central
  differences. Both ends are at rest (velocity and acceleration 0). Time is then stretched by one
  factor k ≥ 1/speed, the smallest that keeps the curve's largest |q̇|, |q̈| and |q⃛| (sampled
  densely, with a margin) within the limits: k, k² and k³ divide them.
- `TrajectoryMotion` (in the loop, microseconds) first moves from the loop's commanded state to
  the first point with ruckig (`JointMotion`, the jerk-limited move every joints goal uses), which
  ends there at rest, then follows the quintic Hermite curve through the knots: positions,
  velocities and accelerations are continuous at every knot, so the jerk is bounded and nothing
  jumps, neither at the start nor between the approach and the trajectory.

Arrays are in q order: rad (m), rad/s, rad/s²; times in s from the first point.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from armd.motion.trajectory import JointMotion, Motion, MotionLimits, PlanningError, Setpoint

__all__ = [
    "QuinticCurve",
    "TimedTrajectory",
    "TrajectoryMotion",
    "TrajectoryPlan",
    "plan_trajectory",
]

Array = NDArray[np.float64]
_SAMPLES_PER_SEGMENT = 16  # dense samples for the largest derivatives
_MARGIN = 1.05  # sampling can miss the exact maximum between samples (as `plan_path`)
_ROUNDING = 1e-9  # rad: positions between knots may round past a limit by this much
# A quartic Σ g_m τ^m about τ0 + x: d_j = Σ_m C(m, j) τ0^(m - j) g_m (row j, column m); and its
# Bernstein coefficients on u ∈ [0, 1] from the power ones e_j: b_r = Σ_j C(r, j) / C(4, j) e_j.
_TAYLOR_SHIFT = np.array([[math.comb(m, j) for m in range(5)] for j in range(5)], dtype=float)
_SHIFT_POWER = np.maximum(np.arange(5.0)[None, :] - np.arange(5.0)[:, None], 0.0)
_TO_BERNSTEIN = np.array(
    [[math.comb(r, j) / math.comb(4, j) for j in range(5)] for r in range(5)], dtype=float
)


@dataclass(frozen=True, slots=True)
class TimedTrajectory:
    """The knots of a time-scaled trajectory, as the loop follows it (after an approach from its
    commanded state to the first position under `approach` limits).

    times: (m,), 0 first, strictly increasing; positions, velocities, accelerations: (m, n).
    """

    times: Array
    positions: Array
    velocities: Array
    accelerations: Array
    approach: MotionLimits

    @property
    def duration(self) -> float:
        return float(self.times[-1])


@dataclass(frozen=True, slots=True)
class TrajectoryPlan:
    """`plan_trajectory`'s result: the trajectory and how much the limits slowed it beyond the
    requested speed (1: not at all), with the limit that decided it."""

    trajectory: TimedTrajectory
    slowdown: float
    binding: str | None  # e.g. "the acceleration limit of elbow_joint"

    def note(self) -> str | None:
        """The accepted status's reason: how much the trajectory was slowed, and why."""
        if self.binding is None:
            return None
        return f"time-scaled ×{self.slowdown:.2f} to stay within {self.binding}"


def plan_trajectory(
    times: Array,
    positions: Array,
    velocities: Array | None,
    limits: MotionLimits,
    speed: float,
    bounds: tuple[Array, Array],
    joint_names: tuple[str, ...],
) -> TrajectoryPlan:
    """Knots through `positions` (m, n) at `times` (m,), stretched in time by 1/`speed` at least
    and as much more as `limits` require. Raises `PlanningError` when the points are not
    m ≥ 2 strictly increasing finite times and finite positions, or when the curve between two
    points leaves `bounds` (lower, upper) even though the points are within them."""
    times = np.asarray(times, dtype=float)
    positions = np.asarray(positions, dtype=float)
    m = times.shape[0]
    if m < 2 or positions.shape[0] != m or positions.ndim != 2:
        raise PlanningError("a trajectory needs at least 2 points of the same joints")
    if not (np.all(np.isfinite(times)) and np.all(np.isfinite(positions))):
        raise PlanningError("a trajectory's times and positions must be finite")
    with np.errstate(over="ignore"):  # 1e308 apart: an infinite span, refused just below
        times = times - times[0]
    if not (np.all(np.diff(times) > 0.0) and np.isfinite(times[-1])):
        raise PlanningError("a trajectory's times must be strictly increasing, finite spans")
    if not 0.0 < speed <= 1.0:
        raise PlanningError(f"speed: {speed} must be in (0, 1]")
    with np.errstate(all="ignore"):  # overflows become infinities, refused just below
        curve = QuinticCurve.through(times, positions, velocities)
        q, dq, ddq, dddq = curve.dense()
    if not all(np.all(np.isfinite(x)) for x in (q, dq, ddq, dddq)):  # e.g. 1e308 apart
        raise PlanningError("the curve through the points overflows: points too far apart")
    _check_bounds(q, bounds, joint_names, curve.segment_of_sample())
    scale, binding = _time_scale(dq, ddq, dddq, limits, speed, joint_names)
    trajectory = TimedTrajectory(
        times * scale,
        positions.copy(),
        curve.velocities / scale,
        curve.accelerations / scale**2,
        limits.scaled(speed),
    )
    return TrajectoryPlan(trajectory, scale * speed, binding)


def _check_bounds(
    q: Array, bounds: tuple[Array, Array], joint_names: tuple[str, ...], segment: Array
) -> None:
    lower, upper = bounds
    outside = (q < lower - _ROUNDING) | (q > upper + _ROUNDING)
    if not np.any(outside):
        return
    sample, joint = (int(i) for i in np.argwhere(outside)[0])
    i = int(segment[sample])
    raise PlanningError(
        f"points[{i}]..points[{i + 1}]: the curve between them takes {joint_names[joint]} to "
        f"{q[sample, joint]:.4f}, outside its limits [{lower[joint]:g}, {upper[joint]:g}]; "
        "add points there or keep them further from the limit"
    )


def _time_scale(
    dq: Array,
    ddq: Array,
    dddq: Array,
    limits: MotionLimits,
    speed: float,
    joint_names: tuple[str, ...],
) -> tuple[float, str | None]:
    """The time stretch k ≥ 1/speed that brings the largest derivatives within the limits, and
    the limit that decided it when it is more than 1/speed."""
    ratios = {
        "velocity": np.abs(dq).max(axis=0) * _MARGIN / limits.velocity,
        "acceleration": np.sqrt(np.abs(ddq).max(axis=0) * _MARGIN / limits.acceleration),
        "jerk": np.cbrt(np.abs(dddq).max(axis=0) * _MARGIN / limits.jerk),
    }
    kind, joint, needed = max(
        ((kind, int(np.argmax(r)), float(np.max(r))) for kind, r in ratios.items()),
        key=lambda item: item[2],
    )
    if not math.isfinite(needed):
        raise PlanningError(f"no time scaling keeps the trajectory within the {kind} limits")
    if needed <= 1.0 / speed:
        return 1.0 / speed, None
    return needed, f"the {kind} limit of {joint_names[joint]}"


def _clamped_spline(times: Array, positions: Array) -> tuple[Array, Array]:
    """Velocities and accelerations at the knots of the cubic spline through `positions` that
    starts and ends at rest (clamped: end velocities 0). The accelerations at both ends are then
    set to 0 too: the quintic through the knots starts and ends at rest, as the approach does."""
    h = np.diff(times)[:, None]
    slope = np.diff(positions, axis=0) / h
    m = times.shape[0]
    # The tridiagonal system for the second derivatives M (Thomas algorithm, all joints at once).
    diag = np.empty((m, 1))
    diag[0], diag[-1] = 2.0 * h[0], 2.0 * h[-1]
    diag[1:-1] = 2.0 * (h[:-1] + h[1:])
    rhs = np.empty_like(positions)
    rhs[0] = 6.0 * slope[0]
    rhs[-1] = -6.0 * slope[-1]
    rhs[1:-1] = 6.0 * (slope[1:] - slope[:-1])
    # Symmetric: h[i] couples M_i and M_{i+1} in rows i and i + 1.
    for i in range(1, m):
        w = h[i - 1] / diag[i - 1]
        diag[i] = diag[i] - w * h[i - 1]
        rhs[i] = rhs[i] - w * rhs[i - 1]
    second = np.empty_like(positions)
    second[-1] = rhs[-1] / diag[-1]
    for i in range(m - 2, -1, -1):
        second[i] = (rhs[i] - h[i] * second[i + 1]) / diag[i]
    velocities = np.zeros_like(positions)
    velocities[:-1] = slope - h * (2.0 * second[:-1] + second[1:]) / 6.0
    velocities[0] = velocities[-1] = 0.0
    second[0] = second[-1] = 0.0
    return velocities, second


def _central_differences(times: Array, velocities: Array) -> Array:
    """Accelerations at the knots from given velocities: central differences inside, 0 at the
    ends (at rest)."""
    accelerations = np.zeros_like(velocities)
    span = (times[2:] - times[:-2])[:, None]
    accelerations[1:-1] = (velocities[2:] - velocities[:-2]) / span
    return accelerations


class QuinticCurve:
    """The quintic Hermite curve through knots (time, position, velocity, acceleration): on each
    segment the polynomial of degree 5 that matches both ends' three values."""

    def __init__(
        self, times: Array, positions: Array, velocities: Array, accelerations: Array
    ) -> None:
        self.times = times
        self.velocities = velocities
        self.accelerations = accelerations
        h = np.diff(times)[:, None]
        p0, p1 = positions[:-1], positions[1:]
        v0, v1 = velocities[:-1], velocities[1:]
        a0, a1 = accelerations[:-1], accelerations[1:]
        dp = p1 - p0
        # Coefficients c0..c5 (segments, 6, n) of q(τ) = Σ c_k τ^k, τ ∈ [0, h].
        self.coefficients = np.stack(
            (
                p0,
                v0,
                a0 / 2.0,
                (20.0 * dp - (8.0 * v1 + 12.0 * v0) * h - (3.0 * a0 - a1) * h**2) / (2.0 * h**3),
                (-30.0 * dp + (14.0 * v1 + 16.0 * v0) * h + (3.0 * a0 - 2.0 * a1) * h**2)
                / (2.0 * h**4),
                (12.0 * dp - 6.0 * (v1 + v0) * h - (a0 - a1) * h**2) / (2.0 * h**5),
            ),
            axis=1,
        )
        # The same, power first (6, segments, n): `take` gathers many segments fastest.
        self._by_power = np.ascontiguousarray(self.coefficients.transpose(1, 0, 2))

    @classmethod
    def through(cls, times: Array, positions: Array, velocities: Array | None) -> QuinticCurve:
        """The curve through `positions` (m, n) at `times` (m,), at rest at both ends: with the
        clamped cubic spline's velocities and accelerations, or with the given velocities and
        their central differences (see the module docstring)."""
        if velocities is None:
            velocities, accelerations = _clamped_spline(times, positions)
        else:
            velocities = np.asarray(velocities, dtype=float).copy()
            velocities[0] = velocities[-1] = 0.0
            accelerations = _central_differences(times, velocities)
        return cls(times, positions, velocities, accelerations)

    def positions_at(self, t: Array) -> Array:
        """q (k, n) at each of the k times `t` (clamped to the curve's span), at once."""
        times = self.times
        t = np.clip(t, 0.0, float(times[-1]))
        i = np.minimum(np.searchsorted(times, t, side="right") - 1, times.shape[0] - 2)
        tau = (t - times[i])[:, None]
        c = self._by_power.take(i, axis=1)  # (6, k, n)
        q: Array = c[0] + tau * (c[1] + tau * (c[2] + tau * (c[3] + tau * (c[4] + tau * c[5]))))
        return q

    def speed_bounds(self, pieces: int) -> tuple[Array, Array]:
        """(times (m + 1,), bounds (m, n)): a partition of the curve's span into at least
        `pieces` equal parts, cut further at every knot, and a bound of each joint's |q̇| within
        each part: the largest Bernstein coefficient of q̇ (a quartic) over the part, which holds
        the quartic in its convex hull (close to the true largest |q̇| on short parts)."""
        knots = self.times
        times = np.union1d(np.linspace(0.0, float(knots[-1]), max(pieces, 1) + 1), knots)
        start = times[:-1]
        i = np.minimum(np.searchsorted(knots, start, side="right") - 1, knots.shape[0] - 2)
        tau = (start - knots[i])[:, None, None]
        g = self.coefficients[i, 1:] * np.arange(1.0, 6.0)[None, :, None]  # q̇'s, (k, 5, n)
        # q̇(start + h u) = Σ_j d_j (h u)^j: the quartic's Taylor coefficients d at `start`.
        shift = _TAYLOR_SHIFT[None] * tau ** _SHIFT_POWER[None]  # (k, 5, 5)
        scaled = (shift @ g) * np.diff(times)[:, None, None] ** np.arange(5.0)[None, :, None]
        bernstein = _TO_BERNSTEIN @ scaled
        return times, np.abs(bernstein).max(axis=1)

    def at(self, t: float) -> tuple[Array, Array, Array]:
        """q, q̇, q̈ at time t (clamped to the curve's span)."""
        times = self.times
        t = min(max(t, 0.0), float(times[-1]))
        i = min(int(np.searchsorted(times, t, side="right")) - 1, times.shape[0] - 2)
        c = self.coefficients[i]
        tau = t - float(times[i])
        q = c[0] + tau * (c[1] + tau * (c[2] + tau * (c[3] + tau * (c[4] + tau * c[5]))))
        dq = c[1] + tau * (2 * c[2] + tau * (3 * c[3] + tau * (4 * c[4] + tau * 5 * c[5])))
        ddq = 2 * c[2] + tau * (6 * c[3] + tau * (12 * c[4] + tau * 20 * c[5]))
        return q, dq, ddq

    def dense(self) -> tuple[Array, Array, Array, Array]:
        """q, q̇, q̈, q⃛ at `_SAMPLES_PER_SEGMENT` + 1 points of every segment (rows)."""
        h = np.diff(self.times)
        u = np.linspace(0.0, 1.0, _SAMPLES_PER_SEGMENT + 1)
        tau = (h[:, None] * u[None, :])[:, :, None]  # (segments, samples, 1)
        c = self.coefficients[:, None, :, :]  # (segments, 1, 6, n)
        n = self.coefficients.shape[2]

        def derivative(order: int) -> Array:
            total = np.zeros((h.shape[0], u.shape[0], n))
            for k in range(order, 6):
                factor = float(np.prod(np.arange(k - order + 1, k + 1)))
                total += factor * c[:, :, k] * tau ** (k - order)
            return total.reshape(-1, n)

        return derivative(0), derivative(1), derivative(2), derivative(3)

    def segment_of_sample(self) -> Array:
        """The segment of each row of `dense`."""
        return np.repeat(np.arange(self.times.shape[0] - 1), _SAMPLES_PER_SEGMENT + 1)


class TrajectoryMotion(Motion):
    """The approach from the commanded state `start` to the first point (ruckig, at rest there),
    then the trajectory's curve."""

    def __init__(self, start: Setpoint, trajectory: TimedTrajectory) -> None:
        self._approach = JointMotion(start, trajectory.positions[0], trajectory.approach)
        self._curve = QuinticCurve(
            trajectory.times,
            trajectory.positions,
            trajectory.velocities,
            trajectory.accelerations,
        )
        self.approach_s = self._approach.duration
        self.duration = self.approach_s + trajectory.duration
        self.target = trajectory.positions[-1].copy()

    def sample(self, t: float) -> Setpoint:
        if t < self.approach_s:
            return self._approach.sample(t)
        q, dq, ddq = self._curve.at(t - self.approach_s)
        return Setpoint(q, dq, ddq)
