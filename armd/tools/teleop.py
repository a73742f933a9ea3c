"""The leader's side of teleoperation at run time: read the leader arm, stream to the follower.

`run_leader` opens the leader's drivers and never enables them: the devices stay torque-off (the
arm moves by hand) and the driver lifecycle refuses every `write` (`drivers.base.Driver`: OPEN
reads, only ENABLED writes), so no goal position can reach the leader. It then reads the arm on a
fixed schedule (`armd.control.timing.Schedule`, the loop's clock), maps each reading
(`armd.tools.leader`), and
publishes the messages on the follower's ``stream`` topic at QoS 0 with increasing ``seq``.

A reading older than `stale_s` (a bus gone quiet) is not streamed: the follower then stops on its
stream timeout, as it must when its leader is lost. `stop` ends it: one ``end`` message, so the
follower comes to rest and reports ``succeeded``. The follower's statuses for the stream are
logged (rejections rate-limited).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from armd.api.client import ArmClient, Message, connect
from armd.api.contract import encode
from armd.config.broker import MqttSettings
from armd.control.hardware import ArmHardware
from armd.control.timing import PreciseTimer, Schedule
from armd.link.protocol import MeasuredState
from armd.ratelimit import RateLimiter
from armd.tools.leader import LeaderSetup, StreamMapper
from drivers import DriverError

__all__ = ["STATE_WAIT_S", "LeaderStats", "follower_settings", "run_leader", "stale_s"]

log = logging.getLogger(__name__)

STATE_WAIT_S = 5.0
"""`shape`: longest wait for the follower's first ``state`` (the mapping's seed), s."""
FIRST_READ_S = 2.0
"""Longest wait for every leader device to answer once after opening, s."""
RECONNECT_S = 1.0
"""How often a lost leader bus is reopened, s."""


@dataclass
class LeaderStats:
    """What a run did: messages published, readings not streamed (stale), schedule slots missed."""

    published: int = 0
    stale: int = 0
    missed: int = 0


def follower_settings(setup: LeaderSetup, host: str | None, port: int | None) -> MqttSettings:
    """The leader config's broker (or `host`/`port`), addressing the follower's topics."""
    mqtt = setup.arm.mqtt
    return replace(mqtt, arm_name=setup.follower, host=host or mqtt.host, port=port or mqtt.port)


def stale_s(setup: LeaderSetup) -> float:
    """The age of a reading beyond which it is not streamed: the leader config's
    ``safety.stale_hold_s``, at least two read periods."""
    return max(setup.arm.safety.stale_hold_s, 2.0 / setup.rate_hz)


async def run_leader(
    setup: LeaderSetup,
    settings: MqttSettings,
    stop: asyncio.Event,
    stream_id: str,
    hardware: ArmHardware | None = None,
) -> LeaderStats:
    """Stream the leader to the follower until `stop` is set (see the module docstring), from
    `hardware` (default: the leader config's drivers; tests pass drivers they inspect).

    Raises `DriverError` when the leader's drivers cannot be opened or never answer,
    `ArmOfflineError` when the follower is not online, `aiomqtt.MqttError` for the broker."""
    if hardware is None:
        drivers = {name: d.build() for name, d in setup.arm.drivers.items()}
        hardware = ArmHardware(drivers, setup.arm.transmission)
    await hardware.open()  # never enabled: torque off, writes refused
    try:
        await _first_read(hardware)
        async with connect(settings) as client:
            early = await client.require_online()
            streamer = _Streamer(setup, client, stream_id)
            for message in early:
                streamer.note(message)
            reader = asyncio.create_task(streamer.follow())
            try:
                await streamer.run(hardware, stop)
            finally:
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reader
            return streamer.stats
    finally:
        await hardware.close()


async def _first_read(hardware: ArmHardware) -> None:
    """Wait until every device has answered once; `DriverError` naming the silent joints."""
    deadline = time.monotonic() + FIRST_READ_S
    while True:
        measured = await hardware.read()
        silent = [hardware.joint_names[i] for i in np.flatnonzero(measured.timestamp == -np.inf)]
        if not silent:
            return
        if time.monotonic() > deadline:
            raise DriverError(f"leader: no reading from joints {silent} in {FIRST_READ_S:g} s")
        await asyncio.sleep(0.02)


class _Streamer:
    """One stream to the follower: the mapping, the sequence number, the follower's replies."""

    def __init__(self, setup: LeaderSetup, client: ArmClient, stream_id: str) -> None:
        self.setup = setup
        self.client = client
        self.stream_id = stream_id
        self.mapper = StreamMapper(setup)
        self.stats = LeaderStats()
        # from the wall clock in µs (< 2^53 until the year 2255): a restarted leader's messages
        # are newer than its previous run's, which the follower may still hold as the newest
        self.seq = time.time_ns() // 1000
        self._state: dict[str, Any] | None = None
        self._state_seen = asyncio.Event()
        self._rejections = RateLimiter(burst=3, interval_s=5.0)
        self._stale = RateLimiter(burst=1, interval_s=5.0)
        self._reconnect_at = 0.0

    async def run(self, hardware: ArmHardware, stop: asyncio.Event) -> None:
        if self.mapper.needs_seed:
            await self._seed()
        period = 1.0 / self.setup.rate_hz
        timer = PreciseTimer(period)
        schedule = Schedule(period, time.monotonic, timer.sleep_until)
        limit, debug = stale_s(self.setup), log.isEnabledFor(logging.DEBUG)
        try:
            while not stop.is_set():
                await schedule.wait()
                if hardware.failed:
                    await self._reconnect(hardware)
                measured = await hardware.read()
                read_at = time.monotonic()
                if self._fresh(measured, read_at, limit):
                    for body in self.mapper.bodies(measured.position, read_at):
                        await self._publish(body)
                        if debug:  # bench/stream.py: leader read → follower command latency
                            log.debug("stream seq %d: read at monotonic %.6f", self.seq, read_at)
                schedule.advance()
            if self.stats.published:
                await self._publish({"type": "end"})
        finally:
            timer.close()
            self.stats.missed = schedule.missed

    async def _reconnect(self, hardware: ArmHardware) -> None:
        """Reopen a lost leader bus (a serial adapter unplugged and back), at most once a
        second; never enabled."""
        now = time.monotonic()
        if now < self._reconnect_at:
            return
        self._reconnect_at = now + RECONNECT_S
        for name in await hardware.reconnect():
            log.info("leader: driver %r reopened", name)

    async def _publish(self, body: dict[str, Any]) -> None:
        self.seq += 1
        message = {"seq": self.seq, "id": self.stream_id} | body
        await self.client.client.publish(self.client.topics.stream, encode(message), qos=0)
        self.stats.published += 1

    def _fresh(self, measured: MeasuredState, now: float, limit: float) -> bool:
        age = now - measured.timestamp
        old = np.flatnonzero(~(age <= limit))  # NaN-safe: never read counts as stale
        if not len(old):
            return True
        self.stats.stale += 1
        suppressed = self._stale.allow("stale")
        if suppressed is not None:
            names = [self.setup.arm.tree.joint_names[i] for i in old]
            log.warning(
                "leader: no reading of %s within %.0f ms: not streaming (the follower stops "
                "after its stream timeout)%s",
                ", ".join(names),
                limit * 1e3,
                f"; {suppressed} more stale readings" if suppressed else "",
            )
        return False

    async def _seed(self) -> None:
        """`shape`: seed the mapping with the follower's measured joints."""
        try:
            async with asyncio.timeout(STATE_WAIT_S):
                await self._state_seen.wait()
        except TimeoutError:
            raise DriverError(
                f"follower {self.setup.follower!r}: no state in {STATE_WAIT_S:g} s (the shape "
                "mapping starts from it)"
            ) from None
        assert self._state is not None
        joints = self._state.get("joints", {})
        self.mapper.seed({name: float(j["position"]) for name, j in joints.items()})

    async def follow(self) -> None:
        """Read the follower's messages (its state, our stream's statuses) until cancelled."""
        while True:
            self.note(await self.client.next())

    def note(self, message: Message) -> None:
        payload = message.payload
        if message.topic == "state" and isinstance(payload, dict):
            self._state = payload
            self._state_seen.set()
        elif message.topic == "availability":
            log.info("follower %r: %s", self.setup.follower, payload)
        elif message.topic == "goal/status" and isinstance(payload, dict):
            self._status(payload)

    def _status(self, status: dict[str, Any]) -> None:
        if status.get("id") not in (self.stream_id, None):
            return
        text = json.dumps(status)
        if status.get("status") != "rejected":
            log.info("follower %r: %s", self.setup.follower, text)
            return
        suppressed = self._rejections.allow("rejected")
        if suppressed is not None:
            more = f" ({suppressed} more since)" if suppressed else ""
            log.warning("follower %r: %s%s", self.setup.follower, text, more)
