"""ROBOTIS' own Python SDK (`dynamixel-sdk`, module `dynamixel_sdk`) as a client of the simulated
X-series chain through its pty: ping and broadcast ping, reads and writes of 1, 2 and 4 bytes,
Reg Write/Action, Sync and Bulk Read/Write, Factory Reset, Reboot, Clear and the error statuses,
as the e-manual's "Protocol 2.0" page and the XM430-W350 control table specify them.

Where the SDK and the e-manual differ the e-manual decides and the test says so: the SDK does not
wait for the status packet of a unicast Action (the e-manual shows one), so the test collects it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from drivers.dynamixel import protocol as dxl
from drivers.dynamixel.protocol import Addr, Instruction, StatusError
from drivers.dynamixel.sim import SimulatedDynamixelChain
from drivers.sim.motor import MotorParams
from tests.drivers.chain_process import ChainProcess
from tests.realtime import PtyStallProbe, wait_out_stalls

sdk = pytest.importorskip("dynamixel_sdk")

IDS = (1, 2, 3)
INITIAL = {1: 0.5, 2: -1.0, 3: 2 * math.pi + 0.25}  # rad
FAST_MOTOR = MotorParams(max_velocity=40.0, max_acceleration=400.0, counts_per_rev=4096)
REBOOT_S = 0.05
STALL_S = 0.002  # a hold-up of the probe counted as a stall: the chain loses as much
SLOW_REBOOT_S = 0.5
LED = 65
POSITION_P_GAIN = 84
PROFILE_VELOCITY = 112
PRESENT_TEMPERATURE = 146


def counts(rad: float) -> int:
    return round(rad * 4096 / (2 * math.pi))


@pytest.fixture
def chain() -> Iterator[ChainProcess]:
    """The chain in a process of its own at real-time priority, as a servo's firmware answers
    whatever its client does (`ChainProcess`): a CPU-bound neighbour then delays only the
    kernel's pty path, which the stall probe times."""
    with ChainProcess(
        SimulatedDynamixelChain,
        IDS,
        initial_positions=INITIAL,
        motor_params=FAST_MOTOR,
        reboot_s=REBOOT_S,
    ) as chain:
        yield chain


@pytest.fixture
def stalls() -> Iterator[PtyStallProbe]:
    """The reference of the chain's process: the pty path, and each CPU at its priority."""
    with PtyStallProbe(late_s=STALL_S, cpus=True) as probe:
        yield probe


def open_port(chain: ChainProcess, stalls: PtyStallProbe) -> Any:
    """The SDK's port on the chain at 1 Mbps (the chain's rate). The SDK waits 34 ms for a
    reply, which the kernel's pty path alone can take on a loaded machine: the wait is the
    SDK's own plus the stalls the probe measured meanwhile (`wait_out_stalls`); a reply still
    missing is missing."""
    port = sdk.PortHandler(chain.port)
    wait_out_stalls(port, stalls)
    assert port.openPort()
    assert port.setBaudRate(1_000_000)
    return port


@pytest.fixture
def client(chain: ChainProcess, stalls: PtyStallProbe) -> Iterator[tuple[Any, Any]]:
    """The SDK's port and its Protocol 2.0 packet handler."""
    port = open_port(chain, stalls)
    yield port, sdk.PacketHandler(2.0)
    port.closePort()


def raw_exchange(port: Any, handler: Any, packet: bytes) -> tuple[list[int], int]:
    """Send bytes the SDK would not build, then receive one status packet with the SDK."""
    port.clearPort()
    assert port.writePort(list(packet)) == len(packet)
    port.setPacketTimeout(11)
    rxpacket, result = handler.rxPacket(port, False)
    return rxpacket, result


def status_error(rxpacket: list[int]) -> int:
    return rxpacket[sdk.PKT_ERROR] & 0x7F


def line_stays_quiet(port: Any, quiet_s: float = 0.05) -> bool:
    """Nothing arrives for `quiet_s` (a pty carries a reply within microseconds)."""
    time.sleep(quiet_s)
    return port.getBytesAvailable() == 0


def eventually(check: Callable[[], bool], what: str, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


# -- ping ----------------------------------------------------------------------------------------


def test_ping_and_broadcast_ping(client: tuple[Any, Any]) -> None:
    port, handler = client
    for device_id in IDS:
        assert handler.ping(port, device_id) == (1020, sdk.COMM_SUCCESS, 0)
    assert handler.ping(port, 9)[1] == sdk.COMM_RX_TIMEOUT
    found, result = handler.broadcastPing(port)
    assert result == sdk.COMM_SUCCESS
    assert found == {device_id: [1020, 46] for device_id in IDS}


def collect(port: Any, count: int, stalls: PtyStallProbe) -> list[dxl.Packet]:
    """Up to `count` status packets read raw from `port`, within 1 s plus the stalls meanwhile."""
    parser, packets = dxl.PacketParser(), []
    start = time.monotonic()
    while len(packets) < count and time.monotonic() - start < 1.0 + stalls.stalled_s(start):
        packets += parser.feed(bytes(port.readPort(64)))
    return packets


def test_broadcast_ping_answers_in_id_order_each_after_its_return_delay(
    client: tuple[Any, Any], stalls: PtyStallProbe
) -> None:
    port, _ = client
    port.clearPort()
    port.writePort(list(dxl.make_ping(dxl.BROADCAST_ID)))
    packets = collect(port, len(IDS), stalls)
    assert [p.id for p in packets] == list(IDS)
    assert all(p.error == 0 and p.data == bytes([0xFC, 0x03, 46]) for p in packets)


# -- read and write ------------------------------------------------------------------------------


def test_reads_and_writes_of_one_two_and_four_bytes(
    chain: ChainProcess, client: tuple[Any, Any]
) -> None:
    port, handler = client
    assert handler.read1ByteTxRx(port, 2, Addr.ID) == (2, sdk.COMM_SUCCESS, 0)
    assert handler.read2ByteTxRx(port, 2, Addr.MODEL_NUMBER) == (1020, sdk.COMM_SUCCESS, 0)
    position, result, error = handler.read4ByteTxRx(port, 1, Addr.PRESENT_POSITION)
    assert (position, result, error) == (counts(INITIAL[1]), sdk.COMM_SUCCESS, 0)
    position, _, _ = handler.read4ByteTxRx(port, 2, Addr.PRESENT_POSITION)
    assert position == 4096 + counts(INITIAL[2])  # at power-on, within the first turn
    assert handler.write1ByteTxRx(port, 1, LED, 1) == (sdk.COMM_SUCCESS, 0)
    assert handler.write2ByteTxRx(port, 1, POSITION_P_GAIN, 640) == (sdk.COMM_SUCCESS, 0)
    assert handler.write4ByteTxRx(port, 1, PROFILE_VELOCITY, 123456) == (sdk.COMM_SUCCESS, 0)
    assert handler.read1ByteTxRx(port, 1, LED)[0] == 1
    assert handler.read2ByteTxRx(port, 1, POSITION_P_GAIN)[0] == 640
    assert handler.read4ByteTxRx(port, 1, PROFILE_VELOCITY)[0] == 123456


def test_broadcast_read_and_write_get_no_status_packet(
    chain: ChainProcess, client: tuple[Any, Any]
) -> None:
    port, handler = client
    port.clearPort()
    port.writePort(list(dxl.make_read(dxl.BROADCAST_ID, Addr.ID, 1)))
    assert line_stays_quiet(port), "a broadcast Read was answered"
    assert handler.write1ByteTxRx(port, dxl.BROADCAST_ID, LED, 1) == (sdk.COMM_SUCCESS, 0)
    assert line_stays_quiet(port), "a broadcast Write was answered"
    assert all(chain.read_table(i, LED, 1) == b"\x01" for i in IDS)  # but carried out
    # the next read gets its own reply, not a stray status from the broadcast
    assert handler.read1ByteTxRx(port, 3, Addr.ID) == (3, sdk.COMM_SUCCESS, 0)


def test_indirect_address_and_data_29_to_56(chain: ChainProcess, client: tuple[Any, Any]) -> None:
    port, handler = client
    assert handler.read2ByteTxRx(port, 1, Addr.INDIRECT_ADDRESS_29) == (634, sdk.COMM_SUCCESS, 0)
    assert handler.read2ByteTxRx(port, 1, 632) == (661, sdk.COMM_SUCCESS, 0)  # Indirect Address 56
    mapping = b"".join((Addr.PRESENT_POSITION + k).to_bytes(2, "little") for k in range(4))
    result, error = handler.writeTxRx(port, 1, Addr.INDIRECT_ADDRESS_29, 8, list(mapping))
    assert (result, error) == (sdk.COMM_SUCCESS, 0)
    position = handler.read4ByteTxRx(port, 1, Addr.INDIRECT_DATA_29)
    assert position == (counts(INITIAL[1]), sdk.COMM_SUCCESS, 0)
    assert handler.write1ByteTxRx(port, 1, 661, 7) == (sdk.COMM_SUCCESS, 0)  # Indirect Data 56
    assert handler.read1ByteTxRx(port, 1, 661) == (7, sdk.COMM_SUCCESS, 0)


# -- Reg Write / Action, Sync and Bulk -----------------------------------------------------------


def test_reg_write_waits_for_action(chain: ChainProcess, client: tuple[Any, Any]) -> None:
    port, handler = client
    for device_id in (1, 2):
        result, error = handler.regWriteTxRx(port, device_id, PROFILE_VELOCITY, 4, [50, 0, 0, 0])
        assert (result, error) == (sdk.COMM_SUCCESS, 0)
        assert handler.read1ByteTxRx(port, device_id, Addr.REGISTERED_INSTRUCTION)[0] == 1
        assert handler.read4ByteTxRx(port, device_id, PROFILE_VELOCITY)[0] == 0  # not yet
    assert handler.action(port, dxl.BROADCAST_ID) == sdk.COMM_SUCCESS
    assert line_stays_quiet(port), "a broadcast Action was answered"
    for device_id in (1, 2):
        assert handler.read4ByteTxRx(port, device_id, PROFILE_VELOCITY)[0] == 50
        assert handler.read1ByteTxRx(port, device_id, Addr.REGISTERED_INSTRUCTION)[0] == 0
    # a unicast Action answers (the SDK does not wait for it): Instruction Error without Reg Write
    rxpacket, result = raw_exchange(port, handler, dxl.encode_packet(1, Instruction.ACTION))
    assert result == sdk.COMM_SUCCESS
    assert status_error(rxpacket) == StatusError.INSTRUCTION


def test_sync_write_moves_servos_and_sync_read_follows_them(client: tuple[Any, Any]) -> None:
    port, handler = client
    assert handler.write1ByteTxRx(port, dxl.BROADCAST_ID, Addr.TORQUE_ENABLE, 1)[0] == 0
    goals = {1: 1000, 2: 3000, 3: 2048}
    writer = sdk.GroupSyncWrite(port, handler, Addr.GOAL_POSITION, 4)
    for device_id, goal in goals.items():
        assert writer.addParam(device_id, list(goal.to_bytes(4, "little", signed=True)))
    assert writer.txPacket() == sdk.COMM_SUCCESS
    assert line_stays_quiet(port), "a Sync Write was answered"
    reader = sdk.GroupSyncRead(port, handler, Addr.PRESENT_POSITION, 4)
    for device_id in (3, 1, 2):
        assert reader.addParam(device_id)

    def arrived() -> bool:
        assert reader.txRxPacket() == sdk.COMM_SUCCESS
        for device_id, goal in goals.items():
            assert reader.isAvailable(device_id, Addr.PRESENT_POSITION, 4)
            raw = reader.getData(device_id, Addr.PRESENT_POSITION, 4)
            if abs(int.from_bytes(raw.to_bytes(4, "little"), "little", signed=True) - goal) > 2:
                return False
        return True

    eventually(arrived, "the servos at their sync-written goals")


def test_bulk_write_and_bulk_read_of_different_items(
    chain: ChainProcess, client: tuple[Any, Any]
) -> None:
    port, handler = client
    writer = sdk.GroupBulkWrite(port, handler)
    assert writer.addParam(1, LED, 1, [1])
    assert writer.addParam(2, POSITION_P_GAIN, 2, [0x34, 0x02])
    assert writer.addParam(3, PROFILE_VELOCITY, 4, [1, 2, 3, 0])
    assert writer.txPacket() == sdk.COMM_SUCCESS
    assert line_stays_quiet(port), "a Bulk Write was answered"
    reader = sdk.GroupBulkRead(port, handler)
    assert reader.addParam(3, PROFILE_VELOCITY, 4)
    assert reader.addParam(1, LED, 1)
    assert reader.addParam(2, Addr.MODEL_NUMBER, 2)
    assert reader.txRxPacket() == sdk.COMM_SUCCESS
    assert reader.getData(1, LED, 1) == 1
    assert reader.getData(2, Addr.MODEL_NUMBER, 2) == 1020
    assert reader.getData(3, PROFILE_VELOCITY, 4) == 0x030201
    assert chain.read_table(2, POSITION_P_GAIN, 2) == bytes([0x34, 0x02])


def test_bulk_read_answers_in_the_order_of_the_packet(
    client: tuple[Any, Any], stalls: PtyStallProbe
) -> None:
    port, _ = client
    params = b"".join(bytes([i]) + dxl.u16(Addr.ID) + dxl.u16(1) for i in (3, 1, 2))
    port.clearPort()
    port.writePort(list(dxl.encode_packet(dxl.BROADCAST_ID, Instruction.BULK_READ, params)))
    packets = collect(port, 3, stalls)
    assert [(p.id, p.data) for p in packets] == [(3, b"\x03"), (1, b"\x01"), (2, b"\x02")]


# -- Factory Reset, Reboot, Clear ----------------------------------------------------------------


def test_factory_reset_restores_the_initial_values(
    chain: ChainProcess, client: tuple[Any, Any]
) -> None:
    port, handler = client
    assert handler.write1ByteTxRx(port, 3, Addr.RETURN_DELAY_TIME, 0) == (sdk.COMM_SUCCESS, 0)
    assert handler.write1ByteTxRx(port, 3, LED, 1) == (sdk.COMM_SUCCESS, 0)
    # 0x02: all but the ID and the baud rate; the device answers, then reboots
    assert handler.factoryReset(port, 3, 0x02) == (sdk.COMM_SUCCESS, 0)
    time.sleep(2 * REBOOT_S)
    assert handler.read1ByteTxRx(port, 3, Addr.RETURN_DELAY_TIME) == (250, sdk.COMM_SUCCESS, 0)
    assert handler.read1ByteTxRx(port, 3, LED)[0] == 0
    # a broadcast "reset all" is not carried out (firmware 42+), and not answered
    assert handler.factoryReset(port, dxl.BROADCAST_ID, 0xFF)[0] == sdk.COMM_SUCCESS
    assert line_stays_quiet(port, 2 * REBOOT_S)
    assert handler.read1ByteTxRx(port, 2, Addr.ID) == (2, sdk.COMM_SUCCESS, 0)
    # 0x01: all but the ID: back to 57 600 bps, where the SDK finds it again
    assert handler.factoryReset(port, 2, 0x01) == (sdk.COMM_SUCCESS, 0)
    time.sleep(2 * REBOOT_S)
    assert handler.ping(port, 2)[1] == sdk.COMM_RX_TIMEOUT
    assert port.setBaudRate(57600)
    assert handler.ping(port, 2) == (1020, sdk.COMM_SUCCESS, 0)
    # 0xFF: everything, the ID too
    assert handler.factoryReset(port, 2, 0xFF) == (sdk.COMM_SUCCESS, 0)
    time.sleep(2 * REBOOT_S)
    assert handler.ping(port, 1) == (1020, sdk.COMM_SUCCESS, 0)
    assert handler.ping(port, 2)[1] == sdk.COMM_RX_TIMEOUT
    rxpacket, _ = raw_exchange(
        port, handler, dxl.encode_packet(1, Instruction.FACTORY_RESET, b"\x07")
    )
    assert status_error(rxpacket) == StatusError.DATA_RANGE  # not an option


def test_reboot_clears_a_hardware_error(stalls: PtyStallProbe) -> None:
    # A servo that boots for longer than the default chain's 50 ms, so that the Ping after the
    # Reboot reaches it while it boots unless the machine held the test up for about as long: an
    # answer is wrong only if it came sooner than the boot could have ended.
    with ChainProcess(SimulatedDynamixelChain, IDS, reboot_s=SLOW_REBOOT_S) as chain:
        port = open_port(chain, stalls)
        try:
            reboot_clears_a_hardware_error(chain, port, sdk.PacketHandler(2.0))
        finally:
            port.closePort()


def reboot_clears_a_hardware_error(chain: ChainProcess, port: Any, handler: Any) -> None:
    chain.inject_hardware_error(1, dxl.HardwareError.OVERHEATING)
    value, result, error = handler.read1ByteTxRx(port, 1, Addr.HARDWARE_ERROR_STATUS)
    assert (value, result) == (dxl.HardwareError.OVERHEATING, sdk.COMM_SUCCESS)
    assert error & dxl.ALERT_BIT
    result, error = handler.write1ByteTxRx(port, 1, Addr.TORQUE_ENABLE, 1)
    assert error == dxl.ALERT_BIT | StatusError.RESULT_FAIL
    rebooting = time.monotonic()
    assert handler.reboot(port, 1) == (sdk.COMM_SUCCESS, dxl.ALERT_BIT)
    booting = handler.ping(port, 1)[1]  # still booting
    answered_after_s = time.monotonic() - rebooting
    assert booting == sdk.COMM_RX_TIMEOUT or answered_after_s >= SLOW_REBOOT_S
    time.sleep(SLOW_REBOOT_S)  # the boot ends at most that long after the Reboot's reply
    assert handler.read1ByteTxRx(port, 1, Addr.HARDWARE_ERROR_STATUS) == (0, sdk.COMM_SUCCESS, 0)


def test_clear_brings_the_position_within_one_turn(
    chain: ChainProcess, client: tuple[Any, Any]
) -> None:
    port, handler = client
    # at power-on the encoder reports the position within one turn
    assert handler.read4ByteTxRx(port, 3, Addr.PRESENT_POSITION)[0] == counts(INITIAL[3]) - 4096
    assert handler.write1ByteTxRx(port, 3, Addr.OPERATING_MODE, 4)[0] == 0  # extended position
    assert handler.write1ByteTxRx(port, 3, Addr.TORQUE_ENABLE, 1)[0] == 0
    assert handler.write4ByteTxRx(port, 3, Addr.GOAL_POSITION, 3 * 4096)[0] == 0
    assert handler.clearMultiTurn(port, 3) == (sdk.COMM_SUCCESS, StatusError.RESULT_FAIL)  # moving
    eventually(
        lambda: handler.read4ByteTxRx(port, 3, Addr.PRESENT_POSITION)[0] == 3 * 4096,
        "the servo at three turns",
    )
    eventually(lambda: handler.read1ByteTxRx(port, 3, Addr.MOVING)[0] == 0, "the servo stopped")
    assert handler.clearMultiTurn(port, 3) == (sdk.COMM_SUCCESS, 0)
    assert handler.read4ByteTxRx(port, 3, Addr.PRESENT_POSITION)[0] == 0
    time.sleep(0.05)  # the goal moved with the position: the servo does not unwind three turns
    assert handler.read4ByteTxRx(port, 3, Addr.PRESENT_POSITION)[0] == 0


# -- error statuses ------------------------------------------------------------------------------


def test_error_statuses(chain: ChainProcess, client: tuple[Any, Any]) -> None:
    port, handler = client
    e = StatusError
    assert handler.write2ByteTxRx(port, 1, Addr.MODEL_NUMBER, 7)[1] == e.ACCESS  # read-only
    assert handler.write1ByteTxRx(port, 1, 300, 1)[1] == e.ACCESS  # undefined
    assert handler.read1ByteTxRx(port, 1, 300)[1:] == (sdk.COMM_SUCCESS, e.ACCESS)
    assert handler.read1ByteTxRx(port, 1, 66)[1:] == (sdk.COMM_SUCCESS, e.ACCESS)  # reserved
    assert handler.readTxRx(port, 1, Addr.TORQUE_ENABLE, 7)[1:] == (sdk.COMM_SUCCESS, 0)
    assert handler.write2ByteTxRx(port, 1, Addr.GOAL_POSITION, 7)[1] == e.DATA_LENGTH
    assert handler.write1ByteTxRx(port, 1, Addr.TORQUE_ENABLE, 2)[1] == e.DATA_RANGE
    assert handler.write4ByteTxRx(port, 1, Addr.GOAL_POSITION, 5000)[1] == e.DATA_LIMIT
    assert handler.write1ByteTxRx(port, 1, Addr.TORQUE_ENABLE, 1)[1] == 0
    assert handler.write1ByteTxRx(port, 1, Addr.OPERATING_MODE, 4)[1] == e.ACCESS  # EEPROM locked
    rxpacket, result = raw_exchange(port, handler, dxl.encode_packet(2, 0x07))
    assert (result, status_error(rxpacket), rxpacket[sdk.PKT_ID]) == (0, e.INSTRUCTION, 2)
    bad_crc = bytearray(dxl.make_read(2, Addr.ID, 1))
    bad_crc[-1] ^= 0x5A
    rxpacket, result = raw_exchange(port, handler, bytes(bad_crc))
    assert (result, status_error(rxpacket), rxpacket[sdk.PKT_ID]) == (0, e.CRC, 2)
    bad_crc = bytearray(dxl.make_write(dxl.BROADCAST_ID, LED, b"\x01"))
    bad_crc[-2] ^= 0x01
    port.writePort(list(bad_crc))
    assert line_stays_quiet(port), "a broadcast with a bad CRC was answered"
    assert handler.read1ByteTxRx(port, 2, Addr.ID) == (2, sdk.COMM_SUCCESS, 0)


def test_status_return_level_decides_which_instructions_answer(client: tuple[Any, Any]) -> None:
    port, handler = client
    assert handler.write1ByteTxRx(port, 1, Addr.STATUS_RETURN_LEVEL, 1)[1] == 0
    assert handler.write1ByteTxRx(port, 1, LED, 1)[0] == sdk.COMM_RX_TIMEOUT  # no status
    assert handler.read1ByteTxRx(port, 1, LED) == (1, sdk.COMM_SUCCESS, 0)
    port.writePort(list(dxl.make_write(1, Addr.STATUS_RETURN_LEVEL, b"\x00")))
    assert line_stays_quiet(port)
    assert handler.read1ByteTxRx(port, 1, LED)[1] == sdk.COMM_RX_TIMEOUT
    assert handler.ping(port, 1) == (1020, sdk.COMM_SUCCESS, 0)  # Ping always answers
