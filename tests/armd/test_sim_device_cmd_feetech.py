"""``armd sim-device feetech``: the simulated STS3215 chain in its own process, driven through the
pty it prints by the real ``feetech`` driver with its default parameters, and by Feetech's SDK.
Nothing asserts speed: waits poll for a condition with a generous deadline."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import scservo_sdk as sdk

from drivers.feetech.driver import FeetechDriver, FeetechParams
from drivers.feetech.table import Addr
from tests.armd.test_sim_device_cmd import Spawn, exercise, read_line, run_armd, spawn, terminate

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
    finally:
        port.closePort()
    terminate(process)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["sim-device", "feetech", "--ids", "2", "2"], "duplicates"),
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
