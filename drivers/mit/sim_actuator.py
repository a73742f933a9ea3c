"""One simulated MIT-mode actuator (Damiao or CubeMars), as pure logic on an injected clock.

`SimulatedActuator.handle(arbitration_id, data)` processes one frame and returns the replies
(``(arbitration_id, data)`` pairs). Its shaft is a `SimulatedMotor` in impedance mode: an MIT
command applies ``τ = kp·(p* - p) + kd·(v* - v) + τ_ff`` clamped to the model's T max. Like the
firmware it answers every frame addressed to it with a feedback frame from its master id: MIT
commands (applied only while enabled), the special frames (enable FC, disable FD, set zero FE,
Damiao clear error FB) and, on Damiao, the register protocol on id 0x7FF (read 0x33, write 0x55,
save 0xAA; request feedback 0xCC). A Damiao motor whose CTRL_MODE register is not MIT ignores MIT
frames silently (no reply). Once enabled, a Damiao motor with a nonzero TIMEOUT register latches
LOST_COMMUNICATION and drops torque when no command arrives for that long.

Fault injection: `raise_error(DamiaoState.OVER_VOLTAGE)` (any state ≥ 8; CubeMars models report
the matching CubeMars code) latches an error and drops torque until the clear-error frame;
`faults` (`SimActuatorFaults`): silent (disconnected), drop_replies (lost replies),
corrupt_replies (a reply of 6 bytes, or from another motor id); writing CTRL_MODE (or
``registers[Register.CTRL_MODE]``) puts it in the wrong mode.
"""

from __future__ import annotations

import dataclasses
import enum
import time
from dataclasses import dataclass, field

from drivers.base import Clock
from drivers.mit import protocol as proto
from drivers.mit.models import MotorModel, Vendor
from drivers.sim.motor import MotorParams, SimulatedMotor

__all__ = ["Corruption", "SimActuatorConfig", "SimActuatorFaults", "SimulatedActuator"]

Reply = tuple[int, bytes]
_AMBIENT_C = 30
_HOT_C = 120
_DAMIAO_TO_CUBEMARS = {
    proto.DamiaoState.OVER_VOLTAGE: proto.CubeMarsError.OVER_VOLTAGE,
    proto.DamiaoState.UNDER_VOLTAGE: proto.CubeMarsError.UNDER_VOLTAGE,
    proto.DamiaoState.OVER_CURRENT: proto.CubeMarsError.OVER_CURRENT,
    proto.DamiaoState.MOS_OVER_TEMPERATURE: proto.CubeMarsError.MOTOR_OVER_TEMPERATURE,
    proto.DamiaoState.ROTOR_OVER_TEMPERATURE: proto.CubeMarsError.MOTOR_OVER_TEMPERATURE,
}
_READ_ONLY = frozenset({13, 14, 15, 16, 36})


class Corruption(enum.Enum):
    """How corrupt replies are damaged."""

    NONE = "none"
    SHORT = "short"  # 6 data bytes instead of 8
    WRONG_ID = "wrong_id"  # another motor's id in byte 0


@dataclass(frozen=True, slots=True)
class SimActuatorConfig:
    """One simulated actuator: its (slave) id, the id it answers from, its model (ranges and
    vendor), its shaft, the initial CTRL_MODE and TIMEOUT (s; 0 off) registers, a seed."""

    slave_id: int
    master_id: int
    model: MotorModel
    motor: MotorParams = field(default_factory=lambda: MotorParams(max_velocity=20.0))
    control_mode: proto.ControlMode = proto.ControlMode.MIT
    timeout_s: float = 0.0
    seed: int = 0


@dataclass(slots=True)
class SimActuatorFaults:
    """Communication faults; tests set and clear these fields directly."""

    silent: bool = False
    drop_replies: bool = False
    corrupt_replies: Corruption = Corruption.NONE


class SimulatedActuator:
    """One MIT actuator: enable state, latched errors and registers around a `SimulatedMotor`."""

    def __init__(self, config: SimActuatorConfig, clock: Clock = time.monotonic) -> None:
        self.config = config
        self.clock = clock
        self.ranges = config.model.ranges
        self.damiao = config.model.vendor is Vendor.DAMIAO
        self.motor = SimulatedMotor(config.motor, clock, seed=config.seed)
        self.faults = SimActuatorFaults()
        self.zero_offset = 0.0  # rad: the shaft position reported as 0 (set zero, FE)
        self.frames_received = 0
        self.commands_applied = 0
        self.mos_temperature_c = _AMBIENT_C
        self.rotor_temperature_c = _AMBIENT_C
        r = self.ranges
        self.registers: dict[int, float] = {
            proto.Register.MST_ID: config.master_id,
            proto.Register.ESC_ID: config.slave_id,
            proto.Register.TIMEOUT: round(config.timeout_s / proto.TIMEOUT_UNIT_S),
            proto.Register.CTRL_MODE: int(config.control_mode),
            proto.Register.PMAX: r.p_max,
            proto.Register.VMAX: r.v_max,
            proto.Register.TMAX: r.t_max,
        }
        self._apply_timeout()

    @property
    def slave_id(self) -> int:
        return self.config.slave_id

    @property
    def master_id(self) -> int:
        return int(self.registers[proto.Register.MST_ID])

    @property
    def error(self) -> int:
        """The latched error (a `DamiaoState` ≥ 8), LOST_COMMUNICATION after the CAN timeout,
        or 0."""
        self.motor.advance()
        if self.motor.watchdog_expired:
            return proto.DamiaoState.LOST_COMMUNICATION
        return self.motor.faults.fault_code

    def raise_error(self, state: proto.DamiaoState) -> None:
        """Latch `state` (≥ 8) until cleared; torque drops at once. Temperature errors also
        heat the reported temperature past the limit."""
        self.motor.advance()
        self.motor.faults.fault_code = int(state)
        if state is proto.DamiaoState.MOS_OVER_TEMPERATURE:
            self.mos_temperature_c = _HOT_C
        elif state is proto.DamiaoState.ROTOR_OVER_TEMPERATURE:
            self.rotor_temperature_c = _HOT_C
        self.motor.disable()

    # -- frames in ------------------------------------------------------------------------------

    def handle(self, arbitration_id: int, data: bytes) -> list[Reply]:
        """Process one frame; returns the replies to send (none for frames of other motors)."""
        if self.faults.silent:
            return []
        if arbitration_id == proto.REGISTER_ID and self.damiao:
            return self._register(data)
        if arbitration_id != self.slave_id:
            return []
        self.frames_received += 1
        special = proto.special_command(data)
        if special is not None:
            self._special(special)
        elif not self.damiao or self.registers[proto.Register.CTRL_MODE] == proto.ControlMode.MIT:
            try:
                self._command(proto.decode_command(data, self.ranges))
            except proto.MalformedFrameError:
                return []
        else:
            return []  # wrong mode: ignored silently, as the firmware does
        return self._feedback()

    def _special(self, code: int) -> None:
        if code == proto.ENABLE[7]:
            self.motor.enable()  # refused while an error is latched
            if self.motor.enabled:  # zero gains until the first command, as the firmware
                p = self.motor.position
                self.motor.command_impedance(p, 0.0, 0.0, 0.0, 0.0, self.ranges.t_max)
        elif code == proto.DISABLE[7]:
            self.motor.disable()
        elif code == proto.SET_ZERO[7]:
            self.motor.advance()
            self.zero_offset = self.motor.position
        elif code == proto.CLEAR_ERROR[7] and self.damiao:
            self.motor.clear_faults()
            self.mos_temperature_c = self.rotor_temperature_c = _AMBIENT_C

    def _command(self, command: proto.MitCommand) -> None:
        if not self.motor.enabled:
            self.motor.advance()
            return
        self.commands_applied += 1
        self.motor.command_impedance(
            command.position + self.zero_offset,
            command.velocity,
            command.kp,
            command.kd,
            command.torque,
            self.ranges.t_max,
        )

    def _register(self, data: bytes) -> list[Reply]:
        if len(data) == 8 and data[2] == proto.REFRESH and data[0] | data[1] << 8 == self.slave_id:
            return self._feedback()
        request = proto.parse_register_frame(data)
        if request is None or request.slave_id != self.slave_id:
            return []
        rid = request.rid
        if rid not in self.registers:
            return []
        if request.op == proto.RegisterOp.WRITE and rid not in _READ_ONLY:
            self.registers[rid] = request.value
            if rid == proto.Register.TIMEOUT:
                self._apply_timeout()
        elif request.op == proto.RegisterOp.SAVE:
            return []
        answer = proto.make_register_frame(
            self.slave_id, proto.RegisterOp(request.op), rid, self.registers[rid]
        )
        return self._send(answer)

    def _apply_timeout(self) -> None:
        self.motor.advance()
        timeout_s = self.registers[proto.Register.TIMEOUT] * proto.TIMEOUT_UNIT_S
        self.motor.params = dataclasses.replace(self.motor.params, watchdog_s=timeout_s)

    # -- frames out -----------------------------------------------------------------------------

    def state_code(self) -> int:
        """What a Damiao reply's state nibble says (CubeMars: the error code)."""
        error = self.error
        if not self.damiao:
            return int(_DAMIAO_TO_CUBEMARS.get(proto.DamiaoState(error), 0)) if error else 0
        if error:
            return error
        return proto.DamiaoState.ENABLED if self.motor.enabled else proto.DamiaoState.DISABLED

    def _feedback(self) -> list[Reply]:
        sample = self.motor.sample()
        reply = proto.MitReply(
            motor_id=self.slave_id,
            position=sample.position - self.zero_offset,
            velocity=sample.velocity,
            torque=self.motor.torque if self.motor.enabled else 0.0,
            state=self.state_code(),
            mos_temperature_c=self.mos_temperature_c,
            rotor_temperature_c=self.rotor_temperature_c,
        )
        if self.damiao:
            data = proto.encode_damiao_reply(reply, self.ranges)
        else:
            data = proto.encode_cubemars_reply(reply, self.ranges)
        corruption = self.faults.corrupt_replies
        if corruption is Corruption.SHORT:
            data = data[:6]
        elif corruption is Corruption.WRONG_ID:
            data = bytes([data[0] ^ 0x01]) + data[1:]
        return self._send(data)

    def _send(self, data: bytes) -> list[Reply]:
        return [] if self.faults.drop_replies else [(self.master_id, data)]
