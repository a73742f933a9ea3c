"""One Dynamixel device as the driver sees it: its id, its conversion to SI at the motor shaft, and
what its status block means (`DeviceState`, fault). Pure functions of values, no I/O.

Units: ``position = direction · 2π · counts / 4096 + offset_rad`` (rad at the motor shaft;
velocity likewise from 0.229 rpm units, without the offset).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from drivers.base import DeviceFault, DeviceState
from drivers.dynamixel import protocol as dxl
from drivers.dynamixel.protocol import StatusBlock
from drivers.errors import UnsupportedCommandError

__all__ = ["FAULT_BUS_WATCHDOG", "FAULT_TORQUE_OFF", "Device", "fault_of"]

FAULT_BUS_WATCHDOG = 0x100
FAULT_TORQUE_OFF = 0x200


@dataclass(frozen=True, slots=True)
class Device:
    name: str
    id: int
    direction: int
    offset_rad: float

    def __str__(self) -> str:
        return f"device {self.name!r} (id {self.id})"

    def state(
        self,
        block: StatusBlock,
        now: float,
        *,
        driver_enabled: bool,
        current_unit_a: float | None = None,
    ) -> DeviceState:
        """The device's state from its status block, stamped `now` (driver clock, s); its effort
        is the Present Current in A when the model senses current (`current_unit_a`)."""
        effort = None if current_unit_a is None else self.direction * block.current * current_unit_a
        return DeviceState(
            position=self.direction * dxl.counts_to_rad(block.position) + self.offset_rad,
            velocity=self.direction * dxl.velocity_to_rad_s(block.velocity),
            timestamp=now,
            fault=fault_of(block, driver_enabled=driver_enabled),
            enabled=block.torque_enabled,
            effort=effort,
        )

    def goal_counts(self, position: float, limits: tuple[int, int], mode: str) -> int:
        """Goal Position counts for `position` (rad), within `limits` (counts) of the operating
        `mode`. Raises `UnsupportedCommandError`."""
        if not math.isfinite(position):
            raise UnsupportedCommandError(f"{self}: position {position} rad is not finite")
        counts = dxl.rad_to_counts((position - self.offset_rad) * self.direction)
        low, high = limits
        if not low <= counts <= high:
            raise UnsupportedCommandError(
                f"{self}: {position:.4f} rad is {counts} counts, outside [{low}, {high}] "
                f"in {mode} mode"
            )
        return counts


def fault_of(block: StatusBlock, *, driver_enabled: bool) -> DeviceFault | None:
    """A hardware error (code: its bits), an expired bus watchdog, or torque found off while the
    driver is enabled; None when the device is fine."""
    if block.hardware_error:
        text = dxl.describe_hardware_error(block.hardware_error)
        return DeviceFault(block.hardware_error, f"hardware error: {text}; torque is off")
    if block.bus_watchdog == dxl.WATCHDOG_ERROR:
        message = "bus watchdog expired: the device stopped and refuses goals until cleared"
        return DeviceFault(FAULT_BUS_WATCHDOG, message)
    if driver_enabled and not block.torque_enabled:
        return DeviceFault(FAULT_TORQUE_OFF, "torque is off although the driver is enabled")
    return None
