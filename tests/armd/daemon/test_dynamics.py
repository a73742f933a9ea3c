"""The daemon's `ArmDynamics`: the torque maps of gravity compensation against Pinocchio
(`tests.peers`), the payload at the tool link, and the joints left out."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from armd.daemon.dynamics import ArmDynamics
from armd.link.messages import Mode
from armd.link.protocol import MeasuredState, Sample
from armd.motion.trajectory import Setpoint
from kinematics import Inertial, load_tree
from tests.peers.pinocchio_dynamics import PinocchioArm

UR5 = Path(__file__).resolve().parents[3] / "config" / "robots" / "ur5.urdf"
Q = np.array([0.3, -1.2, 1.4, -0.5, 1.1, 0.2])
QD = np.array([0.2, -0.4, 0.5, 0.1, -0.3, 0.6])
LOAD = Inertial(1.5, (0.01, 0.0, 0.05), (0.002, 0.0, 0.0, 0.002, 0.0, 0.001))
WALL = (9.81, 0.0, 0.0)


def sample(q: np.ndarray, qd: np.ndarray) -> Sample:
    n = len(q)
    measured = MeasuredState(q, np.zeros(n), np.zeros(n))
    rows = Sample.rows(measured, Setpoint(q, qd, np.zeros(n)))
    return Sample(1, 0.0, Mode.MOVING, 0, True, True, 0, None, rows)


def close(actual: np.ndarray, expected: np.ndarray, relative: float = 1e-9) -> bool:
    tolerance = relative * float(np.max(np.abs(expected))) + 1e-12
    return bool(np.max(np.abs(actual - expected)) <= tolerance)


@pytest.fixture(scope="module")
def peer() -> tuple[PinocchioArm, pin.Model]:
    arm = PinocchioArm.load(UR5, load_tree(UR5))
    model = arm.with_payload("tool0", LOAD)
    model.gravity.linear = np.array(WALL)
    return arm, model


def test_the_map_is_pinocchios_linearised_inverse_dynamics(
    peer: tuple[PinocchioArm, pin.Model],
) -> None:
    arm, model = peer
    dynamics = ArmDynamics(load_tree(UR5), "tool0", np.ones(6, dtype=bool), WALL, LOAD)
    torque_map = dynamics.torque_map(sample(Q, QD))
    assert torque_map is not None
    assert close(torque_map.position, Q, 0.0)
    assert close(torque_map.torque, arm.rnea(model, Q, QD, np.zeros(6)))  # g + C q̇
    assert close(torque_map.mass, arm.mass_matrix(model, Q))
    data = model.createData()
    stiffness = pin.computeGeneralizedGravityDerivatives(model, data, arm.configuration(Q))
    # central differences with a 1e-5 step: truncation ~1e-10 of the torques, rounding ~1e-11/1e-5
    assert close(torque_map.stiffness, stiffness, 1e-6)


def test_near_q0_the_map_predicts_the_gravity_torque(
    peer: tuple[PinocchioArm, pin.Model],
) -> None:
    """What the loop does between refreshes: at 25 Hz a joint at 1 rad/s moves 0.04 rad."""
    arm, model = peer
    dynamics = ArmDynamics(load_tree(UR5), "tool0", np.ones(6, dtype=bool), WALL, LOAD)
    torque_map = dynamics.torque_map(sample(Q, np.zeros(6)))
    assert torque_map is not None
    step = np.full(6, 0.04)
    predicted = torque_map.torque + torque_map.stiffness @ step
    exact = arm.gravity(model, Q + step)
    # second order in the step: |Δq|² × the gravity torques' curvature (≤ the torques themselves)
    assert close(predicted, exact, 6 * 0.04**2)


def test_joints_without_compensation_get_zero_rows() -> None:
    compensated = np.array([True, True, True, False, False, False])
    dynamics = ArmDynamics(load_tree(UR5), "tool0", compensated)
    torque_map = dynamics.torque_map(sample(Q, QD))
    assert torque_map is not None
    for array in (torque_map.torque, torque_map.stiffness, torque_map.mass):
        assert np.all(array[3:] == 0.0)
        assert np.any(array[:3] != 0.0)


def test_a_payload_replaced_at_run_time_changes_the_torques(
    peer: tuple[PinocchioArm, pin.Model],
) -> None:
    arm, model = peer
    dynamics = ArmDynamics(load_tree(UR5), "tool0", np.ones(6, dtype=bool), WALL)
    bare = dynamics.torque_map(sample(Q, np.zeros(6)))
    dynamics.set_payload(LOAD)
    loaded = dynamics.torque_map(sample(Q, np.zeros(6)))
    assert bare is not None
    assert loaded is not None
    assert close(loaded.torque, arm.gravity(model, Q))
    assert not close(bare.torque, loaded.torque)


def test_no_map_while_the_loop_commands_nothing() -> None:
    dynamics = ArmDynamics(load_tree(UR5), "tool0", np.ones(6, dtype=bool))
    assert dynamics.torque_map(Sample.initial(6)) is None
