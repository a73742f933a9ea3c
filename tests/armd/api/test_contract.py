"""The MQTT contract in one module: the topic table, the JSON forms, and goals that a client
encodes read back unchanged by the daemon's parser."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from armd.api.contract import (
    AVAILABILITY,
    ESTOP,
    FAULT,
    GOAL,
    GOAL_STATUS,
    MAX_CARTESIAN_M,
    MAX_JOINT_POSITION,
    MIN_SPEED,
    MODEL,
    PAYLOAD,
    STATE,
    STREAM,
    TOPICS,
    Topics,
    encode,
    fault_json,
    goal_json,
    status_json,
    telemetry_json,
)
from armd.api.payloads import parse_goal
from armd.link.messages import (
    Fault,
    GoalStatus,
    GripperGoal,
    JointsGoal,
    KeypointsGoal,
    Mode,
    PoseGoal,
    StatusUpdate,
    StopGoal,
    Telemetry,
)

JOINTS = ("shoulder", "elbow", "wrist")
LINKS = ("base", "upper_arm", "forearm", "tool")


def test_the_topic_table() -> None:
    topics = Topics.for_arm("arm-1")
    assert [topics.name(t) for t in TOPICS] == [
        "armd/arm-1/availability",
        "armd/arm-1/state",
        "armd/arm-1/goal",
        "armd/arm-1/goal/status",
        "armd/arm-1/estop",
        "armd/arm-1/fault",
        "armd/arm-1/stream",
        "armd/arm-1/model",
        "armd/arm-1/payload",
    ]
    assert (topics.goal_status, topics.name(GOAL_STATUS)) == ("armd/arm-1/goal/status",) * 2
    assert [t for t in TOPICS if t.inbound] == [GOAL, ESTOP, STREAM, PAYLOAD]
    assert [t for t in TOPICS if t.retain] == [AVAILABILITY, FAULT, MODEL]
    assert STATE.qos == 0
    assert STREAM.qos == 0  # loop-rate targets: a lost one is replaced by the next
    assert all(t.qos == 1 for t in TOPICS if t not in (STATE, STREAM))


def test_json_forms_of_the_outbound_values() -> None:
    assert status_json(StatusUpdate("g", GoalStatus.ACCEPTED)) == {"id": "g", "status": "accepted"}
    assert status_json(StatusUpdate(None, GoalStatus.REJECTED, "why")) == {
        "id": None,
        "status": "rejected",
        "reason": "why",
    }
    assert fault_json(Fault("device_fault", "m", "elbow")) == {
        "code": "device_fault",
        "message": "m",
        "joint": "elbow",
    }
    assert encode({"a": [1.5, None]}) == b'{"a":[1.5,null]}'
    with pytest.raises(ValueError, match="JSON"):
        encode({"t": math.nan})


def parse(document: dict[str, object]) -> object:
    return parse_goal(encode(document), joint_names=JOINTS, link_names=LINKS, default_link="tool")


coordinates = st.floats(-MAX_CARTESIAN_M, MAX_CARTESIAN_M)
speeds = st.floats(MIN_SPEED, 1.0)
goals = st.one_of(
    st.builds(
        JointsGoal,
        st.text(min_size=1, max_size=20),
        st.dictionaries(
            st.sampled_from(JOINTS), st.floats(-MAX_JOINT_POSITION, MAX_JOINT_POSITION), min_size=1
        ),
        speeds,
    ),
    st.builds(
        PoseGoal,
        st.text(min_size=1, max_size=20),
        st.tuples(coordinates, coordinates, coordinates),
        st.none() | st.just((0.0, 0.0, 1.0, 0.0)),
        st.sampled_from(LINKS),
        st.sampled_from(["joint", "linear"]),
        speeds,
    ),
    st.builds(
        KeypointsGoal,
        st.text(min_size=1, max_size=20),
        st.just(("base", "forearm", "tool")),
        st.just(((0.0, 0.0, 0.0), (0.0, 0.0, 1.0), (1.0, 0.0, 1.0))),
        speeds,
    ),
    st.builds(
        GripperGoal,
        st.text(min_size=1, max_size=20),
        st.floats(0.0, 1.0),
        st.none() | st.floats(0.0, 1.0),
        speeds,
    ),
    st.builds(StopGoal, st.none() | st.text(min_size=1, max_size=20)),
)


@settings(max_examples=200, deadline=None)
@given(goals)
def test_a_goal_a_client_encodes_is_the_goal_the_daemon_reads(goal: object) -> None:
    assert parse(goal_json(goal)) == goal  # type: ignore[arg-type]


def test_the_contract_imports_neither_pydantic_nor_aiomqtt() -> None:
    """A client that only publishes (``armd goal``, ``armd estop``) starts fast."""
    script = (
        "import sys, armd.api.contract; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'pydantic', 'aiomqtt', 'numba'}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]", out.stdout


def test_state_carries_each_commanded_position_where_there_is_one() -> None:
    """`command` beside the measured state (an extension: clients that do not know it ignore
    it); absent, as `effort`, where there is none (NaN is not JSON)."""
    telemetry = Telemetry(
        t=1.0,
        mode=Mode.MOVING,
        joints={"shoulder": (0.1, 0.2, math.nan), "elbow": (-0.2, 0.0, 0.5)},
        tcp_link="tool",
        tcp_position=(0.3, 0.0, 0.5),
        tcp_orientation=(1.0, 0.0, 0.0, 0.0),
        commands={"shoulder": 0.11, "elbow": math.nan},
    )
    joints = json.loads(encode(telemetry_json(telemetry)))["joints"]
    assert joints == {
        "shoulder": {"position": 0.1, "velocity": 0.2, "command": 0.11},
        "elbow": {"position": -0.2, "velocity": 0.0, "effort": 0.5},
    }
    no_commands = replace(telemetry, commands=None)
    assert "command" not in json.loads(encode(telemetry_json(no_commands)))["joints"]["shoulder"]
