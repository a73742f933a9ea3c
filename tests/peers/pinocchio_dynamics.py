"""Pinocchio as a test peer for `kinematics.dynamics`: the same URDF file read by Pinocchio's own
parser (urdfdom), and its RNEA, generalized gravity and CRBA on armd's degrees of freedom.

Pinocchio merges the links of fixed joints into their parent body itself and keeps them as
frames; a payload goes onto the body of its link's frame through the frame's placement. Mimic
joints: Pinocchio's own mimic joints (``mimic=True``) where its parser accepts the model;
otherwise every URDF joint is a degree of freedom of Pinocchio's model and armd's are mapped in
through ``G`` (value = multiplier × q + offset): ``τ = Gᵀ τ_all``, ``M = Gᵀ M_all G``.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import distribution
from pathlib import Path

import numpy as np
import pinocchio as pin

from kinematics import Inertial, JointMotor, KinematicTree

EXAMPLE_ROBOTS = Path(
    str(distribution("example-robot-data").locate_file("cmeel.prefix/share/example-robot-data"))
)
"""The robots of example-robot-data (PyPI), e.g. ``EXAMPLE_ROBOTS / "robots/..."``."""


@dataclass(frozen=True)
class PinocchioArm:
    """Pinocchio's model of a URDF file, with the map from armd's q to its joints."""

    model: pin.Model
    tree: KinematicTree
    G: np.ndarray  # (nv, dof): Pinocchio velocity = G @ armd velocity
    native_mimic: bool  # Pinocchio's own mimic joints (else G folds them)

    @classmethod
    def load(cls, path: Path, tree: KinematicTree, *, native_mimic: bool = True) -> PinocchioArm:
        """Pinocchio's model of `path`, with its own mimic joints when `native_mimic` and its
        parser accepts them (else every joint is a DOF, mapped through G)."""
        mimics = native_mimic and any(
            isinstance(link.motor, JointMotor) and link.motor.mimic for link in tree.links
        )
        try:
            model, native = pin.buildModelFromUrdf(str(path), mimic=mimics), mimics
        except ValueError:  # "The parent joint of the mimic joint is not in the kinematic tree"
            model, native = pin.buildModelFromUrdf(str(path)), False
        G = np.zeros((model.nv, tree.dof))
        for name, (driver, multiplier, _) in _drivers(tree).items():
            joint = model.joints[model.getJointId(name)]
            if joint.nv == 1:  # a mimic joint of Pinocchio's has none of its own
                G[joint.idx_v, tree.joint_names.index(driver)] = multiplier
        return cls(model, tree, G, native)

    def configuration(self, q: np.ndarray) -> np.ndarray:
        """Pinocchio's q (continuous joints as cos, sin) for armd's q."""
        qp = pin.neutral(self.model)
        for name, (driver, multiplier, offset) in _drivers(self.tree).items():
            joint = self.model.joints[self.model.getJointId(name)]
            value = multiplier * q[self.tree.joint_names.index(driver)] + offset
            if joint.nq == 1:
                qp[joint.idx_q] = value
            elif joint.nq == 2:
                qp[joint.idx_q : joint.idx_q + 2] = (np.cos(value), np.sin(value))
        return qp

    def with_payload(self, link: str | None, inertial: Inertial | None) -> pin.Model:
        """A copy of the model with `inertial` (in `link`'s frame) added to its body."""
        model = pin.Model(self.model)
        if link is None or inertial is None:
            return model
        frame = model.frames[model.getFrameId(link, pin.FrameType.BODY)]
        load = pin.Inertia(inertial.mass, np.array(inertial.com), np.array(inertial.tensor))
        model.inertias[frame.parentJoint] += frame.placement.act(load)
        return model

    def rnea(self, model: pin.Model, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
        data = model.createData()
        return self.G.T @ pin.rnea(model, data, self.configuration(q), self.G @ qd, self.G @ qdd)

    def gravity(self, model: pin.Model, q: np.ndarray) -> np.ndarray:
        data = model.createData()
        return self.G.T @ pin.computeGeneralizedGravity(model, data, self.configuration(q))

    def mass_matrix(self, model: pin.Model, q: np.ndarray) -> np.ndarray:
        data = model.createData()
        upper = pin.crba(model, data, self.configuration(q))  # the upper triangle is filled
        full = np.triu(upper) + np.triu(upper, 1).T
        return self.G.T @ full @ self.G


def coriolis_matrix_of(
    arm: PinocchioArm, model: pin.Model, q: np.ndarray, qd: np.ndarray
) -> np.ndarray:
    """Pinocchio's `computeCoriolisMatrix` on armd's degrees of freedom (``Gᵀ C G``). Pass an
    arm loaded without native mimic joints: Pinocchio 4.1's Coriolis matrix of a model with its
    own mimic joints disagrees with its own RNEA (C q̇ is not its bias torque)."""
    assert not arm.native_mimic
    data = model.createData()
    C = pin.computeCoriolisMatrix(model, data, arm.configuration(q), arm.G @ qd)
    return arm.G.T @ C @ arm.G


def _drivers(tree: KinematicTree) -> dict[str, tuple[str, float, float]]:
    """Every joint's (driving joint, multiplier, offset): itself, 1, 0 unless it mimics one."""
    drivers = {}
    for link in tree.links:
        motor = link.motor
        if isinstance(motor, JointMotor):
            name = str(link.joint_name)
            mimic = motor.mimic
            drivers[name] = (
                (name, 1.0, 0.0) if mimic is None else (mimic.joint, mimic.multiplier, mimic.offset)
            )
    return drivers
