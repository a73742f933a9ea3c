"""The daemon's side of streaming: parsing (`armd.api.stream_payloads`), the bridge's ``stream``
topic
over a real Mosquitto, and `armd.planning.stream_input` in front of the in-process loop (sessions,
sequence
numbers, refusals, Cartesian targets)."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re

import numpy as np
import pytest

from armd.api.bridge import MqttBridge
from armd.api.contract import MAX_SEQ, stream_json
from armd.api.statuses import StatusLedger
from armd.api.stream_payloads import parse_stream
from armd.control.streaming import timeout_reason
from armd.link.messages import (
    GoalStatus,
    Rejection,
    StatusUpdate,
    StreamEnd,
    StreamJoints,
    StreamMessage,
    StreamPose,
    StreamTwist,
)
from armd.link.protocol import STREAM_DISABLED, EngageEstop, LoopPort
from armd.planning.stream_cartesian import CartesianStream
from armd.planning.stream_input import (
    REJECTIONS_BURST,
    SEQ_MEMORY_S,
    SEQ_MEMORY_TIMEOUTS,
    EndedStreams,
    StreamInput,
    StreamSettings,
    seq_memory_s,
)
from kinematics.ik import IKOptions
from tests.armd.api.test_mqtt import Daemon, probe, running, settings_for, wait_until
from tests.armd.rig import PERIOD, Rig, assert_within_limits, make_rig, move
from tests.armd.rig import ur5 as make_tree
from tests.broker import MosquittoBroker

JOINTS = ("shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint")
LINKS = ("base_link", "tool0")
Q0 = np.array([0.0, -1.2, 1.4, -1.6, -1.5, 0.3])  # away from singularities
JOINT_TOLERANCE = 0.005  # rad: the rig's safety.joint_tolerance, within which a stream succeeds


def parse(document: object) -> StreamMessage | Rejection:
    payload = document if isinstance(document, bytes) else json.dumps(document).encode()
    return parse_stream(payload, joint_names=JOINTS, link_names=LINKS, default_link="tool0")


# -- parsing ---------------------------------------------------------------------------------------


def test_every_message_type_round_trips_through_its_json_form() -> None:
    messages: list[StreamMessage] = [
        StreamJoints("s", 0, {"elbow_joint": 1.2}, {"elbow_joint": -0.5}),
        StreamJoints("s", 1, {"elbow_joint": 1.2, "shoulder_pan_joint": 0.0}),
        StreamPose("s", 2, (0.4, 0.1, 0.3), (1.0, 0.0, 0.0, 0.0), "tool0"),
        StreamPose("s", 3, (0.4, 0.1, 0.3), None, "tool0"),
        StreamTwist("s", 4, (0.1, 0.0, 0.0), (0.0, 0.0, 0.5), "tool"),
        StreamEnd("s", MAX_SEQ),
    ]
    for message in messages:
        assert parse(stream_json(message)) == message


def test_defaults_id_link_frame() -> None:
    assert parse({"seq": 5, "type": "end"}) == StreamEnd("stream", 5)
    pose = parse({"seq": 1, "type": "pose", "position": [0.1, 0.2, 0.3]})
    assert pose == StreamPose("stream", 1, (0.1, 0.2, 0.3), None, "tool0")
    twist = parse({"seq": 1, "type": "twist", "linear": [0, 0, 0], "angular": [0, 0, 0]})
    assert isinstance(twist, StreamTwist)
    assert twist.frame == "root"


@pytest.mark.parametrize(
    ("document", "reason"),
    [
        ({"type": "end"}, "seq: required field is missing"),
        ({"seq": -1, "type": "end"}, "seq: -1 must be an integer in [0, 2^53]"),
        ({"seq": MAX_SEQ + 1, "type": "end"}, "must be an integer in [0, 2^53]"),
        ({"seq": 1.0, "type": "end"}, "seq: 1.0 must be an integer"),
        ({"seq": True, "type": "end"}, "seq: true must be an integer"),
        ({"seq": 1, "type": "stop"}, "type: 'stop' must be one of 'joints', 'pose', 'twist'"),
        ({"seq": 1}, "type: required field is missing"),
        ({"seq": 1, "type": "joints", "positions": {}}, "positions: must name at least one"),
        ({"seq": 1, "type": "joints", "positions": {"x": 1.0}}, "positions.x: unknown joint"),
        ({"seq": 1, "type": "joints", "positions": {"elbow_joint": 1e308}}, "within ±1000"),
        (b'{"seq": 1, "type": "joints", "positions": {"elbow_joint": NaN}}', "finite number"),
        (
            {
                "seq": 1,
                "type": "joints",
                "positions": {"elbow_joint": 1.0},
                "velocities": {"shoulder_pan_joint": 1.0},
            },
            "velocities.shoulder_pan_joint: not named in positions",
        ),
        ({"seq": 1, "type": "pose", "position": [0, 0]}, "position: must be an array of 3"),
        (
            {"seq": 1, "type": "pose", "position": [0, 0, 1], "orientation": [0, 0, 0, 0]},
            "orientation: [0, 0, 0, 0] must be a non-zero quaternion",
        ),
        ({"seq": 1, "type": "pose", "position": [0, 0, 1], "link": "x"}, "link: 'x' unknown"),
        (
            {"seq": 1, "type": "twist", "linear": [0, 0, 1e9], "angular": [0, 0, 0]},
            "linear[2]: 1000000000.0 must be within ±100 m/s",
        ),
        (
            {"seq": 1, "type": "twist", "linear": [0, 0, 0], "angular": [0, 0, 0], "frame": "x"},
            "frame:",
        ),
        ({"seq": 1, "type": "end", "speed": 1}, "speed: unknown field"),
        ({"id": "", "seq": 1, "type": "end"}, "id: must be a non-empty string"),
        (b"\xff", "payload is not valid UTF-8"),
        (b"[]", "payload must be a JSON object"),
        (b"x" * 70000, "payload too large"),
    ],
)
def test_malformed_messages_are_refused_with_the_field_and_why(
    document: object, reason: str
) -> None:
    parsed = parse(document)
    assert isinstance(parsed, Rejection)
    assert reason in parsed.reason


# -- the bridge ----------------------------------------------------------------------------------


async def test_the_bridge_takes_stream_messages_and_drops_retained_ones(
    mosquitto: MosquittoBroker, caplog: pytest.LogCaptureFixture
) -> None:
    taken: list[StreamMessage | Rejection] = []
    topic = "armd/test/stream"
    async with probe(mosquitto) as client:
        stale = {"seq": 0, "type": "joints", "positions": {"elbow": 1.0}}
        await client.publish(topic, json.dumps(stale), retain=True)
        daemon = Daemon()
        bridge = MqttBridge(
            settings_for(mosquitto),
            joint_names=("shoulder", "elbow"),
            link_names=("base", "tool"),
            default_link="tool",
            on_goal=daemon.goals.append,
            on_estop=daemon.estops.append,
            on_stream=taken.append,
        )
        with caplog.at_level(logging.WARNING, logger="armd.api.inbound"):
            async with running(bridge):
                await client.publish(topic, json.dumps({"seq": 1, "type": "end"}))
                await client.publish(topic, b"{")
                await wait_until(lambda: len(taken) == 2)
                await client.publish(topic, b"", retain=True)  # clear it for good measure
                await asyncio.sleep(0.1)
    assert taken[0] == StreamEnd("stream", 1)
    assert isinstance(taken[1], Rejection)
    assert "dropped a retained message on armd/test/stream" in caplog.text


# -- the daemon's side, in front of the loop -------------------------------------------------------


class Streaming:
    """A `StreamInput` in front of the rig's loop, through a `LoopPort`, reporting through one
    ledger (as in the daemon); refusals go to `published`."""

    def __init__(self, rig: Rig, *, enabled: bool = True) -> None:
        self.rig = rig
        self.statuses: list[StatusUpdate] = []
        self.ledger = StatusLedger(self._report)
        rig.ledger = self.ledger
        rig.port = LoopPort(rig.loop.handle, self.ledger.report, rig.tree.dof)
        limits = rig.tree.limits
        self.cartesian = CartesianStream(
            rig.tree,
            IKOptions(restarts=False, max_joint_change=1.0),
            np.ones(rig.tree.dof),
            np.array(limits.lower),
            np.array(limits.upper),
        )
        self.now = 0.0
        self.input = StreamInput(
            StreamSettings(enabled, 0.1, "tool0"),
            self.cartesian,
            rig.port,
            self.ledger,
            self.statuses.append,
            clock=lambda: self.now,
        )

    def _report(self, update: StatusUpdate) -> None:
        self.statuses.append(update)
        self.input.on_status(update)

    async def send(self, message: StreamMessage | Rejection, ticks: int = 1) -> None:
        self.input.submit(message)
        await self.rig.run(ticks)
        self.now += ticks * PERIOD

    def of(self, stream_id: str) -> list[tuple[GoalStatus, str | None]]:
        return [(s.status, s.reason) for s in self.statuses if s.goal_id == stream_id]


async def streaming(enabled: bool = True, q0: np.ndarray = Q0) -> Streaming:
    rig = await make_rig(q0, stream_timeout_s=0.1)
    rig.statuses = []
    stream = Streaming(rig, enabled=enabled)
    await rig.run(1)
    return stream


async def test_sessions_sequence_numbers_and_statuses() -> None:
    s = await streaming()
    await s.send(StreamJoints("a", 10, {"elbow_joint": 1.5}), 5)
    await s.send(StreamJoints("a", 10, {"elbow_joint": 0.0}), 5)  # not newer: dropped
    await s.send(StreamJoints("a", 3, {"elbow_joint": 0.0}), 5)
    assert s.input.dropped == 2
    await s.send(StreamEnd("a", 11), 400)
    assert s.of("a") == [(GoalStatus.ACCEPTED, None), (GoalStatus.SUCCEEDED, None)]
    assert abs(s.rig.loop.measured.position[2] - 1.5) < 0.005
    # After the end a seq not newer than 11 starts nothing; a newer one starts a new session.
    await s.send(StreamJoints("a", 0, {"elbow_joint": 1.4}), 20)
    (status, reason), *_ = s.of("a")[2:]
    assert status is GoalStatus.REJECTED
    assert STALE.fullmatch(reason or ""), reason
    assert "seq: 0 is not newer than 11, the last of stream 'a'" in (reason or "")
    assert s.rig.loop.motions.active is None
    await s.send(StreamJoints("a", 12, {"elbow_joint": 1.4}), 20)
    assert s.of("a")[3:] == [(GoalStatus.ACCEPTED, None)]
    # Another id pre-empts it.
    await s.send(StreamJoints("b", 0, {"elbow_joint": 1.3}), 2)
    assert s.of("a")[4:] == [(GoalStatus.PREEMPTED, "preempted by b")]
    assert s.of("b") == [(GoalStatus.ACCEPTED, None)]
    assert_within_limits(s.rig)


STALE = re.compile(
    r"seq: \d+ is not newer than \d+, the last of stream '\w+', which ended \d+\.\d s ago; "
    r"a stale message starts nothing: send a greater seq, or a new id"
)


async def test_a_burst_of_stale_messages_after_a_timeout_moves_nothing() -> None:
    """A Wi-Fi stall: the stream times out, then the messages held up arrive in a burst, out
    of order. Those not newer than the last one followed start nothing (rejected, rate-limited);
    the first newer one starts a new stream."""
    s = await streaming()
    for seq in range(20):  # the elbow from 1.4 toward 1.6
        await s.send(StreamJoints("wifi", seq, {"elbow_joint": 1.4 + 0.01 * seq}), 2)
    await s.rig.run(400)  # quiet: aborted at the timeout, then at rest
    s.now += 400 * PERIOD
    assert s.of("wifi")[-1] == (GoalStatus.ABORTED, timeout_reason(0.1))
    rest = s.rig.loop.measured.position.copy()
    for seq in range(19, 0, -1):  # the burst: older and older targets, back toward 1.4
        await s.send(StreamJoints("wifi", seq, {"elbow_joint": 1.4 + 0.01 * seq}), 1)
    await s.rig.run(50)
    assert s.rig.loop.motions.active is None
    np.testing.assert_allclose(s.rig.loop.measured.position, rest, atol=1e-3)  # the encoder
    statuses = s.of("wifi")
    assert statuses[:2] == [(GoalStatus.ACCEPTED, None), (GoalStatus.ABORTED, timeout_reason(0.1))]
    assert 1 <= len(statuses[2:]) <= REJECTIONS_BURST + 1
    assert all(status is GoalStatus.REJECTED for status, _ in statuses[2:])
    assert (statuses[2][1] or "").startswith("seq: 19 is not newer than 19, the last of stream")
    await s.send(StreamJoints("wifi", 20, {"elbow_joint": 1.45}), 2)
    assert s.of("wifi")[-1] == (GoalStatus.ACCEPTED, None)
    await s.send(StreamEnd("wifi", 21), 300)
    assert s.of("wifi")[-1] == (GoalStatus.SUCCEEDED, None)
    assert abs(s.rig.loop.measured.position[2] - 1.45) < 0.005
    assert_within_limits(s.rig)


async def test_an_id_is_reused_with_any_seq_once_its_memory_is_over() -> None:
    s = await streaming()
    await s.send(StreamJoints("again", 100, {"elbow_joint": 1.45}), 5)
    await s.send(StreamEnd("again", 101), 300)
    assert s.of("again")[-1] == (GoalStatus.SUCCEEDED, None)
    s.now += seq_memory_s(0.1) - 300 * PERIOD - 0.01
    await s.send(StreamJoints("again", 1, {"elbow_joint": 1.4}), 1)
    assert s.of("again")[-1][0] is GoalStatus.REJECTED  # 10 ms before the memory is over
    s.now += 0.02
    await s.send(StreamJoints("again", 1, {"elbow_joint": 1.4}), 1)
    assert s.of("again")[-1] == (GoalStatus.ACCEPTED, None)


async def test_a_pre_empted_streams_stale_messages_do_not_take_the_arm_back() -> None:
    s = await streaming()
    await s.send(StreamJoints("a", 5, {"elbow_joint": 1.5}), 5)
    await s.send(StreamJoints("b", 0, {"elbow_joint": 1.3}), 5)
    assert s.of("a")[-1] == (GoalStatus.PREEMPTED, "preempted by b")
    await s.send(StreamJoints("a", 4, {"elbow_joint": 1.6}), 5)  # delayed: refused
    assert s.of("a")[-1][0] is GoalStatus.REJECTED
    assert s.of("b") == [(GoalStatus.ACCEPTED, None)]
    await s.send(StreamJoints("a", 6, {"elbow_joint": 1.6}), 5)  # newer: takes over
    assert s.of("a")[-1] == (GoalStatus.ACCEPTED, None)
    assert s.of("b")[-1] == (GoalStatus.PREEMPTED, "preempted by a")


async def test_end_may_be_a_streams_first_message() -> None:
    """``end`` alone is a stream: accepted, then succeeded at rest on the commanded position the
    stream started from. An arm at rest stays; a moving one is stopped (its goal pre-empted)
    and brought back there, jerk-limited, by its stopping distance."""
    s = await streaming()
    before = s.rig.loop.measured.position.copy()
    await s.send(StreamEnd("alone", 3), 50)
    assert s.of("alone") == [(GoalStatus.ACCEPTED, None), (GoalStatus.SUCCEEDED, None)]
    np.testing.assert_allclose(s.rig.loop.measured.position, before, atol=1e-3)
    s.ledger.receive("g")
    s.rig.port.send(move("g", (Q0 + np.array([0.0, 0.0, 0.6, 0.0, 0.0, 0.0])).tolist()))  # type: ignore[union-attr]
    await s.rig.run(60)
    assert s.rig.loop.commanded is not None
    start = s.rig.loop.commanded.position.copy()
    assert s.rig.loop.commanded.velocity[2] > 1.0  # well under way
    await s.send(StreamEnd("here", 0), 500)
    assert s.of("g")[-1] == (GoalStatus.PREEMPTED, "preempted by here")
    assert s.of("here") == [(GoalStatus.ACCEPTED, None), (GoalStatus.SUCCEEDED, None)]
    overshoot = max(q[2] for _, q in s.rig.commands[-500:]) - start[2]
    assert 0.05 < overshoot < 0.6  # the stop went past, then came back
    np.testing.assert_allclose(s.rig.loop.measured.position, start, atol=JOINT_TOLERANCE)
    assert_within_limits(s.rig)


async def test_velocities_of_joints_not_in_positions_are_refused_and_move_nothing() -> None:
    s = await streaming()
    message = {
        "id": "v",
        "seq": 1,
        "type": "joints",
        "positions": {"elbow_joint": 1.5},
        "velocities": {"elbow_joint": 0.1, "shoulder_pan_joint": 0.2},
    }
    await s.send(parse(message), 20)
    reason = "velocities.shoulder_pan_joint: not named in positions"
    assert s.of("v") == [(GoalStatus.REJECTED, reason)]
    assert s.rig.loop.motions.active is None


def test_ended_streams_are_remembered_for_their_window_and_at_most_capacity() -> None:
    ended = EndedStreams(memory_s=10.0, capacity=3)
    for i, name in enumerate("abcd"):
        ended.end(name, i, now=float(i))
    assert len(ended) == 3  # "a", ended first, was forgotten first
    assert ended.recall("a", now=4.0) is None
    assert ended.recall("b", now=4.0) is not None
    ended.end("b", 7, now=5.0)  # ended again: now the newest
    ended.end("e", 8, now=6.0)
    assert [ended.recall(n, now=6.0) is not None for n in "bcde"] == [True, False, True, True]
    recalled = ended.recall("b", now=14.9)
    assert recalled is not None
    assert recalled.seq == 7
    assert ended.recall("d", now=14.9) is None  # ended at 3.0: 11.9 s ago
    assert ended.recall("b", now=15.1) is None
    assert len(ended) == 1
    assert seq_memory_s(0.1) == SEQ_MEMORY_S
    assert seq_memory_s(5.0) == pytest.approx(5.0 * SEQ_MEMORY_TIMEOUTS, abs=1e-12)


async def test_refusals_are_rate_limited() -> None:
    s = await streaming(enabled=False)
    for seq in range(250):
        await s.send(StreamJoints("off", seq, {"elbow_joint": 1.0}))
    refused = s.of("off")
    assert refused[0] == (GoalStatus.REJECTED, STREAM_DISABLED)
    assert len(refused) <= REJECTIONS_BURST + 2  # then one per second of wall clock
    assert s.input.suppressed >= 250 - len(refused)
    assert s.rig.loop.motions.active is None


async def test_a_stream_id_in_use_by_a_goal_is_refused() -> None:
    s = await streaming()
    s.ledger.receive("busy")
    await s.send(StreamJoints("busy", 0, {"elbow_joint": 1.0}))
    assert s.statuses[-1].status is GoalStatus.REJECTED
    assert "still in progress" in (s.statuses[-1].reason or "")


async def test_pose_targets_are_solved_seeded_and_followed() -> None:
    s = await streaming()
    tree = s.rig.tree
    start = tree.fk(Q0, "tool0")
    for k in range(100):  # a 5 cm line along x at 50 Hz messages
        position = start.translation + np.array([0.0005 * k, 0.0, 0.0])
        message = StreamPose("p", k, tuple(position), tuple(start.quaternion), "tool0")  # type: ignore[arg-type]
        await s.send(message, 5)
    await s.send(StreamEnd("p", 100), 300)
    assert s.of("p")[-1] == (GoalStatus.SUCCEEDED, None)
    reached = tree.fk(s.rig.loop.measured.position, "tool0")
    expected = start.translation + np.array([0.0495, 0.0, 0.0])
    np.testing.assert_allclose(reached.translation, expected, atol=2e-3)
    assert_within_limits(s.rig)


async def test_twists_move_the_tool_and_slow_down_near_a_singularity() -> None:
    s = await streaming()
    tree = s.rig.tree
    start = tree.fk(Q0, "tool0").translation
    for k in range(50):  # 5 cm/s along z for 0.2 s
        await s.send(StreamTwist("t", k, (0.0, 0.0, 0.05), (0.0, 0.0, 0.0)), 1)
    await s.send(StreamEnd("t", 50), 300)
    moved = tree.fk(s.rig.loop.measured.position, "tool0").translation - start
    assert 0.005 < moved[2] < 0.015, moved
    assert np.all(np.abs(moved[:2]) < 0.002)
    # Stretched out (elbow straight): the twist is scaled down to nothing, never followed wildly.
    singular = np.array([0.0, -1.2, 0.0, -1.6, -1.5, 0.3])
    q = s.cartesian.twist(StreamTwist("t", 0, (0.1, 0.0, 0.0), (0, 0, 0)), singular, "tool0")
    assert s.cartesian.last_scale == 0.0
    np.testing.assert_array_equal(q, 0.0)
    # Toward a joint limit: slowed within the margin, stopped at it.
    upper = s.cartesian.upper.copy()
    near = Q0.copy()
    s.cartesian.upper = Q0 + 0.05
    s.cartesian.twist(StreamTwist("t", 0, (0.05, 0.05, 0.05), (0, 0, 0)), near, "tool0")
    assert 0.0 < s.cartesian.last_scale <= 0.5 + 1e-9
    s.cartesian.upper = upper
    assert math.isfinite(float(np.sum(q)))


async def test_after_a_twists_end_the_arm_rests_where_the_twist_carried_the_target() -> None:
    """The last target after ``end`` is where the last twist had carried the target when the
    ``end`` came: an ``end`` 80 ms later (within the timeout) rests 80 ms further along."""
    speed = 0.05  # m/s along z: far from singularities and limits, the twist is not scaled

    async def rest_after(pause_ticks: int) -> np.ndarray:
        s = await streaming()
        for k in range(50):
            await s.send(StreamTwist("t", k, (0.0, 0.0, speed), (0.0, 0.0, 0.0)), 1)
        await s.rig.run(pause_ticks)
        s.now += pause_ticks * PERIOD
        await s.send(StreamEnd("t", 50), 400)
        assert s.of("t")[-1] == (GoalStatus.SUCCEEDED, None)
        assert s.rig.loop.commanded is not None  # at rest exactly on the last target
        return s.rig.tree.fk(s.rig.loop.commanded.position, "tool0").translation

    at_once, later = await rest_after(0), await rest_after(20)
    further = later - at_once
    # The target moves on in joint space (the twist's joint velocities): over these 4 mm its
    # tool path stays well within 0.2 mm of the straight line.
    np.testing.assert_allclose(further, [0.0, 0.0, speed * 20 * PERIOD], atol=2e-4)


def test_a_joint_a_stream_may_not_move_keeps_still_and_the_others_follow_the_twist() -> None:
    """A gripper joint (or a fixed one) on the tool's chain: its column is left out, of the twist
    and of the singularity measure (which, over all six columns, would stop every twist)."""
    tree = make_tree()
    limits = tree.limits
    movable = np.array([True] * 5 + [False])  # wrist_3_joint held, as the daemon holds a gripper
    cartesian = CartesianStream(
        tree, IKOptions(), movable, np.array(limits.lower), np.array(limits.upper)
    )
    velocity = cartesian.twist(StreamTwist("t", 0, (0.0, 0.0, 0.05), (0, 0, 0)), Q0, "tool0")
    assert velocity[5] == 0.0
    assert cartesian.last_scale > 0.5
    tool = tree.jacobian(Q0, "tool0") @ velocity
    assert tool[2] > 0.5 * 0.05 * cartesian.last_scale  # up, as asked (least squares: 5 joints)
    target = tree.fk(Q0, "tool0").translation + np.array([0.01, 0.0, 0.0])
    solved = cartesian.pose(StreamPose("p", 0, tuple(target), None, "tool0"), Q0)  # type: ignore[arg-type]
    assert solved[5] == Q0[5]
    np.testing.assert_allclose(tree.fk(solved, "tool0").translation, target, atol=1e-4)


async def test_an_estopped_arm_refuses_new_streams_rate_limited() -> None:
    s = await streaming()
    await s.send(StreamJoints("a", 0, {"elbow_joint": 1.5}), 5)
    s.rig.port.send(EngageEstop())  # type: ignore[union-attr]
    for seq in range(1, 250):  # the client keeps streaming at 250 Hz
        await s.send(StreamJoints("a", seq, {"elbow_joint": 1.5}))
    statuses = s.of("a")
    assert statuses[:2] == [(GoalStatus.ACCEPTED, None), (GoalStatus.ABORTED, "e-stop engaged")]
    assert statuses[2] == (GoalStatus.REJECTED, "arm is estop: reset first")
    assert len(statuses) <= 2 + REJECTIONS_BURST + 2  # not one pair of statuses per message
