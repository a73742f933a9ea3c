"""Driver benchmark: one control cycle (`read()` then `write()`) for 6 devices on each driver, as
median and p99 in µs, beside the protocol's theoretical wire time for the same cycle.

Run: ``.venv/bin/python bench/drivers.py [--cycles N]``. Numbers depend on the machine; compare
them within one run, never in a test.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# This script is named like the package it measures: keep its own directory off the import path,
# or `import drivers` would import the script itself.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != _HERE]

from drivers.base import DeviceCommand, Driver, LoopContext  # noqa: E402
from drivers.cia402.driver import CiA402Driver, CiA402Params  # noqa: E402
from drivers.cia402.sim import SimDriveConfig, SimulatedCiA402Bus  # noqa: E402
from drivers.dynamixel import protocol as dxl  # noqa: E402
from drivers.dynamixel.driver import DynamixelDriver, DynamixelParams  # noqa: E402
from drivers.dynamixel.sim import SimulatedDynamixelChain  # noqa: E402
from drivers.errors import DriverError  # noqa: E402
from drivers.feetech import protocol as ft  # noqa: E402
from drivers.feetech import table as ft_table  # noqa: E402
from drivers.feetech.driver import FeetechDriver, FeetechParams  # noqa: E402
from drivers.feetech.sim import SimulatedFeetechChain  # noqa: E402
from drivers.mit.driver import MitDriver, MitParams  # noqa: E402
from drivers.mit.models import lookup  # noqa: E402
from drivers.mit.sim import SimActuatorConfig, SimulatedMitBus  # noqa: E402
from drivers.odrive import protocol as proto  # noqa: E402
from drivers.odrive.driver import ODriveDriver, ODriveParams  # noqa: E402
from drivers.odrive.sim import SimAxisConfig, SimulatedODrive  # noqa: E402
from drivers.sim.driver import ManualClock, SimDriver  # noqa: E402

DEVICES = tuple(f"joint{k}" for k in range(1, 7))
CONTROL_PERIOD_S = 0.004  # the daemon's default 250 Hz tick


@dataclass(frozen=True, slots=True)
class Timing:
    """Cycle times in µs."""

    median_us: float
    p99_us: float


def timing_from_samples(samples_ns: list[int]) -> Timing:
    samples_us = sorted(ns / 1000.0 for ns in samples_ns)
    p99 = samples_us[min(len(samples_us) - 1, round(0.99 * (len(samples_us) - 1)))]
    return Timing(median_us=statistics.median(samples_us), p99_us=p99)


async def time_cycles(
    driver: Driver,
    cycles: int,
    *,
    period_s: float | None = None,
    before_cycle: Callable[[], None] = lambda: None,
) -> Timing:
    """Time `cycles` read+write cycles on an enabled `driver`, after a warm-up of cycles // 10.

    With `period_s`, cycles start on a fixed-rate schedule like the control loop's, which lets the
    event loop serve other tasks (receivers, simulated devices) in between; without, they run back
    to back. `before_cycle` runs outside the timed region (e.g. to move a manual clock)."""
    loop = asyncio.get_running_loop()
    commands = {name: DeviceCommand(position=0.0) for name in driver.device_names}
    samples_ns: list[int] = []
    next_start = loop.time()
    for k in range(cycles + cycles // 10):
        if period_s is not None:
            next_start += period_s
            await asyncio.sleep(max(0.0, next_start - loop.time()))
        before_cycle()
        start = time.perf_counter_ns()
        states = await driver.read()
        for name, state in states.items():
            commands[name] = DeviceCommand(position=state.position)
        await driver.write(commands)
        elapsed = time.perf_counter_ns() - start
        if k >= cycles // 10:
            samples_ns.append(elapsed)
    return timing_from_samples(samples_ns)


def report(label: str, timing: Timing, wire: str = "") -> None:
    print(f"  {label:<52} median {timing.median_us:8.1f} µs   p99 {timing.p99_us:8.1f} µs   {wire}")


def report_failure(label: str, exc: DriverError) -> None:
    print(f"  {label:<52} FAILED: {type(exc).__name__}: {exc}")


def report_stats(driver: Driver) -> None:
    """The driver's communication problems during the run: a fast cycle that lost replies is not
    a fast cycle."""
    stats = driver.stats
    print(
        f"  {'':<52} {stats.reads} reads, {stats.missing_replies} missing, "
        f"{stats.timeouts} timeouts, {stats.corrupt_replies} corrupt, {stats.io_errors} I/O errors"
    )


# -- sim ---------------------------------------------------------------------------------------


def sim_driver(clock: Callable[[], float]) -> SimDriver:
    params = SimDriver.Params.model_validate(
        {"devices": {name: {"watchdog_s": 0.0} for name in DEVICES}}
    )
    return SimDriver(params, clock=clock)


async def bench_sim(cycles: int) -> None:
    print("sim (in-process; no wire)")
    async with sim_driver(time.monotonic) as driver:
        await driver.enable()
        report("wall clock, cycles back to back", await time_cycles(driver, cycles))
    manual = ManualClock()
    async with sim_driver(manual) as driver:
        await driver.enable()
        ticks = round(CONTROL_PERIOD_S / driver.motor(DEVICES[0]).params.step_s)
        timing = await time_cycles(
            driver, cycles, before_cycle=lambda: manual.advance(CONTROL_PERIOD_S)
        )
        report(f"manual clock, 4 ms per cycle ({ticks} motor ticks/device)", timing)


# -- ODrive over CAN ---------------------------------------------------------------------------

CAN_BITRATE = 1_000_000


def can_frame_bits(data_bytes: int, *, worst_case_stuffing: bool) -> int:
    """Bits one CAN 2.0A frame (11-bit id) occupies on the bus, including the 3-bit interframe
    space: 47 + 8·n without stuff bits. Stuffing applies to the 34 + 8·n bits from start-of-frame
    to the end of the CRC; the worst case adds one bit after the first 5 and then every 4
    (Davis et al., "Controller Area Network schedulability analysis", 2007). An RTR frame carries
    no data, whatever its DLC."""
    nominal = 47 + 8 * data_bytes
    if not worst_case_stuffing:
        return nominal
    return nominal + (34 + 8 * data_bytes - 1) // 4


def can_wire_text(frame_data_lengths: list[int]) -> str:
    bits_nominal = sum(can_frame_bits(n, worst_case_stuffing=False) for n in frame_data_lengths)
    bits_worst = sum(can_frame_bits(n, worst_case_stuffing=True) for n in frame_data_lengths)
    return (
        f"wire {len(frame_data_lengths)} frames at 1 Mbit/s: "
        f"{bits_nominal / CAN_BITRATE * 1e6:.0f} µs nominal, "
        f"{bits_worst / CAN_BITRATE * 1e6:.0f} µs worst-case stuffing"
    )


def odrive_cycle_frames(feedback: str) -> list[int]:
    """Data lengths of the frames one cycle puts on the bus for 6 axes: per axis one
    Set_Input_Pos, one Get_Encoder_Estimates (cyclic, or the reply to an RTR request), and in
    `rtr` mode the request itself (heartbeats, 10 Hz by default, are left out)."""
    node_ids = range(len(DEVICES))
    frames = [proto.make_set_input_pos(node, 0.0, 0.0) for node in node_ids]
    frames += [
        proto.make_encoder_estimates(node, proto.EncoderEstimates(0.0, 0.0)) for node in node_ids
    ]
    if feedback == "rtr":
        frames += [
            proto.make_request(node, proto.Command.GET_ENCODER_ESTIMATES) for node in node_ids
        ]
    return [len(frame.data) for frame in frames]


async def bench_odrive(cycles: int) -> None:
    print("odrive (python-can `virtual` bus; simulated ODrive in this process, 250 Hz estimates)")
    for feedback in ("cyclic", "rtr"):
        channel = f"bench-odrive-{uuid.uuid4().hex}"
        configs = [
            SimAxisConfig(node_id=node, encoder_period_s=CONTROL_PERIOD_S)
            for node in range(len(DEVICES))
        ]
        params = ODriveParams.model_validate(
            {
                "interface": "virtual",
                "channel": channel,
                "feedback": feedback,
                "devices": {name: {"node_id": k} for k, name in enumerate(DEVICES)},
            }
        )
        label = f"feedback={feedback}, 250 Hz"
        driver = ODriveDriver(params)
        try:
            async with SimulatedODrive.create("virtual", channel, configs), driver:
                await driver.enable()
                timing = await time_cycles(driver, cycles, period_s=CONTROL_PERIOD_S)
        except DriverError as exc:
            report_failure(label, exc)
            continue
        report(label, timing, can_wire_text(odrive_cycle_frames(feedback)))
        report_stats(driver)


# -- MIT actuators over CAN --------------------------------------------------------------------


async def bench_mit(cycles: int) -> None:
    print(
        "mit (python-can `virtual` bus; 6 simulated DM4310 in this process, answering each frame)"
    )
    channel = f"bench-mit-{uuid.uuid4().hex}"
    ids = range(1, len(DEVICES) + 1)
    configs = [SimActuatorConfig(i, i + 0x10, lookup("DM4310"), seed=i) for i in ids]
    params = MitParams.model_validate(
        {
            "interface": "virtual",
            "channel": channel,
            "bitrate": CAN_BITRATE,
            "devices": {
                name: {"id": i, "model": "DM4310"} for name, i in zip(DEVICES, ids, strict=True)
            },
        }
    )
    label = "6 × DM4310, 250 Hz (read waits for the replies)"
    driver = MitDriver(params)
    try:
        async with SimulatedMitBus.create("virtual", channel, configs), driver:
            await driver.enable()
            timing = await time_cycles(driver, cycles, period_s=CONTROL_PERIOD_S)
    except DriverError as exc:
        report_failure(label, exc)
        return
    # Per actuator one MIT command and one reply, 8 data bytes each.
    report(label, timing, can_wire_text([8] * (2 * len(DEVICES))))
    report_stats(driver)


# -- CiA 402 drives over CANopen ---------------------------------------------------------------


def cia402_cycle_frames(velocity_offset: bool) -> list[int]:
    """Data lengths of one cycle for 6 drives: the SYNC (no data), per drive RPDO1 (controlword,
    target position, torque offset: 8 bytes), with `velocity_offset` RPDO2 (velocity offset: 4),
    TPDO1 (statusword, position actual, error code: 8) and TPDO2 (velocity and torque actual: 6).
    Heartbeats (10 Hz per drive by default) are left out."""
    per_drive = [8, 8, 6] + ([4] if velocity_offset else [])
    return [0] + per_drive * len(DEVICES)


async def bench_cia402(cycles: int) -> None:
    print(
        "cia402 (python-can `virtual` bus; 6 simulated CiA 402 drives in this process, canopen on "
        "both sides; the cycle is read() + write(): RPDOs then SYNC, the TPDOs read next cycle)"
    )
    ids = range(1, len(DEVICES) + 1)
    for velocity_offset in (False, True):
        channel = f"bench-cia402-{uuid.uuid4().hex}"
        configs = [SimDriveConfig(i, seed=i) for i in ids]
        devices = {
            name: {"node_id": i, "velocity_offset": velocity_offset}
            for name, i in zip(DEVICES, ids, strict=True)
        }
        given = CiA402Params.model_validate(
            {"interface": "virtual", "channel": channel, "bitrate": CAN_BITRATE, "devices": devices}
        )
        params = CiA402Driver.with_loop(given, LoopContext(CONTROL_PERIOD_S, {}))
        rpdos = "2 RPDOs" if velocity_offset else "1 RPDO"
        label = f"6 drives, SYNC + {rpdos} + 2 TPDOs each, 250 Hz"
        driver = CiA402Driver(params)
        try:
            async with SimulatedCiA402Bus.create("virtual", channel, configs), driver:
                await driver.enable()
                timing = await time_cycles(driver, cycles, period_s=CONTROL_PERIOD_S)
                await driver.disable()
        except DriverError as exc:
            report_failure(label, exc)
            continue
        report(label, timing, can_wire_text(cia402_cycle_frames(velocity_offset)))
        report_stats(driver)


# -- Dynamixel over a pty ----------------------------------------------------------------------

DYNAMIXEL_GOAL_BYTES = 4  # Goal Position


def dynamixel_cycle_bytes() -> tuple[int, int, int]:
    """Bytes of one cycle for 6 devices: the Sync Read request, the 6 status packets (each the
    driver's status block) and the Sync Write of Goal Position, before byte stuffing (which only
    adds a byte where 0xFF 0xFF 0xFD would appear)."""
    ids = list(range(1, len(DEVICES) + 1))
    sync_read = dxl.make_sync_read(dxl.indirect_data_address(1), dxl.STATUS_BLOCK_LENGTH, ids)
    status = dxl.status_packet_size(dxl.STATUS_BLOCK_LENGTH) * len(ids)
    goals = {device_id: dxl.i32(0) for device_id in ids}
    sync_write = dxl.make_sync_write(dxl.Addr.GOAL_POSITION, DYNAMIXEL_GOAL_BYTES, goals)
    return len(sync_read), status, len(sync_write)


def dynamixel_wire_text(baudrate: int) -> str:
    request, replies, write = dynamixel_cycle_bytes()
    total = request + replies + write
    wire_us = dxl.wire_time_s(total, baudrate) * 1e6
    return (
        f"wire {request}+{replies}+{write} = {total} B at {baudrate / 1e6:g} Mbaud, "
        f"10 bit/B: {wire_us:.0f} µs (on hardware + 6 × Return Delay Time)"
    )


async def bench_dynamixel(cycles: int) -> None:
    print(
        "dynamixel (pty to a simulated chain in a thread; return delay 0, no wire time modelled:"
        " the pty moves bytes at memory speed whatever the baud rate)"
    )
    ids = list(range(1, len(DEVICES) + 1))
    for baudrate in (1_000_000, 4_000_000):
        label = f"{baudrate / 1e6:g} Mbaud, 250 Hz"
        with SimulatedDynamixelChain(ids, baudrate=baudrate, return_delay_s=0.0) as chain:
            params = DynamixelParams.model_validate(
                {
                    "port": chain.port,
                    "baudrate": baudrate,
                    "usb_latency_s": 0.0,
                    "devices": {name: {"id": k} for name, k in zip(DEVICES, ids, strict=True)},
                }
            )
            driver = DynamixelDriver(params)
            try:
                async with driver:
                    await driver.enable()
                    timing = await time_cycles(driver, cycles, period_s=CONTROL_PERIOD_S)
            except DriverError as exc:
                report_failure(label, exc)
                continue
        report(label, timing, dynamixel_wire_text(baudrate))
        report_stats(driver)


# -- Feetech over a pty ------------------------------------------------------------------------


def feetech_wire_text(baudrate: int) -> str:
    """One cycle for 6 STS3215: the Sync Read of the status block (56..65), its 6 status packets
    and the Sync Write of Goal Position (2 bytes each)."""
    ids = list(range(1, len(DEVICES) + 1))
    block = ft_table.STATUS_BLOCK_LENGTH
    request = len(ft.make_sync_read(ft_table.STATUS_BLOCK_ADDRESS, block, ids))
    replies = ft.status_packet_size(block) * len(ids)
    write = len(ft.make_sync_write(ft_table.Addr.GOAL_POSITION, 2, dict.fromkeys(ids, b"\x00\x08")))
    total = request + replies + write
    wire_us = ft.wire_time_s(total, baudrate) * 1e6
    return (
        f"wire {request}+{replies}+{write} = {total} B at {baudrate / 1e6:g} Mbaud, "
        f"10 bit/B: {wire_us:.0f} µs (Return Delay Time set to 0 at open)"
    )


async def bench_feetech(cycles: int) -> None:
    print(
        "feetech (pty to a simulated STS3215 chain in a thread; no wire time modelled: the pty "
        "moves bytes at memory speed whatever the baud rate)"
    )
    ids = list(range(1, len(DEVICES) + 1))
    baudrate = 1_000_000
    label = "6 × STS3215, 1 Mbaud, 250 Hz"
    with SimulatedFeetechChain(ids, baudrate=baudrate, return_delay_s=0.0) as chain:
        params = FeetechParams.model_validate(
            {
                "port": chain.port,
                "baudrate": baudrate,
                "devices": {name: {"id": k} for name, k in zip(DEVICES, ids, strict=True)},
            }
        )
        driver = FeetechDriver(params)
        try:
            async with driver:
                await driver.enable()
                timing = await time_cycles(driver, cycles, period_s=CONTROL_PERIOD_S)
        except DriverError as exc:
            report_failure(label, exc)
            return
    report(label, timing, feetech_wire_text(baudrate))
    report_stats(driver)


# -- main --------------------------------------------------------------------------------------

Section = Callable[[int], Coroutine[Any, Any, None]]
SECTIONS: dict[str, Section] = {
    "sim": bench_sim,
    "odrive": bench_odrive,
    "mit": bench_mit,
    "cia402": bench_cia402,
    "dynamixel": bench_dynamixel,
    "feetech": bench_feetech,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=2000, help="timed cycles per case")
    parser.add_argument("sections", nargs="*", help=f"any of {list(SECTIONS)}; default: all")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="  %(levelname)s %(name)s: %(message)s")
    unknown = sorted(set(args.sections) - set(SECTIONS))
    if unknown:
        parser.error(f"unknown section(s) {unknown}; expected any of {list(SECTIONS)}")
    print(f"one read+write cycle, {len(DEVICES)} devices, {args.cycles} cycles per case")
    for name in args.sections or SECTIONS:
        asyncio.run(SECTIONS[name](args.cycles))


if __name__ == "__main__":
    main()
