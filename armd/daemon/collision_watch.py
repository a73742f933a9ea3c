"""Defence in depth: the measured state of every `Sample` the daemon receives is checked against
the collision model; a measured configuration closer than half the margin latches the fault
``collision`` in the loop (`LatchFault`: a controlled stop, then hold until a reset).

Half the margin is the clearance every accepted path keeps: paths are checked at samples at
least the margin apart, spaced so that no point moves more than half the margin between two
(`CollisionModel.check_path`), so a commanded path may pass between the margin and its half, and
the measured state lags and overshoots the command a little. A measured state closer than that
is one no check let through.

Goals and streams are checked before they reach the loop (`armd.planning.collision_guard`,
`armd.planning.stream_guard`); this catches what those checks cannot see: the arm pushed by hand
or by a load, a drive that does not follow its commands, geometry that changed under a motion
planned before it. The loop's samples come at the telemetry rate (and at once on a change of
mode), so the check runs at that rate.

A contact latches once: after the reset the arm may be moved out of it (goals that increase the
distance are allowed, `CollisionGuard`), and the fault latches again only when the measured
state gets deeper into the contact by half the margin, or enters a contact again after being
clear.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from armd.link.messages import Fault
from armd.link.protocol import Command, LatchFault, Sample
from kinematics.collision import CollisionModel

__all__ = ["CollisionWatch", "collision_fault"]

log = logging.getLogger(__name__)


def collision_fault(a: str, b: str, distance: float, margin: float) -> Fault:
    """The ``collision`` fault of a measured contact between `a` and `b`."""
    message = (
        f"measured state in collision: {a} with {b} at {distance:.4f} m "
        f"({margin - distance:.4f} m inside the margin)"
    )
    return Fault("collision", message)


class CollisionWatch:
    """Checks measured states (`check`) and latches the fault through `send`."""

    def __init__(self, model: CollisionModel, send: Callable[[Command], None]) -> None:
        self.model = model
        self._send = send
        self.threshold = 0.5 * model.margin  # m: closer than this latches the fault
        self._latched_at: float | None = None  # the distance of this contact's latch (m)
        self.checked = 0

    def check(self, sample: Sample) -> None:
        """The measured position of `sample` against the model (no measurement: nothing)."""
        q = sample.measured_position
        if q is None:
            return
        self.checked += 1
        distance, pair = self.model.min_distance(q)
        if pair is None or distance >= self.threshold:
            self._latched_at = None
            return
        a, b = pair
        latched = self._latched_at
        if latched is not None and distance >= latched - 0.5 * self.model.margin:
            return
        self._latched_at = distance
        if sample.fault is not None:  # latched already (by the loop, or by us)
            return
        fault = collision_fault(a, b, distance, self.model.margin)
        log.error("%s", fault.message)
        self._send(LatchFault(fault))
