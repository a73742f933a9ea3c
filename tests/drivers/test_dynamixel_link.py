"""The Dynamixel link's transactions against a pty the test plays the device on, byte for byte:
late replies to an earlier request are never taken for the reply, and the reply margin of a
pseudo-terminal (a simulated chain) is wider than a serial adapter's.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from drivers.dynamixel import protocol as dxl
from drivers.dynamixel.link import PTY_REPLY_MARGIN_S, SERIAL_REPLY_MARGIN_S, DynamixelLink
from tests.drivers.pty_peer import answer_once, raw_pty


@pytest.fixture
def pty() -> Iterator[tuple[int, str]]:
    with raw_pty() as ends:
        yield ends


async def test_a_late_reply_of_another_length_is_not_taken_for_the_reply(
    pty: tuple[int, str],
) -> None:
    master, port = pty
    link = DynamixelLink(port, 1_000_000, reply_margin_s=1.0, retries=0)
    await link.open(0.0)
    try:
        late = dxl.make_status(1, 0, bytes([250, 0, 3]))  # Read of Return Delay Time (3 bytes)
        wanted = dxl.make_status(1, 0, bytes(range(7)))
        thread = answer_once(master, late + wanted, dxl.PacketParser())
        reply = await link.transact(dxl.make_read(1, dxl.Addr.TORQUE_ENABLE, 7), (1,), 7)
        thread.join(timeout=5.0)
    finally:
        await link.close()
    assert reply.packets[1].data == bytes(range(7))
    assert (reply.stale, reply.corrupt, reply.timed_out) == (1, 0, False)


async def test_an_error_status_is_taken_whatever_its_length(pty: tuple[int, str]) -> None:
    master, port = pty
    link = DynamixelLink(port, 1_000_000, reply_margin_s=1.0, retries=0)
    await link.open(0.0)
    try:
        thread = answer_once(master, dxl.make_status(1, dxl.StatusError.ACCESS), dxl.PacketParser())
        reply = await link.transact(dxl.make_read(1, 300, 4), (1,), 4)
        thread.join(timeout=5.0)
    finally:
        await link.close()
    assert reply.packets[1].error == dxl.StatusError.ACCESS


async def test_the_default_reply_margin_is_wider_on_a_pty(pty: tuple[int, str]) -> None:
    _, port = pty
    request, replies = 14, [22]
    links = {
        margin: DynamixelLink(port, 1_000_000, reply_margin_s=margin, retries=0)
        for margin in (None, 0.0)
    }
    deadlines = {}
    for margin, link in links.items():
        await link.open(0.0)
        deadlines[margin] = link.deadline_s(request, replies)
        await link.close()
    assert deadlines[None] - deadlines[0.0] == pytest.approx(PTY_REPLY_MARGIN_S, abs=1e-9)
    serial_default = DynamixelLink("/dev/ttyUSB9", 1_000_000, reply_margin_s=None, retries=0)
    bus_s = serial_default.deadline_s(request, replies) - SERIAL_REPLY_MARGIN_S
    assert bus_s == pytest.approx(deadlines[0.0], abs=1e-9)
