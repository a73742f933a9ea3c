"""Byte-exact tests of the Dynamixel Protocol 2.0 codec against the ROBOTIS e-Manual's worked
examples (https://emanual.robotis.com/docs/en/dxl/protocol2/), and its laws with hypothesis."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drivers.dynamixel import protocol as dxl
from drivers.dynamixel.protocol import HardwareError, Instruction, Packet, PacketParser


def b(text: str) -> bytes:
    return bytes.fromhex(text)


def test_ping_to_id_1_is_the_emanual_packet_ending_in_crc_19_4e() -> None:
    assert dxl.make_ping(1) == b("FF FF FD 00 01 03 00 01 19 4E")


# (what, encoded by the codec, bytes from the e-Manual)
INSTRUCTION_EXAMPLES = [
    ("ping broadcast", dxl.make_ping(dxl.BROADCAST_ID), "FF FF FD 00 FE 03 00 01 31 42"),
    (
        "read present position of id 1",
        dxl.make_read(1, 132, 4),
        "FF FF FD 00 01 07 00 02 84 00 04 00 1D 15",
    ),
    (
        "write 512 to goal position of id 1",
        dxl.make_write(1, 116, dxl.i32(512)),
        "FF FF FD 00 01 09 00 03 74 00 00 02 00 00 CA 89",
    ),
    (
        "sync read present position of ids 1, 2",
        dxl.make_sync_read(132, 4, [1, 2]),
        "FF FF FD 00 FE 09 00 82 84 00 04 00 01 02 CE FA",
    ),
    (
        "sync write goal position 150 / 170 to ids 1, 2",
        dxl.make_sync_write(116, 4, {1: dxl.i32(150), 2: dxl.i32(170)}),
        "FF FF FD 00 FE 11 00 83 74 00 04 00 01 96 00 00 00 02 AA 00 00 00 82 87",
    ),
    ("reboot id 1", dxl.make_reboot(1), "FF FF FD 00 01 03 00 08 2F 4E"),
]

# (what, status packet from the e-Manual, id, error, data)
STATUS_EXAMPLES = [
    ("ping reply, XM430-W210 fw 38", "FF FF FD 00 01 07 00 55 00 06 04 26 65 5D", 1, 0, "06 04 26"),
    ("ping reply of id 2", "FF FF FD 00 02 07 00 55 00 06 04 26 6F 6D", 2, 0, "06 04 26"),
    ("read reply, 166", "FF FF FD 00 01 08 00 55 00 A6 00 00 00 8C C0", 1, 0, "A6 00 00 00"),
    ("sync read, id 2", "FF FF FD 00 02 08 00 55 00 1F 08 00 00 BA BE", 2, 0, "1F 08 00 00"),
    ("write reply", "FF FF FD 00 01 04 00 55 00 A1 0C", 1, 0, ""),
]  # fmt: skip


@pytest.mark.parametrize(("what", "encoded", "expected"), INSTRUCTION_EXAMPLES)
def test_instruction_packets_match_the_emanual(what: str, encoded: bytes, expected: str) -> None:
    assert encoded.hex(" ").upper() == expected, what


@pytest.mark.parametrize(("what", "wire", "device_id", "error", "data"), STATUS_EXAMPLES)
def test_status_packets_match_the_emanual(
    what: str, wire: str, device_id: int, error: int, data: str
) -> None:
    assert dxl.make_status(device_id, error, b(data)) == b(wire), what
    (packet,) = PacketParser().feed(b(wire))
    assert (packet.id, packet.is_status, packet.error, packet.data) == (
        device_id,
        True,
        error,
        b(data),
    )


def test_crc_is_the_emanual_crc16() -> None:
    frame = b("FF FF FD 00 01 07 00 02 84 00 04 00")
    assert dxl.crc16(frame) == 0x151D  # sent low byte first: 1D 15


def test_sync_read_replies_parse_in_order_from_one_stream() -> None:
    wire = b(
        "FF FF FD 00 01 08 00 55 00 A6 00 00 00 8C C0 FF FF FD 00 02 08 00 55 00 1F 08 00 00 BA BE"
    )
    packets = PacketParser().feed(wire)
    assert [(p.id, int.from_bytes(p.data, "little")) for p in packets] == [(1, 166), (2, 2079)]


# -- byte stuffing ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "stuffed"),
    [
        ("FF FF FD", "FF FF FD FD"),
        ("01 FF FF FD 02", "01 FF FF FD FD 02"),
        ("FF FF FF FD", "FF FF FF FD FD"),
        ("FF FF FD FD", "FF FF FD FD FD"),
        ("FF FF FD FF FF FD", "FF FF FD FD FF FF FD FD"),
        ("FF FD FF FD", "FF FD FF FD"),
        ("", ""),
    ],
)
def test_byte_stuffing_examples(raw: str, stuffed: str) -> None:
    assert dxl.stuff(b(raw)) == b(stuffed)
    assert dxl.unstuff(b(stuffed)) == b(raw)


def test_a_stuffed_packet_counts_the_stuffing_in_its_length_and_crc() -> None:
    # Writing FF FF FD 00 at address 116 (as bytes: 74 00 FF FF FD 00) needs one stuffing byte.
    wire = dxl.make_write(1, 116, b("FF FF FD 00"))
    body = b("03 74 00 FF FF FD FD 00")
    frame = b("FF FF FD 00 01") + (len(body) + 2).to_bytes(2, "little") + body
    assert wire == frame + dxl.crc16(frame).to_bytes(2, "little")
    (packet,) = PacketParser().feed(wire)
    assert packet == Packet(1, Instruction.WRITE, b("74 00 FF FF FD 00"))


@given(st.binary(max_size=64))
def test_stuffing_is_invertible(raw: bytes) -> None:
    assert dxl.unstuff(dxl.stuff(raw)) == raw


@given(st.binary(max_size=64))
def test_stuffed_bytes_never_contain_a_bare_header_pattern(raw: bytes) -> None:
    stuffed = dxl.stuff(raw)
    at = stuffed.find(b"\xff\xff\xfd")
    while at >= 0:
        assert stuffed[at + 3 : at + 4] == b"\xfd"
        at = stuffed.find(b"\xff\xff\xfd", at + 4)


# -- parsing ----------------------------------------------------------------------------------

ids = st.one_of(st.integers(0, dxl.MAX_ID), st.just(dxl.BROADCAST_ID))
packets = st.builds(Packet, ids, st.integers(0, 255), st.binary(max_size=40))


@given(packets)
def test_encode_then_decode_is_the_identity(packet: Packet) -> None:
    parser = PacketParser()
    assert parser.feed(dxl.encode_packet(packet.id, packet.instruction, packet.params)) == [packet]
    assert (parser.corrupt, parser.pending) == (0, 0)


@given(packets, st.binary(min_size=1, max_size=40), st.data())
def test_garbage_before_a_packet_is_skipped_and_counted_once(
    packet: Packet, garbage: bytes, data: st.DataObject
) -> None:
    wire = garbage + dxl.encode_packet(packet.id, packet.instruction, packet.params)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(wire)), max_size=4)))
    parser = PacketParser()
    decoded = []
    for start, end in zip([0, *cuts], [*cuts, len(wire)], strict=True):
        decoded += parser.feed(wire[start:end])
    assert decoded[-1:] == [packet]
    assert parser.corrupt == 1
    assert parser.pending == 0


def test_a_packet_with_a_bad_crc_is_dropped_and_the_next_one_is_found() -> None:
    bad = bytearray(dxl.make_status(1, 0, dxl.i32(166)))
    bad[-1] ^= 0xFF
    good = dxl.make_status(2, 0, dxl.i32(2079))
    parser = PacketParser()
    assert [p.id for p in parser.feed(bytes(bad) + good)] == [2]
    assert parser.corrupt == 1


def test_a_bogus_length_does_not_swallow_the_packets_after_it() -> None:
    bogus_header = b("FF FF FD 00 01 F4 01")  # claims 500 bytes
    good = dxl.make_status(2, 0, dxl.i32(2079))
    parser = PacketParser()
    assert [p.id for p in parser.feed(bogus_header + good)] == [2]
    assert (parser.corrupt, parser.pending) == (1, 0)


def test_a_length_above_the_limit_is_rejected_at_once() -> None:
    parser = PacketParser(max_length=20)
    assert parser.feed(b("FF FF FD 00 01 15 00") + dxl.make_ping(3)) == [
        Packet(3, Instruction.PING)
    ]
    assert parser.corrupt == 1


def test_a_truncated_packet_stays_pending_until_completed() -> None:
    wire = dxl.make_status(1, 0, dxl.i32(166))
    parser = PacketParser()
    assert parser.feed(wire[:9]) == []
    assert parser.pending == 9
    assert [p.id for p in parser.feed(wire[9:])] == [1]
    assert parser.reset() == 0


@pytest.mark.parametrize("bad_id", [0xFD, 0xFF])
def test_ids_that_look_like_a_header_are_rejected(bad_id: int) -> None:
    frame = b("FF FF FD 00") + bytes([bad_id]) + b("03 00 01")
    wire = frame + dxl.crc16(frame).to_bytes(2, "little")
    parser = PacketParser()
    assert parser.feed(wire) == []
    assert parser.corrupt == 1


def test_encoding_an_invalid_id_raises() -> None:
    with pytest.raises(ValueError, match="253"):
        dxl.make_ping(253)


def test_sync_write_data_must_have_the_declared_length() -> None:
    with pytest.raises(ValueError, match="id 2 has 2 bytes, expected 4"):
        dxl.make_sync_write(116, 4, {1: dxl.i32(0), 2: b"\x00\x00"})


# -- the status block, errors and units -------------------------------------------------------


def test_status_block_maps_torque_error_watchdog_velocity_position_current() -> None:
    sources = (64, 70, 98, 128, 129, 130, 131, 132, 133, 134, 135, 126, 127)
    assert sources == dxl.STATUS_BLOCK_SOURCES
    address, mapping = dxl.make_indirect_mapping(3)
    assert address == 172  # Indirect Address 3
    assert mapping[:6] == b("40 00 46 00 62 00")
    assert mapping[-4:] == b("7E 00 7F 00")  # Present Current (126), both bytes
    assert dxl.indirect_data_address(3) == 226
    raw = b("01 20 FF") + dxl.i32(-12) + dxl.i32(-70000) + b("9C FF")  # current -100 units
    block = dxl.decode_status_block(raw)
    assert block == dxl.StatusBlock(True, 0x20, -1, -12, -70000, -100)
    with pytest.raises(ValueError, match="12 bytes"):
        dxl.decode_status_block(raw[:12])


def test_error_descriptions_are_readable() -> None:
    assert dxl.describe_status_error(0x87) == "access error (alert: hardware error)"
    assert dxl.describe_status_error(0x00) == "ok"
    assert dxl.describe_status_error(0x0C) == "error number 12"
    text = dxl.describe_hardware_error(HardwareError.OVERLOAD | HardwareError.OVERHEATING)
    assert text == "overheating, overload (persistent load above the maximum output)"
    assert "unknown bits 0x02" in dxl.describe_hardware_error(0x02)
    assert dxl.describe_hardware_error(0) == "no hardware error"


def test_unit_conversions() -> None:
    assert dxl.counts_to_rad(4096) == pytest.approx(2 * math.pi, abs=1e-12)
    assert dxl.rad_to_counts(-math.pi) == -2048
    assert dxl.velocity_to_rad_s(1) == pytest.approx(0.229 * 2 * math.pi / 60, abs=1e-12)
    assert dxl.rad_s_to_velocity(dxl.velocity_to_rad_s(-300)) == -300
    assert dxl.watchdog_units(0.1) == 5
    assert dxl.return_delay_s(250) == pytest.approx(500e-6, abs=1e-12)
    for bad in (0.0, 2.6):
        with pytest.raises(ValueError, match=r"\[0.02, 2.54\] s"):
            dxl.watchdog_units(bad)


def test_transaction_time_follows_the_baud_rate() -> None:
    request = len(dxl.make_sync_read(224, 11, range(6)))
    replies = [dxl.status_packet_size(11)] * 6
    at_1m = dxl.transaction_time_s(request, replies, 1_000_000, return_delay_s=0.0)
    at_4m = dxl.transaction_time_s(request, replies, 4_000_000, return_delay_s=0.0)
    assert at_1m == pytest.approx((20 + 6 * 22) * 10 / 1e6, abs=1e-12)
    assert at_4m == pytest.approx(at_1m / 4, abs=1e-12)
    delayed = dxl.transaction_time_s(request, replies, 1_000_000, return_delay_s=500e-6)
    assert delayed == pytest.approx(at_1m + 6 * 500e-6, abs=1e-12)


def test_parser_keeps_a_packet_with_a_bad_crc_only_when_asked() -> None:
    good = dxl.make_read(2, 7, 1)
    bad = good[:-1] + bytes([good[-1] ^ 0x5A])
    strict = dxl.PacketParser()
    assert strict.feed(bad + good) == [dxl.Packet(2, dxl.Instruction.READ, good[8:-2])]
    device_side = dxl.PacketParser(keep_bad_crc=True)
    first, second = device_side.feed(bad + good)
    assert (first.id, first.instruction, first.crc_ok) == (2, dxl.Instruction.READ, False)
    assert second.crc_ok
