"""Quaternion algebra laws ([w, x, y, z], Hamilton product) and batch broadcasting."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from kinematics.errors import KinematicsError
from kinematics.quaternion import (
    quat_conj,
    quat_from_axis_angle,
    quat_from_matrix,
    quat_from_rpy,
    quat_mul,
    quat_normalize,
    quat_rotate,
    quat_to_axis_angle,
    quat_to_matrix,
)

TOL = 1e-12

finite = st.floats(-2.0, 2.0, allow_nan=False, allow_infinity=False)
vectors = arrays(np.float64, 3, elements=st.floats(-10.0, 10.0))
quats = arrays(np.float64, 4, elements=finite).filter(lambda q: np.linalg.norm(q) > 0.1)
unit_quats = quats.map(lambda q: q / np.linalg.norm(q))
angles = st.floats(-math.pi, math.pi)


def rot_x(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])


def rot_y(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])


def rot_z(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def same_rotation(a: np.ndarray, b: np.ndarray, tol: float = TOL) -> bool:
    """q and -q are the same rotation."""
    return bool(np.allclose(a, b, atol=tol, rtol=0) or np.allclose(a, -b, atol=tol, rtol=0))


@given(quats, quats, quats)
def test_multiplication_is_associative(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    left = quat_mul(quat_mul(a, b), c)
    right = quat_mul(a, quat_mul(b, c))
    np.testing.assert_allclose(left, right, atol=1e-12, rtol=1e-12)


@given(quats)
def test_identity_is_neutral_and_conjugate_gives_the_squared_norm(q: np.ndarray) -> None:
    identity = np.array([1.0, 0.0, 0.0, 0.0])
    np.testing.assert_allclose(quat_mul(identity, q), q, atol=TOL, rtol=0)
    np.testing.assert_allclose(quat_mul(q, identity), q, atol=TOL, rtol=0)
    norm2 = float(q @ q)
    np.testing.assert_allclose(quat_mul(q, quat_conj(q)), [norm2, 0, 0, 0], atol=TOL, rtol=0)
    np.testing.assert_allclose(quat_mul(quat_conj(q), q), [norm2, 0, 0, 0], atol=TOL, rtol=0)


@given(quats, quats)
def test_conjugate_of_a_product_reverses_the_order(a: np.ndarray, b: np.ndarray) -> None:
    np.testing.assert_allclose(
        quat_conj(quat_mul(a, b)), quat_mul(quat_conj(b), quat_conj(a)), atol=TOL, rtol=0
    )


@given(quats)
def test_normalise_gives_unit_norm_and_is_idempotent(q: np.ndarray) -> None:
    once = quat_normalize(q)
    assert abs(np.linalg.norm(once) - 1.0) <= TOL
    np.testing.assert_allclose(quat_normalize(once), once, atol=TOL, rtol=0)


def test_normalising_zero_is_an_error() -> None:
    with pytest.raises(KinematicsError, match="zero quaternion"):
        quat_normalize([0.0, 0.0, 0.0, 0.0])


@given(unit_quats)
def test_matrix_is_a_rotation_and_round_trips(q: np.ndarray) -> None:
    R = quat_to_matrix(q)
    np.testing.assert_allclose(R @ R.T, np.eye(3), atol=TOL, rtol=0)
    assert abs(np.linalg.det(R) - 1.0) <= TOL
    back = quat_from_matrix(R)
    assert back[0] >= 0.0
    assert same_rotation(back, q, 1e-10)


@given(unit_quats, vectors)
def test_rotate_equals_the_matrix_times_the_vector(q: np.ndarray, v: np.ndarray) -> None:
    np.testing.assert_allclose(quat_rotate(q, v), quat_to_matrix(q) @ v, atol=1e-11, rtol=0)


@given(unit_quats, unit_quats)
def test_matrix_of_a_product_is_the_product_of_matrices(a: np.ndarray, b: np.ndarray) -> None:
    np.testing.assert_allclose(
        quat_to_matrix(quat_mul(a, b)), quat_to_matrix(a) @ quat_to_matrix(b), atol=TOL, rtol=0
    )


@given(vectors.filter(lambda v: np.linalg.norm(v) > 1e-3), st.floats(1e-6, math.pi - 1e-6))
def test_axis_angle_round_trips(axis: np.ndarray, angle: float) -> None:
    q = quat_from_axis_angle(axis, angle)
    assert abs(np.linalg.norm(q) - 1.0) <= TOL
    back_axis, back_angle = quat_to_axis_angle(q)
    assert abs(float(back_angle) - angle) <= 1e-9
    np.testing.assert_allclose(back_axis, axis / np.linalg.norm(axis), atol=1e-9, rtol=0)


def test_axis_angle_of_no_rotation_is_a_zero_angle() -> None:
    axis, angle = quat_to_axis_angle([1.0, 0.0, 0.0, 0.0])
    assert float(angle) == 0.0
    np.testing.assert_allclose(axis, [1.0, 0.0, 0.0], atol=0, rtol=0)


def test_zero_axis_is_an_error() -> None:
    with pytest.raises(KinematicsError, match="non-zero"):
        quat_from_axis_angle([0.0, 0.0, 0.0], 1.0)


@given(angles, st.floats(-math.pi / 2, math.pi / 2), angles)
def test_rpy_is_fixed_axis_x_then_y_then_z(roll: float, pitch: float, yaw: float) -> None:
    expected = rot_z(yaw) @ rot_y(pitch) @ rot_x(roll)
    np.testing.assert_allclose(
        quat_to_matrix(quat_from_rpy([roll, pitch, yaw])), expected, atol=TOL, rtol=0
    )


@given(vectors.filter(lambda v: np.linalg.norm(v) > 1e-3), st.floats(math.pi - 1e-6, math.pi))
def test_from_matrix_is_stable_near_half_turns(axis: np.ndarray, angle: float) -> None:
    q = quat_from_axis_angle(axis, angle)
    assert same_rotation(quat_from_matrix(quat_to_matrix(q)), q, 1e-10)


def test_batches_broadcast() -> None:
    rng = np.random.default_rng(1)
    a = quat_normalize(rng.normal(size=(5, 1, 4)))
    b = quat_normalize(rng.normal(size=(3, 4)))
    product = quat_mul(a, b)
    assert product.shape == (5, 3, 4)
    np.testing.assert_allclose(product[2, 1], quat_mul(a[2, 0], b[1]), atol=TOL, rtol=0)
    assert quat_to_matrix(product).shape == (5, 3, 3, 3)
    assert quat_from_matrix(quat_to_matrix(product)).shape == (5, 3, 4)
    points = rng.normal(size=(6, 3))
    rotated = quat_rotate(b[0], points)
    assert rotated.shape == (6, 3)
    np.testing.assert_allclose(rotated, points @ quat_to_matrix(b[0]).T, atol=1e-12, rtol=0)
    assert quat_from_rpy(rng.normal(size=(7, 3))).shape == (7, 4)
    assert quat_from_axis_angle([0.0, 0.0, 1.0], np.linspace(0, 1, 4)).shape == (4, 4)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: quat_mul([1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]), r"shape \(\.\.\., 4\)"),
        (lambda: quat_to_matrix(np.zeros((2, 3))), r"shape \(\.\.\., 4\)"),
        (lambda: quat_from_matrix(np.eye(4)), r"shape \(\.\.\., 3, 3\)"),
    ],
)
def test_wrong_shapes_are_errors(call: object, match: str) -> None:
    with pytest.raises(KinematicsError, match=match):
        call()  # type: ignore[operator]
