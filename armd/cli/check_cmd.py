"""``armd check --config FILE [--probe]``: validate a config file, its model and its drivers
without moving anything, and print what armd would run.

Without ``--probe`` no hardware is needed: the file, the model, and the drivers' software (every
driver module imports, checked by `load_config`; a CAN driver's python-can interface,
``params.interface``, imports). Missing hardware — a serial port (``params.port``) that does not
exist or cannot be opened for reading and writing, a SocketCAN network interface
(``params.channel``) that does not exist or is down — is listed as a note. ``--probe`` requires the
hardware: those notes become problems, and it opens each driver, reads each device's position, and
closes it: it never enables.

Exit codes: 0 all good; 1 a problem, each on one line on stderr as ``<file>: <path>: <message>``.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import math
import os
import statistics
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from armd.cli import interrupt
from armd.config.load import ArmSetup, build_drivers, load_config
from armd.errors import ConfigError
from drivers import DeviceState, Driver, DriverError
from kinematics import JointMotor, KinematicTree

__all__ = ["hardware_problems", "register", "software_problems"]

EXIT_OK, EXIT_FAILURE = 0, 1
PROBE_TIMEOUT_S = 5.0
CYCLES = 50  # timed reads per driver: one cycle against the loop period
"""Longest wait for a driver to open, and for all its devices to answer a read, s."""


def register(subparsers: Any) -> None:
    """Add ``check`` to the CLI's subparsers."""
    parser = subparsers.add_parser(
        "check",
        help="validate a config file, its model and drivers (moves nothing)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("--config", required=True, type=Path, metavar="FILE", help="YAML config")
    parser.add_argument(
        "--probe",
        action="store_true",
        help="also open each driver, read every device's position once, and close it "
        "(never enables)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        setup = load_config(args.config, kernels=False)
        if setup.config.leader is not None:  # its links and joints, on both models
            from armd.tools.leader import leader_setup

            leader_setup(setup, follower="check")
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_FAILURE
    print_summary(setup)
    problems = software_problems(setup)
    if setup.collision is not None:
        from armd.cli.collision_cmd import collision_lines, configuration_problems

        print("\n".join(collision_lines(setup.collision)))
        problems += configuration_problems(setup)
    missing = hardware_problems(setup)
    if args.probe:
        problems += missing
    else:
        for note in missing:
            print(f"hardware  not found (required by --probe and run): {note}")
    if not problems and args.probe:
        problems = interrupt.run(probe(setup))
    for problem in problems:
        print(f"{setup.path}: {problem}", file=sys.stderr)
    if problems:
        return EXIT_FAILURE
    print(f"{setup.path}: OK" + ("" if args.probe else " (devices not contacted: see --probe)"))
    return EXIT_OK


# -- availability ---------------------------------------------------------------------------------


def software_problems(setup: ArmSetup) -> list[str]:
    """What keeps the drivers' software from working on this machine (a python-can interface that
    is unknown or does not import): one line per problem."""
    problems: list[str] = []
    for name, driver in setup.drivers.items():
        interface = getattr(driver.params, "interface", None)
        if isinstance(interface, str):
            problems += [f"drivers.{name}.params.{p}" for p in _can_problems(interface)]
    return problems


def hardware_problems(setup: ArmSetup) -> list[str]:
    """Hardware the drivers need that is missing, found without opening anything (serial ports,
    SocketCAN network interfaces): one line per problem."""
    problems: list[str] = []
    for name, driver in setup.drivers.items():
        where = f"drivers.{name}.params"
        port = getattr(driver.params, "port", None)
        if isinstance(port, str):
            problems += [f"{where}.port: {p}" for p in _serial_port_problems(port)]
        interface = getattr(driver.params, "interface", None)
        channel = getattr(driver.params, "channel", None)
        if interface == "socketcan" and isinstance(channel, str) and sys.platform == "linux":
            problems += [f"{where}.channel: {p}" for p in _socketcan_problems(channel)]
    return problems


def _serial_port_problems(port: str) -> list[str]:
    if not os.path.exists(port):
        return [f"{port}: no such device (is the adapter plugged in? see /dev/serial/by-id/)"]
    if not os.access(port, os.R_OK | os.W_OK):
        return [f"{port}: permission denied: add the user running armd to the 'dialout' group"]
    return []


def _can_problems(interface: str) -> list[str]:
    try:
        backends: Mapping[str, tuple[str, str]] = importlib.import_module("can.interfaces").BACKENDS
    except ImportError as exc:
        return [f"interface: python-can is not importable: {exc}"]
    if interface not in backends:
        return [
            f"interface: unknown python-can interface {interface!r}; known: "
            f"{', '.join(sorted(backends))}"
        ]
    module_name, class_name = backends[interface]
    try:
        getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError, OSError) as exc:
        return [f"interface: python-can interface {interface!r} does not import: {exc}"]
    return []


def _socketcan_problems(channel: str) -> list[str]:
    netdev = Path("/sys/class/net", channel)
    bring_up = f"sudo ip link set {channel} up type can bitrate <bits/s>"
    if not netdev.exists():
        return [
            f"no network interface {channel!r} (is the CAN adapter plugged in? `ip link` "
            f"lists them); then bring it up: `{bring_up}`"
        ]
    try:
        state = (netdev / "operstate").read_text().strip()
    except OSError:
        return []
    if state == "down":
        return [f"network interface {channel!r} is down: `{bring_up}`"]
    return []


# -- summary --------------------------------------------------------------------------------------


def _units(tree: KinematicTree, joint: str) -> str:
    motor = next(link.motor for link in tree.links if link.joint_name == joint)
    return "m" if isinstance(motor, JointMotor) and motor.kind == "prismatic" else "rad"


def _num(value: float) -> str:
    return "-" if math.isinf(value) else f"{value:.4g}"


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def print_summary(setup: ArmSetup) -> None:
    """The arm, its model, rates, broker, and the joint → device table with effective limits."""
    tree, mqtt = setup.tree, setup.mqtt
    print(f"arm       {setup.name}  (MQTT topics armd/{setup.name}/...)")
    print(f"model     {setup.model_path}: {tree.name}, {tree.dof} DOF, tool link {setup.tool_link}")
    print(f"rates     loop {setup.config.loop_hz:g} Hz, telemetry {setup.config.telemetry_hz:g} Hz")
    tls = "TLS" if mqtt.uses_tls else "no TLS"
    user = f", user {mqtt.username}" if mqtt.username else ""
    print(f"mqtt      {mqtt.host}:{mqtt.port}, client id {mqtt.client_id}, {tls}{user}")
    if setup.calibration is not None:
        joints = ", ".join(setup.calibration.offsets)
        print(f"calibration {setup.calibration.path}: offsets and ranges of {joints}")
    print("joints    (positions in rad or m; velocity /s, acceleration /s², jerk /s³)")
    print("\n".join(_table(_joint_rows(setup))))
    for name, driver in setup.drivers.items():
        print(f"driver    {name}: {driver.type_name}, devices {', '.join(_devices(driver))}")


def _joint_rows(setup: ArmSetup) -> list[list[str]]:
    drive_columns = ["joint", "driver/device", "gear", "sign", "offset"]
    rows = [[*drive_columns, "lower", "upper", "velocity", "accel", "jerk"]]
    for i, joint in enumerate(setup.tree.joint_names):
        limit = setup.limits[joint]
        limits = [limit.lower, limit.upper, limit.velocity, limit.acceleration, setup.jerk[i]]
        t = setup.joints.get(joint)
        if t is None:
            fixed = f"fixed at {setup.fixed_joints[joint]:g} {_units(setup.tree, joint)}"
            drive = [fixed, "", "", ""]
        else:
            drive = [f"{t.driver}/{t.device}", f"{t.gear_ratio:g}", f"{t.sign:+d}", f"{t.offset:g}"]
        rows.append([joint, *drive, *(_num(float(value)) for value in limits)])
    return rows


def _devices(driver: Any) -> list[str]:
    devices = getattr(driver.params, "devices", {})
    return list(devices) if isinstance(devices, Mapping) else []


# -- probe ----------------------------------------------------------------------------------------


async def probe(setup: ArmSetup) -> list[str]:
    """Open each driver in turn, read every device once, print its position, close the driver.
    Never enables. Returns the problems (drivers that would not open, devices that did not
    answer)."""
    problems: list[str] = []
    print("probe     (measured now; nothing was enabled)")
    rows = [["joint", "driver/device", "motor", "joint position", "note"]]
    try:
        drivers = build_drivers(setup)
    except DriverError as exc:
        return [f"drivers: probe: cannot construct the drivers: {exc}"]
    cycles: dict[str, list[float]] = {}
    for name, driver in drivers.items():
        try:
            states, cycles[name] = await _read_once(driver)
        except (DriverError, TimeoutError) as exc:
            problems.append(f"drivers.{name}: probe: {exc or 'timed out'}")
            continue
        for joint in setup.drivers[name].joints:
            t = setup.joints[joint]
            state = states.get(t.device)
            if state is None:
                problems.append(f"drivers.{name}.params.devices.{t.device}: probe: no reply")
                rows.append([joint, f"{name}/{t.device}", "no reply", "", ""])
                continue
            rows.append([joint, f"{name}/{t.device}", *_reading(setup, joint, state)])
    if len(rows) > 1:
        print("\n".join(_table(rows)))
    for line in cycle_report(cycles, 1.0 / setup.loop_hz):
        print(line)
    return problems


async def _read_once(driver: Driver) -> tuple[Mapping[str, DeviceState], list[float]]:
    """Open, read until every device answered (or the timeout), time `CYCLES` more reads
    (seconds each), close."""
    try:
        async with asyncio.timeout(PROBE_TIMEOUT_S):
            await driver.open()
            deadline = time.monotonic() + PROBE_TIMEOUT_S / 2
            states = await driver.read()
            while len(states) < len(driver.device_names) and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
                states = await driver.read()
            durations = []
            for _ in range(CYCLES):
                start = time.perf_counter()
                await driver.read()
                durations.append(time.perf_counter() - start)
            return states, durations
    finally:
        await driver.close()


def cycle_report(cycles: Mapping[str, list[float]], period_s: float) -> list[str]:
    """One line per driver: its read cycle against the loop period, and a warning when the
    median leaves less than half the period (the loop reads the buses concurrently, then writes
    and plans: a slower bus makes it miss ticks)."""
    lines = []
    for name, durations in cycles.items():
        if not durations:
            continue
        p50, worst = statistics.median(durations), max(durations)
        lines.append(
            f"driver {name}: one read cycle p50 {p50 * 1e3:.2f} ms, max {worst * 1e3:.2f} ms "
            f"({len(durations)} reads; the loop period is {period_s * 1e3:.2f} ms)"
        )
        if p50 > period_s / 2:
            fastest = 1.0 / (2.0 * p50)
            lines.append(
                f"warning: driver {name}: a read cycle takes more than half the loop period; "
                f"the loop will miss ticks: set loop_hz to {fastest:.0f} or less, or make the "
                "bus faster (baud rate, latency timer)"
            )
    return lines


def _reading(setup: ArmSetup, joint: str, state: DeviceState) -> list[str]:
    unit = _units(setup.tree, joint)
    position = setup.joints[joint].joint_position(state.position)
    notes = []
    limit = setup.limits[joint]
    if not limit.lower <= position <= limit.upper:
        notes.append(f"outside limits [{_num(limit.lower)}, {_num(limit.upper)}] {unit}")
    if state.fault is not None:
        notes.append(f"fault: {state.fault.message}")
    return [f"{state.position:.4f}", f"{position:.4f} {unit}", "; ".join(notes)]
