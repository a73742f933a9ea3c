"""The `Driver` template: the lifecycle checks and bookkeeping every backend inherits, on a
recording fake backend."""

from __future__ import annotations

import math
from collections.abc import Mapping

import pytest

from drivers.base import (
    DeviceCommand,
    DeviceState,
    Driver,
    DriverParams,
    DriverStats,
    Lifecycle,
    LoopContext,
)
from drivers.errors import DriverIOError, DriverStateError, UnsupportedCommandError
from drivers.sim.driver import SimDriver


class FakeParams(DriverParams):
    devices: tuple[str, ...] = ("a", "b")


class FakeDriver(Driver):
    """Records the hooks called; `fail` names hooks that raise, with the exception to raise."""

    Params = FakeParams

    def __init__(self) -> None:
        super().__init__(FakeParams(), clock=lambda: 42.0)
        self.calls: list[str] = []
        self.fail: dict[str, BaseException] = {}
        self.written: list[Mapping[str, DeviceCommand]] = []

    @property
    def device_names(self) -> tuple[str, ...]:
        return ("a", "b")

    def _hook(self, name: str) -> None:
        self.calls.append(name)
        if name in self.fail:
            raise self.fail[name]

    async def _open(self) -> None:
        self._hook("open")

    async def _enable(self) -> None:
        self._hook("enable")

    async def _disable(self) -> None:
        self._hook("disable")

    async def _close(self) -> None:
        self._hook("close")

    async def _read(self) -> Mapping[str, DeviceState]:
        self._hook("read")
        return {"a": DeviceState(position=0.0, velocity=0.0, timestamp=self.clock())}

    async def _write(self, commands: Mapping[str, DeviceCommand]) -> None:
        self._hook("write")
        self.written.append(commands)

    async def _clear_faults(self) -> None:
        self._hook("clear_faults")


async def test_lifecycle_runs_each_hook_once() -> None:
    driver = FakeDriver()
    await driver.open()
    await driver.open()
    await driver.enable()
    await driver.enable()
    await driver.disable()
    await driver.disable()
    await driver.close()
    await driver.close()
    assert driver.calls == ["open", "enable", "disable", "close"]
    assert driver.lifecycle is Lifecycle.CLOSED


async def test_close_disables_an_enabled_driver_first() -> None:
    driver = FakeDriver()
    await driver.open()
    await driver.enable()
    await driver.close()
    assert driver.calls == ["open", "enable", "disable", "close"]


@pytest.mark.parametrize("action", ["enable", "read", "clear_faults"])
async def test_operations_are_refused_while_closed(action: str) -> None:
    driver = FakeDriver()
    with pytest.raises(DriverStateError, match=f"cannot {action.replace('_', ' ')} while closed"):
        await getattr(driver, action)()
    assert driver.calls == []


async def test_write_is_refused_unless_enabled() -> None:
    driver = FakeDriver()
    await driver.open()
    with pytest.raises(
        DriverStateError, match="FakeDriver: cannot write while open; must be enabled"
    ):
        await driver.write({"a": DeviceCommand(0.0)})
    assert "write" not in driver.calls


async def test_read_and_write_are_counted() -> None:
    driver = FakeDriver()
    await driver.open()
    await driver.enable()
    states = await driver.read()
    await driver.write({"a": DeviceCommand(1.0, 0.5)})
    assert states["a"].timestamp == pytest.approx(42.0, abs=0.0)
    assert (driver.stats.reads, driver.stats.writes) == (1, 1)


async def test_write_naming_an_unknown_device_sends_nothing() -> None:
    driver = FakeDriver()
    await driver.open()
    await driver.enable()
    with pytest.raises(DriverStateError, match=r"unknown device\(s\) \['c'\]; known: \('a', 'b'\)"):
        await driver.write({"a": DeviceCommand(0.0), "c": DeviceCommand(0.0)})
    assert driver.written == []


@pytest.mark.parametrize(
    "command",
    [DeviceCommand(math.nan), DeviceCommand(0.0, math.inf), DeviceCommand(-math.inf, 0.0)],
)
async def test_write_with_a_non_finite_command_sends_nothing(command: DeviceCommand) -> None:
    driver = FakeDriver()
    await driver.open()
    await driver.enable()
    with pytest.raises(UnsupportedCommandError, match=r"device 'b': position .* must be finite"):
        await driver.write({"a": DeviceCommand(0.0), "b": command})
    assert driver.written == []
    assert driver.stats.writes == 0


async def test_clear_faults_requires_open_not_enabled() -> None:
    driver = FakeDriver()
    await driver.open()
    await driver.clear_faults()
    await driver.enable()
    with pytest.raises(DriverStateError, match="cannot clear faults while enabled; must be open"):
        await driver.clear_faults()
    assert driver.calls.count("clear_faults") == 1


async def test_failed_enable_leaves_the_driver_open() -> None:
    driver = FakeDriver()
    await driver.open()
    driver.fail["enable"] = DriverIOError("bus off")
    with pytest.raises(DriverIOError, match="bus off"):
        await driver.enable()
    assert driver.lifecycle is Lifecycle.OPEN


async def test_close_swallows_driver_errors_and_remembers_them() -> None:
    driver = FakeDriver()
    await driver.open()
    await driver.enable()
    driver.fail["disable"] = DriverIOError("bus off")
    driver.fail["close"] = DriverIOError("port gone")
    await driver.close()
    assert driver.lifecycle is Lifecycle.CLOSED
    assert driver.calls[-2:] == ["disable", "close"]
    assert driver.stats.last_error == "FakeDriver: close: cannot release the bus: port gone"


async def test_close_does_not_hide_programming_errors() -> None:
    driver = FakeDriver()
    await driver.open()
    driver.fail["close"] = RuntimeError("bug")
    with pytest.raises(RuntimeError, match="bug"):
        await driver.close()
    assert driver.lifecycle is Lifecycle.CLOSED


async def test_async_with_closes_on_error() -> None:
    driver = FakeDriver()

    async def fail_while_enabled() -> None:
        async with driver:
            await driver.enable()
            raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        await fail_while_enabled()
    assert driver.calls == ["open", "enable", "disable", "close"]


def test_stats_count_errors_per_kind_and_device() -> None:
    stats = DriverStats()
    stats.count_error("a", "timeouts", "a: late")
    stats.count_error("a", "corrupt_replies", "a: bad crc")
    stats.count_error(None, "io_errors", "bus off")
    assert (stats.timeouts, stats.corrupt_replies, stats.io_errors) == (1, 1, 1)
    assert stats.per_device_errors == {"a": 2}
    assert stats.last_error == "bus off"


def test_with_loop_leaves_the_params_of_drivers_that_need_nothing_from_the_loop() -> None:
    params = SimDriver.Params.model_validate({"devices": {"a": {}}})
    assert SimDriver.with_loop(params, LoopContext(0.004, {"a": (-1.0, 1.0)})) is params
