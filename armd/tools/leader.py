"""Leader–follower teleoperation: what ``armd leader`` streams to a follower for each reading of
the leader arm (docs/teleoperation.md).

`leader_setup` checks a config's ``leader:`` section against the leader's model and drivers and,
when it names one, the follower's model (every problem at once, at its line, like the rest of the
file). `StreamMapper` turns the leader's measured joints (q order) into the bodies of ``stream``
messages (docs/mqtt.md; the publisher adds ``seq`` and ``id``):

- ``joint``: each mapped joint through ``offset + sign × scale × leader``, one ``joints`` message;
- ``cartesian``: the leader's FK of its link, scaled and offset, as a ``pose`` message (plus a
  ``joints`` message for the mapped joints, e.g. the gripper, which a pose does not carry);
- ``shape``: the positions of the leader's links mapped onto the follower's chain
  (`kinematics.mapping.map_chain`, as a keypoints goal is) seeded from the previous target — the
  follower's measured state at first — one ``joints`` message with the mapped joints beside.

With the follower's model known, joint targets are kept within its limits here already (the
follower clamps them too); the follower's IK and limiter are its own.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from armd.config.checks import Problems, resolve_path
from armd.config.leader_schema import LeaderConfig
from armd.config.load import ArmSetup
from armd.config.yaml_doc import read_yaml
from armd.planning.planner import KEYPOINTS_TOLERANCE
from armd.ratelimit import RateLimiter
from kinematics import KinematicsError, KinematicTree, load_tree
from kinematics.mapping import MappingOptions, map_chain

__all__ = ["JointLink", "LeaderSetup", "StreamMapper", "Velocities", "leader_setup"]

log = logging.getLogger(__name__)
Array = NDArray[np.float64]
Body = dict[str, Any]  # a stream message without its seq and id

_SHAPE_OPTIONS = MappingOptions(tolerance=KEYPOINTS_TOLERANCE)
VELOCITY_TIME_CONSTANT_S = 0.02
"""The low-pass of the estimated target velocities, s."""


@dataclass(frozen=True, slots=True)
class JointLink:
    """One leader joint (its index in the leader's q) driving one follower joint, whose target
    is kept within [lower, upper] (infinite without the follower's model)."""

    leader: int
    follower: str
    gain: float  # sign × scale
    offset: float
    lower: float = -math.inf
    upper: float = math.inf

    def target(self, q: Array) -> float:
        return min(max(self.offset + self.gain * float(q[self.leader]), self.lower), self.upper)


@dataclass(frozen=True, eq=False)
class LeaderSetup:
    """A leader config, checked and resolved, streaming to the follower `follower`."""

    arm: ArmSetup
    follower: str
    config: LeaderConfig
    rate_hz: float
    follower_tree: KinematicTree | None
    joints: tuple[JointLink, ...]
    cartesian_link: str  # the leader's link for `cartesian`
    shape_leader: tuple[str, ...] = ()  # `shape`: the leader's links, root first
    shape_follower: tuple[str, ...] = ()  # ... and the follower's they match

    @property
    def mapping(self) -> str:
        return self.config.mapping


def leader_setup(arm: ArmSetup, follower: str, rate_hz: float | None = None) -> LeaderSetup:
    """Check `arm`'s ``leader:`` section; raises `ConfigError` listing every problem."""
    _, lines = read_yaml(arm.path)
    problems = Problems(arm.path, lines)
    config = arm.config.leader
    if config is None:
        problems.add((), "no leader: section (how this arm maps onto its follower)")
        raise problems.error()
    tree = _follower_tree(arm, config, problems)
    joints = _joint_links(arm, config, tree, problems)
    link = config.cartesian.link or arm.tool_link
    if link not in arm.tree.link_names:
        problems.add(("leader", "cartesian", "link"), _unknown("link", link, arm.tree))
    follower_link = config.cartesian.follower_link
    if tree is not None and follower_link is not None and follower_link not in tree.link_names:
        problems.add(
            ("leader", "cartesian", "follower_link"), _unknown("link", follower_link, tree)
        )
    shape = _shape_links(arm, config, tree, problems)
    if problems.items:
        raise problems.error()
    return LeaderSetup(
        arm, follower, config, rate_hz or config.rate_hz or arm.loop_hz, tree, joints, link, *shape
    )


def _unknown(kind: str, name: str, tree: KinematicTree) -> str:
    known = tree.link_names if kind == "link" else tree.joint_names
    return f"unknown {kind} {name!r} of {tree.name or 'the model'}; {kind}s: {', '.join(known)}"


def _follower_tree(arm: ArmSetup, config: LeaderConfig, problems: Problems) -> KinematicTree | None:
    if config.follower_model is None:
        return None
    path = resolve_path(arm.path.parent, config.follower_model)
    try:
        return load_tree(path)
    except (KinematicsError, OSError) as exc:
        problems.add(("leader", "follower_model"), f"{path}: {exc}")
        return None


def _joint_links(
    arm: ArmSetup, config: LeaderConfig, tree: KinematicTree | None, problems: Problems
) -> tuple[JointLink, ...]:
    links, driven = [], list(arm.joints)
    seen: dict[str, str] = {}
    for name, mapped in config.joints.items():
        loc = ("leader", "joints", name)
        follower = mapped.follower or name
        if name not in driven:
            problems.add(loc, f"not a driven joint of the leader; joints: {', '.join(driven)}")
            continue
        if follower in seen:
            problems.add(loc, f"follower joint {follower!r} is driven by {seen[follower]!r} too")
            continue
        seen[follower] = name
        lower, upper = -math.inf, math.inf
        if tree is not None:
            if follower not in tree.joint_names:
                problems.add(loc, _unknown("joint", follower, tree))
                continue
            lower, upper = tree.limits[follower].lower, tree.limits[follower].upper
        index = arm.tree.joint_names.index(name)
        gain = mapped.sign * mapped.scale
        links.append(JointLink(index, follower, gain, mapped.offset, lower, upper))
    return tuple(links)


def _shape_links(
    arm: ArmSetup, config: LeaderConfig, tree: KinematicTree | None, problems: Problems
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    if config.shape is None or tree is None:
        return (), ()
    loc = ("leader", "shape", "links")
    ours, theirs = tuple(config.shape.links), tuple(config.shape.links.values())
    bad = [f"leader {_unknown('link', n, arm.tree)}" for n in ours if n not in arm.tree.link_names]
    bad += [f"follower {_unknown('link', n, tree)}" for n in theirs if n not in tree.link_names]
    if not bad:
        try:  # the follower's links must lie on one chain, root first: map_chain says why not
            seed = np.clip(np.zeros(tree.dof), tree.limits.lower, tree.limits.upper)
            points = [tree.fk(seed, link).translation for link in theirs]
            map_chain(tree, theirs, points, seed, options=_SHAPE_OPTIONS)
        except KinematicsError as exc:
            bad.append(f"follower links: {exc}")
    for message in bad:
        problems.add(loc, message)
    return ours, theirs


class Velocities:
    """The velocities of the joint targets, estimated from consecutive readings: the follower
    extrapolates a target at its velocity until the next one, instead of planning to stop at
    each (a lag of ~100 ms on a moving leader without them). A difference quotient, low-passed
    over `VELOCITY_TIME_CONSTANT_S` (one encoder count per period would be 0.1 rad/s of noise
    at 250 Hz), kept within the follower's velocity limits when its model is known."""

    def __init__(self, limits: Mapping[str, float]) -> None:
        self.limits = limits
        self._last: tuple[float, dict[str, float]] | None = None
        self._velocity: dict[str, float] = {}

    def update(self, t: float, positions: Mapping[str, float]) -> dict[str, float]:
        """The velocities (rad/s, m/s) of `positions` read at `t` (s, monotonic)."""
        last, self._last = self._last, (t, dict(positions))
        if last is None or t <= last[0]:
            return {name: self._velocity.get(name, 0.0) for name in positions}
        dt = t - last[0]
        alpha = dt / (VELOCITY_TIME_CONSTANT_S + dt)
        for name, p in positions.items():
            before = last[1].get(name)
            raw = 0.0 if before is None else (p - before) / dt
            v = self._velocity.get(name, 0.0)
            v += alpha * (raw - v)
            bound = self.limits.get(name, math.inf)
            self._velocity[name] = min(max(v, -bound), bound)
        return {name: self._velocity[name] for name in positions}


class StreamMapper:
    """The stream message bodies for each reading of the leader (see the module docstring)."""

    def __init__(self, setup: LeaderSetup) -> None:
        self.setup = setup
        self._seed: Array | None = None  # `shape`: the follower's previous target (its q)
        self._warnings = RateLimiter(burst=1, interval_s=5.0)
        tree = setup.follower_tree
        limits = dict(zip(tree.joint_names, tree.limits.velocity, strict=True)) if tree else {}
        self._velocities = Velocities({k: float(v) for k, v in limits.items()})

    @property
    def needs_seed(self) -> bool:
        """`shape` starts from the follower's state: `seed` it before the first `bodies`."""
        return self.setup.mapping == "shape" and self._seed is None

    def seed(self, follower_positions: Mapping[str, float]) -> None:
        """Start the shape mapping from the follower's joint positions (its ``state``)."""
        tree = self.setup.follower_tree
        assert tree is not None
        known = {k: v for k, v in follower_positions.items() if k in tree.joint_names}
        self._seed = np.clip(tree.q_from_mapping(known), tree.limits.lower, tree.limits.upper)

    def bodies(self, q: Array, t: float) -> list[Body]:
        """The messages for the leader at `q` (its q order), read at `t` (s, monotonic); none
        when nothing can be sent."""
        mapped = {link.follower: link.target(q) for link in self.setup.joints}
        if self.setup.mapping == "joint":
            return [self._joints(mapped, t)]
        if self.setup.mapping == "cartesian":
            return [self._pose(q)] + ([self._joints(mapped, t)] if mapped else [])
        shape = self._shape(q)
        return [] if shape is None else [self._joints(shape | mapped, t)]

    def _joints(self, positions: Mapping[str, float], t: float) -> Body:
        body: Body = {"type": "joints", "positions": dict(positions)}
        if self.setup.config.velocities:
            body["velocities"] = self._velocities.update(t, positions)
        return body

    def _pose(self, q: Array) -> Body:
        c = self.setup.config.cartesian
        pose = self.setup.arm.tree.fk(q, self.setup.cartesian_link)
        position = np.asarray(c.offset) + c.scale * pose.translation
        body: Body = {"type": "pose", "position": position.tolist()}
        if c.orientation:
            body["orientation"] = pose.quaternion.tolist()
        if c.follower_link is not None:
            body["link"] = c.follower_link
        return body

    def _shape(self, q: Array) -> dict[str, float] | None:
        setup, seed = self.setup, self._seed
        tree = setup.follower_tree
        assert tree is not None
        assert seed is not None, "seed the shape mapping first"
        points = [setup.arm.tree.fk(q, link).translation for link in setup.shape_leader]
        try:
            result = map_chain(tree, setup.shape_follower, points, seed, options=_SHAPE_OPTIONS)
        except KinematicsError as exc:  # e.g. two of the leader's links at one point
            self._warn("shape", f"leader shape not mapped, nothing sent: {exc}")
            return None
        if not result.success:
            self._warn("reach", f"shape beyond the follower's reach, sent: {result.message}")
        self._seed = np.where(result.determined, result.q, seed)
        names = tree.joint_names
        return {names[i]: float(self._seed[i]) for i in np.flatnonzero(result.determined)}

    def _warn(self, key: str, message: str) -> None:
        suppressed = self._warnings.allow(key)
        if suppressed is not None:
            more = f" ({suppressed} more since the last report)" if suppressed else ""
            log.warning("leader: %s%s", message, more)


def follower_joint_names(setup: LeaderSetup) -> Sequence[str]:
    """The follower joints the leader streams (for people: the start-up line)."""
    if setup.mapping == "shape" and setup.follower_tree is not None:
        return setup.follower_tree.joint_names
    return [link.follower for link in setup.joints]
