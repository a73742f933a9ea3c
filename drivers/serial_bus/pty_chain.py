"""A simulated half-duplex servo bus behind a pseudo-terminal: what every simulated chain of serial
servos shares (`drivers.dynamixel.sim`, `drivers.feetech.sim`).

`PtyChain` opens a pty (`os.openpty`) and serves its devices from a background thread (a blocking
`select` loop on the master side, woken by a pipe to stop); a driver, or the manufacturer's own
SDK, opens `port` (the pty's slave path) as if it were a USB adapter. A subclass parses what the
client writes with its protocol's parser (`_new_parser`) and decides which devices a packet is
for, in which order they answer (`_receive`); `_answer` queues their replies, each after its
device's return delay (and its wire time with `model_wire_time`: a pty does not throttle bytes to
the baud rate), applying the injected link faults every simulated device has (`LinkFaults`).
Each device `tick`s after every wake-up. Timing uses the wall clock (`time.monotonic`); the
motors use their own clock (`simulated_motors` builds them).
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import heapq
import os
import select
import sys
import threading
import time
import tty
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Generic, Protocol, Self, TextIO, TypeVar

from drivers.base import Clock
from drivers.serial_bus.framing import FrameParser, wire_time_s
from drivers.sim.motor import MotorParams, SimulatedMotor

__all__ = [
    "LinkFaults",
    "PtyChain",
    "SimulatedSerialDevice",
    "in_reply_order",
    "serve_until_stopped",
    "simulated_motors",
]


@dataclass
class LinkFaults:
    """Injected communication faults of one device; tests set these fields directly.

    silent: the device never answers. drop_next: it ignores the next n replies it would send.
    corrupt_next: the next n replies go out with a broken checksum (CRC). extra_delay_s: added to
    every reply.
    """

    silent: bool = False
    drop_next: int = 0
    corrupt_next: int = 0
    extra_delay_s: float = 0.0


class SimulatedSerialDevice(Protocol):
    """What the chain needs of a simulated device."""

    @property
    def id(self) -> int: ...
    @property
    def return_delay_s(self) -> float: ...
    @property
    def faults(self) -> LinkFaults: ...
    def tick(self, now: float) -> None: ...


DeviceT = TypeVar("DeviceT", bound=SimulatedSerialDevice)
PacketT = TypeVar("PacketT")

_POLL_S = 0.005  # the serving thread wakes at least this often (device ticks, due replies)


class PtyChain(abc.ABC, Generic[DeviceT, PacketT]):
    """Devices on one pty, served by a background thread (see the module docstring).

    Use as a context manager (or `start()` / `stop()`). Test hooks, all thread-safe: `device(id)`
    (its `faults` and `motor`), `inject_garbage`, `disconnect`.
    """

    thread_name = "pty-chain"

    def __init__(
        self, devices: Mapping[int, DeviceT], *, baudrate: int, model_wire_time: bool
    ) -> None:
        self.baudrate = baudrate
        self.model_wire_time = model_wire_time
        self._devices: dict[int, DeviceT] = dict(devices)
        self._parser = self._new_parser()
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
        self._parser = self._new_parser()  # a new connection starts with an empty buffer
        self._thread = threading.Thread(target=self._serve, name=self.thread_name, daemon=True)
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

    @contextlib.contextmanager
    def device(self, device_id: int) -> Iterator[DeviceT]:
        """Hold the chain's lock while touching a device: ``with chain.device(1) as d: ...``."""
        with self._lock:
            yield self._devices[device_id]

    def inject_garbage(self, data: bytes) -> None:
        """Put `data` on the line just before the next reply."""
        with self._lock:
            self._garbage += data

    # -- what a protocol adds ---------------------------------------------------------------------

    @abc.abstractmethod
    def _new_parser(self) -> FrameParser[PacketT]:
        """The protocol's parser of what the client writes."""

    @abc.abstractmethod
    def _receive(self, data: bytes, slave: int, now: float) -> None:
        """Bytes the client wrote (possibly none: a periodic wake-up), under the lock: parse them
        and `_answer` each packet. `slave` is the pty's client side (its termios settings)."""

    def _tick(self, now: float) -> None:
        """Under the lock, after `_receive`: advance the devices' own state."""
        for device in self._devices.values():
            device.tick(now)

    def _wire_time_s(self, length: int) -> float:
        """How long `length` bytes take on the wire at this chain's baud rate."""
        return wire_time_s(length, self.baudrate)

    # -- replies ----------------------------------------------------------------------------------

    def _answer(self, replies: Iterable[tuple[DeviceT, bytes | None]], now: float) -> None:
        """Queue the devices' replies to one packet, one after the other in the given order, each
        after its return delay, with the injected link faults."""
        due = now
        for device, answer in replies:
            if answer is None:
                continue
            reply, faults = answer, device.faults
            due += device.return_delay_s + faults.extra_delay_s
            if faults.silent or faults.drop_next > 0:
                faults.drop_next = max(0, faults.drop_next - 1)
                continue
            if faults.corrupt_next > 0:
                faults.corrupt_next -= 1
                reply = reply[:-1] + bytes([reply[-1] ^ 0x5A])
            reply, self._garbage = self._garbage + reply, b""
            if self.model_wire_time:
                due += self._wire_time_s(len(reply))
            self._sequence += 1
            heapq.heappush(self._outbox, (due, self._sequence, reply))

    # -- the serving thread -----------------------------------------------------------------------

    def _serve(self) -> None:
        assert self._fds is not None
        master, slave, wake_r, _ = self._fds
        try:
            while not self._stop.is_set():
                ready, _, _ = select.select([master, wake_r], [], [], self._poll_timeout())
                data = os.read(master, 4096) if master in ready else b""
                now = time.monotonic()
                with self._lock:
                    self._receive(data, slave, now)
                    self._tick(now)
                    self._send_due(master, now)
        except OSError:
            pass  # the pty went away; nothing left to serve
        finally:
            os.close(master)

    def _poll_timeout(self) -> float:
        with self._lock:
            due = self._outbox[0][0] - time.monotonic() if self._outbox else _POLL_S
        return min(max(due, 0.0), _POLL_S)

    def _send_due(self, master: int, now: float) -> None:
        while self._outbox and self._outbox[0][0] <= now:
            _, _, reply = heapq.heappop(self._outbox)
            with contextlib.suppress(BlockingIOError):  # nobody reads: the line drops it
                os.write(master, reply)


def serve_until_stopped(
    chain: PtyChain[Any, Any],
    *,
    link: str | None,
    stop: threading.Event | None,
    on_ready: Callable[[str], None] | None = None,
    out: TextIO | None = None,
) -> None:
    """Serve a started `chain` until `stop` is set (or Ctrl-C), for ``armd sim-device``: with
    `link`, a symlink to the pty there (replacing a symlink, never a regular file), removed on
    exit; `on_ready(port)` once it serves, by default printing the pty path (one line, flushed)
    on `out` (stdout)."""

    def print_port(port: str) -> None:
        print(port, file=out or sys.stdout, flush=True)

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


def simulated_motors(
    ids: Sequence[int],
    max_id: int,
    params: MotorParams,
    initial_positions: Mapping[int, float] | None,
    clock: Clock,
    seed: int,
) -> dict[int, SimulatedMotor]:
    """A motor for each of `ids` (distinct, in [0, `max_id`]; else ValueError) at its initial
    position (rad, default 0), seeded `seed`, `seed + 1`, ... in the order of `ids`."""
    if not ids or len(set(ids)) != len(ids) or not all(0 <= i <= max_id for i in ids):
        raise ValueError(f"ids {list(ids)}: need distinct ids in [0, {max_id}]")
    positions = initial_positions or {}
    return {
        device_id: SimulatedMotor(
            dataclasses.replace(params, initial_position=positions.get(device_id, 0.0)),
            clock,
            seed=seed + n,
        )
        for n, device_id in enumerate(ids)
    }


def in_reply_order(devices: list[DeviceT], order: Sequence[int]) -> None:
    """Sort `devices` in place as `order` lists their ids (who answers first); the others last."""
    devices.sort(key=lambda d: order.index(d.id) if d.id in order else len(order))
