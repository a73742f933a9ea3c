"""The servo-bus driver's configuration steps wait out lost replies as its link's commands do
(`ServoBusDriver`: open pings the silent servos again, pass after pass; enable's status read is
read again while a device is missing; after clearing faults the statuses are read back), on the
real Dynamixel driver against a simulated chain whose servo drops replies on purpose; disabling,
a safety action, reports a silent servo without that patience.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from drivers import DriverIOError, DriverTimeoutError
from drivers.dynamixel.driver import DynamixelDriver, DynamixelParams
from drivers.dynamixel.protocol import Addr, HardwareError
from drivers.dynamixel.sim import SimulatedDynamixelChain
from drivers.serial_bus.link import PTY_COMMAND_PATIENCE_S

DEVICES = {"shoulder": {"id": 1}, "elbow": {"id": 2}}


@pytest.fixture
def chain() -> Iterator[SimulatedDynamixelChain]:
    with SimulatedDynamixelChain([1, 2], reboot_s=0.05) as chain:
        yield chain


def driver(chain: SimulatedDynamixelChain) -> DynamixelDriver:
    params = {
        "port": chain.port,
        "devices": DEVICES,
        "reply_margin_s": 0.02,
        "bus_watchdog_s": None,
        "retries": 0,
    }
    return DynamixelDriver(DynamixelParams.model_validate(params))


async def test_enable_reads_the_statuses_again_while_a_reply_is_lost(
    chain: SimulatedDynamixelChain,
) -> None:
    async with driver(chain) as bus:
        with chain.device(2) as servo:
            servo.faults.drop_next = 3  # the next three Sync Reads lose the elbow's status
        await bus.enable()  # one read (retries 0) would have refused: no status from the elbow
        assert bus.stats.missing_replies >= 3
        with chain.device(2) as servo:
            assert servo.faults.drop_next == 0
        assert all(state.enabled for state in (await bus.read()).values())


async def test_the_cleared_statuses_are_read_back_before_a_lost_read(
    chain: SimulatedDynamixelChain,
) -> None:
    async with driver(chain) as bus:
        await bus.enable()
        chain.inject_hardware_error(2, HardwareError.OVERLOAD)
        assert (await bus.read())["elbow"].fault is not None
        await bus.disable()
        await bus.clear_faults()
        with chain.device(2) as servo:
            servo.faults.silent = True  # the next read loses the elbow's status...
        elbow = (await bus.read())["elbow"]
        assert elbow.fault is None  # ...and keeps the one read after clearing, not the overload


async def test_open_pings_a_late_servo_again_and_names_the_silent_ones(
    chain: SimulatedDynamixelChain,
) -> None:
    with chain.device(2) as servo:
        servo.faults.drop_next = 4  # its first four Pings go unanswered
    async with driver(chain) as bus:
        assert bus.device_names == ("shoulder", "elbow")
    with chain.device(2) as servo:
        assert servo.faults.drop_next == 0
    devices = DEVICES | {"wrist": {"id": 8}, "hand": {"id": 9}}
    params = {"port": chain.port, "devices": devices, "reply_margin_s": 0.02, "retries": 0}
    silent = DynamixelDriver(DynamixelParams.model_validate(params))
    started = time.monotonic()
    with pytest.raises(DriverTimeoutError, match=r"from device 'wrist' \(id 8\), device 'hand'"):
        await silent.open()
    assert time.monotonic() - started >= PTY_COMMAND_PATIENCE_S  # a pty's patience: 1 s


async def test_disable_reports_a_silent_servo_without_the_patience(
    chain: SimulatedDynamixelChain,
) -> None:
    params = {"port": chain.port, "devices": DEVICES, "bus_watchdog_s": None, "retries": 2}
    async with DynamixelDriver(DynamixelParams.model_validate(params)) as bus:
        await bus.enable()
        with chain.device(2) as servo:
            servo.faults.silent = True  # its power cut, say
        with pytest.raises(DriverIOError, match=r"torque may still be on: .*'elbow'.*\(3 attempts"):
            await bus.disable()  # a safety action: reported after the retries, not a pty's 1 s
        assert chain.read_table(1, Addr.TORQUE_ENABLE, 1) == b"\x00"  # the other let go
