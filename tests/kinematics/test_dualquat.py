"""Dual-quaternion algebra laws, against 4×4 homogeneous matrices, and batch broadcasting."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from kinematics.dualquat import (
    DQ_IDENTITY,
    dq_conj,
    dq_from_matrix,
    dq_from_pose,
    dq_inverse,
    dq_mul,
    dq_normalize,
    dq_to_matrix,
    dq_to_pose,
    dq_transform_points,
)
from kinematics.errors import KinematicsError
from kinematics.quaternion import quat_normalize, quat_to_matrix

TOL = 1e-12

translations = arrays(np.float64, 3, elements=st.floats(-5.0, 5.0))
unit_quats = (
    arrays(np.float64, 4, elements=st.floats(-1.0, 1.0))
    .filter(lambda q: np.linalg.norm(q) > 0.1)
    .map(lambda q: q / np.linalg.norm(q))
)
unit_dqs = st.builds(dq_from_pose, translations, unit_quats)
raw_dqs = arrays(np.float64, 8, elements=st.floats(-2.0, 2.0)).filter(
    lambda d: np.linalg.norm(d[:4]) > 0.1
)


def homogeneous(translation: np.ndarray, quaternion: np.ndarray) -> np.ndarray:
    m = np.eye(4)
    m[:3, :3] = quat_to_matrix(quaternion)
    m[:3, 3] = translation
    return m


def same_transform(a: np.ndarray, b: np.ndarray, tol: float = TOL) -> bool:
    """A unit dual quaternion and its negation are the same transform."""
    return bool(np.allclose(a, b, atol=tol, rtol=0) or np.allclose(a, -b, atol=tol, rtol=0))


@given(unit_dqs, unit_dqs, unit_dqs)
def test_multiplication_is_associative(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    np.testing.assert_allclose(dq_mul(dq_mul(a, b), c), dq_mul(a, dq_mul(b, c)), atol=1e-11, rtol=0)


@given(unit_dqs)
def test_identity_is_neutral(a: np.ndarray) -> None:
    np.testing.assert_allclose(dq_mul(DQ_IDENTITY, a), a, atol=TOL, rtol=0)
    np.testing.assert_allclose(dq_mul(a, DQ_IDENTITY), a, atol=TOL, rtol=0)


@given(unit_dqs)
def test_conjugate_of_a_unit_dual_quaternion_is_its_inverse(a: np.ndarray) -> None:
    np.testing.assert_allclose(dq_mul(a, dq_conj(a)), DQ_IDENTITY, atol=1e-11, rtol=0)
    np.testing.assert_allclose(dq_mul(dq_conj(a), a), DQ_IDENTITY, atol=1e-11, rtol=0)
    np.testing.assert_allclose(dq_inverse(a), dq_conj(a), atol=1e-11, rtol=0)


@given(raw_dqs)
def test_inverse_of_any_dual_quaternion(a: np.ndarray) -> None:
    np.testing.assert_allclose(dq_mul(a, dq_inverse(a)), DQ_IDENTITY, atol=1e-10, rtol=0)
    np.testing.assert_allclose(dq_mul(dq_inverse(a), a), DQ_IDENTITY, atol=1e-10, rtol=0)


@given(unit_dqs, unit_dqs)
def test_conjugate_of_a_product_reverses_the_order(a: np.ndarray, b: np.ndarray) -> None:
    np.testing.assert_allclose(
        dq_conj(dq_mul(a, b)), dq_mul(dq_conj(b), dq_conj(a)), atol=1e-11, rtol=0
    )


@given(raw_dqs)
def test_normalise_gives_a_unit_dual_quaternion_and_is_idempotent(a: np.ndarray) -> None:
    once = dq_normalize(a)
    assert abs(np.linalg.norm(once[:4]) - 1.0) <= TOL
    assert abs(float(once[:4] @ once[4:])) <= 1e-11
    np.testing.assert_allclose(dq_normalize(once), once, atol=TOL, rtol=0)


@given(unit_dqs)
def test_normalise_keeps_a_unit_dual_quaternion(a: np.ndarray) -> None:
    np.testing.assert_allclose(dq_normalize(a), a, atol=TOL, rtol=0)


@given(translations, unit_quats)
def test_pose_round_trips(t: np.ndarray, q: np.ndarray) -> None:
    back_t, back_q = dq_to_pose(dq_from_pose(t, q))
    np.testing.assert_allclose(back_t, t, atol=1e-11, rtol=0)
    np.testing.assert_allclose(back_q, q, atol=TOL, rtol=0)


@given(translations, unit_quats)
def test_matrix_round_trips(t: np.ndarray, q: np.ndarray) -> None:
    m = homogeneous(t, q)
    dq = dq_from_matrix(m)
    assert same_transform(dq, dq_from_pose(t, q), 1e-10)
    np.testing.assert_allclose(dq_to_matrix(dq), m, atol=1e-11, rtol=0)


@given(unit_dqs, unit_dqs)
def test_matrix_of_a_product_is_the_product_of_matrices(a: np.ndarray, b: np.ndarray) -> None:
    np.testing.assert_allclose(
        dq_to_matrix(dq_mul(a, b)), dq_to_matrix(a) @ dq_to_matrix(b), atol=1e-10, rtol=0
    )


@given(unit_dqs, arrays(np.float64, (5, 3), elements=st.floats(-10.0, 10.0)))
def test_transform_points_equals_the_matrix_times_the_point(
    a: np.ndarray, points: np.ndarray
) -> None:
    homogeneous_points = np.hstack((points, np.ones((5, 1))))
    expected = (dq_to_matrix(a) @ homogeneous_points.T).T[:, :3]
    np.testing.assert_allclose(dq_transform_points(a, points), expected, atol=1e-10, rtol=0)


def test_batches_broadcast() -> None:
    rng = np.random.default_rng(2)
    t = rng.normal(size=(4, 1, 3))
    q = quat_normalize(rng.normal(size=(6, 4)))
    dqs = dq_from_pose(t, q)
    assert dqs.shape == (4, 6, 8)
    single = dq_from_pose(t[1, 0], q[2])
    np.testing.assert_allclose(dqs[1, 2], single, atol=TOL, rtol=0)
    products = dq_mul(dqs, single)
    assert products.shape == (4, 6, 8)
    np.testing.assert_allclose(products[3, 5], dq_mul(dqs[3, 5], single), atol=TOL, rtol=0)
    assert dq_to_matrix(dqs).shape == (4, 6, 4, 4)
    assert dq_from_matrix(dq_to_matrix(dqs)).shape == (4, 6, 8)
    assert dq_conj(dqs).shape == dq_inverse(dqs).shape == dq_normalize(dqs).shape == (4, 6, 8)
    points = rng.normal(size=(10, 3))
    assert dq_transform_points(single, points).shape == (10, 3)
    per_pose = dq_transform_points(dqs[0], points[:6])
    assert per_pose.shape == (6, 3)
    np.testing.assert_allclose(
        per_pose[4], dq_to_matrix(dqs[0, 4])[:3, :3] @ points[4] + t[0, 0], atol=1e-12, rtol=0
    )


def test_identity_constant_is_read_only() -> None:
    with pytest.raises(ValueError, match="read-only"):
        DQ_IDENTITY[0] = 2.0


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: dq_mul(np.zeros(7), DQ_IDENTITY), r"shape \(\.\.\., 8\)"),
        (lambda: dq_to_pose(np.zeros(4)), r"shape \(\.\.\., 8\)"),
        (lambda: dq_from_matrix(np.eye(3)), r"shape \(\.\.\., 4, 4\)"),
        (lambda: dq_inverse(np.zeros(8)), "zero real part"),
        (lambda: dq_normalize(np.zeros(8)), "zero real part"),
    ],
)
def test_invalid_input_is_an_error(call: object, match: str) -> None:
    with pytest.raises(KinematicsError, match=match):
        call()  # type: ignore[operator]
