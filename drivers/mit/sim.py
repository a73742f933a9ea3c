"""A simulated set of MIT-mode actuators on a python-can bus, for ``armd sim-device mit``.

Each actuator is a `SimulatedActuator` (see `drivers.mit.sim_actuator`, re-exported here).
`SimulatedMitBus` serves them on a bus (`drivers.can_bus.sim.SimulatedBus`; on ``udp_multicast``
with hop_limit 0 unless told otherwise: the frames never leave the host): the receiver thread
hands each frame to the actuators under `lock` and sends their replies at once. MIT actuators
send nothing unasked, so there is no cyclic traffic and no serving task. `serve` / `run` are the
entry points for the command line.

Fault injection: see `drivers.mit.sim_actuator` (hold `SimulatedMitBus.lock` while changing an
actuator that is being served, or accept a frame's worth of race).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
import time
from collections.abc import Sequence
from typing import Self

import can

from drivers.base import Clock
from drivers.can_bus.frame import Frame
from drivers.can_bus.sim import SimulatedBus, open_sim_bus, run_until_signalled
from drivers.mit.models import MotorModel
from drivers.mit.sim_actuator import (
    Corruption,
    SimActuatorConfig,
    SimActuatorFaults,
    SimulatedActuator,
)
from drivers.sim.motor import MotorParams

__all__ = [
    "Corruption",
    "SimActuatorConfig",
    "SimActuatorFaults",
    "SimulatedActuator",
    "SimulatedMitBus",
    "default_master_id",
    "run",
    "serve",
]

log = logging.getLogger(__name__)


def default_master_id(slave_id: int) -> int:
    """The master (feedback) id armd assumes when none is configured: slave id + 0x10, as
    OpenArm sets its Damiao motors (0x01 → 0x11 ... 0x08 → 0x18)."""
    return slave_id + 0x10


class SimulatedMitBus(SimulatedBus):
    """Simulated actuators serving a python-can bus: ``async with SimulatedMitBus(...) as sim``.
    The bus is shut down on exit."""

    def __init__(
        self, bus: can.BusABC, actuators: Sequence[SimulatedActuator], *, label: str = "sim"
    ) -> None:
        self.actuators: dict[int, SimulatedActuator] = {a.slave_id: a for a in actuators}
        if len(self.actuators) != len(actuators):
            raise ValueError(f"duplicate ids in {[a.slave_id for a in actuators]}")
        super().__init__(bus, label=f"simulated MIT actuators ({label})", thread_name="mit-sim-rx")
        self.lock = threading.Lock()
        self.frames_received = 0

    @classmethod
    def create(
        cls,
        interface: str,
        channel: str,
        configs: Sequence[SimActuatorConfig],
        *,
        bitrate: int | None = None,
        hop_limit: int = 0,
        clock: Clock = time.monotonic,
    ) -> Self:
        """Open the bus and build the actuators. Raises DriverOpenError when the bus cannot
        open."""
        bus = open_sim_bus(
            interface, channel, bitrate=bitrate, hop_limit=hop_limit,
            what="simulated MIT actuators",
        )  # fmt: skip
        actuators = [SimulatedActuator(config, clock) for config in configs]
        return cls(bus, actuators, label=f"{interface}:{channel}")

    def actuator(self, slave_id: int) -> SimulatedActuator:
        return self.actuators[slave_id]

    def _receive(self, message: can.Message) -> None:
        """On the receiver thread: every actuator sees every frame (register requests on 0x7FF
        name their motor in the payload)."""
        if message.is_error_frame or message.is_extended_id or message.is_remote_frame:
            return
        data = bytes(message.data or b"")
        with self.lock:
            self.frames_received += 1
            replies = [
                reply
                for actuator in self.actuators.values()
                for reply in actuator.handle(message.arbitration_id, data)
            ]
        self._send(Frame(arbitration_id, payload) for arbitration_id, payload in replies)


def _configs(
    model: MotorModel,
    ids: Sequence[int],
    master_ids: Sequence[int] | None,
    motor: MotorParams | None,
) -> list[SimActuatorConfig]:
    masters = list(master_ids) if master_ids else [default_master_id(i) for i in ids]
    if len(masters) != len(ids):
        raise ValueError(f"{len(ids)} ids but {len(masters)} master ids")
    configs = [
        SimActuatorConfig(slave_id=i, master_id=m, model=model, seed=i)
        for i, m in zip(ids, masters, strict=True)
    ]
    if motor is None:
        return configs
    return [dataclasses.replace(c, motor=motor) for c in configs]


async def serve(
    interface: str,
    channel: str,
    model: MotorModel,
    ids: Sequence[int],
    *,
    master_ids: Sequence[int] | None = None,
    bitrate: int | None = None,
    motor: MotorParams | None = None,
    clock: Clock = time.monotonic,
    stop: asyncio.Event | None = None,
) -> None:
    """Serve simulated actuators `ids` of `model` on a python-can bus (udp_multicast with hop
    limit 0) until `stop` is set (forever when None). Raises DriverOpenError."""
    configs = _configs(model, ids, master_ids, motor)
    async with SimulatedMitBus.create(interface, channel, configs, bitrate=bitrate, clock=clock):
        log.info(
            "simulated %s actuators %s (master ids %s) on %s channel %r",
            model.name,
            list(ids),
            [c.master_id for c in configs],
            interface,
            channel,
        )
        await (stop or asyncio.Event()).wait()


def run(
    interface: str,
    channel: str,
    model: MotorModel,
    ids: Sequence[int],
    *,
    master_ids: Sequence[int] | None = None,
    bitrate: int | None = None,
) -> None:
    """Blocking `serve` for a command line: returns after SIGINT or SIGTERM (bus shut down).

    Raises DriverOpenError when the bus cannot be opened.
    """

    run_until_signalled(
        lambda stop: serve(
            interface, channel, model, ids, master_ids=master_ids, bitrate=bitrate, stop=stop
        )
    )
