"""What the serial servo-bus framing shares: resynchronising on a header whose first bytes end the
buffer, Sync Write parameters built and read back, error bits as text, distinct bus ids."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drivers.base import check_distinct
from drivers.dynamixel import protocol as dxl
from drivers.feetech import protocol as ft
from drivers.serial_bus.framing import (
    FrameParser,
    describe_bits,
    sync_write_data,
    sync_write_params,
)


@pytest.mark.parametrize(
    ("parser", "packet"),
    [
        (ft.PacketParser(), ft.make_ping(3)),
        (dxl.PacketParser(), dxl.make_ping(3)),
    ],
    ids=["feetech", "dynamixel"],
)
def test_a_header_split_across_reads_is_kept(parser: FrameParser[Any], packet: bytes) -> None:
    header = parser.header
    assert parser.feed(b"\x00\x11" + packet[: len(header) - 1]) == []
    assert (parser.corrupt, parser.pending) == (1, len(header) - 1)
    (found,) = parser.feed(packet[len(header) - 1 :])
    assert (found.id, parser.corrupt, parser.pending) == (3, 1, 0)


@given(
    length=st.integers(min_value=0, max_value=6),
    ids=st.lists(st.integers(min_value=0, max_value=253), min_size=1, max_size=8, unique=True),
    start=st.binary(min_size=2, max_size=4),
    data=st.data(),
)
def test_sync_write_data_reads_back_what_sync_write_params_wrote(
    length: int, ids: list[int], start: bytes, data: st.DataObject
) -> None:
    by_id = {i: data.draw(st.binary(min_size=length, max_size=length)) for i in ids}
    params = sync_write_params(start, length, by_id)
    for device_id, written in by_id.items():
        assert sync_write_data(params, len(start), length, device_id) == [written]
    assert sync_write_data(params, len(start), length, 254) == []


def test_sync_write_params_refuses_data_of_another_length() -> None:
    with pytest.raises(ValueError, match="id 2 has 1 bytes, expected 2"):
        sync_write_params(b"\x00\x02", 2, {1: b"ab", 2: b"c"})


def test_describe_bits_names_known_and_unknown_bits() -> None:
    texts = {0x01: "voltage", 0x04: "overheat"}
    assert describe_bits(0x05, texts, "fine") == "voltage, overheat"
    assert describe_bits(0x82, texts, "fine") == "unknown bits 0x82"
    assert describe_bits(0, texts, "fine") == "fine"


def test_check_distinct_names_the_two_devices() -> None:
    check_distinct({"a": 1, "b": 2}, "id")
    with pytest.raises(ValueError, match="devices 'a' and 'c': same node_id 1"):
        check_distinct({"a": 1, "b": 2, "c": 1}, "node_id")
