"""One MQTT connection, and everything armd needs to know about aiomqtt, behind one class.

`MqttSession` wraps one `aiomqtt.Client` for the lifetime of one connection: `connect`, the
topic-table-aware `publish`/`subscribe`/`unsubscribe`, `closed` (returns nothing, raises
`aiomqtt.MqttError` when the connection is lost) and `close`. The bridge (`armd.mqtt`) never
touches aiomqtt itself. Three behaviours of aiomqtt 2.x that armd depends on are handled here,
each for a stated reason:

- **Inbound messages are handled as paho reads them.** aiomqtt puts each message into a queue of
  the `queue_type` it was given; armd's queue hands the message to `on_message` instead of
  storing it, before paho sends the QoS 1 PUBACK. A flood is therefore paced by TCP (the
  broker's inflight window) rather than growing a queue, and no message is silently dropped
  (aiomqtt drops when a bounded queue is full, and a dropped goal would never get its status).
- **Losing the connection is noticed by iterating `client.messages`**, which is how aiomqtt
  reports it (the queue is always empty, so the loop only ever ends by raising).
- **Connecting is not cancelled half-way**: cancelling `Client.__aenter__` while paho connects
  leaves paho's socket registered on the event loop; `connect` lets the attempt finish within the
  shutdown budget and then closes it.

`raise_if_cancelled` works around Python 3.11's `asyncio.wait_for` (which aiomqtt uses to wait
for acknowledgements) swallowing a cancellation that arrives as the awaited call completes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from typing import Any

import aiomqtt
from aiomqtt.exceptions import MqttConnectError

from armd.broker import MqttSettings, connection_options
from armd.contract import AVAILABILITY, OFFLINE, Topic, Topics

__all__ = [
    "Message",
    "MqttError",
    "MqttSession",
    "connect_failure",
    "describe",
    "raise_if_cancelled",
]

MqttError = aiomqtt.MqttError
Message = aiomqtt.Message
AUTH_REASON_CODES = {4, 5, 134, 135}  # bad username or password / not authorised (3.1.1, 5)
_INFLIGHT = 20  # QoS 1 messages in flight at once (paho's default inflight window)


class MqttSession:
    """One connection to the broker of `settings`, with the Last Will ``offline`` on
    ``availability``; inbound messages go to `on_message` (which must not raise or block)."""

    def __init__(
        self,
        settings: MqttSettings,
        topics: Topics,
        on_message: Callable[[Message], None],
        logger: logging.Logger,
    ) -> None:
        self.settings = settings
        self.topics = topics
        self.identifier = settings.client_id or f"armd-{settings.arm_name}"
        self._client = aiomqtt.Client(
            **connection_options(settings),
            logger=logger,
            identifier=self.identifier,
            will=aiomqtt.Will(topics.availability, OFFLINE, **_flags(AVAILABILITY)),
            clean_session=True,
            timeout=settings.timeout_s,
            keepalive=settings.keepalive_s,
            queue_type=_handing_queue(on_message),
        )
        self._client.pending_calls_threshold = 4 * _INFLIGHT  # our own batches are expected
        self._connected = False

    async def connect(self, stop: asyncio.Event) -> bool:
        """Connect (raises MqttError); False, with nothing left open, when `stop` is set first.
        On cancellation the attempt is finished and closed within the shutdown budget."""
        attempt = asyncio.ensure_future(self._client.__aenter__())
        stopped = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait((attempt, stopped), return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            await self._abandon(attempt)
            raise
        finally:
            stopped.cancel()
        if attempt.done():
            attempt.result()
            self._connected = True
            return True
        await self._abandon(attempt)
        return False

    async def _abandon(self, attempt: asyncio.Future[Any]) -> None:
        with contextlib.suppress(Exception):
            async with asyncio.timeout(self.settings.shutdown_timeout_s):
                await attempt  # cancelled in turn if the budget runs out
                await self._client.__aexit__(None, None, None)

    async def close(self, deadline: float | None = None) -> None:
        """Send DISCONNECT (the broker then discards the Last Will), or nothing if the connection
        is already lost; by `deadline` (event-loop time) when given."""
        if not self._connected:
            return
        self._connected = False
        if deadline is not None:
            self._client.timeout = max(0.1, deadline - asyncio.get_running_loop().time())
        with contextlib.suppress(MqttError):
            await self._client.__aexit__(None, None, None)

    async def closed(self) -> None:
        """Wait until the connection is lost: raises MqttError then (never returns)."""
        async for _ in self._client.messages:
            pass  # never reached: `_handing_queue` keeps the queue empty

    async def publish(self, topic: Topic, payload: bytes | str, *, name: str | None = None) -> None:
        """Publish on `topic` of the contract (its QoS and retain flag) under this arm's prefix;
        `name` overrides the topic's full name."""
        full = name if name is not None else self.topics.name(topic)
        await self._client.publish(full, payload, **_flags(topic))

    async def subscribe(self, topics: Iterable[Topic]) -> list[str]:
        """Subscribe to `topics` at their QoS; the names of those the broker refused (an ACL)."""
        names = [self.topics.name(topic) for topic in topics]
        qos = [topic.qos for topic in topics]
        codes = await self._client.subscribe(list(zip(names, qos, strict=True)))
        return [name for name, code in zip(names, codes, strict=False) if _is_failure(code)]

    async def unsubscribe(self, topic: Topic) -> None:
        await self._client.unsubscribe(self.topics.name(topic))


def raise_if_cancelled() -> None:
    """Re-raise a cancellation that an await swallowed. Python 3.11's `asyncio.wait_for` (aiomqtt
    waits for PUBACKs with it) returns normally when the cancellation arrives just as the awaited
    publication completes; a pump would then wait forever for its next value, e.g. for telemetry
    after the control loop has ended, and the daemon would hang on SIGTERM."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


def connect_failure(exc: BaseException, settings: MqttSettings) -> tuple[int, str]:
    """The log level and the words for a failed connection attempt: refused credentials are an
    error worth acting on; anything else (no broker, no CONNACK) a warning."""
    broker = f"MQTT broker {settings.address}"
    code = getattr(getattr(exc, "rc", None), "value", getattr(exc, "rc", None))
    if isinstance(exc, MqttConnectError) and code in AUTH_REASON_CODES:
        return logging.ERROR, (
            f"{broker} refused the credentials of user {settings.username!r}: {exc}; check "
            "username and password (retrying with backoff)"
        )
    reason = describe(exc)
    if reason == "Operation timed out":  # aiomqtt's words when no CONNACK came
        reason = f"no CONNACK within {settings.timeout_s:g} s"
    return logging.WARNING, f"cannot connect to {broker}: {reason}; retrying with backoff"


def describe(exc: BaseException) -> str:
    """aiomqtt wraps the reason of a lost connection as the cause: show both."""
    cause = exc.__cause__
    return f"{exc} ({cause})" if cause is not None and str(cause) else str(exc)


def _handing_queue(handle: Callable[[Message], None]) -> type[asyncio.Queue[Message]]:
    """aiomqtt puts each inbound message into a queue of this class: hand it over instead."""

    class HandingQueue(asyncio.Queue[Message]):
        def put_nowait(self, item: Message) -> None:
            handle(item)

    return HandingQueue


def _is_failure(code: object) -> bool:
    """A SUBACK code: an int (MQTT 3.1.1) or a paho ReasonCode; 0x80 and above are failures."""
    value = getattr(code, "value", code)
    return isinstance(value, int) and value >= 0x80


def _flags(topic: Topic) -> dict[str, Any]:
    """The QoS and retain flag of `topic` as `aiomqtt.Client.publish` keywords."""
    return {"qos": topic.qos, "retain": topic.retain}
