"""The command line's side of the MQTT API (`armd goal`, `estop`, `watch`): a client connected to
one arm's topics, that knows whether the arm is online before it sends anything.

The daemon's ``availability`` is retained (``online``, or ``offline`` from its Last Will or its
shutdown), so a client learns it right after subscribing: `ArmClient.require_online` fails at
once for an arm that is offline or never connected to this broker, instead of waiting for a
status that will not come.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiomqtt

from armd.api.contract import Topics, encode
from armd.config.broker import MqttSettings, connection_options
from armd.errors import ArmdError

__all__ = [
    "AVAILABILITY_WAIT_S",
    "ArmClient",
    "ArmOfflineError",
    "Message",
    "connect",
]

AVAILABILITY_WAIT_S = 2.0
"""Longest wait for the retained ``availability`` after subscribing, s."""


class ArmOfflineError(ArmdError):
    """The arm's retained availability is ``offline``, or it never connected to the broker."""


@dataclass(frozen=True, slots=True)
class Message:
    """One message of the arm: `topic` relative to ``armd/<name>/`` (``state``, ``goal/status``,
    ...), `payload` parsed (a dict for JSON objects, the text otherwise, None when empty)."""

    topic: str
    payload: Any


class ArmClient:
    """A connected client subscribed to the arm's outbound topics; see `connect`."""

    def __init__(self, client: aiomqtt.Client, arm_name: str) -> None:
        self.client = client
        self.arm_name = arm_name
        self.topics = Topics.for_arm(arm_name)
        self.availability: str | None = None
        self._prefix = self.topics.availability.removesuffix("availability")
        self._messages = self._parsed()

    async def _parsed(self) -> AsyncIterator[Message]:
        async for message in self.client.messages:
            topic = str(message.topic).removeprefix(self._prefix)
            raw = bytes(message.payload) if isinstance(message.payload, bytes | bytearray) else b""
            payload: Any = None
            if raw:
                text = raw.decode("utf-8", errors="replace")
                try:
                    payload = json.loads(text)
                except json.JSONDecodeError:
                    payload = text
            if topic == "availability":
                self.availability = payload if isinstance(payload, str) else None
            yield Message(topic, payload)

    async def next(self) -> Message:
        """The next message of the arm (availability is also kept in `availability`)."""
        return await anext(self._messages)

    async def require_online(self, wait_s: float = AVAILABILITY_WAIT_S) -> list[Message]:
        """Wait for the retained availability; raise `ArmOfflineError` unless it is ``online``.
        Returns the other messages received meanwhile (in order)."""
        early: list[Message] = []
        try:
            async with asyncio.timeout(wait_s):
                while self.availability is None:
                    message = await self.next()
                    if message.topic != "availability":
                        early.append(message)
        except TimeoutError:
            pass
        name = self.arm_name
        if self.availability is None:
            raise ArmOfflineError(
                f"arm {name!r} has never been online on this broker (no retained "
                f"{self.topics.availability}); is `armd run` running with this config?"
            )
        if self.availability != "online":
            raise ArmOfflineError(
                f"arm {name!r} is {self.availability} ({self.topics.availability}); "
                "start the daemon (`armd run`) first"
            )
        return early

    async def publish(self, topic: str, payload: dict[str, Any]) -> None:
        """Publish `payload` as compact JSON at QoS 1 (returns once the broker acknowledged it).
        Compact as the contract's `encode`: a large goal (a trajectory) fits the payload bound."""
        await self.client.publish(topic, encode(payload), qos=1)


@asynccontextmanager
async def connect(settings: MqttSettings) -> AsyncIterator[ArmClient]:
    """Connect, subscribe to the arm's availability, state, goal/status and fault, and yield the
    client."""
    topics = Topics.for_arm(settings.arm_name)
    client = aiomqtt.Client(
        **connection_options(settings),
        identifier=f"armd-cli-{uuid.uuid4().hex[:8]}",
        timeout=settings.timeout_s,
    )
    async with client:
        outbound = (topics.availability, topics.state, topics.goal_status, topics.fault)
        await client.subscribe([(topic, 1) for topic in outbound])
        yield ArmClient(client, settings.arm_name)
