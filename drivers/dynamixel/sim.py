"""A simulated chain of Dynamixel X-series devices behind a pseudo-terminal, speaking Protocol 2.0.

`SimulatedDynamixelChain` serves several IDs on a pty (`drivers.serial_bus.pty_chain`); the
driver, or any Protocol 2.0 tool, opens `chain.port` as if it were a U2D2 adapter. Each device is a
`SimulatedMotor` behind a byte-addressed X-series control table (XM430 layout, addresses 0-255,
with the access rules of the real device): a `SimulatedDynamixel` (`drivers.dynamixel.sim_device`,
re-exported here) that serves every Protocol 2.0 instruction of the X series, latches hardware
errors and honours its Bus Watchdog. Status packets leave after the Return Delay Time (9), one
device after the other for a Sync Read or Bulk Read (in the order the packet lists them) and a
broadcast Ping (in ID order). A device hears only the baud rate its Baud Rate (8) selects: a
client that configured another (standard) baud rate is not understood at all.
"""

from __future__ import annotations

import termios
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TextIO

from drivers.base import Clock
from drivers.dynamixel import protocol as dxl
from drivers.dynamixel.protocol import Instruction, Packet
from drivers.dynamixel.sim_device import DynamixelFaults, SimulatedDynamixel
from drivers.dynamixel.table import return_delay_units
from drivers.serial_bus.pty_chain import (
    PtyChain,
    in_reply_order,
    serve_until_stopped,
    simulated_motors,
)
from drivers.sim.motor import MotorParams

__all__ = ["DynamixelFaults", "SimulatedDynamixel", "SimulatedDynamixelChain", "run"]


class SimulatedDynamixelChain(PtyChain[SimulatedDynamixel, Packet]):
    """Several simulated devices on one pty, served by a background thread (`PtyChain`).

    Use as a context manager (or `start()` / `stop()`); `port` is the path to open. Test hooks:
    `device(id)` (its `faults` and `motor`), `inject_hardware_error`, `inject_garbage`,
    `disconnect`, `read_table` and `write_table`. All of them are thread-safe.
    """

    thread_name = "dynamixel-sim"

    def __init__(
        self,
        ids: Sequence[int] = (1,),
        *,
        clock: Clock = time.monotonic,
        motor_params: MotorParams | None = None,
        initial_positions: Mapping[int, float] | None = None,
        baudrate: int = 1_000_000,
        model_number: int = 1020,
        return_delay_s: float = 0.0005,
        reboot_s: float = 0.05,
        model_wire_time: bool = False,
        seed: int = 0,
    ) -> None:
        params = motor_params or MotorParams(counts_per_rev=dxl.COUNTS_PER_REV)
        motors = simulated_motors(ids, dxl.MAX_ID, params, initial_positions, clock, seed)
        baud_index = dxl.baud_rate_index(baudrate)  # raises ValueError
        devices = {
            device_id: SimulatedDynamixel(
                device_id,
                motor,
                model_number=model_number,
                return_delay=return_delay_units(return_delay_s),
                baud_rate=baud_index,
                reboot_s=reboot_s,
            )
            for device_id, motor in motors.items()
        }
        super().__init__(devices, baudrate=baudrate, model_wire_time=model_wire_time)

    # -- test hooks -----------------------------------------------------------------------------

    def inject_hardware_error(self, device_id: int, bits: int) -> None:
        with self.device(device_id) as device:
            device.inject_hardware_error(bits)

    def read_table(self, device_id: int, address: int, length: int) -> bytes:
        with self.device(device_id) as device:
            return device.read_range(address, length)[1]

    def write_table(self, device_id: int, address: int, data: bytes) -> int:
        """Write as a Write instruction would; returns the status error number."""
        with self.device(device_id) as device:
            return device.write_range(address, data)

    # -- the protocol ---------------------------------------------------------------------------

    def _new_parser(self) -> dxl.PacketParser:
        return dxl.PacketParser(keep_bad_crc=True)

    def _receive(self, data: bytes, slave: int, now: float) -> None:
        rate = self._client_baudrate(slave) if data else None
        for packet in self._parser.feed(data):
            self._dispatch(packet, now, rate)

    @staticmethod
    def _client_baudrate(slave: int) -> int | None:
        """The baud rate the client configured, bps; None when termios has no name for it."""
        speed = termios.tcgetattr(slave)[5]
        for rate in dxl.BAUD_RATES.values():
            if getattr(termios, f"B{rate}", None) == speed:
                return rate
        return None

    def _dispatch(self, packet: Packet, now: float, client_baudrate: int | None) -> None:
        """Hand `packet` to the devices it is for, and queue their replies one after the other.
        At another baud rate than its own a device hears only noise (unknown rates pass)."""
        if packet.is_status:
            return
        devices = sorted(
            (d for d in self._devices.values() if client_baudrate in (None, d.baudrate)),
            key=lambda d: d.id,
        )
        if packet.id != dxl.BROADCAST_ID:
            devices = [d for d in devices if d.id == packet.id]
        elif packet.instruction in _ORDER_OF_REPLIES:
            in_reply_order(devices, list(_ORDER_OF_REPLIES[packet.instruction](packet.params)))
        self._answer(((device, device.handle(packet, now)) for device in devices), now)


# Who answers first: the order in which a Sync Read or a Bulk Read lists the IDs.
_ORDER_OF_REPLIES: dict[int, Callable[[bytes], bytes]] = {
    Instruction.SYNC_READ: lambda params: params[4:],
    Instruction.BULK_READ: lambda params: params[0::5],
}


def run(
    ids: Sequence[int] = (1, 2, 3, 4, 5, 6),
    baudrate: int = 1_000_000,
    *,
    link: str | None = None,
    model_number: int = 1020,
    return_delay_s: float = 0.0005,
    model_wire_time: bool = True,
    motor_params: MotorParams | None = None,
    initial_positions: Mapping[int, float] | None = None,
    stop: threading.Event | None = None,
    out: TextIO | None = None,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve a simulated chain until `stop` is set (or Ctrl-C); for ``armd sim-device dynamixel``
    (`link`, `on_ready`, `out`: see `serve_until_stopped`). Point the `dynamixel` driver at it
    with the same baud rate; its defaults work (on a pty its reply margin is 50 ms: this process
    is scheduled like any other). Raises ValueError for a baud rate the X series does not offer.
    """

    with SimulatedDynamixelChain(
        ids, baudrate=baudrate, model_number=model_number, return_delay_s=return_delay_s,
        model_wire_time=model_wire_time, motor_params=motor_params,
        initial_positions=initial_positions,
    ) as chain:  # fmt: skip
        serve_until_stopped(chain, link=link, stop=stop, on_ready=on_ready, out=out)
