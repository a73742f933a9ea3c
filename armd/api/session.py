"""One MQTT connection of the daemon, on paho-mqtt's own interface for programs with their own
event loop, behind one class.

`MqttSession` drives one `paho.mqtt.client.Client` from the asyncio event loop the way paho
documents for a program that runs its own select loop: ``loop_read`` when the socket is
readable, ``loop_write`` while ``want_write``, ``loop_misc`` (keepalive) once a second. It offers
`connect`, the topic-table-aware `publish`/`subscribe`/`unsubscribe`, `closed` (raises
`MqttError` when the connection is lost) and `close`. The bridge (`armd.api.bridge`) never touches
paho.

- **Inbound messages are handled as paho reads them**: paho calls `on_message` for each one
  before it sends the QoS 1 PUBACK, so a flood is paced by TCP (the broker's inflight window)
  rather than growing a queue, and no message is dropped.
- **A publication is written in the call**: paho writes to the socket at once when no callback
  asks it to wait for the event loop, which is what a one-core robot computer wants for 25 Hz
  telemetry (a QoS 0 message is one ``send``; what the socket does not take is written when it
  becomes writable). `publish` returns once the message is written (QoS 0) or acknowledged
  (QoS 1), within `MqttSettings.timeout_s`.
- **Connecting** (name lookup, TCP, the TLS handshake, CONNECT) blocks in paho, so it runs in a
  worker thread; the socket joins the event loop once it is connected. An attempt that is
  cancelled or stopped half-way is let finish within the shutdown budget and then closed.

armd's command-line clients (`armd goal`, `armd leader`) keep aiomqtt: short-lived, they use it
as documented.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable, Iterable
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode

from armd.api.contract import AVAILABILITY, OFFLINE, Topic, Topics
from armd.config.broker import MqttSettings

__all__ = [
    "Message",
    "MqttConnectError",
    "MqttError",
    "MqttSession",
    "connect_failure",
    "describe",
]

Message = paho.MQTTMessage
AUTH_REASON_CODES = {4, 5, 134, 135}  # bad username or password / not authorised (3.1.1, 5)
_MISC_INTERVAL_S = 1.0  # paho's own loop calls loop_misc at least this often (keepalive)


class MqttError(Exception):
    """The connection failed or was lost, or the broker did not answer in time."""


class MqttConnectError(MqttError):
    """The broker refused the connection (`rc`: the CONNACK's reason code)."""

    def __init__(self, rc: object) -> None:
        super().__init__(f"the broker refused the connection: {rc}")
        self.rc = rc


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
        client = paho.Client(
            CallbackAPIVersion.VERSION2,
            client_id=self.identifier,
            clean_session=True,
            protocol=paho.MQTTv311,
            reconnect_on_failure=False,  # else a refused CONNACK reconnects, blocking, in a read
        )
        self._log = _PahoLog(logger)
        client.enable_logger(self._log)  # type: ignore[arg-type]  # paho only calls .log()
        client.connect_timeout = settings.timeout_s
        client.will_set(topics.availability, OFFLINE, AVAILABILITY.qos, AVAILABILITY.retain)
        if settings.username is not None:
            client.username_pw_set(settings.username, settings.password_text)
        if settings.uses_tls:
            client.tls_set(**settings.tls_files)
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_message = lambda _client, _userdata, message: on_message(message)
        client.on_publish = self._on_acknowledged
        client.on_subscribe = self._on_acknowledged
        client.on_unsubscribe = self._on_acknowledged
        client.on_socket_close = self._on_socket_close
        self._client = client
        self._loop = asyncio.get_running_loop()
        self._connack: asyncio.Future[None] = self._loop.create_future()
        self._lost: asyncio.Future[None] = self._loop.create_future()
        self._pending: dict[int, asyncio.Future[Any]] = {}  # message id → its acknowledgement
        self._fd: int | None = None  # the socket, while the event loop watches it
        self._writing = False
        self._misc: asyncio.Task[None] | None = None
        self._closing = False
        self._connected = False
        self._attached = False  # the event loop took over from `_open`'s thread

    # -- the bridge's side ------------------------------------------------------------------

    async def connect(self, stop: asyncio.Event) -> bool:
        """Connect (raises MqttError or OSError); False, with nothing left open, when `stop` is
        set first. On cancellation the attempt is finished and closed within the shutdown
        budget."""
        opening = self._loop.run_in_executor(None, self._open)
        stopped = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait((opening, stopped), return_when=asyncio.FIRST_COMPLETED)
            if opening.done():
                opening.result()
                self._attach()
                waiting = (self._connack, stopped)
                timeout_s = self.settings.timeout_s
                await asyncio.wait(waiting, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
                if self._connack.done():
                    self._connack.result()  # raises when refused, or lost before the CONNACK
                elif not stop.is_set():
                    raise MqttError(f"no CONNACK within {timeout_s:g} s")
        except asyncio.CancelledError:
            await self._abandon(opening)
            raise
        except BaseException:
            self._drop()
            raise
        finally:
            stopped.cancel()
        if not self._connack.done():
            await self._abandon(opening)
            return False
        self._connected = True
        return True

    async def close(self, deadline: float | None = None) -> None:
        """Send DISCONNECT (the broker then discards the Last Will), or nothing if the connection
        is already lost; by `deadline` (event-loop time) when given."""
        if not self._connected:
            return
        self._connected = False
        self._closing = True
        if not self._lost.done():
            self._client.disconnect()  # written at once; paho then closes the socket
            self._sync_writer()
            budget = self.settings.timeout_s if deadline is None else deadline - self._loop.time()
            with contextlib.suppress(TimeoutError, MqttError):
                async with asyncio.timeout(max(0.1, budget)):
                    await asyncio.shield(self._lost)
        self._drop()  # closed by paho after its DISCONNECT, or by the deadline here

    async def closed(self) -> None:
        """Wait until the connection is lost: raises MqttError then (never returns)."""
        await asyncio.shield(self._lost)
        raise MqttError("the connection was closed")

    async def publish(self, topic: Topic, payload: bytes | str, *, name: str | None = None) -> None:
        """Publish on `topic` of the contract (its QoS and retain flag) under this arm's prefix;
        `name` overrides the topic's full name. Returns once written (QoS 0) or acknowledged."""
        full = name if name is not None else self.topics.name(topic)
        info = self._client.publish(full, payload, topic.qos, topic.retain)
        self._check(info.rc, f"publishing on {full}")
        self._sync_writer()
        if not info.is_published():
            await self._acknowledged(info.mid, f"publishing on {full}")

    async def subscribe(self, topics: Iterable[Topic]) -> list[str]:
        """Subscribe to `topics` at their QoS; the names of those the broker refused (an ACL)."""
        wanted = [(self.topics.name(topic), topic.qos) for topic in topics]
        rc, mid = self._client.subscribe(wanted)
        self._check(rc, "subscribing")
        self._sync_writer()
        codes = await self._acknowledged(mid, "subscribing")
        return [name for (name, _), code in zip(wanted, codes, strict=False) if code.is_failure]

    async def unsubscribe(self, topic: Topic) -> None:
        rc, mid = self._client.unsubscribe(self.topics.name(topic))
        self._check(rc, "unsubscribing")
        self._sync_writer()
        await self._acknowledged(mid, "unsubscribing")

    # -- connecting -------------------------------------------------------------------------

    def _open(self) -> None:
        """In a worker thread: connect (TCP, TLS handshake). CONNECT waits in paho's queue for
        the event loop (`_attach`), which reads first: a broker that refuses the TLS session
        (a client certificate it requires) has said why before anything is written."""
        settings = self.settings
        client = self._client
        client.on_socket_register_write = _later
        try:
            client.connect(settings.host, settings.port, settings.keepalive_s)
        finally:
            client.on_socket_register_write = None  # from now on paho writes in the call
        sock = client.socket()
        if isinstance(sock, socket.socket):
            # Nagle's algorithm would hold a small message until the broker acknowledges the one
            # before: a QoS 0 stream (no PUBACK to carry that acknowledgement) then leaves in
            # bursts at the rate the broker happens to send us something, tens of ms late.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _attach(self) -> None:
        """Watch the connected socket from the event loop."""
        sock = self._client.socket()
        if sock is None:
            raise MqttError(self._log.last_error or "the connection closed while connecting")
        self._attached = True
        self._fd = sock.fileno()
        self._loop.add_reader(self._fd, self._readable)
        self._misc = self._loop.create_task(self._keep_alive())
        self._sync_writer()

    async def _abandon(self, opening: asyncio.Future[None]) -> None:
        """Let a connection attempt end (a worker thread cannot be interrupted), then close it."""
        with contextlib.suppress(Exception):
            async with asyncio.timeout(self.settings.shutdown_timeout_s):
                await asyncio.shield(opening)
        self._detach()
        with contextlib.suppress(Exception):
            self._client.disconnect()  # closes a socket that the attempt left open

    def _detach(self) -> None:
        if self._misc is not None:
            self._misc.cancel()
            self._misc = None
        if self._fd is not None:
            self._loop.remove_reader(self._fd)
            self._loop.remove_writer(self._fd)
            self._fd, self._writing = None, False

    # -- the event loop's calls -------------------------------------------------------------

    def _readable(self) -> None:
        try:
            rc = self._client.loop_read()
            while rc == MQTTErrorCode.MQTT_ERR_SUCCESS and _pending_tls_bytes(self._client):
                rc = self._client.loop_read()  # TLS may hold decrypted bytes the socket doesn't
        except Exception as exc:  # a broken socket or TLS session: the connection is over
            self._fail(MqttError(f"reading from the broker failed: {describe(exc)}"))
            return
        self._sync_writer()

    def _writable(self) -> None:
        try:
            self._client.loop_write()
        except Exception as exc:
            self._fail(MqttError(f"writing to the broker failed: {describe(exc)}"))
            return
        self._sync_writer()

    def _sync_writer(self) -> None:
        """Watch for writability only while paho holds bytes that the socket did not take."""
        wanted = self._fd is not None and self._client.want_write()
        if wanted != self._writing and self._fd is not None:
            if wanted:
                self._loop.add_writer(self._fd, self._writable)
            else:
                self._loop.remove_writer(self._fd)
            self._writing = wanted

    async def _keep_alive(self) -> None:
        while True:
            await asyncio.sleep(_MISC_INTERVAL_S)
            if self._client.loop_misc() != MQTTErrorCode.MQTT_ERR_SUCCESS:
                return  # paho closed the socket: `_on_disconnect` says why
            self._sync_writer()

    # -- paho's callbacks (on the event loop's thread, once attached) -----------------------

    def _on_connect(self, _client: Any, _userdata: Any, _flags: Any, code: Any, _p: Any) -> None:
        if self._connack.done():
            return
        if code.is_failure:
            self._connack.set_exception(MqttConnectError(code))
        else:
            self._connack.set_result(None)

    def _on_disconnect(self, _client: Any, _userdata: Any, _flags: Any, code: Any, _p: Any) -> None:
        if not self._attached:
            return  # in `_open`'s thread: `_attach` reports it
        if self._closing:
            if not self._lost.done():
                self._lost.set_result(None)
        else:
            self._fail(MqttError(f"the connection was lost: {self._log.last_error or code}"))

    def _on_acknowledged(self, _client: Any, _userdata: Any, mid: int, *result: Any) -> None:
        """PUBACK, SUBACK or UNSUBACK (or a QoS 0 message written): its caller goes on."""
        future = self._pending.pop(mid, None)
        if future is not None and not future.done():
            future.set_result(result[0] if result else None)

    def _on_socket_close(self, _client: Any, _userdata: Any, _sock: Any) -> None:
        if self._fd is not None:  # attached: paho closes it on this thread
            self._detach()

    # -- helpers ----------------------------------------------------------------------------

    def _fail(self, exc: MqttError) -> None:
        """The connection is over: every waiting call raises `exc`, `closed` too."""
        self._detach()
        for future in (self._connack, self._lost, *self._pending.values()):
            if not future.done():
                future.set_exception(exc)
                future.exception()  # retrieved: a caller that stopped waiting logs nothing
        self._pending.clear()
        self._drop()

    def _drop(self) -> None:
        """Close the socket without DISCONNECT: the broker publishes the Last Will."""
        self._detach()
        sock = self._client.socket()
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.close()

    def _check(self, rc: MQTTErrorCode, what: str) -> None:
        if rc != MQTTErrorCode.MQTT_ERR_SUCCESS:
            if self._lost.done() and self._lost.exception() is not None:
                raise MqttError(f"{what} failed: {self._lost.exception()}")
            raise MqttError(f"{what} failed: {paho.error_string(rc)}")

    async def _acknowledged(self, mid: int | None, what: str) -> Any:
        """The broker's answer to message `mid`, within `MqttSettings.timeout_s`."""
        assert mid is not None
        if self._lost.done():
            self._lost.exception()
            raise MqttError(f"{what} failed: the connection is lost")
        future = self._pending[mid] = self._loop.create_future()
        try:
            async with asyncio.timeout(self.settings.timeout_s):
                return await future
        except TimeoutError:
            raise MqttError(f"{what}: no answer within {self.settings.timeout_s:g} s") from None
        finally:
            self._pending.pop(mid, None)


def connect_failure(exc: BaseException, settings: MqttSettings) -> tuple[int, str]:
    """The log level and the words for a failed connection attempt: refused credentials are an
    error worth acting on; anything else (no broker, no CONNACK) a warning."""
    broker = f"MQTT broker {settings.address}"
    code = getattr(exc, "rc", None)
    if isinstance(exc, MqttConnectError) and getattr(code, "value", code) in AUTH_REASON_CODES:
        return logging.ERROR, (
            f"{broker} refused the credentials of user {settings.username!r}: {exc}; check "
            "username and password (retrying with backoff)"
        )
    return logging.WARNING, f"cannot connect to {broker}: {describe(exc)}; retrying with backoff"


def describe(exc: BaseException) -> str:
    """An exception in words, with its cause where it has one."""
    cause = exc.__cause__
    text = str(exc) or type(exc).__name__
    return f"{text} ({cause})" if cause is not None and str(cause) else text


class _PahoLog:
    """What paho logs goes to `logger`; the last error is kept: paho reports why a connection
    broke only there (e.g. ``tlsv13 alert certificate required``)."""

    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger
        self.last_error: str | None = None

    def log(self, level: int, message: str, *args: object) -> None:
        if level >= logging.ERROR:
            self.last_error = message % args
        self.logger.log(level, message, *args, stacklevel=2)  # paho's line, not this one


def _later(*_args: object) -> None:
    """paho's write request while `_open` connects: `_attach` writes."""


def _pending_tls_bytes(client: paho.Client) -> bool:
    sock = client.socket()
    pending = getattr(sock, "pending", None)
    return pending is not None and pending() > 0
