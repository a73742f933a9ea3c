"""The arm's dynamics on the daemon's side: the model with the config's gravity vector and the
payload at the tool link (from the config, replaced at run time over MQTT), the torque maps the
control loop's gravity compensation evaluates (`armd.link.protocol.TorqueMap`,
`armd.control.feedforward`) and contact detection (`armd.daemon.contact`), both from the loop's
samples (`on_sample`).

Per `Sample` (the telemetry's rate, or every tick with contact detection, and at once on a
change) the daemon linearises the inverse dynamics at the loop's commanded state:
``g(q0) + C(q0, q̇0) q̇0``, ``∂g/∂q`` (central differences of the gravity torques, 2·dof calls of
~2 µs) and ``M(q0)``, zero for the joints whose driver does not compensate
(``gravity_compensation``). q order, N·m (N for prismatic joints) at the joints.

When the drives are enabled (the loop commands again after commanding nothing: at start, after
a reset that re-enabled them), the maps are ramped in over `GRAVITY_RAMP_S`: each is the
linearisation times ``min(1, (t - t_enabled) / GRAVITY_RAMP_S)``, t the sample's time, so the
first is zero and the drives take the arm's weight from their position loops gradually instead of
in one tick. The torque then steps at each new map by at most ``|g| × Δt / GRAVITY_RAMP_S``
(Δt between two samples: 8 % of g at a 25 Hz telemetry rate, 0.8 % when contact detection
samples every tick at 250 Hz).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from armd.config.load import ArmSetup
from armd.daemon.contact import DEFAULT_GAIN, ContactMonitor, MomentumObserver
from armd.link.messages import Fault, Mode
from armd.link.protocol import Command, LatchFault, Sample, TorqueMap
from kinematics import Inertial, KinematicTree
from kinematics.dynamics import STANDARD_GRAVITY, Dynamics, Payload

__all__ = ["GRAVITY_RAMP_S", "ArmDynamics"]

Array = NDArray[np.float64]

_STEP = 1e-5  # rad (m): the central differences' step; error ~1e-10 of the torques

GRAVITY_RAMP_S = 0.5
"""s: the gravity compensation's ramp from zero to full when the drives are enabled."""


def compensated_joints(setup: ArmSetup) -> NDArray[np.bool_]:
    """(dof,) bool: the joints whose driver has ``gravity_compensation``."""
    drivers = setup.config.drivers
    return np.array(
        [
            name in setup.joints and drivers[setup.joints[name].driver].gravity_compensation
            for name in setup.tree.joint_names
        ]
    )


class ArmDynamics:
    """The dynamics of an arm and its current payload.

    tree: the arm's model; tool_link: where payloads sit; compensated: (dof,) bool, the joints
    whose driver compensates gravity; gravity: m/s², root frame; payload: the load at the tool
    link to start with (None: none); ramp_s: the compensation's ramp at enable, s."""

    def __init__(
        self,
        tree: KinematicTree,
        tool_link: str,
        compensated: NDArray[np.bool_],
        gravity: Sequence[float] = STANDARD_GRAVITY,
        payload: Inertial | None = None,
        ramp_s: float = GRAVITY_RAMP_S,
    ) -> None:
        self.dynamics = Dynamics(tree, gravity=gravity)
        self.tool_link = tool_link
        self.compensated = np.array(compensated, dtype=bool)
        self.payload: Payload | None = None
        self.set_payload(payload)
        self.contact: ContactMonitor | None = None
        self._torque_per_effort = np.zeros(tree.dof)
        self._read_at: Array | None = None  # the watched joints' reading times, last sample
        self.ramp_s = ramp_s
        self._enabled_at: float | None = None  # the first sample's time the loop commanded

    def watch_contacts(
        self,
        thresholds: Array,
        times_s: Array,
        torque_per_effort: Array,
        sample_period_s: float,
    ) -> None:
        """Detect contacts: per joint (dof,) the residual's threshold (N·m or N; inf: not
        watched), how long it must last (s) and the joint torque per unit of measured effort
        (the `Sample`'s effort row is the device's torque times the sign: ``gear_ratio``); the
        observer's gain keeps K·Δt ≤ 0.5 at `sample_period_s`; samples more than 2.5 periods
        apart (missed ticks) restart it."""
        gain = min(DEFAULT_GAIN, 0.5 / sample_period_s)
        observer = MomentumObserver(self.dynamics, gain, 2.5 * sample_period_s)
        names = self.dynamics.tree.joint_names
        self.contact = ContactMonitor(observer, thresholds, times_s, names)
        self._torque_per_effort = np.asarray(torque_per_effort, dtype=np.float64)

    @classmethod
    def of(cls, setup: ArmSetup, sample_period_s: float) -> ArmDynamics:
        """The configured arm's: its gravity vector, its payload, its compensating drivers, its
        joints' contact detection (on samples `sample_period_s` apart)."""
        payload = setup.config.payload
        arm = cls(
            setup.tree,
            setup.tool_link,
            compensated_joints(setup),
            setup.config.gravity,
            None if payload is None else payload.inertial(),
        )
        names = setup.tree.joint_names
        joints = setup.config.joints
        contacts = [joints[n].contact if n in joints else None for n in names]
        if any(c is not None for c in contacts):
            arm.watch_contacts(
                np.array([np.inf if c is None else c.threshold for c in contacts]),
                np.array([0.0 if c is None else c.time_s for c in contacts]),
                np.array([joints[n].gear_ratio if n in joints else 0.0 for n in names]),
                sample_period_s,
            )
        return arm

    def on_sample(self, sample: Sample) -> list[Command]:
        """What the loop needs after `sample`: a torque map (gravity compensation), a
        ``contact`` fault to latch."""
        commands: list[Command] = []
        if self.compensating:
            torque_map = self.ramped(self.torque_map(sample), sample.t)
            if torque_map is not None:
                commands.append(torque_map)
        if self.contact is not None:
            fault = self.check_contact(sample)
            if fault is not None:
                commands.append(fault)
        return commands

    def check_contact(self, sample: Sample) -> LatchFault | None:
        """The observer's step on `sample`; a ``contact`` fault when a joint's residual stayed
        beyond its threshold. Watched only while the drives follow commands (holding, moving,
        stopping) with every watched joint's torque measured; otherwise it starts again. A
        sample in which a watched joint has no new reading (a reply missed) is skipped: its
        torque would count for a time it was not measured."""
        monitor = self.contact
        assert monitor is not None
        q, stamps = sample.measured_position, sample.measured_timestamp
        tau = sample.measured_effort * self._torque_per_effort
        watched = np.isfinite(monitor.thresholds)
        following = sample.mode in (Mode.HOLDING, Mode.MOVING, Mode.STOPPING)
        if q is None or stamps is None or not following or not np.isfinite(tau[watched]).all():
            monitor.reset()
            self._read_at = None
            return None
        read_at = stamps[watched]
        if self._read_at is not None and np.any(read_at <= self._read_at):
            return None
        self._read_at = read_at.copy()
        tau = np.where(watched, tau, 0.0)
        t = float(np.max(read_at))  # when the readings were taken, not when the tick ran
        contact = monitor.update(t, q, sample.measured_velocity, tau, self.payload)
        if contact is None:
            return None
        monitor.reset()
        threshold = monitor.thresholds[contact.joint]
        tree = self.dynamics.tree
        kind = next(link.motor.kind for link in tree.links if link.joint_name == contact.name)
        unit = "N" if kind == "prismatic" else "N·m"
        message = (
            f"joint {contact.name!r}: external torque {contact.residual:.3g} {unit} beyond its "
            f"contact threshold {threshold:g} for {monitor.times_s[contact.joint]:g} s"
        )
        return LatchFault(Fault("contact", message, contact.name))

    @property
    def compensating(self) -> bool:
        """Some driver compensates gravity: torque maps are wanted."""
        return bool(self.compensated.any())

    def set_payload(self, inertial: Inertial | None) -> None:
        """The load at the tool link from now on (None: none)."""
        self.payload = None if inertial is None else self.dynamics.payload(self.tool_link, inertial)

    def ramped(self, torque_map: TorqueMap | None, t: float) -> TorqueMap | None:
        """`torque_map` scaled by the ramp at time `t` (s, the loop's clock); None (the loop
        commands nothing: the drives are off) starts the ramp again at the next map."""
        if torque_map is None:
            self._enabled_at = None
            return None
        if self._enabled_at is None:
            self._enabled_at = t
        share = min(1.0, max(0.0, (t - self._enabled_at) / self.ramp_s))
        if share == 1.0:
            return torque_map
        m = torque_map
        return TorqueMap(m.position, m.torque * share, m.stiffness * share, m.mass * share)

    def torque_map(self, sample: Sample) -> TorqueMap | None:
        """The map at the sample's commanded state; None while the loop commands nothing."""
        q = sample.commanded_position
        if q is None:
            return None
        q = np.ascontiguousarray(q)
        qd = np.nan_to_num(sample.commanded_velocity)
        d, load = self.dynamics, self.payload
        torque = d.rnea(q, qd, np.zeros_like(q), load)
        stiffness = np.empty((len(q), len(q)))
        probe = q.copy()
        for j in range(len(q)):
            probe[j] = q[j] + _STEP
            above = d.gravity(probe, load)
            probe[j] = q[j] - _STEP
            stiffness[:, j] = (above - d.gravity(probe, load)) / (2 * _STEP)
            probe[j] = q[j]
        mass = d.mass_matrix(q, load)
        off = np.logical_not(self.compensated)
        for array in (torque, stiffness, mass):
            array[off] = 0.0
        return TorqueMap(q.copy(), torque, stiffness, mass)
