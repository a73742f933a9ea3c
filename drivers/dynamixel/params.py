"""The Dynamixel driver's configuration, validated when the config file is loaded (times in s).

Each device is one X-series (or MX 2.0) servo on the chain, addressed by its bus id; the port is
the adapter's serial device (prefer its stable ``/dev/serial/by-id/...`` path), or the pty that
``armd sim-device dynamixel`` prints.
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from drivers.base import check_distinct
from drivers.dynamixel import protocol as dxl
from drivers.serial_bus.driver import ServoBusParams

__all__ = ["DynamixelDeviceParams", "DynamixelParams"]


class DynamixelDeviceParams(BaseModel):
    """One device: its bus `id`, `direction` (-1 flips the sign), `offset_rad` (the SI position
    at which the device reads 0 counts) and `current_limit` (A: its torque limit, written to Goal
    Current before torque on; needs `operating_mode: current_based_position`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: int = Field(ge=0, le=dxl.MAX_ID)
    direction: Literal[1, -1] = 1
    offset_rad: float = Field(default=0.0, allow_inf_nan=False)
    current_limit: float | None = Field(default=None, gt=0.0, allow_inf_nan=False)


class DynamixelParams(ServoBusParams):
    """The Dynamixel driver's configuration (times in s): `port` and `baudrate`, its devices."""

    devices: dict[str, DynamixelDeviceParams] = Field(min_length=1)
    operating_mode: Literal["position", "extended_position", "current_based_position"] = (
        "extended_position"
    )
    bus_watchdog_s: float | None = 0.1  # None: off; 0.02 … 2.54 in 20 ms steps
    # None: 0.002 s on a serial adapter, 0.05 s on a pseudo-terminal (`armd sim-device dynamixel`:
    # the devices are a process, whose replies wait for the scheduler on a loaded machine)
    reply_margin_s: float | None = Field(default=None, ge=0.0, allow_inf_nan=False)
    usb_latency_s: float | None = Field(default=None, ge=0.0)  # None: read from sysfs
    retries: int = Field(default=2, ge=0)  # for configuration commands, never for read/write
    reboot_timeout_s: float = Field(default=2.0, gt=0.0)
    indirect_index: int = Field(default=1, ge=1, le=29 - dxl.STATUS_BLOCK_LENGTH)
    accept_unknown_models: bool = False

    @field_validator("bus_watchdog_s")
    @classmethod
    def _watchdog_in_range(cls, value: float | None) -> float | None:
        if value is not None:
            dxl.watchdog_units(value)  # raises ValueError with the bounds
        return value

    @model_validator(mode="after")
    def _current_limit_needs_its_mode(self) -> Self:
        limited = [name for name, d in self.devices.items() if d.current_limit is not None]
        if limited and self.operating_mode != "current_based_position":
            raise ValueError(
                f"devices {limited}: current_limit needs operating_mode: current_based_position "
                f"(not {self.operating_mode}): only that mode caps the current at Goal Current"
            )
        return self

    @model_validator(mode="after")
    def _unique_ids(self) -> Self:
        check_distinct({name: device.id for name, device in self.devices.items()}, "id")
        return self
