"""The `sim` driver's end stops and torque limit: a shaft driven past an end stop stops there
while its drive keeps pushing, its effort clamped to the torque limit; a hand cannot push it out
either; parameters that cannot be are refused. A simulated Feetech servo held by an end stop
reports its push as its load, up to its torque limit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from drivers import DeviceCommand
from drivers.feetech.sim import STS3215_MOTOR
from drivers.feetech.sim_device import SimulatedServo
from drivers.feetech.table import Addr, rad_to_counts
from drivers.sim.driver import ManualClock, SimDriver
from drivers.sim.motor import MotorParams, SimulatedMotor

COUNT = MotorParams().resolution


def make_driver(clock: ManualClock, hand: Path | None = None) -> SimDriver:
    device = {"end_stops": [-0.5, 0.75], "torque_limit": 0.3}
    params = {"devices": {"a": device}, "hand_file": str(hand) if hand else None}
    return SimDriver(SimDriver.Params.model_validate(params), clock=clock)


async def test_a_shaft_driven_past_an_end_stop_stops_there_at_its_torque_limit() -> None:
    clock = ManualClock()
    driver = make_driver(clock)
    async with driver:
        await driver.enable()
        for target, stop in ((2.0, 0.75), (-2.0, -0.5)):
            for _ in range(200):  # 2 s at 100 Hz: long enough to reach either stop
                await driver.write({"a": DeviceCommand(target)})
                clock.advance(0.01)
            state = (await driver.read())["a"]
            assert state.position == pytest.approx(stop, abs=COUNT)
            assert state.velocity == pytest.approx(0.0, abs=1e-9)
            assert state.effort == pytest.approx(0.3 if target > 0 else -0.3, abs=1e-12)
        for _ in range(100):
            await driver.write({"a": DeviceCommand(0.1)})
            clock.advance(0.01)
        state = (await driver.read())["a"]
        assert state.position == pytest.approx(0.1, abs=COUNT)
        assert abs(state.effort or 0.0) < 0.3  # free again: the effort is the small error's


async def test_a_hand_cannot_push_a_shaft_past_its_end_stops(tmp_path: Path) -> None:
    clock, hand = ManualClock(), tmp_path / "hand.json"
    driver = make_driver(clock, hand)
    async with driver:
        hand.write_text(json.dumps({"a": 3.0}))
        clock.advance(0.01)
        assert (await driver.read())["a"].position == pytest.approx(0.75, abs=COUNT)


@pytest.mark.parametrize(
    ("device", "message"),
    [
        ({"end_stops": [1.0, -1.0]}, "low < high"),
        ({"end_stops": [0.5, 1.0]}, "initial_position 0.0 rad outside end_stops"),
        ({"torque_limit": 0.0}, "greater than 0"),
        ({"torque_limit": 1.5}, "less than or equal to 1"),
    ],
)
def test_impossible_params_are_refused(device: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        SimDriver.Params.model_validate({"devices": {"a": device}})


def test_a_feetech_servo_pushing_into_an_end_stop_reports_its_torque_limit_as_load() -> None:
    clock = ManualClock()
    motor = SimulatedMotor(STS3215_MOTOR, clock)
    motor.faults.end_stops = (-0.5, 0.3)
    servo = SimulatedServo(1, motor)
    servo.write_range(Addr.TORQUE_LIMIT, (250).to_bytes(2, "little"), clock.now)
    servo.write_range(Addr.TORQUE_ENABLE, b"\x01", clock.now)
    for goal, load in ((1.0, 250), (-1.0, -250), (0.0, 0)):  # beyond each stop, then free
        counts = rad_to_counts(goal)  # 2048 is 0 rad
        servo.write_range(Addr.GOAL_POSITION, counts.to_bytes(2, "little"), clock.now)
        clock.advance(2.0)
        servo.tick(clock.now)
        assert servo.get(Addr.PRESENT_LOAD) == load
    assert servo.get(Addr.TORQUE_ENABLE) == 1  # 25 % is below Overload_Torque: no overload
