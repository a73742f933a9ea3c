"""The MIT codec byte for byte, against examples derived by hand from the firmware's formula
``u = trunc((x - min) · (2ⁿ - 1) / (max - min))`` (after clamping), and its quantisation laws."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drivers.base import DeviceFault
from drivers.mit import protocol as proto
from drivers.mit.models import MODELS, Vendor, lookup

DM4310 = lookup("DM4310").ranges  # P ±12.5 rad, V ±30 rad/s, T ±10 N·m, kp 0..500, kd 0..5


def test_dm4310_ranges_are_damiaos() -> None:
    assert (DM4310.p_max, DM4310.v_max, DM4310.t_max) == (12.5, 30.0, 10.0)
    assert (DM4310.kp_max, DM4310.kd_max) == (500.0, 5.0)
    ak = lookup("AK80-64")
    assert ak.vendor is Vendor.CUBEMARS
    assert (ak.ranges.v_max, ak.ranges.t_max) == (8.0, 144.0)


def test_a_command_encodes_as_derived_by_hand() -> None:
    # p = 1 rad:    (1 + 12.5) · 65535 / 25 = 35388.9  -> 35388 = 0x8A3C
    # v = 2 rad/s:  (2 + 30) · 4095 / 60    = 2184.0   -> 2184  = 0x888
    # kp = 20:      20 · 4095 / 500         = 163.8    -> 163   = 0x0A3
    # kd = 1:       1 · 4095 / 5            = 819.0    -> 819   = 0x333
    # τ = 0.5 N·m:  (0.5 + 10) · 4095 / 20  = 2149.875 -> 2149  = 0x865
    # [p15-8][p7-0][v11-4][v3-0|kp11-8][kp7-0][kd11-4][kd3-0|τ11-8][τ7-0]
    command = proto.MitCommand(position=1.0, velocity=2.0, kp=20.0, kd=1.0, torque=0.5)
    assert proto.encode_command(command, DM4310).hex(" ") == "8a 3c 88 80 a3 33 38 65"


def test_zero_is_sent_half_a_step_below_zero() -> None:
    # p: 12.5 · 65535 / 25 = 32767.5 -> 32767 = 0x7FFF; v: 30 · 4095 / 60 = 2047.5 -> 0x7FF;
    # kp = kd = 0 -> 0; τ: 10 · 4095 / 20 = 2047.5 -> 0x7FF.
    command = proto.MitCommand(0.0, 0.0, 0.0, 0.0, 0.0)
    data = proto.encode_command(command, DM4310)
    assert data.hex(" ") == "7f ff 7f f0 00 00 07 ff"
    decoded = proto.decode_command(data, DM4310)
    assert decoded.position == pytest.approx(-12.5 / 65535, abs=1e-12)
    assert decoded.velocity == pytest.approx(-30.0 / 4095, abs=1e-12)


def test_every_field_is_clamped_to_its_range() -> None:
    # p 20 > 12.5 -> 0xFFFF; v -40 < -30 -> 0; kp 600 > 500 -> 0xFFF; kd -1 < 0 -> 0;
    # τ = 10 (the bound itself) -> 0xFFF.
    command = proto.MitCommand(position=20.0, velocity=-40.0, kp=600.0, kd=-1.0, torque=10.0)
    assert proto.encode_command(command, DM4310).hex(" ") == "ff ff 00 0f ff 00 0f ff"


def test_nan_is_refused() -> None:
    with pytest.raises(ValueError, match="NaN"):
        proto.encode_command(proto.MitCommand(math.nan, 0, 0, 0, 0), DM4310)


def test_a_damiao_reply_decodes_as_derived_by_hand() -> None:
    # byte 0 = 0x11: state 1 (enabled) in the high nibble, motor id 1 in the low one;
    # p = 0x8A3C = 35388 -> 35388 · 25 / 65535 - 12.5 = 0.49966... + 0.5 = 0.999657 rad;
    # v = 0x888 = 2184 -> 2184 · 60 / 4095 - 30 = 2.0 rad/s;
    # τ = 0x865 = 2149 -> 2149 · 20 / 4095 - 10 = 0.495726 N·m; T_mos 0x28 = 40 °C,
    # T_rotor 0x2D = 45 °C.
    reply = proto.decode_damiao_reply(bytes.fromhex("11 8a 3c 88 88 65 28 2d"), DM4310)
    assert reply.motor_id == 1
    assert reply.state == proto.DamiaoState.ENABLED
    assert reply.position == pytest.approx(35388 * 25 / 65535 - 12.5, abs=1e-12)
    assert reply.position == pytest.approx(0.999657, abs=1e-6)
    assert reply.velocity == pytest.approx(2.0, abs=1e-12)
    assert reply.torque == pytest.approx(0.495726, abs=1e-6)
    assert (reply.mos_temperature_c, reply.rotor_temperature_c) == (40, 45)
    assert proto.encode_damiao_reply(reply, DM4310).hex(" ") == "11 8a 3c 88 88 65 28 2d"


def test_a_cubemars_reply_has_an_id_byte_and_an_error_code() -> None:
    ranges = lookup("AK80-64").ranges
    # id 0x68 (104), p 0x8000 -> 32768 · 25 / 65535 - 12.5 = 0.000190 rad; v 0x800 ->
    # 2048 · 16 / 4095 - 8 = 0.001954 rad/s; τ 0x7FF -> 2047 · 288 / 4095 - 144 = -0.035165 N·m;
    # 35 °C; error 2 (over-current).
    reply = proto.decode_cubemars_reply(bytes.fromhex("68 80 00 80 07 ff 23 02"), ranges)
    assert reply.motor_id == 0x68
    assert reply.position == pytest.approx(0.000190, abs=1e-6)
    assert reply.velocity == pytest.approx(0.001954, abs=1e-6)
    assert reply.torque == pytest.approx(-0.035165, abs=1e-6)
    assert reply.rotor_temperature_c == 35
    assert proto.cubemars_fault(reply.state) == DeviceFault(2, "CubeMars error 2: over-current")
    assert proto.encode_cubemars_reply(reply, ranges).hex(" ") == "68 80 00 80 07 ff 23 02"


def test_a_six_byte_reply_is_the_mini_cheetah_firmwares() -> None:
    ranges = lookup("AK80-64").ranges
    short = proto.decode_cubemars_reply(bytes.fromhex("68 80 00 80 07 ff"), ranges)
    full = proto.decode_cubemars_reply(bytes.fromhex("68 80 00 80 07 ff 00 00"), ranges)
    assert short == full
    with pytest.raises(proto.MalformedFrameError, match="7 data bytes, expected 8 or 6"):
        proto.decode_cubemars_reply(bytes(7), ranges)


@pytest.mark.parametrize("length", [0, 6, 7, 9])
def test_a_reply_of_the_wrong_length_is_malformed(length: int) -> None:
    with pytest.raises(proto.MalformedFrameError, match="expected 8"):
        proto.decode_damiao_reply(bytes(length), DM4310)


def test_special_frames() -> None:
    assert proto.ENABLE.hex() == "fffffffffffffffc"
    assert proto.DISABLE.hex() == "fffffffffffffffd"
    assert proto.SET_ZERO.hex() == "fffffffffffffffe"
    assert proto.CLEAR_ERROR.hex() == "fffffffffffffffb"
    assert proto.special_command(proto.ENABLE) == 0xFC
    assert proto.special_command(bytes.fromhex("ffffffffffffffff")) is None
    assert proto.special_command(proto.ENABLE[:7]) is None


@pytest.mark.parametrize(
    ("state", "words"),
    [
        (0x8, "over-voltage"),
        (0x9, "under-voltage"),
        (0xA, "over-current"),
        (0xB, "MOSFET over-temperature"),
        (0xC, "rotor over-temperature"),
        (0xD, "lost communication"),
        (0xE, "overload"),
        (0x5, "unknown"),
    ],
)
def test_damiao_error_states_name_the_condition(state: int, words: str) -> None:
    fault = proto.damiao_fault(state)
    assert fault is not None
    assert fault.code == state
    assert words in fault.message


def test_disabled_and_enabled_are_not_faults() -> None:
    assert proto.damiao_fault(0) is None
    assert proto.damiao_fault(1) is None
    assert proto.cubemars_fault(0) is None


def test_register_frames_as_derived_by_hand() -> None:
    # [id_lo][id_hi][op][rid][value LE]: read CTRL_MODE (10) of motor 1; its answer, uint32 1
    # (MIT); write PMAX (21) = 12.5 (float32 0x41480000) to motor 0x102.
    read = proto.make_register_frame(1, proto.RegisterOp.READ, proto.Register.CTRL_MODE)
    assert read.hex(" ") == "01 00 33 0a 00 00 00 00"
    answer = proto.make_register_frame(1, proto.RegisterOp.READ, proto.Register.CTRL_MODE, 1)
    assert answer.hex(" ") == "01 00 33 0a 01 00 00 00"
    write = proto.make_register_frame(0x102, proto.RegisterOp.WRITE, proto.Register.PMAX, 12.5)
    assert write.hex(" ") == "02 01 55 15 00 00 48 41"
    parsed = proto.parse_register_frame(write)
    assert parsed is not None
    assert (parsed.slave_id, parsed.op, parsed.rid, parsed.value) == (0x102, 0x55, 21, 12.5)
    mode = proto.parse_register_frame(answer)
    assert mode is not None
    assert mode.value == 1
    assert isinstance(mode.value, int)


def test_register_frames_refuse_what_they_cannot_hold() -> None:
    with pytest.raises(ValueError, match="uint32"):
        proto.make_register_frame(1, proto.RegisterOp.WRITE, proto.Register.CTRL_MODE, 1.5)
    with pytest.raises(ValueError, match="0x7FF"):
        proto.make_register_frame(0x800, proto.RegisterOp.READ, 10)
    assert proto.parse_register_frame(bytes.fromhex("01 00 44 0a 00 00 00 00")) is None


# -- quantisation laws -----------------------------------------------------------------------


@given(
    model=st.sampled_from(sorted(MODELS)),
    p=st.floats(-1.0, 1.0),
    v=st.floats(-1.0, 1.0),
    t=st.floats(-1.0, 1.0),
    kp=st.floats(0.0, 1.0),
    kd=st.floats(0.0, 1.0),
)
def test_a_command_round_trips_within_one_step_below(
    model: str, p: float, v: float, t: float, kp: float, kd: float
) -> None:
    r = MODELS[model].ranges
    command = proto.MitCommand(p * r.p_max, v * r.v_max, kp * r.kp_max, kd * r.kd_max, t * r.t_max)
    back = proto.decode_command(proto.encode_command(command, r), r)
    for sent, got, span, bits in (
        (command.position, back.position, 2 * r.p_max, 16),
        (command.velocity, back.velocity, 2 * r.v_max, 12),
        (command.kp, back.kp, r.kp_max, 12),
        (command.kd, back.kd, r.kd_max, 12),
        (command.torque, back.torque, 2 * r.t_max, 12),
    ):
        step = span / ((1 << bits) - 1)
        # Truncation: the decoded value is never above what was sent, and less than a step below.
        assert sent - step - 1e-9 * span <= got <= sent + 1e-9 * span


@given(x=st.floats(-1e6, 1e6), bits=st.sampled_from([12, 16]))
def test_quantisation_stays_in_range_and_is_monotonic(x: float, bits: int) -> None:
    u = proto.float_to_uint(x, -12.5, 12.5, bits)
    assert 0 <= u <= (1 << bits) - 1
    assert proto.float_to_uint(x + 0.01, -12.5, 12.5, bits) >= u


@given(u=st.integers(0, 0xFFF), low=st.sampled_from([-10.0, -30.0, -144.0]))
def test_reencoding_a_decoded_code_gives_it_back_or_one_less(u: int, low: float) -> None:
    # The decoded value u·span/(2ⁿ-1) + min may land a rounding error below the code, which the
    # firmware's truncation turns into u - 1: never re-encode decoded values expecting identity.
    x = proto.uint_to_float(u, low, -low, 12)
    assert proto.float_to_uint(x, low, -low, 12) in (u, max(u - 1, 0))


@given(
    p=st.integers(0, 0xFFFF),
    v=st.integers(0, 0xFFF),
    t=st.integers(0, 0xFFF),
    state=st.integers(0, 0xF),
    motor=st.integers(0, 0xF),
    temps=st.tuples(st.integers(0, 255), st.integers(0, 255)),
)
def test_every_damiao_reply_field_decodes_where_it_belongs(
    p: int, v: int, t: int, state: int, motor: int, temps: tuple[int, int]
) -> None:
    data = bytes([state << 4 | motor, p >> 8, p & 0xFF, v >> 4, (v & 0xF) << 4 | t >> 8, t & 0xFF])
    reply = proto.decode_damiao_reply(data + bytes(temps), DM4310)
    assert (reply.state, reply.motor_id) == (state, motor)
    assert reply.position == pytest.approx(proto.uint_to_float(p, -12.5, 12.5, 16), abs=1e-12)
    assert reply.velocity == pytest.approx(proto.uint_to_float(v, -30.0, 30.0, 12), abs=1e-12)
    assert reply.torque == pytest.approx(proto.uint_to_float(t, -10.0, 10.0, 12), abs=1e-12)
    assert (reply.mos_temperature_c, reply.rotor_temperature_c) == temps
