"""Validation of the payloads clients send on ``goal`` and ``estop`` (docs/mqtt.md).

Every input becomes either a value of `armd.link.messages` or a `Rejection` whose reason names the
field and why (``position[1]: nan must be a finite number``); nothing here raises on any input.

Rules, stricter than plain JSON decoding so that mistakes are not silently ignored:

- at most `MAX_PAYLOAD_BYTES`, UTF-8, one JSON object, no duplicate keys;
- ``NaN`` and ``Infinity`` literals (which Python's `json` accepts) and numbers too large for a
  float are not finite numbers and are refused wherever a number is expected;
- booleans and strings are never numbers;
- unknown keys are refused (a typo such as ``"postion"`` must not turn into a goal that ignores
  the intended field);
- ``id`` is a non-empty string of at most `MAX_ID_LENGTH` characters; it is read back for the
  rejection whenever the payload is a JSON object carrying such a string, whatever else is wrong;
- orientations are normalised; a quaternion of (near-)zero norm is refused;
- ``speed`` is in [`MIN_SPEED`, 1] (slower moves than 1 % of full speed would take hours, and
  the jerk limit, scaled by speed³, would fall below what the trajectory generator can plan with);
- every Cartesian coordinate is within ± `MAX_CARTESIAN_M` and every joint position within
  ± `MAX_JOINT_POSITION` (rad or m), so that no planning arithmetic can overflow;
- joint and link names must exist in the model;
- a trajectory goal's checks are `armd.api.payload_trajectory`'s;
- a keypoints goal names at least 2 links; its points are taken in the model's link order (root
  first), and consecutive ones must be at least `MIN_SEGMENT_LENGTH` apart (a direction).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Collection
from typing import Annotated, Any, Literal, TypeVar

from pydantic import Field, Strict, ValidationError
from pydantic_core import ErrorDetails

from armd.api import payload_reasons as render
from armd.api.contract import (
    GOAL_TYPES,
    MAX_CARTESIAN_M,
    MAX_ID_LENGTH,
    MAX_JOINT_POSITION,
    MAX_PAYLOAD_BYTES,
    MIN_SPEED,
)
from armd.api.payload_trajectory import POINT_FIELDS, TrajectoryModel, trajectory_goal
from armd.api.payload_types import Coordinate, Finite, GoalId, JointValue, Name, Payload, Speed
from armd.link.messages import (
    EstopCommand,
    Goal,
    GripperGoal,
    JointsGoal,
    KeypointsGoal,
    NamedGoal,
    PoseGoal,
    Rejection,
    StopGoal,
    TrajectoryGoal,
)
from kinematics.mapping import MIN_SEGMENT_LENGTH

__all__ = [
    "GOAL_TYPES",
    "MAX_CARTESIAN_M",
    "MAX_ID_LENGTH",
    "MAX_JOINT_POSITION",
    "MAX_PAYLOAD_BYTES",
    "MIN_SPEED",
    "parse_estop",
    "parse_goal",
]

_MIN_QUATERNION_NORM = 1e-6


class _PoseModel(Payload):
    id: GoalId
    type: Literal["pose"]
    position: tuple[Coordinate, Coordinate, Coordinate]
    orientation: tuple[Finite, Finite, Finite, Finite] | None = None
    link: Name | None = None
    motion: Literal["joint", "linear"] = "joint"
    speed: Speed = 1.0


class _JointsModel(Payload):
    id: GoalId
    type: Literal["joints"]
    positions: dict[Name, JointValue]
    speed: Speed = 1.0


class _KeypointsModel(Payload):
    id: GoalId
    type: Literal["keypoints"]
    points: dict[Name, tuple[Coordinate, Coordinate, Coordinate]]
    speed: Speed = 1.0


class _GripperModel(Payload):
    id: GoalId
    type: Literal["gripper"]
    position: (
        Annotated[float, Strict(), Field(ge=0.0, le=1.0, allow_inf_nan=False)]
        | Literal["open", "close"]
    )
    effort: Annotated[float, Strict(), Field(ge=0.0, le=1.0, allow_inf_nan=False)] | None = None
    speed: Speed = 1.0


class _NamedModel(Payload):
    id: GoalId
    type: Literal["named"]
    name: Annotated[str, Strict(), Field(min_length=1, max_length=MAX_ID_LENGTH)]
    speed: Speed = 1.0


class _StopModel(Payload):
    id: GoalId | None = None
    type: Literal["stop"]


class _EstopModel(Payload):
    engage: Annotated[bool, Strict()] | None = None
    reset: Annotated[bool, Strict()] | None = None


def parse_goal(  # noqa: PLR0911 (one return per goal type and per refusal)
    payload: bytes,
    *,
    joint_names: Collection[str],
    link_names: Collection[str],
    default_link: str,
) -> Goal | Rejection:
    """Parse a ``goal`` payload into a `PoseGoal`, `JointsGoal`, `KeypointsGoal`, `GripperGoal`,
    `TrajectoryGoal` or `StopGoal`, or a `Rejection`.

    `joint_names` and `link_names` are the model's (links in the model's order, root first: it
    orders a keypoints goal's points); `default_link` (the configured tool link) becomes the goal's
    link when a pose goal names none. Never raises.
    """
    document = _decode(payload)
    if isinstance(document, Rejection):
        return document
    goal_id = _recover_id(document)
    goal_type = document.get("type")
    if goal_type not in GOAL_TYPES:
        allowed = ", ".join(repr(t) for t in GOAL_TYPES)
        if "type" not in document:
            return Rejection(goal_id, f"type: required field is missing; one of {allowed}")
        return Rejection(goal_id, f"type: {render.show(goal_type)} must be one of {allowed}")
    if goal_type == "pose":
        return _pose(document, goal_id, link_names, default_link)
    if goal_type == "joints":
        return _joints(document, goal_id, joint_names)
    if goal_type == "keypoints":
        return _keypoints(document, goal_id, link_names)
    if goal_type == "gripper":
        return _gripper(document, goal_id)
    if goal_type == "trajectory":
        return _trajectory(document, goal_id, joint_names)
    if goal_type == "named":  # the planner knows the poses: an unknown name is refused there
        named = _validate(_NamedModel, document, goal_id)
        if isinstance(named, Rejection):
            return named
        return NamedGoal(named.id, named.name, named.speed)
    model = _validate(_StopModel, document, goal_id)
    return model if isinstance(model, Rejection) else StopGoal(goal_id=model.id)


def _gripper(document: dict[str, Any], goal_id: str | None) -> GripperGoal | Rejection:
    model = _validate(_GripperModel, document, goal_id, render.gripper_reason)
    if isinstance(model, Rejection):
        return model
    position = model.position
    opening = 1.0 if position == "open" else 0.0 if position == "close" else float(position)
    return GripperGoal(model.id, opening, model.effort, model.speed)


def _trajectory(
    document: dict[str, Any], goal_id: str | None, joint_names: Collection[str]
) -> TrajectoryGoal | Rejection:
    def rendered(error: ErrorDetails, fields: Collection[str]) -> str:
        return render.trajectory_reason(error, fields, POINT_FIELDS)

    model = _validate(TrajectoryModel, document, goal_id, rendered)
    if isinstance(model, Rejection):
        return model
    return trajectory_goal(model, goal_id, joint_names)


def parse_estop(payload: bytes) -> EstopCommand:
    """Parse an ``estop`` payload, failing safe: exactly ``{"reset": true}`` is a reset; anything
    else engages the e-stop, ``{"engage": true}`` silently, any other payload (not JSON, empty,
    ``STOP``, ``{"engage": "yes"}``, ...) with `EstopCommand.problem` saying what was wrong."""
    document = _decode(payload)
    if isinstance(document, Rejection):
        return EstopCommand(engage=True, problem=document.reason)
    model = _validate(_EstopModel, document, None)
    if isinstance(model, Rejection):
        return EstopCommand(engage=True, problem=model.reason)
    problem = _estop_problem(model.engage, model.reset)
    if problem is not None:
        return EstopCommand(engage=True, problem=problem)
    return EstopCommand(engage=model.engage is True)


def _estop_problem(engage: bool | None, reset: bool | None) -> str | None:
    if engage is False:
        return 'engage: must be true (to release the stop, send {"reset": true})'
    if reset is False:
        return "reset: must be true"
    if engage is None and reset is None:
        return 'payload must be {"engage": true} or {"reset": true}'
    if engage and reset:
        return "engage, reset: give exactly one of them, not both"
    return None


def _pose(
    document: dict[str, Any], goal_id: str | None, link_names: Collection[str], default_link: str
) -> PoseGoal | Rejection:
    model = _validate(_PoseModel, document, goal_id)
    if isinstance(model, Rejection):
        return model
    checked = _link_and_orientation(model.link, model.orientation, document, goal_id, link_names)
    if isinstance(checked, Rejection):
        return checked
    return PoseGoal(
        goal_id=model.id,
        position=model.position,
        orientation=checked[1],
        link=checked[0] or default_link,
        motion=model.motion,
        speed=model.speed,
    )


Quaternion = tuple[float, float, float, float]


def _link_and_orientation(
    link: str | None,
    orientation: Quaternion | None,
    document: dict[str, Any],
    goal_id: str | None,
    link_names: Collection[str],
) -> tuple[str | None, Quaternion | None] | Rejection:
    """A pose's link, checked against the model's (None: not given), and its orientation,
    normalised (None: position only); or why not (a pose goal's and a pose stream message's)."""
    if link is not None and link not in link_names:
        return Rejection(
            goal_id, f"link: {render.show(link)} unknown link; links: {render.names(link_names)}"
        )
    if orientation is None:
        return link, None
    unit = _unit_quaternion(orientation)
    if unit is None:
        shown = render.show(document["orientation"])
        return Rejection(goal_id, f"orientation: {shown} must be a non-zero quaternion")
    return link, unit


def _unknown_joints(
    positions: Collection[str], goal_id: str | None, joint_names: Collection[str]
) -> Rejection | None:
    """Why `positions` cannot be (it names no joint, or joints the model lacks), or None."""
    if not positions:
        return Rejection(goal_id, "positions: must name at least one joint")
    unknown = [name for name in positions if name not in joint_names]
    if not unknown:
        return None
    reasons = [
        f"positions.{render.name(name)}: unknown joint" for name in unknown[: render.MAX_REASONS]
    ]
    return Rejection(goal_id, f"{'; '.join(reasons)}; joints: {render.names(joint_names)}")


def _unit_quaternion(q: Quaternion) -> Quaternion | None:
    """`q` normalised, or None when its norm is below `_MIN_QUATERNION_NORM`."""
    scale = max(abs(c) for c in q)  # scaled first so that huge components cannot overflow
    if scale == 0.0:
        return None
    w, x, y, z = (c / scale for c in q)
    unit_norm = math.hypot(w, x, y, z)
    if scale * unit_norm < _MIN_QUATERNION_NORM:
        return None
    return (w / unit_norm, x / unit_norm, y / unit_norm, z / unit_norm)


def _joints(
    document: dict[str, Any], goal_id: str | None, joint_names: Collection[str]
) -> JointsGoal | Rejection:
    model = _validate(_JointsModel, document, goal_id)
    if isinstance(model, Rejection):
        return model
    unknown = _unknown_joints(model.positions, goal_id, joint_names)
    if unknown is not None:
        return unknown
    return JointsGoal(goal_id=model.id, positions=dict(model.positions), speed=model.speed)


def _keypoints(
    document: dict[str, Any], goal_id: str | None, link_names: Collection[str]
) -> KeypointsGoal | Rejection:
    model = _validate(_KeypointsModel, document, goal_id)
    if isinstance(model, Rejection):
        return model
    unknown = [name for name in model.points if name not in link_names]
    if unknown:
        reasons = [
            f"points.{render.name(name)}: unknown link" for name in unknown[: render.MAX_REASONS]
        ]
        return Rejection(goal_id, f"{'; '.join(reasons)}; links: {render.names(link_names)}")
    if len(model.points) < 2:
        return Rejection(goal_id, "points: must name at least 2 links (a segment between them)")
    order = {name: i for i, name in enumerate(link_names)}
    links = sorted(model.points, key=order.__getitem__)
    for first, second in itertools.pairwise(links):
        if math.dist(model.points[first], model.points[second]) < MIN_SEGMENT_LENGTH:
            return Rejection(
                goal_id,
                f"points.{render.name(first)}, points.{render.name(second)}: less than "
                f"{MIN_SEGMENT_LENGTH:g} m apart, no direction between them",
            )
    points = tuple(model.points[name] for name in links)
    return KeypointsGoal(model.id, tuple(links), points, speed=model.speed)


def _decode(payload: bytes) -> dict[str, Any] | Rejection:
    """Bytes -> a JSON object, or the rejection saying why not."""
    text = _text(payload)
    if isinstance(text, Rejection):
        return text
    duplicates: list[str] = []
    document = _load(text, duplicates)
    if isinstance(document, Rejection):
        return document
    if not isinstance(document, dict):
        return Rejection(None, f"payload must be a JSON object, not {render.json_kind(document)}")
    if duplicates:
        keys = ", ".join(render.show(key) for key in duplicates[: render.MAX_REASONS])
        return Rejection(_recover_id(document), f"duplicate key(s) in the JSON object: {keys}")
    return document


def _text(payload: bytes) -> str | Rejection:
    if len(payload) > MAX_PAYLOAD_BYTES:
        return Rejection(None, f"payload too large: {len(payload)} bytes > {MAX_PAYLOAD_BYTES}")
    try:
        return bytes(payload).decode("utf-8")
    except UnicodeDecodeError as exc:
        return Rejection(None, f"payload is not valid UTF-8: byte {exc.start} ({exc.reason})")


def _load(text: str, duplicates: list[str]) -> Any:
    """JSON text -> a Python value (NaN and Infinity included), or a `Rejection`."""
    try:
        return json.loads(text, object_pairs_hook=lambda pairs: _object(pairs, duplicates))
    except RecursionError:
        return Rejection(None, "not valid JSON: nested too deeply")
    except json.JSONDecodeError as exc:
        return Rejection(None, f"not valid JSON: {exc}")
    except ValueError:  # Python refuses to convert integers of more than 4300 digits
        return Rejection(None, "not valid JSON: a number has too many digits")


def _object(pairs: list[tuple[str, Any]], duplicates: list[str]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            duplicates.append(key)
        result[key] = value
    return result


def _recover_id(document: dict[str, Any]) -> str | None:
    goal_id = document.get("id")
    if isinstance(goal_id, str) and 0 < len(goal_id) <= MAX_ID_LENGTH:
        return goal_id
    return None


_M = TypeVar("_M", bound=Payload)


def _validate(
    model: type[_M],
    document: dict[str, Any],
    goal_id: str | None,
    rendered: Callable[[ErrorDetails, Collection[str]], str] = render.reason,
) -> _M | Rejection:
    try:
        return model.model_validate(document)
    except ValidationError as exc:
        reasons = [rendered(error, model.model_fields) for error in exc.errors(include_url=False)]
        return Rejection(goal_id, render.join_reasons(reasons))
    except (OverflowError, ValueError) as exc:  # defensive: nothing a client sends may escape
        return Rejection(goal_id, f"invalid payload: {exc}")
