"""A pick on the real daemon through MQTT, one goal sequence on three SO-101s: the
physics-simulated arm of config/so101_physics.yaml (the `mujoco` driver, a 3 cm cube of 50 g on the
table), the arm of config/so101.yaml on its simulated STS3215 chain (``armd sim-device feetech``,
no object), and the same config on the `sim` driver (first-order motors, no object).

over_cube → grasp_cube → close the gripper → lift back to over_cube → 3 cm higher (a pose goal)
→ open. The three arms answer every goal with the same statuses; where they legitimately differ
(`DIFFERENCES`) is only what an object between the jaws changes:

- ``held``: the physics arm's close succeeds ``held: gripper effort ... at ...`` (its effort
  reached the grip on the cube); the chain's and the sim's close on nothing and succeed without
  a reason;
- where the gripper ends: on the cube's faces (the jaws held ~0.4 rad open by it, its command
  inside the cube, its effort the squeeze), or closed (0 rad, no squeeze).

One difference is the configs', not the arms': config/so101.yaml checks its collision capsules
against the table (5 mm margin), and its gripper capsule, a hull around the jaws, is 11.7 mm
inside that margin at grasp_cube (``rejected``: ``collision: gripper_link with table``), where
the physics arm's jaws clear the table by 3 mm; config/so101_physics.yaml has no collision
check (its block is the one the check is not told about). The other two run without it here.

The cube is read through the gripper as a dashboard sees it (``state``): after the lift the jaws
are still held open by something, still squeezing it at the grip's effort, 8 cm higher. The
physics efforts are N·m at the joints (the driver's unit), the chain's a servo's load fraction,
the sim's its motor model's."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.armd.cli.test_sim_device_cmd import Spawn, read_line, spawn
from tests.broker import MosquittoBroker
from tests.realtime import PtyStallProbe
from tests.system.helpers import ROOT, SIM_WATCHDOG_S, START_S, ArmdProcess
from tests.system.probe import (
    MqttProbe,
    at_rest,
    contract_violations,
    joint_positions,
    run_goal_through_stalls,
)

__all__ = ["spawn"]  # the fixture

CONFIGS = ROOT / "config"
PHYSICS = CONFIGS / "so101_physics.yaml"
# The goals, in order: (id, payload) as a dashboard sends them.
PICK = (
    ("over", {"type": "named", "name": "over_cube"}),
    ("grasp", {"type": "named", "name": "grasp_cube"}),
    ("close", {"type": "gripper", "position": "close"}),
    ("lift", {"type": "named", "name": "over_cube"}),
    ("open", {"type": "gripper", "position": "open"}),
)
HELD = r"held: gripper effort -?\d+\.\d{3} at \d+\.\d{4}"
# Where the two arms legitimately differ, by goal id: the reason of its final status.
DIFFERENCES = {"close": {"physics": HELD, "chain": None, "sim": None}}
OPEN = 1.5  # rad: the configs' gripper `open`
LIFT_M = 0.07  # m: over_cube's TCP is 8 cm above grasp_cube's (the poses' comment)
RAISE_M = 0.03  # m: then up again, a pose goal holding the cube
STALE_HOLD_S = 0.05  # config/so101.yaml's safety.stale_hold_s (the default)
PERIOD_S = 1 / 100  # its loop_hz
GRIP = 0.3 * 1.7  # N·m: the physics config's gripper effort × max_effort
STALL = 1.2  # N·m: the physics config's gripper stall effort


def _write(config: dict[str, Any], directory: Path, port: int) -> Path:
    config["model"] = str((CONFIGS / config["model"]).resolve())
    if "collision" in config:
        geometry = config["collision"]["geometry"]
        config["collision"]["geometry"] = str((CONFIGS / geometry).resolve())
    config["mqtt"]["port"] = port
    config["lock_file"] = str(directory / "armd.lock")
    path = directory / "arm.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def _physics_config(directory: Path, port: int, spawn: Spawn) -> Path:
    config = yaml.safe_load(PHYSICS.read_text(encoding="utf-8"))
    params = config["drivers"]["physics"]["params"]
    params["urdf"] = str(ROOT / "config" / params["urdf"])
    return _write(config, directory, port)


def _chain_config(directory: Path, port: int, spawn: Spawn) -> Path:
    """config/so101.yaml on a simulated servo chain, with the physics config's poses."""
    link = directory / "so101-bus"
    chain = spawn("sim-device", "feetech", "--ids", *"123456", "--link", str(link))
    read_line(chain)  # the pty: the chain is up
    config = yaml.safe_load((CONFIGS / "so101.yaml").read_text(encoding="utf-8"))
    config["drivers"]["bus"]["params"]["port"] = str(link)
    physics = yaml.safe_load(PHYSICS.read_text(encoding="utf-8"))
    config["poses"] = physics["poses"]
    del config["collision"]  # as the physics config: its capsules would refuse grasp_cube
    return _write(config, directory, port)


def _sim_config(directory: Path, port: int, spawn: Spawn) -> Path:
    """config/so101.yaml on the `sim` driver (first-order motors, in the control process), with
    the physics config's poses: the driver the physics one stands beside."""
    config = yaml.safe_load((CONFIGS / "so101.yaml").read_text(encoding="utf-8"))
    devices = {name: {"watchdog_s": SIM_WATCHDOG_S} for name in config["joints"]}
    config["drivers"] = {"bus": {"type": "sim", "params": {"devices": devices}}}
    config["poses"] = yaml.safe_load(PHYSICS.read_text(encoding="utf-8"))["poses"]
    del config["collision"]  # as the physics config: its capsules would refuse grasp_cube
    return _write(config, directory, port)


ARMS = {"physics": _physics_config, "chain": _chain_config, "sim": _sim_config}


@pytest.fixture(params=ARMS, ids=ARMS)
def arm(request: pytest.FixtureRequest, spawn: Spawn, tmp_path: Path) -> Iterator[MqttProbe]:
    """The daemon on one of the two arms, holding, and a probe on its topics."""
    broker = MosquittoBroker(tmp_path / "mosquitto")
    broker.start()
    path = ARMS[request.param](tmp_path, broker.port, spawn)
    name = yaml.safe_load(path.read_text(encoding="utf-8"))["name"]
    daemon = ArmdProcess(path, tmp_path / "armd.out").start()
    probe = MqttProbe(broker.host, broker.port, arm=name)
    try:
        try:
            probe.wait_for(
                lambda: probe.availability() == "online" and bool(probe.on("state")),
                START_S,
                "the daemon online",
            )
            probe.wait_mode("holding")
        except AssertionError as exc:  # the daemon's log as it is now, not as it was at start
            raise AssertionError(f"{exc}\n{daemon.output()}") from None
        yield probe
    finally:
        probe.close()
        daemon.stop()
        broker.stop()


@pytest.fixture
def pty_stalls() -> Iterator[PtyStallProbe]:
    """The kernel's pty path timed beside the test (stalls of 10 ms or more): the chain's
    servos answer through one, and a stall longer than the config's stale_hold_s holds the arm."""
    with PtyStallProbe(late_s=0.01, cpus=True) as probe:
        yield probe


def _run(probe: MqttProbe, goal: dict[str, Any], stalls: PtyStallProbe | None) -> dict[str, Any]:
    """The goal's final status (`run_goal_through_stalls`: `stalls` is the chain's pty path)."""
    return run_goal_through_stalls(probe, goal, stalls, hold_s=STALE_HOLD_S, period_s=PERIOD_S)


def _raise_tool(
    probe: MqttProbe, state: dict[str, Any], height: float, stalls: PtyStallProbe | None
) -> dict[str, Any]:
    """A pose goal (position only) `height` m above the tool's pose in `state` (the gripper
    left out: a held cube stays held); its final status. With the cube, the arm's joints sag
    under its weight within the config's pose tolerance."""
    x, y, z = state["tcp"]["position"]
    goal = {
        "id": "raise",
        "type": "pose",
        "position": [x, y, z + height],
    }
    final = _run(probe, goal, stalls)
    probe.wait_state(at_rest, what="the arm at rest after the raise")
    return final


def _gripper(state: dict[str, Any]) -> dict[str, float]:
    return dict(state["joints"]["gripper"])


def test_the_pick_succeeds_goal_for_goal_on_both_arms_and_the_physics_cube_comes_up(
    arm: MqttProbe, request: pytest.FixtureRequest, pty_stalls: PtyStallProbe
) -> None:
    which = request.node.callspec.params["arm"]
    probe = arm
    stalls = pty_stalls if which == "chain" else None
    tcp: dict[str, float] = {}
    for goal_id, goal in PICK:
        final = _run(probe, {"id": goal_id, **goal}, stalls)
        assert final["status"] == "succeeded", (goal_id, final, probe.summary())
        expected = DIFFERENCES.get(goal_id, {}).get(which)
        if expected is None:
            assert "reason" not in final, (goal_id, final)
        else:
            assert re.fullmatch(expected, final["reason"]), final
        state = probe.wait_state(at_rest, what=f"the arm at rest after {goal_id}")
        tcp[goal_id] = state["tcp"]["position"][2]
        if goal_id == "lift":
            lifted = state
            raised = _raise_tool(probe, state, RAISE_M, stalls)
            assert raised["status"] == "succeeded", (raised, probe.summary())
    assert tcp["lift"] - tcp["grasp"] > LIFT_M
    gripper = _gripper(lifted)
    if which == "physics":
        # The jaws held open by something, 8 cm up, the command inside it and the servo still
        # squeezing (a dropped cube lets the soft servo close onto its command, effort ~0):
        # the cube came up. Its squeeze is kp × (jaw − grip), about the grip's effort, below
        # the stall threshold (the grip's command is where the effort reached the grip).
        assert 0.3 < gripper["position"] < 0.5, lifted  # the cube's width between the jaws
        assert gripper["position"] - gripper["command"] > 0.03, lifted
        assert GRIP / 2 <= abs(gripper["effort"]) < STALL, lifted
    else:
        assert gripper["position"] == pytest.approx(0.0, abs=0.01), lifted  # closed on nothing
    opened = probe.latest_state()
    assert _gripper(opened)["position"] == pytest.approx(OPEN, abs=0.01)
    assert joint_positions(opened)["gripper"] == pytest.approx(OPEN, abs=0.01)
    assert contract_violations([m.json() for m in probe.on("goal/status")]) == []
