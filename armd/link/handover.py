"""Where a move takes over a moving arm: the state it was planned and checked from, and the tick
the loop starts it at (docs/collision.md).

The loop forecasts in each sample where a move sent now would take over (`Sample.ahead`): the
state its motion under way will command at a few ticks ahead (a sample period and
`armd.config.control_setup.HANDOVER_PLANNING_S`, then twice and four times that lead), each the
position and velocity of the motion there and the acceleration the loop derives from the
velocity. The daemon plans and checks a move from the nearest forecast it can still make in
time, and the move carries it: the loop starts the move no earlier than its tick and only from
that state, planning the motion from the forecast itself, so the path the arm follows is the path
the checks passed. A move whose start the arm has left is not started (``aborted``) and the motion
under way goes on.

Holding still, the forecast is the held state from the next tick on: a move planned from it
starts whenever it arrives while the arm still holds there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from armd.motion.trajectory import Setpoint

__all__ = ["HANDOVER_TOLERANCE", "Handover"]

# rad, rad/s, rad/s²: a commanded state this close to a handover's start is that start (the
# limiter recomputes each position, and from it the velocity and acceleration, with rounding)
HANDOVER_TOLERANCE = 1e-6


@dataclass(frozen=True, slots=True)
class Handover:
    """The state `start` the loop commands at tick `tick` - 1, from which a move's motion starts
    at `tick`; `t`: when that tick is due (monotonic s; later if the loop misses ticks)."""

    tick: int
    t: float
    start: Setpoint

    @property
    def at_rest(self) -> bool:
        """The arm holds still there: a move may start there any time after `tick`."""
        return not (self.start.velocity.any() or self.start.acceleration.any())

    def matches(self, commanded: Setpoint) -> bool:
        """Whether `commanded` is `start`, up to the limiter's rounding."""
        return all(
            np.allclose(a, b, rtol=0.0, atol=HANDOVER_TOLERANCE)
            for a, b in (
                (commanded.position, self.start.position),
                (commanded.velocity, self.start.velocity),
                (commanded.acceleration, self.start.acceleration),
            )
        )
