"""One Feetech servo as the driver sees it: its id and model, its conversion to SI, and what its
status block means (`DeviceState`, fault). Pure functions of values, no I/O.

Units: ``position = 2π · (counts - middle) / counts_per_rev`` (rad, 0 at the middle of the turn:
2048 of 4096 counts on the STS3215), velocity likewise from steps/s, effort = Present_Load / 1000
(a signed fraction of the stall torque).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from drivers.base import DeviceFault, DeviceState
from drivers.errors import UnsupportedCommandError
from drivers.feetech import protocol as ft
from drivers.feetech import table as tb
from drivers.feetech.table import ModelSpec, StatusBlock

__all__ = ["Servo", "fault_of"]


@dataclass(frozen=True, slots=True)
class Servo:
    name: str
    id: int
    spec: ModelSpec
    torque_limit: float  # fraction of the stall torque

    def __str__(self) -> str:
        return f"servo {self.name!r} (id {self.id})"

    def word(self, value: int, address: int) -> bytes:
        """A 2-byte item in this model's byte order (sign-magnitude where the item is)."""
        raw = ft.encode_signed(value, tb.SIGN_BITS[address]) if address in tb.SIGN_BITS else value
        return ft.encode_word(raw, self.spec.byteorder)

    def state(
        self, block: StatusBlock, error: int, now: float, *, driver_enabled: bool, unloading: int
    ) -> DeviceState:
        """The servo's state from its status block and its status packet's error byte, stamped
        `now` (driver clock, s). `unloading`: its Unloading_Condition bits (those drop torque)."""
        cpr = self.spec.counts_per_rev
        bits = error | block.status
        return DeviceState(
            position=tb.counts_to_rad(block.position, cpr),
            velocity=tb.steps_to_rad_s(block.velocity, cpr),
            timestamp=now,
            fault=fault_of(bits, block, unloading=unloading),
            enabled=driver_enabled and not bits & unloading,
            effort=tb.load_fraction(block.load),
        )

    def goal_counts(self, position: float, limits: tuple[int, int]) -> int:
        """Goal Position counts for `position` (rad) within the position `limits` (counts).
        Raises `UnsupportedCommandError`."""
        if not math.isfinite(position):
            raise UnsupportedCommandError(f"{self}: position {position} rad is not finite")
        counts = tb.rad_to_counts(position, self.spec.counts_per_rev)
        low, high = limits
        if not low <= counts <= high:
            raise UnsupportedCommandError(
                f"{self}: {position:.4f} rad is {counts} counts, outside its position limits "
                f"[{low}, {high}]"
            )
        return counts


def fault_of(bits: int, block: StatusBlock, *, unloading: int) -> DeviceFault | None:
    """The fault named by the status bits (code: the bits), saying whether the servo dropped
    torque and giving its temperature and voltage; None when no bit is set."""
    if not bits:
        return None
    text = ft.describe_error(bits)
    text += "; the servo switched torque off" if bits & unloading else "; torque stays on"
    return DeviceFault(bits, f"{text} ({block.temperature} °C, {block.voltage / 10} V)")
