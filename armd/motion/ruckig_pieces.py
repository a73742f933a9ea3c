"""ruckig's trajectories evaluated at many times at once, in numpy, for the daemon's checks.

A ruckig `Trajectory` (one section: armd never gives intermediate waypoints) is, per joint, a
chain of constant-jerk pieces: an optional brake pre-trajectory of two pieces (when the start
exceeds or will exceed a limit), the profile's seven phases, then a constant acceleration after
its end (a joint that arrives before the others, without time synchronisation, holds there).
ruckig's Python binding exposes every piece (`Trajectory.profiles`: per phase `t`, `j` and the
start states `p`, `v`, `a`; the brake pre-trajectory in `brake`); `RuckigPieces` reads them once
and evaluates them as `Trajectory.at_time` does (same piece chosen, same time offsets, same
integration ``p + t (v + t (a / 2 + t j / 6))``), vectorised over times and joints. It agrees
with `at_time` to rounding (tests/armd/motion/test_trajectory.py).

`speed_bounds` gives, per piece of a partition of the motion's time, each joint's exact largest
|q̇|: within a constant-jerk piece the velocity is a parabola, so its largest magnitude is at an
end or where the acceleration crosses zero.

Arrays are in q order: rad (m), rad/s, rad/s²; times in s since the motion's start.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from ruckig import Trajectory

__all__ = ["RuckigPieces", "speed_bounds_from_states"]

Array = NDArray[np.float64]
_MAIN = 8  # columns 0..6: the profile's phases, 7: after its end (jerk 0); then 2 brake pieces
_COLUMNS = _MAIN + 2


class RuckigPieces:
    """The constant-jerk pieces of a one-section ruckig `trajectory`, per joint."""

    def __init__(self, trajectory: Trajectory) -> None:
        sections = trajectory.profiles
        if len(sections) != 1:
            raise ValueError(f"a trajectory of {len(sections)} sections (waypoints are not used)")
        profiles = sections[0]
        n = len(profiles)
        self.duration = float(trajectory.duration)
        self._brake = np.zeros((n, 2))  # brake duration, duration of its first piece
        self._t_sum = np.zeros((n, 7))
        # Start state and jerk of every piece, per joint: (n, _COLUMNS) each.
        self._p, self._v, self._a, self._j = (np.zeros((n, _COLUMNS)) for _ in range(4))
        self._offset = np.zeros((n, _COLUMNS))  # piece start in its own time frame
        for d, profile in enumerate(profiles):
            brake = profile.brake
            self._brake[d] = (brake.duration, brake.t[0])
            t_sum = np.cumsum(profile.t)  # sequential sums, as ruckig's t_sum
            self._t_sum[d] = t_sum
            self._offset[d, 1:_MAIN] = t_sum
            self._offset[d, _MAIN + 1] = brake.t[0]
            self._p[d, :_MAIN] = profile.p
            self._v[d, :_MAIN] = profile.v
            self._a[d, :_MAIN] = profile.a
            self._j[d, : _MAIN - 1] = profile.j
            self._p[d, _MAIN:] = brake.p
            self._v[d, _MAIN:] = brake.v
            self._a[d, _MAIN:] = brake.a
            self._j[d, _MAIN:] = brake.j
        self._rows = np.arange(n) * _COLUMNS

    def states(self, times: Array) -> tuple[Array, Array, Array]:
        """Positions, velocities and accelerations (k, n) at the k `times` (clamped to
        [0, duration]), as `Trajectory.at_time` computes them one time at a time."""
        t = np.clip(np.asarray(times, dtype=float), 0.0, self.duration)[:, None]
        brake, first = self._brake[:, 0], self._brake[:, 1]
        braking = brake > 0.0
        main = np.where(braking, t - brake, t)
        index = (main[:, :, None] >= self._t_sum[None]).sum(axis=2)  # upper_bound in t_sum
        in_brake = braking & (t < brake)
        index = np.where(in_brake, _MAIN + (t >= first), index)
        local = np.where(in_brake, t, main)
        ended = t >= self.duration  # ruckig: from the end state, with one offset
        index = np.where(ended, _MAIN - 1, index)
        flat = index + self._rows
        offset = self._offset.ravel()[flat]
        local = np.where(ended, t - (brake + self._t_sum[:, 6]), local - offset)
        p0, v0 = self._p.ravel()[flat], self._v.ravel()[flat]
        a0, j = self._a.ravel()[flat], self._j.ravel()[flat]
        q = p0 + local * (v0 + local * (a0 / 2 + local * j / 6))
        v = v0 + local * (a0 + local * j / 2)
        a = a0 + local * j
        return q, v, a

    def breaks(self) -> Array:
        """Every time in (0, duration) where some joint changes piece, sorted."""
        brake = self._brake[:, :1]
        starts = np.concatenate([self._brake, brake + self._t_sum], axis=1).ravel()
        return np.unique(starts[(starts > 0.0) & (starts < self.duration)])

    def speed_bounds(self, pieces: int) -> tuple[Array, Array]:
        """(times (m + 1,), bounds (m, n)): a partition of [0, duration] into at least `pieces`
        equal parts (one of length 0 for a motion of none), cut further where a joint changes
        piece, and each joint's largest |q̇| within each part (rad/s or m/s, exact to
        rounding)."""
        grid = np.linspace(0.0, self.duration, max(pieces, 1) + 1)
        times = np.union1d(grid, self.breaks()) if self.duration > 0.0 else grid[[0, -1]]
        _, v, a = self.states(times)
        return times, speed_bounds_from_states(times, v, a)


def speed_bounds_from_states(times: Array, v: Array, a: Array) -> Array:
    """(m, n): the largest |q̇| per joint between consecutive `times` (m + 1,) of a motion whose
    jerk is constant between them, from its velocities and accelerations (m + 1, n) at them: the
    larger end, or the parabola's vertex where the acceleration changes sign in between."""
    v0, v1, a0, a1 = v[:-1], v[1:], a[:-1], a[1:]
    h = np.diff(times)[:, None]
    bound = np.maximum(np.abs(v0), np.abs(v1))
    crossing = a0 * a1 < 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        vertex = v0 - a0 * a0 * h / (2.0 * (a1 - a0))
    return np.where(crossing, np.maximum(bound, np.abs(vertex)), bound)
