"""``armd sim-device``: simulated devices in their own process, driven by the real drivers here.

Each test starts ``python -m armd sim-device ...`` as a subprocess and talks to it like the daemon
would: the Dynamixel chain through the pty it prints, the ODrive axes over python-can's
``udp_multicast`` on a multicast group of its own. Nothing asserts speed: waits poll for a
condition with a generous deadline.
"""

from __future__ import annotations

import asyncio
import os
import select
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from drivers import DeviceCommand, Driver, Lifecycle
from drivers.dynamixel.driver import DynamixelDriver, DynamixelParams
from drivers.odrive.driver import ODriveDriver, ODriveParams
from tests.realtime import with_sim_priority

ROOT = Path(__file__).resolve().parents[3]
ARMD = [sys.executable, "-m", "armd"]
START_TIMEOUT_S = 30.0  # a loaded machine imports slowly
EXIT_TIMEOUT_S = 10.0

Spawn = Callable[..., subprocess.Popen[str]]


@pytest.fixture
def spawn() -> Iterator[Spawn]:
    """``spawn(*args)`` starts ``armd <args>`` with piped output; leftovers are killed at
    teardown."""
    processes: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [*ARMD, *with_sim_priority(args)],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        processes.append(process)
        return process

    yield start
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=EXIT_TIMEOUT_S)


def read_line(process: subprocess.Popen[str], timeout_s: float = START_TIMEOUT_S) -> str:
    """The first line the process prints on stdout."""
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], timeout_s)
    if not ready:
        pytest.fail(f"no output within {timeout_s} s from {process.args!r}")
    line = process.stdout.readline()
    if not line:
        _, err = process.communicate(timeout=EXIT_TIMEOUT_S)
        pytest.fail(f"{process.args!r} exited with {process.returncode}: {err}")
    return line.strip()


def terminate(process: subprocess.Popen[str]) -> str:
    """SIGTERM, then the exit code must be 0; returns stderr."""
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=EXIT_TIMEOUT_S)
    assert process.returncode == 0, err
    assert "Traceback" not in err
    return err


async def eventually(
    condition: Callable[[], Awaitable[bool]], what: str, timeout_s: float = 20.0
) -> None:
    deadline = time.monotonic() + timeout_s
    while not await condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}")
        await asyncio.sleep(0.005)


async def drive_to(driver: Driver, goals: Mapping[str, float], tol: float = 0.01) -> None:
    """Stream the goals like a control loop until every device is within `tol` rad."""

    async def arrived() -> bool:
        await driver.write({name: DeviceCommand(goal) for name, goal in goals.items()})
        states = await driver.read()
        return all(abs(states[name].position - goal) < tol for name, goal in goals.items())

    await eventually(arrived, f"motion to {dict(goals)}")


async def exercise(driver: Driver) -> None:
    """Open, read, enable, move every device by 0.5 rad, close."""
    await driver.open()
    try:
        states = await driver.read()
        assert set(states) == set(driver.device_names)
        start = {name: state.position for name, state in states.items()}
        await driver.enable()
        assert driver.lifecycle is Lifecycle.ENABLED
        await drive_to(driver, {name: position + 0.5 for name, position in start.items()})
    finally:
        await driver.close()
    assert driver.lifecycle.value == "closed"  # (`is` would trip mypy's narrowing)


async def test_dynamixel_chain_serves_the_dynamixel_driver(spawn: Spawn, tmp_path: Path) -> None:
    link = tmp_path / "armd-dxl"
    process = spawn("sim-device", "dynamixel", "--ids", "1", "2", "--link", str(link))
    port = read_line(process)
    assert port.startswith("/dev/")
    assert os.path.realpath(link) == os.path.realpath(port)
    params: dict[str, Any] = {
        "port": port,
        "devices": {"shoulder": {"id": 1}, "elbow": {"id": 2, "direction": -1}},
        "bus_watchdog_s": None,  # the driver's other defaults (a pty's reply margin) fit
    }
    await exercise(DynamixelDriver(DynamixelParams.model_validate(params)))
    terminate(process)
    assert not os.path.lexists(link)


def unique_bus() -> tuple[str, list[int]]:
    """A multicast group and two node ids of this test's own. On Linux a udp_multicast bus also
    hears the other groups on its port (python-can binds to INADDR_ANY), so the node ids, too,
    keep concurrent runs and leftover simulations from answering this test."""
    a, b, c, d = uuid.uuid4().bytes[:4]
    first = d % 63
    return f"239.{a}.{b}.{max(c, 1)}", [first, first + 1]


async def test_odrive_axes_serve_the_odrive_driver(spawn: Spawn) -> None:
    group, (node_a, node_b) = unique_bus()
    process = spawn(
        "sim-device", "odrive", "--interface", "udp_multicast", "--channel", group,
        "--node-ids", str(node_a), str(node_b),
        "--heartbeat-period-s", "0.01", "--encoder-period-s", "0.005",
    )  # fmt: skip
    params: dict[str, Any] = {
        "interface": "udp_multicast",
        "channel": group,
        "devices": {
            "shoulder": {"node_id": node_a},
            "elbow": {"node_id": node_b, "direction": -1},
        },
        "open_timeout_s": START_TIMEOUT_S,  # open() waits for the first heartbeats
        "enable_timeout_s": 5.0,
        "feedback_timeout_s": 0.5,
        "heartbeat_timeout_s": 2.0,
    }
    await exercise(ODriveDriver(ODriveParams.model_validate(params)))
    err = terminate(process)
    served = f"simulated ODrive axes [{node_a}, {node_b}] on udp_multicast channel '{group}'"
    assert served in err


def run_armd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ARMD, *args],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT_S,
        check=False,
    )


ODRIVE = ["sim-device", "odrive", "--channel", "239.1.2.3"]
DYNAMIXEL = ["sim-device", "dynamixel"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["sim-device"], "odrive, mit, cia402, dynamixel or feetech"),
        ([*ODRIVE, "--initial-positions", "0.5"], "1 values for 3 ids"),
        ([*ODRIVE, "--max-velocity", "0"], "--max-velocity: 0.0 must be finite and > 0"),
        ([*ODRIVE, "--node-ids", "64"], "[0, 63]"),
        ([*ODRIVE, "--node-ids", "0", "--channel", "can0"], "multicast group"),
        ([*ODRIVE, "--node-ids", "0", "--encoder-period-s", "-1"], "--encoder-period-s"),
        ([*DYNAMIXEL, "--ids", "1", "1"], "duplicates"),
        ([*DYNAMIXEL, "--ids", "253"], "[0, 252]"),
        ([*DYNAMIXEL, "--baudrate", "fast"], "--baudrate"),
        ([*DYNAMIXEL, "--baudrate", "250000"], "not an X-series rate"),
        ([*DYNAMIXEL, "--return-delay-s", "0.001"], "--return-delay-s"),
        ([*DYNAMIXEL, "--max-acceleration", "nan"], "--max-acceleration"),
        ([*DYNAMIXEL, "--link", str(ROOT / "pyproject.toml")], "not a symlink"),
    ],
)
def test_argument_errors_exit_2_with_one_line(argv: list[str], message: str) -> None:
    result = run_armd(*argv)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("armd: error: ")
    assert message in line


def test_a_bus_that_cannot_open_exits_1_with_one_line() -> None:
    result = run_armd(
        "sim-device", "odrive", "--interface", "no-such-interface", "--channel", "x",
        "--node-ids", "0",
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("armd: error: ")
    assert "no-such-interface" in line
