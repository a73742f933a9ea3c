"""Validation of the messages clients send on ``stream`` (docs/mqtt.md#stream), with the goals'
rules and machinery (`armd.api.payloads`): at most `MAX_PAYLOAD_BYTES` of UTF-8, one JSON object
without duplicate or unknown keys, finite numbers within the goals' bounds, known joint and link
names, and a reason naming the field for anything else. Nothing here raises on any input.

Beyond the goals' rules: ``seq`` is an integer in [0, `MAX_SEQ`]; ``id`` is optional
(`DEFAULT_STREAM_ID`); a ``joints`` message's ``velocities`` name only joints its ``positions``
name.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Annotated, Any, Literal

from pydantic import Field, Strict

from armd.api import payload_reasons as render
from armd.api.contract import DEFAULT_STREAM_ID, MAX_CARTESIAN_M, MAX_SEQ, STREAM_TYPES
from armd.api.payload_types import Coordinate, Finite, GoalId, JointValue, Name, Payload
from armd.api.payloads import (
    _decode,
    _link_and_orientation,
    _recover_id,
    _unknown_joints,
    _validate,
)
from armd.link.messages import (
    Rejection,
    StreamEnd,
    StreamJoints,
    StreamMessage,
    StreamPose,
    StreamTwist,
)

__all__ = ["STREAM_TYPES", "parse_stream"]

Seq = Annotated[int, Strict(), Field(ge=0, le=MAX_SEQ)]
Speed = Annotated[
    float, Strict(), Field(ge=-MAX_CARTESIAN_M, le=MAX_CARTESIAN_M, allow_inf_nan=False)
]
Vector = tuple[Speed, Speed, Speed]


class _JointsModel(Payload):
    id: GoalId = DEFAULT_STREAM_ID
    seq: Seq
    type: Literal["joints"]
    positions: dict[Name, JointValue]
    velocities: dict[Name, JointValue] | None = None


class _PoseModel(Payload):
    id: GoalId = DEFAULT_STREAM_ID
    seq: Seq
    type: Literal["pose"]
    position: tuple[Coordinate, Coordinate, Coordinate]
    orientation: tuple[Finite, Finite, Finite, Finite] | None = None
    link: Name | None = None


class _TwistModel(Payload):
    id: GoalId = DEFAULT_STREAM_ID
    seq: Seq
    type: Literal["twist"]
    linear: Vector
    angular: Vector
    frame: Literal["root", "tool"] = "root"


class _EndModel(Payload):
    id: GoalId = DEFAULT_STREAM_ID
    seq: Seq
    type: Literal["end"]


def parse_stream(
    payload: bytes,
    *,
    joint_names: Collection[str],
    link_names: Collection[str],
    default_link: str,
) -> StreamMessage | Rejection:
    """Parse a ``stream`` payload into a `StreamJoints`, `StreamPose`, `StreamTwist` or
    `StreamEnd`, or a `Rejection` (whose id is the message's, or the default stream id).

    `joint_names` are the joints a stream may drive, `link_names` the model's links;
    `default_link` is a pose's link when it names none. Never raises.
    """
    document = _decode(payload)
    if isinstance(document, Rejection):
        return document
    stream_id = _recover_id(document) if "id" in document else DEFAULT_STREAM_ID
    kind = document.get("type")
    if kind not in STREAM_TYPES:
        allowed = ", ".join(repr(t) for t in STREAM_TYPES)
        if "type" not in document:
            return Rejection(stream_id, f"type: required field is missing; one of {allowed}")
        return Rejection(stream_id, f"type: {render.show(kind)} must be one of {allowed}")
    if kind == "joints":
        return _joints(document, stream_id, joint_names)
    if kind == "pose":
        return _pose(document, stream_id, link_names, default_link)
    return _twist(document, stream_id) if kind == "twist" else _end(document, stream_id)


def _twist(document: dict[str, Any], stream_id: str | None) -> StreamTwist | Rejection:
    model = _validate(_TwistModel, document, stream_id)
    if isinstance(model, Rejection):
        return model
    return StreamTwist(model.id, model.seq, model.linear, model.angular, model.frame)


def _end(document: dict[str, Any], stream_id: str | None) -> StreamEnd | Rejection:
    model = _validate(_EndModel, document, stream_id)
    return model if isinstance(model, Rejection) else StreamEnd(model.id, model.seq)


def _joints(
    document: dict[str, Any], stream_id: str | None, joint_names: Collection[str]
) -> StreamJoints | Rejection:
    model = _validate(_JointsModel, document, stream_id)
    if isinstance(model, Rejection):
        return model
    unknown = _unknown_joints(model.positions, stream_id, joint_names)
    if unknown is not None:
        return unknown
    velocities = model.velocities or {}
    unnamed = [name for name in velocities if name not in model.positions]
    if unnamed:
        reasons = [f"velocities.{render.name(name)}: not named in positions" for name in unnamed]
        return Rejection(stream_id, render.join_reasons(reasons))
    return StreamJoints(model.id, model.seq, dict(model.positions), dict(velocities))


def _pose(
    document: dict[str, Any],
    stream_id: str | None,
    link_names: Collection[str],
    default_link: str,
) -> StreamPose | Rejection:
    model = _validate(_PoseModel, document, stream_id)
    if isinstance(model, Rejection):
        return model
    checked = _link_and_orientation(model.link, model.orientation, document, stream_id, link_names)
    if isinstance(checked, Rejection):
        return checked
    link, orientation = checked
    return StreamPose(model.id, model.seq, model.position, orientation, link or default_link)
