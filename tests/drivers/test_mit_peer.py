"""An independent peer, the PyPI package ``damiao-motor`` (its own MIT encoder and Damiao
client): its frames and ours must be byte-identical, it decodes our simulated replies, and it
drives the simulated actuators over python-can ``virtual`` as it would drive real motors.

Known disagreement (the manufacturer decides, see `drivers.mit.models`): ``damiao-motor`` maps
DM4340 velocities over ±10 rad/s, Damiao's ``DM_CAN.py`` over ±8 (±10 only for the 48 V DM4340).
"""

from __future__ import annotations

import asyncio
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drivers.mit import protocol as proto
from drivers.mit.models import lookup
from drivers.mit.sim import SimActuatorConfig, SimulatedMitBus
from drivers.sim.motor import MotorParams

damiao_motor = pytest.importorskip("damiao_motor")
from damiao_motor.core import motor as peer  # noqa: E402

PEER_MODELS = {"DM4310": "4310", "DM6006": "6006", "DM8009": "8009", "DM3507": "3507"}


def peer_motor(model: str) -> Any:
    return peer.DaMiaoMotor(1, 0x11, None, motor_type=PEER_MODELS[model])


@given(
    model=st.sampled_from(sorted(PEER_MODELS)),
    p=st.floats(-1.2, 1.2),
    v=st.floats(-1.2, 1.2),
    t=st.floats(-1.2, 1.2),
    kp=st.floats(-0.2, 1.2),
    kd=st.floats(-0.2, 1.2),
)
def test_our_command_frames_are_the_peers_byte_for_byte(
    model: str, p: float, v: float, t: float, kp: float, kd: float
) -> None:
    r = lookup(model).ranges
    command = proto.MitCommand(p * r.p_max, v * r.v_max, kp * 500.0, kd * 5.0, t * r.t_max)
    theirs = peer_motor(model).encode_cmd_msg(
        command.position, command.velocity, command.torque, command.kp, command.kd
    )
    assert proto.encode_command(command, r) == theirs


def test_the_special_frames_are_the_peers() -> None:
    m = peer.DaMiaoMotor
    assert m.encode_enable_msg() == proto.ENABLE
    assert m.encode_disable_msg() == proto.DISABLE
    assert m.encode_save_position_zero_msg() == proto.SET_ZERO
    assert m.encode_clear_error_msg() == proto.CLEAR_ERROR


@given(
    p=st.floats(-12.5, 12.5),
    v=st.floats(-30, 30),
    t=st.floats(-10, 10),
    state=st.sampled_from(list(proto.DamiaoState)),
    temps=st.tuples(st.integers(0, 255), st.integers(0, 255)),
)
def test_the_peer_decodes_our_replies(
    p: float, v: float, t: float, state: proto.DamiaoState, temps: tuple[int, int]
) -> None:
    ranges = lookup("DM4310").ranges
    reply = proto.MitReply(3, p, v, t, state, *temps)
    data = proto.encode_damiao_reply(reply, ranges)
    ours = proto.decode_damiao_reply(data, ranges)
    theirs = peer_motor("DM4310").decode_sensor_feedback(data)
    assert theirs["can_id"] == 3
    assert theirs["status_code"] == state
    assert theirs["pos"] == pytest.approx(ours.position, abs=1e-12)
    assert theirs["vel"] == pytest.approx(ours.velocity, abs=1e-12)
    assert theirs["torq"] == pytest.approx(ours.torque, abs=1e-12)
    assert (theirs["t_mos"], theirs["t_rotor"]) == temps


def test_the_peer_tables_agree_with_ours_but_for_dm4340() -> None:
    for ours, theirs in PEER_MODELS.items():
        r = lookup(ours).ranges
        preset = peer.MOTOR_TYPE_PRESETS[theirs]
        assert (preset["p_max"], preset["v_max"], preset["t_max"]) == (r.p_max, r.v_max, r.t_max)
    assert peer.MOTOR_TYPE_PRESETS["4340"]["v_max"] == 10  # theirs
    assert lookup("DM4340").ranges.v_max == 8  # Damiao's DM_CAN.py


def wait_until(check: Callable[[], bool], what: str, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


@pytest.fixture
def peer_controller() -> Iterator[tuple[Any, str]]:
    channel = f"mit-peer-{uuid.uuid4().hex}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # it opens the bus with `bustype=`
        controller = damiao_motor.DaMiaoController(channel=channel, bustype="virtual")
    try:
        yield controller, channel
    finally:
        controller.shutdown()


async def test_the_peer_drives_the_simulated_actuator(peer_controller: tuple[Any, str]) -> None:
    controller, channel = peer_controller
    config = SimActuatorConfig(1, 0x11, lookup("DM4310"), MotorParams(max_velocity=20.0))
    async with SimulatedMitBus.create("virtual", channel, [config]) as sim:
        motor = controller.add_motor(motor_id=1, feedback_id=0x11, motor_type="4310")
        # Its register reads (0x33 on 0x7FF) reach the simulated registers.
        await asyncio.to_thread(motor.ensure_control_mode, "MIT")
        assert await asyncio.to_thread(motor.get_register, 21) == pytest.approx(12.5, abs=1e-6)
        motor.enable()

        def arrived() -> bool:
            motor.send_cmd_mit(target_position=0.5, stiffness=20.0, damping=1.0)
            state = motor.get_states()
            return bool(state) and abs(state["pos"] - 0.5) < 0.005 and state["status"] == "ENABLED"

        await asyncio.to_thread(wait_until, arrived, "the peer's move")
        with sim.lock:
            assert sim.actuator(1).motor.position == pytest.approx(0.5, abs=0.005)
            sim.actuator(1).raise_error(proto.DamiaoState.OVER_VOLTAGE)

        def over_voltage() -> bool:
            motor.request_motor_feedback()  # Damiao's 0xCC on 0x7FF
            return bool(motor.get_states().get("status") == "OVER_VOLTAGE")

        await asyncio.to_thread(wait_until, over_voltage, "OVER_VOLTAGE")
        motor.clear_error()

        def cleared() -> bool:
            motor.request_motor_feedback()
            return bool(motor.get_states().get("status") == "DISABLED")

        await asyncio.to_thread(wait_until, cleared, "the error cleared")
