"""The `sim` driver's configuration (`SimDriverParams`, with a `SimDeviceParams` per device, in
SI units at the shaft) and the fault bits its devices report (`SimFault`, `fault_message`); the
driver itself is `drivers.sim.driver.SimDriver`, which re-exports these names.
"""

from __future__ import annotations

import enum
import math
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from drivers.base import DriverParams
from drivers.sim.motor_params import MotorParams

__all__ = ["SimDeviceParams", "SimDriverParams", "SimFault", "fault_message"]


class SimFault(enum.IntFlag):
    """The simulated devices' fault bits (`DeviceFault.code` is their union)."""

    OVERCURRENT = 0x01
    OVERVOLTAGE = 0x02
    UNDERVOLTAGE = 0x04
    OVERTEMPERATURE = 0x08
    ENCODER = 0x10
    WATCHDOG_EXPIRED = 0x20


_FAULT_MESSAGES: dict[SimFault, str] = {
    SimFault.OVERCURRENT: "overcurrent",
    SimFault.OVERVOLTAGE: "overvoltage",
    SimFault.UNDERVOLTAGE: "undervoltage",
    SimFault.OVERTEMPERATURE: "overtemperature",
    SimFault.ENCODER: "encoder error",
    SimFault.WATCHDOG_EXPIRED: "watchdog expired",
}
_KNOWN_FAULT_BITS = sum(int(bit) for bit in _FAULT_MESSAGES)


def fault_message(code: int) -> str:
    """A readable message for a `SimFault` bit set, naming unknown bits in hex."""
    names = [message for bit, message in _FAULT_MESSAGES.items() if code & bit]
    unknown = code & ~_KNOWN_FAULT_BITS
    if unknown:
        names.append(f"unknown fault bits {unknown:#x}")
    return f"{', '.join(names)} (code {code:#x})"


class SimDeviceParams(BaseModel):
    """One simulated device, in SI units at the shaft (rad, rad/s, rad/s²; m for linear axes)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_velocity: float = Field(6.0, gt=0.0, allow_inf_nan=False, description="rad/s")
    max_acceleration: float = Field(60.0, gt=0.0, allow_inf_nan=False, description="rad/s²")
    position_gain: float = Field(60.0, gt=0.0, allow_inf_nan=False, description="1/s")
    velocity_gain: float = Field(
        240.0, gt=0.0, allow_inf_nan=False, description="1/s; 4 × position_gain: critically damped"
    )
    counts_per_rev: int = Field(16384, ge=1, description="encoder counts per 2π")
    noise_std: float = Field(0.0, ge=0.0, allow_inf_nan=False, description="encoder noise, rad")
    initial_position: float = Field(0.0, allow_inf_nan=False, description="rad")
    watchdog_s: float = Field(0.1, ge=0.0, allow_inf_nan=False, description="s; 0 disables")
    seed: int = Field(0, ge=0, description="seeds the encoder noise and the link faults")
    torque_limit: float = Field(
        1.0, gt=0.0, le=1.0, allow_inf_nan=False, description="fraction of the stall torque"
    )
    end_stops: tuple[float, float] | None = Field(
        None, description="[low, high], rad: the shaft's mechanical travel (None: unbounded)"
    )

    @model_validator(mode="after")
    def _velocity_loop_faster_than_position_loop(self) -> Self:
        if self.velocity_gain <= self.position_gain:
            raise ValueError(
                f"velocity_gain {self.velocity_gain} 1/s must be > position_gain "
                f"{self.position_gain} 1/s (4 × position_gain is critically damped)"
            )
        if self.end_stops is not None:
            low, high = self.end_stops
            if not (math.isfinite(low) and math.isfinite(high) and low < high):
                raise ValueError(f"end_stops [{low}, {high}]: must be finite, low < high")
            if not low <= self.initial_position <= high:
                raise ValueError(
                    f"initial_position {self.initial_position} rad outside end_stops "
                    f"[{low}, {high}]"
                )
        return self

    def motor_params(self) -> MotorParams:
        """The `MotorParams` of this device's simulated motor."""
        return MotorParams(
            max_velocity=self.max_velocity,
            max_acceleration=self.max_acceleration,
            position_gain=self.position_gain,
            velocity_gain=self.velocity_gain,
            counts_per_rev=self.counts_per_rev,
            noise_std=self.noise_std,
            initial_position=self.initial_position,
            watchdog_s=self.watchdog_s,
        )


class SimDriverParams(DriverParams):
    """The `sim` driver's configuration: its devices by name, in order, and the reply deadline."""

    devices: dict[str, SimDeviceParams] = Field(min_length=1)
    reply_timeout_s: float = Field(
        0.01, gt=0.0, allow_inf_nan=False, description="replies older than this are discarded, s"
    )
    hand_file: str | None = Field(
        None,
        min_length=1,
        description="a JSON file {device: position, rad at the shaft} that moves the devices "
        "whose torque is off, like a hand (tests and demos of armd calibrate)",
    )

    @field_validator("devices")
    @classmethod
    def _names_are_not_blank(
        cls, devices: dict[str, SimDeviceParams]
    ) -> dict[str, SimDeviceParams]:
        blank = [name for name in devices if not name.strip()]
        if blank:
            raise ValueError(f"device names must not be blank; got {blank}")
        return devices
