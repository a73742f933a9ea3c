"""ODrive firmware v0.6 enumerations: CAN Simple command ids, axis states, controller and input
modes, procedure results and the axis error bits with a readable text for each.

Values follow the v0.6 API reference (``ODrive.AxisState``, ``ODrive.Error``, ...) and the
``odrive.enums`` module of the official ODrive python package; `drivers.odrive.protocol` re-exports
them with the frame codec.
"""

from __future__ import annotations

import enum

__all__ = [
    "AxisError",
    "AxisState",
    "Command",
    "ControlMode",
    "InputMode",
    "ProcedureResult",
    "describe_axis_error",
]


class Command(enum.IntEnum):
    """CAN Simple command ids (the low 5 bits of the arbitration id), firmware v0.6."""

    GET_VERSION = 0x00
    HEARTBEAT = 0x01
    ESTOP = 0x02
    GET_ERROR = 0x03
    RX_SDO = 0x04
    TX_SDO = 0x05
    ADDRESS = 0x06
    SET_AXIS_STATE = 0x07
    GET_ENCODER_ESTIMATES = 0x09
    SET_CONTROLLER_MODE = 0x0B
    SET_INPUT_POS = 0x0C
    SET_INPUT_VEL = 0x0D
    SET_INPUT_TORQUE = 0x0E
    SET_LIMITS = 0x0F
    SET_TRAJ_VEL_LIMIT = 0x11
    SET_TRAJ_ACCEL_LIMITS = 0x12
    SET_TRAJ_INERTIA = 0x13
    GET_IQ = 0x14
    GET_TEMPERATURE = 0x15
    REBOOT = 0x16
    GET_BUS_VOLTAGE_CURRENT = 0x17
    CLEAR_ERRORS = 0x18
    SET_ABSOLUTE_POSITION = 0x19
    SET_POS_GAIN = 0x1A
    SET_VEL_GAINS = 0x1B
    GET_TORQUES = 0x1C
    GET_POWERS = 0x1D
    ENTER_DFU_MODE = 0x1F


class AxisState(enum.IntEnum):
    UNDEFINED = 0
    IDLE = 1
    STARTUP_SEQUENCE = 2
    FULL_CALIBRATION_SEQUENCE = 3
    MOTOR_CALIBRATION = 4
    ENCODER_INDEX_SEARCH = 6
    ENCODER_OFFSET_CALIBRATION = 7
    CLOSED_LOOP_CONTROL = 8
    LOCKIN_SPIN = 9
    ENCODER_DIR_FIND = 10
    HOMING = 11
    ENCODER_HALL_POLARITY_CALIBRATION = 12
    ENCODER_HALL_PHASE_CALIBRATION = 13
    ANTICOGGING_CALIBRATION = 14


class ControlMode(enum.IntEnum):
    VOLTAGE_CONTROL = 0
    TORQUE_CONTROL = 1
    VELOCITY_CONTROL = 2
    POSITION_CONTROL = 3


class InputMode(enum.IntEnum):
    INACTIVE = 0
    PASSTHROUGH = 1
    VEL_RAMP = 2
    POS_FILTER = 3
    MIX_CHANNELS = 4
    TRAP_TRAJ = 5
    TORQUE_RAMP = 6
    MIRROR = 7
    TUNING = 8


class ProcedureResult(enum.IntEnum):
    SUCCESS = 0
    BUSY = 1
    CANCELLED = 2
    DISARMED = 3
    NO_RESPONSE = 4
    POLE_PAIR_CPR_MISMATCH = 5
    PHASE_RESISTANCE_OUT_OF_RANGE = 6
    PHASE_INDUCTANCE_OUT_OF_RANGE = 7
    UNBALANCED_PHASES = 8
    INVALID_MOTOR_TYPE = 9
    ILLEGAL_HALL_STATE = 10
    TIMEOUT = 11
    HOMING_WITHOUT_ENDSTOP = 12
    INVALID_STATE = 13
    NOT_CALIBRATED = 14
    NOT_CONVERGING = 15


class AxisError(enum.IntFlag):
    """Bits of ``ODrive.Error`` (heartbeat Axis_Error, Get_Error Active_Errors/Disarm_Reason)."""

    INITIALIZING = 0x1
    SYSTEM_LEVEL = 0x2
    TIMING_ERROR = 0x4
    MISSING_ESTIMATE = 0x8
    BAD_CONFIG = 0x10
    DRV_FAULT = 0x20
    MISSING_INPUT = 0x40
    DC_BUS_OVER_VOLTAGE = 0x100
    DC_BUS_UNDER_VOLTAGE = 0x200
    DC_BUS_OVER_CURRENT = 0x400
    DC_BUS_OVER_REGEN_CURRENT = 0x800
    CURRENT_LIMIT_VIOLATION = 0x1000
    MOTOR_OVER_TEMP = 0x2000
    INVERTER_OVER_TEMP = 0x4000
    VELOCITY_LIMIT_VIOLATION = 0x8000
    POSITION_LIMIT_VIOLATION = 0x10000
    WATCHDOG_TIMER_EXPIRED = 0x1000000
    ESTOP_REQUESTED = 0x2000000
    SPINOUT_DETECTED = 0x4000000
    BRAKE_RESISTOR_DISARMED = 0x8000000
    THERMISTOR_DISCONNECTED = 0x10000000
    CALIBRATION_ERROR = 0x40000000


_AXIS_ERROR_TEXT: dict[AxisError, str] = {
    AxisError.INITIALIZING: "the system is initializing or reconfiguring",
    AxisError.SYSTEM_LEVEL: "unexpected system error (firmware fault)",
    AxisError.TIMING_ERROR: "an internal hard timing requirement was violated",
    AxisError.MISSING_ESTIMATE: "the position/velocity/phase estimate was invalid",
    AxisError.BAD_CONFIG: "the ODrive configuration is invalid or incomplete",
    AxisError.DRV_FAULT: "the gate driver chip reported an error",
    AxisError.MISSING_INPUT: "no value was provided for the active input",
    AxisError.DC_BUS_OVER_VOLTAGE: "DC bus voltage above the configured limit",
    AxisError.DC_BUS_UNDER_VOLTAGE: "DC bus voltage below the configured limit",
    AxisError.DC_BUS_OVER_CURRENT: "too much current drawn from the DC bus",
    AxisError.DC_BUS_OVER_REGEN_CURRENT: "too much current pushed back into the DC bus",
    AxisError.CURRENT_LIMIT_VIOLATION: "the motor current exceeded its hard limit",
    AxisError.MOTOR_OVER_TEMP: "the motor thermistor is above its upper limit",
    AxisError.INVERTER_OVER_TEMP: "the inverter thermistor is above its upper limit",
    AxisError.VELOCITY_LIMIT_VIOLATION: "the velocity exceeded the velocity limit",
    AxisError.POSITION_LIMIT_VIOLATION: "the position exceeded the position limits",
    AxisError.WATCHDOG_TIMER_EXPIRED: "the axis watchdog expired (setpoints stopped arriving)",
    AxisError.ESTOP_REQUESTED: "an emergency stop was requested",
    AxisError.SPINOUT_DETECTED: "spinout detected (encoder slip or wrong calibration)",
    AxisError.BRAKE_RESISTOR_DISARMED: "the brake resistor was disarmed",
    AxisError.THERMISTOR_DISCONNECTED: "a thermistor is enabled but disconnected",
    AxisError.CALIBRATION_ERROR: "a calibration procedure failed",
}


def describe_axis_error(code: int) -> str:
    """A readable message for an axis error bit set, e.g. ``"DRV_FAULT (the gate driver...)"``.

    Unknown bits are listed in hex so nothing the device reports is hidden.
    """
    if code == 0:
        return "no error"
    parts: list[str] = []
    known = 0
    for bit, text in _AXIS_ERROR_TEXT.items():
        if code & bit:
            parts.append(f"{bit.name} ({text})")
            known |= bit
    if code & ~known:
        parts.append(f"unknown error bits 0x{code & ~known:08X}")
    return "; ".join(parts)
