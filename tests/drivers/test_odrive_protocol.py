"""Byte-exact tests of the ODrive CAN Simple codec (firmware v0.6 layout) and round trips.

Expected bytes are computed by hand from the protocol table: ``id = node_id << 5 | cmd_id``,
little-endian payloads, IEEE-754 float32 (1.5 = 0x3FC00000, -2.0 = 0xC0000000).
"""

from __future__ import annotations

import math
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drivers.errors import DriverError
from drivers.odrive import protocol as proto

node_ids = st.integers(min_value=0, max_value=proto.MAX_NODE_ID)
float32s = st.floats(width=32, allow_nan=False, allow_infinity=False)


def test_set_input_pos_node_3_worked_example() -> None:
    frame = proto.make_set_input_pos(3, 1.5)
    assert frame.arbitration_id == 0x06C
    assert frame.data == bytes.fromhex("0000c03f 00000000")
    assert not frame.is_remote


def test_set_input_pos_feed_forwards_are_scaled_int16() -> None:
    # vel_ff 2.0 turns/s -> 2000 = 0x07D0; torque_ff -0.5 Nm -> -500 = 0xFE0C
    frame = proto.make_set_input_pos(3, 1.5, 2.0, -0.5)
    assert frame.data == bytes.fromhex("0000c03f d007 0cfe")


def test_set_input_pos_feed_forward_saturates_at_int16() -> None:
    frame = proto.make_set_input_pos(0, 0.0, 100.0, -100.0)
    assert frame.data[4:] == bytes.fromhex("ff7f 0080")


def test_set_input_pos_custom_velocity_scale() -> None:
    frame = proto.make_set_input_pos(0, 0.0, 2.0, vel_ff_scale=0.01)
    assert frame.data[4:6] == (200).to_bytes(2, "little")


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_set_input_pos_rejects_non_finite(bad: float) -> None:
    with pytest.raises(ValueError, match="finite"):
        proto.make_set_input_pos(0, bad)
    with pytest.raises(ValueError, match="finite"):
        proto.make_set_input_pos(0, 0.0, bad)


def test_set_axis_state_frames() -> None:
    closed = proto.make_set_axis_state(0, proto.AxisState.CLOSED_LOOP_CONTROL)
    assert (closed.arbitration_id, closed.data) == (0x007, bytes.fromhex("08000000 00000000"))
    idle = proto.make_set_axis_state(1, proto.AxisState.IDLE)
    assert (idle.arbitration_id, idle.data) == (0x027, bytes.fromhex("01000000 00000000"))


def test_set_controller_mode_frame() -> None:
    frame = proto.make_set_controller_mode(
        2, proto.ControlMode.POSITION_CONTROL, proto.InputMode.POS_FILTER
    )
    assert frame.arbitration_id == 0x04B
    assert frame.data == bytes.fromhex("03000000 03000000")


def test_clear_errors_estop_and_requests() -> None:
    assert proto.make_clear_errors(5) == proto.Frame(0x0B8, b"\x00")
    assert proto.make_clear_errors(5, identify=True).data == b"\x01"
    assert proto.make_estop(1) == proto.Frame(0x022, b"")
    request = proto.make_request(4, proto.Command.GET_ENCODER_ESTIMATES)
    assert (request.arbitration_id, request.data, request.remote_dlc) == (0x089, b"", 8)
    assert request.is_remote
    with pytest.raises(ValueError, match="SET_INPUT_POS"):
        proto.make_request(4, proto.Command.SET_INPUT_POS)


def test_node_id_range_is_checked() -> None:
    assert proto.arbitration_id(63, proto.Command.HEARTBEAT) == 0x7E1
    for bad in (-1, 64):
        with pytest.raises(ValueError, match="node id"):
            proto.arbitration_id(bad, proto.Command.HEARTBEAT)


def test_parse_heartbeat_bytes() -> None:
    # axis_error WATCHDOG_TIMER_EXPIRED (0x01000000), state 8, result BUSY (1), traj done
    beat = proto.parse_heartbeat(bytes.fromhex("00000001 08 01 01 00"))
    assert beat == proto.Heartbeat(0x0100_0000, 8, 1, True)
    assert beat.axis_state == proto.AxisState.CLOSED_LOOP_CONTROL


def test_parse_encoder_estimates_bytes() -> None:
    estimates = proto.parse_encoder_estimates(bytes.fromhex("0000c03f 000000c0"))
    assert estimates == proto.EncoderEstimates(1.5, -2.0)


def test_parse_error_and_version_bytes() -> None:
    status = proto.parse_error_status(bytes.fromhex("20000000 00000002"))
    assert status == proto.ErrorStatus(proto.AxisError.DRV_FAULT, proto.AxisError.ESTOP_REQUESTED)
    version = proto.parse_version(bytes([2, 4, 4, 58, 0, 6, 10, 0]))
    assert (version.fw_major, version.fw_minor, version.fw_revision) == (0, 6, 10)


@pytest.mark.parametrize("length", [0, 6, 7])
def test_short_frames_are_malformed(length: int) -> None:
    data = bytes(length)
    with pytest.raises(proto.MalformedFrameError, match="HEARTBEAT"):
        proto.parse_heartbeat(data)
    with pytest.raises(proto.MalformedFrameError, match=f"{length} data bytes"):
        proto.parse_encoder_estimates(data)


def test_non_finite_estimates_are_malformed() -> None:
    data = struct.pack("<ff", math.nan, 0.0)
    with pytest.raises(proto.MalformedFrameError, match="non-finite"):
        proto.parse_encoder_estimates(data)
    assert issubclass(proto.MalformedFrameError, DriverError)


def test_describe_axis_error_names_every_bit() -> None:
    assert proto.describe_axis_error(0) == "no error"
    text = proto.describe_axis_error(0x20 | 0x0100_0000 | 0x80)
    assert "DRV_FAULT" in text
    assert "WATCHDOG_TIMER_EXPIRED" in text
    assert "unknown error bits 0x00000080" in text


@given(node_ids, float32s, st.floats(-30.0, 30.0), st.floats(-30.0, 30.0))
def test_set_input_pos_round_trip(node: int, pos: float, vel: float, torque: float) -> None:
    frame = proto.make_set_input_pos(node, pos, vel, torque)
    assert proto.split_id(frame.arbitration_id) == (node, proto.Command.SET_INPUT_POS)
    decoded = proto.parse_set_input_pos(frame.data)
    assert decoded.position_turns == pos  # float32-representable values survive exactly
    assert decoded.vel_ff_turns_s == pytest.approx(vel, abs=0.0005 + 1e-9)
    assert decoded.torque_ff_nm == pytest.approx(torque, abs=0.0005 + 1e-9)


@given(
    node_ids,
    st.integers(0, 2**32 - 1),
    st.integers(0, 255),
    st.integers(0, 255),
    st.booleans(),
)
def test_heartbeat_round_trip(node: int, error: int, state: int, result: int, done: bool) -> None:
    beat = proto.Heartbeat(error, state, result, done)
    frame = proto.make_heartbeat(node, beat)
    assert len(frame.data) == 8
    assert proto.split_id(frame.arbitration_id) == (node, proto.Command.HEARTBEAT)
    assert proto.parse_heartbeat(frame.data) == beat


@given(node_ids, float32s, float32s)
def test_encoder_estimates_round_trip(node: int, pos: float, vel: float) -> None:
    frame = proto.make_encoder_estimates(node, proto.EncoderEstimates(pos, vel))
    assert proto.parse_encoder_estimates(frame.data) == proto.EncoderEstimates(pos, vel)


@given(node_ids, st.sampled_from(proto.AxisState), st.sampled_from(proto.InputMode))
def test_command_round_trips(node: int, state: proto.AxisState, mode: proto.InputMode) -> None:
    assert proto.parse_set_axis_state(proto.make_set_axis_state(node, state).data) == state
    frame = proto.make_set_controller_mode(node, proto.ControlMode.POSITION_CONTROL, mode)
    assert proto.parse_set_controller_mode(frame.data) == (3, mode)


def test_set_limits_is_two_little_endian_float32() -> None:
    # Set_Limits (0x0F) of node 3: id 3 << 5 | 0x0F = 0x6F; 4.0 = 0x40800000, 12.5 = 0x41480000
    frame = proto.make_set_limits(3, 4.0, 12.5)
    assert frame.arbitration_id == 0x6F
    assert frame.data == bytes.fromhex("0000804000004841")
    assert proto.parse_set_limits(frame.data) == (4.0, 12.5)
    with pytest.raises(ValueError, match=r"current_limit: -1\.0 must be >= 0"):
        proto.make_set_limits(3, 4.0, -1.0)
    with pytest.raises(ValueError, match="velocity_limit"):
        proto.make_set_limits(3, math.nan, 1.0)


def test_set_input_vel_is_two_little_endian_float32() -> None:
    # Set_Input_Vel (0x0D) of node 3: id 3 << 5 | 0x0D = 0x6D; -0.5 = 0xBF000000, 0.25 = 0x3E800000
    frame = proto.make_set_input_vel(3, -0.5, 0.25)
    assert frame.arbitration_id == 0x6D
    assert frame.data == bytes.fromhex("000000bf0000803e")
    assert proto.parse_set_input_vel(frame.data) == (-0.5, 0.25)
    assert proto.make_set_input_vel(3, 1.0).data == bytes.fromhex("0000803f00000000")
    with pytest.raises(ValueError, match="velocity_turns_s"):
        proto.make_set_input_vel(3, math.inf)
    with pytest.raises(proto.MalformedFrameError, match="SET_INPUT_VEL"):
        proto.parse_set_input_vel(bytes.fromhex("0000c07f00000000"))  # NaN velocity


def test_set_absolute_position_is_a_float32_padded_to_8_bytes() -> None:
    # Set_Absolute_Position (0x19) of node 3: id 3 << 5 | 0x19 = 0x79; 1.5 = 0x3FC00000
    frame = proto.make_set_absolute_position(3, 1.5)
    assert frame.arbitration_id == 0x79
    assert frame.data == bytes.fromhex("0000c03f00000000")
    assert proto.parse_set_absolute_position(frame.data) == 1.5
    assert proto.parse_set_absolute_position(frame.data[:4]) == 1.5
    with pytest.raises(ValueError, match="position_turns"):
        proto.make_set_absolute_position(3, math.nan)
    with pytest.raises(proto.MalformedFrameError, match="SET_ABSOLUTE_POSITION"):
        proto.parse_set_absolute_position(b"\x00\x00")
