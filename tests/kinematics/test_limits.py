"""Joint limits: validation, `check` by joint name and value, clamping."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from kinematics import JointLimit, JointLimits, KinematicsError, ModelError
from kinematics.limits import LimitViolation

NAMES = ("shoulder", "elbow", "wrist", "spin")
LIMITS = JointLimits(
    NAMES,
    [
        JointLimit(-1.57, 1.57, 2.0, 10.0),
        JointLimit(-0.5, 2.5, 1.5),
        JointLimit(0.0, 0.04),
        JointLimit(),  # continuous
    ],
)


def test_defaults_are_unbounded() -> None:
    limit = JointLimit()
    assert limit.is_continuous
    assert math.isinf(limit.velocity)
    assert math.isinf(limit.acceleration)
    assert not JointLimit(-1.0, 1.0).is_continuous
    assert not JointLimit(lower=-1.0).is_continuous


def test_replace_validates_again() -> None:
    assert JointLimit(-1.0, 1.0).replace(upper=2.0) == JointLimit(-1.0, 2.0)
    with pytest.raises(ModelError, match=r"lower 3\.0 must be <= upper 1\.0"):
        JointLimit(-1.0, 1.0).replace(lower=3.0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"lower": math.nan}, "limit lower: nan must be a number"),
        ({"velocity": "fast"}, "limit velocity: 'fast' must be a number"),
        ({"lower": 1.0, "upper": -1.0}, "lower 1.0 must be <= upper -1.0"),
        ({"lower": math.inf}, "is empty"),
        ({"upper": -math.inf}, "is empty"),
        ({"velocity": 0.0}, "limit velocity: 0.0 must be > 0"),
        ({"acceleration": -1.0}, "limit acceleration: -1.0 must be > 0"),
    ],
)
def test_invalid_limits_are_model_errors(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ModelError, match=match):
        JointLimit(**kwargs)  # type: ignore[arg-type]


def test_arrays_follow_the_joint_order_and_are_read_only() -> None:
    assert LIMITS.names == NAMES
    assert list(LIMITS) == list(NAMES)
    assert len(LIMITS) == 4
    np.testing.assert_array_equal(LIMITS.lower, [-1.57, -0.5, 0.0, -np.inf])
    np.testing.assert_array_equal(LIMITS.upper, [1.57, 2.5, 0.04, np.inf])
    np.testing.assert_array_equal(LIMITS.velocity, [2.0, 1.5, np.inf, np.inf])
    np.testing.assert_array_equal(LIMITS.acceleration, [10.0, np.inf, np.inf, np.inf])
    assert LIMITS["elbow"] == JointLimit(-0.5, 2.5, 1.5)
    assert [name for name, _ in LIMITS.items()] == list(NAMES)
    with pytest.raises(ValueError, match="read-only"):
        LIMITS.lower[0] = 0.0


def test_check_lists_violations_by_joint_name_and_value() -> None:
    assert LIMITS.check([0.0, 0.0, 0.02, 100.0]) == []
    violations = LIMITS.check([1.92, -0.6, 0.02, -100.0])
    assert violations == [
        LimitViolation("shoulder", 1.92, -1.57, 1.57),
        LimitViolation("elbow", -0.6, -0.5, 2.5),
    ]
    assert str(violations[0]) == "joint 'shoulder': 1.92 outside [-1.57, 1.57]"


def test_check_tolerance_and_nan() -> None:
    assert LIMITS.check([1.5700001, 0.0, 0.0, 0.0], tolerance=1e-6) == []
    assert [v.joint for v in LIMITS.check([1.5700001, 0.0, 0.0, 0.0])] == ["shoulder"]
    nan = LIMITS.check([0.0, math.nan, 0.0, math.nan])
    assert [v.joint for v in nan] == ["elbow", "spin"]
    assert not LIMITS.within([0.0, math.nan, 0.0, 0.0])
    assert LIMITS.within([1.57, 2.5, 0.04, 1e9])
    assert not LIMITS.within([1.58, 0.0, 0.0, 0.0])
    assert LIMITS.within([1.58, 0.0, 0.0, 0.0], tolerance=0.011)


def test_clamp_clips_into_the_bounds_and_broadcasts() -> None:
    np.testing.assert_array_equal(LIMITS.clamp([3.0, -3.0, 0.02, -50.0]), [1.57, -0.5, 0.02, -50.0])
    batch = LIMITS.clamp(np.full((5, 4), 10.0))
    assert batch.shape == (5, 4)
    np.testing.assert_array_equal(batch[3], [1.57, 2.5, 0.04, 10.0])


joint_vectors = arrays(np.float64, 4, elements=st.floats(-1e6, 1e6))


@given(joint_vectors)
def test_clamped_vectors_are_never_outside_the_limits(q: np.ndarray) -> None:
    clamped = LIMITS.clamp(q)
    assert LIMITS.check(clamped) == []
    assert LIMITS.within(clamped)
    np.testing.assert_array_equal(LIMITS.clamp(clamped), clamped)
    if LIMITS.within(q):
        np.testing.assert_array_equal(clamped, q)


@pytest.mark.parametrize("q", [[0.0, 0.0, 0.0], np.zeros((2, 5))])
def test_wrong_length_is_an_error(q: object) -> None:
    with pytest.raises(KinematicsError, match="joint vector must have 4 elements"):
        LIMITS.check(q)  # type: ignore[arg-type]
    with pytest.raises(KinematicsError, match="joint vector must have 4 elements"):
        LIMITS.clamp(q)  # type: ignore[arg-type]


def test_names_must_match_the_limits() -> None:
    with pytest.raises(KinematicsError, match="2 joint names but 1 limits"):
        JointLimits(["a", "b"], [JointLimit()])


def test_unknown_joint_is_an_error() -> None:
    with pytest.raises(KinematicsError, match="unknown joint 'knee'"):
        LIMITS["knee"]


def test_overrides_replace_named_joints_only() -> None:
    tighter = LIMITS.with_overrides({"elbow": JointLimit(0.0, 1.0, 0.5)})
    np.testing.assert_array_equal(tighter.upper, [1.57, 1.0, 0.04, np.inf])
    assert tighter["shoulder"] == LIMITS["shoulder"]
    with pytest.raises(KinematicsError, match=r"unknown joints \['knee'\]"):
        LIMITS.with_overrides({"knee": JointLimit()})
