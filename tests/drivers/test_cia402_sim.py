"""The simulated CiA 402 drive against canopen's own client side (`RemoteNode`, `BaseNode402`) on
python-can's `virtual` bus: SDO (expedited and segmented, aborts), NMT and heartbeat, PDO mapping
(accepted and refused), SYNC-driven PDOs, the CiA 402 state machine (illegal transitions refused),
CSP following a target, EMCY on an injected fault, malformed frames counted.

canopen's client API blocks, so each test runs it on a worker thread (`asyncio.to_thread`) while
the simulated drives serve on the event loop's side. Nothing asserts speed: waits poll a
condition with a generous deadline.
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager

import can
import canopen
import pytest
from canopen.sdo.exceptions import SdoAbortedError

from drivers.cia402 import sim_state
from drivers.cia402.objects import Command, State, state_of
from drivers.cia402.sim import SimDriveConfig, SimulatedCiA402Bus
from drivers.cia402.sim_drive import EDS_PATH, SimulatedDrive
from drivers.sim.motor import MotorParams

NODE = 5
COUNTS = 131072  # the EDS's 0x608F:1 increments per revolution
STEP = COUNTS // 200  # 50 steps: a quarter turn less 18 increments


@pytest.fixture
def channel() -> str:
    return f"cia402-sim-{uuid.uuid4().hex}"


@asynccontextmanager
async def simulated(channel: str, position: float = 0.4) -> AsyncIterator[SimulatedCiA402Bus]:
    config = SimDriveConfig(NODE, MotorParams(max_velocity=6.0, initial_position=position))
    async with SimulatedCiA402Bus.create("virtual", channel, [config]) as sim:
        yield sim


@contextmanager
def client(channel: str) -> Iterator[tuple[canopen.Network, canopen.BaseNode402]]:
    network = canopen.Network(can.Bus(interface="virtual", channel=channel))
    network.connect()
    node = canopen.BaseNode402(NODE, str(EDS_PATH))
    node.sdo.RESPONSE_TIMEOUT = 2.0
    network.add_node(node)
    try:
        yield network, node
    finally:
        network.disconnect()


def until(check: Callable[[], bool], what: str, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


def map_csp(node: canopen.BaseNode402) -> None:
    """TPDO1 statusword + position actual, RPDO1 controlword + target, both synchronous."""
    node.nmt.state = "PRE-OPERATIONAL"
    node.tpdo.read()
    node.rpdo.read()
    for pdo, objects in ((node.tpdo[1], (0x6041, 0x6064)), (node.rpdo[1], (0x6040, 0x607A))):
        pdo.clear()
        for index in objects:
            pdo.add_variable(index)
        pdo.trans_type = 1
        pdo.enabled = True
        pdo.save()
    node.sdo[0x6060].raw = 8
    node.nmt.state = "OPERATIONAL"


async def test_sdo_expedited_segmented_and_aborts(channel: str) -> None:
    async with simulated(channel):

        def talk() -> None:
            with client(channel) as (_, node):
                assert node.sdo[0x1018][1].raw == 0x00000A4D  # expedited upload
                assert node.sdo[0x1000].raw == 0x00020192  # CiA 402 servo drive
                assert node.sdo[0x1008].raw == "armd simulated CiA 402 drive"  # segmented
                node.sdo.download(0x6065, 0, (1234).to_bytes(4, "little"), force_segment=True)
                assert node.sdo[0x6065].raw == 1234
                node.sdo[0x605A].raw = 6  # expedited download
                assert node.sdo[0x605A].raw == 6
                with pytest.raises(SdoAbortedError) as missing:
                    node.sdo.upload(0x2345, 0)
                assert missing.value.code == 0x06020000
                with pytest.raises(SdoAbortedError) as read_only:
                    node.sdo.download(0x6041, 0, b"\x00\x00")
                assert read_only.value.code == 0x06010002
                with pytest.raises(SdoAbortedError) as mode:
                    node.sdo[0x6060].raw = 1  # profile position: this drive has CSP only
                assert mode.value.code == 0x06090030

        await asyncio.to_thread(talk)


async def test_boot_up_nmt_heartbeat_and_pdos_only_when_operational(channel: str) -> None:
    async with simulated(channel) as sim:

        def talk() -> None:
            with client(channel) as (network, node):
                node.sdo[0x1017].raw = 20  # the heartbeat starts
                node.nmt.wait_for_heartbeat(2.0)
                assert node.nmt.state == "PRE-OPERATIONAL"
                map_csp(node)
                until(lambda: node.nmt.state == "OPERATIONAL", "the heartbeat's new state")
                network.sync.transmit()
                assert node.tpdo[1].wait_for_reception(2.0) is not None
                node.nmt.state = "PRE-OPERATIONAL"
                until(lambda: sim.drive(NODE).nmt_state == "PRE-OPERATIONAL", "pre-operational")
                syncs = sim.drive(NODE).syncs
                network.sync.transmit()
                assert node.tpdo[1].wait_for_reception(0.2) is None  # no PDO outside Operational
                assert sim.drive(NODE).syncs == syncs

        await asyncio.to_thread(talk)


async def test_refused_mappings(channel: str) -> None:
    async with simulated(channel):

        def talk() -> None:
            with client(channel) as (_, node):
                node.nmt.state = "PRE-OPERATIONAL"
                with pytest.raises(SdoAbortedError) as unmappable:
                    node.sdo[0x1A00][1].raw = 0x60650020  # following error window: not mappable
                assert unmappable.value.code == 0x06040041
                with pytest.raises(SdoAbortedError) as read_only:
                    node.sdo[0x1600][1].raw = 0x60410010  # statusword into an RPDO
                assert read_only.value.code == 0x06040041
                for sub, entry in enumerate((0x60640020, 0x606C0020, 0x60410010), start=1):
                    node.sdo[0x1A00][sub].raw = entry
                with pytest.raises(SdoAbortedError) as too_long:
                    node.sdo[0x1A00][0].raw = 3  # 80 bits
                assert too_long.value.code == 0x06040042

        await asyncio.to_thread(talk)


async def test_base_node_402_walks_the_state_machine_and_csp_follows(channel: str) -> None:
    start = 0.4
    async with simulated(channel, position=start) as sim:
        drive = sim.drive(NODE)

        def talk() -> None:
            with client(channel) as (network, node):
                map_csp(node)
                network.sync.start(0.005)
                node.setup_402_state_machine(read_pdos=False)
                node.tpdo[1].wait_for_reception(2.0)
                assert node.state == "SWITCH ON DISABLED"
                measured = node.tpdo[1]["Position actual value"].raw
                assert measured == pytest.approx(start * COUNTS / (2 * math.pi), abs=1)
                node.rpdo[1]["Target position"].raw = measured  # hold where it is
                node.rpdo[1].start(0.005)
                node.state = "OPERATION ENABLED"  # shutdown, switch on, enable operation
                # A quarter turn on, in steps: a jump of the demand beyond the following error
                # window 0x6065 would trip the drive's following error (0x8611).
                for k in range(1, 51):
                    node.rpdo[1]["Target position"].raw = measured + k * STEP
                    time.sleep(0.01)
                target = measured + 50 * STEP
                until(
                    lambda: abs(node.tpdo[1]["Position actual value"].raw - target) <= 2,
                    "the shaft at the target",
                )
                node.state = "SWITCHED ON"  # disable operation
                node.rpdo[1].stop()
                network.sync.stop()

        await asyncio.to_thread(talk)
        with drive.lock:
            assert drive.state is State.SWITCHED_ON
            assert drive.motor.position == pytest.approx(start + math.pi / 2, abs=2e-3)


async def test_illegal_transitions_are_refused(channel: str) -> None:
    async with simulated(channel) as sim:
        drive = sim.drive(NODE)

        def talk() -> None:
            with client(channel) as (_, node):
                node.sdo[0x6040].raw = Command.ENABLE_OPERATION  # from Switch On Disabled
                assert state_of(node.sdo[0x6041].raw) is State.SWITCH_ON_DISABLED
                node.sdo[0x6040].raw = Command.SHUTDOWN
                node.sdo[0x6040].raw = Command.SWITCH_ON
                node.sdo[0x6040].raw = Command.FAULT_RESET  # outside Fault: nothing
                assert state_of(node.sdo[0x6041].raw) is State.SWITCHED_ON

        await asyncio.to_thread(talk)
        assert drive.refused_commands == 2


@pytest.mark.parametrize(
    ("state", "controlword", "option", "after"),
    [
        (State.SWITCH_ON_DISABLED, 0x06, 2, State.READY_TO_SWITCH_ON),
        (State.SWITCH_ON_DISABLED, 0x0F, 2, State.SWITCH_ON_DISABLED),  # no transition 2+3+4
        (State.READY_TO_SWITCH_ON, 0x07, 2, State.SWITCHED_ON),
        (State.READY_TO_SWITCH_ON, 0x02, 2, State.SWITCH_ON_DISABLED),
        (State.SWITCHED_ON, 0x0F, 2, State.OPERATION_ENABLED),
        (State.OPERATION_ENABLED, 0x07, 2, State.SWITCHED_ON),
        (State.OPERATION_ENABLED, 0x06, 2, State.READY_TO_SWITCH_ON),
        (State.OPERATION_ENABLED, 0x02, 2, State.QUICK_STOP_ACTIVE),
        (State.OPERATION_ENABLED, 0x00, 2, State.SWITCH_ON_DISABLED),
        (State.QUICK_STOP_ACTIVE, 0x06, 6, State.QUICK_STOP_ACTIVE),  # shutdown: none from QSA
        (State.QUICK_STOP_ACTIVE, 0x0F, 6, State.OPERATION_ENABLED),  # transition 16
        (State.QUICK_STOP_ACTIVE, 0x0F, 2, State.QUICK_STOP_ACTIVE),
        (State.QUICK_STOP_ACTIVE, 0x00, 6, State.SWITCH_ON_DISABLED),
        (State.FAULT, 0x06, 2, State.FAULT),
    ],
)
def test_state_machine_transitions(
    state: State, controlword: int, option: int, after: State
) -> None:
    assert sim_state.next_state(state, controlword, 0x00, option) is after
    shown = sim_state.statusword(after, target_reached=False, following_error=False)
    assert state_of(shown) is after


def test_fault_reset_needs_a_rising_edge() -> None:
    assert sim_state.next_state(State.FAULT, 0x80, 0x00, 2) is State.SWITCH_ON_DISABLED
    assert sim_state.next_state(State.FAULT, 0x80, 0x80, 2) is State.FAULT


async def test_injected_fault_sends_its_emcy_and_shows_in_the_statusword(channel: str) -> None:
    async with simulated(channel) as sim:
        drive = sim.drive(NODE)

        def talk() -> None:
            with client(channel) as (_, node):
                with drive.lock:
                    drive.inject_fault(0x2310)  # over-current
                emcy = node.emcy.wait(0x2310, timeout=2.0)
                assert emcy is not None
                assert emcy.register & 0x03 == 0x03  # generic + current
                assert node.sdo[0x603F].raw == 0x2310
                assert state_of(node.sdo[0x6041].raw) is State.FAULT
                node.sdo[0x6040].raw = 0x00
                node.sdo[0x6040].raw = Command.FAULT_RESET
                assert state_of(node.sdo[0x6041].raw) is State.SWITCH_ON_DISABLED
                until(lambda: not node.emcy.active, "the EMCY error reset")

        await asyncio.to_thread(talk)


async def test_malformed_frames_are_counted_never_crash(channel: str) -> None:
    async with simulated(channel) as sim:
        drive = sim.drive(NODE)
        with can.Bus(interface="virtual", channel=channel) as raw:
            raw.send(
                can.Message(arbitration_id=0x600 + NODE, data=b"\x40\x18", is_extended_id=False)
            )
            raw.send(can.Message(arbitration_id=0x000, data=b"\x01", is_extended_id=False))
            raw.send(can.Message(arbitration_id=0x080, data=b"\x01\x02", is_extended_id=False))

            def counted() -> bool:
                with drive.lock:
                    return drive.malformed_frames >= 3

            await asyncio.to_thread(until, counted, "the malformed frames counted")

        def still_answers() -> None:
            with client(channel) as (_, node):
                assert node.sdo[0x1018][2].raw == 0x402

        await asyncio.to_thread(still_answers)
        assert drive.nmt_state == "PRE-OPERATIONAL"  # the 1-byte NMT frame did nothing


def test_the_drive_loads_its_shipped_eds() -> None:
    drive = SimulatedDrive(SimDriveConfig(3))
    assert EDS_PATH.is_file()
    assert drive.counts_per_rev == COUNTS
    assert drive.value(0x1018, 1) == 0x00000A4D
    assert drive.value(0x6502) & 0x80  # CSP supported
