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

from armd.cli.sim_device.sim_device_feetech import SO101_END_STOPS
from drivers import DeviceCommand
from drivers.feetech.driver import FeetechDriver, FeetechParams
from drivers.feetech.table import Addr
from kinematics import load_tree
from tests.armd.cli.test_sim_device_cmd import (
    ROOT,
    Spawn,
    drive_to,
    eventually,
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
    # by default, the SO-101's end stops on servos 1..6 (those of the chain)
    assert lines[-3] == (
        "# end stops (--end-stops so101), rad at the shaft: {1: [-1.91986, 1.91986], "
        "2: [-1.74533, 1.74533]}"
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


async def test_feetech_end_stops_hold_the_shafts(spawn: Spawn) -> None:
    process = spawn("sim-device", "feetech", "--ids", "1", "2", "--end-stops", "2=-0.4:0.3")
    port = read_line(process)
    _, lines = printed_config(process)
    assert lines[-3] == "# end stops (--end-stops 2=-0.4:0.3), rad at the shaft: {2: [-0.4, 0.3]}"
    driver = FeetechDriver(FeetechParams(port=port, devices={"a": {"id": 1}, "b": {"id": 2}}))
    await driver.open()
    try:
        await driver.enable()
        await drive_to(driver, {"a": 0.6, "b": 0.3}, tol=0.01)

        async def pushing() -> bool:  # servo 2 commanded beyond its stop: it pushes there
            await driver.write({"a": DeviceCommand(0.6), "b": DeviceCommand(0.6)})
            return ((await driver.read())["b"].effort or 0.0) > 0.1

        await eventually(pushing, "servo 2 pushing into its end stop")
        states = await driver.read()
    finally:
        await driver.close()
    assert states["a"].position == pytest.approx(0.6, abs=0.01)  # no end stops: it arrived
    assert states["b"].position == pytest.approx(0.3, abs=2.0 * math.pi / 4096)  # at its stop
    terminate(process)


def test_feetech_end_stops_none_leaves_the_shafts_free(spawn: Spawn) -> None:
    process = spawn("sim-device", "feetech", "--ids", "1", "--end-stops", "none")
    read_line(process)
    _, lines = printed_config(process)
    assert lines[-3].startswith("# end stops: none (--end-stops none)")
    terminate(process)


def test_the_so101_end_stops_are_the_models_joint_limits() -> None:
    """`--end-stops so101` puts servo i's stops at the limits of config/so101.yaml's joint on
    servo i (that config's transmission maps each joint 1:1 onto its servo's shaft), except the
    wrist roll's, which turns freely."""
    config = yaml.safe_load((ROOT / "config" / "so101.yaml").read_text(encoding="utf-8"))
    tree = load_tree(ROOT / "config" / config["model"])
    devices = config["drivers"]["bus"]["params"]["devices"]
    stopped = {}
    for joint, settings in config["joints"].items():
        assert set(settings) <= {"driver", "device", "limits", "stall"}  # no gear, sign, offset
        servo_id = devices[settings["device"]]["id"]
        if joint != "wrist_roll":
            stopped[servo_id] = (tree.limits[joint].lower, tree.limits[joint].upper)
    assert stopped == SO101_END_STOPS


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
        (["sim-device", "feetech", "--end-stops", "so101", "none"], "'so101' is not so101, none"),
        (["sim-device", "feetech", "--end-stops", "6:-1:1"], "'6:-1:1' is not so101, none, or"),
        (["sim-device", "feetech", "--end-stops", "7=-1:1"], "servo 7 is not one of --ids"),
        (["sim-device", "feetech", "--end-stops", "6=1:-1"], "servo 6: [1, -1] must be finite"),
        (["sim-device", "feetech", "--end-stops", "6=0:1", "6=0:2"], "servo 6 is given twice"),
        (
            ["sim-device", "feetech", "--ids", "6", "--initial-positions", "2"],
            "--initial-positions: servo 6 at 2 rad is outside its end stops [-0.174533, 1.74533]",
        ),
    ],
)
def test_feetech_argument_errors_exit_2_with_one_line(argv: list[str], message: str) -> None:
    result = run_armd(*argv)
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("armd: error: ")
    assert message in line
