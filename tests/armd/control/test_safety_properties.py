"""Safety laws of the control loop, as hypothesis properties on the in-process simulated arm
(tests/armd/rig.py, ticked on a manual clock).

Whatever sequence of goals (targets inside and outside the limits, random speeds), stops, e-stops,
resets, waits and injected faults (device fault codes, a frozen encoder, a stuck joint, lost
replies, a lost bus and its reconnection) the loop goes through:

- no command leaves the position, velocity or acceleration limits, and none is NaN;
- once the sequence ends and the arm is brought to rest, every submitted goal has exactly one
  final status (succeeded, aborted or preempted), and no status names a goal never submitted.

Motions toward targets beyond the limits are checked separately until they end (a random script
rarely waits long enough for a joint to reach its bound), with the limiter's braking curve itself.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from armd.control.limiter import braking_velocity
from armd.link import protocol
from drivers.sim.driver import SimFault
from tests.armd.hw_rigs import assert_commands_within_limits, record_writes
from tests.armd.rig import PERIOD, Rig, make_rig, move

MOTORS = [f"m{i}" for i in range(6)]
FAULT_CODES = [
    SimFault.OVERCURRENT,
    SimFault.OVERVOLTAGE,
    SimFault.UNDERVOLTAGE,
    SimFault.OVERTEMPERATURE,
    SimFault.ENCODER,
    SimFault.OVERCURRENT | SimFault.OVERTEMPERATURE,
]


@dataclass(frozen=True)
class Move:
    target: tuple[float, ...]
    speed: float


@dataclass(frozen=True)
class Stop:
    pass


@dataclass(frozen=True)
class Estop:
    pass


@dataclass(frozen=True)
class Reset:
    pass


@dataclass(frozen=True)
class Wait:
    ticks: int


@dataclass(frozen=True)
class DeviceFault:
    motor: str
    code: int


@dataclass(frozen=True)
class FrozenEncoder:
    motor: str
    on: bool


@dataclass(frozen=True)
class Stuck:
    motor: str
    on: bool


@dataclass(frozen=True)
class DropReplies:
    motor: str
    probability: float


@dataclass(frozen=True)
class Disconnect:
    motor: str


@dataclass(frozen=True)
class Reconnect:
    """Every link back, then `hardware.reconnect()` (as the daemon's reconnect task does)."""


Action = (
    Move
    | Stop
    | Estop
    | Reset
    | Wait
    | DeviceFault
    | FrozenEncoder
    | Stuck
    | DropReplies
    | Disconnect
    | Reconnect
)

motors = st.sampled_from(MOTORS)
actions: st.SearchStrategy[Action] = st.one_of(
    st.builds(
        Move,
        st.tuples(*[st.floats(-3.5, 3.5, allow_nan=False)] * 6),  # limits are ±3
        st.floats(0.2, 1.0),
    ),
    st.builds(Stop),
    st.builds(Estop),
    st.builds(Reset),
    st.builds(Wait, st.integers(1, 500)),  # long enough to drive into a bound
    st.builds(DeviceFault, motors, st.sampled_from(FAULT_CODES)),
    st.builds(FrozenEncoder, motors, st.booleans()),
    st.builds(Stuck, motors, st.booleans()),
    st.builds(DropReplies, motors, st.sampled_from([0.0, 0.5, 1.0])),
    st.builds(Disconnect, motors),
    st.builds(Reconnect),
)
# Each action is followed by 0-3 ticks: 0 lets several requests reach the same tick boundary.
scripts = st.lists(st.tuples(actions, st.integers(0, 3)), max_size=16)


async def apply(rig: Rig, action: Action, goal_id: str) -> str | None:
    """Carry out one action; returns the goal id it submitted, if any."""
    loop, driver = rig.loop, rig.driver
    match action:
        case Move(target, speed):
            loop.handle(move(goal_id, list(target), speed))
            return goal_id
        case Stop():
            loop.handle(protocol.Stop(goal_id))
            return goal_id
        case Estop():
            loop.handle(protocol.EngageEstop())
        case Reset():
            loop.handle(protocol.Reset())
        case Wait(ticks):
            await rig.run(ticks)
        case DeviceFault(motor, code):
            driver.motor(motor).faults.fault_code = code
        case FrozenEncoder(motor, on):
            driver.motor(motor).faults.frozen_encoder = on
        case Stuck(motor, on):
            driver.motor(motor).faults.stuck = on
        case DropReplies(motor, probability):
            driver.link(motor).drop_probability = probability
        case Disconnect(motor):
            driver.link(motor).disconnected = True
        case Reconnect():
            for name in MOTORS:
                driver.link(name).disconnected = False
            await loop.hardware.reconnect()
    return None


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=scripts, disable_on_fault=st.booleans())
async def test_no_sequence_of_requests_and_faults_leaves_the_limits_or_loses_a_goal(
    script: list[tuple[Action, int]], disable_on_fault: bool
) -> None:
    rig = await make_rig(disable_on_fault=disable_on_fault)
    sent = record_writes(rig.loop)
    await rig.run(1)
    submitted: list[str] = []
    for i, (action, ticks) in enumerate(script):
        goal_id = await apply(rig, action, f"{type(action).__name__.lower()}-{i}")
        if goal_id is not None:
            submitted.append(goal_id)
        await rig.run(ticks)

    # The sequence is over: bring the arm to rest (the injected faults stay as they are).
    rig.loop.handle(protocol.Stop("final-stop"))
    submitted.append("final-stop")
    await rig.run_until(lambda: not rig.loop.busy)
    await rig.run(5)

    if sent:
        assert_commands_within_limits(sent, rig.tree.limits, PERIOD)
    assert all(np.all(np.isfinite(c.position)) for c in sent)
    finals = Counter(s.goal_id for s in rig.statuses if s.status.is_final)
    assert set(finals) <= set(submitted), f"statuses for unknown goals: {finals}"
    missing = [goal for goal in submitted if finals[goal] == 0]
    repeated = [goal for goal in submitted if finals[goal] > 1]
    assert not missing, f"goals without a final status: {missing}"
    assert not repeated, f"goals with several final statuses: {repeated}: {rig.statuses}"


joint_targets = st.tuples(*[st.floats(-3.5, 3.5, allow_nan=False)] * 6)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    first=joint_targets,
    second=joint_targets,
    speeds=st.tuples(st.floats(0.5, 1.0), st.floats(0.5, 1.0)),
    preempt_after=st.integers(1, 400),
)
async def test_moves_toward_targets_beyond_the_limits_brake_within_them(
    first: tuple[float, ...],
    second: tuple[float, ...],
    speeds: tuple[float, float],
    preempt_after: int,
) -> None:
    """The limiter stops a joint at its position limit without exceeding the acceleration
    limit, also when a motion toward a target beyond the limit is pre-empted by another."""
    rig = await make_rig()
    sent = record_writes(rig.loop)
    await rig.run(1)
    rig.loop.handle(move("first", list(first), speeds[0]))
    await rig.run(preempt_after)
    rig.loop.handle(move("second", list(second), speeds[1]))
    await rig.run_until(lambda: not rig.loop.busy, limit_s=30.0)
    assert_commands_within_limits(sent, rig.tree.limits, PERIOD)
    assert rig.final("first") is not None
    assert rig.final("second") is not None


@given(
    distance=st.floats(0.0, 10.0),
    acceleration=st.floats(0.5, 100.0),
    period_s=st.sampled_from([0.002, 0.004, 0.01]),
)
def test_the_limiters_braking_curve_stops_at_the_bound_within_the_acceleration_limit(
    distance: float, acceleration: float, period_s: float
) -> None:
    """Riding `braking_velocity` toward a bound never passes it and never needs to slow down by
    more than ``a dt`` per tick; it is at most 1.5 ticks of braking slower than ``sqrt(2 a d)``."""
    a, d = np.array([acceleration]), np.array([distance])
    v = braking_velocity(d, a, period_s)
    assert v[0] >= 0.0
    assert v[0] * period_s <= distance * (1 + 1e-12) + 1e-15
    following = braking_velocity(np.maximum(d - v * period_s, 0.0), a, period_s)
    assert following[0] >= v[0] - acceleration * period_s - 1e-9 * (1.0 + v[0])
    assert v[0] >= np.sqrt(2.0 * acceleration * distance) - 1.5 * acceleration * period_s - 1e-9
    assert braking_velocity(np.array([np.inf]), a, period_s)[0] == np.inf
