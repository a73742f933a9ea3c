"""The ODrive codec, driver and simulator against the official DBC (``odrive-cansimple-0.6.x.dbc``).

The DBC ships inside the ``odrive-can`` package (a test dependency) and is found at test time
(`tests.drivers.odrive_dbc`). `cantools` decodes every frame the driver and the simulated ODrive
send during a whole session (length, scaling, signedness, float signals), and the driver reads a
fake ODrive whose frames cantools encodes; `test_odrive_dbc_codec` checks the codec and the
simulated axis frame by frame. Where they disagree, the DBC is right.
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import Callable
from dataclasses import astuple
from typing import Any

import can
import pytest

from drivers import DeviceCommand
from drivers.can_bus.link import make_bus
from drivers.odrive import protocol as proto
from drivers.odrive.driver import ODriveDriver, ODriveParams
from drivers.odrive.sim import SimAxisConfig, SimulatedAxis, SimulatedODrive
from drivers.sim.motor import MotorParams
from tests.drivers.odrive_dbc import dbc_path, load_dbc

cantools = pytest.importorskip("cantools")

TURN = 2.0 * math.pi
NODE_IDS = (0, 1, 9)  # 9: beyond the DBC's Axis0..Axis7 messages, decoded by command id


@pytest.fixture(scope="module")
def dbc() -> Any:
    return load_dbc()


def dbc_message(dbc: Any, arbitration_id: int) -> Any:
    """The DBC's message for a frame of any node: Axis0's message of the same command id."""
    return dbc.get_message_by_frame_id(arbitration_id & 0x1F)


def decode(dbc: Any, frame: proto.Frame) -> dict[str, Any]:
    """Decode strictly: the data length must be the DBC's, every signal must be present."""
    message = dbc_message(dbc, frame.arbitration_id)
    if frame.is_remote:
        assert frame.remote_dlc == message.length, f"{message.name}: RTR DLC {frame.remote_dlc}"
        return {}
    assert len(frame.data) == message.length, (
        f"{message.name}: {len(frame.data)} data bytes, the DBC says {message.length}"
    )
    decoded = message.decode(frame.data, decode_choices=False, allow_truncated=False)
    assert message.encode(decoded, strict=True, padding=False) is not None  # in range
    return dict(decoded)


# -- every frame on the wire ------------------------------------------------------------------


def _recording(bus: can.BusABC, log: list[proto.Frame]) -> can.BusABC:
    """`bus`, with every message it sends appended to `log` (as a protocol frame)."""
    send = bus.send

    def recorded_send(message: can.Message, timeout: float | None = None) -> None:
        remote = message.dlc if message.is_remote_frame else None
        data = b"" if message.is_remote_frame else bytes(message.data)
        log.append(proto.Frame(message.arbitration_id, data, remote))
        send(message, timeout)

    bus.send = recorded_send  # type: ignore[method-assign]
    return bus


async def _wait(check: Callable[[], bool], what: str, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


async def _record_a_session() -> tuple[list[proto.Frame], list[proto.Frame]]:
    """The driver's whole lifecycle against the simulator: (frames of the driver, of the sim)."""
    channel = f"odrive-dbc-{uuid.uuid4().hex}"
    sent_by_driver: list[proto.Frame] = []
    sent_by_sim: list[proto.Frame] = []
    axes = [
        SimulatedAxis(
            SimAxisConfig(
                node_id,
                MotorParams(initial_position=0.3 * (i + 1)),
                heartbeat_period_s=0.01,
                encoder_period_s=0.005,
            )
        )
        for i, node_id in enumerate(NODE_IDS)
    ]
    params = ODriveParams.model_validate(
        {
            "interface": "virtual",
            "channel": channel,
            "devices": {f"j{n}": {"node_id": n} for n in NODE_IDS},
            "open_timeout_s": 2.0,
            "enable_timeout_s": 2.0,
            "feedback_timeout_s": 0.5,
        }
    )
    sim_bus = _recording(make_bus("virtual", channel), sent_by_sim)
    async with SimulatedODrive(sim_bus, axes) as sim:
        driver = ODriveDriver(
            params,
            bus_factory=lambda: _recording(make_bus("virtual", channel), sent_by_driver),
        )
        async with driver:
            await driver.read()
            await driver.enable()
            for k in range(5):  # velocity feed-forwards of both signs
                velocity = (-1.0) ** k * 0.7 * k * TURN
                await driver.write({f"j{n}": DeviceCommand(0.3, velocity) for n in NODE_IDS})
                await asyncio.sleep(0.01)
            driver.estop()
            await _wait(lambda: sim.axis(0).active_errors != 0, "the estop to latch")
            await driver.disable()
            await driver.clear_faults()
            await driver.enable()
            await driver.disable()
        # what the driver never asks but a master may: every RTR the simulator answers
        with make_bus("virtual", channel) as asker:
            for node_id in NODE_IDS:
                for command in (proto.Command.GET_ERROR, proto.Command.HEARTBEAT):
                    request = proto.make_request(node_id, command)
                    asker.send(
                        can.Message(
                            arbitration_id=request.arbitration_id,
                            is_extended_id=False,
                            is_remote_frame=True,
                            dlc=request.remote_dlc,
                        )
                    )
            await _wait(
                lambda: (
                    sum(f.arbitration_id & 0x1F == proto.Command.GET_ERROR for f in sent_by_sim)
                    >= len(NODE_IDS)
                ),
                "the Get_Error replies",
            )
    return sent_by_driver, sent_by_sim


@pytest.fixture(scope="module")
def session() -> tuple[list[proto.Frame], list[proto.Frame]]:
    return asyncio.run(_record_a_session())


_VERSION_SIGNALS = [
    "Protocol_Version",
    "Hw_Version_Major",
    "Hw_Version_Minor",
    "Hw_Version_Variant",
    "Fw_Version_Major",
    "Fw_Version_Minor",
    "Fw_Version_Revision",
    "Fw_Version_Unreleased",
]

# What `drivers.odrive.protocol` reads from a frame, named and scaled as the DBC's signals.
_OURS: dict[int, Callable[[bytes], dict[str, float]]] = {
    proto.Command.HEARTBEAT: lambda d: {
        "Axis_Error": (h := proto.parse_heartbeat(d)).axis_error,
        "Axis_State": h.axis_state,
        "Procedure_Result": h.procedure_result,
        "Trajectory_Done_Flag": int(h.trajectory_done),
    },
    proto.Command.GET_ENCODER_ESTIMATES: lambda d: {
        "Pos_Estimate": (e := proto.parse_encoder_estimates(d)).position_turns,
        "Vel_Estimate": e.velocity_turns_s,
    },
    proto.Command.GET_ERROR: lambda d: {
        "Active_Errors": (s := proto.parse_error_status(d)).active_errors,
        "Disarm_Reason": s.disarm_reason,
    },
    proto.Command.GET_VERSION: lambda d: dict(
        zip(_VERSION_SIGNALS, astuple(proto.parse_version(d)), strict=True)
    ),
    proto.Command.SET_INPUT_POS: lambda d: {
        "Input_Pos": (p := proto.parse_set_input_pos(d)).position_turns,
        "Vel_FF": p.vel_ff_turns_s,
        "Torque_FF": p.torque_ff_nm,
    },
    proto.Command.SET_AXIS_STATE: lambda d: {"Axis_Requested_State": proto.parse_set_axis_state(d)},
    proto.Command.SET_CONTROLLER_MODE: lambda d: dict(
        zip(("Control_Mode", "Input_Mode"), proto.parse_set_controller_mode(d), strict=True)
    ),
    proto.Command.CLEAR_ERRORS: lambda d: {"Identify": int(proto.parse_clear_errors(d))},
    proto.Command.ESTOP: lambda d: {},
}


def _ours_as_dbc_signals(cmd: int, data: bytes) -> dict[str, float]:
    assert cmd in _OURS, f"no parser for command 0x{cmd:02X}"
    return _OURS[cmd](data)


def _assert_same(dbc: Any, frame: proto.Frame) -> None:
    theirs = decode(dbc, frame)
    if frame.is_remote:
        return
    ours = _ours_as_dbc_signals(frame.arbitration_id & 0x1F, frame.data)
    assert set(ours) == set(theirs), dbc_message(dbc, frame.arbitration_id).name
    for name, value in theirs.items():
        assert ours[name] == pytest.approx(value, rel=0, abs=1e-9), (name, frame)


def test_the_dbc_is_the_firmware_06_one(dbc: Any) -> None:
    assert dbc_path().name.startswith("odrive-cansimple-0.6.")
    assert dbc.get_message_by_name("Axis0_Set_Axis_State").length == 8


def test_every_frame_the_driver_sends_decodes_with_the_dbc(dbc: Any, session: Any) -> None:
    sent_by_driver, _ = session
    commands = {f.arbitration_id & 0x1F for f in sent_by_driver}
    c = proto.Command
    expected = {c.SET_AXIS_STATE, c.SET_CONTROLLER_MODE, c.SET_INPUT_POS, c.CLEAR_ERRORS, c.ESTOP}
    assert expected <= commands, "the session did not exercise every command the driver sends"
    for frame in sent_by_driver:
        message = dbc_message(dbc, frame.arbitration_id)
        if frame.is_remote:  # a request: the DBC message is the ODrive's reply
            assert "Master" not in message.senders, message.name
        else:
            assert "Master" in message.senders, f"{message.name} is not the master's to send"
        assert not message.is_multiplexed(), message.name
        _assert_same(dbc, frame)
    vel_ffs = {
        decode(dbc, f)["Vel_FF"]
        for f in sent_by_driver
        if f.arbitration_id & 0x1F == c.SET_INPUT_POS
    }
    assert min(vel_ffs) < 0 < max(vel_ffs), "signed feed-forwards were exercised"


def test_every_frame_the_simulator_sends_decodes_with_the_dbc(dbc: Any, session: Any) -> None:
    _, sent_by_sim = session
    commands = {f.arbitration_id & 0x1F for f in sent_by_sim}
    c = proto.Command
    assert {c.HEARTBEAT, c.GET_ENCODER_ESTIMATES, c.GET_ERROR, c.GET_VERSION} <= commands
    for frame in sent_by_sim:
        assert not frame.is_remote
        message = dbc_message(dbc, frame.arbitration_id)
        assert "Master" not in message.senders, f"{message.name} is the master's to send"
        _assert_same(dbc, frame)
    estop_errors = [
        decode(dbc, f)["Active_Errors"]
        for f in sent_by_sim
        if f.arbitration_id & 0x1F == c.GET_ERROR
    ]
    assert all(e & proto.AxisError.ESTOP_REQUESTED == 0 for e in estop_errors)  # cleared since


async def test_the_driver_reads_an_odrive_whose_frames_cantools_encodes(dbc: Any) -> None:
    """A fake ODrive built from the DBC alone (cyclic Heartbeat and Get_Encoder_Estimates, the
    Get_Version reply): the driver opens, reads the position and sees the axis error."""
    channel = f"odrive-dbc-fake-{uuid.uuid4().hex}"
    node, position_turns, velocity_turns_s = 5, -0.375, 0.5
    heartbeat = {"Axis_Error": 0, "Axis_State": 1, "Procedure_Result": 0}
    version = dict.fromkeys(_VERSION_SIGNALS, 0) | {"Fw_Version_Major": 0, "Fw_Version_Minor": 6}

    def frames() -> list[can.Message]:
        encoded = [
            ("Axis0_Heartbeat", heartbeat | {"Trajectory_Done_Flag": 1}),
            (
                "Axis0_Get_Encoder_Estimates",
                {"Pos_Estimate": position_turns, "Vel_Estimate": velocity_turns_s},
            ),
            ("Axis0_Get_Version", version),
        ]
        return [
            can.Message(
                arbitration_id=node << 5 | dbc.get_message_by_name(name).frame_id,
                data=dbc.get_message_by_name(name).encode(signals, strict=True),
                is_extended_id=False,
            )
            for name, signals in encoded
        ]

    async def fake_odrive(stop: asyncio.Event) -> None:
        with make_bus("virtual", channel) as bus:
            while not stop.is_set():
                for message in frames():
                    bus.send(message)
                await asyncio.sleep(0.005)

    params = ODriveParams.model_validate(
        {"interface": "virtual", "channel": channel, "devices": {"j": {"node_id": node}}}
    )
    stop = asyncio.Event()
    task = asyncio.create_task(fake_odrive(stop))
    try:
        async with ODriveDriver(params) as driver:
            state = (await driver.read())["j"]
            assert state.position == pytest.approx(position_turns * TURN, abs=1e-6)
            assert state.velocity == pytest.approx(velocity_turns_s * TURN, abs=1e-6)
            assert state.fault is None
            heartbeat["Axis_Error"] = int(proto.AxisError.DRV_FAULT)

            async def faulted() -> bool:
                return (await driver.read())["j"].fault is not None

            deadline = time.monotonic() + 5.0
            while not await faulted():
                assert time.monotonic() < deadline, "the axis error never showed"
                await asyncio.sleep(0.01)
            assert "DRV_FAULT" in str((await driver.read())["j"].fault)
    finally:
        stop.set()
        await task
