"""``armd sim-device mit``: simulated Damiao actuators in their own process on ``udp_multicast``
(hop limit 0 on both sides: nothing leaves this host), driven by the real ``mit`` driver in the
test process. Nothing asserts speed: waits poll for a condition with a generous deadline."""

from __future__ import annotations

import socket
import time
import uuid
from typing import Any

import pytest

from drivers import DeviceCommand
from drivers.can_link import make_bus
from drivers.errors import DriverTimeoutError
from drivers.mit.driver import MitDriver, MitParams
from drivers.mit.sim import SimulatedMitBus
from tests.armd.cli.test_sim_device_cmd import START_TIMEOUT_S, Spawn, run_armd, spawn, terminate

__all__ = ["spawn"]  # the fixture, shared with the other sim-device tests


def unique_bus() -> tuple[str, list[int]]:
    """A multicast group and two CAN ids of this test's own: a udp_multicast bus also hears the
    other groups on its port, so the ids, too, keep concurrent runs apart."""
    a, b, c, d = uuid.uuid4().bytes[:4]
    first = 0x100 + (c << 8 | d) % 0x600
    return f"239.{a}.{b}.{max(c, 1)}", [first, first + 1]


async def open_when_served(driver: MitDriver) -> None:
    """Open once the simulation (starting in another process) answers."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            await driver.open()
            return
        except DriverTimeoutError:
            if time.monotonic() > deadline:
                raise


async def test_mit_actuators_serve_the_mit_driver(spawn: Spawn) -> None:
    group, (id_a, id_b) = unique_bus()
    process = spawn(
        "sim-device", "mit", "--interface", "udp_multicast", "--channel", group,
        "--model", "DM4340", "--ids", str(id_a), str(id_b),
    )  # fmt: skip
    params: dict[str, Any] = {
        "interface": "udp_multicast",
        "channel": group,
        "devices": {
            "shoulder": {"id": id_a, "model": "DM4340", "kp": 40.0, "kd": 2.0},
            "elbow": {"id": id_b, "model": "DM4340", "direction": -1},
        },
        "reply_margin_s": 0.02,
        "open_timeout_s": 0.5,
    }
    driver = MitDriver(MitParams.model_validate(params))
    await open_when_served(driver)
    try:
        states = await driver.read()
        assert set(states) == {"shoulder", "elbow"}
        await driver.enable()
        goals = {name: state.position + 0.5 for name, state in states.items()}
        deadline = time.monotonic() + 20.0
        while True:
            await driver.write({name: DeviceCommand(goal) for name, goal in goals.items()})
            states = await driver.read()
            if all(abs(states[n].position - g) < 0.01 for n, g in goals.items()):
                break
            assert time.monotonic() < deadline, f"no arrival: {states}"
        assert all(s.enabled for s in states.values())
        await driver.disable()
    finally:
        await driver.close()
    err = terminate(process)
    assert f"simulated DM4340 actuators [{id_a}, {id_b}]" in err
    assert f"udp_multicast channel '{group}'" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--channel", "239.1.2.3", "--model", "DM9999"], "--model: 'DM9999' unknown"),
        (["--channel", "can0"], "multicast group"),
        (["--channel", "239.1.2.3", "--ids", "1", "1"], "duplicates"),
        (["--channel", "239.1.2.3", "--ids", "2048"], "[0, 2031]"),
        (["--channel", "239.1.2.3", "--ids", "1", "--master-ids", "1"], "duplicates"),
        (["--channel", "239.1.2.3", "--ids", "1", "2", "--master-ids", "9"], "1 ids for 2"),
    ],
)
def test_mit_argument_errors_exit_2_with_one_line(argv: list[str], message: str) -> None:
    result = run_armd("sim-device", "mit", *argv)
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("armd: error: ")
    assert message in line


def test_udp_multicast_frames_never_leave_the_host() -> None:
    """The driver's bus and the simulation's are opened with IP TTL 0, and so is any bus
    `make_bus` opens on udp_multicast (the ODrive driver's and simulation's too)."""
    group, (id_a, _) = unique_bus()
    params = MitParams.model_validate(
        {
            "interface": "udp_multicast",
            "channel": group,
            "devices": {"a": {"id": id_a, "model": "DM4310"}},
        }
    )
    for bus in (
        MitDriver(params)._make_bus(),
        SimulatedMitBus.create("udp_multicast", group, []).bus,
        make_bus("udp_multicast", group),
    ):
        try:
            sock = bus._multicast._socket  # python-can 4.x internals, read only
            assert sock.getsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL) == 0
        finally:
            bus.shutdown()
