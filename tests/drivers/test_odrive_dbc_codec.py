"""The ODrive codec and the simulated axis against frames `cantools` encodes from the official DBC
(``odrive-cansimple-0.6.x.dbc``, see `tests.drivers.odrive_dbc`): every field decodes to the same
value, our builders produce the same bytes, and the simulated axis follows DBC-encoded commands.
Where they disagree, the DBC is right.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drivers.odrive import protocol as proto
from drivers.odrive.sim import SimAxisConfig, SimulatedAxis
from drivers.sim.driver import ManualClock
from drivers.sim.motor import MotorParams
from tests.drivers.odrive_dbc import load_dbc

TURN = 2.0 * math.pi
NODE_IDS = (0, 1, 9)  # 9: beyond the DBC's Axis0..Axis7 messages


@pytest.fixture(scope="module")
def dbc() -> Any:
    return load_dbc()


float32s = st.floats(width=32, allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6)
uint32s = st.integers(0, 2**32 - 1)
uint8s = st.integers(0, 255)
ff = st.integers(-(2**15), 2**15 - 1).map(lambda n: n * 0.001)


def _encode(dbc: Any, name: str, node_id: int, signals: dict[str, Any]) -> proto.Frame:
    message = dbc.get_message_by_name(name)
    data = message.encode(signals, strict=True)
    assert len(data) == message.length
    return proto.Frame(node_id << 5 | message.frame_id, bytes(data))


@given(
    node=st.sampled_from(NODE_IDS), error=uint32s, state=uint8s, result=uint8s, done=st.booleans()
)
def test_dbc_heartbeats_decode_identically(
    dbc: Any, node: int, error: int, state: int, result: int, done: bool
) -> None:
    signals = {
        "Axis_Error": error,
        "Axis_State": state,
        "Procedure_Result": result,
        "Trajectory_Done_Flag": int(done),
    }
    frame = _encode(dbc, "Axis0_Heartbeat", node, signals)
    assert proto.parse_heartbeat(frame.data) == proto.Heartbeat(error, state, result, done)
    ours = proto.make_heartbeat(node, proto.Heartbeat(error, state, result, done))
    assert ours == frame


@given(node=st.sampled_from(NODE_IDS), pos=float32s, vel=float32s)
def test_dbc_encoder_estimates_decode_identically(
    dbc: Any, node: int, pos: float, vel: float
) -> None:
    frame = _encode(
        dbc, "Axis0_Get_Encoder_Estimates", node, {"Pos_Estimate": pos, "Vel_Estimate": vel}
    )
    assert proto.parse_encoder_estimates(frame.data) == proto.EncoderEstimates(pos, vel)
    assert proto.make_encoder_estimates(node, proto.EncoderEstimates(pos, vel)) == frame


@given(
    node=st.sampled_from(NODE_IDS),
    active=uint32s,
    disarm=uint32s,
    version=st.lists(uint8s, min_size=8, max_size=8),
)
def test_dbc_error_and_version_decode_identically(
    dbc: Any, node: int, active: int, disarm: int, version: list[int]
) -> None:
    frame = _encode(
        dbc, "Axis0_Get_Error", node, {"Active_Errors": active, "Disarm_Reason": disarm}
    )
    assert proto.parse_error_status(frame.data) == proto.ErrorStatus(active, disarm)
    assert proto.make_error_status(node, proto.ErrorStatus(active, disarm)) == frame
    message = dbc.get_message_by_name("Axis0_Get_Version")
    names = [s.name for s in sorted(message.signals, key=lambda s: s.start)]
    frame = _encode(dbc, "Axis0_Get_Version", node, dict(zip(names, version, strict=True)))
    assert proto.parse_version(frame.data) == proto.Version(*version)
    assert proto.make_version(node, proto.Version(*version)) == frame


@given(node=st.sampled_from(NODE_IDS), pos=float32s, vel_ff=ff, torque_ff=ff)
def test_dbc_set_input_pos_decodes_identically(
    dbc: Any, node: int, pos: float, vel_ff: float, torque_ff: float
) -> None:
    signals = {"Input_Pos": pos, "Vel_FF": vel_ff, "Torque_FF": torque_ff}
    frame = _encode(dbc, "Axis0_Set_Input_Pos", node, signals)
    got = proto.parse_set_input_pos(frame.data)
    assert got.position_turns == pos
    assert got.vel_ff_turns_s == pytest.approx(vel_ff, abs=1e-9)
    assert got.torque_ff_nm == pytest.approx(torque_ff, abs=1e-9)
    assert proto.make_set_input_pos(node, pos, vel_ff, torque_ff) == frame


@given(node=st.sampled_from(NODE_IDS), vel=float32s, torque_ff=float32s)
def test_dbc_set_input_vel_decodes_identically(
    dbc: Any, node: int, vel: float, torque_ff: float
) -> None:
    frame = _encode(
        dbc, "Axis0_Set_Input_Vel", node, {"Input_Vel": vel, "Input_Torque_FF": torque_ff}
    )
    assert proto.parse_set_input_vel(frame.data) == (vel, torque_ff)
    assert proto.make_set_input_vel(node, vel, torque_ff) == frame


@given(node=st.sampled_from(NODE_IDS), pos=float32s)
def test_dbc_set_absolute_position_decodes_identically(dbc: Any, node: int, pos: float) -> None:
    frame = _encode(dbc, "Axis0_Set_Absolute_Position", node, {"Position": pos})
    assert frame.arbitration_id & 0x1F == proto.Command.SET_ABSOLUTE_POSITION == 0x19
    assert proto.parse_set_absolute_position(frame.data) == pos
    assert proto.make_set_absolute_position(node, pos) == frame


@pytest.mark.parametrize("state", list(proto.AxisState))
def test_dbc_set_axis_state_matches_ours(dbc: Any, state: proto.AxisState) -> None:
    frame = _encode(dbc, "Axis0_Set_Axis_State", 3, {"Axis_Requested_State": int(state)})
    assert proto.make_set_axis_state(3, state) == frame
    assert proto.parse_set_axis_state(frame.data) == state


def test_the_simulated_axis_follows_dbc_encoded_commands(dbc: Any) -> None:
    clock = ManualClock()
    axis = SimulatedAxis(SimAxisConfig(2, MotorParams(initial_position=0.0)), clock)

    def send(name: str, signals: dict[str, Any]) -> list[proto.Frame]:
        return axis.handle(_encode(dbc, f"Axis0_{name}", 2, signals))

    pos_filter = proto.InputMode.POS_FILTER
    send("Set_Controller_Mode", {"Control_Mode": 3, "Input_Mode": int(pos_filter)})
    assert (axis.control_mode, axis.input_mode) == (proto.ControlMode.POSITION_CONTROL, pos_filter)
    send("Set_Axis_State", {"Axis_Requested_State": int(proto.AxisState.CLOSED_LOOP_CONTROL)})
    assert axis.state is proto.AxisState.CLOSED_LOOP_CONTROL
    send("Set_Input_Pos", {"Input_Pos": 0.25, "Vel_FF": -1.5, "Torque_FF": 0.125})
    assert axis.input_pos_turns == 0.25
    assert axis.motor.velocity_ff == pytest.approx(-1.5 * TURN, abs=1e-9)
    assert axis.handle(_encode(dbc, "Axis0_Estop", 2, {})) == []
    assert axis.active_errors & proto.AxisError.ESTOP_REQUESTED
    assert axis.state is proto.AxisState.IDLE
    send("Clear_Errors", {"Identify": 0})
    assert axis.active_errors == 0
    send("Set_Axis_State", {"Axis_Requested_State": int(proto.AxisState.IDLE)})
    assert axis.state is proto.AxisState.IDLE


def test_the_simulated_axis_homes_on_dbc_encoded_commands(dbc: Any) -> None:
    clock = ManualClock()
    config = SimAxisConfig(2, MotorParams(initial_position=0.0), encoder_offset_turns=0.3)
    axis = SimulatedAxis(config, clock)

    def send(name: str, signals: dict[str, Any]) -> list[proto.Frame]:
        return axis.handle(_encode(dbc, f"Axis0_{name}", 2, signals))

    send("Set_Axis_State", {"Axis_Requested_State": int(proto.AxisState.ENCODER_INDEX_SEARCH)})
    assert axis.state is proto.AxisState.ENCODER_INDEX_SEARCH
    assert axis.procedure_result is proto.ProcedureResult.BUSY
    clock.advance(config.index_search_s)
    axis.poll()
    assert (axis.state, axis.procedure_result) == (
        proto.AxisState.IDLE,
        proto.ProcedureResult.SUCCESS,
    )
    assert axis.encoder_offset_turns == 0.0
    velocity = int(proto.ControlMode.VELOCITY_CONTROL)
    send("Set_Controller_Mode", {"Control_Mode": velocity, "Input_Mode": 1})
    send("Set_Axis_State", {"Axis_Requested_State": int(proto.AxisState.CLOSED_LOOP_CONTROL)})
    send("Set_Input_Vel", {"Input_Vel": 0.5, "Input_Torque_FF": 0.0})
    assert axis.input_vel_turns_s == 0.5
    assert axis.motor.velocity_ff == pytest.approx(0.5 * TURN, abs=1e-6)
    send("Set_Absolute_Position", {"Position": 2.0})
    (frame,) = axis.handle(proto.make_request(2, proto.Command.GET_ENCODER_ESTIMATES))
    assert proto.parse_encoder_estimates(frame.data).position_turns == pytest.approx(2.0, abs=1e-3)
    # An index search ends early when asked for IDLE (CANCELLED) or on an error (DISARMED).
    send("Set_Axis_State", {"Axis_Requested_State": int(proto.AxisState.ENCODER_INDEX_SEARCH)})
    send("Set_Axis_State", {"Axis_Requested_State": int(proto.AxisState.IDLE)})
    assert (axis.state, axis.procedure_result) == (
        proto.AxisState.IDLE,
        proto.ProcedureResult.CANCELLED,
    )
    send("Set_Axis_State", {"Axis_Requested_State": int(proto.AxisState.ENCODER_INDEX_SEARCH)})
    assert axis.handle(_encode(dbc, "Axis0_Estop", 2, {})) == []
    assert (axis.state, axis.procedure_result) == (
        proto.AxisState.IDLE,
        proto.ProcedureResult.DISARMED,
    )
    assert axis.index_searches == 3
