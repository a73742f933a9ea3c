"""Gravity compensation from the daemon's torque map to the wire: the loop on the real drivers
(`tests.armd.hw_rigs`) against their simulated devices, holding a known pose of a small arm with
mass, the map made by the daemon's `ArmDynamics`; the frames on the bus decoded by independent
peers: ODrive's DBC through cantools (Set_Input_Pos.Torque_FF) and the ``damiao-motor`` package's
MIT encoder (t_ff). Through the transmission: the shoulder's 2:1 gearbox, the elbow's reversed
sign; each device's own direction on top."""

from __future__ import annotations

import asyncio
from typing import Any

import can
import numpy as np
import pytest

from armd.control.feedforward import TorqueFeedForward
from armd.daemon.dynamics import ArmDynamics
from armd.link.messages import Mode
from armd.link.protocol import Sample, TorqueMap
from armd.motion.trajectory import Setpoint
from kinematics import Inertial, KinematicTree, Link
from tests.armd.control.test_faults_mit import DIRECTIONS as MIT_DIRECTIONS
from tests.armd.control.test_faults_mit import IDS as MIT_IDS
from tests.armd.control.test_faults_mit import mit_bench
from tests.armd.hw_rigs import ODRIVE_DIRECTIONS, HwRig, odrive_bench, small_arm
from tests.drivers.odrive_dbc import load_dbc

GRAVITY = (3.0, 0.0, -9.81)  # tilted: the vertical shoulder carries a torque too
COMPENSATED = np.array([True, True, False])  # the wrist is a fixed joint


def massive_small_arm() -> KinematicTree:
    """`small_arm` with an upper arm, a forearm and a tool of some mass."""
    masses = {
        "upper_arm": Inertial(1.2, (0.15, 0.0, 0.0), (0.002, 0.0, 0.0, 0.01, 0.0, 0.01)),
        "forearm": Inertial(0.8, (0.12, 0.0, 0.01), (0.001, 0.0, 0.0, 0.005, 0.0, 0.005)),
        "tool": Inertial(0.3, (0.02, 0.0, 0.0)),
    }
    return KinematicTree(
        [
            Link(link.name, link.parent, link.motor, inertial=masses.get(link.name))
            for link in small_arm().links
        ],
        name="massive-small-arm",
    )


async def hold(rig: HwRig) -> TorqueMap:
    """Run until the arm holds, then the daemon's map at the loop's commanded state (what the
    daemon computes from the loop's `Sample`), handed to the loop."""
    await rig.run_until(lambda: rig.loop.mode is Mode.HOLDING, "the arm to hold")
    loop = rig.loop
    assert loop.measured is not None
    assert loop.commanded is not None
    sample = Sample(
        loop.tick_count, 0.0, loop.mode, 0, False, False, 0, None,
        Sample.rows(loop.measured, loop.commanded),
    )  # fmt: skip
    dynamics = ArmDynamics(massive_small_arm(), "tool", COMPENSATED, GRAVITY)
    torque_map = dynamics.torque_map(sample)
    assert torque_map is not None
    loop.handle(torque_map)
    return torque_map


async def frames_after(rig: HwRig, channel: str, wanted: int) -> list[can.Message]:
    """The frames on `channel` while the loop runs `wanted` more ticks."""
    listener = can.Bus(interface="virtual", channel=channel, receive_own_messages=False)
    try:
        await rig.run_for(wanted * rig.loop.settings.period_s)
        await asyncio.sleep(0)
        frames = []
        while (message := listener.recv(timeout=0.0)) is not None:
            frames.append(message)
        return frames
    finally:
        listener.shutdown()


def expected_motor_torques(torque_map: TorqueMap, rig: HwRig) -> np.ndarray:
    """The joint torques at the motors: ``sign × τ / gear_ratio`` (shoulder 2:1, elbow -1)."""
    joints = rig.hardware.transmission.joints
    scale = np.array([t.sign * t.gear_ratio for t in joints])
    return torque_map.torque[:2] / scale


async def test_odrive_torque_ff_carries_the_gravity_torque_at_each_motor() -> None:
    dbc: Any = load_dbc()
    message = dbc.get_message_by_frame_id(0x0C)  # Set_Input_Pos (of Axis0; node id masked)
    async with odrive_bench() as bench:
        rig = bench.rig
        torque_map = await hold(rig)
        assert np.all(np.abs(torque_map.torque[:2]) > 0.2)  # both joints carry a load
        frames = await frames_after(rig, bench.bus.channel, 10)
        motor = expected_motor_torques(torque_map, rig)
        seen = {0: [], 1: []}  # type: dict[int, list[float]]
        for frame in frames:
            if frame.arbitration_id & 0x1F == 0x0C:
                decoded = message.decode(bytes(frame.data))
                seen[frame.arbitration_id >> 5].append(decoded["Torque_FF"])
        for node, direction in enumerate(ODRIVE_DIRECTIONS):
            assert seen[node], f"no Set_Input_Pos of node {node}"
            # the DBC's 0.001 N·m step: within half of it (and float rounding)
            assert seen[node] == pytest.approx(
                [direction * motor[node]] * len(seen[node]), abs=0.0005 + 1e-9
            )


async def test_mit_t_ff_carries_the_gravity_torque_at_each_motor() -> None:
    damiao = pytest.importorskip("damiao_motor.core.motor")
    peer = damiao.DaMiaoMotor(1, 0x11, None, motor_type="4310")
    async with mit_bench() as bench:
        rig = bench.rig
        torque_map = await hold(rig)
        frames = await frames_after(rig, bench.bus.channel, 10)
        motor = expected_motor_torques(torque_map, rig)
        for k, (slave_id, direction) in enumerate(zip(MIT_IDS, MIT_DIRECTIONS, strict=True)):
            commands = [bytes(f.data) for f in frames if f.arbitration_id == slave_id]
            commands = [data for data in commands if len(data) == 8 and data != bytes([0xFF] * 8)]
            assert commands, f"no MIT command to actuator {slave_id}"
            theirs = peer.encode_cmd_msg(0.0, 0.0, direction * motor[k], 0.0, 0.0)
            for data in commands:  # t_ff: the last 12 bits (byte 6's low nibble, byte 7)
                ours = ((data[6] & 0x0F) << 8) | data[7]
                peer_bits = ((theirs[6] & 0x0F) << 8) | theirs[7]
                assert abs(ours - peer_bits) <= 1, (ours, peer_bits)  # one 12-bit step: rounding


# -- the loop's side, as a unit ------------------------------------------------------------------


def a_map(n: int = 2) -> TorqueMap:
    return TorqueMap(
        np.array([0.1, -0.2])[:n],
        np.array([1.0, -2.0])[:n],
        np.array([[3.0, 0.5], [0.5, -1.0]])[:n, :n],
        np.array([[0.4, 0.1], [0.1, 0.2]])[:n, :n],
    )


def test_the_loop_evaluates_the_linearised_model_at_its_commanded_state() -> None:
    feedforward = TorqueFeedForward(2, max_age_s=0.2)
    feedforward.take(a_map(), now=10.0)
    setpoint = Setpoint(np.array([0.2, -0.3]), np.zeros(2), np.array([1.0, -2.0]))
    torque = feedforward.torque(setpoint, now=10.1)
    assert torque is not None
    expected = np.array([1.0, -2.0]) + a_map().stiffness @ [0.1, -0.1] + a_map().mass @ [1, -2]
    assert torque == pytest.approx(expected, abs=1e-12)


def test_a_stale_map_gives_no_feed_forward() -> None:
    feedforward = TorqueFeedForward(2, max_age_s=0.2)
    setpoint = Setpoint(np.zeros(2), np.zeros(2), np.zeros(2))
    assert feedforward.torque(setpoint, now=0.0) is None  # none yet
    feedforward.take(a_map(), now=10.0)
    assert feedforward.torque(setpoint, now=10.2) is not None
    assert feedforward.torque(setpoint, now=10.2 + 1e-6) is None


@pytest.mark.parametrize(
    "bad",
    [
        a_map(1),
        TorqueMap(
            np.array([np.nan, 0.0]), *[getattr(a_map(), f) for f in ("torque", "stiffness", "mass")]
        ),
    ],
    ids=["shape", "nan"],
)
def test_a_map_of_the_wrong_shape_or_not_finite_is_dropped(bad: TorqueMap) -> None:
    feedforward = TorqueFeedForward(2, max_age_s=0.2)
    feedforward.take(bad, now=1.0)
    assert feedforward.torque(Setpoint(np.zeros(2), np.zeros(2), np.zeros(2)), now=1.0) is None
