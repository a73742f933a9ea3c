"""`SafetyMonitor` on its own: the range a joint found outside its limits may use after a reset
(it follows the joint back in, then is the limits again), and the joints exempt from the
following-error check."""

from __future__ import annotations

import numpy as np

from armd.control.safety import SafetyMonitor, SafetyThresholds, Verdict
from armd.link.protocol import MeasuredState

LOWER, UPPER = np.full(3, -3.0), np.full(3, 3.0)
THRESHOLDS = SafetyThresholds(
    stale_hold_s=0.1,
    stale_fault_s=1.0,
    following_error=0.1,
    following_error_per_velocity=0.0,
    limit_tolerance=0.02,
    unfollowed=(2,),
)


def at(*position: float) -> MeasuredState:
    return MeasuredState(np.array(position), np.zeros(3), np.zeros(3))


def verdict(monitor: SafetyMonitor, *position: float) -> Verdict:
    return monitor.check(at(*position), 0.0).verdict


def test_a_joint_found_outside_may_stay_and_come_back_but_never_go_further_out() -> None:
    monitor = SafetyMonitor(["a", "b", "c"], LOWER, UPPER, THRESHOLDS)
    assert verdict(monitor, 3.5, 0.0, 0.0) is Verdict.FAULT
    assert monitor.check(at(3.5, 0, 0), 0.0).fault.code == "limit_exceeded"  # type: ignore[union-attr]
    monitor.accept_excursion(np.array([3.5, 0.0, 0.0]))
    assert verdict(monitor, 3.5, 0.0, 0.0) is Verdict.OK
    assert verdict(monitor, 3.52, 0.0, 0.0) is Verdict.OK  # within the tolerance
    assert verdict(monitor, 3.2, 0.0, 0.0) is Verdict.OK  # on its way back: the range follows
    assert verdict(monitor, 3.3, 0.0, 0.0) is Verdict.FAULT
    assert verdict(monitor, 2.9, 0.0, 0.0) is Verdict.OK  # back inside: the limits again
    assert verdict(monitor, 3.019, 0.0, 0.0) is Verdict.OK
    assert verdict(monitor, 3.03, 0.0, 0.0) is Verdict.FAULT
    assert verdict(monitor, 0.0, -3.03, 0.0) is Verdict.FAULT  # the other joints never widened


def test_a_position_never_read_is_not_outside_the_limits() -> None:
    monitor = SafetyMonitor(["a", "b", "c"], LOWER, UPPER, THRESHOLDS)
    assert verdict(monitor, np.nan, 0.0, 0.0) is Verdict.OK


def test_the_following_error_ignores_the_unfollowed_joints_only() -> None:
    monitor = SafetyMonitor(["a", "b", "gripper"], LOWER, UPPER, THRESHOLDS)
    measured = at(0.0, 0.0, 0.0)
    gripping = np.array([0.0, 0.0, 0.5])  # the gripper held open by its object
    assert monitor.check(measured, 0.0, gripping, np.zeros(3)).verdict is Verdict.OK
    lagging = np.array([0.0, 0.5, 0.5])
    check = monitor.check(measured, 0.0, lagging, np.zeros(3))
    assert check.verdict is Verdict.FAULT
    assert check.fault is not None
    assert check.fault.joint == "b"
    assert check.fault.code == "following_error"
