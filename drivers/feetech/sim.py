"""A simulated chain of Feetech STS3215 servos behind a pseudo-terminal, speaking the SCS/STS
protocol byte for byte.

`SimulatedFeetechChain` opens a pty (`os.openpty`) and serves several IDs from a background thread
(a blocking `select` loop on the master side with a stop event); the driver, Feetech's own SDK, or
any SCS/STS tool opens `chain.port` (the pty's slave path) as if it were a USB adapter (the
SO-101's Waveshare/Feetech board). Each servo is a `SimulatedServo` (`drivers.feetech.sim_device`,
re-exported here), an STS3215 unless `models` makes it an SCS0009. Status packets leave after the
Return Delay Time (7), one servo after the other for a Sync Read or a broadcast Ping.

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
from drivers.feetech import protocol as ft
from drivers.feetech.protocol import Instruction, Packet
from drivers.feetech.sim_device import FeetechFaults, SimulatedServo
from drivers.sim.motor import MotorParams, SimulatedMotor

__all__ = ["FeetechFaults", "SimulatedFeetechChain", "SimulatedServo", "run"]

# An STS3215 (12 V, 1:345): ~0.22 s/60° unloaded, i.e. about 4.7 rad/s.
STS3215_MOTOR = MotorParams(max_velocity=4.7, max_acceleration=60.0, counts_per_rev=4096)


class SimulatedFeetechChain:
    """Several simulated STS3215 on one pty, served by a background thread.

    Use as a context manager (or `start()` / `stop()`); `port` is the path to open. Test hooks:
    `device(id)` (its `faults` and `motor`), `inject_garbage`, `disconnect`, `read_table`,
    `write_table` and `power_cycle`. All of them are thread-safe.
    """

    def __init__(
        self,
        ids: Sequence[int] = (1,),
        *,
        clock: Clock = time.monotonic,
        motor_params: MotorParams | None = None,
        initial_positions: Mapping[int, float] | None = None,
        baudrate: int = 1_000_000,
        return_delay_s: float = 0.0005,
        model_wire_time: bool = False,
        seed: int = 0,
        models: Mapping[int, str] | None = None,
    ) -> None:
        if not ids or len(set(ids)) != len(ids) or not all(0 <= i <= ft.MAX_ID for i in ids):
            raise ValueError(f"ids {list(ids)}: need distinct ids in [0, {ft.MAX_ID}]")
        params = motor_params or STS3215_MOTOR
        positions = initial_positions or {}
        self.baudrate = baudrate
        self.model_wire_time = model_wire_time
        self._devices: dict[int, SimulatedServo] = {}
        for n, device_id in enumerate(ids):
            motor_p = dataclasses.replace(params, initial_position=positions.get(device_id, 0.0))
            motor = SimulatedMotor(motor_p, clock, seed=seed + n)
            delay = round(return_delay_s / 2e-6)
            model = (models or {}).get(device_id, "sts3215")
            self._devices[device_id] = SimulatedServo(
                device_id, motor, return_delay=delay, model=model
            )
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
        self._thread = threading.Thread(target=self._serve, name="feetech-sim", daemon=True)
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
    def device(self, device_id: int) -> Iterator[SimulatedServo]:
        """Hold the chain's lock while touching a servo: ``with chain.device(1) as d: ...``."""
        with self._lock:
            yield self._devices[device_id]

    def inject_garbage(self, data: bytes) -> None:
        """Put `data` on the line just before the next reply."""
        with self._lock:
            self._garbage += data

    def read_table(self, device_id: int, address: int, length: int) -> bytes:
        with self.device(device_id) as device:
            return device.read_range(address, length, time.monotonic())

    def write_table(self, device_id: int, address: int, data: bytes) -> None:
        """Write as a Write instruction would (same access rules)."""
        with self.device(device_id) as device:
            device.write_range(address, data, time.monotonic())

    def power_cycle(self, device_id: int) -> None:
        with self.device(device_id) as device:
            device.power_cycle(time.monotonic())

    # -- the serving thread ---------------------------------------------------------------------

    def _serve(self) -> None:
        assert self._fds is not None
        master, slave, wake_r, _ = self._fds
        parser = ft.PacketParser()
        try:
            while not self._stop.is_set():
                ready, _, _ = select.select([master, wake_r], [], [], self._poll_timeout())
                data = os.read(master, 4096) if master in ready else b""
                if data and not self._client_baud_matches(slave):
                    data = b""  # at another baud rate the servos only hear noise
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
        devices = sorted(self._devices.values(), key=lambda d: d.id)
        if packet.id == ft.BROADCAST_ID and packet.code == Instruction.SYNC_READ:
            order = list(packet.params[2:])
            devices.sort(key=lambda d: order.index(d.id) if d.id in order else len(order))
        elif packet.id != ft.BROADCAST_ID:
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
                due += ft.wire_time_s(len(reply), self.baudrate)
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
    return_delay_s: float = 0.0005,
    model_wire_time: bool = True,
    motor_params: MotorParams | None = None,
    initial_positions: Mapping[int, float] | None = None,
    stop: threading.Event | None = None,
    out: TextIO | None = None,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve a simulated chain until `stop` is set (or Ctrl-C); for ``armd sim-device feetech``.

    Once the chain is ready, `on_ready(port)` runs; by default it prints the pty path (one line,
    flushed) on `out`. With `link`, also creates a symlink at that path (replacing an existing
    symlink, never a regular file) and removes it on exit. Point the `feetech` driver at it with
    the same baud rate. `motor_params` (default an STS3215's) and `initial_positions` (rad at
    the shaft, by id; default 0) shape the motors.
    """

    def print_port(port: str) -> None:
        print(port, file=out or sys.stdout, flush=True)

    with SimulatedFeetechChain(
        ids, baudrate=baudrate, return_delay_s=return_delay_s, model_wire_time=model_wire_time,
        motor_params=motor_params, initial_positions=initial_positions,
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
