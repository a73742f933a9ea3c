"""The Feetech SCS/STS serial protocol: a pure codec (no I/O) for instruction and status packets.

Packet layout (Feetech, "SCS Servo Communication Protocol"; the same framing in Feetech's Python
SDK, `scservo_sdk/protocol_packet_handler.py`)::

    FF FF | ID | LEN | INSTR or ERROR | params… | CHK

LEN = len(params) + 2 (it counts INSTR/ERROR, the params and CHK); CHK = ~(ID + LEN + INSTR +
sum(params)) & 0xFF. A status packet (a servo's reply) has the same framing with the servo's
status error byte in place of the instruction; the wire cannot tell the two apart, the direction
does. IDs are 0-253 (0xFE is broadcast: every servo obeys, none answers, except for Ping and for
the addressed replies of a Sync Read). Multi-byte items are little-endian words on the STS/SMS
(magnetic encoder) series and big-endian on the SCS (potentiometer) series, which also has no Sync
Read. Signed items are sign-magnitude (a direction bit, not two's complement): `encode_signed` and
`decode_signed` are the one place that knows it; the bit of each item is in
`drivers.feetech.table`.

Builders (`make_*`) return the bytes to send; `PacketParser` turns a byte stream back into packets,
skipping garbage; `transaction_time_s` is a transaction's time on the wire.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from drivers.serial_bus.framing import (
    Decoded,
    FrameParser,
    describe_bits,
    sync_write_params,
    transaction_time_s,
    wire_time_s,
)

__all__ = [
    "BROADCAST_ID",
    "HEADER",
    "MAX_ID",
    "ByteOrder",
    "ErrorBit",
    "Instruction",
    "Packet",
    "PacketParser",
    "checksum",
    "decode_signed",
    "decode_word",
    "describe_error",
    "encode_packet",
    "encode_signed",
    "encode_word",
    "make_action",
    "make_ping",
    "make_read",
    "make_reg_write",
    "make_reset",
    "make_status",
    "make_sync_read",
    "make_sync_write",
    "make_write",
    "status_packet_size",
    "transaction_time_s",
    "wire_time_s",
]

HEADER = b"\xff\xff"
BROADCAST_ID = 0xFE
MAX_ID = 0xFD  # 253, the protocol document's range (the SDK's MAX_ID is 0xFC, 252)
_OVERHEAD = 6  # FF FF ID LEN INSTR/ERROR CHK
MAX_LENGTH = 0xFF

ByteOrder = Literal["little", "big"]


class Instruction(enum.IntEnum):
    PING = 0x01
    READ = 0x02
    WRITE = 0x03
    REG_WRITE = 0x04
    ACTION = 0x05
    RESET = 0x06  # factory defaults (in the protocol document; not in the Python SDK)
    SYNC_READ = 0x82  # STS/SMS only
    SYNC_WRITE = 0x83


class ErrorBit(enum.IntFlag):
    """A status packet's error byte, which mirrors the servo status item (65).

    Bits from the SDK's `protocol_packet_handler.py` (ERRBIT_*), which agree with Feetech's STS
    memory table ("servo status": BIT0 voltage, BIT1 magnetic encoder, BIT2 temperature, BIT3
    current, BIT4 unused, BIT5 load). The SCS series has only voltage, temperature and load.
    """

    VOLTAGE = 0x01
    SENSOR = 0x02  # SDK: ERRBIT_ANGLE, "angle sensor"; memory table: magnetic encoder
    OVERHEAT = 0x04
    OVERCURRENT = 0x08  # SDK: ERRBIT_OVERELE
    OVERLOAD = 0x20


_ERROR_TEXT: dict[int, str] = {
    ErrorBit.VOLTAGE: "input voltage out of range",
    ErrorBit.SENSOR: "angle sensor (magnetic encoder) error",
    ErrorBit.OVERHEAT: "overheat",
    ErrorBit.OVERCURRENT: "overcurrent",
    ErrorBit.OVERLOAD: "overload",
}


def describe_error(bits: int) -> str:
    """A readable list of the status error bits that are set."""
    return describe_bits(bits, _ERROR_TEXT, "no error")


# -- words and sign-magnitude -------------------------------------------------------------------


def encode_word(value: int, byteorder: ByteOrder = "little", size: int = 2) -> bytes:
    """An unsigned item value as `size` bytes in the series' byte order. Raises ValueError."""
    return value.to_bytes(size, byteorder)


def decode_word(data: bytes | bytearray, byteorder: ByteOrder = "little") -> int:
    return int.from_bytes(data, byteorder)


def encode_signed(value: int, sign_bit: int) -> int:
    """A signed value as the sign-magnitude raw value with its direction at `sign_bit`.

    Raises ValueError when |value| does not fit below the sign bit."""
    magnitude = abs(value)
    if magnitude >= 1 << sign_bit:
        raise ValueError(f"{value} does not fit in sign-magnitude with the sign at bit {sign_bit}")
    return magnitude | (1 << sign_bit) if value < 0 else magnitude


def decode_signed(raw: int, sign_bit: int) -> int:
    """The signed value of a sign-magnitude raw value (bits above the sign bit are ignored)."""
    magnitude = raw & ((1 << sign_bit) - 1)
    return -magnitude if raw & (1 << sign_bit) else magnitude


# -- packets ----------------------------------------------------------------------------------


def checksum(body: bytes | bytearray | memoryview) -> int:
    """~(ID + LEN + INSTR/ERROR + params) & 0xFF over `body` (everything after the header)."""
    return ~sum(body) & 0xFF


@dataclass(frozen=True, slots=True)
class Packet:
    """A decoded packet: ID, its code and params.

    `code` is the instruction of an instruction packet and the error byte of a status packet.
    """

    id: int
    code: int
    params: bytes = b""

    @property
    def error(self) -> int:
        return self.code


def encode_packet(packet_id: int, code: int, params: bytes = b"") -> bytes:
    """Frame one packet. Raises ValueError (bad ID, too many params)."""
    if not (0 <= packet_id <= MAX_ID or packet_id == BROADCAST_ID):
        raise ValueError(f"packet ID {packet_id} outside [0, {MAX_ID}] and not broadcast")
    length = len(params) + 2
    if length > MAX_LENGTH:
        raise ValueError(f"{len(params)} parameter bytes; at most {MAX_LENGTH - 2} fit")
    body = bytes([packet_id, length, code]) + params
    return HEADER + body + bytes([checksum(body)])


def make_ping(device_id: int) -> bytes:
    return encode_packet(device_id, Instruction.PING)


def make_read(device_id: int, address: int, length: int) -> bytes:
    return encode_packet(device_id, Instruction.READ, bytes([address, length]))


def make_write(device_id: int, address: int, data: bytes) -> bytes:
    return encode_packet(device_id, Instruction.WRITE, bytes([address]) + data)


def make_reg_write(device_id: int, address: int, data: bytes) -> bytes:
    """A write held by the servo until Action."""
    return encode_packet(device_id, Instruction.REG_WRITE, bytes([address]) + data)


def make_action(device_id: int = BROADCAST_ID) -> bytes:
    return encode_packet(device_id, Instruction.ACTION)


def make_reset(device_id: int) -> bytes:
    return encode_packet(device_id, Instruction.RESET)


def make_sync_read(address: int, length: int, ids: Sequence[int]) -> bytes:
    """One broadcast Sync Read; each listed servo answers in turn with `length` bytes."""
    return encode_packet(BROADCAST_ID, Instruction.SYNC_READ, bytes([address, length, *ids]))


def make_sync_write(address: int, length: int, data_by_id: Mapping[int, bytes]) -> bytes:
    """One broadcast Sync Write of `length` bytes per servo; servos do not answer."""
    params = sync_write_params(bytes([address, length]), length, data_by_id)
    return encode_packet(BROADCAST_ID, Instruction.SYNC_WRITE, params)


def make_status(device_id: int, error: int, data: bytes = b"") -> bytes:
    """A status packet, as a servo sends it (used by the simulated chain)."""
    return encode_packet(device_id, error, data)


def status_packet_size(data_length: int) -> int:
    """Bytes on the wire of a status packet carrying `data_length` bytes."""
    return _OVERHEAD + data_length


class PacketParser(FrameParser[Packet]):
    """Turns a byte stream into packets, resynchronising after garbage (`FrameParser`).

    The parser looks for ``FF FF``, checks the ID (0-253 or broadcast), LEN (2..`max_length`) and
    the checksum; on any failure it resumes the search one byte further.
    """

    header = HEADER

    def __init__(self, max_length: int = MAX_LENGTH) -> None:
        super().__init__(max_length)

    def _try_decode(self, start: int) -> Decoded[Packet]:
        buf = self._buffer
        if len(buf) < start + 4:
            return "incomplete"
        packet_id, length = buf[start + 2], buf[start + 3]
        if not (packet_id <= MAX_ID or packet_id == BROADCAST_ID) or not (
            2 <= length <= self.max_length
        ):
            return "invalid"
        end = start + 4 + length
        if len(buf) < end:
            return "incomplete"
        if checksum(memoryview(buf)[start + 2 : end - 1]) != buf[end - 1]:
            return "invalid"
        return Packet(packet_id, buf[start + 4], bytes(buf[start + 5 : end - 1])), end
