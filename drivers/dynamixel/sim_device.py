"""One simulated X-series Dynamixel: a `SimulatedMotor` behind its control table
(`drivers.dynamixel.sim_table`), serving Protocol 2.0 instructions one packet at a time.

- Ping, Read, Write, Reboot, Sync Read and Sync Write; Status Return Level (68) is honoured.
- Goal Position is writable while torque is off, as on the X series: the motor does not move, but
  it drives to that goal when torque is switched on (hence the driver's "goal = present" first).
- Hardware errors (`inject_hardware_error`) latch in Hardware Error Status (70), switch torque off,
  set the Alert bit of every status packet and refuse Torque Enable = 1 (Result Fail) until Reboot.
- Bus Watchdog (98): while torque is on, if no instruction packet reaches the device for longer
  than the set time, the device stops (holds its position; torque stays on, as documented for the
  X series), the item reads -1 and Goal Position writes answer Data Range Error until 0 is written.
- Reboot answers, goes silent for `reboot_s`, then resets the RAM area; like the real encoder, the
  multi-turn count is lost (Present Position restarts within one turn).

`drivers.dynamixel.sim` puts several devices on a pty and times their replies.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from drivers.dynamixel import protocol as dxl
from drivers.dynamixel.protocol import Addr, Instruction, Packet, StatusError
from drivers.dynamixel.sim_table import ControlTable
from drivers.sim.motor import SimulatedMotor

__all__ = ["DynamixelFaults", "SimulatedDynamixel"]


@dataclass
class DynamixelFaults:
    """Injected communication faults of one device; tests set these fields directly.

    silent: the device never answers. drop_next: it ignores the next n replies it would send.
    corrupt_next: the next n replies go out with a broken CRC. extra_delay_s: added to every reply.
    """

    silent: bool = False
    drop_next: int = 0
    corrupt_next: int = 0
    extra_delay_s: float = 0.0


class SimulatedDynamixel:
    """One X-series device: its control table and motor. Not thread-safe; the chain locks."""

    def __init__(
        self,
        device_id: int,
        motor: SimulatedMotor,
        *,
        model_number: int = 1020,
        return_delay: int = 250,
        reboot_s: float = 0.05,
    ) -> None:
        self.motor = motor
        self.faults = DynamixelFaults()
        self.reboot_s = reboot_s
        self._table = ControlTable(device_id, model_number=model_number, return_delay=return_delay)
        self._booting_until = 0.0
        self._last_rx = time.monotonic()
        self._boot()

    @property
    def id(self) -> int:
        return self._table[Addr.ID]

    @property
    def hardware_error(self) -> int:
        return self._table[Addr.HARDWARE_ERROR_STATUS]

    @property
    def return_delay_s(self) -> float:
        return dxl.return_delay_s(self._table[Addr.RETURN_DELAY_TIME])

    def _boot(self) -> None:
        """Power-on state of the RAM area; the encoder keeps only the position within one turn."""
        self._table.reset_ram()
        self.motor.disable()
        raw = dxl.rad_to_counts(self.motor.sample().position)
        self._count_offset = -(raw - raw % dxl.COUNTS_PER_REV)
        self._table.set(Addr.GOAL_POSITION, 4, raw + self._count_offset)

    def _goal_rad(self, counts: int) -> float:
        return dxl.counts_to_rad(counts - self._count_offset)

    # -- packet handling ------------------------------------------------------------------------

    def handle(self, packet: Packet, now: float) -> bytes | None:
        """Serve one instruction addressed to this device (or broadcast); returns the reply."""
        if self._booting(now):
            return None
        self._last_rx = now
        handlers: dict[int, Callable[[Packet, float], bytes | None]] = {
            Instruction.PING: self._ping,
            Instruction.READ: self._read,
            Instruction.WRITE: self._write,
            Instruction.REBOOT: self._reboot,
            Instruction.SYNC_READ: self._read,
            Instruction.SYNC_WRITE: self._sync_write,
        }
        serve = handlers.get(packet.instruction)
        if serve is not None:
            return serve(packet, now)
        return None if packet.id == dxl.BROADCAST_ID else self._status(StatusError.INSTRUCTION)

    def _ping(self, packet: Packet, now: float) -> bytes | None:
        return self._status(0, self._table.raw(0, 2) + self._table.raw(6, 1), always=True)

    def _read(self, packet: Packet, now: float) -> bytes | None:
        params = packet.params
        if packet.instruction == Instruction.SYNC_READ and self.id not in params[4:]:
            return None
        if len(params) < 4 or (packet.instruction == Instruction.READ and len(params) != 4):
            return self._status(StatusError.DATA_LENGTH)
        error, data = self.read_range(_u16(params, 0), _u16(params, 2))
        return self._status(error, data, level=1)

    def _write(self, packet: Packet, now: float) -> bytes | None:
        if len(packet.params) < 3:
            return self._status(StatusError.DATA_LENGTH)
        return self._status(self.write_range(_u16(packet.params, 0), packet.params[2:]))

    def _reboot(self, packet: Packet, now: float) -> bytes | None:
        reply = self._status(0)
        self._booting_until = now + self.reboot_s
        self.motor.disable()
        return reply

    def _booting(self, now: float) -> bool:
        """Whether a reboot is still in progress; completes it when its time has come."""
        if self._booting_until and now >= self._booting_until:
            self._booting_until = 0.0
            self._boot()
        return self._booting_until > 0.0

    def _sync_write(self, packet: Packet, now: float) -> bytes | None:
        params = packet.params
        address, length = _u16(params, 0), _u16(params, 2)
        for start in range(4, len(params) - length, length + 1):
            if params[start] == self.id:
                self.write_range(address, params[start + 1 : start + 1 + length])
        return None  # Sync Write is never answered

    def _status(
        self, error: int, data: bytes = b"", *, level: int = 2, always: bool = False
    ) -> bytes | None:
        if not always and self._table[Addr.STATUS_RETURN_LEVEL] < level:
            return None
        alert = dxl.ALERT_BIT if self.hardware_error else 0
        return dxl.make_status(self.id, error | alert, bytes(data) if not error else b"")

    def tick(self, now: float) -> None:
        """Finish a reboot; let the bus watchdog expire when the bus has been quiet too long."""
        if self._booting(now):
            return
        units = self._table.get(Addr.BUS_WATCHDOG)
        torque_on = self._table[Addr.TORQUE_ENABLE] == 1
        if units > 0 and torque_on and now - self._last_rx > dxl.watchdog_s(units):
            self._table.set(Addr.BUS_WATCHDOG, 1, dxl.WATCHDOG_ERROR)
            self.motor.command(self.motor.sample().position)

    def inject_hardware_error(self, bits: int) -> None:
        self._table[Addr.HARDWARE_ERROR_STATUS] |= bits
        self._table[Addr.TORQUE_ENABLE] = 0
        self.motor.disable()

    # -- the control table ----------------------------------------------------------------------

    def read_range(self, address: int, length: int) -> tuple[int, bytes]:
        """(error number, data) for reading `length` bytes; indirect data resolves its mapping."""
        if self._table.in_bounds(address, length):
            self._refresh()
        return self._table.read(address, length)

    def write_range(self, address: int, data: bytes) -> int:
        """Validate then apply a write; returns the status error number (0 when done)."""
        return self._table.write(address, data, self._apply)

    def _refresh(self) -> None:
        sample = self.motor.sample()
        self._table.set(
            Addr.PRESENT_POSITION, 4, dxl.rad_to_counts(sample.position) + self._count_offset
        )
        self._table.set(Addr.PRESENT_VELOCITY, 4, dxl.rad_s_to_velocity(sample.velocity))
        self._table[122] = int(abs(sample.velocity) > 0.01)  # Moving

    def _apply(self, address: int) -> None:
        """Act on a stored write to the item at `address`."""
        torque_on = self._table[Addr.TORQUE_ENABLE] == 1
        goal = self._goal_rad(self._table.get(Addr.GOAL_POSITION))
        if address == Addr.TORQUE_ENABLE:
            if torque_on and not self.motor.enabled:
                self.motor.enable()
                self.motor.command(goal)  # the X series drives to the stored goal
            elif not torque_on:
                self.motor.disable()
        elif address == Addr.GOAL_POSITION and torque_on:
            self.motor.command(goal)


def _u16(data: bytes, offset: int) -> int:
    return data[offset] | data[offset + 1] << 8
