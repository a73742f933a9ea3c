"""The arm's dynamics on the daemon's side: the model with the config's gravity vector and the
payload at the tool link (from the config, replaced at run time over MQTT), and the torque maps
the control loop's gravity compensation evaluates (`armd.link.protocol.TorqueMap`,
`armd.control.feedforward`).

Per `Sample` (the telemetry's rate, and at once on a change) the daemon linearises the inverse
dynamics at the loop's commanded state: ``g(q0) + C(q0, q̇0) q̇0``, ``∂g/∂q`` (central differences of
the gravity torques, 2·dof calls of ~2 µs) and ``M(q0)``, zero for the joints whose driver does not
compensate (``gravity_compensation``). q order, N·m (N for prismatic joints) at the joints.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from armd.config.load import ArmSetup
from armd.link.protocol import Sample, TorqueMap
from kinematics import Inertial, KinematicTree
from kinematics.dynamics import STANDARD_GRAVITY, Dynamics, Payload

__all__ = ["ArmDynamics"]

log = logging.getLogger(__name__)
Array = NDArray[np.float64]

_STEP = 1e-5  # rad (m): the central differences' step; error ~1e-10 of the torques


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
    link to start with (None: none)."""

    def __init__(
        self,
        tree: KinematicTree,
        tool_link: str,
        compensated: NDArray[np.bool_],
        gravity: Sequence[float] = STANDARD_GRAVITY,
        payload: Inertial | None = None,
    ) -> None:
        self.dynamics = Dynamics(tree, gravity=gravity)
        self.tool_link = tool_link
        self.compensated = np.array(compensated, dtype=bool)
        self.payload: Payload | None = None
        self.set_payload(payload)

    @classmethod
    def of(cls, setup: ArmSetup) -> ArmDynamics:
        """The configured arm's: its gravity vector, its payload, its compensating drivers."""
        payload = setup.config.payload
        return cls(
            setup.tree,
            setup.tool_link,
            compensated_joints(setup),
            setup.config.gravity,
            None if payload is None else payload.inertial(),
        )

    @property
    def compensating(self) -> bool:
        """Some driver compensates gravity: torque maps are wanted."""
        return bool(self.compensated.any())

    def set_payload(self, inertial: Inertial | None) -> None:
        """The load at the tool link from now on (None: none)."""
        self.payload = None if inertial is None else self.dynamics.payload(self.tool_link, inertial)

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
