"""The `sim` driver's hand (`hand_file`): devices with torque off go where the file puts them, a
device in closed loop holds, and a file that is missing, half-written or wrong changes nothing."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from drivers.errors import DriverConfigError
from drivers.sim.driver import ManualClock, SimDriver
from drivers.sim.motor import MotorParams

COUNT = MotorParams().resolution


def make_driver(clock: ManualClock, hand: Path) -> SimDriver:
    params = {"devices": {"a": {}, "b": {"initial_position": 0.5}}, "hand_file": str(hand)}
    return SimDriver(SimDriver.Params.model_validate(params), clock=clock)


async def positions(driver: SimDriver, clock: ManualClock) -> dict[str, float]:
    clock.advance(0.004)
    return {name: state.position for name, state in (await driver.read()).items()}


async def test_devices_with_torque_off_follow_the_hand(tmp_path: Path) -> None:
    clock, hand = ManualClock(), tmp_path / "hand.json"
    driver = make_driver(clock, hand)
    async with driver:
        assert await positions(driver, clock) == pytest.approx({"a": 0.0, "b": 0.5}, abs=COUNT)
        hand.write_text(json.dumps({"a": 1.25, "b": -2.0, "unknown": 3.0}))
        assert await positions(driver, clock) == pytest.approx({"a": 1.25, "b": -2.0}, abs=COUNT)
        hand.write_text('{"a": 0.3')  # half-written: ignored until whole
        assert await positions(driver, clock) == pytest.approx({"a": 1.25, "b": -2.0}, abs=COUNT)
        hand.write_text(json.dumps({"a": 0.3}))
        assert (await positions(driver, clock))["a"] == pytest.approx(0.3, abs=COUNT)
        for text in ("[1, 2]", '{"a": NaN}', '{"a": "far"}'):
            hand.write_text(text)
            assert (await positions(driver, clock))["a"] == pytest.approx(0.3, abs=COUNT)
        await driver.enable()  # closed loop: the hand cannot move it
        hand.write_text(json.dumps({"a": -1.0, "b": 1.0}))
        assert await positions(driver, clock) == pytest.approx({"a": 0.3, "b": -2.0}, abs=COUNT)


async def test_without_a_file_nothing_moves(tmp_path: Path) -> None:
    clock = ManualClock()
    driver = make_driver(clock, tmp_path / "absent.json")
    async with driver:
        assert await positions(driver, clock) == pytest.approx({"a": 0.0, "b": 0.5}, abs=COUNT)


def test_move_by_hand_refuses_a_non_finite_position() -> None:
    clock = ManualClock()
    driver = make_driver(clock, Path("/nonexistent"))
    with pytest.raises(DriverConfigError, match="must be finite"):
        driver.motor("a").move_by_hand(math.inf)
