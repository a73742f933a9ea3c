"""The Feetech driver's configuration, validated when the config file is loaded (times in s).

```yaml
drivers:
  arm:
    type: feetech
    params:
      port: /dev/serial/by-id/usb-1a86_USB_Single_Serial_…-if00  # or the sim-device pty
      baudrate: 1000000          # the servos' baud rate (STS3215 factory default)
      reply_margin_s: 0.01       # added to every reply deadline (computed from the baud rate)
      usb_latency_s: 0.001       # the adapter's latency, counted twice per transaction
      retries: 2                 # configuration commands only, never the cyclic read/write
      devices:
        shoulder_pan: {id: 1}                          # model sts3215, torque_limit 1.0
        gripper: {id: 6, model: sts3215, torque_limit: 0.5}
```

Per device: `id` (0-253, the servo's bus ID), `model` (`sts3215`, the default, `sts3250`, or
`scs0009`: big-endian, no Sync Read, no Torque_Limit item) and `torque_limit` (a fraction 0..1 of
the stall torque, written to Torque_Limit (48) at enable; the servo clamps its effort to it).
Positions are raw: 0 rad at 2048 counts (the middle of the turn), no homing offset or direction
(calibration is not this driver's job).
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from drivers.base import check_distinct
from drivers.feetech import protocol as ft
from drivers.feetech.table import MODELS
from drivers.serial_bus.driver import ServoBusParams

__all__ = ["FeetechDeviceParams", "FeetechParams"]


class FeetechDeviceParams(BaseModel):
    """One servo: its bus `id`, its `model` and its `torque_limit` (fraction of stall torque)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: int = Field(ge=0, le=ft.MAX_ID)
    model: Literal["sts3215", "sts3250", "scs0009"] = "sts3215"
    torque_limit: float = Field(default=1.0, ge=0.0, le=1.0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _torque_limit_exists(self) -> Self:
        if self.torque_limit != 1.0 and MODELS[self.model].torque_limit_address is None:
            raise ValueError(
                f"torque_limit {self.torque_limit}: {self.model} has no Torque_Limit item; "
                "leave it at 1.0"
            )
        return self


class FeetechParams(ServoBusParams):
    """The Feetech driver's configuration (times in s): `port` and `baudrate`, its servos."""

    devices: dict[str, FeetechDeviceParams] = Field(min_length=1)
    reply_margin_s: float = Field(default=0.01, ge=0.0, allow_inf_nan=False)
    usb_latency_s: float = Field(default=0.001, ge=0.0, allow_inf_nan=False)
    retries: int = Field(default=2, ge=0)

    @model_validator(mode="after")
    def _unique_ids(self) -> Self:
        check_distinct({name: device.id for name, device in self.devices.items()}, "id")
        return self
