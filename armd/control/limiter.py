"""The last gate before the drives: every setpoint is forced within the position, velocity and
acceleration limits, whatever the trajectory asked for.

Trajectories are planned within the limits, so in normal operation the limiter changes nothing;
it exists so that no bug upstream can ever command a joint out of bounds. Per tick of period dt:

1. velocity ``v = (p_wanted - p_prev) / dt``, clipped to ± velocity limit;
2. clipped so that the joint can still stop before a position bound at its acceleration limit
   (toward a bound at distance d, the braking curve of `braking_velocity`: the discrete-time form
   of ``sqrt(2 a d)``, which a joint riding it follows while slowing by exactly ``a dt`` per tick;
   the continuous curve would need up to twice the acceleration limit in the last ticks);
3. clipped to ``v_prev ± a dt`` (acceleration), unless step 2 demands harder braking — the position
   bound wins over the acceleration bound (a safety net: a joint that rides the curve from rest
   never needs it);
4. ``p = p_prev + v dt``, clipped into the position bounds.

Interventions (any clip that changed the request by more than a rounding tolerance) are counted.

A joint found outside its bounds when the limiter is reset (e.g. after a limit fault) may only move
back toward the allowed range: its bound on that side starts at the measured position and follows
the joint inward.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["SetpointLimiter", "braking_velocity"]

Array = NDArray[np.float64]
_TOLERANCE = 1e-9


def braking_velocity(distance: Array, acceleration: Array, dt: float) -> Array:
    """The fastest velocity (≥ 0) at which a joint may move for one tick toward a bound at
    `distance` and still stop at the bound by slowing down by at most ``acceleration · dt`` per
    tick (the discrete-time form of ``sqrt(2 a d)``). From it, the next tick's braking velocity is
    exactly ``acceleration · dt`` lower, so riding the curve never exceeds the limit.

    In units of ``a dt`` (velocity u) and ``a dt²`` (distance D): moving at u, then u - 1, u - 2,
    …, down to rest covers ``C(u) = (n + 1) u - n (n + 1) / 2`` with ``n = floor(u)``; this is its
    inverse, piecewise linear between ``C(n) = n (n + 1) / 2``. Infinite distances give infinity.
    """
    step = acceleration * dt
    with np.errstate(invalid="ignore", over="ignore"):
        d = distance / (step * dt)
        n = np.floor((np.sqrt(1.0 + 8.0 * d) - 1.0) / 2.0)
        u = (d + n * (n + 1.0) / 2.0) / (n + 1.0)
    return np.where(np.isfinite(d), u * step, np.inf)


class SetpointLimiter:
    """Stateful per-tick limiter; `reset` at the measured position before the first command."""

    def __init__(
        self, lower: Array, upper: Array, velocity: Array, acceleration: Array, period_s: float
    ) -> None:
        self.lower_limit = lower.copy()
        self.upper_limit = upper.copy()
        self.velocity_limit = velocity.copy()
        self.acceleration_limit = acceleration.copy()
        self._acceleration_twice = np.concatenate((acceleration, acceleration))
        self.dt = period_s
        self.lower = lower.copy()
        self.upper = upper.copy()
        self.position = np.zeros_like(lower)
        self.velocity = np.zeros_like(lower)
        self._resting = False
        self.interventions = 0
        self.resets = 0

    def reset(self, position: Array) -> None:
        """Start from rest at `position` (the measured one); widen a bound to include it if the
        joint is outside, so that holding it is allowed and only inward motion is."""
        self.resets += 1
        self.position = position.copy()
        self.velocity = np.zeros_like(position)
        self._resting = False  # one full pass first: it settles the bounds widened here
        self.lower = np.minimum(self.lower_limit, position)
        self.upper = np.maximum(self.upper_limit, position)

    def relieve(self, joint: int, position: float) -> tuple[Array, Array]:
        """Put `joint` at rest at `position` (where it is, when it cannot move: a stall), the
        other joints unchanged; the new (position, velocity). Bounds widen to include it. Like
        `reset`, for that joint: counted in `resets`."""
        self.resets += 1
        self.position = self.position.copy()
        self.velocity = self.velocity.copy()
        self.position[joint], self.velocity[joint] = position, 0.0
        self.lower = np.minimum(self.lower, self.position)
        self.upper = np.maximum(self.upper, self.position)
        self._resting = False
        return self.position, self.velocity

    def apply(self, wanted: Array, wanted_velocity: Array) -> tuple[Array, Array]:
        """(position, velocity feed-forward) to command for this tick's wanted state. The wanted
        velocity passes where the position passed unchanged; elsewhere the limited one does.

        Holding still (the wanted position is the one this limiter last returned, at rest) takes
        a fast path with the same result: the arrays returned are the limiter's own, never to be
        modified."""
        if wanted is self.position and self._resting and not wanted_velocity.any():
            return self.position, self.velocity
        dt, n = self.dt, self.position.shape[0]
        v_max = self.velocity_limit
        v = np.minimum(np.maximum((wanted - self.position) / dt, -v_max), v_max)
        # Both bounds at once (numpy's per-call cost dominates arrays of six joints).
        room = np.maximum(
            np.concatenate((self.upper - self.position, self.position - self.lower)), 0.0
        )
        braking = braking_velocity(room, self._acceleration_twice, dt)
        braking_up, braking_down = braking[:n], braking[n:]
        step = self.acceleration_limit * dt
        v_low = np.maximum(self.velocity - step, -braking_down)
        v_high = np.minimum(self.velocity + step, braking_up)
        # Braking toward a bound can demand more than the acceleration limit: position wins.
        v = np.minimum(
            np.maximum(v, np.minimum(v_low, braking_up)), np.maximum(v_high, -braking_down)
        )
        position = np.minimum(np.maximum(self.position + v * dt, self.lower), self.upper)
        velocity = (position - self.position) / dt
        changed = np.abs(position - wanted) > _TOLERANCE
        if changed.any():
            self.interventions += 1
        self.position = position
        self.velocity = velocity
        self._resting = not velocity.any()
        feed_forward = np.where(
            changed, velocity, np.minimum(np.maximum(wanted_velocity, -v_max), v_max)
        )
        # Bounds widened at reset follow the joint back inside and never widen again.
        self.lower = np.maximum(self.lower, np.minimum(self.lower_limit, position))
        self.upper = np.minimum(self.upper, np.maximum(self.upper_limit, position))
        return position, feed_forward
