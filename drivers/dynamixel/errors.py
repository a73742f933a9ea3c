"""Dynamixel Protocol 2.0 error reports: the error byte of a status packet (`StatusError`, the Alert
bit) and the X series' Hardware Error Status (70) bits, each with a readable text.

Source: ROBOTIS e-Manual, "Protocol 2.0" (status packet error field) and the X-series control
table (Hardware Error Status). `drivers.dynamixel.protocol` re-exports these names.
"""

from __future__ import annotations

import enum

from drivers.serial_bus.framing import describe_bits

__all__ = [
    "ALERT_BIT",
    "HardwareError",
    "StatusError",
    "describe_hardware_error",
    "describe_status_error",
]

ALERT_BIT = 0x80  # in a status packet's error byte: the device has a hardware error


class StatusError(enum.IntEnum):
    """The error number in bits 0-6 of a status packet's error byte."""

    NONE = 0x00
    RESULT_FAIL = 0x01
    INSTRUCTION = 0x02
    CRC = 0x03
    DATA_RANGE = 0x04
    DATA_LENGTH = 0x05
    DATA_LIMIT = 0x06
    ACCESS = 0x07


class HardwareError(enum.IntFlag):
    """Hardware Error Status (70) bits of the X series; any of them turns torque off."""

    INPUT_VOLTAGE = 0x01
    OVERHEATING = 0x04
    MOTOR_ENCODER = 0x08
    ELECTRICAL_SHOCK = 0x10
    OVERLOAD = 0x20


_HARDWARE_ERROR_TEXT: dict[int, str] = {
    HardwareError.INPUT_VOLTAGE: "input voltage out of range",
    HardwareError.OVERHEATING: "overheating",
    HardwareError.MOTOR_ENCODER: "motor encoder error",
    HardwareError.ELECTRICAL_SHOCK: "electrical shock or insufficient power",
    HardwareError.OVERLOAD: "overload (persistent load above the maximum output)",
}

_STATUS_ERROR_TEXT: dict[int, str] = {
    StatusError.RESULT_FAIL: "result fail",
    StatusError.INSTRUCTION: "instruction error",
    StatusError.CRC: "CRC error",
    StatusError.DATA_RANGE: "data range error",
    StatusError.DATA_LENGTH: "data length error",
    StatusError.DATA_LIMIT: "data limit error",
    StatusError.ACCESS: "access error",
}


def describe_hardware_error(bits: int) -> str:
    """A readable list of the Hardware Error Status bits that are set."""
    return describe_bits(bits, _HARDWARE_ERROR_TEXT, "no hardware error")


def describe_status_error(error: int) -> str:
    """A readable form of a status packet's error byte."""
    number = error & ~ALERT_BIT
    text = _STATUS_ERROR_TEXT.get(number) or (f"error number {number}" if number else "ok")
    return text + (" (alert: hardware error)" if error & ALERT_BIT else "")
