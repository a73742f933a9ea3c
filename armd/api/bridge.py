"""The MQTT bridge: the daemon's side of the contract in docs/mqtt.md (topics ``armd/<name>/...``).

`MqttBridge.run` is one long-lived task. Per connection it publishes the `announcements`
(retained documents: the arm's ``model``, Home Assistant's discovery configs), then
``availability`` ``online`` (retained, QoS 1; the Last Will says ``offline``), republishes the
retained ``fault`` (or an empty payload that clears it), subscribes to ``goal`` and ``estop``
(QoS 1) and, when the daemon takes streams, ``stream`` (QoS 0), and then, concurrently:

- parses every inbound message as paho reads it and hands goals and e-stop commands to the
  daemon's callbacks, synchronously and in arrival order (`armd.api.inbound`; nothing queues
  up: a flood is paced by TCP). A payload that does not parse, or a retained one, is answered
  with a ``rejected`` status and a rate-limited warning; the daemon never sees it;
- sends what the daemon publishes (`armd.api.outbound`): every status of `publish_status` on
  ``goal/status`` (QoS 1, in order, kept until the broker acknowledged it, so that statuses
  survive a reconnection), the latest `publish_telemetry` value on ``state`` (QoS 0) and
  `set_fault` changes on ``fault`` (QoS 1, retained, latest value wins).

Connection losses are reported through `connected` and `on_connection_change`; the bridge
reconnects with exponential backoff and jitter until it is cancelled or `request_stop` is
called, after which it flushes the queued statuses, publishes ``offline`` and disconnects, all
within `MqttSettings.shutdown_timeout_s`. The outbound methods are synchronous, never block and may
be called from any task of the bridge's event loop (not from other threads).

Each connection is one `armd.api.session.MqttSession`, the only code that knows paho-mqtt.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable, Collection, Sequence

from armd.api.contract import (
    AVAILABILITY,
    ESTOP,
    GOAL,
    MODEL,
    OFFLINE,
    ONLINE,
    PAYLOAD,
    STREAM,
    Topics,
)
from armd.api.inbound import Inbound, call_safely
from armd.api.outbound import Outbound
from armd.api.session import MqttError, MqttSession, connect_failure, describe
from armd.config.broker import MqttSettings, reconnect_delay_s
from armd.link.messages import (
    EstopCommand,
    Fault,
    Goal,
    GoalStatus,
    Rejection,
    StatusUpdate,
    StreamMessage,
    Telemetry,
    ToolLoad,
)
from armd.ratelimit import RateLimiter, RateLimitFilter

__all__ = ["MqttBridge"]

_log = logging.getLogger(__name__)


class MqttBridge:
    """Connects the daemon to the broker; see the module docstring for the behaviour.

    `on_goal` and `on_estop` receive parsed, valid commands (they must not block: hand the value
    to the goal pipeline / safety layer and return). `on_connection_change(True)` is called once
    the bridge is online and subscribed, `(False)` when that ends. Goals are validated against
    `joint_names` and `link_names`; pose goals without a link get `default_link`.
    `announcements` are (topic, payload) pairs published retained at QoS 1 on every connection,
    before ``online``: a client that sees the arm online finds them there.
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
        announcements: Sequence[tuple[str, bytes]] = (),
        rng: random.Random | None = None,
        on_stream: Callable[[StreamMessage | Rejection], None] | None = None,
        on_load: Callable[[ToolLoad], None] | None = None,
    ) -> None:
        self.settings = settings
        self._announcements = tuple(announcements)
        self.topics = Topics.for_arm(settings.arm_name)
        self._inbound = Inbound(
            self.topics,
            joint_names=joint_names,
            link_names=link_names,
            default_link=default_link,
            on_goal=on_goal,
            on_estop=on_estop,
            reject=self._reject,
            on_stream=on_stream,
            on_load=on_load,
        )
        self._inbound_topics = (
            (GOAL, ESTOP)
            + ((STREAM,) if on_stream is not None else ())
            + ((PAYLOAD,) if on_load is not None else ())
        )
        self._on_connection_change = on_connection_change
        self._rng = rng if rng is not None else random.Random()
        self._connected = asyncio.Event()
        self._stop = asyncio.Event()
        self._outbound = Outbound(settings.status_queue_max, self._warn)
        self._goodbye_deadline: float | None = None  # event-loop time, set by `_goodbye`
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
        return self._outbound.pending_statuses

    @property
    def dropped_statuses(self) -> int:
        """Statuses dropped because the queue was full."""
        return self._outbound.dropped_statuses

    def publish_status(self, update: StatusUpdate) -> None:
        """Queue a ``goal/status`` message; when the queue is full the oldest is dropped."""
        self._outbound.publish_status(update)

    def publish_telemetry(self, telemetry: Telemetry) -> None:
        """Offer the latest ``state``; replaces any value not yet sent."""
        self._outbound.publish_telemetry(telemetry)

    def set_fault(self, fault: Fault | None) -> None:
        """The active fault (None: cleared), retained on ``fault`` and republished on reconnect."""
        self._outbound.set_fault(fault)

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
        session = MqttSession(self.settings, self.topics, self._inbound, self._client_log)
        accepted = False
        try:
            if not await session.connect(self._stop):
                return False
            accepted = True
            try:
                await self._serve(session)
            finally:
                await session.close(self._goodbye_deadline)
        except (MqttError, OSError) as exc:
            self._report(exc, accepted=accepted)
        finally:
            self._set_connected(False)
            self._goodbye_deadline = None
        return accepted

    async def _serve(self, session: MqttSession) -> None:
        """Set up the session and pump messages until the connection fails (raises MqttError),
        a stop is requested (returns after the goodbye) or the task is cancelled."""
        if self._stop.is_set():  # requested while connecting
            await self._goodbye(session)
            return
        self._outbound.new_connection()
        for topic, payload in self._announcements:
            await session.publish(MODEL, payload, name=topic)  # MODEL's flags: QoS 1, retained
        await session.publish(AVAILABILITY, ONLINE)
        await self._outbound.publish_fault(session, force=True)
        refused = await session.subscribe(self._inbound_topics)
        if refused:  # an ACL; keep serving what is allowed (telemetry, statuses)
            message = "MQTT: %s refused the subscription to %s; check its ACL"
            self._error("suback", message, self.settings.address, ", ".join(refused))
        _log.info("MQTT: online at %s as %s", self.settings.address, session.identifier)
        self._set_connected(True)
        try:
            stopped = await self._pump_all(session)
        except asyncio.CancelledError:
            await self._goodbye(session)
            raise
        if stopped:
            await self._goodbye(session)

    async def _pump_all(self, session: MqttSession) -> bool:
        """Run the pumps until the connection fails (raises MqttError) or a stop is requested
        (returns True)."""
        stopped = False
        try:
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(session.closed())
                tasks.create_task(self._outbound.pump_statuses(session))
                tasks.create_task(self._outbound.pump_telemetry(session))
                tasks.create_task(self._outbound.pump_fault(session))
                tasks.create_task(self._wait_for_stop())
        except* _StopRequestedError:
            stopped = True
        except* MqttError as group:
            raise group.exceptions[0] from None
        return stopped

    async def _goodbye(self, session: MqttSession) -> None:
        """Best effort within the shutdown budget: statuses, fault, ``offline``; the caller's
        exit then sends DISCONNECT, so the broker discards the Last Will."""
        self._set_connected(False)
        deadline = asyncio.get_running_loop().time() + self.settings.shutdown_timeout_s
        try:
            async with asyncio.timeout_at(deadline):
                # No goal may arrive once its status can no longer be sent: the ones the broker
                # delivers until the UNSUBACK are answered (refused: the daemon is stopping).
                await session.unsubscribe(GOAL)
                await self._outbound.flush(session)
                await session.publish(AVAILABILITY, OFFLINE)
        except (MqttError, TimeoutError) as exc:
            _log.warning(
                "MQTT: clean shutdown incomplete (%d statuses unsent): %s",
                self._outbound.pending_statuses,
                exc,
            )
        self._goodbye_deadline = deadline
        _log.info("MQTT: offline, disconnecting from %s", self.settings.address)

    async def _wait_for_stop(self) -> None:
        await self._stop.wait()
        raise _StopRequestedError

    # -- replies and connection state -------------------------------------------------------

    def _reject(self, topic: str, rejection: Rejection) -> None:
        message = "MQTT: rejected %s (id %r): %s"
        self._warn("rejected", message, topic, rejection.goal_id, rejection.reason)
        self.publish_status(StatusUpdate(rejection.goal_id, GoalStatus.REJECTED, rejection.reason))

    def _set_connected(self, connected: bool) -> None:
        if connected == self._connected.is_set():
            return
        if connected:
            self._connected.set()
        else:
            self._connected.clear()
        if self._on_connection_change is not None:
            call_safely(self._on_connection_change, connected, self._limits)

    def _report(self, exc: BaseException, *, accepted: bool) -> None:
        if accepted:
            self._connect_limits = RateLimiter(burst=1, interval_s=60.0)
            message = "MQTT: lost the connection to MQTT broker %s: %s; reconnecting"
            self._warn("lost", message, self.settings.address, describe(exc))
            return
        level, text = connect_failure(exc, self.settings)
        self._log(level, "connect", "MQTT: %s", text, limits=self._connect_limits)

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


class _StopRequestedError(Exception):
    """Raised inside the session's task group to end it for `request_stop`."""


def _suppressed_note(count: int) -> str:
    return f" ({count} similar messages suppressed)" if count else ""
