"""The MQTT bridge: the daemon's side of the contract in DESIGN.md (topics under ``armd/<name>/``).

`MqttBridge.run` is one long-lived task. Per connection it publishes ``availability`` ``online``
(retained, QoS 1; the Last Will says ``offline``), republishes the retained ``fault`` (or an empty
payload that clears it), subscribes to ``goal`` and ``estop`` (QoS 1) and then, concurrently:

- parses every inbound message (`armd.payloads`) as paho reads it and hands goals and e-stop
  commands to the daemon's callbacks, synchronously and in arrival order (nothing queues up: a
  flood is paced by TCP). A payload that does not parse, or a retained one (it would replay an
  old command on every reconnect), is answered by the bridge itself with a ``rejected`` status
  and a rate-limited warning; the daemon never sees it;
- sends every status of `publish_status` on ``goal/status`` (QoS 1) in order. Statuses are removed
  from a bounded queue only once the broker acknowledged them, so the ones queued or in flight
  while the broker is away are sent after reconnection (at least once: a status in flight when
  the connection broke may arrive twice);
- sends the latest `publish_telemetry` value on ``state`` (QoS 0, a one-slot mailbox: older
  values are overwritten, never queued);
- sends `set_fault` changes on ``fault`` (QoS 1, retained, latest value wins).

Connection losses are reported through `connected` and `on_connection_change`; the bridge
reconnects with exponential backoff and jitter until it is cancelled or `request_stop` is
called, after which it flushes the queued statuses, publishes ``offline`` and disconnects, all
within `MqttSettings.shutdown_timeout_s`. The outbound methods are synchronous, never block and may
be called from any task of the bridge's event loop (not from other threads).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import logging
import random
import socket
from collections.abc import Callable, Collection
from typing import Any, TypeVar

import aiomqtt
from aiomqtt.exceptions import MqttConnectError

from armd.broker import MqttSettings, connection_options, reconnect_delay_s
from armd.contract import (
    AVAILABILITY,
    ESTOP,
    FAULT,
    GOAL,
    GOAL_STATUS,
    OFFLINE,
    ONLINE,
    STATE,
    Topic,
    Topics,
    encode,
    fault_json,
    status_json,
    telemetry_json,
)
from armd.messages import (
    EstopCommand,
    Fault,
    Goal,
    GoalStatus,
    Rejection,
    StatusUpdate,
    Telemetry,
)
from armd.payloads import parse_estop, parse_goal
from armd.ratelimit import RateLimiter, RateLimitFilter

__all__ = ["MqttBridge"]

_log = logging.getLogger(__name__)
_T = TypeVar("_T")

_STATUS_BATCH = 20  # QoS 1 statuses in flight at once (paho's default inflight window)
_AUTH_REASON_CODES = {4, 5, 134, 135}  # bad username or password / not authorised (3.1.1, 5)


class MqttBridge:
    """Connects the daemon to the broker; see the module docstring for the behaviour.

    `on_goal` and `on_estop` receive parsed, valid commands (they must not block: hand the value
    to the goal pipeline / safety layer and return). `on_connection_change(True)` is called once
    the bridge is online and subscribed, `(False)` when that ends. Goals are validated against
    `joint_names` and `link_names`; pose goals without a link get `default_link`.
    """

    def __init__(
        self,
        settings: MqttSettings,
        *,
        joint_names: Collection[str],
        link_names: Collection[str],
        default_link: str,
        on_goal: Callable[[Goal], None],
        on_estop: Callable[[EstopCommand], None],
        on_connection_change: Callable[[bool], None] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.settings = settings
        self.topics = Topics.for_arm(settings.arm_name)
        self._joint_order = tuple(joint_names)
        self._link_names = tuple(link_names)
        self._default_link = default_link
        self._on_goal = on_goal
        self._on_estop = on_estop
        self._on_connection_change = on_connection_change
        self._rng = rng if rng is not None else random.Random()
        self._connected = asyncio.Event()
        self._stop = asyncio.Event()
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
        self._limits = RateLimiter()
        self._connect_limits = RateLimiter(burst=1, interval_s=60.0)  # one line per outage
        self._client_log = logging.getLogger(f"{__name__}.client")
        if not any(isinstance(f, RateLimitFilter) for f in self._client_log.filters):
            self._client_log.addFilter(RateLimitFilter())

    # -- the daemon's side ------------------------------------------------------------------

    @property
    def connected(self) -> asyncio.Event:
        """Set while the bridge is online and subscribed."""
        return self._connected

    @property
    def pending_statuses(self) -> int:
        """Statuses not yet acknowledged by the broker."""
        return len(self._statuses)

    def publish_status(self, update: StatusUpdate) -> None:
        """Queue a ``goal/status`` message; when the queue is full the oldest is dropped."""
        if len(self._statuses) >= self.settings.status_queue_max:
            self._statuses.popleft()
            self.dropped_statuses += 1
            self._warn(
                "status-drop",
                "goal/status queue full (%d): dropped the oldest status (%d dropped so far)",
                self.settings.status_queue_max,
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

    def request_stop(self) -> None:
        """Make `run` flush the queued statuses, publish ``offline``, disconnect and return."""
        self._stop.set()

    # -- the task ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Stay connected until `request_stop` or cancellation; never raises for broker or
        network trouble (connection errors are logged and retried with backoff)."""
        settings = self.settings
        attempt = 0
        try:
            while not self._stop.is_set():
                accepted = await self._connection_attempt()
                attempt = 0 if accepted else attempt + 1
                delay_s = reconnect_delay_s(
                    attempt, settings.reconnect_min_s, settings.reconnect_max_s, self._rng
                )
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay_s):
                        await self._stop.wait()
        finally:
            self._set_connected(False)

    async def _connection_attempt(self) -> bool:
        """One connection, served until it ends; True when the broker accepted it."""
        client = self._new_client()
        accepted = False
        try:
            if not await self._enter(client):
                return False
            accepted = True
            async with contextlib.AsyncExitStack() as stack:
                stack.push_async_exit(client.__aexit__)  # DISCONNECT, or nothing if lost
                await self._serve(client)
        except (aiomqtt.MqttError, OSError) as exc:
            self._report(exc, accepted=accepted)
        finally:
            self._set_connected(False)
        return accepted

    def _new_client(self) -> aiomqtt.Client:
        settings = self.settings
        client = aiomqtt.Client(
            **connection_options(settings),
            logger=self._client_log,
            identifier=settings.client_id or f"armd-{settings.arm_name}",
            will=aiomqtt.Will(self.topics.availability, OFFLINE, **_flags(AVAILABILITY)),
            clean_session=True,
            timeout=settings.timeout_s,
            keepalive=settings.keepalive_s,
            queue_type=_inline_queue(self._on_message),
            socket_options=((socket.IPPROTO_TCP, socket.TCP_NODELAY, 1),),
        )
        client.pending_calls_threshold = 4 * _STATUS_BATCH  # our own batches are not a problem
        return client

    async def _enter(self, client: aiomqtt.Client) -> bool:
        """Connect (raises MqttError); False when a stop was requested first.

        Cancelling aiomqtt half-way through connecting would leave paho's socket registered on
        the loop, so on cancellation or a stop the attempt is allowed to finish and is then
        closed, all within the shutdown budget."""
        attempt = asyncio.ensure_future(client.__aenter__())
        stop = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait((attempt, stop), return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            await self._abandon(client, attempt)
            raise
        finally:
            stop.cancel()
        if attempt.done():
            attempt.result()
            return True
        await self._abandon(client, attempt)
        return False

    async def _abandon(self, client: aiomqtt.Client, attempt: asyncio.Future[Any]) -> None:
        with contextlib.suppress(Exception):
            async with asyncio.timeout(self.settings.shutdown_timeout_s):
                await attempt  # cancelled in turn if the budget runs out
                await client.__aexit__(None, None, None)

    async def _serve(self, client: aiomqtt.Client) -> None:
        """Set up the session and pump messages until the connection fails (raises MqttError),
        a stop is requested (returns after the goodbye) or the task is cancelled."""
        if self._stop.is_set():  # requested while connecting
            await self._goodbye(client)
            return
        self._handed_over = -1  # those handed to an earlier connection are sent again
        await client.publish(self.topics.availability, ONLINE, **_flags(AVAILABILITY))
        await self._publish_fault(client, force=True)
        await self._subscribe(client)
        _log.info("MQTT: online at %s as %s", self.settings.address, client.identifier)
        self._set_connected(True)
        try:
            stopped = await self._pump_all(client)
        except asyncio.CancelledError:
            await self._goodbye(client)
            raise
        if stopped:
            await self._goodbye(client)

    async def _subscribe(self, client: aiomqtt.Client) -> None:
        inbound = (GOAL, ESTOP)
        topics = tuple(self.topics.name(topic) for topic in inbound)
        codes = await client.subscribe([(self.topics.name(t), t.qos) for t in inbound])
        refused = [t for t, code in zip(topics, codes, strict=False) if _is_failure(code)]
        if refused:  # an ACL; keep serving what is allowed (telemetry, statuses)
            message = "MQTT: %s refused the subscription to %s; check its ACL"
            self._error("suback", message, self.settings.address, ", ".join(refused))

    async def _pump_all(self, client: aiomqtt.Client) -> bool:
        """Run the pumps until the connection fails (raises MqttError) or a stop is requested
        (returns True)."""
        stopped = False
        try:
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(self._watch_connection(client))
                tasks.create_task(self._pump_statuses(client))
                tasks.create_task(self._pump_telemetry(client))
                tasks.create_task(self._pump_fault(client))
                tasks.create_task(self._wait_for_stop())
        except* _StopRequestedError:
            stopped = True
        except* aiomqtt.MqttError as group:
            raise group.exceptions[0] from None
        return stopped

    async def _goodbye(self, client: aiomqtt.Client) -> None:
        """Best effort within the shutdown budget: statuses, fault, ``offline``; the caller's
        exit then sends DISCONNECT, so the broker discards the Last Will."""
        self._set_connected(False)
        deadline = asyncio.get_running_loop().time() + self.settings.shutdown_timeout_s
        try:
            async with asyncio.timeout_at(deadline):
                # No goal may arrive once its status can no longer be sent: the ones the broker
                # delivers until the UNSUBACK are answered (refused: the daemon is stopping).
                await client.unsubscribe(self.topics.goal)
                # Statuses the cancelled pump already handed to paho are written before the
                # DISCONNECT that ends this goodbye: sending them again would duplicate them.
                while self._statuses and self._statuses[0][0] <= self._handed_over:
                    self._statuses.popleft()
                while self._statuses:
                    await self._publish_status_batch(client)
                await self._publish_fault(client, force=False)
                await client.publish(self.topics.availability, OFFLINE, **_flags(AVAILABILITY))
        except (aiomqtt.MqttError, TimeoutError) as exc:
            _log.warning(
                "MQTT: clean shutdown incomplete (%d statuses unsent): %s", len(self._statuses), exc
            )
        client.timeout = max(0.1, deadline - asyncio.get_running_loop().time())
        _log.info("MQTT: offline, disconnecting from %s", self.settings.address)

    async def _wait_for_stop(self) -> None:
        await self._stop.wait()
        raise _StopRequestedError

    # -- pumps ------------------------------------------------------------------------------

    async def _watch_connection(self, client: aiomqtt.Client) -> None:
        """Raise MqttError when the connection drops (inbound messages never queue up here:
        `_on_message` handles them as paho reads them)."""
        async for _ in client.messages:
            pass

    def _on_message(self, message: aiomqtt.Message) -> None:
        """Called by paho for each inbound message as it is read (before the QoS 1 PUBACK),
        so a flood is paced by TCP instead of growing a queue. Must not raise: an exception
        here would drop the connection."""
        try:
            payload = message.payload
            data = bytes(payload) if isinstance(payload, bytes | bytearray) else b""
            topic = message.topic.value
            if topic == self.topics.estop:
                self._deliver_estop(data, retained=message.retain)
            elif message.retain:
                self._reject_retained(topic, data)
            elif topic == self.topics.goal:
                self._deliver_goal(data)
        except Exception as exc:
            if self._limits.allow("inbound") is not None:
                _log.exception("MQTT: failed to handle a message on %s", message.topic)
            if message.topic.value == self.topics.estop:  # fail safe, whatever went wrong
                problem = f"internal error: {type(exc).__name__}: {exc}"
                self._call(self._on_estop, EstopCommand(engage=True, problem=problem))

    def _parse_goal(self, data: bytes) -> Goal | Rejection:
        return parse_goal(
            data,
            joint_names=self._joint_order,
            link_names=self._link_names,
            default_link=self._default_link,
        )

    def _deliver_goal(self, data: bytes) -> None:
        goal = self._parse_goal(data)
        if isinstance(goal, Rejection):
            self._reject(self.topics.goal, goal)
        else:
            self._call(self._on_goal, goal)

    def _deliver_estop(self, data: bytes, *, retained: bool = False) -> None:
        """Fail safe: anything but a well-formed reset engages the e-stop; a malformed payload is
        also answered with ``rejected`` saying what was wrong and that the e-stop is engaged."""
        command = parse_estop(data)
        if retained and not command.engage:  # a reset must be sent, not replayed
            reason = "retain: a retained reset is not accepted; publish it without retain"
            self._reject(self.topics.estop, Rejection(None, f"estop: {reason}"))
            return
        problem = command.problem
        if retained and problem is None:
            problem = "retained message (clear it: publish an empty retained payload)"
        if problem is not None:
            reason = f"estop: {problem}; the e-stop is engaged (fail-safe)"
            self._reject(self.topics.estop, Rejection(None, reason))
        self._call(self._on_estop, command)

    def _reject_retained(self, topic: str, data: bytes) -> None:
        """A retained goal would be replayed on every reconnect: refuse it, with its id."""
        parsed = self._parse_goal(data)
        goal_id = parsed.goal_id if parsed is not None else None
        reason = f"retain: retained messages are not accepted on {topic}; publish without retain"
        self._reject(topic, Rejection(goal_id, reason))

    def _reject(self, topic: str, rejection: Rejection) -> None:
        message = "MQTT: rejected %s (id %r): %s"
        self._warn("rejected", message, topic, rejection.goal_id, rejection.reason)
        self.publish_status(StatusUpdate(rejection.goal_id, GoalStatus.REJECTED, rejection.reason))

    def _call(self, callback: Callable[[_T], None], value: _T) -> None:
        try:
            callback(value)
        except Exception:  # the daemon's bug must not take the MQTT API down with it
            if self._limits.allow("callback") is not None:
                _log.exception("MQTT: handler %r failed on %r", callback, value)

    async def _pump_statuses(self, client: aiomqtt.Client) -> None:
        while True:
            _raise_if_cancelled()
            while not self._statuses:
                self._statuses_ready.clear()
                await self._statuses_ready.wait()
            await self._publish_status_batch(client)

    async def _publish_status_batch(self, client: aiomqtt.Client) -> None:
        """Publish up to `_STATUS_BATCH` statuses from the head of the queue concurrently (paho
        writes them in call order) and drop the acknowledged prefix; raise the first failure."""
        batch = list(itertools.islice(self._statuses, _STATUS_BATCH))
        results = await asyncio.gather(
            *(self._publish_status(client, seq, update) for seq, update in batch),
            return_exceptions=True,
        )
        acked = -1
        for (seq, _), result in zip(batch, results, strict=True):
            if isinstance(result, BaseException):
                raise result
            acked = seq
        while self._statuses and self._statuses[0][0] <= acked:
            self._statuses.popleft()

    async def _publish_status(self, client: aiomqtt.Client, seq: int, update: StatusUpdate) -> None:
        # aiomqtt hands the message to paho before its first await: in the same step as this.
        self._handed_over = max(self._handed_over, seq)
        payload = encode(status_json(update))
        await client.publish(self.topics.goal_status, payload, **_flags(GOAL_STATUS))

    async def _pump_telemetry(self, client: aiomqtt.Client) -> None:
        while True:
            _raise_if_cancelled()
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
            await client.publish(self.topics.state, payload, **_flags(STATE))

    async def _pump_fault(self, client: aiomqtt.Client) -> None:
        while True:
            _raise_if_cancelled()
            await self._fault_ready.wait()
            self._fault_ready.clear()
            await self._publish_fault(client, force=False)

    async def _publish_fault(self, client: aiomqtt.Client, *, force: bool) -> None:
        """Publish the current fault (empty payload: none) unless already published, or always
        when `force` (a new connection: the broker may have lost the retained message)."""
        version = self._fault_version
        if version == self._fault_published and not force:
            return
        fault = self._fault
        payload = encode(fault_json(fault)) if fault is not None else b""
        await client.publish(self.topics.fault, payload, **_flags(FAULT))
        self._fault_published = version

    # -- connection state and logging -------------------------------------------------------

    def _set_connected(self, connected: bool) -> None:
        if connected == self._connected.is_set():
            return
        if connected:
            self._connected.set()
        else:
            self._connected.clear()
        if self._on_connection_change is not None:
            self._call(self._on_connection_change, connected)

    def _report(self, exc: BaseException, *, accepted: bool) -> None:
        broker = f"MQTT broker {self.settings.address}"
        if accepted:
            self._connect_limits = RateLimiter(burst=1, interval_s=60.0)
            message = "MQTT: lost the connection to %s: %s; reconnecting"
            self._warn("lost", message, broker, _describe(exc))
            return
        code = getattr(getattr(exc, "rc", None), "value", getattr(exc, "rc", None))
        if isinstance(exc, MqttConnectError) and code in _AUTH_REASON_CODES:
            level = logging.ERROR
            message = "MQTT: %s refused the credentials of user %r: %s; check username and "
            message += "password (retrying with backoff)"
            args: tuple[object, ...] = (broker, self.settings.username, exc)
        else:
            level = logging.WARNING
            message = "MQTT: cannot connect to %s: %s; retrying with backoff"
            reason = _describe(exc)
            if reason == "Operation timed out":  # aiomqtt's words when no CONNACK came
                reason = f"no CONNACK within {self.settings.timeout_s:g} s"
            args = (broker, reason)
        self._log(level, "connect", message, *args, limits=self._connect_limits)

    def _warn(self, key: str, message: str, *args: object) -> None:
        self._log(logging.WARNING, key, message, *args)

    def _error(self, key: str, message: str, *args: object) -> None:
        self._log(logging.ERROR, key, message, *args)

    def _log(
        self, level: int, key: str, message: str, *args: object, limits: RateLimiter | None = None
    ) -> None:
        suppressed = (limits or self._limits).allow(key)
        if suppressed is not None:
            _log.log(level, message + _suppressed_note(suppressed), *args)


def _raise_if_cancelled() -> None:
    """Re-raise a cancellation that an await swallowed. Python 3.11's `asyncio.wait_for` (aiomqtt
    waits for PUBACKs with it) returns normally when the cancellation arrives just as the awaited
    publication completes; a pump would then wait forever for its next value, e.g. for telemetry
    after the control loop has ended, and the daemon would hang on SIGTERM."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


class _StopRequestedError(Exception):
    """Raised inside the session's task group to end it for `request_stop`."""


def _inline_queue(
    handle: Callable[[aiomqtt.Message], None],
) -> type[asyncio.Queue[aiomqtt.Message]]:
    """aiomqtt puts each inbound message into a queue of this class: hand it over instead."""

    class InlineQueue(asyncio.Queue[aiomqtt.Message]):
        def put_nowait(self, item: aiomqtt.Message) -> None:
            handle(item)

    return InlineQueue


def _is_failure(code: object) -> bool:
    """A SUBACK code: an int (MQTT 3.1.1) or a paho ReasonCode; 0x80 and above are failures."""
    value = getattr(code, "value", code)
    return isinstance(value, int) and value >= 0x80


def _describe(exc: BaseException) -> str:
    """aiomqtt wraps the reason of a lost connection as the cause: show both."""
    cause = exc.__cause__
    return f"{exc} ({cause})" if cause is not None and str(cause) else str(exc)


def _flags(topic: Topic) -> dict[str, Any]:
    """The QoS and retain flag of `topic` as `aiomqtt.Client.publish` keywords."""
    return {"qos": topic.qos, "retain": topic.retain}


def _suppressed_note(count: int) -> str:
    return f" ({count} similar messages suppressed)" if count else ""
