"""What the MIT driver last heard from one actuator, and what it means: its `DeviceState`, its
fault, its register answers. Bookkeeping and conversions only, no I/O: the driver's receiver
thread stores decoded frames (`MotorRecord.receive`) and its coroutines read them, both under
the driver's lock.

Signs: ``direction`` multiplies positions, velocities and torques between the actuator and armd.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from drivers.base import DeviceFault, DeviceState
from drivers.mit import protocol as proto
from drivers.mit.models import Vendor
from drivers.mit.params import MitDeviceParams

__all__ = ["MotorRecord", "describe_faults", "limit_torque", "owner_of"]

_TEMPERATURE_STATES = (
    proto.DamiaoState.MOS_OVER_TEMPERATURE,
    proto.DamiaoState.ROTOR_OVER_TEMPERATURE,
)


def limit_torque(
    kp: float, kd: float, position_error: float, velocity_error: float, limit: float
) -> tuple[float, float]:
    """The errors (rad, rad/s) shrunk so that ``|kp·e_p + kd·e_v| <= limit`` (N·m): the spring
    term gives way first (the setpoint is pulled toward the measured position), then the damping
    term. Unchanged when already within the limit."""
    torque = kp * position_error + kd * velocity_error
    if abs(torque) <= limit:
        return position_error, velocity_error
    target = math.copysign(limit, torque)
    damping = kd * velocity_error
    if abs(damping) > limit or kp == 0.0:
        # The damping term alone reaches the limit: no spring, damping clamped.
        velocity_error = math.copysign(limit, damping) / kd if kd else 0.0
        return 0.0, velocity_error
    return (target - damping) / kp, velocity_error


@dataclass(slots=True, eq=False)
class MotorRecord:
    """One actuator's configuration and what the receiver last saw (guarded by the driver's
    lock)."""

    name: str
    params: MitDeviceParams
    ranges: proto.Ranges = field(init=False)
    reply: proto.MitReply | None = None
    reply_time: float = math.nan
    reply_seq: int = 0
    pending_register: int | None = None  # the register id of a request awaiting its answer
    registers: dict[int, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.ranges = self.params.ranges

    @property
    def slave_id(self) -> int:
        return self.params.id

    @property
    def master_id(self) -> int:
        return self.params.resolved_master_id

    @property
    def damiao(self) -> bool:
        return self.params.motor_model.vendor is Vendor.DAMIAO

    @property
    def sign(self) -> int:
        return self.params.direction

    @property
    def label(self) -> str:
        return f"device {self.name!r} (id {self.slave_id}, master id {self.master_id})"

    def forget(self) -> None:
        """Drop what was heard (before opening again); sequence numbers keep counting."""
        self.reply = None
        self.pending_register = None
        self.registers.clear()

    # -- receiving --------------------------------------------------------------------------

    def owns(self, data: bytes) -> bool:
        """Whether a frame from a master id this motor shares with others is its own: a register
        answer naming it, or a Damiao reply with its id's low 4 bits in byte 0."""
        if self.pending_register is not None:
            answer = proto.parse_register_frame(data)
            if answer is not None and answer.slave_id == self.slave_id:
                return True
        return len(data) > 0 and data[0] & 0xF == self.slave_id & 0xF

    def receive(self, data: bytes, received_at: float) -> str | None:
        """Store a frame from this actuator's master id; returns why it is corrupt, or None."""
        pending = self.pending_register
        if pending is not None:
            answer = proto.parse_register_frame(data)
            if answer is not None and answer.slave_id == self.slave_id and answer.rid == pending:
                self.registers[pending] = answer.value
                self.pending_register = None
                return None
        try:
            if self.damiao:
                reply = proto.decode_damiao_reply(data, self.ranges)
                expected_id = self.slave_id & 0xF
            else:
                reply = proto.decode_cubemars_reply(data, self.ranges)
                expected_id = self.slave_id & 0xFF
        except proto.MalformedFrameError as exc:
            return f"{self.label}: {exc}"
        if reply.motor_id != expected_id:
            return f"{self.label}: reply names motor {reply.motor_id}, expected {expected_id}"
        self.reply, self.reply_time = reply, received_at
        self.reply_seq += 1
        return None

    # -- meaning ----------------------------------------------------------------------------

    @property
    def fault(self) -> DeviceFault | None:
        reply = self.reply
        if reply is None:
            return None
        if not self.damiao:
            return proto.cubemars_fault(reply.state)
        fault = proto.damiao_fault(reply.state)
        if fault is not None and reply.state in _TEMPERATURE_STATES:
            temperatures = (
                f" (MOSFET {reply.mos_temperature_c} °C, rotor {reply.rotor_temperature_c} °C)"
            )
            fault = DeviceFault(fault.code, fault.message + temperatures)
        return fault

    def reports_enabled(self, driver_enabled: bool) -> bool:
        """Damiao says so in its state nibble; CubeMars does not, so the driver's own state
        counts (without a fault)."""
        reply = self.reply
        if reply is None:
            return False
        if self.damiao:
            return reply.state == proto.DamiaoState.ENABLED
        return driver_enabled and reply.state == 0

    def state(self, driver_enabled: bool) -> DeviceState:
        """The actuator's state in SI units with armd's sign; needs a reply."""
        reply = self.reply
        assert reply is not None
        s = self.sign
        return DeviceState(
            position=s * reply.position,
            velocity=s * reply.velocity,
            timestamp=self.reply_time,
            fault=self.fault,
            enabled=self.reports_enabled(driver_enabled),
            effort=s * reply.torque,
        )

    def command(self, position: float, velocity: float, torque: float = 0.0) -> proto.MitCommand:
        """The MIT command for armd's setpoint (rad, rad/s, N·m feed-forward; armd's sign):
        velocity clamped to ±v_max, the torque feed-forward (t_ff) to ±torque limit, and the
        spring and damping torque against the latest reading limited to what the torque limit
        leaves beside the feed-forward (`limit_torque`), so that the actuator's torque stays
        within the limit. Raises ValueError for a position beyond ±p_max, which the frame
        cannot carry."""
        s, r, p = self.sign, self.ranges, self.params
        position, velocity = s * position, s * velocity
        if abs(position) > r.p_max:
            raise ValueError(f"position {position:.4f} rad outside ±{r.p_max} rad (p_max)")
        if not math.isfinite(torque):
            raise ValueError(f"torque feed-forward {torque} N·m must be finite")
        velocity = min(max(velocity, -r.v_max), r.v_max)
        limit = p.resolved_torque_limit
        t_ff = min(max(s * torque, -limit), limit)
        reply = self.reply
        if reply is not None:
            e_p, e_v = limit_torque(
                p.kp,
                p.kd,
                position - reply.position,
                velocity - reply.velocity,
                limit - abs(t_ff),
            )
            position, velocity = reply.position + e_p, reply.velocity + e_v
        return proto.MitCommand(position, velocity, p.kp, p.kd, t_ff)

    def open_problems(self, check_ranges: bool) -> list[str]:
        """Damiao, after its registers were read at open: why armd must not drive it (a control
        mode other than MIT, ranges other than the configured ones)."""
        problems = []
        mode = int(self.registers[proto.Register.CTRL_MODE])
        if mode != proto.ControlMode.MIT:
            problems.append(
                f"{self.label}: control mode {proto.describe_mode(mode)} (register CTRL_MODE (10)"
                f" = {mode}), not MIT (1): it would ignore every MIT frame without a word; set "
                "register 10 to 1 with Damiao's debugging tool (and save)"
            )
        mismatch = self.range_mismatch() if check_ranges else None
        if mismatch:
            problems.append(f"{self.label}: model {self.params.model}: {mismatch}")
        return problems

    def range_mismatch(self) -> str | None:
        """Damiao: how the PMAX/VMAX/TMAX registers read at open differ from the configured
        ranges (float32 registers: compared within 1e-4 relative), or None."""
        configured = {
            proto.Register.PMAX: ("p_max", self.ranges.p_max),
            proto.Register.VMAX: ("v_max", self.ranges.v_max),
            proto.Register.TMAX: ("t_max", self.ranges.t_max),
        }
        wrong = [
            f"{name} {value} but register {rid.name} = {self.registers[rid]:.6g}"
            for rid, (name, value) in configured.items()
            if rid in self.registers
            and not math.isclose(self.registers[rid], value, rel_tol=1e-4, abs_tol=1e-6)
        ]
        return "; ".join(wrong) if wrong else None


def describe_faults(faults: Mapping[MotorRecord, DeviceFault | None]) -> str:
    """``device 'x' (id n, master id m): <fault>; ...``."""
    return "; ".join(f"{m.label}: {f.message if f else 'fault'}" for m, f in faults.items())


def owner_of(sharing: list[MotorRecord], data: bytes) -> MotorRecord | None:
    """The motor a frame from a shared master id belongs to (`MotorRecord.owns`), if any."""
    return next((m for m in sharing if m.owns(data)), None)
