"""Simulated CiA 402 drives on a python-can bus, for ``armd sim-device cia402`` and the tests.

`SimulatedCiA402Bus` serves several `SimulatedDrive` nodes (see `drivers.cia402.sim_drive`) on
one canopen `Network`: python-can ``virtual`` in-process, or ``udp_multicast`` across processes
(hop limit 0 unless told otherwise: the frames never leave the host). canopen's notifier thread
receives; a gate in front of canopen's own listener checks every frame addressed to a drive
(NMT: 2 bytes, SDO: 8, SYNC: 0 or 1) and counts the malformed ones instead of passing them on,
hands SDO requests and NMT commands to canopen's SDO servers and NMT slaves, and runs the drives
on SYNC and RPDOs itself. Frames the drives send come back on ``udp_multicast`` (every sender
receives its own): their COB-IDs (TPDO, EMCY, SDO answer, heartbeat) are not listened to.

At entry every node boots (boot-up message, NMT Pre-operational); the heartbeat starts when the
host writes 0x1017. `serve` / `run` are the entry points for the command line.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Self

import can
import canopen
from canopen.network import MessageListener

from drivers.base import Clock
from drivers.can_bus.sim import run_until_signalled, serve_until_stopped
from drivers.can_link import BUS_OPEN_ERRORS, make_bus
from drivers.cia402.objects import COB_RPDO, COB_SDO_RX, COB_SYNC
from drivers.cia402.sim_drive import SimDriveConfig, SimDriveFaults, SimulatedDrive
from drivers.errors import DriverOpenError
from drivers.sim.motor import MotorParams

__all__ = [
    "SimDriveConfig",
    "SimDriveFaults",
    "SimulatedCiA402Bus",
    "SimulatedDrive",
    "run",
    "serve",
]

log = logging.getLogger(__name__)

_RX_POLL_S = 0.02  # s: how long closing may wait for canopen's receiver thread
_NMT_RESET = 0x81
_NMT_PRE_OPERATIONAL = 0x80


class SimulatedCiA402Bus:
    """Simulated drives serving a python-can bus: ``async with SimulatedCiA402Bus(...) as sim``.
    The bus is shut down on exit."""

    def __init__(
        self, bus: can.BusABC, drives: Sequence[SimulatedDrive], *, label: str = "sim"
    ) -> None:
        self.label = f"simulated CiA 402 drives ({label})"
        self.drives: dict[int, SimulatedDrive] = {d.node_id: d for d in drives}
        if len(self.drives) != len(drives):
            raise ValueError(f"duplicate node ids in {[d.node_id for d in drives]}")
        self.network = canopen.Network(bus)
        self.network.NOTIFIER_CYCLE = _RX_POLL_S
        self.network.listeners = [_Gate(self)]
        for drive in drives:
            self.network.add_node(drive.node)
        self.frames_received = 0

    @classmethod
    def create(
        cls,
        interface: str,
        channel: str,
        configs: Sequence[SimDriveConfig],
        *,
        bitrate: int | None = None,
        hop_limit: int = 0,
        clock: Clock = time.monotonic,
    ) -> Self:
        """Open the bus and build the drives. Raises DriverOpenError when the bus cannot open."""
        try:
            bus = make_bus(interface, channel, bitrate=bitrate, hop_limit=hop_limit)
        except BUS_OPEN_ERRORS as exc:
            raise DriverOpenError(
                f"simulated CiA 402 drives: cannot open {interface} channel {channel!r}: {exc}"
            ) from exc
        drives = [SimulatedDrive(config, clock) for config in configs]
        return cls(bus, drives, label=f"{interface}:{channel}")

    def drive(self, node_id: int) -> SimulatedDrive:
        return self.drives[node_id]

    async def __aenter__(self) -> Self:
        self.network.connect()
        for drive in self.drives.values():
            drive.node.nmt.send_command(_NMT_RESET)  # boot-up message
            drive.node.nmt.send_command(_NMT_PRE_OPERATIONAL)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for drive in self.drives.values():
            drive.node.nmt.stop_heartbeat()
        await asyncio.to_thread(self.network.disconnect)

    # -- on canopen's notifier thread -----------------------------------------------------------

    def on_frame(self, can_id: int, data: bytes) -> None:
        self.frames_received += 1
        if can_id == 0:
            if len(data) != 2:
                self._malformed(None)
                return
            self.network.notify(can_id, bytearray(data), 0.0)
        elif can_id == COB_SYNC:
            if len(data) > 1:
                self._malformed(None)
                return
            self._sync()
        elif COB_RPDO[0] <= can_id < COB_RPDO[-1] + 0x80:
            drive = self.drives.get(can_id & 0x7F)
            if drive is not None and not drive.faults.silent:
                with drive.lock:
                    drive.on_rpdo(can_id, data)
        elif COB_SDO_RX < can_id <= COB_SDO_RX + 0x7F:
            drive = self.drives.get(can_id - COB_SDO_RX)
            if drive is None or drive.faults.silent:
                return
            if len(data) != 8:
                self._malformed(drive)
                return
            with drive.lock:
                self.network.notify(can_id, bytearray(data), 0.0)

    def _sync(self) -> None:
        frames: list[tuple[int, bytes]] = []
        for drive in self.drives.values():
            if drive.faults.silent:
                continue
            with drive.lock:
                frames += drive.on_sync()
        for can_id, data in frames:
            try:
                self.network.send_message(can_id, data)
            except can.CanError as exc:
                log.debug("%s: %s", self.label, exc)

    def _malformed(self, drive: SimulatedDrive | None) -> None:
        for target in [drive] if drive is not None else self.drives.values():
            with target.lock:
                target.malformed_frames += 1


class _Gate(MessageListener):
    """canopen's listener, with the frame checks and the drives' own handling in front."""

    def __init__(self, sim: SimulatedCiA402Bus) -> None:
        super().__init__(sim.network)
        self._sim = sim

    def on_message_received(self, msg: can.Message) -> None:
        if msg.is_error_frame or msg.is_remote_frame or msg.is_extended_id:
            return
        try:
            self._sim.on_frame(msg.arbitration_id, bytes(msg.data or b""))
        except Exception:  # the notifier thread must live on: log, keep serving
            log.exception("%s: frame 0x%03X", self._sim.label, msg.arbitration_id)


def _configs(
    ids: Sequence[int], motor: MotorParams | None, positions: Mapping[int, float]
) -> list[SimDriveConfig]:
    motor = motor or MotorParams(max_velocity=6.0)
    return [
        SimDriveConfig(
            node_id=i,
            motor=dataclasses.replace(
                motor, initial_position=positions.get(i, motor.initial_position)
            ),
            serial_number=i,
            seed=i,
        )
        for i in ids
    ]


async def serve(
    interface: str,
    channel: str,
    ids: Sequence[int],
    *,
    bitrate: int | None = None,
    hop_limit: int = 0,
    motor: MotorParams | None = None,
    initial_positions: Mapping[int, float] | None = None,
    clock: Clock = time.monotonic,
    stop: asyncio.Event | None = None,
    on_ready: Callable[[], None] | None = None,
) -> None:
    """Serve simulated drives with node ids `ids` on a python-can bus (udp_multicast: hop limit
    0) until `stop` is set (forever when None). `motor` applies to every drive (its
    counts_per_rev is the EDS's 0x608F), `initial_positions` (rad at the motor, by node id)
    replaces its initial position. `on_ready` runs once the drives serve.

    Raises DriverOpenError when the bus cannot be opened.
    """
    configs = _configs(ids, motor, initial_positions or {})
    sim = SimulatedCiA402Bus.create(
        interface, channel, configs, bitrate=bitrate, hop_limit=hop_limit, clock=clock
    )
    announcement = f"simulated CiA 402 drives {list(ids)} on {interface} channel {channel!r}"
    await serve_until_stopped(sim, announcement, on_ready, stop)


def run(
    interface: str,
    channel: str,
    ids: Sequence[int],
    *,
    bitrate: int | None = None,
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
            ids,
            bitrate=bitrate,
            motor=motor,
            initial_positions=initial_positions,
            stop=stop,
            on_ready=on_ready,
        )
    )
