"""What the ODrive driver last heard from one axis, and what it means: the axis's `DeviceState`,
its fault, why it has not answered. Bookkeeping only, no I/O: the driver's receiver thread stores
decoded replies (`decode_reply`, `AxisRecord.store`) and its coroutines read them, both under the
driver's lock.

Units: the ODrive speaks turns at its encoder; a device's position in rad at the motor shaft is
``rad_per_turn * turns`` with ``rad_per_turn = direction * scale * 2π``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from drivers.base import DeviceFault, DeviceState
from drivers.odrive import protocol as proto

__all__ = ["AxisRecord", "Reply", "decode_reply", "describe_errors"]

Reply = proto.Heartbeat | proto.EncoderEstimates | proto.Version


def decode_reply(command: int, data: bytes) -> Reply | None:
    """The Heartbeat, Get_Encoder_Estimates or Get_Version in a frame's data; None for any other
    command. Raises MalformedFrameError."""
    if command == proto.Command.GET_ENCODER_ESTIMATES:
        return proto.parse_encoder_estimates(data)
    if command == proto.Command.HEARTBEAT:
        return proto.parse_heartbeat(data)
    if command == proto.Command.GET_VERSION:
        return proto.parse_version(data)
    return None


@dataclass(slots=True, eq=False)
class AxisRecord:
    """What the receiver last saw from one axis (guarded by the driver's lock)."""

    name: str
    node_id: int
    rad_per_turn: float  # signed
    torque_limit: float | None = None  # N·m at the ODrive's motor; None: the frame's range
    estimate: proto.EncoderEstimates | None = None
    estimate_time: float = math.nan
    estimate_seq: int = 0
    heartbeat: proto.Heartbeat | None = None
    heartbeat_time: float = math.nan
    heartbeat_seq: int = 0
    busy_seq: int = 0  # heartbeat_seq of the last heartbeat showing a procedure running
    version: proto.Version | None = None

    @property
    def label(self) -> str:
        return f"device {self.name!r} (node {self.node_id})"

    def torque_ff_nm(self, torque: float) -> float:
        """The ODrive's torque feed-forward (N·m at its motor) for armd's `torque` (N·m at the
        motor shaft, armd's sign), within ±`torque_limit`: the same power at the ODrive's turns
        (``scale`` motor-shaft turns each) as at the shaft, so ``τ_odrive = direction × scale ×
        τ``."""
        nm = torque * self.rad_per_turn / (2.0 * math.pi)
        limit = self.torque_limit
        return nm if limit is None else min(max(nm, -limit), limit)

    @property
    def error(self) -> int:
        """The axis error bits of the last heartbeat (0 before the first)."""
        return self.heartbeat.axis_error if self.heartbeat is not None else 0

    @property
    def in_closed_loop(self) -> bool:
        beat = self.heartbeat
        return beat is not None and beat.axis_state == proto.AxisState.CLOSED_LOOP_CONTROL

    def store(self, reply: Reply, received_at: float) -> None:
        """Keep a decoded reply received at `received_at` (driver clock, s)."""
        if isinstance(reply, proto.EncoderEstimates):
            self.estimate, self.estimate_time = reply, received_at
            self.estimate_seq += 1
        elif isinstance(reply, proto.Heartbeat):
            self.heartbeat, self.heartbeat_time = reply, received_at
            self.heartbeat_seq += 1
            if reply.procedure_result == proto.ProcedureResult.BUSY or reply.axis_state not in (
                proto.AxisState.IDLE,
                proto.AxisState.CLOSED_LOOP_CONTROL,
            ):
                self.busy_seq = self.heartbeat_seq
        else:
            self.version = reply

    def forget(self) -> None:
        """Drop what was heard (before opening again); sequence numbers keep counting."""
        self.estimate = self.heartbeat = self.version = None

    def fresh_heartbeat(self, since_seq: int) -> proto.Heartbeat | None:
        return self.heartbeat if self.heartbeat_seq > since_seq else None

    def state(self) -> DeviceState:
        """The axis's state in SI units at the motor shaft; needs an encoder estimate."""
        assert self.estimate is not None
        error = self.error
        return DeviceState(
            position=self.estimate.position_turns * self.rad_per_turn,
            velocity=self.estimate.velocity_turns_s * self.rad_per_turn,
            timestamp=self.estimate_time,
            fault=DeviceFault(error, proto.describe_axis_error(error)) if error else None,
            enabled=self.in_closed_loop,
        )

    def staleness(
        self, now: float, cyclic_timeout_s: float | None, heartbeat_timeout_s: float
    ) -> list[tuple[str, str]]:
        """(DriverStats kind, message) for each cyclic message older than its timeout at `now`
        (s); `cyclic_timeout_s` None: encoder estimates are requested, not cyclic."""
        problems = []
        age = now - self.estimate_time
        if cyclic_timeout_s is not None and not age <= cyclic_timeout_s:
            problems.append(
                ("missing_replies", f"{self.label}: no encoder estimate for {age:.3f} s")
            )
        age = now - self.heartbeat_time
        if not age <= heartbeat_timeout_s:
            problems.append(("timeouts", f"{self.label}: no heartbeat for {age:.3f} s"))
        return problems

    def firmware_warning(self, all_answered: bool) -> str | None:
        """Why this axis's error bits may not mean what firmware 0.6 says, or None when it
        reported firmware 0.6. `all_answered`: whether every axis answered Get_Version."""
        v = self.version
        if v is None:
            older = "" if all_answered else " (firmware older than 0.6?)"
            return f"{self.label}: no Get_Version answer{older}; errors are decoded as firmware 0.6"
        if (v.fw_major, v.fw_minor) != (0, 6):
            firmware = f"{v.fw_major}.{v.fw_minor}.{v.fw_revision}"
            return f"{self.label}: firmware {firmware}, this driver follows 0.6"
        return None

    def missing(self) -> str:
        """What has not been heard yet, with a hint when only the cyclic estimates are missing."""
        what = [
            name
            for name, value in (("heartbeat", self.heartbeat), ("encoder estimate", self.estimate))
            if value is None
        ]
        hint = " (cyclic encoder messages off? set encoder_msg_rate_ms or feedback='rtr')"
        return f"{self.label}: no {' and no '.join(what)}" + (hint if self.heartbeat else "")


def describe_errors(errors: Mapping[AxisRecord, int]) -> str:
    """``device 'x' (node n): 0x... TEXT; ...`` for axis error bits by axis."""
    return "; ".join(
        f"{axis.label}: 0x{code:08X} {proto.describe_axis_error(code)}"
        for axis, code in errors.items()
    )
