"""The mujoco driver's gravity against Pinocchio's, from the same URDF files: the model MuJoCo
builds carries the URDF's inertials unchanged, and the efforts an arm on servos reports at rest
are Pinocchio's g(q) at the measured positions, within each joint's Coulomb friction (the
actuator torque τ and friction balance gravity at rest: |τ - g(q)| ≤ friction)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mujoco", reason="the mujoco driver needs MuJoCo: pip install -e '.[physics]'")
pytest.importorskip("pinocchio", reason="Pinocchio is the peer: pip install pin")

import pinocchio as pin

from drivers.mujoco.driver import MujocoDriver
from tests.drivers.mujoco_scenes import config, driver, move, params, pose

CONFIGS = ("so101_physics.yaml", "ur5_physics.yaml")
AT_REST_RAD_S = 1e-3  # see tests/drivers/test_mujoco.py


class PinocchioGravity:
    """g(q) of a URDF by Pinocchio, for a driver's devices (by their joints)."""

    def __init__(self, d: MujocoDriver) -> None:
        self.model = pin.buildModelFromUrdf(d.params.urdf)
        self.data = self.model.createData()
        self.devices = d.device_names
        joints = [
            self.model.joints[self.model.getJointId(d.params.joint_of(n))] for n in d.device_names
        ]
        self.idx_q = [j.idx_q for j in joints]
        self.idx_v = [j.idx_v for j in joints]

    def __call__(self, positions: dict[str, float]) -> dict[str, float]:
        q = pin.neutral(self.model)
        q[self.idx_q] = [positions[n] for n in self.devices]
        g = pin.computeGeneralizedGravity(self.model, self.data, q)
        return dict(zip(self.devices, g[self.idx_v].tolist(), strict=True))


@pytest.mark.parametrize("name", CONFIGS)
def test_mujoco_gravity_is_pinocchios_at_every_named_pose_and_random_ones(name: str) -> None:
    d = driver(params(name))
    peer = PinocchioGravity(d)
    rng = np.random.default_rng(7)
    ranges = d.scene.model.jnt_range[
        [d.scene.model.joint(d.params.joint_of(n)).id for n in d.device_names]
    ]
    poses = [pose(p, name) for p in config(name)["poses"]]
    poses += [
        dict(zip(d.device_names, rng.uniform(ranges[:, 0], ranges[:, 1]), strict=True))
        for _ in range(20)
    ]
    for positions in poses:
        q = d.physics.snapshot.position.copy()
        for i, n in enumerate(d.device_names):
            q[i] = positions.get(n, q[i])
        ours = dict(zip(d.device_names, d.physics.gravity_torques(q).tolist(), strict=True))
        theirs = peer(dict(zip(d.device_names, q.tolist(), strict=True)))
        for n in d.device_names:
            # Both are the same sums of m·g·lever over the same inertials: rounding only.
            assert ours[n] == pytest.approx(theirs[n], abs=1e-9 * (1 + abs(theirs[n]))), (name, n)


async def test_servo_efforts_at_rest_are_pinocchios_gravity_torques() -> None:
    name = "so101_physics.yaml"
    d = driver(params(name))
    peer = PinocchioGravity(d)
    async with d:
        await d.enable()
        for target in ("ready", "over_cube", "grasp_cube"):
            await move(d, pose(target, name), duration_s=1.5)
            d.advance(1.5)
            states = await d.read()
            gravity = peer({n: s.position for n, s in states.items()})
            for device, state in states.items():
                spec = d.params.devices[device]
                assert abs(state.velocity) < AT_REST_RAD_S
                bound = spec.friction + (spec.kd + spec.damping) * AT_REST_RAD_S
                assert state.effort == pytest.approx(gravity[device], abs=bound), (target, device)
            assert abs(gravity["elbow_flex"]) > 10 * d.params.devices["elbow_flex"].friction
