"""One simulated MIT actuator as pure logic on a manual clock: its frames, registers, modes and
injected faults."""

from __future__ import annotations

import pytest

from drivers.mit import protocol as proto
from drivers.mit.models import lookup
from drivers.mit.sim_actuator import Corruption, SimActuatorConfig, SimulatedActuator
from drivers.sim.driver import ManualClock
from drivers.sim.motor import MotorParams

DM4310 = lookup("DM4310").ranges


def damiao(clock: ManualClock, **overrides: object) -> SimulatedActuator:
    values: dict[str, object] = {
        "slave_id": 3,
        "master_id": 0x13,
        "model": lookup("DM4310"),
        "motor": MotorParams(max_velocity=20.0, initial_position=0.5),
    }
    values.update(overrides)
    return SimulatedActuator(SimActuatorConfig(**values), clock)  # type: ignore[arg-type]


def register(actuator: SimulatedActuator, op: proto.RegisterOp, rid: int, value: float = 0) -> list:
    frame = proto.make_register_frame(actuator.slave_id, op, rid, value)
    return actuator.handle(proto.REGISTER_ID, frame)


def feedback(replies: list[tuple[int, bytes]]) -> proto.MitReply:
    ((arbitration_id, data),) = replies
    assert arbitration_id == 0x13  # from the master id
    return proto.decode_damiao_reply(data, DM4310)


def test_every_frame_is_answered_from_the_master_id(clock: ManualClock) -> None:
    a = damiao(clock)
    reply = feedback(a.handle(3, proto.DISABLE))
    assert reply.motor_id == 3
    assert reply.state == proto.DamiaoState.DISABLED
    assert reply.position == pytest.approx(0.5, abs=25 / 65535)
    assert a.handle(4, proto.DISABLE) == []  # another motor's


def test_registers_read_write_and_echo(clock: ManualClock) -> None:
    a = damiao(clock)
    ((i, data),) = register(a, proto.RegisterOp.READ, proto.Register.CTRL_MODE)
    answer = proto.parse_register_frame(data)
    assert (i, answer) == (0x13, proto.RegisterFrame(3, 0x33, 10, bytes([1, 0, 0, 0])))
    ((_, data),) = register(a, proto.RegisterOp.WRITE, proto.Register.TIMEOUT, 2000)  # 0.1 s
    echo = proto.parse_register_frame(data)
    assert echo is not None
    assert (echo.op, echo.value) == (0x55, 2000)
    assert a.motor.params.watchdog_s == pytest.approx(0.1, abs=1e-12)
    assert register(a, proto.RegisterOp.SAVE, 1) == []
    other = proto.make_register_frame(4, proto.RegisterOp.READ, proto.Register.CTRL_MODE)
    assert a.handle(proto.REGISTER_ID, other) == []


def test_the_wrong_mode_ignores_mit_frames_silently(clock: ManualClock) -> None:
    a = damiao(clock, control_mode=proto.ControlMode.POS_VEL)
    feedback(a.handle(3, proto.ENABLE))
    command = proto.encode_command(proto.MitCommand(1.0, 0.0, 50.0, 1.0, 0.0), DM4310)
    assert a.handle(3, command) == []
    assert a.commands_applied == 0
    register(a, proto.RegisterOp.WRITE, proto.Register.CTRL_MODE, 1)  # fixed
    feedback(a.handle(3, command))
    assert a.commands_applied == 1


def test_a_command_moves_the_shaft_only_while_enabled(clock: ManualClock) -> None:
    a = damiao(clock)
    command = proto.encode_command(proto.MitCommand(1.0, 0.0, 50.0, 1.0, 0.0), DM4310)
    feedback(a.handle(3, command))
    assert a.commands_applied == 0
    assert feedback(a.handle(3, proto.ENABLE)).state == proto.DamiaoState.ENABLED
    feedback(a.handle(3, command))
    clock.advance(1.0)
    reply = feedback(a.handle(3, command))
    assert reply.position == pytest.approx(1.0, abs=2 * 25 / 65535)


def test_set_zero_makes_the_current_position_zero(clock: ManualClock) -> None:
    a = damiao(clock)
    assert feedback(a.handle(3, proto.SET_ZERO)).position == pytest.approx(0.0, abs=25 / 65535)


def test_an_error_refuses_enable_until_cleared(clock: ManualClock) -> None:
    a = damiao(clock)
    a.raise_error(proto.DamiaoState.ROTOR_OVER_TEMPERATURE)
    reply = feedback(a.handle(3, proto.ENABLE))
    assert reply.state == proto.DamiaoState.ROTOR_OVER_TEMPERATURE
    assert reply.rotor_temperature_c == 120
    assert not a.motor.enabled
    assert feedback(a.handle(3, proto.CLEAR_ERROR)).state == proto.DamiaoState.DISABLED
    assert feedback(a.handle(3, proto.ENABLE)).state == proto.DamiaoState.ENABLED


def test_the_can_timeout_latches_lost_communication(clock: ManualClock) -> None:
    a = damiao(clock, timeout_s=0.05)
    feedback(a.handle(3, proto.ENABLE))
    clock.advance(0.1)
    assert a.error == proto.DamiaoState.LOST_COMMUNICATION
    assert not a.motor.enabled


def test_injected_communication_faults(clock: ManualClock) -> None:
    a = damiao(clock)
    a.faults.corrupt_replies = Corruption.SHORT
    ((_, data),) = a.handle(3, proto.DISABLE)
    assert len(data) == 6
    a.faults.corrupt_replies = Corruption.WRONG_ID
    ((_, data),) = a.handle(3, proto.DISABLE)
    assert data[0] & 0xF == 2
    a.faults.drop_replies = True
    assert a.handle(3, proto.DISABLE) == []
    a.faults.silent = True
    assert a.handle(3, proto.ENABLE) == []
    assert not a.motor.enabled


def test_a_cubemars_actuator_has_no_registers_and_reports_error_codes(clock: ManualClock) -> None:
    ak = lookup("AK80-64")
    a = SimulatedActuator(SimActuatorConfig(0x68, 0, ak), clock)
    assert register(a, proto.RegisterOp.READ, proto.Register.CTRL_MODE) == []
    a.raise_error(proto.DamiaoState.UNDER_VOLTAGE)
    ((i, data),) = a.handle(0x68, proto.CLEAR_ERROR)  # answered, but clears nothing
    reply = proto.decode_cubemars_reply(data, ak.ranges)
    assert (i, reply.motor_id, reply.state) == (0, 0x68, proto.CubeMarsError.UNDER_VOLTAGE)
