"""A simulated chain of Dynamixel X-series devices behind a pseudo-terminal, speaking Protocol 2.0.

`SimulatedDynamixelChain` opens a pty (`os.openpty`) and serves several IDs from a background thread
(a blocking `select` loop on the master side with a stop event); the driver, or any Protocol 2.0
tool, opens `chain.port` (the pty's slave path) as if it were a U2D2 adapter. Each device is a
`SimulatedMotor` behind a byte-addressed X-series control table (XM430 layout, addresses 0-255):

- Ping, Read, Write, Reboot, Sync Read and Sync Write; status packets after the Return Delay Time
  (9), one device after the other for a Sync Read; Status Return Level (68) is honoured.
- Access rules as on the real device: writing a read-only or undefined item, or an EEPROM item
  while torque is on, answers Access Error; a partial multi-byte write answers Data Length Error;
  out-of-range values answer Data Range Error; a Goal Position outside the mode's limits answers
  Data Limit Error. Indirect Address/Data 1-28 work (addresses 578-661 are not modelled).
- Goal Position is writable while torque is off, as on the X series: the motor does not move, but
  it drives to that goal when torque is switched on (hence the driver's "goal = present" first).
- Hardware errors (`inject_hardware_error`) latch in Hardware Error Status (70), switch torque off,
  set the Alert bit of every status packet and refuse Torque Enable = 1 (Result Fail) until Reboot.
- Bus Watchdog (98): while torque is on, if no instruction packet reaches the device for longer
  than the set time, the device stops (holds its position; torque stays on, as documented for the
  X series), the item reads -1 and Goal Position writes answer Data Range Error until 0 is written.
- Reboot answers, goes silent for `reboot_s`, then resets the RAM area; like the real encoder, the
  multi-turn count is lost (Present Position restarts within one turn).

Timing uses the wall clock (`time.monotonic`); the motors use the injected `clock`. A pty does not
throttle bytes to the baud rate; with `model_wire_time` the replies are delayed by their wire time.
A client that configured another (standard) baud rate than the chain's is not understood at all.
"""

from __future__ import annotations

import contextlib
import dataclasses
import heapq
import os
import select
import sys
import termios
import threading
import time
import tty
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType, TracebackType
from typing import Self, TextIO

from drivers import dynamixel_protocol as dxl
from drivers.base import Clock
from drivers.dynamixel_protocol import Addr, Instruction, Packet, StatusError
from drivers.sim_motor import MotorParams, SimulatedMotor

__all__ = ["DynamixelFaults", "SimulatedDynamixel", "SimulatedDynamixelChain", "run"]

_TABLE_SIZE = 256
_GOAL_LIMIT_EXTENDED = 1_048_575


# (address, size, power-on value) of the XM430 items the simulation knows, by access class.
_INFO = ((0, 2, 1020), (2, 4, 0), (6, 1, 46))  # read-only, kept in EEPROM
_STATUS = (
    (69, 1, 0), (70, 1, 0), (120, 2, 0), (122, 1, 0), (123, 1, 0), (124, 2, 0), (126, 2, 0),
    (128, 4, 0), (132, 4, 0), (136, 4, 0), (140, 4, 0), (144, 2, 120), (146, 1, 30),
)  # fmt: skip
_EEPROM = (
    (7, 1, 1), (8, 1, 3), (9, 1, 250), (10, 1, 0), (11, 1, 3), (12, 1, 255), (13, 1, 2),
    (20, 4, 0), (24, 4, 10), (31, 1, 80), (32, 2, 160), (34, 2, 95), (36, 2, 885), (38, 2, 1193),
    (40, 4, 32767), (44, 4, 350), (48, 4, 4095), (52, 4, 0), (63, 1, 52),
)  # fmt: skip
_RAM = (
    (64, 1, 0), (65, 1, 0), (68, 1, 2), (76, 2, 1920), (78, 2, 100), (80, 2, 0), (82, 2, 0),
    (84, 2, 800), (88, 2, 0), (90, 2, 0), (98, 1, 0), (100, 2, 0), (102, 2, 0), (104, 4, 0),
    (108, 4, 0), (112, 4, 0), (116, 4, 0),
    *((Addr.INDIRECT_ADDRESS_1 + 2 * k, 2, Addr.INDIRECT_DATA_1 + k) for k in range(28)),
    *((Addr.INDIRECT_DATA_1 + k, 1, 0) for k in range(28)),
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Item:
    address: int
    size: int
    writable: bool
    eeprom: bool
    default: int

    @property
    def signed(self) -> bool:
        return self.size == 4 or self.address == Addr.BUS_WATCHDOG


def _items(model_number: int, return_delay: int) -> tuple[_Item, ...]:
    defaults: dict[int, int] = {
        Addr.MODEL_NUMBER: model_number,
        Addr.RETURN_DELAY_TIME: return_delay,
    }
    classes = (
        (_INFO, False, True),
        (_EEPROM, True, True),
        (_RAM, True, False),
        (_STATUS, False, False),
    )
    return tuple(
        _Item(address, size, writable, eeprom, defaults.get(address, default))
        for table, writable, eeprom in classes
        for address, size, default in table
    )


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
        self._items = _items(model_number, return_delay)
        self._item_at = {a: i for i in self._items for a in range(i.address, i.address + i.size)}
        self._table = bytearray(_TABLE_SIZE)
        for item in self._items:
            self._set(item.address, item.size, item.default)
        self._set(Addr.ID, 1, device_id)
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

    def _get(self, address: int) -> int:
        item = self._item_at[address]
        return int.from_bytes(
            self._table[address : address + item.size], "little", signed=item.signed
        )

    def _set(self, address: int, size: int, value: int) -> None:
        self._table[address : address + size] = value.to_bytes(size, "little", signed=value < 0)

    def _boot(self) -> None:
        """Power-on state of the RAM area; the encoder keeps only the position within one turn."""
        for item in self._items:
            if not item.eeprom:
                self._set(item.address, item.size, item.default)
        self.motor.disable()
        raw = dxl.rad_to_counts(self.motor.sample().position)
        self._count_offset = -(raw - raw % dxl.COUNTS_PER_REV)
        self._set(Addr.GOAL_POSITION, 4, raw + self._count_offset)

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
        return self._status(0, bytes(self._table[0:2] + self._table[6:7]), always=True)

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
        units = self._get(Addr.BUS_WATCHDOG)
        torque_on = self._table[Addr.TORQUE_ENABLE] == 1
        if units > 0 and torque_on and now - self._last_rx > dxl.watchdog_s(units):
            self._set(Addr.BUS_WATCHDOG, 1, dxl.WATCHDOG_ERROR)
            self.motor.command(self.motor.sample().position)

    def inject_hardware_error(self, bits: int) -> None:
        self._table[Addr.HARDWARE_ERROR_STATUS] |= bits
        self._table[Addr.TORQUE_ENABLE] = 0
        self.motor.disable()

    # -- the control table ----------------------------------------------------------------------

    def read_range(self, address: int, length: int) -> tuple[int, bytes]:
        """(error number, data) for reading `length` bytes; indirect data resolves its mapping."""
        if length == 0 or address + length > _TABLE_SIZE:
            return StatusError.ACCESS, b""
        self._refresh()
        out = bytearray()
        for a in range(address, address + length):
            out.append(self._table[self._resolve(a)])
        return StatusError.NONE, bytes(out)

    def _resolve(self, address: int) -> int:
        if Addr.INDIRECT_DATA_1 <= address < Addr.INDIRECT_DATA_1 + 28:
            slot = Addr.INDIRECT_ADDRESS_1 + 2 * (address - Addr.INDIRECT_DATA_1)
            target = self._get(slot)
            return target if target < _TABLE_SIZE else address
        return address

    def _refresh(self) -> None:
        sample = self.motor.sample()
        self._set(Addr.PRESENT_POSITION, 4, dxl.rad_to_counts(sample.position) + self._count_offset)
        self._set(Addr.PRESENT_VELOCITY, 4, dxl.rad_s_to_velocity(sample.velocity))
        self._table[122] = int(abs(sample.velocity) > 0.01)  # Moving

    def write_range(self, address: int, data: bytes) -> int:
        """Validate then apply a write; returns the status error number (0 when done)."""
        if not data or address + len(data) > _TABLE_SIZE:
            return StatusError.ACCESS
        writes = {self._resolve(address + k): b for k, b in enumerate(data)}
        items = sorted({self._item_at.get(a) for a in writes}, key=lambda i: i.address if i else -1)
        if None in items:
            return StatusError.ACCESS
        staged = bytearray(self._table)
        for a, b in writes.items():
            staged[a] = b
        for item in items:
            assert item is not None
            error = self._check(item, staged, writes)
            if error:
                return error
        for item in items:
            assert item is not None
            span = slice(item.address, item.address + item.size)
            self._table[span] = staged[span]
            self._apply(item)
        return StatusError.NONE

    def _check(self, item: _Item, staged: bytearray, writes: Mapping[int, int]) -> int:
        if any(a not in writes for a in range(item.address, item.address + item.size)):
            return StatusError.DATA_LENGTH
        if not item.writable or (item.eeprom and self._table[Addr.TORQUE_ENABLE]):
            return StatusError.ACCESS
        span = staged[item.address : item.address + item.size]
        value = int.from_bytes(span, "little", signed=item.signed)
        if item.address == Addr.TORQUE_ENABLE and value == 1 and self.hardware_error:
            return StatusError.RESULT_FAIL  # only a reboot clears a hardware error
        if item.address == Addr.GOAL_POSITION:
            return self._check_goal(value)
        return StatusError.NONE if _in_range(item.address, value) else StatusError.DATA_RANGE

    def _check_goal(self, value: int) -> int:
        if self._get(Addr.BUS_WATCHDOG) == dxl.WATCHDOG_ERROR:
            return StatusError.DATA_RANGE
        if self._table[Addr.OPERATING_MODE] == dxl.OperatingMode.POSITION:
            low, high = self._get(Addr.MIN_POSITION_LIMIT), self._get(Addr.MAX_POSITION_LIMIT)
        else:
            low, high = -_GOAL_LIMIT_EXTENDED, _GOAL_LIMIT_EXTENDED
        return StatusError.NONE if low <= value <= high else StatusError.DATA_LIMIT

    def _apply(self, item: _Item) -> None:
        torque_on = self._table[Addr.TORQUE_ENABLE] == 1
        goal = self._goal_rad(self._get(Addr.GOAL_POSITION))
        if item.address == Addr.TORQUE_ENABLE:
            if torque_on and not self.motor.enabled:
                self.motor.enable()
                self.motor.command(goal)  # the X series drives to the stored goal
            elif not torque_on:
                self.motor.disable()
        elif item.address == Addr.GOAL_POSITION and torque_on:
            self.motor.command(goal)


_RANGES: Mapping[int, tuple[int, int]] = MappingProxyType(
    {
        Addr.TORQUE_ENABLE: (0, 1),
        Addr.BUS_WATCHDOG: (0, 127),
        Addr.STATUS_RETURN_LEVEL: (0, 2),
        Addr.ID: (0, dxl.MAX_ID),
        Addr.RETURN_DELAY_TIME: (0, 254),
    }
)


def _in_range(address: int, value: int) -> bool:
    if address == Addr.OPERATING_MODE:
        return value in set(dxl.OperatingMode)
    if Addr.INDIRECT_ADDRESS_1 <= address < Addr.INDIRECT_DATA_1:
        return 64 <= value <= 661
    low, high = _RANGES.get(address, (-(2**31), 2**31 - 1))
    return low <= value <= high


def _u16(data: bytes, offset: int) -> int:
    return data[offset] | data[offset + 1] << 8


class SimulatedDynamixelChain:
    """Several simulated devices on one pty, served by a background thread.

    Use as a context manager (or `start()` / `stop()`); `port` is the path to open. Test hooks:
    `device(id)` (its `faults` and `motor`), `inject_hardware_error`, `inject_garbage`,
    `disconnect`, `read_table` and `write_table`. All of them are thread-safe.
    """

    def __init__(
        self,
        ids: Sequence[int] = (1,),
        *,
        clock: Clock = time.monotonic,
        motor_params: MotorParams | None = None,
        initial_positions: Mapping[int, float] | None = None,
        baudrate: int = 1_000_000,
        model_number: int = 1020,
        return_delay_s: float = 0.0005,
        reboot_s: float = 0.05,
        model_wire_time: bool = False,
        seed: int = 0,
    ) -> None:
        if not ids or len(set(ids)) != len(ids) or not all(0 <= i <= dxl.MAX_ID for i in ids):
            raise ValueError(f"ids {list(ids)}: need distinct ids in [0, {dxl.MAX_ID}]")
        params = motor_params or MotorParams(counts_per_rev=dxl.COUNTS_PER_REV)
        positions = initial_positions or {}
        self.baudrate = baudrate
        self.model_wire_time = model_wire_time
        self._devices: dict[int, SimulatedDynamixel] = {}
        for n, device_id in enumerate(ids):
            motor_p = dataclasses.replace(params, initial_position=positions.get(device_id, 0.0))
            motor = SimulatedMotor(motor_p, clock, seed=seed + n)
            device = SimulatedDynamixel(
                device_id, motor, model_number=model_number,
                return_delay=round(return_delay_s / 2e-6), reboot_s=reboot_s,
            )  # fmt: skip
            self._devices[device_id] = device
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._outbox: list[tuple[float, int, bytes]] = []
        self._sequence = 0
        self._garbage = b""
        self._thread: threading.Thread | None = None
        self._fds: tuple[int, int, int, int] | None = None  # master, slave, wake_r, wake_w
        self._port = ""

    @property
    def port(self) -> str:
        """The pty slave path to open (valid while started)."""
        if not self._port:
            raise RuntimeError("simulated chain not started")
        return self._port

    def start(self) -> None:
        if self._thread is not None:
            return
        master, slave = os.openpty()
        tty.setraw(slave)  # no echo, no line discipline until the client configures the port
        os.set_blocking(master, False)
        wake_r, wake_w = os.pipe()
        self._fds = (master, slave, wake_r, wake_w)
        self._port = os.ttyname(slave)
        self._stop.clear()
        self._thread = threading.Thread(target=self._serve, name="dynamixel-sim", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and close the pty. Idempotent."""
        if self._thread is None or self._fds is None:
            return
        self._stop.set()
        os.write(self._fds[3], b"x")
        self._thread.join(timeout=5.0)
        for fd in self._fds[1:]:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._thread = None
        self._fds = None
        self._port = ""

    def disconnect(self) -> None:
        """Simulate unplugging the adapter: the master side closes, the port hangs up."""
        self.stop()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- test hooks -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def device(self, device_id: int) -> Iterator[SimulatedDynamixel]:
        """Hold the chain's lock while touching a device: ``with chain.device(1) as d: ...``."""
        with self._lock:
            yield self._devices[device_id]

    def inject_hardware_error(self, device_id: int, bits: int) -> None:
        with self.device(device_id) as device:
            device.inject_hardware_error(bits)

    def inject_garbage(self, data: bytes) -> None:
        """Put `data` on the line just before the next reply."""
        with self._lock:
            self._garbage += data

    def read_table(self, device_id: int, address: int, length: int) -> bytes:
        with self.device(device_id) as device:
            return device.read_range(address, length)[1]

    def write_table(self, device_id: int, address: int, data: bytes) -> int:
        """Write as a Write instruction would; returns the status error number."""
        with self.device(device_id) as device:
            return device.write_range(address, data)

    # -- the serving thread ---------------------------------------------------------------------

    def _serve(self) -> None:
        assert self._fds is not None
        master, slave, wake_r, _ = self._fds
        parser = dxl.PacketParser()
        try:
            while not self._stop.is_set():
                ready, _, _ = select.select([master, wake_r], [], [], self._poll_timeout())
                data = os.read(master, 4096) if master in ready else b""
                if data and not self._client_baud_matches(slave):
                    data = b""  # at another baud rate the devices only hear noise
                now = time.monotonic()
                with self._lock:
                    for packet in parser.feed(data):
                        self._dispatch(packet, now)
                    for device in self._devices.values():
                        device.tick(now)
                    self._send_due(master, now)
        except OSError:
            pass  # the pty went away; nothing left to serve
        finally:
            os.close(master)

    def _client_baud_matches(self, slave: int) -> bool:
        """Whether the client configured the chain's baud rate (unknown rates are accepted)."""
        expected = getattr(termios, f"B{self.baudrate}", None)
        return expected is None or termios.tcgetattr(slave)[5] == expected

    def _poll_timeout(self) -> float:
        with self._lock:
            due = self._outbox[0][0] - time.monotonic() if self._outbox else 0.005
        return min(max(due, 0.0), 0.005)

    def _dispatch(self, packet: Packet, now: float) -> None:
        if packet.is_status:
            return
        devices = sorted(self._devices.values(), key=lambda d: d.id)
        if packet.instruction == Instruction.SYNC_READ:
            order = list(packet.params[4:])
            devices.sort(key=lambda d: order.index(d.id) if d.id in order else len(order))
        elif packet.id != dxl.BROADCAST_ID:
            devices = [d for d in devices if d.id == packet.id]
        due = now
        for device in devices:
            reply = device.handle(packet, now)
            if reply is None:
                continue
            faults = device.faults
            due += device.return_delay_s + faults.extra_delay_s
            if faults.silent or faults.drop_next > 0:
                faults.drop_next = max(0, faults.drop_next - 1)
                continue
            if faults.corrupt_next > 0:
                faults.corrupt_next -= 1
                reply = reply[:-1] + bytes([reply[-1] ^ 0x5A])
            reply, self._garbage = self._garbage + reply, b""
            if self.model_wire_time:
                due += dxl.wire_time_s(len(reply), self.baudrate)
            self._sequence += 1
            heapq.heappush(self._outbox, (due, self._sequence, reply))

    def _send_due(self, master: int, now: float) -> None:
        while self._outbox and self._outbox[0][0] <= now:
            _, _, reply = heapq.heappop(self._outbox)
            with contextlib.suppress(BlockingIOError):  # nobody reads: the line drops it
                os.write(master, reply)


def run(
    ids: Sequence[int] = (1, 2, 3, 4, 5, 6),
    baudrate: int = 1_000_000,
    *,
    link: str | None = None,
    model_number: int = 1020,
    return_delay_s: float = 0.0005,
    model_wire_time: bool = True,
    stop: threading.Event | None = None,
    out: TextIO | None = None,
) -> None:
    """Serve a simulated chain until `stop` is set (or Ctrl-C); for ``armd sim-device dynamixel``.

    Prints the pty path (one line, flushed) once the chain is ready; with `link`, also creates a
    symlink at that path (replacing an existing symlink, never a regular file) and removes it on
    exit. Point the `dynamixel` driver at it with the same baud rate; as a Python process serving a
    pty has millisecond scheduling jitter, give the driver ``reply_margin_s: 0.01`` or more.
    """
    with SimulatedDynamixelChain(
        ids, baudrate=baudrate, model_number=model_number, return_delay_s=return_delay_s,
        model_wire_time=model_wire_time,
    ) as chain:  # fmt: skip
        if link is not None:
            if os.path.islink(link):
                os.unlink(link)
            os.symlink(chain.port, link)
        print(chain.port, file=out or sys.stdout, flush=True)
        try:
            (stop or threading.Event()).wait()
        except KeyboardInterrupt:
            pass
        finally:
            if link is not None and os.path.islink(link):
                os.unlink(link)
