"""A simulated chain of Dynamixel X-series devices behind a pseudo-terminal, speaking Protocol 2.0.

`SimulatedDynamixelChain` opens a pty (`os.openpty`) and serves several IDs from a background thread
(a blocking `select` loop on the master side with a stop event); the driver, or any Protocol 2.0
tool, opens `chain.port` (the pty's slave path) as if it were a U2D2 adapter. Each device is a
`SimulatedMotor` behind a byte-addressed X-series control table (XM430 layout, addresses 0-255,
with the access rules of the real device): a `SimulatedDynamixel` (`drivers.dynamixel.sim_device`,
re-exported here) that serves every Protocol 2.0 instruction of the X series, latches hardware
errors and honours its Bus Watchdog. Status packets leave after the Return Delay Time (9), one
device after the other for a Sync Read or Bulk Read (in the order the packet lists them) and a
broadcast Ping (in ID order). A device hears only the baud rate its Baud Rate (8) selects.

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
from types import TracebackType
from typing import Self, TextIO

from drivers.base import Clock
from drivers.dynamixel import protocol as dxl
from drivers.dynamixel.protocol import Instruction, Packet
from drivers.dynamixel.sim_device import DynamixelFaults, SimulatedDynamixel
from drivers.dynamixel.table import return_delay_units
from drivers.sim.motor import MotorParams, SimulatedMotor

__all__ = ["DynamixelFaults", "SimulatedDynamixel", "SimulatedDynamixelChain", "run"]


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
        baud_index = dxl.baud_rate_index(baudrate)  # raises ValueError
        self.baudrate = baudrate
        self.model_wire_time = model_wire_time
        self._devices: dict[int, SimulatedDynamixel] = {}
        for n, device_id in enumerate(ids):
            motor_p = dataclasses.replace(params, initial_position=positions.get(device_id, 0.0))
            motor = SimulatedMotor(motor_p, clock, seed=seed + n)
            device = SimulatedDynamixel(
                device_id, motor, model_number=model_number,
                return_delay=return_delay_units(return_delay_s), baud_rate=baud_index,
                reboot_s=reboot_s,
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
        parser = dxl.PacketParser(keep_bad_crc=True)
        try:
            while not self._stop.is_set():
                ready, _, _ = select.select([master, wake_r], [], [], self._poll_timeout())
                data = os.read(master, 4096) if master in ready else b""
                rate = self._client_baudrate(slave) if data else None
                now = time.monotonic()
                with self._lock:
                    for packet in parser.feed(data):
                        self._dispatch(packet, now, rate)
                    for device in self._devices.values():
                        device.tick(now)
                    self._send_due(master, now)
        except OSError:
            pass  # the pty went away; nothing left to serve
        finally:
            os.close(master)

    @staticmethod
    def _client_baudrate(slave: int) -> int | None:
        """The baud rate the client configured, bps; None when termios has no name for it."""
        speed = termios.tcgetattr(slave)[5]
        for rate in dxl.BAUD_RATES.values():
            if getattr(termios, f"B{rate}", None) == speed:
                return rate
        return None

    def _poll_timeout(self) -> float:
        with self._lock:
            due = self._outbox[0][0] - time.monotonic() if self._outbox else 0.005
        return min(max(due, 0.0), 0.005)

    def _dispatch(self, packet: Packet, now: float, client_baudrate: int | None) -> None:
        """Hand `packet` to the devices it is for, and queue their replies one after the other.
        At another baud rate than its own a device hears only noise (unknown rates pass)."""
        if packet.is_status:
            return
        devices = sorted(
            (d for d in self._devices.values() if client_baudrate in (None, d.baudrate)),
            key=lambda d: d.id,
        )
        if packet.id != dxl.BROADCAST_ID:
            devices = [d for d in devices if d.id == packet.id]
        elif packet.instruction in _ORDER_OF_REPLIES:
            order = list(_ORDER_OF_REPLIES[packet.instruction](packet.params))
            devices.sort(key=lambda d: order.index(d.id) if d.id in order else len(order))
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


# Who answers first: the order in which a Sync Read or a Bulk Read lists the IDs.
_ORDER_OF_REPLIES: dict[int, Callable[[bytes], bytes]] = {
    Instruction.SYNC_READ: lambda params: params[4:],
    Instruction.BULK_READ: lambda params: params[0::5],
}


def run(
    ids: Sequence[int] = (1, 2, 3, 4, 5, 6),
    baudrate: int = 1_000_000,
    *,
    link: str | None = None,
    model_number: int = 1020,
    return_delay_s: float = 0.0005,
    model_wire_time: bool = True,
    motor_params: MotorParams | None = None,
    initial_positions: Mapping[int, float] | None = None,
    stop: threading.Event | None = None,
    out: TextIO | None = None,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve a simulated chain until `stop` is set (or Ctrl-C); for ``armd sim-device dynamixel``.

    Once the chain is ready, `on_ready(port)` runs; by default it prints the pty path (one line,
    flushed) on `out`. With `link`, also creates a symlink at that path (replacing an existing
    symlink, never a regular file) and removes it on exit. Point the `dynamixel` driver at it
    with the same baud rate; its defaults work (on a pty its reply margin is 50 ms: this process
    is scheduled like any other). Raises ValueError for a baud rate the X series does not offer.
    """

    def print_port(port: str) -> None:
        print(port, file=out or sys.stdout, flush=True)

    with SimulatedDynamixelChain(
        ids, baudrate=baudrate, model_number=model_number, return_delay_s=return_delay_s,
        model_wire_time=model_wire_time, motor_params=motor_params,
        initial_positions=initial_positions,
    ) as chain:  # fmt: skip
        if link is not None:
            if os.path.islink(link):
                os.unlink(link)
            os.symlink(chain.port, link)
        (on_ready or print_port)(chain.port)
        try:
            (stop or threading.Event()).wait()
        except KeyboardInterrupt:
            pass
        finally:
            if link is not None and os.path.islink(link):
                os.unlink(link)
