"""Dynamixel Protocol 2.0: a pure codec (no I/O) for instruction and status packets.

Packet layout (ROBOTIS e-Manual, "Protocol 2.0")::

    FF FF FD 00 | ID | LEN_L LEN_H | INST | params… | CRC_L CRC_H

LEN counts INST, params and the CRC after byte stuffing; a status packet's first parameter is its
error byte (bit 7 = Alert, bits 0-6 = error number). Byte stuffing: wherever ``FF FF FD`` appears
from INST to the last parameter, an ``FD`` is inserted after it. The CRC is the e-Manual's
table-driven CRC-16 (polynomial 0x8005, initial value 0, not reflected), computed over everything
from the header to the last stuffed parameter, and sent low byte first.

Builders (`make_*`) return the bytes to send; `PacketParser` turns a byte stream back into packets,
skipping garbage; `transaction_time_s` is a transaction's time on the wire. The X-series control
table (addresses, status block, units) lives in `drivers.dynamixel.table` and the error reports in
`drivers.dynamixel.errors`; both are re-exported here.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from drivers.dynamixel.errors import (
    ALERT_BIT,
    HardwareError,
    StatusError,
    describe_hardware_error,
    describe_status_error,
)
from drivers.dynamixel.table import (
    BAUD_RATES,
    COUNTS_PER_REV,
    STATUS_BLOCK_LENGTH,
    STATUS_BLOCK_SOURCES,
    WATCHDOG_ERROR,
    Addr,
    OperatingMode,
    StatusBlock,
    baud_rate_index,
    counts_to_rad,
    decode_status_block,
    indirect_data_address,
    make_indirect_mapping,
    rad_s_to_velocity,
    rad_to_counts,
    return_delay_s,
    velocity_to_rad_s,
    watchdog_s,
    watchdog_units,
)
from drivers.serial_bus.framing import (
    Decoded,
    FrameParser,
    sync_write_params,
    transaction_time_s,
    wire_time_s,
)

__all__ = [
    "ALERT_BIT",
    "BAUD_RATES",
    "BROADCAST_ID",
    "COUNTS_PER_REV",
    "HEADER",
    "MAX_ID",
    "STATUS_BLOCK_LENGTH",
    "STATUS_BLOCK_SOURCES",
    "WATCHDOG_ERROR",
    "Addr",
    "HardwareError",
    "Instruction",
    "OperatingMode",
    "Packet",
    "PacketParser",
    "StatusBlock",
    "StatusError",
    "baud_rate_index",
    "counts_to_rad",
    "crc16",
    "decode_status_block",
    "describe_hardware_error",
    "describe_status_error",
    "encode_packet",
    "i32",
    "indirect_data_address",
    "make_indirect_mapping",
    "make_ping",
    "make_read",
    "make_reboot",
    "make_status",
    "make_sync_read",
    "make_sync_write",
    "make_write",
    "rad_s_to_velocity",
    "rad_to_counts",
    "return_delay_s",
    "status_packet_size",
    "stuff",
    "transaction_time_s",
    "u16",
    "unstuff",
    "velocity_to_rad_s",
    "watchdog_s",
    "watchdog_units",
    "wire_time_s",
]

HEADER = b"\xff\xff\xfd\x00"
BROADCAST_ID = 0xFE
MAX_ID = 0xFC  # 253 (0xFD) and 255 (0xFF) would look like a header
_OVERHEAD = 10  # header 4 + ID 1 + LEN 2 + INST 1 + CRC 2


class Instruction(enum.IntEnum):
    PING = 0x01
    READ = 0x02
    WRITE = 0x03
    REG_WRITE = 0x04
    ACTION = 0x05
    FACTORY_RESET = 0x06
    REBOOT = 0x08
    CLEAR = 0x10
    STATUS = 0x55
    SYNC_READ = 0x82
    SYNC_WRITE = 0x83
    BULK_READ = 0x92
    BULK_WRITE = 0x93


# -- CRC and byte stuffing ------------------------------------------------------------------------


def _crc_table(poly: int) -> tuple[int, ...]:
    table = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ poly) if crc & 0x8000 else (crc << 1)
        table.append(crc & 0xFFFF)
    return tuple(table)


_CRC_TABLE = _crc_table(0x8005)


def crc16(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """The Protocol 2.0 CRC-16 (poly 0x8005, init 0, MSB first) of `data`."""
    for byte in data:
        crc = ((crc << 8) ^ _CRC_TABLE[((crc >> 8) ^ byte) & 0xFF]) & 0xFFFF
    return crc


def stuff(payload: bytes) -> bytes:
    """Insert ``FD`` after every ``FF FF FD`` (the INST-to-last-parameter region)."""
    out = bytearray()
    for i, byte in enumerate(payload):
        out.append(byte)
        if byte == 0xFD and i >= 2 and payload[i - 2 : i] == b"\xff\xff":
            out.append(0xFD)
    return bytes(out)


def unstuff(payload: bytes | bytearray | memoryview) -> bytes:
    """Remove the stuffing byte after every ``FF FF FD``; the inverse of `stuff`."""
    out = bytearray()
    data = bytes(payload)
    i = 0
    while i < len(data):
        out.append(data[i])
        stuffed = i >= 2 and data[i] == 0xFD and data[i - 2 : i] == b"\xff\xff"
        if stuffed and i + 1 < len(data) and data[i + 1] == 0xFD:
            i += 1  # skip the stuffing byte
        i += 1
    return bytes(out)


# -- packets ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Packet:
    """A decoded packet: ID, instruction and un-stuffed parameters.

    For a status packet (instruction 0x55) the first parameter is the error byte: see `error` and
    `data`. `crc_ok` is False only for a packet a `PacketParser(keep_bad_crc=True)` returned
    although its CRC did not match (a device answers those with a CRC Error status).
    """

    id: int
    instruction: int
    params: bytes = b""
    crc_ok: bool = True

    @property
    def is_status(self) -> bool:
        return self.instruction == Instruction.STATUS

    @property
    def error(self) -> int:
        """The status error byte (0 when the packet carries none)."""
        return self.params[0] if self.is_status and self.params else 0

    @property
    def data(self) -> bytes:
        """A status packet's data (its parameters after the error byte)."""
        return self.params[1:] if self.is_status else self.params


def encode_packet(packet_id: int, instruction: int, params: bytes = b"") -> bytes:
    """Frame one packet: header, ID, stuffed length, instruction, stuffed params, CRC."""
    if not (0 <= packet_id <= MAX_ID or packet_id == BROADCAST_ID):
        raise ValueError(f"packet ID {packet_id} outside [0, {MAX_ID}] and not broadcast")
    body = stuff(bytes([instruction]) + params)
    frame = HEADER + bytes([packet_id]) + u16(len(body) + 2) + body
    return frame + u16(crc16(frame))


def make_ping(device_id: int) -> bytes:
    return encode_packet(device_id, Instruction.PING)


def make_read(device_id: int, address: int, length: int) -> bytes:
    return encode_packet(device_id, Instruction.READ, u16(address) + u16(length))


def make_write(device_id: int, address: int, data: bytes) -> bytes:
    return encode_packet(device_id, Instruction.WRITE, u16(address) + data)


def make_reboot(device_id: int) -> bytes:
    return encode_packet(device_id, Instruction.REBOOT)


def make_sync_read(address: int, length: int, ids: Sequence[int]) -> bytes:
    """One broadcast Sync Read; each listed device answers in turn with `length` bytes."""
    return encode_packet(
        BROADCAST_ID, Instruction.SYNC_READ, u16(address) + u16(length) + bytes(ids)
    )


def make_sync_write(address: int, length: int, data_by_id: Mapping[int, bytes]) -> bytes:
    """One broadcast Sync Write of `length` bytes per device; devices do not answer."""
    params = sync_write_params(u16(address) + u16(length), length, data_by_id)
    return encode_packet(BROADCAST_ID, Instruction.SYNC_WRITE, params)


def make_status(device_id: int, error: int, data: bytes = b"") -> bytes:
    """A status packet, as a device sends it (used by the simulated chain)."""
    return encode_packet(device_id, Instruction.STATUS, bytes([error]) + data)


def u16(value: int) -> bytes:
    return value.to_bytes(2, "little")


def i32(value: int) -> bytes:
    return value.to_bytes(4, "little", signed=True)


def status_packet_size(data_length: int) -> int:
    """Bytes on the wire of a status packet carrying `data_length` bytes (without stuffing)."""
    return _OVERHEAD + 1 + data_length


class PacketParser(FrameParser[Packet]):
    """Turns a byte stream into packets, resynchronising after garbage (`FrameParser`).

    The parser scans for the header, checks the ID, the length (at most `max_length`) and the CRC,
    and un-stuffs the parameters. With `keep_bad_crc` (what a device does), a packet whose header,
    ID and length are valid but whose CRC is not is returned with ``crc_ok=False`` instead of
    being discarded.
    """

    header = HEADER

    def __init__(self, max_length: int = 1024, *, keep_bad_crc: bool = False) -> None:
        super().__init__(max_length)
        self.keep_bad_crc = keep_bad_crc

    def _try_decode(self, start: int) -> Decoded[Packet]:
        buf = self._buffer
        if len(buf) < start + 7:
            return "incomplete"
        packet_id = buf[start + 4]
        length = buf[start + 5] | buf[start + 6] << 8
        if not (0 <= packet_id <= MAX_ID or packet_id == BROADCAST_ID) or not (
            3 <= length <= self.max_length
        ):
            return "invalid"
        end = start + 7 + length
        if len(buf) < end:
            return "incomplete"
        crc = buf[end - 2] | buf[end - 1] << 8
        crc_ok = crc16(memoryview(buf)[start : end - 2]) == crc
        if not crc_ok and not self.keep_bad_crc:
            return "invalid"
        body = unstuff(buf[start + 7 : end - 2])
        return Packet(packet_id, body[0], body[1:], crc_ok), end
