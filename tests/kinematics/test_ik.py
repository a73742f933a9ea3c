"""Inverse kinematics: round trips, limits, redundancy, branch jumps, restarts and failures."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kinematics import (
    ConstantMotor,
    JointLimit,
    JointMotor,
    KinematicsError,
    KinematicTree,
    Link,
    Pose,
    UnknownNameError,
    load_tree,
    solve_ik,
)
from kinematics import _layout as kern
from kinematics.ik import IKOptions

ROBOTS = Path(__file__).resolve().parents[2] / "config" / "robots"
CHAINS = {"panda": ("panda.urdf", "panda_link8"), "ur5": ("ur5.urdf", "tool0")}


@pytest.fixture(scope="module", params=sorted(CHAINS))
def arm(request: pytest.FixtureRequest) -> tuple[KinematicTree, str]:
    filename, link = CHAINS[request.param]
    return load_tree(ROBOTS / filename), link


@pytest.fixture(scope="module")
def panda() -> KinematicTree:
    return load_tree(ROBOTS / "panda.urdf")


def random_q(tree: KinematicTree, rng: np.random.Generator, margin: float = 0.0) -> np.ndarray:
    lower, upper = tree.limits.lower, tree.limits.upper
    span = upper - lower
    return rng.uniform(lower + margin * span, upper - margin * span)


def test_seeded_round_trips_reach_the_target_without_jumping(
    arm: tuple[KinematicTree, str],
) -> None:
    tree, link = arm
    rng = np.random.default_rng(7)
    for _ in range(100):
        q_true = random_q(tree, rng)
        target = tree.fk(q_true, link)
        seed = tree.limits.clamp(q_true + rng.normal(0.0, 0.05, tree.dof))
        result = solve_ik(tree, target, seed, link)
        assert result.success, result.message
        reached = tree.fk(result.q, link)
        distance, angle = reached.distance_to(target)
        assert distance <= 1e-5
        assert angle <= 1e-4
        assert result.position_error == pytest.approx(distance, abs=1e-12)
        assert tree.limits.within(result.q)
        assert np.max(np.abs(result.q - seed)) < 0.2


def test_random_seeds_converge_within_limits(arm: tuple[KinematicTree, str]) -> None:
    tree, link = arm
    rng = np.random.default_rng(11)
    options = IKOptions(time_budget_s=1.0)
    for _ in range(50):
        target = tree.fk(random_q(tree, rng), link)
        result = solve_ik(tree, target, random_q(tree, rng), link, options)
        assert result.success, result.message
        assert tree.limits.within(result.q)


def test_position_only_targets_ignore_orientation(arm: tuple[KinematicTree, str]) -> None:
    tree, link = arm
    rng = np.random.default_rng(3)
    q_true = random_q(tree, rng, margin=0.1)
    position = tree.fk(q_true, link).translation
    seed = tree.limits.clamp(q_true + 0.3)
    result = solve_ik(tree, position, seed, link)
    assert result.success, result.message
    assert result.rotation_error == 0.0
    np.testing.assert_allclose(tree.fk(result.q, link).translation, position, atol=1e-5)


def test_jacobian_transpose_method_converges(arm: tuple[KinematicTree, str]) -> None:
    tree, link = arm
    rng = np.random.default_rng(5)
    q_true = random_q(tree, rng, margin=0.1)
    target = tree.fk(q_true, link).translation
    seed = tree.limits.clamp(q_true + rng.normal(0.0, 0.05, tree.dof))
    options = IKOptions(method="transpose", max_iterations=5000, restarts=False)
    result = solve_ik(tree, target, seed, link, options)
    assert result.success, result.message
    assert result.position_error <= 1e-5


def test_every_iterate_stays_within_the_limits(panda: KinematicTree) -> None:
    """Stopping the solver after k iterations exposes its k-th iterate: none leaves the limits,
    even toward a target that would need a joint beyond them."""
    rng = np.random.default_rng(2)
    q_true = random_q(panda, rng)
    q_true[3] = panda.limits.upper[3] + 0.4  # joint 4 past its upper limit
    target = panda.fk(q_true, "panda_link8")
    seed = panda.limits.clamp(q_true)
    for k in range(1, 30):
        options = IKOptions(max_iterations=k, restarts=False, null_space_gain=0.0)
        result = solve_ik(panda, target, seed, "panda_link8", options)
        assert panda.limits.within(result.q), (k, panda.limits.check(result.q))
    assert not result.success


def test_joints_that_do_not_move_the_link_keep_their_seed(panda: KinematicTree) -> None:
    rng = np.random.default_rng(4)
    q_true = random_q(panda, rng)
    seed = panda.limits.clamp(q_true + 0.05)
    seed[panda.joint_names.index("panda_finger_joint1")] = 0.03
    result = solve_ik(panda, panda.fk(q_true, "panda_link8"), seed, "panda_link8")
    assert result.success
    assert result.q[panda.joint_names.index("panda_finger_joint1")] == 0.03


def test_held_joints_keep_their_seed_and_the_others_reach_the_target(panda: KinematicTree) -> None:
    """A joint that moves the link, held (a gripper joint on the tool's chain): the target is
    reached with the others; it comes back exactly at its seed, restarts included."""
    rng = np.random.default_rng(5)
    held = panda.joint_names.index("panda_joint7")
    for _ in range(20):
        q_true = random_q(panda, rng, margin=0.1)
        seed = panda.limits.clamp(q_true + rng.normal(0.0, 0.3, panda.dof))
        seed[held] = q_true[held] + 0.2  # off the solution it came from: still reachable
        position = panda.fk(q_true, "panda_link8").translation
        result = solve_ik(panda, position, seed, "panda_link8", hold=["panda_joint7"])
        assert result.success, result.message
        assert result.q[held] == seed[held]
        assert np.linalg.norm(panda.fk(result.q, "panda_link8").translation - position) <= 1e-5
    with pytest.raises(KinematicsError, match=r"hold: unknown joints \['nope'\]"):
        solve_ik(panda, position, seed, "panda_link8", hold=["nope"])


def test_redundant_arm_ends_at_least_as_close_to_the_seed_as_without_null_space_term(
    panda: KinematicTree,
) -> None:
    rng = np.random.default_rng(9)
    closer = 0
    for _ in range(30):
        q_true = random_q(panda, rng, margin=0.15)
        target = panda.fk(q_true, "panda_link8")
        seed = panda.limits.clamp(q_true + rng.normal(0.0, 0.2, panda.dof))
        plain = solve_ik(panda, target, seed, "panda_link8", IKOptions(null_space_gain=0.0))
        nearest = solve_ik(panda, target, seed, "panda_link8")
        assert plain.success
        assert nearest.success
        d_plain = np.linalg.norm(plain.q - seed)
        d_nearest = np.linalg.norm(nearest.q - seed)
        assert d_nearest <= d_plain + 1e-9
        closer += d_nearest < d_plain - 1e-6
    assert closer > 0  # the null-space term does real work on a 7-DOF arm


def test_max_joint_change_fails_rather_than_jump_to_another_branch(panda: KinematicTree) -> None:
    q_seed = np.array([0.0, -0.3, 0.0, -2.0, 0.0, 1.8, 0.8, 0.0])
    q_far = q_seed.copy()
    q_far[0] += 0.6
    target = panda.fk(q_far, "panda_link8")
    options = IKOptions(max_joint_change=0.1)
    result = solve_ik(panda, target, q_seed, "panda_link8", options)
    assert not result.success
    assert np.max(np.abs(result.q - q_seed)) <= 0.1 + 1e-12
    assert "did not converge" in result.message
    assert solve_ik(panda, target, q_seed, "panda_link8").success


def test_unreachable_target_is_a_failure_never_a_success(arm: tuple[KinematicTree, str]) -> None:
    tree, link = arm
    seed = tree.limits.clamp(np.zeros(tree.dof))
    target = Pose([3.0, 0.0, 0.5])
    result = solve_ik(tree, target, seed, link, IKOptions(time_budget_s=0.005))
    assert not result.success
    assert result.position_error > 1.0
    assert np.all(np.isfinite(result.q))
    assert tree.limits.within(result.q)
    assert result.attempts >= 1


def test_singular_target_is_handled_without_exceptions() -> None:
    tree = load_tree(ROBOTS / "ur5.urdf")
    stretched = np.array([0.0, -math.pi / 2, 0.0, -math.pi / 2, 0.0, 0.0])  # arm straight up
    target = tree.fk(stretched, "tool0")
    result = solve_ik(tree, target, stretched, "tool0")
    assert result.success
    reach = tree.fk(stretched, "tool0")
    beyond = Pose(reach.translation + np.array([0.0, 0.0, 0.05]), reach.quaternion)
    result = solve_ik(tree, beyond, stretched, "tool0", IKOptions(time_budget_s=0.005))
    assert not result.success
    assert np.all(np.isfinite(result.q))


def planar_continuous_arm() -> KinematicTree:
    return KinematicTree(
        [
            Link("base", None),
            Link("j1", "base", JointMotor("revolute", (0, 0, 1))),
            Link("arm", "j1", ConstantMotor(Pose([0.5, 0.0, 0.0]))),
            Link("j2", "arm", JointMotor("revolute", (0, 0, 1), limits=JointLimit(-2.0, 2.0))),
            Link("tool", "j2", ConstantMotor(Pose([0.3, 0.0, 0.0]))),
        ]
    )


def test_continuous_joints_come_back_near_the_seed() -> None:
    tree = planar_continuous_arm()
    seed = np.array([6.0, 0.3])  # a continuous joint well past 2π
    target = tree.fk(np.array([6.2, 0.5]), "tool").translation
    result = solve_ik(tree, target, seed, "tool", IKOptions(restarts=False))
    assert result.success
    assert abs(result.q[0] - seed[0]) <= math.pi
    assert result.q[0] == pytest.approx(6.2, abs=1e-4)


@settings(max_examples=40, deadline=None)
@given(
    q=st.tuples(st.floats(-math.pi, math.pi), st.floats(-2.0, 2.0)),
    noise=st.floats(-0.1, 0.1),
)
def test_planar_round_trip_property(q: tuple[float, float], noise: float) -> None:
    tree = planar_continuous_arm()
    target = tree.fk(np.array(q), "tool")
    seed = tree.limits.clamp(np.array(q) + noise)
    result = solve_ik(tree, target, seed, "tool")
    assert result.success
    assert tree.fk(result.q, "tool").is_close(target, position_tol=1e-5, rotation_tol=1e-4)


def test_invalid_input_raises() -> None:
    tree = planar_continuous_arm()
    with pytest.raises(KinematicsError, match="finite"):
        solve_ik(tree, [math.nan, 0.0, 0.0], [0.0, 0.0], "tool")
    with pytest.raises(KinematicsError, match="shape"):
        solve_ik(tree, [0.5, 0.0, 0.0], [0.0, 0.0, 0.0], "tool")
    with pytest.raises(KinematicsError, match="finite"):
        solve_ik(tree, [0.5, 0.0, 0.0], [math.inf, 0.0], "tool")
    with pytest.raises(UnknownNameError, match="'nope'"):
        solve_ik(tree, [0.5, 0.0, 0.0], [0.0, 0.0], "nope")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("position_tolerance", 0.0),
        ("rotation_tolerance", -1.0),
        ("max_iterations", 0),
        ("null_space_gain", 1.5),
        ("max_joint_change", 0.0),
        ("time_budget_s", math.nan),
        ("method", "newton"),
    ],
)
def test_invalid_options_name_the_field(field: str, value: object) -> None:
    with pytest.raises(KinematicsError, match=field):
        IKOptions(**{field: value})  # type: ignore[arg-type]


def test_kernel_parameter_layout_is_complete() -> None:
    assert kern.N_PARAMS == kern.P_MAX_CHANGE + 1
