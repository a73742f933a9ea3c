"""Outbound MQTT messages, from the daemon's calls to the broker: goal statuses, telemetry and the
fault, each kept as its topic needs between connections.

- ``goal/status`` (QoS 1): every status in order, in a bounded queue from which a status is
  removed only once the broker acknowledged it, so that the ones queued or in flight while the
  broker is away are sent after reconnection (at least once: a status in flight when the
  connection broke may arrive twice); when the queue is full the oldest is dropped;
- ``state`` (QoS 0): the latest telemetry only, a one-slot mailbox (older values are overwritten,
  never queued);
- ``fault`` (QoS 1, retained): the latest value wins, and it is republished on every connection.

The daemon's side (`publish_status`, `publish_telemetry`, `set_fault`) is synchronous and never
blocks; the pumps run in the bridge's task group, one connection at a time (`armd.api.bridge`).
"""

from __future__ import annotations

import asyncio
import collections
import itertools
from collections.abc import Callable

from armd.api.contract import (
    FAULT,
    GOAL_STATUS,
    STATE,
    encode,
    fault_json,
    status_json,
    telemetry_json,
)
from armd.api.session import MqttSession
from armd.link.messages import Fault, StatusUpdate, Telemetry

__all__ = ["Outbound"]

_STATUS_BATCH = 20  # QoS 1 statuses in flight at once (paho's default inflight window)
Warn = Callable[..., None]  # (key, message, *args): a rate-limited warning


class Outbound:
    """The statuses, telemetry and fault waiting for the broker (see the module).

    `warn(key, message, *args)` reports a dropped status or unsendable telemetry, rate-limited
    by `key`.
    """

    def __init__(self, status_queue_max: int, warn: Warn) -> None:
        self._status_queue_max = status_queue_max
        self._warn = warn
        # goal/status: (sequence number, update); removed only once acknowledged
        self._statuses: collections.deque[tuple[int, StatusUpdate]] = collections.deque()
        self._status_seq = itertools.count()
        self._statuses_ready = asyncio.Event()
        self.dropped_statuses = 0  # dropped because the queue was full
        self._handed_over = -1  # the last status sequence number passed to paho's publish
        self._telemetry: Telemetry | None = None
        self._telemetry_ready = asyncio.Event()
        self._fault: Fault | None = None
        self._fault_version = 0
        self._fault_published = -1
        self._fault_ready = asyncio.Event()

    # -- the daemon's side ------------------------------------------------------------------

    @property
    def pending_statuses(self) -> int:
        """Statuses not yet acknowledged by the broker."""
        return len(self._statuses)

    def publish_status(self, update: StatusUpdate) -> None:
        """Queue a ``goal/status`` message; when the queue is full the oldest is dropped."""
        if len(self._statuses) >= self._status_queue_max:
            self._statuses.popleft()
            self.dropped_statuses += 1
            self._warn(
                "status-drop",
                "goal/status queue full (%d): dropped the oldest status (%d dropped so far)",
                self._status_queue_max,
                self.dropped_statuses,
            )
        self._statuses.append((next(self._status_seq), update))
        self._statuses_ready.set()

    def publish_telemetry(self, telemetry: Telemetry) -> None:
        """Offer the latest ``state``; replaces any value not yet sent."""
        self._telemetry = telemetry
        self._telemetry_ready.set()

    def set_fault(self, fault: Fault | None) -> None:
        """The active fault (None: cleared), retained on ``fault`` and republished on reconnect."""
        if fault != self._fault:
            self._fault = fault
            self._fault_version += 1
            self._fault_ready.set()

    # -- one connection ---------------------------------------------------------------------

    def new_connection(self) -> None:
        """The statuses handed to an earlier connection are sent again."""
        self._handed_over = -1

    async def flush(self, session: MqttSession) -> None:
        """Send what is left before a clean disconnect: the queued statuses, then the fault.

        Statuses the cancelled pump already handed to paho are written before the DISCONNECT
        that ends the goodbye: sending them again would duplicate them."""
        while self._statuses and self._statuses[0][0] <= self._handed_over:
            self._statuses.popleft()
        while self._statuses:
            await self._publish_status_batch(session)
        await self.publish_fault(session, force=False)

    async def pump_statuses(self, session: MqttSession) -> None:
        while True:
            while not self._statuses:
                self._statuses_ready.clear()
                await self._statuses_ready.wait()
            await self._publish_status_batch(session)

    async def _publish_status_batch(self, session: MqttSession) -> None:
        """Publish up to `_STATUS_BATCH` statuses from the head of the queue concurrently (paho
        writes them in call order) and drop the acknowledged prefix; raise the first failure."""
        batch = list(itertools.islice(self._statuses, _STATUS_BATCH))
        results = await asyncio.gather(
            *(self._publish_status(session, seq, update) for seq, update in batch),
            return_exceptions=True,
        )
        acked = -1
        for (seq, _), result in zip(batch, results, strict=True):
            if isinstance(result, BaseException):
                raise result
            acked = seq
        while self._statuses and self._statuses[0][0] <= acked:
            self._statuses.popleft()

    async def _publish_status(self, session: MqttSession, seq: int, update: StatusUpdate) -> None:
        # `MqttSession.publish` hands the message to paho before its first await.
        self._handed_over = max(self._handed_over, seq)
        payload = encode(status_json(update))
        await session.publish(GOAL_STATUS, payload)

    async def pump_telemetry(self, session: MqttSession) -> None:
        while True:
            await self._telemetry_ready.wait()
            self._telemetry_ready.clear()
            telemetry, self._telemetry = self._telemetry, None
            if telemetry is None:
                continue
            try:
                payload = encode(telemetry_json(telemetry))
            except (TypeError, ValueError) as exc:  # NaN or a non-JSON type: a daemon bug
                self._warn("telemetry", "MQTT: telemetry not serialisable, skipped: %s", exc)
                continue
            await session.publish(STATE, payload)

    async def pump_fault(self, session: MqttSession) -> None:
        while True:
            await self._fault_ready.wait()
            self._fault_ready.clear()
            await self.publish_fault(session, force=False)

    async def publish_fault(self, session: MqttSession, *, force: bool) -> None:
        """Publish the current fault (empty payload: none) unless already published, or always
        when `force` (a new connection: the broker may have lost the retained message)."""
        version = self._fault_version
        if version == self._fault_published and not force:
            return
        fault = self._fault
        payload = encode(fault_json(fault)) if fault is not None else b""
        await session.publish(FAULT, payload)
        self._fault_published = version
