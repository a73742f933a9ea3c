"""CiA 301 and CiA 402 as numbers: COB-IDs, the object indices the driver uses, the controlword
commands, the statusword's states, and the standard tables of SDO abort codes and error codes.
Pure data and lookups, shared by the driver and the simulated drive.

Sources: CiA 301 v4.2 (COB-IDs of the predefined connection set, table 22 "SDO abort codes",
the NMT command specifiers) and CiA 402-2 v4.1 / IEC 61800-7-201 (controlword and statusword,
figure "state machine", table "error codes", object 0x605A).
"""

from __future__ import annotations

import enum

__all__ = [
    "ABORT_CODES",
    "COB_EMCY",
    "COB_HEARTBEAT",
    "COB_RPDO",
    "COB_SDO_RX",
    "COB_SDO_TX",
    "COB_SYNC",
    "COB_TPDO",
    "ERROR_CODES",
    "MODE_CSP",
    "QUICK_STOP_TO_DISABLED",
    "STATUS_FAULT",
    "STATUS_FOLLOWING_ERROR",
    "STATUS_TARGET_REACHED",
    "Command",
    "Obj",
    "State",
    "describe_abort",
    "describe_error",
    "state_of",
]

COB_SYNC = 0x080
COB_EMCY = 0x080  # + node id
COB_TPDO = (0x180, 0x280, 0x380, 0x480)  # + node id: TPDO1..4 of the predefined connection set
COB_RPDO = (0x200, 0x300, 0x400, 0x500)
COB_SDO_TX = 0x580  # server to client (the drive's answers)
COB_SDO_RX = 0x600  # client to server (requests to the drive)
COB_HEARTBEAT = 0x700
MODE_CSP = 8  # 0x6060: cyclic synchronous position


class Obj(enum.IntEnum):
    """Object indices (subindex 0 unless a name says otherwise)."""

    DEVICE_TYPE = 0x1000
    ERROR_REGISTER = 0x1001
    PRODUCER_HEARTBEAT = 0x1017
    IDENTITY = 0x1018  # :1 vendor id, :2 product code, :3 revision, :4 serial
    RPDO_COMM = 0x1400
    RPDO_MAP = 0x1600
    TPDO_COMM = 0x1800
    TPDO_MAP = 0x1A00
    ERROR_CODE = 0x603F
    CONTROLWORD = 0x6040
    STATUSWORD = 0x6041
    QUICK_STOP_OPTION = 0x605A
    MODES_OF_OPERATION = 0x6060
    MODES_DISPLAY = 0x6061
    POSITION_ACTUAL = 0x6064
    FOLLOWING_ERROR_WINDOW = 0x6065
    FOLLOWING_ERROR_TIMEOUT = 0x6066
    VELOCITY_ACTUAL = 0x606C
    MAX_TORQUE = 0x6072
    RATED_TORQUE = 0x6076
    TORQUE_ACTUAL = 0x6077
    TARGET_POSITION = 0x607A
    SOFTWARE_POSITION_LIMIT = 0x607D  # :1 min, :2 max
    ENCODER_RESOLUTION = 0x608F  # :1 increments, :2 motor revolutions
    GEAR_RATIO = 0x6091  # :1 motor revolutions, :2 driving shaft revolutions
    FEED_CONSTANT = 0x6092  # :1 feed (position units), :2 driving shaft revolutions
    VELOCITY_OFFSET = 0x60B1
    TORQUE_OFFSET = 0x60B2
    INTERPOLATION_PERIOD = 0x60C2  # :1 value, :2 index (10^index s)


class Command(enum.IntEnum):
    """Controlword values of the device control commands (bits 0-3 and 7; CiA 402-2 table 10)."""

    DISABLE_VOLTAGE = 0x0000
    QUICK_STOP = 0x0002
    SHUTDOWN = 0x0006
    SWITCH_ON = 0x0007  # also "disable operation" from Operation Enabled
    ENABLE_OPERATION = 0x000F
    FAULT_RESET = 0x0080  # acts on the rising edge of bit 7


class State(enum.Enum):
    """The power drive system's states, decoded from the statusword."""

    NOT_READY_TO_SWITCH_ON = "not ready to switch on"
    SWITCH_ON_DISABLED = "switch on disabled"
    READY_TO_SWITCH_ON = "ready to switch on"
    SWITCHED_ON = "switched on"
    OPERATION_ENABLED = "operation enabled"
    QUICK_STOP_ACTIVE = "quick stop active"
    FAULT_REACTION_ACTIVE = "fault reaction active"
    FAULT = "fault"


# (mask, value) of the statusword for each state, bits 0-3, 5 and 6.
_STATE_BITS = (
    (0x4F, 0x00, State.NOT_READY_TO_SWITCH_ON),
    (0x4F, 0x40, State.SWITCH_ON_DISABLED),
    (0x6F, 0x21, State.READY_TO_SWITCH_ON),
    (0x6F, 0x23, State.SWITCHED_ON),
    (0x6F, 0x27, State.OPERATION_ENABLED),
    (0x6F, 0x07, State.QUICK_STOP_ACTIVE),
    (0x4F, 0x0F, State.FAULT_REACTION_ACTIVE),
    (0x4F, 0x08, State.FAULT),
)

STATUS_FAULT = 0x0008
STATUS_TARGET_REACHED = 0x0400
STATUS_FOLLOWING_ERROR = 0x2000  # CSP: bit 13

QUICK_STOP_TO_DISABLED = frozenset({0, 1, 2, 3, 4})
"""0x605A options after which the drive goes to Switch On Disabled by itself; 5 to 8 stay in
Quick Stop Active at standstill."""


def state_of(statusword: int) -> State | None:
    """The state a statusword shows, or None for a pattern CiA 402 does not define."""
    for mask, value, state in _STATE_BITS:
        if statusword & mask == value:
            return state
    return None


ABORT_CODES: dict[int, str] = {
    0x05030000: "toggle bit not alternated",
    0x05040000: "SDO protocol timed out",
    0x05040001: "client/server command specifier not valid or unknown",
    0x05040002: "invalid block size",
    0x05040003: "invalid sequence number",
    0x05040004: "CRC error",
    0x05040005: "out of memory",
    0x06010000: "unsupported access to an object",
    0x06010001: "attempt to read a write only object",
    0x06010002: "attempt to write a read only object",
    0x06020000: "object does not exist in the object dictionary",
    0x06040041: "object cannot be mapped to the PDO",
    0x06040042: "the number and length of the objects to be mapped would exceed the PDO length",
    0x06040043: "general parameter incompatibility",
    0x06040047: "general internal incompatibility in the device",
    0x06060000: "access failed due to a hardware error",
    0x06070010: "data type does not match, length of service parameter does not match",
    0x06070012: "data type does not match, length of service parameter too high",
    0x06070013: "data type does not match, length of service parameter too low",
    0x06090011: "sub-index does not exist",
    0x06090030: "invalid value for parameter (download only)",
    0x06090031: "value of parameter written too high (download only)",
    0x06090032: "value of parameter written too low (download only)",
    0x06090036: "maximum value is less than minimum value",
    0x060A0023: "resource not available: SDO connection",
    0x08000000: "general error",
    0x08000020: "data cannot be transferred or stored to the application",
    0x08000021: "data cannot be transferred or stored to the application because of local control",
    0x08000022: "data cannot be transferred or stored to the application because of the present "
    "device state",
    0x08000023: "object dictionary dynamic generation fails or no object dictionary is present",
    0x08000024: "no data available",
}


def describe_abort(code: int) -> str:
    """``0x06020000 (object does not exist in the object dictionary)``."""
    return f"0x{code:08X} ({ABORT_CODES.get(code, 'not a standard abort code')})"


ERROR_CODES: dict[int, str] = {
    0x0000: "no error",
    0x1000: "generic error",
    0x2110: "short circuit/earth leakage (input)",
    0x2220: "continuous over-current (device internal)",
    0x2310: "continuous over-current",
    0x2320: "short circuit/earth leakage (motor side)",
    0x3110: "mains over-voltage",
    0x3120: "mains under-voltage",
    0x3210: "DC link over-voltage",
    0x3220: "DC link under-voltage",
    0x4210: "excess temperature device",
    0x4310: "excess temperature drive",
    0x4410: "excess temperature supply",
    0x5112: "supply low voltage",
    0x5530: "data storage (non-volatile memory) error",
    0x6010: "software reset (watchdog)",
    0x6320: "parameter error",
    0x7121: "motor blocked",
    0x7305: "incremental sensor 1 fault",
    0x7500: "communication error",
    0x8110: "CAN overrun (objects lost)",
    0x8120: "CAN in error passive mode",
    0x8130: "life guard error or heartbeat error",
    0x8140: "recovered from bus off",
    0x8250: "RPDO timeout",
    0x8400: "velocity speed controller deviation",
    0x8500: "position controller error",
    0x8611: "following error",
    0x8612: "reference limit",
    0xFF00: "device specific",
}

_ERROR_CLASSES = (
    (0xF000, 0x2000, "current"),
    (0xF000, 0x3000, "voltage"),
    (0xF000, 0x4000, "temperature"),
    (0xFF00, 0x5000, "device hardware"),
    (0xF000, 0x6000, "device software"),
    (0xFF00, 0x7000, "additional modules"),
    (0xF000, 0x8000, "monitoring"),
    (0xFF00, 0x9000, "external error"),
    (0xFF00, 0xF000, "additional functions"),
    (0xFF00, 0xFF00, "device specific"),
)


def describe_error(code: int) -> str:
    """``0x8611 following error``; a code outside the table by its class (``0x2399 current
    (device-specific code)``)."""
    text = ERROR_CODES.get(code)
    if text is None:
        group = next((name for mask, v, name in _ERROR_CLASSES if code & mask == v), "unknown")
        text = f"{group} (code not in the standard table)"
    return f"0x{code:04X} {text}"
