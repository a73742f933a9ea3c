"""The Feetech link's transactions against a pty the test plays the servo on, byte for byte: a
late reply to an earlier request (the ping of the bus scan, sent again while a loaded host held
its first reply up) is never taken for the reply to the next one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from drivers.feetech import protocol as ft
from drivers.feetech.link import FeetechLink
from drivers.feetech.table import Addr
from tests.drivers.pty_peer import answer_once, raw_pty


@pytest.fixture
def pty() -> Iterator[tuple[int, str]]:
    with raw_pty() as ends:
        yield ends


async def test_a_late_reply_to_a_ping_is_not_taken_for_the_model_number(
    pty: tuple[int, str],
) -> None:
    master, port = pty
    link = FeetechLink(port, 1_000_000, reply_margin_s=1.0, retries=0)
    await link.open(0.0)
    try:
        late = ft.make_status(2, 0)  # the second answer to a ping sent twice: no data
        wanted = ft.make_status(2, 0, (777).to_bytes(2, "little"))
        thread = answer_once(master, late + wanted, ft.PacketParser())
        reply = await link.transact(ft.make_read(2, Addr.MODEL_NUMBER, 2), (2,), 2)
        thread.join(timeout=5.0)
    finally:
        await link.close()
    assert reply.packets[2].params == (777).to_bytes(2, "little")
    assert (reply.stale, reply.corrupt, reply.timed_out) == (1, 0, False)
