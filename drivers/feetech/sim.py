"""A simulated chain of Feetech STS3215 servos behind a pseudo-terminal, speaking the SCS/STS
protocol byte for byte.

`SimulatedFeetechChain` opens a pty (`os.openpty`) and serves several IDs from a background thread
(a blocking `select` loop on the master side with a stop event); the driver, Feetech's own SDK, or
any SCS/STS tool opens `chain.port` (the pty's slave path) as if it were a USB adapter (the
SO-101's Waveshare/Feetech board). Each servo is a `SimulatedServo` (`drivers.feetech.sim_device`,
re-exported here), an STS3215 unless `models` makes it an SCS0009. Status packets leave after the
Return Delay Time (7), one servo after the other for a Sync Read or a broadcast Ping.

Timing uses the wall clock (`time.monotonic`); the motors use the injected `clock`. A pty does not
throttle bytes to the baud rate; with `model_wire_time` the replies are delayed by their wire time.
A client that configured another (standard) baud rate than the chain's is not understood at all.
"""

from __future__ import annotations

import dataclasses
import sys
import termios
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TextIO

from drivers.base import Clock
from drivers.feetech import protocol as ft
from drivers.feetech.protocol import Instruction, Packet
from drivers.feetech.sim_device import FeetechFaults, SimulatedServo
from drivers.pty_chain import PtyChain, serve_until_stopped
from drivers.sim.motor import MotorParams, SimulatedMotor

__all__ = ["FeetechFaults", "SimulatedFeetechChain", "SimulatedServo", "run"]

# An STS3215 (12 V, 1:345): ~0.22 s/60° unloaded, i.e. about 4.7 rad/s.
STS3215_MOTOR = MotorParams(max_velocity=4.7, max_acceleration=60.0, counts_per_rev=4096)


class SimulatedFeetechChain(PtyChain[SimulatedServo]):
    """Several simulated STS3215 on one pty, served by a background thread (`PtyChain`).

    Use as a context manager (or `start()` / `stop()`); `port` is the path to open. Test hooks:
    `device(id)` (its `faults` and `motor`), `inject_garbage`, `disconnect`, `read_table`,
    `write_table` and `power_cycle`. All of them are thread-safe.
    """

    thread_name = "feetech-sim"

    def __init__(
        self,
        ids: Sequence[int] = (1,),
        *,
        clock: Clock = time.monotonic,
        motor_params: MotorParams | None = None,
        initial_positions: Mapping[int, float] | None = None,
        baudrate: int = 1_000_000,
        return_delay_s: float = 0.0005,
        model_wire_time: bool = False,
        seed: int = 0,
        models: Mapping[int, str] | None = None,
    ) -> None:
        if not ids or len(set(ids)) != len(ids) or not all(0 <= i <= ft.MAX_ID for i in ids):
            raise ValueError(f"ids {list(ids)}: need distinct ids in [0, {ft.MAX_ID}]")
        params = motor_params or STS3215_MOTOR
        positions = initial_positions or {}
        devices: dict[int, SimulatedServo] = {}
        for n, device_id in enumerate(ids):
            motor_p = dataclasses.replace(params, initial_position=positions.get(device_id, 0.0))
            motor = SimulatedMotor(motor_p, clock, seed=seed + n)
            delay = round(return_delay_s / 2e-6)
            model = (models or {}).get(device_id, "sts3215")
            devices[device_id] = SimulatedServo(device_id, motor, return_delay=delay, model=model)
        super().__init__(devices, baudrate=baudrate, model_wire_time=model_wire_time)
        self._parser = ft.PacketParser()

    # -- test hooks -----------------------------------------------------------------------------

    def read_table(self, device_id: int, address: int, length: int) -> bytes:
        with self.device(device_id) as device:
            return device.read_range(address, length, time.monotonic())

    def write_table(self, device_id: int, address: int, data: bytes) -> None:
        """Write as a Write instruction would (same access rules)."""
        with self.device(device_id) as device:
            device.write_range(address, data, time.monotonic())

    def power_cycle(self, device_id: int) -> None:
        with self.device(device_id) as device:
            device.power_cycle(time.monotonic())

    # -- the protocol ---------------------------------------------------------------------------

    def _on_start(self) -> None:
        self._parser = ft.PacketParser()

    def _receive(self, data: bytes, slave: int, now: float) -> None:
        if data and not self._client_baud_matches(slave):
            return  # at another baud rate the servos only hear noise
        for packet in self._parser.feed(data):
            self._dispatch(packet, now)

    def _tick(self, now: float) -> None:
        for device in self._devices.values():
            device.tick(now)

    def _wire_time_s(self, length: int) -> float:
        return ft.wire_time_s(length, self.baudrate)

    def _client_baud_matches(self, slave: int) -> bool:
        """Whether the client configured the chain's baud rate (unknown rates are accepted)."""
        expected = getattr(termios, f"B{self.baudrate}", None)
        return expected is None or termios.tcgetattr(slave)[5] == expected

    def _dispatch(self, packet: Packet, now: float) -> None:
        devices = sorted(self._devices.values(), key=lambda d: d.id)
        if packet.id == ft.BROADCAST_ID and packet.code == Instruction.SYNC_READ:
            order = list(packet.params[2:])
            devices.sort(key=lambda d: order.index(d.id) if d.id in order else len(order))
        elif packet.id != ft.BROADCAST_ID:
            devices = [d for d in devices if d.id == packet.id]
        self._answer(((device, device.handle(packet, now)) for device in devices), now)


def run(
    ids: Sequence[int] = (1, 2, 3, 4, 5, 6),
    baudrate: int = 1_000_000,
    *,
    link: str | None = None,
    return_delay_s: float = 0.0005,
    model_wire_time: bool = True,
    motor_params: MotorParams | None = None,
    initial_positions: Mapping[int, float] | None = None,
    stop: threading.Event | None = None,
    out: TextIO | None = None,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve a simulated chain until `stop` is set (or Ctrl-C); for ``armd sim-device feetech``.

    Once the chain is ready, `on_ready(port)` runs; by default it prints the pty path (one line,
    flushed) on `out`. With `link`, also creates a symlink at that path (replacing an existing
    symlink, never a regular file) and removes it on exit. Point the `feetech` driver at it with
    the same baud rate. `motor_params` (default an STS3215's) and `initial_positions` (rad at
    the shaft, by id; default 0) shape the motors.
    """

    def print_port(port: str) -> None:
        print(port, file=out or sys.stdout, flush=True)

    with SimulatedFeetechChain(
        ids, baudrate=baudrate, return_delay_s=return_delay_s, model_wire_time=model_wire_time,
        motor_params=motor_params, initial_positions=initial_positions,
    ) as chain:  # fmt: skip
        serve_until_stopped(chain, link=link, on_ready=on_ready or print_port, stop=stop)
