"""The field types of inbound payloads (`armd.api.payloads`, `armd.api.payload_trajectory`): strict
scalars (booleans and strings are never numbers; NaN and infinity are not finite numbers) held to
the contract's bounds (`armd.api.contract`), and the base of every payload model (unknown fields
refused, containers lax: JSON arrays become tuples)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, Strict

from armd.api.contract import MAX_CARTESIAN_M, MAX_ID_LENGTH, MAX_JOINT_POSITION, MIN_SPEED

__all__ = ["Coordinate", "Finite", "GoalId", "JointValue", "Name", "Payload", "Speed"]

Finite = Annotated[float, Strict(), Field(allow_inf_nan=False)]
Coordinate = Annotated[
    float, Strict(), Field(ge=-MAX_CARTESIAN_M, le=MAX_CARTESIAN_M, allow_inf_nan=False)
]
JointValue = Annotated[
    float, Strict(), Field(ge=-MAX_JOINT_POSITION, le=MAX_JOINT_POSITION, allow_inf_nan=False)
]
Speed = Annotated[float, Strict(), Field(ge=MIN_SPEED, le=1.0, allow_inf_nan=False)]
GoalId = Annotated[str, Strict(), Field(min_length=1, max_length=MAX_ID_LENGTH)]
Name = Annotated[str, Strict()]


class Payload(BaseModel):
    # Containers are lax (JSON arrays become tuples); every scalar is strict.
    model_config = ConfigDict(extra="forbid", frozen=True)
