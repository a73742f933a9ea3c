"""Validation of ``goal`` and ``estop`` payloads: exact reasons naming the field, ids recovered,
and no input that raises."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from armd.api.payloads import (
    MAX_CARTESIAN_M,
    MAX_ID_LENGTH,
    MAX_JOINT_POSITION,
    MAX_PAYLOAD_BYTES,
    MIN_SPEED,
    parse_estop,
    parse_goal,
)
from armd.link.messages import EstopCommand, JointsGoal, PoseGoal, Rejection, StopGoal

JOINTS = ("shoulder", "elbow", "wrist")
LINKS = ("base", "upper_arm", "tool")
JOINT_LIST = "[shoulder, elbow, wrist]"


def goal(payload: bytes | str | dict[str, Any]) -> object:
    if isinstance(payload, dict):
        payload = json.dumps(payload)
    if isinstance(payload, str):
        payload = payload.encode()
    return parse_goal(payload, joint_names=JOINTS, link_names=LINKS, default_link="tool")


def test_pose_goal_with_defaults() -> None:
    parsed = goal({"id": "g1", "type": "pose", "position": [0.3, -0.1, 0.5]})
    assert parsed == PoseGoal(
        "g1", (0.3, -0.1, 0.5), orientation=None, link="tool", motion="joint", speed=1.0
    )


def test_pose_goal_with_every_field_and_a_normalised_orientation() -> None:
    parsed = goal(
        {
            "id": "g2",
            "type": "pose",
            "position": [1, 2, 3],
            "orientation": [0, 0, 0, 2],
            "link": "upper_arm",
            "motion": "linear",
            "speed": 0.25,
        }
    )
    assert isinstance(parsed, PoseGoal)
    assert parsed.position == (1.0, 2.0, 3.0)
    assert all(isinstance(c, float) for c in parsed.position)
    assert parsed.orientation == pytest.approx((0.0, 0.0, 0.0, 1.0), abs=1e-12)
    assert (parsed.link, parsed.motion, parsed.speed) == ("upper_arm", "linear", 0.25)


def test_orientation_with_huge_components_is_normalised_without_overflow() -> None:
    parsed = goal({"id": "g", "type": "pose", "position": [0, 0, 0], "orientation": [1e308] * 4})
    assert isinstance(parsed, PoseGoal)
    assert parsed.orientation == pytest.approx((0.5, 0.5, 0.5, 0.5), abs=1e-12)


def test_joints_goal() -> None:
    parsed = goal({"id": "j1", "type": "joints", "positions": {"elbow": 1, "wrist": -0.5}})
    assert parsed == JointsGoal("j1", {"elbow": 1.0, "wrist": -0.5}, speed=1.0)
    parsed = goal({"id": "j2", "type": "joints", "positions": {"elbow": 0.1}, "speed": 0.5})
    assert isinstance(parsed, JointsGoal)
    assert parsed.speed == pytest.approx(0.5, abs=0)


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ({"type": "stop"}, StopGoal(None)),
        ({"type": "stop", "id": "s1"}, StopGoal("s1")),
    ],
)
def test_stop_goal(payload: dict[str, Any], expected: StopGoal) -> None:
    assert goal(payload) == expected


POSE = '"id": "p", "type": "pose", "position": [1, 2, 3]'

MALFORMED: list[tuple[str, bytes | str, str | None, str]] = [
    # (test id, payload, recovered id, exact reason)
    ("not-utf8", b'{"id": "x\xff"}', None,
     "payload is not valid UTF-8: byte 9 (invalid start byte)"),
    ("not-json", "{nope", None,
     "not valid JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
    ("empty", b"", None, "not valid JSON: Expecting value: line 1 column 1 (char 0)"),
    ("array", "[1, 2]", None, "payload must be a JSON object, not an array"),
    ("string", '"pose"', None, "payload must be a JSON object, not a string"),
    ("null", "null", None, "payload must be a JSON object, not null"),
    ("number", "3", None, "payload must be a JSON object, not a number"),
    ("too-deep", "[" * 50_000, None, "not valid JSON: nested too deeply"),
    ("too-many-digits", '{"x": ' + "9" * 5000 + "}", None,
     "not valid JSON: a number has too many digits"),
    ("duplicate-key", '{"id": "d", "type": "stop", "type": "pose"}', "d",
     "duplicate key(s) in the JSON object: 'type'"),
    ("missing-type", '{"id": "a"}', "a",
     "type: required field is missing; one of "
     "'pose', 'joints', 'keypoints', 'gripper', 'named', "
     "'trajectory', 'stop'"),
    ("unknown-type", '{"id": "a", "type": "dance"}', "a",
     "type: 'dance' must be one of 'pose', 'joints', 'keypoints', 'gripper', 'named', "
     "'trajectory', 'stop'"),
    ("type-not-string", '{"id": "a", "type": 1}', "a",
     "type: 1 must be one of 'pose', 'joints', 'keypoints', 'gripper', 'named', "
     "'trajectory', 'stop'"),
    ("missing-id", '{"type": "pose", "position": [1, 2, 3]}', None,
     "id: required field is missing; it must be a non-empty string of at most 128 characters"),
    ("empty-id", '{"id": "", "type": "stop"}', None,
     "id: must be a non-empty string of at most 128 characters"),
    ("numeric-id", '{"id": 7, "type": "stop"}', None,
     "id: must be a non-empty string of at most 128 characters"),
    ("long-id", '{"id": "' + "x" * (MAX_ID_LENGTH + 1) + '", "type": "stop"}', None,
     "id: must be a non-empty string of at most 128 characters"),
    ("missing-position", '{"id": "a", "type": "pose"}', "a", "position: required field is missing"),
    ("typo", '{"id": "a", "type": "pose", "postion": [1, 2, 3]}', "a",
     "position: required field is missing; postion: unknown field (did you mean 'position'?)"),
    ("unknown-key", '{' + POSE + ', "colour": "red"}', "p", "colour: unknown field"),
    ("nan", '{"id": "a", "type": "pose", "position": [1, NaN, 3]}', "a",
     "position[1]: nan must be a finite number"),
    ("infinity", '{"id": "a", "type": "pose", "position": [1, 2, -Infinity]}', "a",
     "position[2]: -inf must be a finite number"),
    ("overflow", '{"id": "a", "type": "pose", "position": [1e999, 2, 3]}', "a",
     "position[0]: inf must be a finite number"),
    ("huge-int", '{"id": "a", "type": "pose", "position": [' + "9" * 400 + ", 2, 3]}", "a",
     "position[0]: a huge integer must be a finite number"),
    ("bool-number", '{"id": "a", "type": "pose", "position": [true, 2, 3]}', "a",
     "position[0]: true must be a number"),
    ("string-number", '{"id": "a", "type": "pose", "position": ["1", 2, 3]}', "a",
     "position[0]: '1' must be a number"),
    ("short-position", '{"id": "a", "type": "pose", "position": [1, 2]}', "a",
     "position: must be an array of 3 numbers [x, y, z]"),
    ("long-position", '{"id": "a", "type": "pose", "position": [1, 2, 3, 4]}', "a",
     "position: must be an array of 3 numbers [x, y, z]"),
    ("position-object", '{"id": "a", "type": "pose", "position": {"x": 1}}', "a",
     "position: must be an array of 3 numbers [x, y, z]"),
    ("zero-quaternion", '{' + POSE + ', "orientation": [0, 0, 0, 0]}', "p",
     "orientation: [0, 0, 0, 0] must be a non-zero quaternion"),
    ("tiny-quaternion", '{' + POSE + ', "orientation": [1e-9, 0, 0, 0]}', "p",
     "orientation: [1e-09, 0, 0, 0] must be a non-zero quaternion"),
    ("short-quaternion", '{' + POSE + ', "orientation": [1, 0, 0]}', "p",
     "orientation: must be an array of 4 numbers [w, x, y, z] or null"),
    ("nan-quaternion", '{' + POSE + ', "orientation": [1, 0, NaN, 0]}', "p",
     "orientation[2]: nan must be a finite number"),
    ("unknown-link", '{' + POSE + ', "link": "gripper"}', "p",
     "link: 'gripper' unknown link; links: [base, upper_arm, tool]"),
    ("link-not-string", '{' + POSE + ', "link": 3}', "p", "link: 3 must be a string"),
    ("unknown-motion", '{' + POSE + ', "motion": "fly"}', "p",
     "motion: 'fly' must be 'joint' or 'linear'"),
    ("speed-high", '{' + POSE + ', "speed": 1.5}', "p", "speed: 1.5 must be in [0.01, 1]"),
    ("speed-ulp-above", '{' + POSE + ', "speed": 1.0000000000000002}', "p",
     "speed: 1.0000000000000002 must be in [0.01, 1]"),
    ("speed-zero", '{' + POSE + ', "speed": 0}', "p", "speed: 0 must be in [0.01, 1]"),
    ("speed-negative-zero", '{' + POSE + ', "speed": -0.0}', "p",
     "speed: -0.0 must be in [0.01, 1]"),
    ("speed-negative", '{' + POSE + ', "speed": -0.5}', "p", "speed: -0.5 must be in [0.01, 1]"),
    ("speed-subnormal", '{' + POSE + ', "speed": 5e-324}', "p",
     "speed: 5e-324 must be in [0.01, 1]"),
    ("speed-tiny", '{' + POSE + ', "speed": 1e-12}', "p", "speed: 1e-12 must be in [0.01, 1]"),
    ("speed-ulp-below", '{' + POSE + ', "speed": 0.009999999999999998}', "p",
     "speed: 0.009999999999999998 must be in [0.01, 1]"),
    ("position-huge", '{"id": "a", "type": "pose", "position": [1e308, 0.1, 0.4]}', "a",
     "position[0]: 1e+308 must be within ±100 m"),
    ("position-ulp-beyond", '{"id": "a", "type": "pose", "position": [0, -100.00000000000001, 0]}',
     "a", "position[1]: -100.00000000000001 must be within ±100 m"),
    ("joint-huge", '{"id": "j", "type": "joints", "positions": {"elbow": -1e300}}', "j",
     "positions.elbow: -1e+300 must be within ±1000 (rad or m)"),
    ("speed-nan", '{' + POSE + ', "speed": NaN}', "p", "speed: nan must be a finite number"),
    ("speed-string", '{' + POSE + ', "speed": "fast"}', "p", "speed: 'fast' must be a number"),
    ("several", '{"id": "a", "type": "pose", "position": [1, "2", 3], "speed": 2, "x": 0}', "a",
     "position[1]: '2' must be a number; speed: 2 must be in [0.01, 1]; x: unknown field"),
    ("unknown-joint", '{"id": "j", "type": "joints", "positions": {"wrist_9": 1}}', "j",
     f"positions.wrist_9: unknown joint; joints: {JOINT_LIST}"),
    ("unknown-joints", '{"id": "j", "type": "joints", "positions": {"a": 1, "elbow": 0, "b": 2}}',
     "j", f"positions.a: unknown joint; positions.b: unknown joint; joints: {JOINT_LIST}"),
    ("empty-positions", '{"id": "j", "type": "joints", "positions": {}}', "j",
     "positions: must name at least one joint"),
    ("positions-array", '{"id": "j", "type": "joints", "positions": [1, 2, 3]}', "j",
     "positions: must be an object {joint name: position}"),
    ("missing-positions", '{"id": "j", "type": "joints"}', "j",
     "positions: required field is missing"),
    ("joint-nan", '{"id": "j", "type": "joints", "positions": {"elbow": NaN}}', "j",
     "positions.elbow: nan must be a finite number"),
    ("joint-bool", '{"id": "j", "type": "joints", "positions": {"elbow": false}}', "j",
     "positions.elbow: false must be a number"),
    ("joints-position", '{"id": "j", "type": "joints", "positions": {"elbow": 1}, '
     '"position": [1, 2, 3]}', "j", "position: unknown field (did you mean 'positions'?)"),
    ("stop-extra", '{"id": "s", "type": "stop", "now": true}', "s", "now: unknown field"),
    ("gripper-beyond", '{"id": "g", "type": "gripper", "position": 2}', "g",
     'position: 2 must be an opening in [0, 1] (0 closed, 1 open), "open" or "close"'),
    ("gripper-word", '{"id": "g", "type": "gripper", "position": "half"}', "g",
     'position: \'half\' must be an opening in [0, 1] (0 closed, 1 open), "open" or "close"'),
    ("gripper-effort", '{"id": "g", "type": "gripper", "position": "close", "effort": 1.5}', "g",
     "effort: 1.5 must be in [0, 1] (of the gripper's max_effort) or absent"),
    ("gripper-missing", '{"id": "g", "type": "gripper"}', "g",
     "position: required field is missing"),
    ("control-characters-echoed-safely", '{"id": "c", "type": "stop", "a\\nb": 1}', "c",
     "'a\\nb': unknown field"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("payload", "goal_id", "reason"),
    [case[1:] for case in MALFORMED],
    ids=[case[0] for case in MALFORMED],
)
def test_malformed_goals_are_rejected_with_the_field_and_why(
    payload: bytes | str, goal_id: str | None, reason: str
) -> None:
    assert goal(payload) == Rejection(goal_id, reason)


def test_oversized_payload_is_rejected_before_parsing() -> None:
    payload = b'{"id": "big", "type": "stop", "pad": "' + b" " * MAX_PAYLOAD_BYTES + b'"}'
    assert goal(payload) == Rejection(
        None, f"payload too large: {len(payload)} bytes > {MAX_PAYLOAD_BYTES}"
    )


def test_echoed_values_are_truncated() -> None:
    parsed = goal({"id": "t", "type": "x" * 1000})
    assert isinstance(parsed, Rejection)
    assert "x" * 61 not in parsed.reason  # the value, clipped (the list of types follows)
    assert len(parsed.reason) < 200
    assert parsed.reason.startswith("type: 'xxxx")


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (b'{"engage": true}', EstopCommand(engage=True)),
        (b'{"reset": true}', EstopCommand(engage=False)),
        # Fail-safe: anything that is not a well-formed reset engages the e-stop, and says why.
        (b'{"engage": false}', EstopCommand(True,
            'engage: must be true (to release the stop, send {"reset": true})')),
        (b'{"reset": false}', EstopCommand(True, "reset: must be true")),
        (b"{}", EstopCommand(True, 'payload must be {"engage": true} or {"reset": true}')),
        (b'{"engage": true, "reset": true}',
         EstopCommand(True, "engage, reset: give exactly one of them, not both")),
        (b'{"engage": 1}', EstopCommand(True, "engage: 1 must be true or false")),
        (b'{"engage": "yes"}', EstopCommand(True, "engage: 'yes' must be true or false")),
        (b'{"reset": "true"}', EstopCommand(True, "reset: 'true' must be true or false")),
        (b'{"engage": true, "id": "e"}', EstopCommand(True, "id: unknown field")),
        (b'{"reset": true, "id": "e"}', EstopCommand(True, "id: unknown field")),
        (b'{"egnage": true}', EstopCommand(
            True, "egnage: unknown field (did you mean 'engage'?)")),
        (b"STOP", EstopCommand(
            True, "not valid JSON: Expecting value: line 1 column 1 (char 0)")),
        (b"", EstopCommand(True, "not valid JSON: Expecting value: line 1 column 1 (char 0)")),
        (b"true", EstopCommand(True, "payload must be a JSON object, not a boolean")),
        (b"\xff", EstopCommand(
            True, "payload is not valid UTF-8: byte 0 (invalid start byte)")),
    ],
)  # fmt: skip
def test_estop(payload: bytes, expected: object) -> None:
    assert parse_estop(payload) == expected


# -- fuzz: nothing raises, everything is a Goal or a Rejection ------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=30,
)
KEYS = ("id", "type", "position", "orientation", "link", "motion", "speed", "positions")
near_goals = st.fixed_dictionaries(
    {},
    optional={
        "id": st.one_of(st.text(max_size=200), json_values),
        "type": st.sampled_from(["pose", "joints", "stop", "POSE", ""]) | json_values,
        "position": st.lists(st.floats() | st.integers() | st.booleans(), max_size=4),
        "orientation": st.lists(st.floats(), min_size=3, max_size=5) | json_values,
        "link": st.sampled_from([*LINKS, "nope"]) | json_values,
        "motion": st.sampled_from(["joint", "linear", "x"]) | json_values,
        "speed": st.floats() | st.integers() | json_values,
        "positions": st.dictionaries(st.sampled_from([*JOINTS, "x"]), st.floats()) | json_values,
        "engage": st.booleans() | json_values,
        "reset": st.booleans() | json_values,
    },
)


def check_result(payload: bytes) -> None:
    parsed = goal(payload)
    assert isinstance(parsed, PoseGoal | JointsGoal | StopGoal | Rejection)
    if isinstance(parsed, Rejection):
        assert parsed.reason
    if isinstance(parsed, PoseGoal):
        assert all(math.isfinite(c) for c in parsed.position)
        assert MIN_SPEED <= parsed.speed <= 1
        assert all(abs(c) <= MAX_CARTESIAN_M for c in parsed.position)
        if parsed.orientation is not None:
            assert math.hypot(*parsed.orientation) == pytest.approx(1.0, abs=1e-9)
    if isinstance(parsed, JointsGoal):
        assert parsed.positions
        assert set(parsed.positions) <= set(JOINTS)
        assert all(math.isfinite(v) for v in parsed.positions.values())
    estop = parse_estop(payload)
    assert isinstance(estop, EstopCommand)
    well_formed_reset = estop == EstopCommand(engage=False)
    assert estop.engage or well_formed_reset  # fail-safe: only a well-formed reset resets


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_never_raise(payload: bytes) -> None:
    check_result(payload)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_random_json_never_raises(value: object) -> None:
    check_result(json.dumps(value).encode())


@settings(max_examples=500, deadline=None)
@given(near_goals)
def test_near_valid_goals_never_raise_and_ids_are_recovered(document: dict[str, Any]) -> None:
    payload = json.dumps(document).encode()
    check_result(payload)
    parsed = goal(payload)
    goal_id = document.get("id")
    if isinstance(goal_id, str) and 0 < len(goal_id) <= MAX_ID_LENGTH:
        assert getattr(parsed, "goal_id", None) == goal_id


@pytest.mark.parametrize(
    "document",
    [
        {"id": "b1", "type": "pose", "position": [MAX_CARTESIAN_M, -MAX_CARTESIAN_M, -0.0],
         "speed": MIN_SPEED},
        {"id": "b2", "type": "joints", "positions": {"elbow": -MAX_JOINT_POSITION},
         "speed": 1.0},
        {"id": "b3", "type": "joints", "positions": {"elbow": 5e-324}, "speed": 0.5},
        {"id": "b4", "type": "keypoints", "points": {"base": [0, 0, 0],
                                                      "tool": [MAX_CARTESIAN_M, 0, 0]}},
    ],
)  # fmt: skip
def test_values_on_every_bound_are_accepted(document: dict[str, Any]) -> None:
    parsed = goal(document)
    assert not isinstance(parsed, Rejection), parsed
