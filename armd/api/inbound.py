"""Inbound MQTT messages, from bytes to the daemon's callbacks: goals and e-stop commands are
parsed (`armd.api.payloads`) as paho reads them and handed over synchronously, in arrival order.

What the daemon never sees is answered here with a ``rejected`` status: a payload that does not
parse, and a retained goal (it would replay an old command on every reconnect). The e-stop fails
safe: anything but a well-formed, non-retained reset engages it, whatever went wrong.

A ``payload`` message (the load at the tool link) goes to the daemon parsed; a malformed one is
answered with ``rejected`` and changes nothing.

Stream messages (``stream``, QoS 0) go to the daemon parsed or as their `Rejection`: the daemon
answers both, rate-limited (a 250 Hz stream of bad messages must not flood ``goal/status``). A
retained stream message is dropped with a rate-limited warning: a stale target replayed to every
new subscriber must not move the arm, and at loop rate one status each would be a flood.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from typing import TypeVar

from armd.api.contract import Topics
from armd.api.load_payloads import parse_load
from armd.api.payloads import parse_estop, parse_goal
from armd.api.session import Message
from armd.api.stream_payloads import parse_stream
from armd.link.messages import EstopCommand, Goal, Rejection, StreamMessage, ToolLoad
from armd.ratelimit import RateLimiter

__all__ = ["Inbound", "call_safely"]

_log = logging.getLogger(__name__)
_T = TypeVar("_T")


def call_safely(callback: Callable[[_T], None], value: _T, limits: RateLimiter) -> None:
    """Call a daemon callback; its bug is logged (rate-limited) and must not take the MQTT API
    down with it."""
    try:
        callback(value)
    except Exception:
        if limits.allow("callback") is not None:
            _log.exception("MQTT: handler %r failed on %r", callback, value)


class Inbound:
    """The handler of every inbound message (`MqttSession`'s `on_message`).

    Goals are validated against `joint_names` and `link_names`; pose goals without a link get
    `default_link`. `reject(topic, rejection)` answers what is refused here. `on_stream` (None:
    stream messages are ignored) takes stream messages, parsed or refused.
    """

    def __init__(
        self,
        topics: Topics,
        *,
        joint_names: Collection[str],
        link_names: Collection[str],
        default_link: str,
        on_goal: Callable[[Goal], None],
        on_estop: Callable[[EstopCommand], None],
        reject: Callable[[str, Rejection], None],
        on_stream: Callable[[StreamMessage | Rejection], None] | None = None,
        on_load: Callable[[ToolLoad], None] | None = None,
    ) -> None:
        self.topics = topics
        self._joint_order = tuple(joint_names)
        self._link_names = tuple(link_names)
        self._default_link = default_link
        self._on_goal = on_goal
        self._on_estop = on_estop
        self._reject = reject
        self._on_stream = on_stream
        self._on_load = on_load
        self._limits = RateLimiter()

    def __call__(self, message: Message) -> None:
        """Called by paho for each inbound message as it is read (before the QoS 1 PUBACK), so
        a flood is paced by TCP instead of growing a queue. Never raises: an exception here
        would drop the connection."""
        try:
            payload = message.payload
            data = bytes(payload) if isinstance(payload, bytes | bytearray) else b""
            topic = message.topic
            if topic == self.topics.estop:
                self._deliver_estop(data, retained=message.retain)
            elif topic == self.topics.stream:
                self._deliver_stream(data, retained=message.retain)
            elif message.retain:
                self._reject_retained(topic, data)
            elif topic == self.topics.goal:
                self._deliver_goal(data)
            elif topic == self.topics.payload and self._on_load is not None:
                self._deliver_load(data)
        except Exception as exc:
            if self._limits.allow("inbound") is not None:
                _log.exception("MQTT: failed to handle a message on %s", message.topic)
            if message.topic == self.topics.estop:  # fail safe, whatever went wrong
                engage = EstopCommand(True, f"internal error: {type(exc).__name__}: {exc}")
                call_safely(self._on_estop, engage, self._limits)

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
            call_safely(self._on_goal, goal, self._limits)

    def _deliver_load(self, data: bytes) -> None:
        """A load at the tool link: applied, or refused with its reason (changing nothing)."""
        load = parse_load(data)
        if isinstance(load, Rejection):
            self._reject(self.topics.payload, load)
        elif self._on_load is not None:
            call_safely(self._on_load, load, self._limits)

    def _deliver_stream(self, data: bytes, *, retained: bool) -> None:
        if self._on_stream is None:
            return
        if retained:
            suppressed = self._limits.allow("stream-retained")
            if suppressed is not None:
                _log.warning(
                    "MQTT: dropped a retained message on %s (%d more since the last warning): "
                    "clear it (publish an empty retained payload) and publish without retain",
                    self.topics.stream,
                    suppressed,
                )
            return
        message = parse_stream(
            data,
            joint_names=self._joint_order,
            link_names=self._link_names,
            default_link=self._default_link,
        )
        call_safely(self._on_stream, message, self._limits)

    def _deliver_estop(self, data: bytes, *, retained: bool = False) -> None:
        """Anything but a well-formed reset engages the e-stop; a malformed payload is also
        answered with ``rejected`` saying what was wrong and that the e-stop is engaged."""
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
        call_safely(self._on_estop, command, self._limits)

    def _reject_retained(self, topic: str, data: bytes) -> None:
        """A retained goal would be replayed on every reconnect: refuse it, with its id."""
        parsed = self._parse_goal(data)
        goal_id = parsed.goal_id if parsed is not None else None
        reason = f"retain: retained messages are not accepted on {topic}; publish without retain"
        self._reject(topic, Rejection(goal_id, reason))
