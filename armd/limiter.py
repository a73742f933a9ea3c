"""The last gate before the drives: every setpoint is forced within the position, velocity and
acceleration limits, whatever the trajectory asked for.

Trajectories are planned within the limits, so in normal operation the limiter changes nothing;
it exists so that no bug upstream can ever command a joint out of bounds. Per tick of period dt:

1. velocity ``v = (p_wanted - p_prev) / dt``, clipped to ± velocity limit;
2. clipped so that the joint can still stop before a position bound at its acceleration limit
   (``|v| ≤ sqrt(2 a d)`` toward a bound at distance d);
3. clipped to ``v_prev ± a dt`` (acceleration), unless step 2 demands harder braking — the position
   bound wins over the acceleration bound;
4. ``p = p_prev + v dt``, clipped into the position bounds.

Interventions (any clip that changed the request by more than a rounding tolerance) are counted.

A joint found outside its bounds when the limiter is reset (e.g. after a limit fault) may only move
back toward the allowed range: its bound on that side starts at the measured position and follows
the joint inward.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["SetpointLimiter"]

Array = NDArray[np.float64]
_TOLERANCE = 1e-9


class SetpointLimiter:
    """Stateful per-tick limiter; `reset` at the measured position before the first command."""

    def __init__(
        self, lower: Array, upper: Array, velocity: Array, acceleration: Array, period_s: float
    ) -> None:
        self.lower_limit = lower.copy()
        self.upper_limit = upper.copy()
        self.velocity_limit = velocity.copy()
        self.acceleration_limit = acceleration.copy()
        self.dt = period_s
        self.lower = lower.copy()
        self.upper = upper.copy()
        self.position = np.zeros_like(lower)
        self.velocity = np.zeros_like(lower)
        self.interventions = 0
        self.resets = 0

    def reset(self, position: Array) -> None:
        """Start from rest at `position` (the measured one); widen a bound to include it if the
        joint is outside, so that holding it is allowed and only inward motion is."""
        self.resets += 1
        self.position = position.copy()
        self.velocity = np.zeros_like(position)
        self.lower = np.minimum(self.lower_limit, position)
        self.upper = np.maximum(self.upper_limit, position)

    def apply(self, wanted: Array, wanted_velocity: Array) -> tuple[Array, Array]:
        """(position, velocity feed-forward) to command for this tick's wanted state. The wanted
        velocity passes where the position passed unchanged; elsewhere the limited one does."""
        dt = self.dt
        v = (wanted - self.position) / dt
        v = np.clip(v, -self.velocity_limit, self.velocity_limit)
        braking_up = np.sqrt(
            2.0 * self.acceleration_limit * np.maximum(self.upper - self.position, 0.0)
        )
        braking_down = np.sqrt(
            2.0 * self.acceleration_limit * np.maximum(self.position - self.lower, 0.0)
        )
        v_low = np.maximum(self.velocity - self.acceleration_limit * dt, -braking_down)
        v_high = np.minimum(self.velocity + self.acceleration_limit * dt, braking_up)
        # Braking toward a bound can demand more than the acceleration limit: position wins.
        v = np.clip(v, np.minimum(v_low, braking_up), np.maximum(v_high, -braking_down))
        position = np.clip(self.position + v * dt, self.lower, self.upper)
        velocity = (position - self.position) / dt
        changed = np.abs(position - wanted) > _TOLERANCE
        if np.any(changed):
            self.interventions += 1
        self.position = position
        self.velocity = velocity
        feed_forward = np.where(
            changed, velocity, np.clip(wanted_velocity, -self.velocity_limit, self.velocity_limit)
        )
        # Bounds widened at reset follow the joint back inside and never widen again.
        self.lower = np.maximum(self.lower, np.minimum(self.lower_limit, position))
        self.upper = np.minimum(self.upper, np.maximum(self.upper_limit, position))
        return position, feed_forward
