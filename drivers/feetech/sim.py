"""A simulated chain of Feetech STS3215 servos behind a pseudo-terminal, speaking the SCS/STS
protocol byte for byte.

`SimulatedFeetechChain` serves several IDs on a pty (`drivers.serial_bus.pty_chain`); the driver,
Feetech's own SDK, or any SCS/STS tool opens `chain.port` as if it were a USB adapter (the
SO-101's Waveshare/Feetech board). Each servo is a `SimulatedServo` (`drivers.feetech.sim_device`,
re-exported here), an STS3215 unless `models` makes it an SCS0009. Status packets leave after the
Return Delay Time (7), one servo after the other for a Sync Read or a broadcast Ping. A client
that configured another (standard) baud rate than the chain's is not understood at all.
"""

from __future__ import annotations

import termios
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TextIO

from drivers.base import Clock
from drivers.feetech import protocol as ft
from drivers.feetech.protocol import Instruction, Packet
from drivers.feetech.sim_device import FeetechFaults, SimulatedServo
from drivers.serial_bus.pty_chain import (
    PtyChain,
    in_reply_order,
    serve_until_stopped,
    simulated_motors,
)
from drivers.sim.motor import MotorParams

__all__ = ["FeetechFaults", "SimulatedFeetechChain", "SimulatedServo", "run"]

# An STS3215 (12 V, 1:345): ~0.22 s/60° unloaded, i.e. about 4.7 rad/s.
STS3215_MOTOR = MotorParams(max_velocity=4.7, max_acceleration=60.0, counts_per_rev=4096)


class SimulatedFeetechChain(PtyChain[SimulatedServo, Packet]):
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
        motors = simulated_motors(
            ids, ft.MAX_ID, motor_params or STS3215_MOTOR, initial_positions, clock, seed
        )
        devices = {
            device_id: SimulatedServo(
                device_id,
                motor,
                return_delay=round(return_delay_s / 2e-6),
                model=(models or {}).get(device_id, "sts3215"),
            )
            for device_id, motor in motors.items()
        }
        super().__init__(devices, baudrate=baudrate, model_wire_time=model_wire_time)

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

    def _new_parser(self) -> ft.PacketParser:
        return ft.PacketParser()

    def _receive(self, data: bytes, slave: int, now: float) -> None:
        if data and not self._client_baud_matches(slave):
            return  # at another baud rate the servos only hear noise
        for packet in self._parser.feed(data):
            self._dispatch(packet, now)

    def _client_baud_matches(self, slave: int) -> bool:
        """Whether the client configured the chain's baud rate (unknown rates are accepted)."""
        expected = getattr(termios, f"B{self.baudrate}", None)
        return expected is None or termios.tcgetattr(slave)[5] == expected

    def _dispatch(self, packet: Packet, now: float) -> None:
        devices = sorted(self._devices.values(), key=lambda d: d.id)
        if packet.id == ft.BROADCAST_ID and packet.code == Instruction.SYNC_READ:
            in_reply_order(devices, list(packet.params[2:]))
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
    """Serve a simulated chain until `stop` is set (or Ctrl-C); for ``armd sim-device feetech``
    (`link`, `on_ready`, `out`: see `serve_until_stopped`). Point the `feetech` driver at it with
    the same baud rate. `motor_params` (default an STS3215's) and `initial_positions` (rad at
    the shaft, by id; default 0) shape the motors.
    """

    with SimulatedFeetechChain(
        ids, baudrate=baudrate, return_delay_s=return_delay_s, model_wire_time=model_wire_time,
        motor_params=motor_params, initial_positions=initial_positions,
    ) as chain:  # fmt: skip
        serve_until_stopped(chain, link=link, stop=stop, on_ready=on_ready, out=out)
