"""The MQTT contract of an arm, in one place: its topics with their direction, QoS and retain flag,
the bounds every inbound payload is held to, and the JSON form of every value that crosses the
broker (docs/mqtt.md describes it for clients).

The bridge (`armd.api.bridge`), the parser of inbound payloads (`armd.api.payloads`), the
command-line
client (``armd goal``, ``estop``, ``watch``) and the tests all take it from here. It imports
neither pydantic nor aiomqtt, so that a client that only publishes starts fast.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from armd.link.messages import (
    MAX_MOTION_DURATION_S,
    Fault,
    Goal,
    GripperGoal,
    JointsGoal,
    KeypointsGoal,
    NamedGoal,
    PoseGoal,
    StatusUpdate,
    StopGoal,
    StreamEnd,
    StreamJoints,
    StreamMessage,
    StreamPose,
    Telemetry,
    TrajectoryGoal,
)

__all__ = [
    "AVAILABILITY",
    "DEFAULT_STREAM_ID",
    "ESTOP",
    "FAULT",
    "GOAL",
    "GOAL_STATUS",
    "GOAL_TYPES",
    "MAX_CARTESIAN_M",
    "MAX_ID_LENGTH",
    "MAX_JOINT_POSITION",
    "MAX_MOTION_DURATION_S",
    "MAX_PAYLOAD_BYTES",
    "MAX_SEQ",
    "MAX_TRAJECTORY_POINTS",
    "MIN_POINT_INTERVAL_S",
    "MIN_SPEED",
    "MODEL",
    "OFFLINE",
    "ONLINE",
    "PAYLOAD",
    "STATE",
    "STREAM",
    "STREAM_TYPES",
    "TOPICS",
    "Topic",
    "Topics",
    "encode",
    "fault_json",
    "goal_json",
    "status_json",
    "stream_json",
    "telemetry_json",
]


@dataclass(frozen=True, slots=True)
class Topic:
    """One topic of an arm, under ``armd/<name>/``: `inbound` for what clients send."""

    suffix: str
    inbound: bool
    qos: int
    retain: bool


AVAILABILITY = Topic("availability", inbound=False, qos=1, retain=True)  # also the Last Will
STATE = Topic("state", inbound=False, qos=0, retain=False)  # the latest wins, never queued
GOAL = Topic("goal", inbound=True, qos=1, retain=False)
GOAL_STATUS = Topic("goal/status", inbound=False, qos=1, retain=False)
ESTOP = Topic("estop", inbound=True, qos=1, retain=False)
FAULT = Topic("fault", inbound=False, qos=1, retain=True)  # empty payload: cleared
STREAM = Topic("stream", inbound=True, qos=0, retain=False)  # loop-rate targets: the newest wins
MODEL = Topic("model", inbound=False, qos=1, retain=True)  # the arm's description, on connecting
PAYLOAD = Topic("payload", inbound=True, qos=1, retain=False)  # the load at the tool link
TOPICS = (AVAILABILITY, STATE, GOAL, GOAL_STATUS, ESTOP, FAULT, STREAM, MODEL, PAYLOAD)

ONLINE = b"online"
OFFLINE = b"offline"

# Bounds of inbound payloads: beyond one, a payload is rejected with a reason naming it.
MAX_PAYLOAD_BYTES = 64 * 1024
MAX_ID_LENGTH = 128
MIN_SPEED = 0.01  # slower: hours-long moves, and a jerk limit (× speed³) ruckig cannot plan with
MAX_CARTESIAN_M = 100.0  # m: far beyond any arm's reach, far below any float's overflow
MAX_JOINT_POSITION = 1000.0  # rad or m
# A trajectory goal's points: the 64 KiB payload holds about 800 points of 6 joints at 5 decimals
# (450 with velocities); planning 1000 points takes ~30 ms (`armd.motion.timed_trajectory`, before
# the
# goal is accepted, in the planning thread) and sampling them in a tick as long as a linear path.
# `armd replay` simplifies longer recordings to fit and reports the error that costs.
MAX_TRAJECTORY_POINTS = 1000
MIN_POINT_INTERVAL_S = 0.001  # s between points: one tick at 1 kHz; closer ones add nothing
GOAL_TYPES = ("pose", "joints", "keypoints", "gripper", "named", "trajectory", "stop")
STREAM_TYPES = ("joints", "pose", "twist", "end")
MAX_SEQ = 2**53  # a stream's sequence numbers: integers any JSON client represents exactly
DEFAULT_STREAM_ID = "stream"


@dataclass(frozen=True, slots=True)
class Topics:
    """The topic names of one arm."""

    availability: str
    state: str
    goal: str
    goal_status: str
    estop: str
    fault: str
    stream: str
    model: str
    payload: str

    @classmethod
    def for_arm(cls, arm_name: str) -> Topics:
        base = f"armd/{arm_name}/"
        return cls(*(base + topic.suffix for topic in TOPICS))

    def name(self, topic: Topic) -> str:
        return str(getattr(self, topic.suffix.replace("/", "_")))


# -- JSON ------------------------------------------------------------------------------------------


def encode(document: dict[str, Any]) -> bytes:
    """Compact UTF-8 JSON; NaN and infinity are refused (`ValueError`): they are not JSON."""
    return json.dumps(document, separators=(",", ":"), allow_nan=False).encode()


def status_json(update: StatusUpdate) -> dict[str, Any]:
    """A ``goal/status`` payload."""
    document: dict[str, Any] = {"id": update.goal_id, "status": update.status.value}
    if update.reason is not None:
        document["reason"] = update.reason
    return document


def fault_json(fault: Fault) -> dict[str, Any]:
    """A ``fault`` payload (a cleared fault is the empty payload)."""
    document: dict[str, Any] = {"code": fault.code, "message": fault.message}
    if fault.joint is not None:
        document["joint"] = fault.joint
    return document


def telemetry_json(telemetry: Telemetry) -> dict[str, Any]:
    """A ``state`` payload (``uptime`` when known; ``collision_hold`` only while a stream holds
    before a collision)."""
    uptime = {} if telemetry.uptime is None else {"uptime": telemetry.uptime}
    commands = telemetry.commands or {}
    document: dict[str, Any] = {
        "t": telemetry.t,
        **uptime,
        "mode": telemetry.mode.value,
        "missed_ticks": telemetry.missed_ticks,
        "joints": {  # "effort", "command" only where there is one (JSON has no NaN)
            name: {"position": p, "velocity": v}
            | ({"effort": e} if math.isfinite(e) else {})
            | ({"command": c} if math.isfinite(c := commands.get(name, math.nan)) else {})
            for name, (p, v, e) in telemetry.joints.items()
        },
        "tcp": {
            "link": telemetry.tcp_link,
            "position": list(telemetry.tcp_position),
            "orientation": list(telemetry.tcp_orientation),
        },
    }
    if telemetry.collision_hold is not None:
        a, b, distance = telemetry.collision_hold
        document["collision_hold"] = {"pair": [a, b], "distance": distance}
    return document


def goal_json(goal: Goal) -> dict[str, Any]:
    """A ``goal`` payload, as a client sends it (`armd.api.payloads.parse_goal` reads it back)."""
    document: dict[str, Any] = {"id": goal.goal_id}
    if isinstance(goal, StopGoal):
        if goal.goal_id is None:
            del document["id"]
        return document | {"type": "stop"}
    if isinstance(goal, PoseGoal):
        document |= {"type": "pose", "position": list(goal.position)}
        if goal.orientation is not None:
            document["orientation"] = list(goal.orientation)
        if goal.link is not None:
            document["link"] = goal.link
        document["motion"] = goal.motion
    elif isinstance(goal, JointsGoal):
        document |= {"type": "joints", "positions": dict(goal.positions)}
    elif isinstance(goal, GripperGoal):
        document |= {"type": "gripper", "position": goal.opening}
        if goal.effort is not None:
            document["effort"] = goal.effort
    elif isinstance(goal, NamedGoal):
        document |= {"type": "named", "name": goal.name}
    elif isinstance(goal, KeypointsGoal):
        points = {link: list(p) for link, p in zip(goal.links, goal.points, strict=True)}
        document |= {"type": "keypoints", "points": points}
    elif isinstance(goal, TrajectoryGoal):
        document |= {"type": "trajectory", "joints": list(goal.joints), "points": _points(goal)}
    document["speed"] = goal.speed
    return document


def _points(goal: TrajectoryGoal) -> list[dict[str, Any]]:
    points: list[dict[str, Any]] = [
        {"t": t, "positions": list(p)} for t, p in zip(goal.times, goal.positions, strict=True)
    ]
    if goal.velocities is not None:
        for point, v in zip(points, goal.velocities, strict=True):
            point["velocities"] = list(v)
    return points


def stream_json(message: StreamMessage) -> dict[str, Any]:
    """A ``stream`` payload, as a client sends it (`armd.api.stream_payloads.parse_stream` reads it
    back)."""
    document: dict[str, Any] = {"id": message.stream_id, "seq": message.seq}
    if isinstance(message, StreamEnd):
        return document | {"type": "end"}
    if isinstance(message, StreamJoints):
        document |= {"type": "joints", "positions": dict(message.positions)}
        if message.velocities:
            document["velocities"] = dict(message.velocities)
        return document
    if isinstance(message, StreamPose):
        document |= {"type": "pose", "position": list(message.position), "link": message.link}
        if message.orientation is not None:
            document["orientation"] = list(message.orientation)
        return document
    return document | {
        "type": "twist",
        "linear": list(message.linear),
        "angular": list(message.angular),
        "frame": message.frame,
    }
