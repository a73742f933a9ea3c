"""`Pose`: validation, immutability, composition against 4×4 matrices."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from kinematics import KinematicsError, Pose

TOL = 1e-12

translations = arrays(np.float64, 3, elements=st.floats(-5.0, 5.0))
quats = arrays(np.float64, 4, elements=st.floats(-1.0, 1.0)).filter(
    lambda q: np.linalg.norm(q) > 0.1
)
poses = st.builds(Pose, translations, quats)


def test_identity() -> None:
    pose = Pose.identity()
    np.testing.assert_array_equal(pose.matrix, np.eye(4))
    np.testing.assert_array_equal(pose.dual_quaternion, [1, 0, 0, 0, 0, 0, 0, 0])


@given(translations, quats)
def test_quaternion_is_normalised_and_arrays_are_read_only(t: np.ndarray, q: np.ndarray) -> None:
    pose = Pose(t, q)
    assert abs(np.linalg.norm(pose.quaternion) - 1.0) <= TOL
    assert pose.quaternion[0] >= 0.0  # canonical sign: q and -q are the same rotation
    expected = q / np.linalg.norm(q) * (1.0 if q[0] >= 0.0 else -1.0)
    np.testing.assert_allclose(pose.quaternion, expected, atol=TOL, rtol=0)
    with pytest.raises(ValueError, match="read-only"):
        pose.translation[0] = 1.0
    with pytest.raises(ValueError, match="read-only"):
        pose.quaternion[0] = 1.0


def test_pose_is_frozen_and_copies_its_input() -> None:
    t = np.array([1.0, 2.0, 3.0])
    pose = Pose(t)
    t[0] = 9.0
    assert pose.translation[0] == 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        pose.translation = np.zeros(3)  # type: ignore[misc]


@pytest.mark.parametrize(
    ("translation", "quaternion", "match"),
    [
        ([0.0, 0.0], [1.0, 0.0, 0.0, 0.0], "translation must have 3 elements"),
        ([0.0, 0.0, 0.0], [1.0, 0.0, 0.0], "quaternion must have 4 elements"),
        ([0.0, math.nan, 0.0], [1.0, 0.0, 0.0, 0.0], "translation must be finite"),
        ([0.0, 0.0, 0.0], [math.inf, 0.0, 0.0, 0.0], "quaternion must be finite"),
        ([0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], "quaternion must be non-zero"),
    ],
)
def test_invalid_poses_are_errors(
    translation: list[float], quaternion: list[float], match: str
) -> None:
    with pytest.raises(KinematicsError, match=match):
        Pose(translation, quaternion)


@given(poses, poses)
def test_composition_equals_the_matrix_product(a: Pose, b: Pose) -> None:
    np.testing.assert_allclose((a @ b).matrix, a.matrix @ b.matrix, atol=1e-11, rtol=0)


@given(poses)
def test_inverse_composes_to_identity(a: Pose) -> None:
    assert (a @ a.inverse()).is_close(Pose(), position_tol=1e-11, rotation_tol=1e-10)
    np.testing.assert_allclose(a.inverse().matrix, np.linalg.inv(a.matrix), atol=1e-11, rtol=0)


@given(poses)
def test_matrix_and_dual_quaternion_round_trip(a: Pose) -> None:
    assert Pose.from_matrix(a.matrix).is_close(a, position_tol=1e-11, rotation_tol=1e-10)
    assert Pose.from_dual_quaternion(a.dual_quaternion).is_close(
        a, position_tol=1e-11, rotation_tol=1e-10
    )
    np.testing.assert_allclose(a.rotation_matrix, a.matrix[:3, :3], atol=0, rtol=0)


@given(poses, arrays(np.float64, (4, 3), elements=st.floats(-10.0, 10.0)))
def test_transform_points_equals_the_matrix_times_the_point(a: Pose, points: np.ndarray) -> None:
    expected = points @ a.matrix[:3, :3].T + a.matrix[:3, 3]
    np.testing.assert_allclose(a.transform_points(points), expected, atol=1e-10, rtol=0)


def test_from_axis_angle() -> None:
    pose = Pose.from_axis_angle([1.0, 2.0, 3.0], [0.0, 0.0, 5.0], math.pi / 2)
    np.testing.assert_allclose(pose.translation, [1, 2, 3], atol=0, rtol=0)
    np.testing.assert_allclose(
        pose.rotation_matrix, [[0, -1, 0], [1, 0, 0], [0, 0, 1]], atol=TOL, rtol=0
    )


def test_distance_and_is_close() -> None:
    a = Pose([0.0, 0.0, 0.0])
    b = Pose.from_axis_angle([3.0, 4.0, 0.0], [0.0, 1.0, 0.0], 0.25)
    distance, angle = a.distance_to(b)
    assert abs(distance - 5.0) <= TOL
    assert abs(angle - 0.25) <= TOL
    assert not a.is_close(b)
    assert a.is_close(b, position_tol=5.0 + 1e-9, rotation_tol=0.25 + 1e-9)
    # q and -q are the same orientation.
    c = Pose([0.0, 0.0, 0.0], [-1.0, 0.0, 0.0, 0.0])
    assert a.is_close(c, position_tol=0.0, rotation_tol=1e-12)


def test_repr_is_readable() -> None:
    assert repr(Pose([1.0, 0.0, 0.5])) == "Pose(translation=[1, 0, 0.5], quaternion=[1, 0, 0, 0])"
