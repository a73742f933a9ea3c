"""Numeric edges all the way from a payload to the control loop, without MQTT (issue 10).

Scripts of goals whose numbers sit on the edges — subnormals, -0.0, 1e308, one ulp around every
bound of the contract and of the joint limits, tiny and huge speeds, positions far outside the
workspace — go through the real parser, the goal pipeline and the control loop on the simulated
UR5, from rest and while moving. Whatever they contain: nothing raises, the loop never faults,
every command stays within the limits, and the statuses keep the contract. Goals built in code
(skipping the parser's checks) reach the planner and the loop with the raw edge values too: they
may be refused, but never take anything down.
"""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from armd.api.payloads import MAX_CARTESIAN_M, MAX_JOINT_POSITION, MIN_SPEED, parse_goal
from armd.link.messages import (
    Goal,
    GoalStatus,
    GripperGoal,
    JointsGoal,
    KeypointsGoal,
    PoseGoal,
    Rejection,
    StatusUpdate,
    StopGoal,
    TrajectoryGoal,
)
from armd.planning.goals import GoalPipeline, Gripper, PlanSettings
from kinematics.ik import IKOptions
from tests.armd.rig import Rig, assert_within_limits, pipeline_rig, ur5

JOINTS = tuple(ur5().joint_names)
LINKS = ("base_link", "upper_arm_link", "forearm_link", "wrist_3_link", "tool0")
Q0 = np.array([0.0, -1.2, 1.4, -1.5, -1.57, 0.0])
SETTINGS = PlanSettings(
    ik=IKOptions(max_joint_change=1.0, time_budget_s=0.02),
    linear_step=0.005,
    angular_step=0.05,
    max_linear_speed=0.25,
    max_angular_speed=1.0,
    pose_tolerance=(1e-3, 1e-2),
    gripper=Gripper("wrist_3_joint", open=1.0, closed=-1.0, max_effort=1.0, effort=0.5),
)
JOINT_LIMIT = 3.0  # the rig's joint limits: ±3 rad


def around(value: float) -> list[float]:
    """`value` and its neighbours one ulp away."""
    return [math.nextafter(value, -math.inf), value, math.nextafter(value, math.inf)]


EDGES = [
    0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, 1e-12, -1e-12, 1e308, -1e308,
    math.nan, math.inf, -math.inf,
    *around(MIN_SPEED), *around(1.0), *around(0.5),
    *around(MAX_CARTESIAN_M), *around(-MAX_CARTESIAN_M),
    *around(MAX_JOINT_POSITION), *around(-MAX_JOINT_POSITION),
    *around(JOINT_LIMIT), *around(-JOINT_LIMIT),
]  # fmt: skip
edges = st.sampled_from(EDGES)
numbers = edges | st.floats(-4.0, 4.0) | st.floats(allow_nan=False, allow_infinity=False)
speeds = edges | st.floats(0.0, 1.0)
workspace = st.floats(-0.8, 0.8) | edges


def joints_goal() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {"type": st.just("joints"), "positions": st.dictionaries(st.sampled_from(JOINTS), numbers,
                                                                 min_size=1)},
        optional={"speed": speeds},
    )  # fmt: skip


def pose_goal() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {"type": st.just("pose"), "position": st.tuples(workspace, workspace, workspace)},
        optional={
            "orientation": st.tuples(numbers, numbers, numbers, numbers),
            "motion": st.sampled_from(["joint", "linear"]),
            "speed": speeds,
        },
    )


def keypoints_goal() -> st.SearchStrategy[dict[str, Any]]:
    point = st.tuples(workspace, workspace, workspace)
    return st.fixed_dictionaries(
        {"type": st.just("keypoints"), "points": st.dictionaries(st.sampled_from(LINKS), point,
                                                                 min_size=2)},
        optional={"speed": speeds},
    )  # fmt: skip


def gripper_goal() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {"type": st.just("gripper"), "position": st.sampled_from(["open", "close"]) | speeds},
        optional={"effort": speeds, "speed": speeds},
    )


def trajectory_goal() -> st.SearchStrategy[dict[str, Any]]:
    times = edges | st.floats(0.0, 5.0)
    return st.lists(st.sampled_from(JOINTS), min_size=1, max_size=3, unique=True).flatmap(
        lambda joints: st.fixed_dictionaries(
            {
                "type": st.just("trajectory"),
                "joints": st.just(joints),
                "points": st.lists(
                    st.fixed_dictionaries(
                        {"t": times, "positions": st.lists(numbers, min_size=len(joints),
                                                           max_size=len(joints))}
                    ),
                    min_size=2,
                    max_size=5,
                ),
            },
            optional={"speed": speeds},
        )
    )  # fmt: skip


documents = st.one_of(
    joints_goal(),
    pose_goal(),
    keypoints_goal(),
    gripper_goal(),
    trajectory_goal(),
    st.just({"type": "stop"}),
)
steps = st.lists(
    st.tuples(documents, st.booleans(), st.integers(0, 150)),  # (goal, through the parser, ticks)
    min_size=1,
    max_size=4,
)


def direct_goal(goal_id: str, document: dict[str, Any]) -> Goal | None:  # noqa: PLR0911 (per type)
    """The goal as code could build it, with the raw values (no parser checks)."""
    speed = float(document.get("speed", 1.0))
    kind = document["type"]
    if kind == "joints":
        return JointsGoal(goal_id, {k: float(v) for k, v in document["positions"].items()}, speed)
    if kind == "pose":
        orientation = document.get("orientation")
        norm = math.hypot(*orientation) if orientation is not None else 1.0
        if orientation is not None and not (math.isfinite(norm) and norm > 0):
            return None  # a Pose refuses it: the parser is the only way in for such values
        unit = None if orientation is None else tuple(c / norm for c in orientation)
        return PoseGoal(goal_id, tuple(document["position"]), unit, "tool0",  # type: ignore[arg-type]
                        document.get("motion", "joint"), speed)  # fmt: skip
    if kind == "gripper":
        position = document["position"]
        opening = {"open": 1.0, "close": 0.0}.get(position, position)
        effort = document.get("effort")
        return GripperGoal(
            goal_id, float(opening), None if effort is None else float(effort), speed
        )
    if kind == "trajectory":
        points = document["points"]
        times = tuple(float(p["t"]) for p in points)
        positions = tuple(tuple(float(q) for q in p["positions"]) for p in points)
        return TrajectoryGoal(goal_id, tuple(document["joints"]), times, positions, None, speed)
    if kind == "keypoints":
        order = [link for link in LINKS if link in document["points"]]
        points = tuple(tuple(document["points"][link]) for link in order)
        return KeypointsGoal(goal_id, tuple(order), points, speed)  # type: ignore[arg-type]
    return StopGoal(goal_id)


async def drive(rig: Rig, pipeline: GoalPipeline, ticks: int) -> None:
    """Plan what waits (ticking the loop meanwhile, as the daemon's processes would), then tick."""
    planning = asyncio.ensure_future(pipeline.plan_pending())
    for _ in range(20_000):
        if planning.done():
            break
        await rig.run(1)
        await asyncio.sleep(0)
    await planning
    await rig.run(ticks)


def assert_contract(statuses: list[StatusUpdate]) -> None:
    open_goals: set[str] = set()
    answered: set[str] = set()
    for update in statuses:
        goal_id = update.goal_id
        if goal_id is None:
            continue
        if update.status is GoalStatus.ACCEPTED:
            assert goal_id not in answered, f"{goal_id}: a second first status"
            open_goals.add(goal_id)
        elif update.status is GoalStatus.REJECTED:
            assert goal_id not in answered, f"{goal_id}: a second first status"
        else:
            assert goal_id in open_goals, f"{goal_id}: {update.status} without accepted"
            open_goals.discard(goal_id)
        answered.add(goal_id)
    assert not open_goals, f"never ended: {open_goals}"


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(steps)
@example([({"type": "joints", "positions": {"shoulder_pan_joint": 0.5}, "speed": 5e-324}, True, 0)])
@example(
    [
        ({"type": "joints", "positions": {"shoulder_pan_joint": 0.5}, "speed": 0.5}, True, 120),
        ({"type": "joints", "positions": dict.fromkeys(JOINTS, 0.2)}, True, 20),
        ({"type": "joints", "positions": {"shoulder_pan_joint": -0.3}, "speed": 1e-12}, False, 50),
    ]
)
@example([({"type": "pose", "position": (1e308, 0.1, 0.4), "motion": "linear"}, False, 0)])
@example([({"type": "gripper", "position": "close", "effort": 5e-324}, True, 150)])
@example([({"type": "gripper", "position": 0.0, "effort": 0.0, "speed": 1.0}, False, 150)])
@example([({"type": "pose", "position": (99.0, 0.1, 0.4), "motion": "linear"}, False, 0)])
@example(
    [
        ({"type": "joints", "positions": {"shoulder_pan_joint": 0.5}, "speed": 0.5}, True, 60),
        ({"type": "trajectory", "joints": ["elbow_joint"], "points": [
            {"t": -1e308, "positions": [1.0]}, {"t": 1e308, "positions": [2.9999999999999996]}]},
         False, 50),
        ({"type": "trajectory", "joints": ["shoulder_pan_joint", "elbow_joint"], "points": [
            {"t": 0.0, "positions": [0.3, 1.0]}, {"t": 5e-324, "positions": [-0.3, 2.0]}]},
         False, 150),
    ]
)  # fmt: skip
async def test_edge_values_never_take_anything_down(
    script: list[tuple[dict[str, Any], bool, int]],
) -> None:
    rig, pipeline, statuses = await pipeline_rig(Q0, SETTINGS)
    for n, (document, parsed, ticks) in enumerate(script):
        goal_id = f"e{n}"
        goal: Goal | None
        if parsed:
            payload = json.dumps({"id": goal_id, **document}).encode()
            outcome = parse_goal(payload, joint_names=JOINTS, link_names=LINKS,
                                 default_link="tool0")  # fmt: skip
            if isinstance(outcome, Rejection):  # the bridge answers these itself
                statuses.append(StatusUpdate(goal_id, GoalStatus.REJECTED, outcome.reason))
                goal = None
            else:
                goal = outcome
        else:
            goal = direct_goal(goal_id, document)
        if goal is not None:
            pipeline.submit(goal)
        await drive(rig, pipeline, ticks)
    pipeline.submit(JointsGoal("home", dict(zip(JOINTS, Q0.tolist(), strict=True)), 0.5))
    await drive(rig, pipeline, 0)
    await rig.run_until(lambda: pipeline.statuses.in_progress == 0, limit_s=60.0)

    assert rig.loop.fault is None, rig.loop.fault
    assert_within_limits(rig)
    assert np.all(np.isfinite(rig.loop.commanded.position))  # type: ignore[union-attr]
    assert_contract(statuses)
    for update in statuses:
        assert "internal error" not in (update.reason or ""), update
