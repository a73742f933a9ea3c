"""Contact detection: a generalized-momentum observer (De Luca et al.) on the loop's samples, in
the daemon, with the joint torques the drives report.

With ``p = M(q) q̇`` and the measured joint torques ``τ`` (the devices' torque through the
transmission: ``τ_joint = gear_ratio × sign × τ_motor``), the residual::

    β = g(q) - C(q, q̇)ᵀ q̇,   I ← I + (τ - β + r) Δt,   r = K (p - p0 - I)

(``τ - β`` integrated by the trapezoid between two samples, r by the rectangle: stable while
K·Δt < 1, so `DEFAULT_GAIN` at the loop's rate)
follows the external torque with a first-order lag of time constant 1/K, without measuring
accelerations (``ṗ = τ + τ_ext - β``). A joint whose ``|r|`` stays above its threshold
(``contact.threshold``, N·m at the joint) for its ``contact.time_s`` is in contact; the daemon
latches the ``contact`` fault (a controlled stop) naming the joint and the residual.

`MomentumObserver` is the observer alone (q order, SI); `ContactMonitor` adds the thresholds.
Both use the `Dynamics` of the daemon's `ArmDynamics` (its gravity and payload): what the model
misses — friction, motor inertia, an unannounced load — shows in the residual, and the thresholds
must sit above it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from kinematics.dynamics import Dynamics, Payload

__all__ = ["DEFAULT_GAIN", "Contact", "ContactMonitor", "MomentumObserver"]

Array = NDArray[np.float64]

DEFAULT_GAIN = 50.0
"""K, 1/s: the residual's bandwidth (a 20 ms time constant); K·Δt must stay below 1."""


class MomentumObserver:
    """The residual r (dof,) of the generalized momentum; `reset` before the first sample.

    Two samples more than `max_gap_s` apart (missed ticks) restart it: the torques between them
    are unknown, and integrating across the gap would show as a contact."""

    def __init__(
        self, dynamics: Dynamics, gain: float = DEFAULT_GAIN, max_gap_s: float = math.inf
    ) -> None:
        n = dynamics.tree.dof
        self.dynamics = dynamics
        self.gain = gain
        self.max_gap_s = max_gap_s
        self.restarts = 0  # after gaps
        self.residual = np.zeros(n)
        self._integral = np.zeros(n)
        self._p0: Array | None = None
        self._t: float | None = None
        self._rate: Array | None = None  # τ - β at the previous sample

    def reset(self) -> None:
        """Start again at the next sample (after a gap, a fault, the drives off)."""
        self.residual[:] = 0.0
        self._integral[:] = 0.0
        self._p0 = None
        self._t = None
        self._rate = None

    def update(
        self, t: float, q: Array, qd: Array, tau: Array, payload: Payload | None = None
    ) -> Array:
        """The residual after the sample at time `t` (s) of `q`, `qd` and the measured joint
        torques `tau`; the first sample after `reset` starts the observer (zero residual)."""
        d = self.dynamics
        p = d.mass_matrix(q, payload) @ qd
        rate = tau - d.gravity(q, payload) + d.coriolis_matrix(q, qd, payload).T @ qd
        if self._t is not None and t - self._t > self.max_gap_s:
            self.reset()
            self.restarts += 1
        if self._p0 is None or self._t is None or self._rate is None:
            self._p0, self._t, self._rate = p, t, rate
            return self.residual
        dt = t - self._t
        if dt <= 0.0:
            return self.residual
        # the trapezoid: the drives change their torque between two samples
        self._integral += (0.5 * (rate + self._rate) + self.residual) * dt
        self._t, self._rate = t, rate
        self.residual = self.gain * (p - self._p0 - self._integral)
        return self.residual


@dataclass(frozen=True, slots=True)
class Contact:
    """A joint in contact: its q index, name and residual (N·m or N at the joint)."""

    joint: int
    name: str
    residual: float


class ContactMonitor:
    """The observer with per-joint thresholds: `thresholds` (dof,) N·m or N (inf: not watched)
    and `times_s` (dof,) s; `update` returns the first joint in contact, or None."""

    def __init__(
        self, observer: MomentumObserver, thresholds: Array, times_s: Array, names: tuple[str, ...]
    ) -> None:
        self.observer = observer
        self.thresholds = np.asarray(thresholds, dtype=np.float64)
        self.times_s = np.asarray(times_s, dtype=np.float64)
        self.names = names
        self._above_since = np.full(len(names), math.nan)

    def reset(self) -> None:
        self.observer.reset()
        self._above_since[:] = math.nan

    def update(
        self, t: float, q: Array, qd: Array, tau: Array, payload: Payload | None = None
    ) -> Contact | None:
        r = self.observer.update(t, q, qd, tau, payload)
        above = np.abs(r) > self.thresholds
        self._above_since[~above] = math.nan
        self._above_since[above & np.isnan(self._above_since)] = t
        lasting = above & (t - self._above_since >= self.times_s)
        if not lasting.any():
            return None
        joint = int(np.argmax(np.where(lasting, np.abs(r) / self.thresholds, -1.0)))
        return Contact(joint, self.names[joint], float(r[joint]))
