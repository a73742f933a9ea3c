"""A simulated ODrive (firmware v0.6 CAN Simple) with one or more axes on a python-can bus.

Each axis is a `SimulatedAxis` (see `drivers.odrive.sim_axis`, re-exported here): it answers the
frames of `drivers.odrive.protocol`, sends heartbeats and encoder estimates at its configured
rates, latches errors and honours its watchdog. `SimulatedODrive` puts axes on a bus
(`drivers.can_bus.sim.SimulatedBus`) and serves them from an asyncio task; `serve` / `run` are
the entry points for ``armd sim-device odrive``.

Fault injection: set the fields of `SimAxisFaults` (silence, dropped, delayed or corrupt replies),
of ``axis.motor.faults`` (``fault_code`` is reported as ODrive axis error bits; frozen encoder;
stuck shaft), or call `SimulatedAxis.raise_error`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import heapq
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Self

import can

from drivers.base import Clock
from drivers.can_bus.link import message_to_frame
from drivers.can_bus.sim import (
    SimulatedBus,
    open_sim_bus,
    run_until_signalled,
    serve_until_stopped,
)
from drivers.odrive import protocol as proto
from drivers.odrive.sim_axis import Corruption, SimAxisConfig, SimAxisFaults, SimulatedAxis
from drivers.sim.motor import MotorParams

__all__ = [
    "Corruption",
    "SimAxisConfig",
    "SimAxisFaults",
    "SimulatedAxis",
    "SimulatedODrive",
    "run",
    "serve",
]

log = logging.getLogger(__name__)

_MAX_IDLE_WAIT_S = 0.05
_MIN_WAIT_S = 0.0002


class SimulatedODrive(SimulatedBus):
    """Simulated axes serving a python-can bus: ``async with SimulatedODrive.create(...) as sim``.

    A reader thread hands received frames to an asyncio task that dispatches them to the axes and
    sends their replies and cyclic messages. The bus is shut down on exit.
    """

    def __init__(
        self, bus: can.BusABC, axes: Sequence[SimulatedAxis], *, clock: Clock = time.monotonic
    ) -> None:
        self.clock = clock
        self.axes: dict[int, SimulatedAxis] = {axis.node_id: axis for axis in axes}
        if len(self.axes) != len(axes):
            raise ValueError(f"duplicate node ids in {[a.node_id for a in axes]}")
        super().__init__(bus, label="simulated ODrive", thread_name="odrive-sim-rx")
        self._inbox: asyncio.Queue[can.Message] = asyncio.Queue()
        self._delayed: list[tuple[float, int, proto.Frame]] = []
        self._sequence = 0
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def create(
        cls,
        interface: str,
        channel: str,
        configs: Sequence[SimAxisConfig],
        *,
        bitrate: int | None = None,
        clock: Clock = time.monotonic,
    ) -> Self:
        """Open the bus and build the axes. Raises DriverOpenError when the bus cannot open."""
        bus = open_sim_bus(interface, channel, bitrate=bitrate, what="simulated ODrive")
        return cls(bus, [SimulatedAxis(config, clock) for config in configs], clock=clock)

    def axis(self, node_id: int) -> SimulatedAxis:
        return self.axes[node_id]

    def _start(self) -> None:
        self._task = asyncio.create_task(self._serve(), name="odrive-sim")

    async def _stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _receive(self, message: can.Message) -> None:
        """On the receiver thread: hand the message to the serving task."""
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._inbox.put_nowait, message)

    async def _serve(self) -> None:
        while True:
            self._send_due()
            while not self._inbox.empty():
                self._dispatch(self._inbox.get_nowait())
            wait_s = min(self._next_wakeup() - self.clock(), _MAX_IDLE_WAIT_S)
            try:
                # A floor on the wait: a clock that does not advance must not spin the loop. Not
                # asyncio.wait_for: before Python 3.12 it swallows a cancellation that arrives as
                # a message does, and closing then waits forever for this task.
                async with asyncio.timeout(max(wait_s, _MIN_WAIT_S)):
                    message = await self._inbox.get()
            except TimeoutError:
                continue
            self._dispatch(message)

    def _dispatch(self, message: can.Message) -> None:
        if message.is_error_frame or message.is_extended_id:
            return
        node_id, _ = proto.split_id(message.arbitration_id)
        axis = self.axes.get(node_id)
        if axis is None:
            return
        self._emit(axis, axis.handle(message_to_frame(message)))

    def _send_due(self) -> None:
        for axis in self.axes.values():
            self._emit(axis, axis.poll())
        now = self.clock()
        while self._delayed and self._delayed[0][0] <= now:
            self._send([heapq.heappop(self._delayed)[2]])

    def _next_wakeup(self) -> float:
        wakeups = [axis.next_deadline() for axis in self.axes.values()]
        if self._delayed:
            wakeups.append(self._delayed[0][0])
        return min(wakeups, default=math.inf)

    def _emit(self, axis: SimulatedAxis, frames: list[proto.Frame]) -> None:
        delay = axis.faults.reply_delay_s
        for frame in frames:
            if delay > 0:
                self._sequence += 1
                heapq.heappush(self._delayed, (self.clock() + delay, self._sequence, frame))
            else:
                self._send([frame])


async def serve(
    interface: str,
    channel: str,
    node_ids: Sequence[int],
    *,
    bitrate: int | None = None,
    heartbeat_period_s: float = 0.1,
    encoder_period_s: float = 0.01,
    watchdog_timeout_s: float | None = None,
    motor: MotorParams | None = None,
    initial_positions: Mapping[int, float] | None = None,
    clock: Clock = time.monotonic,
    stop: asyncio.Event | None = None,
    on_ready: Callable[[], None] | None = None,
) -> None:
    """Serve simulated ODrive axes `node_ids` on a python-can bus until `stop` is set (forever
    when None, i.e. until cancelled). Periods and timeouts in s; `motor` applies to every axis,
    `initial_positions` (rad at the motor, by node id; default 0) replaces its initial position.
    `on_ready` runs once the bus is open and the axes serve.

    Raises DriverOpenError when the bus cannot be opened.
    """
    configs = _configs(
        node_ids, heartbeat_period_s, encoder_period_s, watchdog_timeout_s, motor,
        initial_positions,
    )  # fmt: skip
    sim = SimulatedODrive.create(interface, channel, configs, bitrate=bitrate, clock=clock)
    announcement = f"simulated ODrive axes {list(node_ids)} on {interface} channel {channel!r}"
    await serve_until_stopped(sim, announcement, on_ready, stop)


def run(
    interface: str,
    channel: str,
    node_ids: Sequence[int],
    *,
    bitrate: int | None = None,
    heartbeat_period_s: float = 0.1,
    encoder_period_s: float = 0.01,
    watchdog_timeout_s: float | None = None,
    motor: MotorParams | None = None,
    initial_positions: Mapping[int, float] | None = None,
    on_ready: Callable[[], None] | None = None,
) -> None:
    """Blocking `serve` for a command line: returns after SIGINT or SIGTERM (bus shut down).

    Raises DriverOpenError when the bus cannot be opened.
    """
    run_until_signalled(
        lambda stop: serve(
            interface,
            channel,
            node_ids,
            bitrate=bitrate,
            heartbeat_period_s=heartbeat_period_s,
            encoder_period_s=encoder_period_s,
            watchdog_timeout_s=watchdog_timeout_s,
            motor=motor,
            initial_positions=initial_positions,
            stop=stop,
            on_ready=on_ready,
        )
    )


def _configs(
    node_ids: Sequence[int],
    heartbeat_period_s: float,
    encoder_period_s: float,
    watchdog_timeout_s: float | None,
    motor: MotorParams | None,
    initial_positions: Mapping[int, float] | None,
) -> list[SimAxisConfig]:
    """One axis per node id, `motor` (default `MotorParams()`) with its initial position."""
    motor = motor or MotorParams()
    positions = initial_positions or {}
    return [
        SimAxisConfig(
            node_id=node_id,
            motor=dataclasses.replace(
                motor, initial_position=positions.get(node_id, motor.initial_position)
            ),
            heartbeat_period_s=heartbeat_period_s,
            encoder_period_s=encoder_period_s,
            watchdog_timeout_s=watchdog_timeout_s,
            seed=node_id,
        )
        for node_id in node_ids
    ]
