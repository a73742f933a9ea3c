"""Feetech's own Python SDK (`feetech-servo-sdk`, module `scservo_sdk`) as a client of the simulated
STS3215 chain through its pty: ping, read, write, Reg Write/Action, Sync Read and Sync Write, and
the status error byte. The SDK is the manufacturer's reference client; where it and Feetech's
documents differ (its MAX_ID 252 against the document's 253; its `ping` reads the model number
with a second Read; no RESET instruction) the tests stay within what both accept.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from typing import Any

import pytest
import scservo_sdk as sdk

from drivers.feetech import protocol as ft
from drivers.feetech.protocol import ErrorBit
from drivers.feetech.sim import SimulatedFeetechChain
from drivers.feetech.table import Addr
from drivers.sim.motor import MotorParams
from tests.drivers.chain_process import ChainProcess
from tests.realtime import PtyStallProbe, wait_out_stalls

INITIAL = {1: 0.5, 2: -1.0, 3: 0.0}  # rad: 2374, 1396 and 2048 counts
COUNTS = {
    1: 2048 + round(0.5 * 4096 / (2 * math.pi)),
    2: 2048 - round(4096 / (2 * math.pi)),
    3: 2048,
}
FAST_MOTOR = MotorParams(max_velocity=40.0, max_acceleration=400.0, counts_per_rev=4096)
STALL_S = 0.002  # a hold-up of the probe counted as a stall: the chain loses as much


@pytest.fixture
def chain() -> Iterator[ChainProcess]:
    """The chain in a process of its own at real-time priority, as a servo's firmware answers
    whatever its client does (`ChainProcess`): a CPU-bound neighbour then delays only the
    kernel's pty path, which the stall probe times."""
    with ChainProcess(
        SimulatedFeetechChain, [1, 2, 3], initial_positions=INITIAL, motor_params=FAST_MOTOR
    ) as chain:
        yield chain


@pytest.fixture
def stalls() -> Iterator[PtyStallProbe]:
    """The reference of the chain's process: the pty path, and each CPU at its priority."""
    with PtyStallProbe(late_s=STALL_S, cpus=True) as probe:
        yield probe


def open_port(chain: ChainProcess, stalls: PtyStallProbe) -> Any:
    """The SDK's port on the chain at 1 Mbps. The SDK waits 34 ms for a reply, which the
    kernel's pty path alone can take on a loaded machine: the wait is the SDK's own plus the
    stalls the probe measured meanwhile (`wait_out_stalls`); a reply still missing is missing."""
    port = sdk.PortHandler(chain.port)
    wait_out_stalls(port, stalls)
    assert port.openPort()
    assert port.setBaudRate(1_000_000)
    return port


@pytest.fixture
def client(chain: ChainProcess, stalls: PtyStallProbe) -> Iterator[tuple[Any, Any]]:
    """The SDK's port and packet handler (STS: protocol_end 0, little-endian words)."""
    port = open_port(chain, stalls)
    yield port, sdk.PacketHandler(0)
    port.closePort()


def test_sdk_pings_and_reads_the_model_number(client: tuple[Any, Any]) -> None:
    port, handler = client
    for device_id in (1, 2, 3):
        assert handler.ping(port, device_id) == (777, sdk.COMM_SUCCESS, 0)
    model, result, _ = handler.ping(port, 9)
    assert (model, result) == (0, sdk.COMM_RX_TIMEOUT)


def test_sdk_reads_positions_and_writes_items(chain: ChainProcess, client: tuple[Any, Any]) -> None:
    port, handler = client
    for device_id, counts in COUNTS.items():
        assert handler.read2ByteTxRx(port, device_id, Addr.PRESENT_POSITION) == (counts, 0, 0)
    assert handler.write1ByteTxRx(port, 2, Addr.ACCELERATION, 50) == (sdk.COMM_SUCCESS, 0)
    assert chain.read_table(2, Addr.ACCELERATION, 1) == bytes([50])
    assert handler.write2ByteTxRx(port, 2, Addr.GOAL_POSITION, 3000) == (sdk.COMM_SUCCESS, 0)
    assert chain.read_table(2, Addr.GOAL_POSITION, 2) == (3000).to_bytes(2, "little")
    assert handler.read1ByteTxRx(port, 2, Addr.LOCK) == (1, sdk.COMM_SUCCESS, 0)


def test_sdk_moves_servos_with_sync_write_and_follows_them_with_sync_read(
    client: tuple[Any, Any],
) -> None:
    port, handler = client
    for device_id in COUNTS:
        assert handler.write1ByteTxRx(port, device_id, Addr.TORQUE_ENABLE, 1)[0] == 0
    goals = {1: 1000, 2: 3000, 3: 2048}
    writer = sdk.GroupSyncWrite(port, handler, Addr.GOAL_POSITION, 2)
    for device_id, goal in goals.items():
        assert writer.addParam(device_id, [sdk.SCS_LOBYTE(goal), sdk.SCS_HIBYTE(goal)])
    assert writer.txPacket() == sdk.COMM_SUCCESS
    reader = sdk.GroupSyncRead(port, handler, Addr.PRESENT_POSITION, 6)  # position, speed, load
    for device_id in goals:
        assert reader.addParam(device_id)
    deadline = time.monotonic() + 5.0
    while True:
        assert reader.txRxPacket() == sdk.COMM_SUCCESS
        present = {i: reader.getData(i, Addr.PRESENT_POSITION, 2) for i in goals}
        if all(abs(present[i] - goals[i]) <= 1 for i in goals):
            break
        assert time.monotonic() < deadline, f"positions {present}, goals {goals}"
        time.sleep(0.01)
    # The load, a sign-magnitude word (bit 10), decodes the same way in the SDK and here.
    raw = reader.getData(1, Addr.PRESENT_LOAD, 2)
    assert sdk.SCS_TOHOST(raw, 10) == ft.decode_signed(raw, 10)


def test_sdk_reg_write_and_action(chain: ChainProcess, client: tuple[Any, Any]) -> None:
    port, handler = client
    assert handler.regWriteTxRx(port, 3, Addr.ACCELERATION, 1, [9]) == (sdk.COMM_SUCCESS, 0)
    assert chain.read_table(3, Addr.ACCELERATION, 1) == b"\x00"
    assert handler.action(port, ft.BROADCAST_ID) == sdk.COMM_SUCCESS  # broadcast: no reply
    # Nothing answers a broadcast: ask servo 3 (a round trip after the Action) what it has.
    assert handler.read1ByteTxRx(port, 3, Addr.ACCELERATION) == (9, sdk.COMM_SUCCESS, 0)


def test_sdk_sees_the_status_error_byte(chain: ChainProcess, client: tuple[Any, Any]) -> None:
    port, handler = client
    chain.set_faults(2, temperature_c=80.0)
    value, result, error = handler.read1ByteTxRx(port, 2, Addr.PRESENT_TEMPERATURE)
    assert (value, result, error) == (80, sdk.COMM_SUCCESS, ErrorBit.OVERHEAT)
    assert handler.getRxPacketError(error) == "[RxPacketError] Overheat error!"
    assert handler.read1ByteTxRx(port, 2, Addr.STATUS) == (ErrorBit.OVERHEAT, 0, ErrorBit.OVERHEAT)


def test_sdk_gets_no_answer_to_a_corrupted_reply_or_a_silent_servo(
    chain: ChainProcess, client: tuple[Any, Any]
) -> None:
    port, handler = client
    chain.set_faults(1, corrupt_next=1)
    assert handler.read2ByteTxRx(port, 1, Addr.PRESENT_POSITION)[1] == sdk.COMM_RX_CORRUPT
    chain.set_faults(1, silent=True)
    assert handler.read2ByteTxRx(port, 1, Addr.PRESENT_POSITION)[1] == sdk.COMM_RX_TIMEOUT


def test_sdk_and_codec_frame_packets_identically(client: tuple[Any, Any]) -> None:
    # The SDK builds its packets in txPacket; capture what it writes for a Read and a Sync Write.
    port, handler = client
    sent: list[bytes] = []
    write = port.writePort

    def capture(packet: list[int]) -> int:
        sent.append(bytes(packet))
        return int(write(packet))

    port.writePort = capture
    handler.read2ByteTxRx(port, 1, Addr.PRESENT_POSITION)
    writer = sdk.GroupSyncWrite(port, handler, Addr.GOAL_POSITION, 2)
    writer.addParam(1, [0x00, 0x08])
    writer.addParam(2, [0x00, 0x04])
    writer.txPacket()
    assert sent == [
        ft.make_read(1, Addr.PRESENT_POSITION, 2),
        ft.make_sync_write(Addr.GOAL_POSITION, 2, {1: b"\x00\x08", 2: b"\x00\x04"}),
    ]


def test_sdk_talks_big_endian_to_an_scs_servo(stalls: PtyStallProbe) -> None:
    # protocol_end 1 (the SDK keeps it in a module global: put it back to 0 afterwards).
    scs = ChainProcess(
        SimulatedFeetechChain, [4], initial_positions={4: 1.0}, models={4: "scs0009"}
    )
    with scs as chain:
        port = open_port(chain, stalls)
        try:
            handler = sdk.PacketHandler(1)
            assert handler.ping(port, 4) == (1284, sdk.COMM_SUCCESS, 0)
            counts = 512 + round(1.0 * 1024 / (2 * math.pi))
            assert handler.read2ByteTxRx(port, 4, Addr.PRESENT_POSITION) == (counts, 0, 0)
            assert handler.write2ByteTxRx(port, 4, Addr.GOAL_POSITION, 600) == (0, 0)
            assert chain.read_table(4, Addr.GOAL_POSITION, 2) == (600).to_bytes(2, "big")
            reader = sdk.GroupSyncRead(port, handler, Addr.PRESENT_POSITION, 2)
            reader.addParam(4)
            assert reader.txRxPacket() == sdk.COMM_RX_TIMEOUT  # no Sync Read on the SCS series
        finally:
            sdk.PacketHandler(0)
            port.closePort()
