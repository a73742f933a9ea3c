"""The control side of a validated configuration: the `ControlSetup` the daemon sends its control
process as the link's first message (`armd.control.wiring` builds the loop from it).

Everything here is derived from an `ArmSetup` once, typed and checked; the control process never
parses the config and never imports the kinematics.
"""

from __future__ import annotations

import numpy as np

from armd.config.load import ArmSetup
from armd.control.loop import LoopSettings
from armd.control.safety import SafetyThresholds, StallLimits
from armd.control.wiring import ControlSetup
from armd.motion.trajectory import MotionLimits

__all__ = ["HANDOVER_PLANNING_S", "control_setup"]

# s: with a collision model, the loop forecasts in each sample where a goal would take over a
# moving arm (`armd.link.protocol.Handover`) one sample period and this much ahead: the sample's
# age when the daemon reads it, then the goal's planning and checks, must fit in it, or the goal
# finds that the arm moved on and is not started
HANDOVER_PLANNING_S = 0.08


def control_setup(arm: ArmSetup) -> ControlSetup:
    """The control side of a validated configuration."""
    limits, safety, period = arm.tree.limits, arm.safety, 1.0 / arm.loop_hz
    # the daemon publishes the telemetry from the loop's samples; its contact detection watches
    # every tick's
    contact = any(j.contact is not None for j in arm.config.joints.values())
    sample_every = 1 if contact else max(1, round(arm.loop_hz / arm.telemetry_hz))
    return ControlSetup(
        name=arm.name,
        joint_names=tuple(arm.tree.joint_names),
        lower=np.array(limits.lower),
        upper=np.array(limits.upper),
        limits=MotionLimits(
            np.array(limits.velocity), np.array(limits.acceleration), np.array(arm.jerk)
        ),
        loop=LoopSettings(
            period_s=period,
            joint_tolerance=safety.joint_tolerance,
            settle_timeout_s=safety.settle_timeout_s,
            disable_on_fault=safety.on_fault == "disable",
            sample_every=sample_every,
            stream_timeout_s=arm.stream.timeout_s if arm.stream.enabled else None,
            handover_ticks=(
                None
                if arm.collision_spec is None
                else sample_every + max(2, round(HANDOVER_PLANNING_S / period))
            ),
        ),
        safety=SafetyThresholds(
            stale_hold_s=max(safety.stale_hold_ticks * period, safety.stale_hold_s),
            stale_fault_s=safety.stale_fault_s,
            following_error=safety.following_error,
            following_error_per_velocity=safety.following_error_per_velocity,
            limit_tolerance=safety.limit_tolerance,
            stall=_stall_limits(arm),
            unfollowed=(
                (arm.tree.joint_names.index(arm.config.gripper.joint),)
                if arm.config.gripper is not None
                else ()
            ),
        ),
        transmission=arm.transmission,
        drivers=dict(arm.drivers),
        realtime_priority=arm.realtime_priority,
    )


def _stall_limits(arm: ArmSetup) -> StallLimits | None:
    """The joints' stall protection in q order (infinite effort: none); None when no joint has
    any."""
    joints = arm.config.joints
    stalls = [joints[name].stall if name in joints else None for name in arm.tree.joint_names]
    if not any(stalls):
        return None
    return StallLimits(
        effort=np.array([s.effort if s else np.inf for s in stalls]),
        time_s=np.array([s.time_s if s else np.inf for s in stalls]),
        velocity=np.array([s.velocity if s else 0.0 for s in stalls]),
    )
