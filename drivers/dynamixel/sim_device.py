"""One simulated X-series Dynamixel: a `SimulatedMotor` behind its control table
(`drivers.dynamixel.sim_table`), serving Protocol 2.0 instructions one packet at a time.

- Ping, Read, Write, Reg Write/Action, Factory Reset, Reboot, Clear, Sync Read/Write and Bulk
  Read/Write, as the e-manual's "Protocol 2.0" page specifies: Status Return Level (68) is
  honoured; a broadcast (ID 0xFE) instruction is never answered except Ping, Sync Read and Bulk
  Read; a packet with a bad CRC is answered with CRC Error; Action without Reg Write, or an unknown
  instruction, with Instruction Error.
- Goal Position is writable while torque is off, as on the X series: the motor does not move, but
  it drives to that goal when torque is switched on (hence the driver's "goal = present" first).
- Hardware errors (`inject_hardware_error`) latch in Hardware Error Status (70), switch torque off,
  set the Alert bit of every status packet and refuse Torque Enable = 1 (Result Fail) until Reboot.
- Bus Watchdog (98): while torque is on, if no instruction packet reaches the device for longer
  than the set time, the device stops (holds its position; torque stays on, as documented for the
  X series), the item reads -1 and Goal Position writes answer Data Range Error until 0 is written.
- Reboot answers, goes silent for `reboot_s`, then resets the RAM area; like the real encoder, the
  multi-turn count is lost (Present Position restarts within one turn). Factory Reset answers,
  restores the initial values (all, all but the ID, or all but the ID and Baud Rate), then reboots;
  broadcast with option 0xFF (reset all) it is ignored, as on firmware 42 and later.
- Clear (option 0x01 and its fixed bytes) brings Present Position within one turn; while moving
  it answers Result Fail.

`drivers.dynamixel.sim` puts several devices on a pty and times their replies.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from drivers.dynamixel import protocol as dxl
from drivers.dynamixel.protocol import Addr, Instruction, Packet, StatusError
from drivers.dynamixel.sim_table import ControlTable
from drivers.serial_bus.framing import sync_write_data
from drivers.serial_bus.pty_chain import LinkFaults
from drivers.sim.motor import SimulatedMotor

__all__ = ["DynamixelFaults", "SimulatedDynamixel"]


DynamixelFaults = LinkFaults
"""Injected communication faults of one device (`drivers.serial_bus.pty_chain.LinkFaults`)."""


class SimulatedDynamixel:
    """One X-series device: its control table and motor. Not thread-safe; the chain locks."""

    def __init__(
        self,
        device_id: int,
        motor: SimulatedMotor,
        *,
        model_number: int = 1020,
        return_delay: int = 250,
        baud_rate: int = 3,
        reboot_s: float = 0.05,
    ) -> None:
        self.motor = motor
        self.faults = DynamixelFaults()
        self.reboot_s = reboot_s
        self._table = ControlTable(
            device_id, model_number=model_number, return_delay=return_delay, baud_rate=baud_rate
        )
        self._registered: tuple[int, bytes] | None = None  # Reg Write's (address, data)
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
    def baudrate(self) -> int:
        """The rate its Baud Rate (8) selects, bps: the only rate at which it hears anything."""
        return dxl.BAUD_RATES[self._table[Addr.BAUD_RATE]]

    @property
    def return_delay_s(self) -> float:
        return dxl.return_delay_s(self._table[Addr.RETURN_DELAY_TIME])

    def _boot(self) -> None:
        """Power-on state of the RAM area; the encoder keeps only the position within one turn."""
        self._table.reset_ram()
        self._registered = None
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
        if not packet.crc_ok:
            if packet.id == dxl.BROADCAST_ID:
                return None
            reply = self._status(StatusError.CRC, level=_LEVELS.get(packet.instruction, 2))
        else:
            handlers: dict[int, Callable[[Packet, float], bytes | None]] = {
                Instruction.PING: self._ping,
                Instruction.READ: self._read,
                Instruction.WRITE: self._write,
                Instruction.REG_WRITE: self._reg_write,
                Instruction.ACTION: self._action,
                Instruction.FACTORY_RESET: self._factory_reset,
                Instruction.REBOOT: self._reboot,
                Instruction.CLEAR: self._clear,
                Instruction.SYNC_READ: self._sync_read,
                Instruction.SYNC_WRITE: self._sync_write,
                Instruction.BULK_READ: self._bulk_read,
                Instruction.BULK_WRITE: self._bulk_write,
            }
            serve = handlers.get(packet.instruction, self._unknown)
            reply = serve(packet, now)
        if packet.id == dxl.BROADCAST_ID and packet.instruction not in _ANSWERED_BROADCAST:
            return None  # the instruction is carried out, but nobody answers
        return reply

    def _unknown(self, packet: Packet, now: float) -> bytes | None:
        return self._status(StatusError.INSTRUCTION)

    def _ping(self, packet: Packet, now: float) -> bytes | None:
        return self._status(0, self._table.raw(0, 2) + self._table.raw(6, 1), level=0)

    def _read(self, packet: Packet, now: float) -> bytes | None:
        if len(packet.params) != 4:
            return self._status(StatusError.DATA_LENGTH, level=1)
        return self._read_reply(_u16(packet.params, 0), _u16(packet.params, 2))

    def _read_reply(self, address: int, length: int) -> bytes | None:
        error, data = self.read_range(address, length)
        return self._status(error, data, level=1)

    def _sync_read(self, packet: Packet, now: float) -> bytes | None:
        params = packet.params
        if len(params) < 4 or self.id not in params[4:]:
            return None
        return self._read_reply(_u16(params, 0), _u16(params, 2))

    def _bulk_read(self, packet: Packet, now: float) -> bytes | None:
        params = packet.params
        for start in range(0, len(params) - 4, 5):
            if params[start] == self.id:
                return self._read_reply(_u16(params, start + 1), _u16(params, start + 3))
        return None

    def _write(self, packet: Packet, now: float) -> bytes | None:
        if len(packet.params) < 3:
            return self._status(StatusError.DATA_LENGTH)
        return self._status(self.write_range(_u16(packet.params, 0), packet.params[2:]))

    def _reg_write(self, packet: Packet, now: float) -> bytes | None:
        if len(packet.params) < 3:
            return self._status(StatusError.DATA_LENGTH)
        self._registered = (_u16(packet.params, 0), bytes(packet.params[2:]))
        self._table[Addr.REGISTERED_INSTRUCTION] = 1
        return self._status(0)

    def _action(self, packet: Packet, now: float) -> bytes | None:
        if self._registered is None:
            return self._status(StatusError.INSTRUCTION)  # Action without Reg Write
        (address, data), self._registered = self._registered, None
        self._table[Addr.REGISTERED_INSTRUCTION] = 0
        return self._status(self.write_range(address, data))

    def _sync_write(self, packet: Packet, now: float) -> bytes | None:
        params = packet.params
        address, length = _u16(params, 0), _u16(params, 2)
        for data in sync_write_data(params, 4, length, self.id):
            self.write_range(address, data)
        return None  # Sync Write is never answered

    def _bulk_write(self, packet: Packet, now: float) -> bytes | None:
        params, start = packet.params, 0
        while start + 5 <= len(params):
            address, length = _u16(params, start + 1), _u16(params, start + 3)
            if params[start] == self.id:
                self.write_range(address, params[start + 5 : start + 5 + length])
            start += 5 + length
        return None  # Bulk Write is never answered

    def _reboot(self, packet: Packet, now: float) -> bytes | None:
        reply = self._status(0)
        self._booting_until = now + self.reboot_s
        self.motor.disable()
        return reply

    def _factory_reset(self, packet: Packet, now: float) -> bytes | None:
        if len(packet.params) != 1:
            return self._status(StatusError.DATA_LENGTH)
        keep = _FACTORY_RESET_KEEPS.get(packet.params[0])
        if keep is None:
            return self._status(StatusError.DATA_RANGE)
        if packet.id == dxl.BROADCAST_ID and packet.params[0] == 0xFF:
            return None  # firmware 42+: a broadcast "reset all" is not carried out
        reply = self._status(0)
        self._table.factory_reset(keep=keep)
        self._booting_until = now + self.reboot_s
        self.motor.disable()
        return reply

    def _clear(self, packet: Packet, now: float) -> bytes | None:
        if len(packet.params) != 5:
            return self._status(StatusError.DATA_LENGTH)
        if bytes(packet.params) != _CLEAR_MULTI_TURN:
            return self._status(StatusError.DATA_RANGE)  # options 0x02-0xFF are reserved
        self._refresh()
        if self._table[Addr.MOVING]:
            return self._status(StatusError.RESULT_FAIL)  # only applied while stopped
        old_offset = self._count_offset
        raw = dxl.rad_to_counts(self.motor.sample().position)
        self._count_offset = -(raw - raw % dxl.COUNTS_PER_REV)
        goal = self._table.get(Addr.GOAL_POSITION) + self._count_offset - old_offset
        self._table.set(Addr.GOAL_POSITION, 4, goal)  # the same shaft angle, in the new turn
        return self._status(0)

    def _booting(self, now: float) -> bool:
        """Whether a reboot is still in progress; completes it when its time has come."""
        if self._booting_until and now >= self._booting_until:
            self._booting_until = 0.0
            self._boot()
        return self._booting_until > 0.0

    def _status(self, error: int, data: bytes = b"", *, level: int = 2) -> bytes | None:
        """The status packet, unless Status Return Level (68) is below `level` (0: Ping only,
        1: Ping and reads, 2: every instruction)."""
        if self._table[Addr.STATUS_RETURN_LEVEL] < level:
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
        self._table[Addr.MOVING] = int(abs(sample.velocity) > 0.01)
        self._table.set(Addr.PRESENT_CURRENT, 2, self._present_current())

    def _present_current(self) -> int:
        """The motor's effort (a fraction of its stall) × Current Limit (38), capped at Goal
        Current (102) in current-based position mode, in current units."""
        current = round(self.motor.effort * self._table.get(Addr.CURRENT_LIMIT))
        if self._table[Addr.OPERATING_MODE] == dxl.OperatingMode.CURRENT_BASED_POSITION:
            cap = abs(int.from_bytes(self._table.raw(Addr.GOAL_CURRENT, 2), "little", signed=True))
            current = max(-cap, min(cap, current))
        return current

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


_ANSWERED_BROADCAST = frozenset({Instruction.PING, Instruction.SYNC_READ, Instruction.BULK_READ})
# Status Return Level (68) at which an instruction is answered (2, every one, for the rest)
_LEVELS: dict[int, int] = {
    Instruction.PING: 0,
    Instruction.READ: 1,
    Instruction.SYNC_READ: 1,
    Instruction.BULK_READ: 1,
}
_CLEAR_MULTI_TURN = bytes([0x01, 0x44, 0x58, 0x4C, 0x22])
_FACTORY_RESET_KEEPS: dict[int, tuple[int, ...]] = {
    0xFF: (),
    0x01: (Addr.ID,),
    0x02: (Addr.ID, Addr.BAUD_RATE),
}


def _u16(data: bytes, offset: int) -> int:
    return data[offset] | data[offset + 1] << 8
