"""Safety laws of streaming, as hypothesis properties: random streams fed through the daemon's
side (`armd.planning.stream_input`) into the in-process loop on the simulated arm
(tests/armd/rig.py, a
manual clock), at random rates, with gaps, reordered and repeated sequence numbers, jumps, values
far outside the limits (1e308, ±inf), NaN and subnormal numbers, other streams' ids, goals and
stops in between:

- no command leaves the position, velocity or acceleration limits, none is NaN, and none jumps
  (the velocity bound is the bound on the change per tick);
- whenever no message came for the timeout, the stream has ended (``aborted``, the timeout's
  reason) and the arm comes to rest;
- the targets the loop takes in a stream have increasing sequence numbers (reordered and repeated
  ones are dropped), and every stream and goal gets exactly one final status.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from armd.control.streaming import timeout_reason
from armd.link import protocol
from armd.link.messages import GoalStatus, StreamEnd, StreamJoints
from tests.armd.hw_rigs import assert_commands_within_limits, record_writes
from tests.armd.planning.test_stream_input import Streaming
from tests.armd.rig import PERIOD, make_rig, move

TIMEOUT_S = 0.1
TIMEOUT_TICKS = round(TIMEOUT_S / PERIOD)
JOINTS = ("shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint")

values = st.one_of(
    st.floats(-3.5, 3.5),  # the limits are ±3
    st.sampled_from([1e308, -1e308, math.inf, -math.inf, math.nan, 5e-324, -2.2e-308, 0.0]),
)


@dataclass(frozen=True)
class Message:
    stream_id: str
    seq_step: int  # added to the newest seq sent: ≤ 0 is a reordered or repeated message
    positions: tuple[float, ...]
    velocities: tuple[float, ...] | None
    end: bool


@dataclass(frozen=True)
class Goal:
    target: tuple[float, ...]


@dataclass(frozen=True)
class Halt:
    pass


Action = Message | Goal | Halt

messages = st.builds(
    Message,
    st.sampled_from(["a", "a", "a", "b"]),
    st.integers(-3, 4),
    st.tuples(values, values, values),
    st.none() | st.tuples(values, values, values),
    st.just(False),
)
actions: st.SearchStrategy[Action] = st.one_of(
    messages,
    messages,
    messages,
    messages.map(lambda m: Message(m.stream_id, m.seq_step, m.positions, m.velocities, True)),
    st.builds(Goal, st.tuples(*[st.floats(-2.5, 2.5)] * 6)),
    st.builds(Halt),
)
# Each action is followed by 0-40 ticks (0: several messages per tick; > 25: a timeout).
scripts = st.lists(st.tuples(actions, st.integers(0, 40)), max_size=40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=scripts)
# Found by this test: a moving target after `end` kept a stream going without a timeout.
@example(
    script=[
        (Message("a", 0, (0.0, 0.0, 0.0), None, False), 28),
        (Goal((0.0, -2.0, 0.0, 0.0, 0.0, 0.0)), 36),
        (Message("a", 0, (0.0, 0.0, 0.0), None, True), 3),
        (Message("a", 1, (0.0, 0.0, 0.0), (0.0, 1.3, 0.0), False), 0),
    ]
)
# ... and a hold after a stop the limiter was still braking kept a stale velocity feed-forward.
@example(
    script=[
        (Message("a", 0, (0.0, 0.0, 0.0), None, False), 0),
        (Halt(), 17),
        (
            Message(
                "a", -2, (3.166736982670688, -1.4456325605333133, -0.7253957366834882), None, False
            ),
            22,
        ),
        (Message("a", 2, (0.0, 0.0, 0.0), None, True), 40),
        (Message("a", 0, (0.0, 0.0, 0.0), None, False), 33),
        (Goal((0.0,) * 6), 19),
        (Goal((0.0,) * 6), 21),
        (Message("a", 0, (0.0, 0.0, 0.0), None, False), 31),
        (Goal((0.0, 0.0, 0.0, 0.0, 0.0, 2.0625)), 20),
        (Message("a", 0, (0.0, 0.0, 0.0), None, False), 18),
        (Message("a", 1, (0.0, 0.0, 0.0), None, False), 0),
    ]
)
async def test_no_stream_leaves_the_limits_and_a_quiet_stream_stops(
    script: list[tuple[Action, int]],
) -> None:
    rig = await make_rig(stream_timeout_s=TIMEOUT_S)
    rig.statuses = []
    s = Streaming(rig)
    sent = record_writes(rig.loop)
    taken: list[protocol.StreamTarget] = []
    handle = rig.loop.handle

    def recording_handle(command: protocol.Command) -> None:
        if isinstance(command, protocol.StreamTarget):
            taken.append(command)
        handle(command)

    rig.loop.handle = recording_handle  # type: ignore[method-assign]
    await rig.run(1)
    newest = {"a": 0, "b": 0}
    goals: list[str] = []
    for i, (action, ticks) in enumerate(script):
        match action:
            case Message(stream_id, step, positions, velocities, end):
                newest[stream_id] = seq = max(0, newest[stream_id] + step)
                if end:
                    s.input.submit(StreamEnd(stream_id, seq))
                else:
                    named = dict(zip(JOINTS, positions, strict=True))
                    speeds = dict(zip(JOINTS, velocities, strict=True)) if velocities else {}
                    s.input.submit(StreamJoints(stream_id, seq, named, speeds))
            case Goal(target):
                goals.append(f"goal-{i}")
                s.ledger.receive(goals[-1])
                rig.port.send(move(goals[-1], list(target)))  # type: ignore[union-attr]
            case Halt():
                goals.append(f"halt-{i}")
                s.ledger.receive(goals[-1])
                rig.port.send(protocol.Stop(goals[-1]))  # type: ignore[union-attr]
        for _ in range(ticks):
            await rig.run(1)
            s.now += PERIOD
            assert_quiet_streams_end(s)

    # The script is over: no more messages; every stream times out or ends, a goal under way
    # ends (its motion takes at most 3.5 s here), and the arm comes to rest.
    def at_rest() -> bool:
        commanded = rig.loop.commanded
        assert commanded is not None
        return not rig.loop.busy and bool(np.all(np.abs(commanded.velocity) < 1e-9))

    await rig.run_until(at_rest, limit_s=5.0)

    assert_commands_within_limits(sent, rig.tree.limits, PERIOD)
    assert s.ledger.in_progress == 0, s.statuses
    assert s.ledger.contract_violations == 0
    finals = Counter(u.goal_id for u in s.statuses if u.status.is_final and u.goal_id in goals)
    assert all(finals[goal] == 1 for goal in goals), (finals, goals)
    sessions: dict[int, list[int]] = {}
    for target in taken:
        sessions.setdefault(target.session, []).append(target.seq)
    for seqs in sessions.values():
        assert seqs == sorted(set(seqs)), f"a stream's targets out of order: {seqs}"


def assert_quiet_streams_end(s: Streaming) -> None:
    """A stream still followed (not ended) has taken a target within the timeout; one that went
    quiet for longer was stopped with the timeout's status."""
    active = s.rig.loop.motions.active
    stream = active.stream if active is not None else None
    if stream is not None and not stream.end:
        assert s.rig.loop.tick_count - stream.target_tick <= TIMEOUT_TICKS, "quiet, followed"
    for update in s.statuses:
        if update.reason == timeout_reason(TIMEOUT_S):
            assert update.status is GoalStatus.ABORTED
