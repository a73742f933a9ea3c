"""The torque feed-forward the loop adds to its commands (gravity compensation), from the
daemon's `TorqueMap`: the loop computes no dynamics (it imports neither the kinematics nor
numba), it evaluates the daemon's local model of them at its commanded state each tick::

    τ(q, q̈) = τ0 + K (q - q0) + M q̈        (q order, N·m or N at the joints)

where the daemon linearised the inverse dynamics of the commanded motion at ``q0`` (the commanded
position of a recent `Sample`): ``τ0 = g(q0) + C(q0, q̇0) q̇0``, ``K = ∂g/∂q (q0)`` and
``M = M(q0)``, with zero rows for the joints whose drivers do not compensate. A map older than
`max_age_s` (the daemon has stopped refreshing it) gives no feed-forward rather than a stale
one: the devices' position loops then hold the arm on their own, as without compensation. The
torque at each motor (through the transmission) is bounded by each device's torque limit in its
driver.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from armd.link.protocol import TorqueMap
from armd.motion.trajectory import Setpoint

__all__ = ["TorqueFeedForward"]

Array = NDArray[np.float64]


class TorqueFeedForward:
    """The latest `TorqueMap` and when it was taken (the loop's clock, s)."""

    def __init__(self, dof: int, max_age_s: float) -> None:
        self.max_age_s = max_age_s
        self._map: TorqueMap | None = None
        self._taken_at = -np.inf
        self._dof = dof

    def take(self, torque_map: TorqueMap, now: float) -> None:
        """A new map from the daemon; one of the wrong shape or not finite is dropped (the
        daemon's bug must not become a torque)."""
        n = self._dof
        shapes = (
            torque_map.position.shape,
            torque_map.torque.shape,
            torque_map.stiffness.shape,
            torque_map.mass.shape,
        )
        arrays = (torque_map.position, torque_map.torque, torque_map.stiffness, torque_map.mass)
        if shapes != ((n,), (n,), (n, n), (n, n)) or not all(np.isfinite(a).all() for a in arrays):
            return
        self._map, self._taken_at = torque_map, now

    def clear(self) -> None:
        self._map = None

    def torque(self, commanded: Setpoint, now: float) -> Array | None:
        """The joint torques (dof,) for the commanded state; None without a fresh map."""
        m = self._map
        if m is None or now - self._taken_at > self.max_age_s:
            return None
        tau: Array = m.torque + m.stiffness @ (commanded.position - m.position)
        tau += m.mass @ commanded.acceleration
        return tau
