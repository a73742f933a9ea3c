"""The cia402 driver on bad input, against simulated CiA 402 drives on python-can's `virtual` bus:
invalid params, a drive that refuses an object or a mapping, another identity, a silent drive, a
drive that will not leave a state, a drive's fixed PDO mapping (used, or refused), malformed
frames. Every error is one line naming the node, the device, the object and the abort code with
its meaning, and no drive is left enabled.
"""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import can
import pydantic
import pytest

from drivers import LoopContext
from drivers.cia402.driver import CiA402Driver
from drivers.cia402.objects import State
from drivers.cia402.sim import SimDriveConfig, SimulatedDrive
from drivers.cia402.sim_drive import EDS_PATH
from drivers.cia402.startup import IDENTITY_PATIENCE_S
from drivers.errors import DriverConfigError, DriverOpenError, DriverTimeoutError
from tests.drivers.cia402_rig import (
    PERIOD_S,
    QUANTUM,
    START,
    drive_config,
    eventually,
    params,
    simulated,
    tick,
)
from tests.drivers.cia402_wire import Spy


@pytest.fixture
def channel() -> str:
    return f"cia402-test-{uuid.uuid4().hex}"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"devices": {"a": {"node_id": 1}, "b": {"node_id": 1}}}, "same node_id"),
        ({"devices": {"a": {"node_id": 128}}}, "node_id"),
        ({"heartbeat_timeout_ms": 40}, "must exceed heartbeat_ms"),
        ({"devices": {"a": {"node_id": 1, "quick_stop_option": 9}}}, "quick_stop_option"),
        ({"devices": {"a": {"node_id": 1, "disable": "off"}}}, "disable"),
        ({"devices": {"a": {"node_id": 1, "position_limits": [1, -1]}}}, "lower must be below"),
        ({"devices": {"a": {"node_id": 1, "torque_limt": 1}}}, "torque_limt"),
    ],
)
def test_params_are_validated(channel: str, change: dict[str, Any], message: str) -> None:
    with pytest.raises(pydantic.ValidationError, match=message):
        params(channel, **change)


def test_with_loop_fills_the_period_and_the_limits(channel: str) -> None:
    p = params(channel)
    assert p.loop_period_s == PERIOD_S
    assert p.devices["shoulder"].position_limits == (-3.0, 3.0)
    assert p.devices["elbow"].position_limits == (-2.5, 2.5)
    with pytest.raises(DriverConfigError, match=r"value × 10\^index"):
        CiA402Driver.with_loop(p, LoopContext(1 / 3, {}))


async def test_malformed_frames_are_counted(channel: str) -> None:
    async with simulated(channel), CiA402Driver(params(channel)) as driver:
        with can.Bus(interface="virtual", channel=channel) as raw:
            raw.send(can.Message(arbitration_id=0x181, data=b"\x01\x02\x03", is_extended_id=False))
            raw.send(can.Message(arbitration_id=0x701, data=b"", is_extended_id=False))

            async def counted() -> bool:
                await driver.read()
                return driver.stats.corrupt_replies >= 2

            await eventually(counted, "the malformed frames counted")
        assert driver.stats.per_device_errors["shoulder"] >= 2
        states = await driver.read()
        assert states["shoulder"].position == pytest.approx(START[1], abs=QUANTUM)


def _eds_without(tmp_path: Path, name: str, edit: Callable[[str], str]) -> Path:
    path = tmp_path / name
    path.write_text(edit(EDS_PATH.read_text()))
    return path


def _drop_object(index: str) -> Callable[[str], str]:
    return lambda text: re.sub(rf"\[{index}(sub\w+)?\]\n(\w.*\n)*\n", "", text)


@pytest.mark.parametrize(
    ("eds_edit", "message"),
    [
        (
            _drop_object("60C2"),
            "node 2 (device 'elbow'): 60C2:01 Interpolation time period value: SDO abort "
            "0x06020000 (object does not exist in the object dictionary)",
        ),
        (
            # the drive says its velocity offset cannot be mapped, which the driver's EDS allows
            lambda text: re.sub(r"(\[60B1\]\n(?:\w.*\n)*?PDOMapping=)1", r"\g<1>0", text),
            "node 2 (device 'elbow'): 1601:01 Mapped object 1: SDO abort 0x06040041 (object "
            "cannot be mapped to the PDO)",
        ),
    ],
)
async def test_a_drive_refusing_an_object_fails_open_naming_it(
    channel: str, tmp_path: Path, eds_edit: Callable[[str], str], message: str
) -> None:
    odd = SimulatedDrive(drive_config(2), eds=_eds_without(tmp_path, "odd.eds", eds_edit))
    async with simulated(channel, SimulatedDrive(drive_config(1)), odd) as sim:
        with pytest.raises(DriverOpenError) as error:
            await CiA402Driver(params(channel)).open()
        assert message in str(error.value)
        assert "\n" not in str(error.value)
        assert all(d.state is not State.OPERATION_ENABLED for d in sim.drives.values())


async def test_another_identity_fails_open(channel: str) -> None:
    other = SimulatedDrive(SimDriveConfig(1, vendor_id=0x9A, product_code=0x7))
    async with simulated(channel, other, SimulatedDrive(drive_config(2))):
        with pytest.raises(
            DriverOpenError,
            match=r"node 1 \(device 'shoulder'\): 1018:01/02 "
            r"identity: vendor 0x0000009A product 0x00000007, expected vendor "
            r"0x00000A4D product 0x00000402",
        ):
            await CiA402Driver(params(channel)).open()


async def test_a_drive_stuck_in_a_state_fails_enable_and_nothing_is_enabled(channel: str) -> None:
    async with simulated(channel) as sim, CiA402Driver(params(channel, state_timeout_s=0.3)) as d:
        with sim.drives[2].lock:
            sim.drives[2].state = State.NOT_READY_TO_SWITCH_ON  # it never gets ready
        with pytest.raises(DriverTimeoutError) as error:
            await d.enable()
        assert (
            "node 2 (device 'elbow'): still not ready to switch on after 0.3 s of controlword "
            "0x0006, expected ready to switch on" in str(error.value)
        )
        for drive in sim.drives.values():
            with drive.lock:
                assert drive.state is not State.OPERATION_ENABLED
        states = await d.read()
        assert not any(s.enabled for s in states.values())


def _fixed_mapping_eds(tmp_path: Path, status_objects: list[int]) -> Path:
    """The shipped EDS with read-only PDO mappings: TPDO1 `status_objects`, TPDO2 velocity and
    torque actual, RPDO1 controlword + target, RPDO2 velocity offset (entries as in 0x1A00)."""
    mappings = {
        "1A00": status_objects,
        "1A01": [0x606C0020, 0x60770010],
        "1600": [0x60400010, 0x607A0020],
        "1601": [0x60B10020],
    }
    text = EDS_PATH.read_text()
    for index, entries in mappings.items():
        values = {0: len(entries)} | dict(enumerate(entries, start=1))
        for sub in range(9):
            section = rf"\[{index}sub{sub:X}\]\n"
            text = re.sub(rf"({section}(?:\w.*\n)*?AccessType=)rw", r"\g<1>ro", text)
            value = f"0x{values.get(sub, 0):08X}" if sub else str(values[0])
            text = re.sub(rf"({section}(?:\w.*\n)*?DefaultValue=).*", rf"\g<1>{value}", text)
    path = tmp_path / "fixed.eds"
    path.write_text(text)
    return path


async def test_a_fixed_mapping_from_the_eds_is_read_and_used(channel: str, tmp_path: Path) -> None:
    eds = _fixed_mapping_eds(tmp_path, [0x60410010, 0x60640020, 0x603F0010])
    drives = [SimulatedDrive(drive_config(n), eds=eds) for n in (1, 2)]
    devices = {
        "shoulder": {"node_id": 1, "eds": str(eds)},
        "elbow": {"node_id": 2, "eds": str(eds)},
    }
    async with simulated(channel, *drives):
        with Spy(channel) as spy:
            async with CiA402Driver(params(channel, devices=devices)) as driver:
                await driver.enable()
                for k in range(1, 20):
                    await tick(driver, {"shoulder": START[1] + 0.002 * k})
                states = await driver.read()
            frames = spy.drain()
        mapping_writes = [k for k in spy.downloads(frames, 1) if 0x1600 <= k[0] < 0x1C00]
        assert mapping_writes == []  # read, not written
        assert states["shoulder"].position == pytest.approx(START[1] + 0.038, abs=0.01)


async def test_a_fixed_mapping_without_position_actual_fails_open(
    channel: str, tmp_path: Path
) -> None:
    eds = _fixed_mapping_eds(tmp_path, [0x60410010, 0x603F0010])
    drives = [SimulatedDrive(drive_config(n), eds=eds) for n in (1, 2)]
    devices = {"shoulder": {"node_id": 1, "eds": str(eds)}}
    async with simulated(channel, *drives):
        with pytest.raises(
            DriverOpenError,
            match=r"node 1 \(device 'shoulder'\): the drive's fixed TPDO mapping lacks 6064:00",
        ):
            await CiA402Driver(params(channel, devices=devices)).open()


async def test_a_drive_silent_for_less_than_the_patience_is_waited_for(channel: str) -> None:
    """A drive still booting, or a loaded host holding its first answers up past the SDO
    timeout: its identity is asked for again, for `IDENTITY_PATIENCE_S`."""
    late = SimulatedDrive(drive_config(2))
    late.faults.silent = True
    async with simulated(channel, SimulatedDrive(drive_config(1)), late):
        waking = threading.Timer(IDENTITY_PATIENCE_S / 2, setattr, (late.faults, "silent", False))
        waking.start()
        driver = CiA402Driver(params(channel, sdo_timeout_s=0.2))
        try:
            await driver.open()
        finally:
            waking.join()
            await driver.close()


async def test_a_silent_drive_fails_open_naming_it(channel: str) -> None:
    silent = SimulatedDrive(drive_config(2))
    silent.disconnect()
    async with simulated(channel, SimulatedDrive(drive_config(1)), silent):
        with pytest.raises(DriverOpenError) as error:
            await CiA402Driver(params(channel, sdo_timeout_s=0.2)).open()
    message = str(error.value)
    assert "node 2 (device 'elbow'): 1018:01 Vendor-ID: " in message
    assert "(powered? node id? bit rate?)" in message
