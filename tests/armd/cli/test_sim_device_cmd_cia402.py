"""``armd sim-device cia402``: simulated CiA 402 drives in their own process on ``udp_multicast``
(hop limit 0 on both sides: nothing leaves this host), driven by the real ``cia402`` driver in the
test process, configured from the lines the command prints. Nothing asserts speed: waits poll for
a condition with a generous deadline."""

from __future__ import annotations

import time
import uuid

import pytest
import yaml

from drivers import DeviceCommand, LoopContext
from drivers.cia402.driver import CiA402Driver
from drivers.errors import DriverError
from tests.armd.cli.test_sim_device_cmd import (
    START_TIMEOUT_S,
    Spawn,
    read_line,
    run_armd,
    spawn,
    terminate,
)

__all__ = ["spawn"]  # the fixture, shared with the other sim-device tests


def unique_bus() -> tuple[str, list[int]]:
    """A multicast group and two node ids of this test's own: a udp_multicast bus also hears the
    other groups on its port, so the ids, too, keep concurrent runs apart."""
    a, b, c, d = uuid.uuid4().bytes[:4]
    first = 1 + (c << 8 | d) % 120
    return f"239.{a}.{b}.{max(c, 1)}", [first, first + 1]


def printed_params(process: Spawn, drives: int) -> dict[str, object]:
    """The ``params`` of the ``drivers`` entry the command prints once its drives serve: a
    sentence, six lines of YAML, then a line per drive."""
    read_line(process)  # the sentence; the block follows in the same write
    assert process.stdout is not None
    text = "".join(process.stdout.readline() for _ in range(6 + drives))
    return dict(yaml.safe_load(text)["drives"]["params"])


async def open_when_served(driver: CiA402Driver) -> None:
    """Open once the simulation (starting in another process) answers."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            await driver.open()
            return
        except DriverError:
            if time.monotonic() > deadline:
                raise


async def test_cia402_drives_serve_the_cia402_driver(spawn: Spawn) -> None:
    group, ids = unique_bus()
    process = spawn("sim-device", "cia402", "--channel", group, "--ids", *map(str, ids))
    params = printed_params(process, len(ids))
    assert params["channel"] == group
    devices = dict(params["devices"])  # type: ignore[call-overload]
    assert devices == {f"j{i}": {"node_id": i} for i in ids}
    cls = CiA402Driver
    limits = dict.fromkeys(devices, (-3.0, 3.0))
    driver = cls(cls.with_loop(cls.Params.model_validate(params), LoopContext(0.004, limits)))
    await open_when_served(driver)
    try:
        states = await driver.read()
        assert set(states) == set(devices)
        await driver.enable()
        goals = {name: state.position + 0.3 for name, state in states.items()}
        deadline = time.monotonic() + 20.0
        while True:
            await driver.write({name: DeviceCommand(goal) for name, goal in goals.items()})
            states = await driver.read()
            if all(abs(states[n].position - g) < 0.01 for n, g in goals.items()):
                break
            assert time.monotonic() < deadline, f"no arrival: {states}"
        await driver.disable()
    finally:
        await driver.close()
    err = terminate(process)
    assert f"simulated CiA 402 drives {ids} on udp_multicast channel '{group}'" in err


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--ids", "0", "1"], "includes 0; CANopen node ids are 1..127"),
        (["--ids", "128"], "[128] outside [0, 127]"),
        (["--ids", "3", "3"], "has duplicates"),
        (["--channel", "10.0.0.1"], "multicast"),
    ],
)
def test_bad_arguments_are_one_line_usage_errors(arguments: list[str], message: str) -> None:
    result = run_armd("sim-device", "cia402", *arguments)
    assert result.returncode == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
