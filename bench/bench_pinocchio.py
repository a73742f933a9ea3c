"""Pinocchio reference measurements for bench/kinematics.py (imported only when installed).

FK is `forwardKinematics` + `updateFramePlacement`, the Jacobian `computeFrameJacobian`
(LOCAL_WORLD_ALIGNED), batched FK a Python loop over FK (Pinocchio has no batch call), and IK the
damped-least-squares loop of Pinocchio's documentation (log6 error, Jlog6, `integrate`), with the
iterate clipped into the joint limits and the same success test as armd's.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pinocchio as pin  # an ImportError here tells bench/kinematics.py to skip the reference
from bench_common import IKStats, ik_cases, ik_stats, per_call_us

from kinematics import JointMotor, KinematicTree


def to_pin_q(model: pin.Model, tree: KinematicTree, q: np.ndarray) -> np.ndarray:
    """armd's q (independent joints) → Pinocchio's q (every joint, mimic joints included)."""
    qp = pin.neutral(model)
    for joint_id in range(1, model.njoints):
        name = model.names[joint_id]
        link = next(link for link in tree.links if link.joint_name == name)
        motor = link.motor
        assert isinstance(motor, JointMotor)
        if motor.mimic is None:
            value = q[tree.joint_names.index(name)]
        else:
            driver = q[tree.joint_names.index(motor.mimic.joint)]
            value = motor.mimic.multiplier * driver + motor.mimic.offset
        qp[model.joints[joint_id].idx_q] = value
    return qp


def measure(
    path: Path,
    link: str,
    tree: KinematicTree,
    q: np.ndarray,
    qs: np.ndarray,
    args: argparse.Namespace,
) -> dict[str, float]:
    model = pin.buildModelFromUrdf(str(path))
    data = model.createData()
    frame = model.getFrameId(link)
    qp = to_pin_q(model, tree, q)
    qps = [to_pin_q(model, tree, row) for row in qs]
    world = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED

    def fk() -> None:
        pin.forwardKinematics(model, data, qp)
        pin.updateFramePlacement(model, data, frame)

    def batch() -> None:
        for row in qps:
            pin.forwardKinematics(model, data, row)
            pin.updateFramePlacement(model, data, frame)

    # Same answer first: a ratio between two different computations would mean nothing.
    fk()
    ours = tree.fk(q, link)
    assert np.allclose(data.oMf[frame].translation, ours.translation, atol=1e-9)
    return {
        "FK µs/call": per_call_us(fk, 2000, args.repeats),
        "Jacobian µs/call": per_call_us(
            lambda: pin.computeFrameJacobian(model, data, qp, frame, world), 2000, args.repeats
        ),
        "batched FK µs/config (N=1000)": per_call_us(batch, 1, args.repeats) / len(qps),
    }


def ik(path: Path, link: str, tree: KinematicTree, n: int, seeded: bool) -> IKStats:
    """Pinocchio's documented DLS loop, on the same cases as armd (same generator seeds)."""
    model = pin.buildModelFromUrdf(str(path))
    data = model.createData()
    frame = model.getFrameId(link)
    rng = np.random.default_rng(1 if seeded else 2)
    times, ok = [], []
    for q_true, seed in ik_cases(tree, n, seeded, rng):
        pin.framesForwardKinematics(model, data, to_pin_q(model, tree, q_true))
        target = data.oMf[frame].copy()
        start = time.perf_counter()
        q = dls(model, data, frame, target, to_pin_q(model, tree, seed))
        times.append(time.perf_counter() - start)
        pin.framesForwardKinematics(model, data, q)
        error = data.oMf[frame].actInv(target)
        ok.append(
            np.linalg.norm(data.oMf[frame].translation - target.translation) < 1e-4
            and np.linalg.norm(pin.log3(error.rotation)) < 1e-3
        )
    return ik_stats(times, ok, [])


def dls(
    model: pin.Model,
    data: pin.Data,
    frame: int,
    target: pin.SE3,
    q: np.ndarray,
    iterations: int = 200,
    damping: float = 1e-6,
) -> np.ndarray:
    for _ in range(iterations):
        pin.forwardKinematics(model, data, q)
        pin.updateFramePlacement(model, data, frame)
        current_from_target = data.oMf[frame].actInv(target)
        err = pin.log(current_from_target).vector
        if np.linalg.norm(err[:3]) < 1e-5 and np.linalg.norm(err[3:]) < 1e-4:
            break
        J = pin.computeFrameJacobian(model, data, q, frame)
        J = -pin.Jlog6(current_from_target.inverse()) @ J
        v = -J.T @ np.linalg.solve(J @ J.T + damping * np.eye(6), err)
        q = np.clip(pin.integrate(model, q, v), model.lowerPositionLimit, model.upperPositionLimit)
    return q
