"""``armd sim-device feetech``: the simulated STS3215 chain in its own process, driven through the
pty it prints by the real ``feetech`` driver with its default parameters, and by Feetech's SDK.
Nothing asserts speed: waits poll for a condition with a generous deadline."""

from __future__ import annotations

import math
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import scservo_sdk as sdk
import yaml

from drivers.feetech.driver import FeetechDriver, FeetechParams
from drivers.feetech.table import Addr
from tests.armd.cli.test_sim_device_cmd import (
    Spawn,
    exercise,
    read_line,
    run_armd,
    spawn,
    terminate,
)

__all__ = ["spawn"]  # the fixture, shared with the other sim-device tests


async def test_feetech_chain_serves_the_feetech_driver(spawn: Spawn, tmp_path: Path) -> None:
    link = tmp_path / "armd-feetech"
    process = spawn("sim-device", "feetech", "--ids", "1", "2", "--link", str(link))
    port = read_line(process)
    assert port.startswith("/dev/")
    assert os.path.realpath(link) == os.path.realpath(port)
    # The driver's defaults (reply deadlines from the baud rate) work against the simulation.
    params = FeetechParams(port=port, devices={"shoulder": {"id": 1}, "elbow": {"id": 2}})
    await exercise(FeetechDriver(params))
    terminate(process)
    assert not os.path.lexists(link)


def test_feetech_chain_answers_feetech_sdk(spawn: Spawn) -> None:
    process = spawn("sim-device", "feetech", "--ids", "3", "--baudrate", "500000")
    port = sdk.PortHandler(read_line(process))
    assert port.openPort()
    assert port.setBaudRate(500_000)
    try:
        handler = sdk.PacketHandler(0)
        assert handler.ping(port, 3) == (777, sdk.COMM_SUCCESS, 0)
        assert handler.read2ByteTxRx(port, 3, Addr.PRESENT_POSITION) == (2048, 0, 0)
        # --return-delay-s defaults to the factory setting: 250 × 2 µs
        assert handler.read1ByteTxRx(port, 3, Addr.RETURN_DELAY_TIME) == (250, 0, 0)
    finally:
        port.closePort()
    terminate(process)


def printed_config(process: subprocess.Popen[str]) -> tuple[dict[str, Any], list[str]]:
    """The config lines printed after the pty's line (up to the motor limits' last comment),
    parsed, and as printed."""
    assert process.stdout is not None
    lines: list[str] = []
    while not lines or not lines[-1].startswith("# acceleration limits"):
        line = process.stdout.readline()
        assert line, f"no config lines after {lines!r}"
        lines.append(line.rstrip("\n"))
    config = yaml.safe_load("\n".join(lines))
    assert isinstance(config, dict)
    assert lines[0].startswith("# armd sim-device feetech"), lines[0]
    return config, lines


async def test_feetech_options_shape_the_motors_and_print_the_config(spawn: Spawn) -> None:
    process = spawn(
        "sim-device", "feetech", "--ids", "1", "2", "--baudrate", "500000",
        "--initial-positions", "0.3", "-0.2", "--max-velocity", "3", "--max-acceleration", "30",
        "--return-delay-s", "0",
    )  # fmt: skip
    port = read_line(process)
    assert port.startswith("/dev/")  # the pty alone on the first line
    config, lines = printed_config(process)
    assert (
        "# motors: 3 rad/s, 30 rad/s² at the shaft, starting at {1: 0.3, 2: -0.2} rad"
        in (lines[-2])
    )
    assert config["type"] == "feetech"
    assert config["params"] == {
        "port": port,
        "baudrate": 500_000,
        "devices": {"servo1": {"id": 1}, "servo2": {"id": 2}},
    }
    # The printed params drive the chain, which starts where --initial-positions put it.
    driver = FeetechDriver(FeetechParams.model_validate(config["params"]))
    await driver.open()
    try:
        states = await driver.read()
    finally:
        await driver.close()
    quantum = 2.0 * math.pi / 4096
    assert states["servo1"].position == pytest.approx(0.3, abs=quantum)
    assert states["servo2"].position == pytest.approx(-0.2, abs=quantum)
    terminate(process)


def test_feetech_return_delay_option_sets_the_servos(spawn: Spawn) -> None:
    process = spawn("sim-device", "feetech", "--ids", "4", "--return-delay-s", "0.0001")
    port = sdk.PortHandler(read_line(process))
    assert port.openPort()
    assert port.setBaudRate(1_000_000)
    try:
        handler = sdk.PacketHandler(0)
        assert handler.read1ByteTxRx(port, 4, Addr.RETURN_DELAY_TIME) == (50, 0, 0)
    finally:
        port.closePort()
    terminate(process)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["sim-device", "feetech", "--ids", "2", "2"], "duplicates"),
        (["sim-device", "feetech", "--return-delay-s", "0.001"], "outside [0, 0.000508]"),
        (["sim-device", "feetech", "--return-delay-s", "-1"], "--return-delay-s: -1.0 s"),
        (["sim-device", "feetech", "--max-velocity", "0"], "--max-velocity: 0.0 must be finite"),
        (["sim-device", "feetech", "--max-acceleration", "nan"], "--max-acceleration: nan"),
        (["sim-device", "feetech", "--ids", "1", "2", "--initial-positions", "0"], "1 values"),
        (["sim-device", "feetech", "--ids", "254"], "[0, 253]"),
        (["sim-device", "feetech", "--baudrate", "0"], "--baudrate: 0 must be > 0"),
    ],
)
def test_feetech_argument_errors_exit_2_with_one_line(argv: list[str], message: str) -> None:
    result = run_armd(*argv)
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("armd: error: ")
    assert message in line
