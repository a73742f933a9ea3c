"""The payload-specific rules of rejection reasons (the shapes and bounds of the goal fields) on top
of the one renderer, `armd.reasons`: ``position[1]: nan must be a finite number``."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from pydantic_core import ErrorDetails

from armd import reasons
from armd.api.contract import (
    MAX_CARTESIAN_M,
    MAX_ID_LENGTH,
    MAX_JOINT_POSITION,
    MAX_MOTION_DURATION_S,
    MAX_TRAJECTORY_POINTS,
    MIN_SPEED,
)

__all__ = [
    "MAX_REASONS",
    "gripper_reason",
    "join_reasons",
    "json_kind",
    "name",
    "names",
    "reason",
    "show",
    "trajectory_reason",
]

MAX_REASONS = 5  # a payload with many mistakes gets the first few, not an essay
_ID_RULE = f"must be a non-empty string of at most {MAX_ID_LENGTH} characters"

# Messages for errors about a whole field's shape rather than one of its elements.
_SHAPE_RULES = {
    "position": "must be an array of 3 numbers [x, y, z]",
    "orientation": "must be an array of 4 numbers [w, x, y, z] or null",
    "positions": "must be an object {joint name: position}",
    "points": "must be an object {link name: [x, y, z]}",
    "velocities": "must be an object {joint name: velocity}",
    "linear": "must be an array of 3 numbers [vx, vy, vz] (m/s)",
    "angular": "must be an array of 3 numbers [wx, wy, wz] (rad/s)",
}
_SHAPE_ERRORS = {"tuple_type", "too_short", "too_long", "dict_type", "model_type"}
# The bounded fields: speed, and Cartesian (`position`, `points`) or joint positions.
_BOUNDS = {
    "speed": f"must be in [{MIN_SPEED:g}, 1]",
    "position": f"must be within ±{MAX_CARTESIAN_M:g} m",
    "points": f"must be within ±{MAX_CARTESIAN_M:g} m",
    "positions": f"must be within ±{MAX_JOINT_POSITION:g} (rad or m)",
    "velocities": f"must be within ±{MAX_JOINT_POSITION:g} (rad/s or m/s)",
    "linear": f"must be within ±{MAX_CARTESIAN_M:g} m/s",
    "angular": f"must be within ±{MAX_CARTESIAN_M:g} rad/s",
    "seq": "must be an integer in [0, 2^53]",
}
_BOUND_ERRORS = {"greater_than_equal", "less_than_equal"}

show = reasons.show_json
name = reasons.key_name
names = reasons.names


def join_reasons(all_reasons: Sequence[str]) -> str:
    return reasons.join(all_reasons, MAX_REASONS)


def reason(error: ErrorDetails, fields: Collection[str]) -> str:
    loc = tuple(error["loc"])
    kind = error["type"]
    head = str(loc[0]) if loc else ""
    where = reasons.path(loc) or "payload"
    if head == "points" and len(loc) > 1 and (kind in _SHAPE_ERRORS or kind == "missing"):
        return f"{reasons.path(loc[:2])}: must be an array of 3 numbers [x, y, z]"
    if head == "id" and kind != "extra_forbidden":
        prefix = "required field is missing; it " if kind == "missing" else ""
        return f"id: {prefix}{_ID_RULE}"
    if head in _SHAPE_RULES and (kind in _SHAPE_ERRORS or (kind == "missing" and len(loc) > 1)):
        return f"{head}: {_SHAPE_RULES[head]}"
    if kind == "extra_forbidden":
        problem = reasons.unknown(head, fields, reasons.PAYLOAD, listed=False)
    elif kind == "missing":
        problem = reasons.missing(reasons.PAYLOAD)
    elif kind in _BOUND_ERRORS and head in _BOUNDS:
        problem = f"{show(error.get('input'))} {_BOUNDS[head]}"
    else:
        problem = reasons.value_problem(error, reasons.PAYLOAD)
    return f"{where}: {problem}"


# A gripper goal's fields (its `position` is a number or a word: one reason for both).
_GRIPPER_RULES = {
    "position": 'must be an opening in [0, 1] (0 closed, 1 open), "open" or "close"',
    "effort": "must be in [0, 1] (of the gripper's max_effort) or absent",
}


def gripper_reason(error: ErrorDetails, fields: Collection[str]) -> str:
    """A reason for a ``gripper`` goal (`reason` covers the fields it shares with the others)."""
    loc = tuple(error["loc"])
    head = str(loc[0]) if loc else ""
    if head in _GRIPPER_RULES and error["type"] != "missing":
        return f"{head}: {show(error.get('input'))} {_GRIPPER_RULES[head]}"
    return reason(error, fields)


# A trajectory point's fields: their shapes and bounds (`armd.api.payload_trajectory`).
_POINT_RULES = {
    "t": f"must be in [0, {MAX_MOTION_DURATION_S:g}] s",
    "positions": f"must be within ±{MAX_JOINT_POSITION:g} (rad or m)",
    "velocities": f"must be within ±{MAX_JOINT_POSITION:g} (rad/s or m/s)",
}
_POINT_SHAPES = {
    "positions": "must be an array of numbers, one per joint in joints",
    "velocities": "must be an array of numbers, one per joint in joints, or absent",
}


def trajectory_reason(error: ErrorDetails, fields: Collection[str], point: Collection[str]) -> str:
    """A reason for a ``trajectory`` goal: its ``points`` are timed joint positions, not the
    Cartesian points of a keypoints goal (`reason` covers the fields they share); `point` names
    a point's fields."""
    loc = tuple(error["loc"])
    if not loc or loc[0] not in ("points", "joints"):
        return reason(error, fields)
    if loc[0] == "joints":
        if error["type"] in _SHAPE_ERRORS or len(loc) == 1:
            return "joints: must be an array of joint names"
        return f"{reasons.path(loc)}: {reasons.value_problem(error, reasons.PAYLOAD)}"
    if len(loc) > 1:
        return _point_reason(error, loc, point)
    if error["type"] == "too_long":
        count = error.get("ctx", {}).get("actual_length", "more")
        return (
            f"points: {count} points, at most {MAX_TRAJECTORY_POINTS} (simplify the "
            "trajectory: `armd replay` does)"
        )
    return 'points: must be an array of points {"t", "positions", "velocities"?}'


def _point_reason(error: ErrorDetails, loc: reasons.Loc, point: Collection[str]) -> str:
    """A reason about one trajectory point (``points[i]``) or one of its fields."""
    kind, where = error["type"], reasons.path(loc)
    field = str(loc[2]) if len(loc) > 2 else ""
    if not field:
        problem = 'must be an object {"t", "positions", "velocities"?}'
    elif kind == "extra_forbidden":
        problem = reasons.unknown(field, point, reasons.PAYLOAD, listed=False)
    elif kind == "missing":
        problem = reasons.missing(reasons.PAYLOAD)
    elif field in _POINT_SHAPES and (kind in _SHAPE_ERRORS or len(loc) == 3):
        where, problem = reasons.path(loc[:3]), _POINT_SHAPES[field]
    elif kind in _BOUND_ERRORS and field in _POINT_RULES:
        problem = f"{show(error.get('input'))} {_POINT_RULES[field]}"
    else:
        problem = reasons.value_problem(error, reasons.PAYLOAD)
    return f"{where}: {problem}"


def json_kind(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"
