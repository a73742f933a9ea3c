"""The collision fuzz of test_collision_fuzz.py and test_collision_fuzz_reseeded.py: random
goals (joints, pose, linear pose, trajectory) and a few random streams against the real daemon on
the simulated UR5 standing on its table (config/sim.yaml), sent faster than they finish so that
most pre-empt a moving arm. No measured state may be in collision, checked with coal (an
independent implementation) on the shipped geometry; the share of refused goals whose path coal
finds clear is printed (the price of checking conservatively), not asserted.

Each module runs one seeded half on its own daemon, so that two workers share the fuzz."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from armd.config.load import ArmSetup
from tests.peers.coal_collision import CoalPeer
from tests.system.helpers import Rig
from tests.system.probe import contract_violations, joint_positions

STREAM_EVERY = 75  # goals between two streams


@dataclass
class Outcomes:
    """What the daemon answered first, per kind, and the refused joints goals (start, target)."""

    counts: dict[str, int] = field(default_factory=dict)
    refused_joints: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)


def random_goal(rng: np.random.Generator, setup: ArmSetup, k: int, q: np.ndarray) -> dict[str, Any]:
    names = setup.tree.joint_names
    lower = np.maximum(setup.tree.limits.lower, -3.0)
    upper = np.minimum(setup.tree.limits.upper, 3.0)
    kind = rng.choice(["joints", "joints", "pose", "linear", "trajectory"])
    goal_id = f"f{k}"
    if kind == "joints":
        count = int(rng.integers(1, 4))
        chosen = rng.choice(len(names), size=count, replace=False)
        positions = {
            names[i]: float(np.clip(q[i] + rng.normal(0.0, 0.9), lower[i], upper[i]))
            for i in chosen
        }
        return {"id": goal_id, "type": "joints", "positions": positions, "speed": 1.0}
    if kind in ("pose", "linear"):
        position = [
            float(rng.uniform(0.15, 0.65)),
            float(rng.uniform(-0.45, 0.45)),
            float(rng.uniform(-0.15, 0.55)),
        ]
        goal = {"id": goal_id, "type": "pose", "position": position}
        if kind == "linear":
            goal["motion"] = "linear"
        return goal
    points = []
    current = q.copy()
    for t in (0.0, 0.8, 1.6):
        current = np.clip(current + rng.normal(0.0, 0.4, size=len(names)), lower, upper)
        points.append({"t": t, "positions": current.tolist()})
    return {"id": goal_id, "type": "trajectory", "joints": list(names), "points": points}


def line_clear(
    peer: CoalPeer, pairs: list[tuple[str, str]], start: np.ndarray, end: np.ndarray, margin: float
) -> bool:
    """Whether coal finds the straight joint line from `start` to `end` clear of the margin."""
    for s in np.linspace(0.0, 1.0, 60):
        if peer.min_distance(pairs, start + s * (end - start))[0] < margin:
            return False
    return True


def send_goals(arm: Rig, setup: ArmSetup, seed: int, goals: int) -> Outcomes:
    """`goals` random goals, each sent 0-0.4 s after the previous one's first status, with a
    stream every `STREAM_EVERY` goals; then a stop."""
    rng = np.random.default_rng(seed)
    probe = arm.probe
    outcomes = Outcomes()
    for k in range(goals):
        q = setup.tree.q_from_mapping(joint_positions(probe.latest_state()))
        goal = random_goal(rng, setup, k, q)
        mark = probe.publish_goal(goal)
        first = probe.wait_status(goal["id"], since=mark, final=False)
        reason = first.get("reason") or ""
        key = "collision" if reason.startswith("collision:") else first["status"]
        outcomes.counts[key] = outcomes.counts.get(key, 0) + 1
        if key == "collision" and goal["type"] == "joints":
            target = setup.tree.q_from_mapping(goal["positions"], q)
            outcomes.refused_joints.append((q, target))
        time.sleep(float(rng.uniform(0.0, 0.4)))
        if k % STREAM_EVERY == STREAM_EVERY - 1:
            stream_walk(arm, setup, rng, f"s{k}")
    stop = {"id": "fuzz-stop", "type": "stop"}
    assert probe.run_goal(stop)["status"] == "succeeded"
    return outcomes


def check_no_collision(arm: Rig, setup: ArmSetup, seed: int, goals: int) -> None:
    """Run the fuzz (`send_goals`) and check every state measured meanwhile with coal, the
    faults and the statuses' contract."""
    model = setup.collision
    assert model is not None
    peer = CoalPeer(setup.tree, model.spec)
    pairs = list(model.pair_names)
    probe = arm.probe
    since = probe.mark()
    outcomes = send_goals(arm, setup, seed, goals)
    states = probe.states(since)
    closest, within, commanded_closest, lag = np.inf, 0, np.inf, 0.0
    for state in states:
        q = setup.tree.q_from_mapping(joint_positions(state))
        distance, pair = peer.min_distance(pairs, q)
        closest = min(closest, distance)
        within += distance < model.margin
        assert distance > 0.0, (pair, distance, state)
        commands = {name: j["command"] for name, j in state["joints"].items() if "command" in j}
        if len(commands) == len(q):
            c = setup.tree.q_from_mapping(commands)
            commanded_closest = min(commanded_closest, peer.min_distance(pairs, c)[0])
            lag = max(lag, float(np.max(np.abs(c - q))))
    missed = states[-1]["missed_ticks"] - states[0]["missed_ticks"] if states else 0
    print(
        f"\ncommanded closest {commanded_closest:.4f} m; largest |commanded - measured| "
        f"{lag:.4f} rad; missed ticks {missed}"
    )
    faults = [m.text for m in probe.on("fault", since) if m.text]
    refused = outcomes.refused_joints
    wrong = sum(line_clear(peer, pairs, s, e, model.margin) for s, e in refused)
    print(
        f"\ncollision fuzz (seed {seed}): {goals} goals {outcomes.counts}; {len(states)} states "
        f"checked with coal, closest {closest:.4f} m, {within} within the margin; refused joints "
        f"goals whose straight path coal finds clear: {wrong} of {len(refused)}"
        f" ({100.0 * wrong / max(len(refused), 1):.0f} %); faults: {faults}"
    )
    assert not [f for f in faults if json.loads(f)["code"] == "collision"], faults
    statuses = [m.json() for m in probe.on("goal/status", since)]
    assert not contract_violations(statuses), contract_violations(statuses)


def stream_walk(arm: Rig, setup: ArmSetup, rng: np.random.Generator, stream_id: str) -> None:
    """One second of joint targets at 100 Hz drifting from the measured state, then ``end``."""
    q = setup.tree.q_from_mapping(joint_positions(arm.probe.latest_state()))
    velocity = rng.normal(0.0, 0.8, size=q.shape[0])
    topic = arm.probe.prefix + "stream"
    seq = 0
    for _ in range(100):
        seq += 1
        q = np.clip(q + velocity * 0.01, setup.tree.limits.lower, setup.tree.limits.upper)
        positions = dict(zip(setup.tree.joint_names, q.tolist(), strict=True))
        message = {"id": stream_id, "seq": seq, "type": "joints", "positions": positions}
        arm.probe.client.publish(topic, json.dumps(message), qos=0)
        time.sleep(0.01)
    end = {"id": stream_id, "seq": seq + 1, "type": "end"}
    arm.probe.client.publish(topic, json.dumps(end), qos=0)
