"""Safety checks run on every tick, before anything is commanded.

`SafetyMonitor.check` looks at the measured state and the last command and returns what the loop
must do: nothing, *hold* (feedback briefly stale: stop the motion, keep the drives), or a `Fault`
(latched by the loop until an explicit reset). Thresholds come from the config's `safety` section;
docs/safety.md lists the defaults.

- stale feedback: a joint's reading older than ``max(stale_hold_ticks × period, stale_hold_s)``
  → hold; older than `stale_fault_s` → fault ``stale_feedback``;
- device faults reported by a driver → fault ``device_fault`` naming the joint and the code;
- measured position outside the limits by more than `limit_tolerance` → fault ``limit_exceeded``;
- following error ``|commanded - measured|`` beyond ``following_error +
  following_error_per_velocity × |commanded velocity|`` → fault ``following_error``;
- a stall: a joint's device effort at or above its `stall.effort` while it moves slower than
  `stall.velocity`, for longer than `stall.time_s` → fault ``stall`` naming the joint.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from armd.link.messages import Fault
from armd.link.protocol import MeasuredState

__all__ = ["SafetyMonitor", "SafetyThresholds", "StallLimits", "Verdict"]

Array = NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class StallLimits:
    """Per joint (q order): the effort that counts (inf: no stall protection), how long it may
    last while the joint is slower than `velocity` (s, rad/s)."""

    effort: Array
    time_s: Array
    velocity: Array


@dataclass(frozen=True, slots=True)
class SafetyThresholds:
    stale_hold_s: float  # already max(ticks × period, seconds)
    stale_fault_s: float
    following_error: float
    following_error_per_velocity: float
    limit_tolerance: float
    stall: StallLimits | None = None
    # joints exempt from the following-error check: the gripper, whose grip on an object is a
    # deliberate position error (its stall protection watches it instead)
    unfollowed: tuple[int, ...] = ()


class Verdict(enum.Enum):
    OK = "ok"
    HOLD = "hold"
    FAULT = "fault"


@dataclass(frozen=True, slots=True)
class Check:
    verdict: Verdict
    fault: Fault | None = None
    reason: str = ""


_OK = Check(Verdict.OK)


class SafetyMonitor:
    """Checks over (measured state, last command, now); the only state kept is the widened limit
    bounds after an accepted excursion and since when each joint strains (for stalls)."""

    def __init__(
        self,
        joint_names: Sequence[str],
        lower: Array,
        upper: Array,
        thresholds: SafetyThresholds,
    ) -> None:
        self.joint_names = tuple(joint_names)
        self.lower = lower
        self.upper = upper
        self.thresholds = thresholds
        # Bounds for the "outside the limits" check: the limits, widened by `accept_excursion`
        # to a position found outside them, then narrowed as the joint comes back.
        self._allow(lower.copy(), upper.copy())
        self._followed = np.ones(len(self.joint_names), dtype=bool)
        self._followed[list(thresholds.unfollowed)] = False
        self._straining_since = np.full(len(self.joint_names), np.nan)  # s; NaN: not straining

    def accept_excursion(self, position: Array) -> None:
        """After a reset: a joint outside its limits may stay there and move back toward them
        (only); the allowed range follows it inward."""
        self._allow(
            np.minimum(self.lower, position - self.thresholds.limit_tolerance),
            np.maximum(self.upper, position + self.thresholds.limit_tolerance),
        )

    def _allow(self, lower: Array, upper: Array) -> None:
        """The range the "outside the limits" check allows (plus its tolerance); `_widened`
        while it exceeds the limits somewhere."""
        self._lower, self._upper = lower, upper
        self._widened = bool(np.any(lower < self.lower) or np.any(upper > self.upper))
        tol = self.thresholds.limit_tolerance
        self._bounds = (lower - tol, upper + tol)

    def check(
        self,
        measured: MeasuredState,
        now: float,
        commanded: Array | None = None,
        commanded_velocity: Array | None = None,
    ) -> Check:
        """The most severe problem of this tick (faults before holds)."""
        for check in (
            self._device_faults(measured),
            self._staleness(measured, now),
            self._outside_limits(measured),
            self._stall(measured, now),
            self._following_error(measured, commanded, commanded_velocity),
        ):
            if check.verdict is not Verdict.OK:
                return check
        return _OK

    def clear_to_reset(self, measured: MeasuredState, now: float) -> Check:
        """What a reset waits for: the drives' faults, stale feedback, a position outside the
        limits gone. Not a following error nor a stall: both come from the command held since
        the fault's stop (a stop that ended inside an obstacle strains against it), and the
        reset restarts from the measured position; a real jam strains again and faults again."""
        for check in (
            self._device_faults(measured),
            self._staleness(measured, now),
            self._outside_limits(measured),
        ):
            if check.verdict is not Verdict.OK:
                return check
        return _OK

    def _device_faults(self, measured: MeasuredState) -> Check:
        if not measured.faults:
            return _OK
        joint, fault = measured.faults[0]
        message = f"joint {joint!r}: device fault {fault.code:#x}: {fault.message}"
        return Check(Verdict.FAULT, Fault("device_fault", message, joint))

    def _staleness(self, measured: MeasuredState, now: float) -> Check:
        age = now - measured.timestamp
        worst = int(age.argmax())
        oldest = float(age[worst])
        if oldest > self.thresholds.stale_fault_s:
            joint = self.joint_names[worst]
            message = (
                f"joint {joint!r}: no valid feedback for {oldest:.3f} s "
                f"(fault after {self.thresholds.stale_fault_s:g} s)"
            )
            return Check(Verdict.FAULT, Fault("stale_feedback", message, joint))
        if oldest > self.thresholds.stale_hold_s:
            joint = self.joint_names[worst]
            return Check(Verdict.HOLD, reason=f"joint {joint!r}: feedback {oldest:.3f} s old")
        return _OK

    def _outside_limits(self, measured: MeasuredState) -> Check:
        tol = self.thresholds.limit_tolerance
        position = measured.position
        low, high = self._bounds
        outside = (position < low) | (position > high)
        if not outside.any():
            if self._widened:  # the range follows the joint back inward (the limits otherwise)
                self._allow(
                    np.maximum(self._lower, np.minimum(self.lower, position)),
                    np.minimum(self._upper, np.maximum(self.upper, position)),
                )
            return _OK
        i = int(np.flatnonzero(outside)[0])
        joint = self.joint_names[i]
        message = (
            f"joint {joint!r}: measured {measured.position[i]:.4f} outside "
            f"[{self.lower[i]:.4f}, {self.upper[i]:.4f}] (tolerance {tol:g})"
        )
        return Check(Verdict.FAULT, Fault("limit_exceeded", message, joint))

    def _stall(self, measured: MeasuredState, now: float) -> Check:
        stall = self.thresholds.stall
        if stall is None or measured.effort is None:
            return _OK
        with np.errstate(invalid="ignore"):  # NaN effort: not reported, never straining
            straining = (np.abs(measured.effort) >= stall.effort) & (
                np.abs(measured.velocity) < stall.velocity
            )
        since = self._straining_since
        since[~straining] = np.nan
        since[straining & np.isnan(since)] = now
        stalled = straining & (now - since >= stall.time_s)
        if not np.any(stalled):
            return _OK
        i = int(np.flatnonzero(stalled)[0])
        joint = self.joint_names[i]
        message = (
            f"joint {joint!r}: stalled: effort {measured.effort[i]:.3f} at or above "
            f"{stall.effort[i]:g} for {now - since[i]:.2f} s while not moving"
        )
        return Check(Verdict.FAULT, Fault("stall", message, joint))

    def _following_error(
        self, measured: MeasuredState, commanded: Array | None, velocity: Array | None
    ) -> Check:
        if commanded is None:
            return _OK
        speed = np.abs(velocity) if velocity is not None else 0.0
        bound = (
            self.thresholds.following_error + self.thresholds.following_error_per_velocity * speed
        )
        error = np.abs(commanded - measured.position)
        exceeded = (error > bound) & self._followed
        if not exceeded.any():
            return _OK
        i = int(np.argmax(np.where(exceeded, error - bound, -np.inf)))
        joint = self.joint_names[i]
        bound_i = float(np.broadcast_to(bound, error.shape)[i])
        message = (
            f"joint {joint!r}: following error {error[i]:.4f} exceeds {bound_i:.4f} "
            f"(commanded {commanded[i]:.4f}, measured {measured.position[i]:.4f})"
        )
        return Check(Verdict.FAULT, Fault("following_error", message, joint))
