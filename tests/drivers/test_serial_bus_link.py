"""A configuration command on a servo bus waits out a silence longer than its retries' deadlines
(`SerialLink.command`: `retries` more times at least, and until its patience has run out), and
gives up on a silent device with a message naming the attempts and the time. The link is the
Dynamixel one, on the pty of a simulated chain whose servo drops replies on purpose.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from drivers import DriverTimeoutError
from drivers.dynamixel import protocol as dxl
from drivers.dynamixel.link import DynamixelLink
from drivers.dynamixel.sim import SimulatedDynamixelChain

MARGIN_S = 0.02  # the reply margin: each attempt's deadline is ~20 ms


@dataclass(frozen=True)
class Servo:
    id: int

    def __str__(self) -> str:
        return f"servo {self.id}"


@pytest.fixture
def chain() -> Iterator[SimulatedDynamixelChain]:
    with SimulatedDynamixelChain([1]) as chain:
        yield chain


async def ping(chain: SimulatedDynamixelChain, *, retries: int, patience_s: float) -> float:
    """One Ping through a fresh link; the time it took (s)."""
    link = DynamixelLink(
        chain.port, 1_000_000, reply_margin_s=MARGIN_S, retries=retries,
        command_patience_s=patience_s,
    )  # fmt: skip
    await link.open(0.0)
    started = time.monotonic()
    try:
        packet = await link.command(Servo(1), dxl.make_ping(1), "Ping", data_length=3)
    finally:
        await link.close()
    assert packet.id == 1
    return time.monotonic() - started


async def test_a_silence_longer_than_the_retries_is_waited_out(
    chain: SimulatedDynamixelChain,
) -> None:
    # Four replies lost: more than `retries` + 1 attempts, far less than the patience.
    with chain.device(1) as servo:
        servo.faults.drop_next = 4
    await ping(chain, retries=0, patience_s=30.0)
    with chain.device(1) as servo:
        assert servo.faults.drop_next == 0  # all four were sent, and the fifth answered


async def test_a_silent_device_is_given_up_on_once_retried_and_patience_spent(
    chain: SimulatedDynamixelChain,
) -> None:
    with chain.device(1) as servo:
        servo.faults.silent = True
    started = time.monotonic()
    with pytest.raises(DriverTimeoutError) as raised:
        await ping(chain, retries=0, patience_s=0.2)
    took_s = time.monotonic() - started
    found = re.fullmatch(r"servo 1: no answer to Ping \((\d+) attempts in (\d+\.\d\d) s\)",
                         str(raised.value))  # fmt: skip
    assert found is not None, raised.value
    assert float(found[2]) >= 0.2 - 0.005  # rounded to 10 ms
    assert took_s >= 0.2
    # The retries are a floor too: with no patience, three attempts.
    with pytest.raises(DriverTimeoutError, match=r"\(3 attempts in \d+\.\d\d s\)"):
        await ping(chain, retries=2, patience_s=0.0)
