"""`ArmHardware.enable()` with a driver that homes: it is enabled first, within the longer time it
asks for (`Driver.slow_enable_s`), and only then the others, so that no drive sits enabled and
uncommanded while another homes. Fake drivers that record what happened; no timing asserted."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import pytest

from armd.control.hardware import ArmHardware
from armd.control.transmission import ArmTransmission, Transmission
from drivers.base import DeviceCommand, DeviceState, Driver, DriverParams
from drivers.errors import DriverIOError


class _Params(DriverParams):
    pass


class _Recorder(Driver):
    """One device ``m``; `enable()` takes `homing_s` more the first time (None: no homing) and
    `enable_s` every time."""

    Params = _Params

    def __init__(
        self, name: str, log: list[str], homing_s: float | None = None, enable_s: float = 0.0
    ) -> None:
        super().__init__(_Params())
        self.name, self.log, self.homing_s, self.enable_s = name, log, homing_s, enable_s

    @property
    def device_names(self) -> tuple[str, ...]:
        return ("m",)

    @property
    def slow_enable_s(self) -> float | None:
        return None if self.homing_s is None else self.homing_s + 1.0

    async def _enable(self) -> None:
        self.log.append(f"{self.name} enabling")
        if self.homing_s is not None:
            await asyncio.sleep(self.homing_s)
            self.homing_s = None  # homed
        await asyncio.sleep(self.enable_s)
        self.log.append(f"{self.name} enabled")

    async def _open(self) -> None: ...
    async def _disable(self) -> None: ...
    async def _close(self) -> None: ...
    async def _clear_faults(self) -> None: ...
    async def _write(self, commands: Mapping[str, DeviceCommand]) -> None: ...

    async def _read(self) -> Mapping[str, DeviceState]:
        return {"m": DeviceState(0.0, 0.0, self.clock())}


def _hardware(drivers: dict[str, Driver], io_timeout_s: float) -> ArmHardware:
    transmission = ArmTransmission(
        [f"j_{name}" for name in drivers],
        [Transmission(f"j_{name}", name, "m") for name in drivers],
    )
    return ArmHardware(drivers, transmission, io_timeout_s=io_timeout_s)


async def test_a_homing_driver_is_enabled_first_within_its_own_time() -> None:
    log: list[str] = []
    drivers: dict[str, Driver] = {
        "servos": _Recorder("servos", log),
        "odrive": _Recorder("odrive", log, homing_s=0.1),
    }
    hardware = _hardware(drivers, io_timeout_s=0.001)  # 8 × 1 ms: far shorter than the homing
    await hardware.open()
    await hardware.enable()
    assert log == ["odrive enabling", "odrive enabled", "servos enabling", "servos enabled"]
    assert hardware.enabled


async def test_a_slow_enable_without_homing_still_times_out() -> None:
    slow = _Recorder("odrive", [], enable_s=0.2)  # asks for no extra time, but takes it
    hardware = _hardware({"odrive": slow}, io_timeout_s=0.001)
    await hardware.open()
    with pytest.raises(DriverIOError, match="driver 'odrive': enable timed out"):
        await hardware.enable()
