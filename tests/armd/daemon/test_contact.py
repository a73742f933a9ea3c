"""The momentum observer and contact monitor against an arm simulated by Pinocchio: the UR5
(its own URDF parser and forward dynamics, `pin.aba`, integrated with RK4 at 1 kHz) follows a
full-speed motion under a computed-torque controller whose torques are what its drives report;
the observer sees them at the loop's 250 Hz. Without contact the residual stays well below the
threshold (no false alarm); a strike (an external torque step) is detected within the delay the
observer's first-order lag and the threshold's time give."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from armd.daemon.contact import ContactMonitor, MomentumObserver
from kinematics import load_tree
from kinematics.dynamics import Dynamics
from tests.peers.pinocchio_dynamics import PinocchioArm

UR5 = Path(__file__).resolve().parents[3] / "config" / "robots" / "ur5.urdf"
SIM_DT = 0.001  # s: the arm's physics and its drives' torque updates
SAMPLE_EVERY = 4  # the loop's samples at 250 Hz
GAIN = 50.0  # 1/s
THRESHOLD = 5.0  # N·m, every joint
TIME_S = 0.02
Q0 = np.array([0.0, -1.2, 1.4, -0.5, 1.1, 0.2])
AMPLITUDE = np.array([1.2, 0.8, 1.0, 1.2, 1.2, 1.5])  # rad
OMEGA = np.array([2.5, 3.0, 2.8, 3.2, 2.6, 3.0])  # rad/s: peak joint speeds 2.4 to 4.5 rad/s


def desired(t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A full-speed motion of every joint (sinusoids from rest at Q0, their speed ramping in)."""
    ramp = 1.0 - math.exp(-((t / 0.3) ** 2))
    dramp = 2 * t / 0.3**2 * math.exp(-((t / 0.3) ** 2))
    s, c = np.sin(OMEGA * t), np.cos(OMEGA * t)
    q = Q0 + AMPLITUDE * ramp * s
    qd = AMPLITUDE * (dramp * s + ramp * OMEGA * c)
    qdd = AMPLITUDE * (-ramp * OMEGA**2 * s + 2 * dramp * OMEGA * c)  # the ramp's 2nd term omitted
    return q, qd, qdd


@dataclass
class Run:
    times: list[float]
    residuals: list[np.ndarray]
    contact_at: float | None
    contact_joint: int | None


def simulate(duration_s: float, strike: tuple[float, int, float] | None = None) -> Run:
    """The UR5 under computed torque for `duration_s`; `strike`: (time, joint, torque N·m) of an
    external torque step that then lasts. The monitor watches every sample."""
    tree = load_tree(UR5)
    arm = PinocchioArm.load(UR5, tree)
    model = arm.with_payload(None, None)
    data = model.createData()
    monitor = ContactMonitor(
        MomentumObserver(Dynamics(tree), GAIN),
        np.full(6, THRESHOLD),
        np.full(6, TIME_S),
        tree.joint_names,
    )
    q, qd = Q0.copy(), np.zeros(6)
    run = Run([], [], None, None)
    kp, kd = 400.0, 40.0
    for step in range(round(duration_s / SIM_DT)):
        t = step * SIM_DT
        qr, qdr, qddr = desired(t)
        tau = pin.rnea(model, data, q, qd, qddr + kp * (qr - q) + kd * (qdr - qd))
        external = np.zeros(6)
        if strike is not None and t >= strike[0]:
            external[strike[1]] = strike[2]
        if step % SAMPLE_EVERY == 0:
            contact = monitor.update(t, q.copy(), qd.copy(), tau.copy())
            run.times.append(t)
            run.residuals.append(monitor.observer.residual.copy())
            if contact is not None and run.contact_at is None:
                run.contact_at, run.contact_joint = t, contact.joint
        q, qd = rk4(model, data, q, qd, tau + external)
    return run


def rk4(
    model: pin.Model, data: pin.Data, q: np.ndarray, qd: np.ndarray, tau: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    def f(q: np.ndarray, qd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return qd, pin.aba(model, data, q, qd, tau).copy()

    k1 = f(q, qd)
    k2 = f(q + 0.5 * SIM_DT * k1[0], qd + 0.5 * SIM_DT * k1[1])
    k3 = f(q + 0.5 * SIM_DT * k2[0], qd + 0.5 * SIM_DT * k2[1])
    k4 = f(q + SIM_DT * k3[0], qd + SIM_DT * k3[1])
    step = SIM_DT / 6
    return (
        q + step * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0]),
        qd + step * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1]),
    )


@pytest.fixture(scope="module")
def free_run() -> Run:
    return simulate(4.0)


def test_no_false_alarm_on_a_full_speed_motion(free_run: Run) -> None:
    assert free_run.contact_at is None
    residuals = np.array(free_run.residuals)
    worst = np.max(np.abs(residuals), axis=0)
    # The observer sees the drives' torque at 250 Hz while it changes at 1 kHz: its residual
    # is that sampling's error, far below the threshold.
    assert np.all(worst < 0.25 * THRESHOLD), worst


@pytest.mark.parametrize(("joint", "torque"), [(1, 20.0), (2, -12.0), (4, 8.0)])
def test_a_strike_is_detected_on_its_joint_within_the_observers_delay(
    joint: int, torque: float
) -> None:
    strike_at = 1.5
    run = simulate(2.2, (strike_at, joint, torque))
    assert run.contact_joint == joint
    assert run.contact_at is not None
    delay = run.contact_at - strike_at
    # r reaches the threshold after ln(τ / (τ - threshold)) / K, then must last TIME_S; plus a
    # sample to see the strike and a sample to see the time pass (with the noise of the free run)
    lag = math.log(abs(torque) / (abs(torque) - 1.25 * THRESHOLD)) / GAIN
    assert 0.0 < delay <= lag + TIME_S + 2 * SAMPLE_EVERY * SIM_DT, delay
    final = run.residuals[-1][joint]
    assert final == pytest.approx(torque, abs=0.25 * THRESHOLD)  # r converges to τ_ext
