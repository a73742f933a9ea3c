"""One simulated ODrive axis (firmware v0.6 CAN Simple), as pure logic on an injected clock.

`SimulatedAxis` wraps a `SimulatedMotor`: `handle(frame)` processes a frame addressed to its node
and returns the replies, `poll()` advances it to the clock's time (faults, watchdog) and returns
the cyclic heartbeats and encoder estimates now due. It answers RTR requests, follows
Set_Axis_State / Set_Controller_Mode / Set_Input_Pos / Set_Input_Vel / Set_Limits /
Set_Absolute_Position, latches errors until Clear_Errors, refuses
CLOSED_LOOP_CONTROL while an error is active, honours Estop and its watchdog (when enabled, no
Set_Input_Pos for `watchdog_timeout_s` in closed loop → WATCHDOG_TIMER_EXPIRED, axis to IDLE).
`drivers.odrive.sim` puts axes on a python-can bus.

Deliberately conservative where firmware versions differ: entering closed loop moves to the last
``input_pos`` (as firmware 0.5 does), so a master that does not set it first sees the jump.
POS_FILTER and TRAP_TRAJ input modes are accepted and treated as PASSTHROUGH (the motor model
already limits velocity and acceleration).

Homing: ENCODER_INDEX_SEARCH is a procedure that lasts `SimAxisConfig.index_search_s` (the shaft
does not move), then the encoder counts from the index, which is at motor position 0: before, it
reads `encoder_offset_turns` more (a request for IDLE cancels the search, an error disarms
it); a heartbeat due while it lasts shows it under way, even one sent late because the host held
the simulation up past the search's end. VELOCITY_CONTROL follows Set_Input_Vel (clamped to the
Set_Limits velocity limit): the position target runs ahead of the shaft at that velocity, at most
`_VELOCITY_LEAD_RAD` ahead, so against an obstacle (``motor.faults.block_at``) the shaft stops and
the drive pushes at its full effort (``motor.effort``; the current limit is not modelled).
Set_Absolute_Position makes the encoder read the given position where the shaft is.

Fault injection: set the fields of `SimAxisFaults` (silence, dropped, delayed or corrupt replies,
no index found),
of ``axis.motor.faults`` (``fault_code`` is reported as ODrive axis error bits; frozen encoder;
stuck shaft), or call `SimulatedAxis.raise_error`.
"""

from __future__ import annotations

import enum
import logging
import math
import struct
import time
from dataclasses import dataclass, field

from drivers.base import Clock
from drivers.odrive import protocol as proto
from drivers.sim.motor import MotorParams, SimulatedMotor

__all__ = ["Corruption", "SimAxisConfig", "SimAxisFaults", "SimulatedAxis"]

log = logging.getLogger(__name__)

TWO_PI = 2.0 * math.pi
_SIM_VERSION = proto.Version(2, 4, 4, 58, 0, 6, 10, 0)  # protocol 2, ODrive Pro, fw 0.6.10
_VELOCITY_LEAD_RAD = 0.5  # velocity control: how far the target may run ahead of the shaft


class Corruption(enum.Enum):
    """How corrupt encoder-estimate frames are damaged."""

    NONE = "none"
    SHORT = "short"  # 6 data bytes instead of 8
    NAN = "nan"  # a NaN position


@dataclass(frozen=True, slots=True)
class SimAxisConfig:
    """One simulated axis. Periods in s (0 disables that cyclic message, RTR still works)."""

    node_id: int
    motor: MotorParams = field(default_factory=MotorParams)
    heartbeat_period_s: float = 0.1
    encoder_period_s: float = 0.01
    watchdog_timeout_s: float | None = None
    vel_ff_scale: float = proto.DEFAULT_VEL_FF_SCALE
    torque_ff_scale: float = proto.DEFAULT_TORQUE_FF_SCALE
    seed: int = 0
    index_search_s: float = 0.2
    encoder_offset_turns: float = 0.0  # what the encoder reads at motor position 0 before homing


@dataclass(slots=True)
class SimAxisFaults:
    """Communication faults of one axis; tests set and clear these fields directly.

    silent: disconnected: sends nothing and ignores every frame (its watchdog still runs).
    drop_heartbeats / drop_estimates: those messages (cyclic and RTR replies) are not sent.
    corrupt_estimates: encoder estimates are sent damaged.
    reply_delay_s: every frame the axis sends leaves this much later.
    no_index: an index search finds no index: it ends with procedure result TIMEOUT and the
        CALIBRATION_ERROR bit.
    """

    silent: bool = False
    drop_heartbeats: bool = False
    drop_estimates: bool = False
    corrupt_estimates: Corruption = Corruption.NONE
    reply_delay_s: float = 0.0
    no_index: bool = False


class SimulatedAxis:
    """One ODrive axis: state machine, latched errors and watchdog around a `SimulatedMotor`."""

    def __init__(self, config: SimAxisConfig, clock: Clock = time.monotonic) -> None:
        proto.arbitration_id(config.node_id, proto.Command.HEARTBEAT)  # validates the node id
        self.config = config
        self.clock = clock
        self.motor = SimulatedMotor(config.motor, clock, seed=config.seed)
        self.faults = SimAxisFaults()
        self.state = proto.AxisState.IDLE
        self.control_mode = proto.ControlMode.POSITION_CONTROL
        self.input_mode = proto.InputMode.PASSTHROUGH
        # Set_Limits: None until a master sends it (the axis keeps its own configuration)
        self.velocity_limit_turns_s: float | None = None
        self.current_limit_a: float | None = None
        self.input_pos_turns = 0.0
        self.input_vel_turns_s = 0.0
        # encoder reading (turns) = motor position (rad) / 2π + offset
        self.encoder_offset_turns = config.encoder_offset_turns
        self.active_errors = 0
        self.disarm_reason = 0
        self.procedure_result = proto.ProcedureResult.SUCCESS
        self.frames_received = 0
        self.index_searches = 0  # ENCODER_INDEX_SEARCH procedures started
        now = clock()
        self._last_feed = now
        self._procedure_end = math.inf
        self._velocity_time = now
        self._next_heartbeat = now
        self._next_estimate = now

    @property
    def node_id(self) -> int:
        return self.config.node_id

    @property
    def axis_error(self) -> int:
        """What the heartbeat reports: active errors | the reason of the last disarm."""
        return self.active_errors | self.disarm_reason

    def raise_error(self, bits: int) -> None:
        """Latch axis error `bits` (until Clear_Errors); disarms the axis if it was armed."""
        self.active_errors |= bits
        if self.state in (
            proto.AxisState.CLOSED_LOOP_CONTROL,
            proto.AxisState.ENCODER_INDEX_SEARCH,
        ):
            self.disarm_reason |= bits
            self.procedure_result = proto.ProcedureResult.DISARMED
            self._enter_idle()

    # -- frames in ----------------------------------------------------------------------------

    def handle(self, frame: proto.Frame) -> list[proto.Frame]:
        """Process one frame addressed to this node; returns the replies to send."""
        if self.faults.silent:
            return []
        self.frames_received += 1
        _, cmd = proto.split_id(frame.arbitration_id)
        if frame.is_remote:
            return self._answer_request(cmd)
        try:
            self._apply_command(cmd, frame.data)
        except (proto.MalformedFrameError, ValueError) as exc:  # ValueError: unknown enum value
            log.warning("simulated ODrive node %d: ignoring frame: %s", self.node_id, exc)
        return []

    def _apply_command(self, cmd: int, data: bytes) -> None:
        c = proto.Command
        if cmd == c.SET_INPUT_POS:
            self._set_input_pos(data)
        elif cmd == c.SET_AXIS_STATE:
            self._request_state(proto.parse_set_axis_state(data))
        elif cmd == c.SET_CONTROLLER_MODE:
            control, input_mode = proto.parse_set_controller_mode(data)
            self._set_control_mode(proto.ControlMode(control))
            self.input_mode = proto.InputMode(input_mode)
        elif cmd == c.SET_INPUT_VEL:
            self.input_vel_turns_s, _ = proto.parse_set_input_vel(data)
            self._last_feed = self.clock()
            self._drive_velocity()
        elif cmd == c.SET_ABSOLUTE_POSITION:
            self._set_absolute_position(proto.parse_set_absolute_position(data))
        elif cmd == c.SET_LIMITS:
            self.velocity_limit_turns_s, self.current_limit_a = proto.parse_set_limits(data)
        elif cmd == c.CLEAR_ERRORS:
            proto.parse_clear_errors(data)
            self.active_errors = 0
            self.disarm_reason = 0
            if self.state is proto.AxisState.IDLE:
                self.procedure_result = proto.ProcedureResult.SUCCESS
        elif cmd == c.ESTOP:
            self.raise_error(proto.AxisError.ESTOP_REQUESTED)

    def _set_input_pos(self, data: bytes) -> None:
        cfg = self.config
        setpoint = proto.parse_set_input_pos(
            data, vel_ff_scale=cfg.vel_ff_scale, torque_ff_scale=cfg.torque_ff_scale
        )
        self.input_pos_turns = setpoint.position_turns
        self._last_feed = self.clock()
        if self._following():
            self.motor.command(
                self._motor_position(self.input_pos_turns), setpoint.vel_ff_turns_s * TWO_PI
            )

    def _motor_position(self, encoder_turns: float) -> float:
        return (encoder_turns - self.encoder_offset_turns) * TWO_PI

    def _encoder_turns(self, motor_position: float) -> float:
        return motor_position / TWO_PI + self.encoder_offset_turns

    def _set_control_mode(self, control: proto.ControlMode) -> None:
        """Switching modes in closed loop starts from where the shaft is (as the firmware's
        ``control_mode_updated``: position control holds the current estimate)."""
        previous, self.control_mode = self.control_mode, control
        if self.state is not proto.AxisState.CLOSED_LOOP_CONTROL or control is previous:
            return
        self.motor.advance()
        if control is proto.ControlMode.POSITION_CONTROL:
            self.input_pos_turns = self._encoder_turns(self.motor.position)
            self.motor.command(self.motor.position)
        elif control is proto.ControlMode.VELOCITY_CONTROL:
            self._velocity_time = self.clock()
            self._drive_velocity()

    def _drive_velocity(self) -> None:
        """Velocity control: the target runs ahead at the input velocity, at most
        `_VELOCITY_LEAD_RAD` ahead of the shaft."""
        if not (
            self.state is proto.AxisState.CLOSED_LOOP_CONTROL
            and self.control_mode is proto.ControlMode.VELOCITY_CONTROL
        ):
            return
        now = self.clock()
        elapsed, self._velocity_time = max(0.0, now - self._velocity_time), now
        velocity = self.input_vel_turns_s
        if self.velocity_limit_turns_s is not None:
            limit = self.velocity_limit_turns_s
            velocity = max(-limit, min(limit, velocity))
        motor = self.motor
        motor.advance()
        target = motor.target + velocity * TWO_PI * elapsed
        lead = _VELOCITY_LEAD_RAD
        target = max(motor.position - lead, min(motor.position + lead, target))
        motor.command(target, velocity * TWO_PI)

    def _set_absolute_position(self, position_turns: float) -> None:
        """The encoder reads `position_turns` where the shaft is; a position target keeps its
        place on the shaft."""
        self.motor.advance()
        shift = position_turns - self._encoder_turns(self.motor.position)
        self.encoder_offset_turns += shift
        self.input_pos_turns += shift

    def _request_state(self, requested: int) -> None:
        if requested == proto.AxisState.IDLE:
            searching = self.state is proto.AxisState.ENCODER_INDEX_SEARCH
            self._enter_idle()
            cancelled = proto.ProcedureResult.CANCELLED
            self.procedure_result = cancelled if searching else proto.ProcedureResult.SUCCESS
        elif requested == proto.AxisState.CLOSED_LOOP_CONTROL:
            if self.axis_error:
                self.procedure_result = proto.ProcedureResult.DISARMED
                return
            self.state = proto.AxisState.CLOSED_LOOP_CONTROL
            self.procedure_result = proto.ProcedureResult.BUSY
            self._last_feed = self._velocity_time = self.clock()
            self.motor.enable()
            if self._following():
                self.motor.command(self._motor_position(self.input_pos_turns))
            self._drive_velocity()
        elif requested == proto.AxisState.ENCODER_INDEX_SEARCH:
            if self.axis_error:
                self.procedure_result = proto.ProcedureResult.DISARMED
                return
            self._enter_idle()
            self.index_searches += 1
            self.state = proto.AxisState.ENCODER_INDEX_SEARCH
            self.procedure_result = proto.ProcedureResult.BUSY
            self._procedure_end = self.clock() + self.config.index_search_s
        else:  # calibration, homing, ...: not simulated
            self.procedure_result = proto.ProcedureResult.INVALID_STATE

    def _finish_index_search(self) -> None:
        self.state = proto.AxisState.IDLE
        self._procedure_end = math.inf
        if self.faults.no_index:
            self.active_errors |= proto.AxisError.CALIBRATION_ERROR
            self.procedure_result = proto.ProcedureResult.TIMEOUT
            return
        self.encoder_offset_turns = 0.0  # the index is at motor position 0
        self.procedure_result = proto.ProcedureResult.SUCCESS

    def _following(self) -> bool:
        return (
            self.state is proto.AxisState.CLOSED_LOOP_CONTROL
            and self.control_mode is proto.ControlMode.POSITION_CONTROL
        )

    def _enter_idle(self) -> None:
        self.state = proto.AxisState.IDLE
        self._procedure_end = math.inf
        self.motor.disable()

    # -- frames out ---------------------------------------------------------------------------

    def poll(self) -> list[proto.Frame]:
        """Advance to the clock's time (faults, watchdog) and return the cyclic frames now due."""
        now = self.clock()
        if self.motor.faults.fault_code:
            self.raise_error(self.motor.faults.fault_code)
        frames: list[proto.Frame] = []
        if now >= self._procedure_end:
            frames += self._beat_while_busy()
            self._finish_index_search()
        self._drive_velocity()
        timeout = self.config.watchdog_timeout_s
        if (
            timeout is not None
            and self.state is proto.AxisState.CLOSED_LOOP_CONTROL
            and now - self._last_feed > timeout
        ):
            self.raise_error(proto.AxisError.WATCHDOG_TIMER_EXPIRED)
        if _due(now, self._next_heartbeat, self.config.heartbeat_period_s):
            self._next_heartbeat = _next_time(
                now, self._next_heartbeat, self.config.heartbeat_period_s
            )
            frames += self._heartbeat()
        if _due(now, self._next_estimate, self.config.encoder_period_s):
            self._next_estimate = _next_time(now, self._next_estimate, self.config.encoder_period_s)
            frames += self._estimates()
        return [] if self.faults.silent else frames

    def _beat_while_busy(self) -> list[proto.Frame]:
        """The heartbeat that fell due while the procedure ran, when this poll comes after its
        end (the host held the simulation up): a drive's heartbeats go on while it searches, and
        a master waits for one that shows the procedure under way."""
        period = self.config.heartbeat_period_s
        if not _due(self._procedure_end, self._next_heartbeat, period):
            return []
        self._next_heartbeat = _next_time(self._procedure_end, self._next_heartbeat, period)
        return self._heartbeat()

    def next_deadline(self) -> float:
        """The clock time at which `poll` next has something to send (or a watchdog to check)."""
        deadlines = [self._procedure_end]
        if self.config.heartbeat_period_s > 0:
            deadlines.append(self._next_heartbeat)
        if self.config.encoder_period_s > 0:
            deadlines.append(self._next_estimate)
        timeout = self.config.watchdog_timeout_s
        if timeout is not None and self.state is proto.AxisState.CLOSED_LOOP_CONTROL:
            deadlines.append(self._last_feed + timeout)
        return min(deadlines)

    def _answer_request(self, cmd: int) -> list[proto.Frame]:
        c = proto.Command
        if cmd == c.HEARTBEAT:
            return self._heartbeat()
        if cmd == c.GET_ENCODER_ESTIMATES:
            return self._estimates()
        if cmd == c.GET_ERROR:
            status = proto.ErrorStatus(self.active_errors, self.disarm_reason)
            return [proto.make_error_status(self.node_id, status)]
        if cmd == c.GET_VERSION:
            return [proto.make_version(self.node_id, _SIM_VERSION)]
        return []

    def _heartbeat(self) -> list[proto.Frame]:
        if self.faults.drop_heartbeats:
            return []
        beat = proto.Heartbeat(self.axis_error, self.state, self.procedure_result, True)
        return [proto.make_heartbeat(self.node_id, beat)]

    def _estimates(self) -> list[proto.Frame]:
        sample = self.motor.sample()
        if self.faults.drop_estimates:
            return []
        position = self._encoder_turns(sample.position)
        estimates = proto.EncoderEstimates(position, sample.velocity / TWO_PI)
        frame = proto.make_encoder_estimates(self.node_id, estimates)
        corruption = self.faults.corrupt_estimates
        if corruption is Corruption.SHORT:
            frame = proto.Frame(frame.arbitration_id, frame.data[:6])
        elif corruption is Corruption.NAN:
            data = struct.pack("<ff", math.nan, estimates.velocity_turns_s)
            frame = proto.Frame(frame.arbitration_id, data)
        return [frame]


def _due(now: float, deadline: float, period: float) -> bool:
    return period > 0 and now >= deadline


def _next_time(now: float, deadline: float, period: float) -> float:
    """Keep the cadence, but skip beats that are already past instead of bursting them."""
    following = deadline + period
    return following if following > now else now + period
