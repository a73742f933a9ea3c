"""ruckig's trajectories evaluated at many times at once, in numpy, for the daemon's checks.

A ruckig `Trajectory` (one section: armd never gives intermediate waypoints) is, per joint, a
chain of constant-jerk pieces: an optional brake pre-trajectory of two pieces (when the start
exceeds or will exceed a limit), the profile's seven phases, then a constant acceleration after
its end (a joint that arrives before the others, without time synchronisation, holds there).
ruckig's Python binding exposes every piece (`Trajectory.profiles`: per phase `t`, `j` and the
start states `p`, `v`, `a`; the brake pre-trajectory in `brake`); `RuckigPieces` reads them once
and evaluates them as `Trajectory.at_time` does (the piece each joint is in, the cubic
``p + τ (v + τ (a / 2 + τ j / 6))`` from its start), vectorised over times and joints. It
agrees with `at_time` to rounding (within 1e-9 on thousands of random problems:
tests/armd/motion/test_trajectory.py).

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
# Pieces per joint, in time order: the brake pre-trajectory's two, the profile's seven phases, then
# the constant acceleration after its end.
_PIECES = 10


class RuckigPieces:
    """The constant-jerk pieces of a one-section ruckig `trajectory`, per joint."""

    def __init__(self, trajectory: Trajectory) -> None:
        sections = trajectory.profiles
        if len(sections) != 1:
            raise ValueError(f"ruckig trajectory of {len(sections)} sections: only one is sampled")
        profiles = sections[0]
        n = len(profiles)
        self.duration = float(trajectory.duration)
        # Each piece's start time (s since the motion's start; -inf: a brake piece that is not
        # there), and its start state and jerk as the polynomial p + v τ + a/2 τ² + j/6 τ³.
        self._starts = np.full((n, _PIECES), -np.inf)
        table = np.zeros((n, _PIECES, 4))
        for d, profile in enumerate(profiles):
            brake = profile.brake
            begin = brake.duration if brake.duration > 0.0 else 0.0
            if brake.duration > 0.0:  # ruckig integrates it only then
                self._starts[d, :2] = (0.0, brake.t[0])
                table[d, :2] = np.column_stack([brake.p, brake.v, brake.a, brake.j])
            t_sum = np.cumsum(profile.t)  # sequential sums, as ruckig's t_sum
            self._starts[d, 2] = begin
            self._starts[d, 3:] = begin + t_sum
            table[d, 2:, 0], table[d, 2:, 1], table[d, 2:, 2] = profile.p, profile.v, profile.a
            table[d, 2:-1, 3] = profile.j  # after the end: jerk 0
        scaled = table.reshape(n * _PIECES, 4) * np.array([1.0, 1.0, 0.5, 1.0 / 6.0])
        self._table = np.ascontiguousarray(scaled.T)  # (4, pieces): `take` gathers fastest
        self._rows = np.arange(n) * _PIECES

    def positions(self, times: Array) -> Array:
        """Positions (k, n) at the k `times` (s, clamped to [0, duration])."""
        c, tau = self._at(times)
        q: Array = c[0] + tau * (c[1] + tau * (c[2] + tau * c[3]))
        return q

    def states(self, times: Array) -> tuple[Array, Array, Array]:
        """Positions, velocities and accelerations (k, n) at the k `times` (clamped to
        [0, duration]), as `Trajectory.at_time` computes them one time at a time."""
        c, tau = self._at(times)
        q = c[0] + tau * (c[1] + tau * (c[2] + tau * c[3]))
        v = c[1] + tau * (2.0 * c[2] + tau * 3.0 * c[3])
        a = 2.0 * c[2] + tau * 6.0 * c[3]
        return q, v, a

    def _at(self, times: Array) -> tuple[Array, Array]:
        """The pieces' polynomials (4, k, n) at `times` and the times since their starts (k, n):
        per joint, the last piece started by then (ruckig's choice, zero-length phases
        skipped)."""
        t = np.clip(np.asarray(times, dtype=float), 0.0, self.duration)
        index = np.empty((t.shape[0], self._starts.shape[0]), dtype=np.intp)
        for d, starts in enumerate(self._starts):
            index[:, d] = np.searchsorted(starts, t, side="right") - 1
        flat = index + self._rows
        return self._table.take(flat, axis=1), t[:, None] - self._starts.take(flat)

    def breaks(self) -> Array:
        """Every time in (0, duration) where some joint changes piece, sorted."""
        starts = self._starts.ravel()
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
