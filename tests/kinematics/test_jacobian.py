"""Geometric Jacobians (6×dof, linear rows first, root frame) against central finite differences
of forward kinematics."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kinematics import KinematicTree

STEP = 1e-6
TOL = 1e-7  # finite-difference truncation ~h², rounding ~1e-16 / h


def rotation_log(R: np.ndarray) -> np.ndarray:
    """The rotation vector ω with exp([ω]×) = R, for rotations well below π."""
    v = 0.5 * np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    s = float(np.linalg.norm(v))
    angle = math.atan2(s, 0.5 * (np.trace(R) - 1.0))
    return v if s < 1e-15 else v * (angle / s)


def finite_difference_jacobian(tree: KinematicTree, q: np.ndarray, link: str) -> np.ndarray:
    J = np.zeros((6, tree.dof))
    for i in range(tree.dof):
        dq = np.zeros(tree.dof)
        dq[i] = STEP
        plus, minus = tree.fk(q + dq, link), tree.fk(q - dq, link)
        J[:3, i] = (plus.translation - minus.translation) / (2 * STEP)
        # Spatial angular velocity: R(q + h) ≈ exp([ω]× 2h) R(q - h).
        J[3:, i] = rotation_log(plus.rotation_matrix @ minus.rotation_matrix.T) / (2 * STEP)
    return J


def inside_limits(tree: KinematicTree, unit: list[float]) -> np.ndarray:
    """Map points of [0, 1]^dof into the limits, a step away from the bounds."""
    lower = np.where(np.isfinite(tree.limits.lower), tree.limits.lower, -math.pi) + 2 * STEP
    upper = np.where(np.isfinite(tree.limits.upper), tree.limits.upper, math.pi) - 2 * STEP
    return lower + np.asarray(unit) * (upper - lower)


def unit_vectors(dof: int) -> st.SearchStrategy[list[float]]:
    return st.lists(st.floats(0.0, 1.0), min_size=dof, max_size=dof)


@pytest.mark.parametrize(
    ("model", "link"),
    [
        ("panda", "panda_link8"),
        ("panda", "panda_leftfinger"),
        ("panda", "panda_rightfinger"),
        ("ur5", "tool0"),
        ("slider_mimic", "tip"),
        ("slider_mimic", "wrist"),
    ],
)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_jacobian_matches_finite_differences(
    request: pytest.FixtureRequest, model: str, link: str, data: st.DataObject
) -> None:
    tree: KinematicTree = request.getfixturevalue(model)
    q = inside_limits(tree, data.draw(unit_vectors(tree.dof)))
    J = tree.jacobian(q, link)
    assert J.shape == (6, tree.dof)
    np.testing.assert_allclose(J, finite_difference_jacobian(tree, q, link), atol=TOL, rtol=0)


def test_columns_of_joints_that_do_not_move_the_link_are_exactly_zero(
    panda: KinematicTree, ur5: KinematicTree, slider_mimic: KinematicTree
) -> None:
    q = inside_limits(panda, [0.3] * panda.dof)
    J = panda.jacobian(q, "panda_link8")
    assert np.all(J[:, panda.joint_names.index("panda_finger_joint1")] == 0.0)
    assert np.all(np.linalg.norm(J[:, :7], axis=0) > 0.1)  # every arm joint moves the flange
    J_link4 = panda.jacobian(q, "panda_link4")
    assert np.all(J_link4[:, 4:] == 0.0)
    assert np.all(ur5.jacobian(np.full(6, 0.4), "base") == 0.0)
    assert np.all(ur5.jacobian(np.full(6, 0.4), "wrist_1_link")[:, 4:] == 0.0)
    # The carriage hangs before the elbow; the mimic wrist follows the turntable, not the elbow.
    q = np.array([0.4, 0.2, 0.3])
    assert np.all(slider_mimic.jacobian(q, "carriage")[:, 2] == 0.0)
    assert np.all(slider_mimic.jacobian(q, "wrist")[:, 2] == 0.0)


def test_prismatic_columns_have_no_angular_part(panda: KinematicTree) -> None:
    q = inside_limits(panda, [0.5] * panda.dof)
    column = panda.jacobian(q, "panda_leftfinger")[:, -1]
    assert np.all(column[3:] == 0.0)
    assert abs(np.linalg.norm(column[:3]) - 1.0) <= 1e-12


def test_jacobian_batch_matches_single_jacobians(
    panda: KinematicTree, slider_mimic: KinematicTree
) -> None:
    rng = np.random.default_rng(3)
    for tree, link in ((panda, "panda_hand_tcp"), (slider_mimic, "tip")):
        qs = np.array([inside_limits(tree, list(u)) for u in rng.uniform(size=(10, tree.dof))])
        batch = tree.jacobian_batch(qs, link)
        assert batch.shape == (10, 6, tree.dof)
        for i, q in enumerate(qs):
            np.testing.assert_allclose(batch[i], tree.jacobian(q, link), atol=1e-14, rtol=0)
