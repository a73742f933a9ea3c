"""Validation of the ``payload`` topic's messages: the load at the tool link, replaced at run time
(docs/mqtt.md#payload)::

    {"mass": 1.5, "com": [0.0, 0.0, 0.05], "inertia": [0.002, 0.0, 0.0, 0.002, 0.0, 0.001]}

``mass`` in kg, within [0, `MAX_LOAD_KG`]; ``com`` (default [0, 0, 0]) in m, the tool link's
frame, each coordinate within ± `MAX_LOAD_COM_M`; ``inertia`` (default: a point mass) in kg·m²
about the centre of mass, the tool link's axes, one a rigid body can have (`kinematics.inertial`).
The goals' rules hold (`armd.api.payloads`): one JSON object, no unknown or duplicate keys, strict
finite numbers. The result is a `ToolLoad` or a `Rejection` whose reason starts ``payload:`` and
names the field; nothing here raises.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, Strict

from armd.api.payload_types import Finite, Payload
from armd.api.payloads import _decode, _validate
from armd.link.messages import MAX_LOAD_COM_M, MAX_LOAD_KG, Rejection, ToolLoad
from kinematics import Inertial
from kinematics.errors import InertialError

__all__ = ["load_json", "parse_load"]

_Mass = Annotated[float, Strict(), Field(ge=0.0, le=MAX_LOAD_KG, allow_inf_nan=False)]
_Com = Annotated[float, Strict(), Field(ge=-MAX_LOAD_COM_M, le=MAX_LOAD_COM_M, allow_inf_nan=False)]


class _LoadModel(Payload):
    mass: _Mass
    com: tuple[_Com, _Com, _Com] = (0.0, 0.0, 0.0)
    inertia: tuple[Finite, Finite, Finite, Finite, Finite, Finite] = (0.0,) * 6


def _rejected(reason: str) -> Rejection:
    return Rejection(None, f"payload: {reason}")


def parse_load(payload: bytes) -> ToolLoad | Rejection:
    """A ``payload`` message as a `ToolLoad`, or the `Rejection` saying why not."""
    document = _decode(payload)
    if isinstance(document, Rejection):
        return _rejected(document.reason)
    model = _validate(_LoadModel, document, None)
    if isinstance(model, Rejection):
        return _rejected(model.reason)
    try:
        Inertial(model.mass, model.com, model.inertia)
    except InertialError as exc:
        return _rejected(str(exc))
    return ToolLoad(model.mass, model.com, model.inertia)


def load_json(load: ToolLoad) -> dict[str, object]:
    """A ``payload`` message, as a client sends it (`parse_load` reads it back)."""
    return {"mass": load.mass, "com": list(load.com), "inertia": list(load.inertia)}
