"""Gravity compensation ramped in at enable: the daemon's `ArmDynamics` on the loop's samples
(25 Hz, as config/ur5_physics.yaml's telemetry) and the loop's `TorqueFeedForward`, which turns
the newest map into each command's torque (250 Hz): the first command after the drives are
enabled carries no torque, each later one steps by no more than the ramp's share of gravity
per sample, ``|g| × Δt / GRAVITY_RAMP_S`` (`armd.daemon.dynamics`), and after the ramp the
commands carry the full gravity torque; disabling and enabling again ramps it in again."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from armd.control.feedforward import TorqueFeedForward
from armd.daemon.dynamics import GRAVITY_RAMP_S, ArmDynamics
from armd.link.messages import Mode
from armd.link.protocol import MeasuredState, Sample, TorqueMap
from armd.motion.trajectory import Setpoint
from kinematics import load_tree

UR5 = Path(__file__).resolve().parents[3] / "config" / "robots" / "ur5.urdf"
Q = np.array([0.3, -1.2, 1.4, -0.5, 1.1, 0.2])  # the shoulder and elbow carry the arm
PERIOD_S = 0.004  # the loop's tick at 250 Hz
SAMPLE_EVERY = 10  # a sample every 10 ticks: 25 Hz
EXACT = 1e-9  # N·m: the same arithmetic on both sides


def sample(tick: int, enabled: bool) -> Sample:
    n = len(Q)
    measured = MeasuredState(Q, np.zeros(n), np.full(n, tick * PERIOD_S))
    commanded = Setpoint(Q, np.zeros(n), np.zeros(n)) if enabled else None
    mode = Mode.HOLDING if enabled else Mode.INACTIVE
    rows = Sample.rows(measured, commanded)
    return Sample(tick, tick * PERIOD_S, mode, 0, False, False, 0, None, rows)


def command_torques(dynamics: ArmDynamics, enabled: list[bool]) -> list[np.ndarray]:
    """The torque of each tick's command (zero without a map), the drives enabled at the ticks
    `enabled` says, the daemon's maps handed to the loop's feed-forward at each sample."""
    feedforward = TorqueFeedForward(len(Q), max_age_s=0.2)
    hold = Setpoint(Q, np.zeros(len(Q)), np.zeros(len(Q)))
    out = []
    for tick, on in enumerate(enabled):
        now = tick * PERIOD_S
        if tick % SAMPLE_EVERY == 0:
            for command in dynamics.on_sample(sample(tick, on)):
                assert isinstance(command, TorqueMap)
                feedforward.take(command, now)
        if not on:
            feedforward.clear()  # no command is sent while the drives are off
            continue
        torque = feedforward.torque(hold, now)
        out.append(np.zeros(len(Q)) if torque is None else torque)
    return out


def test_the_gravity_torque_is_ramped_in_after_enable_and_again_after_a_re_enable() -> None:
    dynamics = ArmDynamics(load_tree(UR5), "tool0", np.ones(6, dtype=bool))
    gravity = dynamics.dynamics.gravity(Q)
    assert np.max(np.abs(gravity)) > 10.0  # N·m: what a step would have been
    bound = np.abs(gravity) * SAMPLE_EVERY * PERIOD_S / GRAVITY_RAMP_S + EXACT

    ramp_ticks = round(GRAVITY_RAMP_S / PERIOD_S)
    off, on = [False] * 20, [True] * (ramp_ticks + 50)
    torques = command_torques(dynamics, off + on + off + on)
    for run in (torques[: len(on)], torques[len(on) :]):
        assert np.all(np.abs(run[0]) <= EXACT), run[0]  # the first command after enable
        steps = np.abs(np.diff(np.array(run), axis=0))
        assert np.all(steps <= bound), (steps.max(axis=0), bound)
        assert np.allclose(run[-1], gravity, rtol=0.0, atol=EXACT)  # the ramp ended: full
        full_from = next(i for i, t in enumerate(run) if np.allclose(t, gravity, atol=EXACT))
        assert full_from * PERIOD_S >= GRAVITY_RAMP_S - SAMPLE_EVERY * PERIOD_S
