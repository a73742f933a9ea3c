"""`kinematics.dynamics` against Pinocchio (tests/peers/pinocchio_dynamics.py): inverse dynamics,
gravity torques, the mass matrix and the Coriolis matrix of the shipped arms and of arms from
example-robot-data, at random states, with and without a payload, mimic joints included.

For each quantity: largest error ≤ 1e-9 × its largest value + 1e-12 (the two compute the same
sums in different orders and frames; rounding gives ~1e-15 relative).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from kinematics import Inertial, JointMotor, KinematicTree, load_tree
from kinematics.dynamics import Dynamics
from tests.kinematics.conftest import DATA, ROBOTS
from tests.peers.pinocchio_dynamics import EXAMPLE_ROBOTS, PinocchioArm, coriolis_matrix_of

RELATIVE, ABSOLUTE = 1e-9, 1e-12
STATES = 12

ARMS = {
    # shipped
    "ur5": ROBOTS / "ur5.urdf",
    "panda": ROBOTS / "panda.urdf",  # branches (two fingers), one mimic joint
    "so101": ROBOTS / "so101.urdf",
    # example-robot-data: arms we did not write
    "kinova": EXAMPLE_ROBOTS / "robots/kinova_description/robots/kinova.urdf",  # continuous joints
    "xarm7": EXAMPLE_ROBOTS / "robots/xarm_description/urdf/xarm7.urdf",
    "z1": EXAMPLE_ROBOTS / "robots/z1_description/urdf/z1.urdf",
    "ur10": EXAMPLE_ROBOTS / "robots/ur_description/urdf/ur10_robot.urdf",
    "baxter": EXAMPLE_ROBOTS / "robots/baxter_description/urdf/baxter.urdf",  # two arms, mimics
    "tiago_pro": EXAMPLE_ROBOTS / "robots/tiago_pro_description/robots/tiago_pro.urdf",  # 10 mimics
    "talos": EXAMPLE_ROBOTS / "robots/talos_data/robots/talos_full_v2.urdf",  # mimics through G
    "a1": EXAMPLE_ROBOTS / "robots/a1_description/urdf/a1.urdf",  # four legs on a fixed trunk
    # every feature at once (prismatic on a slanted axis, mimic with offset, merged links)
    "features": DATA / "dynamics_features.urdf",
}
# Payload links: a tool frame (fixed to a moving link), a moving link, a link fixed to the root.
PAYLOAD_LINKS = {
    "ur5": ("tool0", "wrist_2_link", "base"),
    "panda": ("panda_hand_tcp", "panda_leftfinger", "panda_link0"),
    "so101": ("gripper_frame_link", "wrist_link", "base_link"),
    "features": ("tool", "follower", "stand"),
}


def close(ours: np.ndarray, reference: np.ndarray) -> None:
    bound = RELATIVE * float(np.max(np.abs(reference), initial=0.0)) + ABSOLUTE
    error = float(np.max(np.abs(ours - reference), initial=0.0))
    assert error <= bound, f"largest error {error:.3g} > {bound:.3g}"


def random_states(tree: KinematicTree, seed: int) -> list[tuple[np.ndarray, ...]]:
    """(q, qd, qdd): q uniform within the limits ([-π, π] where unbounded), qd, qdd ~ N(0, 1)."""
    rng = np.random.default_rng(seed)
    lower = np.where(np.isfinite(tree.limits.lower), tree.limits.lower, -math.pi)
    upper = np.where(np.isfinite(tree.limits.upper), tree.limits.upper, math.pi)
    return [
        (rng.uniform(lower, upper), rng.normal(size=tree.dof), rng.normal(size=tree.dof))
        for _ in range(STATES)
    ]


@pytest.fixture(scope="module", params=sorted(ARMS))
def arm(request: pytest.FixtureRequest) -> tuple[str, Dynamics, PinocchioArm]:
    path: Path = ARMS[request.param]
    tree = load_tree(path)
    return request.param, Dynamics(tree), PinocchioArm.load(path, tree)


def every_joint(peer: PinocchioArm, path: Path) -> PinocchioArm:
    """The peer without Pinocchio's own mimic joints, for its Coriolis matrix."""
    return peer if not peer.native_mimic else PinocchioArm.load(path, peer.tree, native_mimic=False)


def test_the_peer_models_the_same_degrees_of_freedom(
    arm: tuple[str, Dynamics, PinocchioArm],
) -> None:
    _, dynamics, peer = arm
    assert peer.G.shape[1] == dynamics.tree.dof
    moved = np.count_nonzero(peer.G, axis=0)
    assert np.all(moved >= 1)  # every armd DOF drives at least one Pinocchio joint


@pytest.mark.parametrize("gravity", [(0.0, 0.0, -9.81), (1.5, -2.0, -9.0)])
def test_against_pinocchio_without_payload(
    arm: tuple[str, Dynamics, PinocchioArm], gravity: tuple[float, float, float]
) -> None:
    name, dynamics, peer = arm
    model = peer.with_payload(None, None)
    model.gravity = pin.Motion(np.array(gravity), np.zeros(3))
    full = every_joint(peer, ARMS[name])
    full_model = full.with_payload(None, None)
    for q, qd, qdd in random_states(dynamics.tree, seed=len(name)):
        close(dynamics.rnea(q, qd, qdd, gravity=gravity), peer.rnea(model, q, qd, qdd))
        close(dynamics.gravity(q, gravity=gravity), peer.gravity(model, q))
        close(dynamics.mass_matrix(q), peer.mass_matrix(model, q))
        close(dynamics.coriolis_matrix(q, qd), coriolis_matrix_of(full, full_model, q, qd))


@pytest.mark.parametrize("name", sorted(PAYLOAD_LINKS))
@pytest.mark.parametrize("which", [0, 1, 2], ids=["tool frame", "moving link", "fixed to root"])
def test_against_pinocchio_with_a_payload(name: str, which: int) -> None:
    tree = load_tree(ARMS[name])
    dynamics, peer = Dynamics(tree), PinocchioArm.load(ARMS[name], tree)
    link = PAYLOAD_LINKS[name][which]
    load = Inertial(2.5, (0.03, -0.02, 0.08), (0.011, 0.001, -0.002, 0.014, 0.0015, 0.009))
    payload = dynamics.payload(link, load)
    model = peer.with_payload(link, load)
    full = every_joint(peer, ARMS[name])
    full_model = full.with_payload(link, load)
    for q, qd, qdd in random_states(tree, seed=7 + which):
        close(dynamics.rnea(q, qd, qdd, payload), peer.rnea(model, q, qd, qdd))
        close(dynamics.gravity(q, payload), peer.gravity(model, q))
        close(dynamics.mass_matrix(q, payload), peer.mass_matrix(model, q))
        close(dynamics.coriolis_matrix(q, qd, payload), coriolis_matrix_of(full, full_model, q, qd))


def test_a_point_mass_payload_on_the_ur5_tool_changes_the_shoulder_torque() -> None:
    """A 2 kg point at the UR5's tool0 (the daemon's case): Pinocchio agrees on the torque, and
    the change is the point's weight times its horizontal reach from the shoulder lift axis."""
    tree = load_tree(ARMS["ur5"])
    dynamics, peer = Dynamics(tree), PinocchioArm.load(ARMS["ur5"], tree)
    payload = dynamics.payload("tool0", Inertial(2.0))
    q = np.array([0.3, -0.9, 1.2, -0.4, 0.8, 0.1])
    change = dynamics.gravity(q, payload) - dynamics.gravity(q)
    close(dynamics.gravity(q, payload), peer.gravity(peer.with_payload("tool0", Inertial(2.0)), q))
    tool = tree.fk(q, "tool0").translation
    shoulder = tree.fk(q, "upper_arm_link")
    axis = shoulder.rotation_matrix @ np.array([0.0, 1.0, 0.0])  # shoulder_lift_joint's axis
    lever = np.cross(tool - shoulder.translation, 2.0 * np.array([0.0, 0.0, 9.81]))
    assert change[1] == pytest.approx(float(axis @ lever), rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("name", ["panda", "tiago_pro", "features", "talos"])
def test_mimic_joints_are_compared_both_ways(name: str) -> None:
    """Pinocchio's own mimic joints where its parser takes them (Panda, TIAGo Pro, the feature
    tree; TALOS's it refuses), and always every joint as Pinocchio's DOF with armd's mapped in
    through G (the Coriolis matrix is compared so): the mimic joints' columns of G carry their
    multipliers."""
    tree = load_tree(ARMS[name])
    mimics = {
        str(link.joint_name): link.motor.mimic
        for link in tree.links
        if isinstance(link.motor, JointMotor) and link.motor.mimic
    }
    assert mimics
    native = PinocchioArm.load(ARMS[name], tree)
    assert native.native_mimic == (name != "talos")
    full = PinocchioArm.load(ARMS[name], tree, native_mimic=False)
    for joint, mimic in mimics.items():
        row = full.model.joints[full.model.getJointId(joint)].idx_v
        column = tree.joint_names.index(mimic.joint)
        assert full.G[row].tolist() == [
            mimic.multiplier if k == column else 0.0 for k in range(tree.dof)
        ]
