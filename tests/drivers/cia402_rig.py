"""What the cia402 driver tests share: simulated drives on a `virtual` channel, the driver's params
(with the loop's period and limits, as armd's wiring gives them), and a read → write tick."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from drivers import DeviceCommand, DeviceState, LoopContext
from drivers.can_link import make_bus
from drivers.cia402.driver import CiA402Driver, CiA402Params
from drivers.cia402.sim import SimDriveConfig, SimulatedCiA402Bus, SimulatedDrive
from drivers.sim.motor import MotorParams
from tests.realtime import at_sim_priority

__all__ = [
    "COUNTS",
    "PERIOD_S",
    "QUANTUM",
    "START",
    "drive_config",
    "eventually",
    "params",
    "simulated",
    "tick",
]

START = {1: 0.7, 2: -1.2}  # initial shaft positions, rad
COUNTS = 131072  # increments per revolution (the EDS's 0x608F)
QUANTUM = 2 * math.pi / COUNTS  # rad
PERIOD_S = 0.004


def drive_config(node_id: int, **motor: Any) -> SimDriveConfig:
    values: dict[str, Any] = {"max_velocity": 6.0, "initial_position": START.get(node_id, 0.0)}
    values.update(motor)
    return SimDriveConfig(node_id, MotorParams(**values), serial_number=node_id)


def params(channel: str, **overrides: Any) -> CiA402Params:
    values: dict[str, Any] = {
        "interface": "virtual",
        "channel": channel,
        "heartbeat_ms": 50,
        "heartbeat_timeout_ms": 5000,
        "sdo_timeout_s": 1.0,
        "state_timeout_s": 3.0,
        "open_timeout_s": 5.0,
        "devices": {
            "shoulder": {
                "node_id": 1,
                "identity": {"vendor_id": 0xA4D, "product_code": 0x402},
                "torque_limit": 1.5,
                "following_error_window": 0.25,
                "quick_stop_option": 6,
            },
            "elbow": {"node_id": 2, "disable": "disable_operation"},
        },
    }
    values.update(overrides)
    limits = {"shoulder": (-3.0, 3.0), "elbow": (2.5, -2.5)[::-1]}
    given = CiA402Params.model_validate(values)
    result = CiA402Driver.with_loop(given, LoopContext(PERIOD_S, limits))
    assert isinstance(result, CiA402Params)
    return result


@asynccontextmanager
async def simulated(channel: str, *drives: SimulatedDrive) -> AsyncIterator[SimulatedCiA402Bus]:
    """The drives (by default nodes 1 and 2) served on `channel`, and the test meanwhile, at
    real-time priority (`at_sim_priority`): the drives answer from the test's own process, its
    event loop and threads, and a driver started here (its threads inherit it) talks to them as
    the control process and an ``armd sim-device`` would. At normal priority, on a machine
    loaded to 9 (six workers beside `stress-ng --cpu 2`), an SDO answer took over the driver's
    1 s deadline. Nothing here polls without sleeping, so the priority costs the machine
    nothing but the answers' own work."""
    drives = drives or (SimulatedDrive(drive_config(1)), SimulatedDrive(drive_config(2)))
    with at_sim_priority():
        async with SimulatedCiA402Bus(make_bus("virtual", channel), drives) as sim:
            yield sim


async def eventually(
    check: Callable[[], Awaitable[bool]], what: str, timeout_s: float = 5.0
) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(PERIOD_S)


async def tick(driver: CiA402Driver, targets: dict[str, float]) -> dict[str, DeviceState]:
    states = await driver.read()
    await driver.write({name: DeviceCommand(t) for name, t in targets.items()})
    await asyncio.sleep(PERIOD_S)
    return dict(states)
