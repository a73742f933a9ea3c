"""The Feetech SCS/STS codec byte for byte, against examples derived by hand from Feetech's
protocol document (framing ``FF FF ID LEN INSTR PARAMS CHK``, LEN = len(params) + 2,
CHK = ~(ID + LEN + INSTR + sum(params)) & 0xFF) and its STS memory table, plus property tests."""

from __future__ import annotations

import math

import pytest
import scservo_sdk as sdk
from hypothesis import given
from hypothesis import strategies as st

from drivers.feetech import protocol as ft
from drivers.feetech import table as tb
from drivers.feetech.protocol import ErrorBit, Instruction, Packet, PacketParser
from drivers.feetech.table import Addr

# -- worked examples ----------------------------------------------------------------------------


def test_ping() -> None:
    # Ping ID 1: LEN = 0 params + 2 = 02; 01 + 02 + 01 = 0x04, ~0x04 & 0xFF = 0xFB.
    assert ft.make_ping(1) == bytes.fromhex("FF FF 01 02 01 FB")
    # Its answer, no error: 01 + 02 + 00 = 0x03 -> 0xFC.
    assert ft.make_status(1, 0) == bytes.fromhex("FF FF 01 02 00 FC")


def test_read_present_position() -> None:
    # Read 2 bytes at 0x38 (56, Present_Position) of ID 1: params 38 02, LEN 04;
    # 01 + 04 + 02 + 38 + 02 = 0x41 -> ~0x41 = 0xBE.
    assert ft.make_read(1, Addr.PRESENT_POSITION, 2) == bytes.fromhex("FF FF 01 04 02 38 02 BE")
    # The answer with position 0x0518 = 1304 counts (STS: low byte first): 18 05;
    # 01 + 04 + 00 + 18 + 05 = 0x22 -> 0xDD.
    reply = bytes.fromhex("FF FF 01 04 00 18 05 DD")
    assert ft.make_status(1, 0, bytes([0x18, 0x05])) == reply
    (packet,) = PacketParser().feed(reply)
    assert packet == Packet(1, 0, b"\x18\x05")
    assert ft.decode_word(packet.params, "little") == 1304
    assert ft.decode_word(packet.params, "big") == 0x1805  # an SCS servo would mean this


def test_write_goal_position_time_and_speed() -> None:
    # Write at 0x2A (42) for ID 1: position 2048 (00 08), time 0 (00 00), speed 1000 (E8 03):
    # LEN = 7 params + 2 = 09; 01+09+03+2A+00+08+00+00+E8+03 = 0x12A -> ~0x2A = 0xD5.
    data = ft.encode_word(2048) + ft.encode_word(0) + ft.encode_word(1000)
    expected = bytes.fromhex("FF FF 01 09 03 2A 00 08 00 00 E8 03 D5")
    assert ft.make_write(1, Addr.GOAL_POSITION, data) == expected


def test_reg_write_action_and_reset() -> None:
    # Reg Write of Goal Position 0x0800 to ID 2: 02+05+04+2A+00+08 = 0x3D -> 0xC2.
    assert ft.make_reg_write(2, 42, b"\x00\x08") == bytes.fromhex("FF FF 02 05 04 2A 00 08 C2")
    # Action to everybody: FE + 02 + 05 = 0x105 -> ~0x05 = 0xFA.
    assert ft.make_action() == bytes.fromhex("FF FF FE 02 05 FA")
    # Reset ID 1: 01 + 02 + 06 = 0x09 -> 0xF6.
    assert ft.make_reset(1) == bytes.fromhex("FF FF 01 02 06 F6")


def test_sync_read() -> None:
    # Sync Read of 2 bytes at 0x38 from IDs 1 and 2: params 38 02 01 02, LEN 06;
    # FE+06+82+38+02+01+02 = 0x1C3 -> ~0xC3 = 0x3C.
    assert ft.make_sync_read(56, 2, [1, 2]) == bytes.fromhex("FF FF FE 06 82 38 02 01 02 3C")


def test_sync_write() -> None:
    # Sync Write of Goal Position (2 bytes at 0x2A): ID 1 -> 2048 (00 08), ID 2 -> 1024 (00 04).
    # params 2A 02 | 01 00 08 | 02 00 04 = 8 bytes, LEN 0A;
    # FE+0A+83+2A+02+01+00+08+02+00+04 = 0x1C6 -> ~0xC6 = 0x39.
    request = ft.make_sync_write(42, 2, {1: b"\x00\x08", 2: b"\x00\x04"})
    assert request == bytes.fromhex("FF FF FE 0A 83 2A 02 01 00 08 02 00 04 39")
    with pytest.raises(ValueError, match="expected 2"):
        ft.make_sync_write(42, 2, {1: b"\x00"})


def test_status_with_error_bits() -> None:
    # ID 3 reports overload (0x20) and overheat (0x04): 03 + 02 + 24 = 0x29 -> 0xD6.
    assert ft.make_status(3, 0x24) == bytes.fromhex("FF FF 03 02 24 D6")
    assert ft.describe_error(0x24) == "overheat, overload"
    assert ft.describe_error(0x01 | 0x02 | 0x08) == (
        "input voltage out of range, angle sensor (magnetic encoder) error, overcurrent"
    )
    assert ft.describe_error(0x40) == "unknown bits 0x40"
    assert ft.describe_error(0) == "no error"
    assert int(ErrorBit.OVERLOAD) == 32
    assert int(ErrorBit.VOLTAGE) == 1


def test_instruction_codes_match_feetech_sdk() -> None:
    assert Instruction.PING == sdk.INST_PING
    assert Instruction.READ == sdk.INST_READ
    assert Instruction.WRITE == sdk.INST_WRITE
    assert Instruction.REG_WRITE == sdk.INST_REG_WRITE
    assert Instruction.ACTION == sdk.INST_ACTION
    assert Instruction.SYNC_READ == sdk.INST_SYNC_READ
    assert Instruction.SYNC_WRITE == sdk.INST_SYNC_WRITE
    assert ErrorBit.VOLTAGE == sdk.ERRBIT_VOLTAGE
    assert ErrorBit.SENSOR == sdk.ERRBIT_ANGLE
    assert ErrorBit.OVERHEAT == sdk.ERRBIT_OVERHEAT
    assert ErrorBit.OVERCURRENT == sdk.ERRBIT_OVERELE
    assert ErrorBit.OVERLOAD == sdk.ERRBIT_OVERLOAD


def test_bad_ids_and_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="outside"):
        ft.make_ping(0xFF)
    with pytest.raises(ValueError, match="fit"):
        ft.make_write(1, 0, bytes(254))


# -- sign-magnitude (the memory table's direction bits) -----------------------------------------


def test_sign_magnitude_examples() -> None:
    # Homing_Offset -100, sign at bit 11: 100 | 0x800 = 0x864, on the wire 64 08.
    assert ft.encode_signed(-100, tb.SIGN_BITS[Addr.HOMING_OFFSET]) == 0x864
    # Present_Load -500 (50 % the other way), sign at bit 10: 500 | 0x400 = 0x5F4.
    assert ft.decode_signed(0x5F4, tb.SIGN_BITS[Addr.PRESENT_LOAD]) == -500
    # Present_Velocity -1000 steps/s, sign at bit 15: 0x83E8 (not two's complement 0xFC18).
    assert ft.encode_signed(-1000, 15) == 0x83E8
    assert ft.decode_signed(0x83E8, 15) == -1000
    assert ft.encode_signed(0, 15) == 0
    with pytest.raises(ValueError, match="bit 11"):
        ft.encode_signed(2048, 11)


@given(
    st.integers(0, 15).flatmap(lambda b: st.tuples(st.just(b), st.integers(-(2**b) + 1, 2**b - 1)))
)
def test_sign_magnitude_round_trip(case: tuple[int, int]) -> None:
    bit, value = case
    raw = ft.encode_signed(value, bit)
    assert 0 <= raw < 1 << (bit + 1)
    assert ft.decode_signed(raw, bit) == value


def test_status_block_decodes_every_signed_item() -> None:
    # 56..65: position 2048 (00 08), velocity -100 (64 80), load -250 (FA 04), 12.0 V (78),
    # 31 °C (1F), flag 0, status overload (20).
    data = bytes.fromhex("00 08 64 80 FA 04 78 1F 00 20")
    block = tb.decode_status_block(data)
    assert block == tb.StatusBlock(2048, -100, -250, 120, 31, 0x20)
    big = tb.decode_status_block(bytes.fromhex("08 00 80 64 04 FA 78 1F 00 20"), "big")
    assert big == block
    with pytest.raises(ValueError, match="expected 10"):
        tb.decode_status_block(data[:9])


def test_units() -> None:
    assert tb.counts_to_rad(2048) == 0.0
    assert tb.counts_to_rad(3072) == pytest.approx(math.pi / 2, abs=1e-12)
    assert tb.rad_to_counts(-math.pi / 2) == 1024
    assert tb.counts_to_rad(512, 1024) == 0.0  # SCS: 1024 counts per turn
    assert tb.steps_to_rad_s(4096) == pytest.approx(2 * math.pi, abs=1e-12)
    assert tb.load_fraction(-500) == -0.5
    assert tb.torque_limit_units(0.5) == 500
    with pytest.raises(ValueError, match="outside"):
        tb.torque_limit_units(1.5)


def test_tables_agree_with_lerobot_where_they_should() -> None:
    # LeRobot's addresses (src/lerobot/motors/feetech/tables.py, STS_SMS_SERIES_CONTROL_TABLE).
    lerobot = {
        "ID": (5, 1), "Baud_Rate": (6, 1), "Return_Delay_Time": (7, 1),
        "Min_Position_Limit": (9, 2), "Max_Position_Limit": (11, 2), "Homing_Offset": (31, 2),
        "Operating_Mode": (33, 1), "Torque_Enable": (40, 1), "Acceleration": (41, 1),
        "Goal_Position": (42, 2), "Goal_Time": (44, 2), "Goal_Velocity": (46, 2),
        "Torque_Limit": (48, 2), "Lock": (55, 1), "Present_Position": (56, 2),
        "Present_Velocity": (58, 2), "Present_Load": (60, 2), "Present_Voltage": (62, 1),
        "Present_Temperature": (63, 1), "Status": (65, 1), "Moving": (66, 1),
        "Present_Current": (69, 2), "Model_Number": (3, 2),
    }  # fmt: skip
    for name, (address, size) in lerobot.items():
        item = tb.ITEMS[Addr[name.upper()]]
        assert (item.address, item.size) == (address, size), name
    # Where they disagree: baud-rate codes 5..7 (Feetech: 76 800, 57 600, 38 400).
    assert [tb.BAUD_RATE_CODES[c] for c in (5, 6, 7)] == [76_800, 57_600, 38_400]
    assert [tb.LEROBOT_BAUD_RATE_CODES[c] for c in (5, 6, 7)] == [57_600, 38_400, 19_200]
    assert tb.MODELS["sts3215"].model_number == 777


# -- the stream parser --------------------------------------------------------------------------


def test_parser_resyncs_after_garbage_and_bad_checksums() -> None:
    good = ft.make_status(1, 0, b"\x18\x05")
    bad_checksum = good[:-1] + bytes([good[-1] ^ 0xFF])
    too_long = bytes.fromhex("FF FF 01 FF")  # LEN 255 above the bound: not a packet start
    parser = PacketParser(max_length=32)
    stream = b"\x00\x13\xff" + bad_checksum + too_long + good + b"\xff\xff\xff" + good
    assert parser.feed(stream) == [Packet(1, 0, b"\x18\x05")] * 2
    assert parser.corrupt == 2
    assert parser.pending == 0


def test_parser_waits_for_the_rest_of_a_packet() -> None:
    packet = ft.make_read(7, 56, 10)
    parser = PacketParser()
    for byte in packet[:-1]:
        assert parser.feed(bytes([byte])) == []
    assert parser.pending == len(packet) - 1
    assert parser.feed(packet[-1:]) == [Packet(7, Instruction.READ, b"\x38\x0a")]
    assert parser.corrupt == 0


def test_a_bogus_length_does_not_swallow_the_next_packet() -> None:
    parser = PacketParser()
    good = ft.make_status(2, 0)
    assert parser.feed(bytes.fromhex("FF FF 05 F0 00") + good) == [Packet(2, 0, b"")]
    assert parser.corrupt == 1


packets = st.builds(
    Packet,
    id=st.one_of(st.integers(0, ft.MAX_ID), st.just(ft.BROADCAST_ID)),
    code=st.integers(0, 255),
    params=st.binary(max_size=40),
)


@given(st.lists(packets, max_size=5), st.binary(max_size=20), st.integers(1, 17))
def test_any_packets_survive_framing_chunking_and_leading_garbage(
    sent: list[Packet], garbage: bytes, chunk: int
) -> None:
    stream = b"".join(ft.encode_packet(p.id, p.code, p.params) for p in sent)
    parser = PacketParser()
    received = []
    for start in range(0, len(stream), chunk):
        received += parser.feed(stream[start : start + chunk])
    assert received == sent
    assert parser.pending == 0
    # Garbage in front: the packets after the first clean header still all come through.
    tail = PacketParser().feed(garbage.replace(b"\xff", b"") + stream)
    assert tail == sent


@given(st.integers(0, 0xFFFF), st.sampled_from(["little", "big"]))
def test_word_round_trip(value: int, order: ft.ByteOrder) -> None:
    assert ft.decode_word(ft.encode_word(value, order), order) == value


def test_wire_time() -> None:
    # A Sync Read of 10 bytes from 6 servos: request 8 + 6 = 14 B, replies 6 x 16 B = 96 B,
    # 110 B x 10 bits at 1 Mbaud = 1.1 ms.
    request = len(ft.make_sync_read(56, 10, range(1, 7)))
    replies = [ft.status_packet_size(10)] * 6
    assert (request, replies[0]) == (14, 16)
    assert ft.transaction_time_s(request, replies, 1_000_000, 0.0) == pytest.approx(1.1e-3)
