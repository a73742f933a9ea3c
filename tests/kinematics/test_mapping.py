"""Chain mapping: the family of rotations of one vector pair, the turn one joint can make, and
whole chains mapped back from our own arms' scaled FK; degenerate and unreachable inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
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
)
from kinematics.mapping import (
    ChainMapping,
    MappingOptions,
    map_chain,
    rotation_about_axis,
    rotation_family,
)
from kinematics.quaternion import quat_from_axis_angle, quat_rotate

TOL = 1e-9
UR5_KEYPOINTS = ("upper_arm_link", "forearm_link", "wrist_2_link", "tool0")
PANDA_KEYPOINTS = ("panda_link2", "panda_link3", "panda_link4", "panda_link6", "panda_link8")

coordinate = st.floats(-1e3, 1e3, allow_nan=False)
vectors = st.tuples(coordinate, coordinate, coordinate).map(np.array)
phis = st.floats(-2 * math.pi, 2 * math.pi, allow_nan=False)


def angle_between(x: np.ndarray, y: np.ndarray) -> float:
    return math.atan2(float(np.linalg.norm(np.cross(x, y))), float(np.dot(x, y)))


def unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def rotation_angle(q: np.ndarray) -> float:
    """The angle in [0, π] of a unit quaternion."""
    return 2.0 * math.atan2(float(np.linalg.norm(q[1:])), abs(float(q[0])))


def assert_member_maps(a: np.ndarray, b: np.ndarray, phi: float) -> None:
    family = rotation_family(a, b)
    q = family.quaternion(phi)
    assert np.all(np.isfinite(q))
    assert np.linalg.norm(q) == pytest.approx(1.0, abs=TOL)
    assert np.linalg.norm(quat_rotate(q, unit(a)) - unit(b)) < TOL
    axis, theta = family.axis(phi), family.angle(phi)
    np.testing.assert_allclose(quat_from_axis_angle(axis, theta), q, atol=TOL)
    assert abs(float(axis @ family.a) - float(axis @ family.b)) < TOL or family.kind == "parallel"


# -- one vector pair -------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(vectors, vectors, phis)
def test_every_member_maps_a_onto_b(a: np.ndarray, b: np.ndarray, phi: float) -> None:
    assume(np.linalg.norm(a) > 1e-6 and np.linalg.norm(b) > 1e-6)
    assert_member_maps(a, b, phi)


@settings(max_examples=300, deadline=None)
@given(
    vectors,
    st.tuples(coordinate, coordinate, coordinate).map(np.array),
    st.floats(1e-17, 1e-5),
    st.sampled_from([1.0, -1.0]),
    st.floats(0.01, 100.0),
    phis,
)
def test_members_of_near_degenerate_pairs_map_a_onto_b(
    a: np.ndarray, noise: np.ndarray, size: float, sign: float, scale: float, phi: float
) -> None:
    """b within `size` rad of ±a: nearly parallel and nearly antiparallel pairs."""
    assume(np.linalg.norm(a) > 1e-6 and np.linalg.norm(noise) > 1e-6)
    b = sign * scale * (unit(a) + size * unit(noise))
    assert_member_maps(a, b, phi)


@settings(max_examples=200, deadline=None)
@given(vectors, vectors, phis)
def test_the_minimal_member_has_the_smallest_angle(
    a: np.ndarray, b: np.ndarray, phi: float
) -> None:
    assume(np.linalg.norm(a) > 1e-6 and np.linalg.norm(b) > 1e-6)
    family = rotation_family(a, b)
    minimal = rotation_angle(family.minimal())
    assert minimal == pytest.approx(angle_between(a, b), abs=TOL)
    assert minimal == pytest.approx(family.angle_between, abs=TOL)
    assert minimal <= rotation_angle(family.quaternion(phi)) + TOL


def test_the_family_of_a_general_pair_spans_the_bisecting_plane() -> None:
    family = rotation_family([1.0, 0.0, 0.0], [0.0, 2.0, 0.0])
    assert family.kind == "general"
    np.testing.assert_allclose(family.m, unit(np.array([1.0, 1.0, 0.0])), atol=TOL)
    np.testing.assert_allclose(family.c, [0.0, 0.0, 1.0], atol=TOL)
    assert family.angle(math.pi / 2) == pytest.approx(math.pi / 2, abs=TOL)
    assert family.angle(0.0) == pytest.approx(math.pi, abs=TOL)  # the half turn about m̂


@pytest.mark.parametrize("phi", [0.0, 0.3, math.pi / 2, 2.0, 4.0])
def test_parallel_pair_members_are_turns_about_a(phi: float) -> None:
    family = rotation_family([0.0, 3.0, 4.0], [0.0, 0.6, 0.8])
    assert family.kind == "parallel"
    assert family.angle_between == 0.0
    np.testing.assert_allclose(family.axis(phi), [0.0, 0.6, 0.8], atol=TOL)
    assert family.angle(phi) == pytest.approx(math.pi - 2 * phi, abs=TOL)
    assert_member_maps(np.array([0.0, 3.0, 4.0]), np.array([0.0, 0.6, 0.8]), phi)
    np.testing.assert_allclose(family.minimal(), [1.0, 0.0, 0.0, 0.0], atol=TOL)


@pytest.mark.parametrize("phi", [0.0, 0.3, math.pi / 2, 2.0, 4.0])
def test_antiparallel_pair_members_are_half_turns_about_axes_perpendicular_to_a(
    phi: float,
) -> None:
    a = np.array([1.0, -2.0, 0.5])
    family = rotation_family(a, -3.0 * a)
    assert family.kind == "antiparallel"
    assert family.angle_between == pytest.approx(math.pi, abs=TOL)
    assert family.angle(phi) == pytest.approx(math.pi, abs=TOL)
    assert float(family.axis(phi) @ a) == pytest.approx(0.0, abs=TOL)
    assert_member_maps(a, -3.0 * a, phi)


@pytest.mark.parametrize(
    ("a", "b", "message"),
    [
        ([0.0, 0.0, 0.0], [1.0, 0.0, 0.0], "a: [0, 0, 0] has no direction"),
        ([1.0, 0.0, 0.0], [0.0, 0.0, 0.0], "b: [0, 0, 0] has no direction"),
        ([1.0, math.nan, 0.0], [1.0, 0.0, 0.0], "a: [1.0, nan, 0.0] must be 3 finite numbers"),
        ([1.0, 0.0], [1.0, 0.0, 0.0], "a: [1.0, 0.0] must be 3 finite numbers"),
    ],
)
def test_vectors_without_a_direction_are_errors(
    a: list[float], b: list[float], message: str
) -> None:
    with pytest.raises(KinematicsError, match=message.replace("[", r"\[")):
        rotation_family(a, b)


def test_tiny_and_huge_vectors_have_directions() -> None:
    family = rotation_family([1e-300, 0.0, 0.0], [0.0, 1e300, 1e300])
    assert_member_maps(np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 1.0]), 0.7)
    assert family.angle_between == pytest.approx(math.pi / 2, abs=TOL)


# -- one joint's axis ------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(vectors, vectors, phis)
def test_an_axis_in_the_bisecting_plane_realises_its_member(
    a: np.ndarray, b: np.ndarray, phi: float
) -> None:
    assume(np.linalg.norm(a) > 1e-6 and np.linalg.norm(b) > 1e-6)
    family = rotation_family(a, b)
    assume(family.kind == "general")
    axis = family.axis(phi)
    turn = rotation_about_axis(a, b, axis)
    assert turn.residual < TOL
    # the angle is well-conditioned only where â is not (nearly) along the axis
    assume(np.linalg.norm(np.cross(family.a, axis)) > 1e-3)
    assert turn.determined
    assert math.remainder(turn.angle - family.angle(phi), 2 * math.pi) == pytest.approx(0, abs=1e-9)


@settings(max_examples=200, deadline=None)
@given(vectors, vectors, vectors)
def test_the_closest_turn_about_an_axis_leaves_the_cone_angle_difference(
    a: np.ndarray, b: np.ndarray, axis: np.ndarray
) -> None:
    assume(min(np.linalg.norm(a), np.linalg.norm(b), np.linalg.norm(axis)) > 1e-3)
    assume(np.linalg.norm(np.cross(unit(a), unit(axis))) > 1e-3)
    assume(np.linalg.norm(np.cross(unit(b), unit(axis))) > 1e-3)
    turn = rotation_about_axis(a, b, axis)
    expected = abs(angle_between(a, axis) - angle_between(b, axis))
    assert turn.residual == pytest.approx(expected, abs=1e-7)
    for delta in (-1e-3, 1e-3, 0.5, math.pi):  # no other turn does better
        other = quat_rotate(quat_from_axis_angle(axis, turn.angle + delta), unit(a))
        assert angle_between(other, b) >= turn.residual - 1e-9


def test_a_vector_along_the_axis_leaves_the_turn_undetermined() -> None:
    turn = rotation_about_axis([0.0, 0.0, 2.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0], preferred=0.4)
    assert not turn.determined
    assert turn.angle == 0.4
    assert turn.residual == pytest.approx(math.pi / 2, abs=TOL)


# -- chains: round trips ---------------------------------------------------------------------------


def scaled_targets(tree: KinematicTree, links: tuple[str, ...], q: np.ndarray, rng) -> np.ndarray:  # type: ignore[no-untyped-def]
    """Our keypoints at q, every segment scaled by a random factor in [0.3, 3], moved anywhere."""
    points = np.array([tree.fk(q, link).translation for link in links])
    segments = np.diff(points, axis=0) * rng.uniform(0.3, 3.0, (len(links) - 1, 1))
    start = rng.uniform(-5.0, 5.0, 3)
    return np.vstack((start, start + np.cumsum(segments, axis=0)))


def directions_error(
    tree: KinematicTree, links: tuple[str, ...], q: np.ndarray, targets: np.ndarray
) -> float:
    """The worst angle between our segments at q and the targets' (independent of the mapping)."""
    ours = np.diff([tree.fk(q, link).translation for link in links], axis=0)
    theirs = np.diff(targets, axis=0)
    return max(angle_between(o, t) for o, t in zip(ours, theirs, strict=True))


def assert_valid(result: ChainMapping, tree: KinematicTree) -> None:
    assert np.all(np.isfinite(result.q))
    assert np.all(np.isfinite(result.segment_errors))
    assert np.all(np.isfinite(result.joint_residuals))
    assert tree.limits.within(result.q)


def round_trip(
    tree: KinematicTree, links: tuple[str, ...], seed_from_truth: tuple[str, ...], rng_seed: int
) -> tuple[ChainMapping, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(rng_seed)
    q_true = rng.uniform(tree.limits.lower, tree.limits.upper)
    targets = scaled_targets(tree, links, q_true, rng)
    seed = rng.uniform(tree.limits.lower, tree.limits.upper)
    for joint in seed_from_truth:
        i = tree.joint_names.index(joint)
        seed[i] = q_true[i]
    result = map_chain(tree, links, targets, seed)
    assert_valid(result, tree)
    assert result.success, result.message
    assert directions_error(tree, links, result.q, targets) < 1e-6
    assert result.worst_error < 1e-6
    return result, q_true, seed, targets


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_ur5_maps_back_from_its_own_scaled_fk(ur5: KinematicTree, rng_seed: int) -> None:
    """Keypoints at the shoulder (upper_arm_link: the lift joint, offset from the pan axis), the
    elbow, the wrist centre (wrist_2_link) and the flange (tool0). Each segment starts at the joint
    that turns it whole: pan+lift set the upper arm, the elbow the forearm, wrist 1+2 the last
    segment (wrist 1 moves wrist_2_link along its own axis only, so the forearm leaves it free).
    tool0 lies on the wrist 3 axis: no direction decides wrist 3, which keeps the seed."""
    result, _, seed, _ = round_trip(ur5, UR5_KEYPOINTS, (), rng_seed)
    np.testing.assert_array_equal(result.determined, [True] * 5 + [False])
    assert result.q[5] == seed[5]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_panda_maps_back_from_its_own_scaled_fk(panda: KinematicTree, rng_seed: int) -> None:
    """Keypoints at joints 1/2, 3, 4, 5/6 and the flange: each segment starts at its joint
    (panda_link3 → panda_link4 is the 0.0825 m elbow offset that fixes joint 3). Joint 7 turns
    the flange about its own axis and the fingers are prismatic: both keep the seed."""
    result, _, seed, _ = round_trip(panda, PANDA_KEYPOINTS, (), rng_seed)
    np.testing.assert_array_equal(result.determined, [True] * 6 + [False, False])
    np.testing.assert_array_equal(result.q[6:], seed[6:])


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_panda_shoulder_elbow_wrist_flange_with_joint_3_at_the_seed(
    panda: KinematicTree, rng_seed: int
) -> None:
    """Without a keypoint at panda_link3 the upper-arm direction leaves joint 3 free (joints 1
    and 2 reach it for any joint 3): it keeps the seed, which the test takes from the truth."""
    links = ("panda_link2", "panda_link4", "panda_link6", "panda_link8")
    result, q_true, _, _ = round_trip(panda, links, ("panda_joint3", "panda_joint7"), rng_seed)
    assert result.q[2] == q_true[2]


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_prismatic_and_mimic_joints(slider_mimic: KinematicTree, rng_seed: int) -> None:
    """turntable → elbow is turned by the turntable and by the prismatic slide, which keeps the
    seed (taken from the truth); elbow → tip is turned whole by the mimic 'wrist' that the
    turntable drives. The tip lies on the elbow's axis: the elbow keeps the seed."""
    links = ("turntable", "elbow", "tip")
    result, _, seed, _ = round_trip(slider_mimic, links, ("slide",), rng_seed)
    np.testing.assert_array_equal(result.q[1:], seed[1:])
    np.testing.assert_array_equal(result.determined, [True, False, False])


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_joints_inside_a_segment_are_refined(panda: KinematicTree, rng_seed: int) -> None:
    """panda_link3 → panda_link5 is turned whole by joint 3 and swung by joint 4 (0.0825 m off
    its start), panda_link5 → panda_link8 likewise by joints 5 and 6: no closed form, the
    Gauss–Newton refinement aligns them from a seed near the truth."""
    links = ("panda_link2", "panda_link3", "panda_link5", "panda_link8")
    rng = np.random.default_rng(rng_seed)
    lower, upper = panda.limits.lower, panda.limits.upper
    q_true = rng.uniform(lower, upper)
    targets = scaled_targets(panda, links, q_true, rng)
    seed = np.clip(q_true + rng.uniform(-0.3, 0.3, panda.dof), lower, upper)
    result = map_chain(panda, links, targets, seed)
    assert_valid(result, panda)
    assert result.success, result.message
    assert directions_error(panda, links, result.q, targets) < 1e-6


def test_a_seed_in_the_target_shape_is_kept(ur5: KinematicTree) -> None:
    q = np.array([0.3, -1.2, 1.4, -0.5, 1.1, 0.2])
    targets = np.array([ur5.fk(q, link).translation for link in UR5_KEYPOINTS])
    result = map_chain(ur5, UR5_KEYPOINTS, 2.0 * targets, q)
    np.testing.assert_allclose(result.q, q, atol=1e-9)
    assert result.worst_error < 1e-9


def test_the_solution_closest_to_the_seed_wins(ur5: KinematicTree) -> None:
    """The upper arm's direction has two (pan, lift) solutions: the one near the seed is kept."""
    q = np.array([0.3, -1.2, 1.4, -0.5, 1.1, 0.2])
    targets = np.array([ur5.fk(q, link).translation for link in UR5_KEYPOINTS])
    near = map_chain(ur5, UR5_KEYPOINTS, targets, q + 0.2)
    np.testing.assert_allclose(near.q[:5], q[:5], atol=1e-9)


def test_held_joints_keep_the_seed(ur5: KinematicTree) -> None:
    q = np.array([0.3, -1.2, 1.4, -0.5, 1.1, 0.2])
    targets = np.array([ur5.fk(q, link).translation for link in UR5_KEYPOINTS])
    seed = q + 0.3
    result = map_chain(ur5, UR5_KEYPOINTS, targets, seed, hold=["shoulder_pan_joint"])
    assert result.q[0] == seed[0]
    assert not result.determined[0]
    assert_valid(result, ur5)


# -- chains: unreachable, limits, degenerate -------------------------------------------------------


def planar_arm(limit: JointLimit | None = None) -> KinematicTree:
    """Two revolute joints about z, 1 m links along x: it can only point in the xy plane."""
    limit = limit or JointLimit()
    return KinematicTree(
        [
            Link("base", None),
            Link("l1", "base", JointMotor("revolute", (0, 0, 1), limits=limit)),
            Link("l2", "l1", JointMotor("revolute", (0, 0, 1), Pose((1.0, 0, 0)), limits=limit)),
            Link("tip", "l2", ConstantMotor(Pose((1.0, 0, 0)))),
        ]
    )


def test_a_direction_the_axes_cannot_produce_leaves_a_residual() -> None:
    arm = planar_arm()
    targets = [[0, 0, 0], [1, 1, 1], [1, 1, 5]]  # out of the plane, then straight up
    result = map_chain(arm, ["l1", "l2", "tip"], targets, [0.2, -0.1])
    assert_valid(result, arm)
    assert not result.success
    assert result.segment_errors[0] == pytest.approx(math.atan2(1, math.sqrt(2)), abs=1e-9)
    assert result.segment_errors[1] == pytest.approx(math.pi / 2, abs=1e-9)
    np.testing.assert_allclose(result.joint_residuals, result.segment_errors, atol=1e-12)
    assert result.q[0] == pytest.approx(math.pi / 4, abs=1e-9)  # the closest turn about z
    assert "rad from the target direction" in result.message


def test_ur5_elbow_cannot_leave_its_plane(ur5: KinematicTree) -> None:
    q = np.array([0.3, -1.2, 1.4, -0.5, 1.1, 0.2])
    targets = np.array([ur5.fk(q, link).translation for link in UR5_KEYPOINTS])
    targets[2:] += np.cross(targets[2] - targets[1], targets[1] - targets[0]) * 2  # off-plane
    result = map_chain(ur5, UR5_KEYPOINTS, targets, q)
    assert_valid(result, ur5)
    assert not result.success
    assert result.segment_errors[1] > 0.1
    assert result.joint_residuals[2] == result.segment_errors[1]


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_random_shapes_give_finite_results_within_the_limits(
    panda: KinematicTree, rng_seed: int
) -> None:
    rng = np.random.default_rng(rng_seed)
    targets = rng.uniform(-1.0, 1.0, (len(PANDA_KEYPOINTS), 3))
    seed = rng.uniform(panda.limits.lower - 1.0, panda.limits.upper + 1.0)  # even outside
    result = map_chain(panda, PANDA_KEYPOINTS, targets, seed, options=MappingOptions(1e-3))
    assert_valid(result, panda)
    assert directions_error(panda, PANDA_KEYPOINTS, result.q, targets) == pytest.approx(
        result.worst_error, abs=1e-9
    )


def test_limits_clip_the_turn() -> None:
    arm = planar_arm(JointLimit(-0.5, 0.5))
    targets = [[0, 0, 0], [math.cos(2.0), math.sin(2.0), 0.0], [0, 0, 0]]
    result = map_chain(arm, ["l1", "l2", "tip"], targets, [0.0, 0.0])
    assert_valid(result, arm)
    assert result.q[0] == 0.5
    assert result.segment_errors[0] == pytest.approx(1.5, abs=1e-9)


@pytest.mark.parametrize(
    ("lower", "upper", "seed", "expected"),
    [
        (0.0, 6.5, 0.0, 2 * math.pi - 1.0),  # -1 is outside: its turn + 2π is not
        (-7.0, 7.0, 5.0, 2 * math.pi - 1.0),  # both fit: the one nearer the seed
        (-7.0, 7.0, -2.0, -1.0),
    ],
)
def test_the_turn_inside_the_limits_closest_to_the_seed(
    lower: float, upper: float, seed: float, expected: float
) -> None:
    arm = planar_arm(JointLimit(lower, upper))
    targets = [[0, 0, 0], [math.cos(-1.0), math.sin(-1.0), 0.0], [5, 5, 0]]
    result = map_chain(arm, ["l1", "l2"], targets[:2], [seed, 0.0])
    assert result.success
    assert result.q[0] == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize(
    ("links", "targets", "error", "message"),
    [
        (["l1"], [[0, 0, 0]], KinematicsError, r"links: \['l1'\] must name at least 2 links"),
        (["l2", "l1"], [[0, 0, 0], [1, 0, 0]], KinematicsError,
         "links\\[1\\]: 'l1' is not a descendant of 'l2'"),
        (["l1", "nope"], [[0, 0, 0], [1, 0, 0]], UnknownNameError, "unknown link 'nope'"),
        (["l1", "l2"], [[0, 0, 0]], KinematicsError, r"targets: shape \(1, 3\) must be \(2, 3\)"),
        (["l1", "l2"], [[0, 0, 0], [1, math.inf, 0]], KinematicsError, "finite"),
        (["l1", "l2"], [[1, 2, 3], [1, 2, 3]], KinematicsError,
         "targets\\[0\\] -> targets\\[1\\] \\('l1' -> 'l2'\\): 0 m apart, no direction"),
        (["base", "l1"], [[0, 0, 0], [1, 0, 0]], KinematicsError,
         "links 'base' and 'l1': their origins are 0 m apart"),
    ],
)  # fmt: skip
def test_invalid_chains_are_errors(
    links: list[str], targets: list[list[float]], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        map_chain(planar_arm(), links, targets, [0.0, 0.0])


def test_invalid_seed_and_hold_are_errors() -> None:
    arm = planar_arm()
    with pytest.raises(KinematicsError, match="seed"):
        map_chain(arm, ["l1", "l2"], [[0, 0, 0], [1, 0, 0]], [math.nan, 0.0])
    with pytest.raises(KinematicsError, match="shape"):
        map_chain(arm, ["l1", "l2"], [[0, 0, 0], [1, 0, 0]], [0.0])
    with pytest.raises(KinematicsError, match=r"hold: unknown joints \['wrist'\]"):
        map_chain(arm, ["l1", "l2"], [[0, 0, 0], [1, 0, 0]], [0.0, 0.0], hold=["wrist"])
    with pytest.raises(KinematicsError, match="tolerance"):
        MappingOptions(tolerance=0.0)


def test_huge_target_coordinates_keep_their_directions() -> None:
    arm = planar_arm()
    targets = [[-1e308, -1e308, 0.0], [1e308, 1e308, 0.0]]
    result = map_chain(arm, ["l1", "l2"], targets, [0.0, 0.0])
    assert result.success
    assert result.q[0] == pytest.approx(math.pi / 4, abs=1e-9)
