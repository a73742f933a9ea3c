"""The cia402 driver's side of the bus: a canopen `Network` on an open python-can bus, with a gate
in front of canopen's listener and a way for coroutines to wait for what the receiver stores.

canopen receives on its notifier thread and calls its consumers (SDO client, TPDO maps, NMT
heartbeat, EMCY) there. The gate passes on only frames from the COB-IDs a drive sends (heartbeat,
EMCY, SDO answer, its TPDOs): the driver's own frames, which ``udp_multicast`` loops back (NMT,
SYNC, RPDO, SDO requests), and other stations' traffic are dropped unseen; a frame of the wrong
length is counted (`on_malformed`) and never reaches canopen. Sends never block: a full transmit
queue is an error at once instead of a stalled control tick.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
from collections.abc import Callable

import can
import canopen
from canopen.emcy import EmcyError
from canopen.network import MessageListener
from canopen.pdo import PdoMap

from drivers.base import Clock
from drivers.cia402.drive import DriveRecord
from drivers.cia402.objects import COB_EMCY, COB_HEARTBEAT, COB_SDO_TX

__all__ = ["CanOpenLink"]

_NOTIFIER_POLL_S = 0.02  # s: how long closing may wait for canopen's receiver thread
MalformedHandler = Callable[[DriveRecord, str], None]


class _Network(canopen.Network):
    """canopen's network, sending without blocking."""

    def send_message(self, can_id: int, data: bytes, remote: bool = False) -> None:
        message = can.Message(arbitration_id=can_id, data=bytes(data), is_extended_id=False)
        bus = self.bus
        if bus is None:
            raise can.CanError("not connected")
        with self.send_lock:
            bus.send(message, timeout=0.0)


class _Gate(MessageListener):
    """In place of canopen's listener: the link checks every frame before canopen sees it."""

    def __init__(self, link: CanOpenLink) -> None:
        super().__init__(link.network)
        self._link = link

    def on_message_received(self, msg: can.Message) -> None:
        self._link.receive(msg)


class CanOpenLink:
    """An open bus as a canopen network. `lock` guards what the consumers store; `start()` on the
    event loop that will `wait`; `close()` stops receiving and shuts the bus down."""

    def __init__(
        self, bus: can.BusABC, lock: threading.Lock, clock: Clock, on_malformed: MalformedHandler
    ) -> None:
        self.network = _Network(bus)
        self._clock = clock
        self.network.NOTIFIER_CYCLE = _NOTIFIER_POLL_S
        self.network.listeners = [_Gate(self)]
        self._lock = lock
        self._on_malformed = on_malformed
        self._expected: dict[int, tuple[DriveRecord, int]] = {}  # COB-ID → (drive, length)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake = asyncio.Event()
        self._waiters = 0

    def attach(self, record: DriveRecord, sdo_timeout_s: float) -> None:
        """Add the drive's node; its heartbeats and EMCYs are stored in the record (with the
        clock's time), and its SDO answers, heartbeats and EMCYs let through."""
        node, i = record.node, record.node_id
        node.sdo.RESPONSE_TIMEOUT = sdo_timeout_s
        self.network.add_node(node)

        def on_heartbeat(state: int) -> None:
            now = self._clock()
            with self._lock:
                record.on_heartbeat(state, now)

        def on_emcy(error: EmcyError) -> None:
            with self._lock:
                record.on_emcy(error)

        node.nmt.add_heartbeat_callback(on_heartbeat)
        node.emcy.add_callback(on_emcy)
        for cob_id, length in ((COB_HEARTBEAT + i, 1), (COB_EMCY + i, 8), (COB_SDO_TX + i, 8)):
            self.expect(cob_id, record, length)

    def follow_tpdos(self, record: DriveRecord) -> None:
        """Once the drive's TPDOs are mapped: let them through (at their length) into the
        record."""

        def on_tpdo(pdo: PdoMap) -> None:
            now = self._clock()
            with self._lock:
                if pdo is record.status_pdo:
                    record.on_status(now)
                else:
                    record.on_motion(now)

        for pdo in record.node.tpdo.values():
            if pdo.enabled:
                self.expect(pdo.cob_id, record, math.ceil(pdo.length / 8))
                pdo.add_callback(on_tpdo)

    def expect(self, cob_id: int, record: DriveRecord, length: int) -> None:
        """Pass on frames from `cob_id` (a drive's) when they carry `length` bytes."""
        self._expected[cob_id] = (record, length)

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.network.connect()  # canopen's notifier thread, on the bus already open

    async def close(self) -> None:
        await asyncio.to_thread(self.network.disconnect)

    def sync(self) -> None:
        """One SYNC (canopen's producer, without the counter). Raises can.CanError, OSError."""
        self.network.sync.transmit()

    def send(self, can_id: int, data: bytes) -> None:
        """Raises can.CanError, OSError."""
        self.network.send_message(can_id, data)

    def receive(self, msg: can.Message) -> None:
        """On the notifier thread: check, hand to canopen, wake the waiters."""
        if msg.is_error_frame or msg.is_remote_frame or msg.is_extended_id:
            return
        expected = self._expected.get(msg.arbitration_id)
        if expected is None:
            return  # not a drive's frame: the driver's own looped back, or other traffic
        record, length = expected
        data = bytes(msg.data or b"")
        if len(data) != length:
            self._on_malformed(
                record,
                f"{record.label}: frame 0x{msg.arbitration_id:03X} of {len(data)} bytes, "
                f"expected {length}",
            )
            return
        try:
            self.network.notify(msg.arbitration_id, bytearray(data), msg.timestamp)
        except Exception as exc:  # the receiver thread must live on: count, keep receiving
            self._on_malformed(record, f"{record.label}: frame 0x{msg.arbitration_id:03X}: {exc}")
        self._wake_waiters()

    async def wait(self, done: Callable[[], bool], timeout_s: float) -> bool:
        """Wait until `done()` (evaluated under the lock) holds, re-checked after every frame;
        False after `timeout_s`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        self._waiters += 1
        try:
            while True:
                self._wake.clear()
                with self._lock:
                    if done():
                        return True
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return False
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(remaining):
                        await self._wake.wait()
        finally:
            self._waiters -= 1

    def _wake_waiters(self) -> None:
        loop = self._loop
        if self._waiters and loop is not None:
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
                loop.call_soon_threadsafe(self._wake.set)
