"""The SO-101 in physics (config/so101_physics.yaml, the `mujoco` driver) struck against the block
the collision check does not know, through MQTT: the goal from `before_block` to `past_block`
ends in the fault ``contact`` soon after the strike, the arm at rest and the fault latched until
a reset.

The strike is the first physics step in which the arm touches the block: the driver logs it
(``mujoco: <link> touches block at <stamp> s``, its clock, CLOCK_MONOTONIC, as the control
process's). The fault is latched by the loop at a tick, which logs it (``fault contact: ...``) with
the time of its log record (CLOCK_REALTIME, to the millisecond), turned into CLOCK_MONOTONIC here
by the offset between the two clocks. Both lines come from the control process, which runs at
real-time priority, like its physics thread: the measured delay is the arm's, not the test's.

Why the delay holds with both cores busy (the bound 0.2 s is the product's): the physics and the
loop run at real-time priority, so the strike, the loop's readings and its samples keep their
times; the daemon's contact detection (normal priority) judges each sample by the time its
readings were taken, so a late daemon finds the contact at the same simulated moment and latches
it later by its own lateness only. Strike to detection is the observer's lag (its residual, time
constant 1/K = 20 ms, reaches the 0.8 N·m threshold in ~7 ms under the servo's push) plus the
threshold's 20 ms, and a tick to latch it: 31-43 ms measured, idle or with both cores busy. The
daemon may be late by ~90 ms more before the loop's own following-error check (0.05 rad + 0.1 s
× the commanded 1.5 rad/s) would latch ``following_error`` first (127 ms after the strike,
measured with contact detection off), far beyond what a waking process waits for a core when
both are busy (the kernel's time slices are a few ms; the delays above, taken with two busy
loops beside the other tests, show the daemon late by 12 ms at most): the test requires
``contact``, unless a `StallProbe` in the test's own process (normal priority, as the daemon)
saw the machine hold it back 50 ms or more during the sweep (more than half that slack: a
shared machine under heavier load, or a virtual machine's stalled vCPU); then the loop's
following-error check may stop the arm first, and either fault must still come within 0.2 s.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.broker import MosquittoBroker
from tests.realtime import StallProbe
from tests.system.helpers import ROOT, START_S, ArmdProcess
from tests.system.probe import WAIT_S, MqttProbe

CONFIG = ROOT / "config" / "so101_physics.yaml"
ARM = "so101-physics"
BOUND_S = 0.2  # strike to fault, the product's bound
DAEMON_SLACK_S = 0.05  # s: how late the daemon may be before following_error may come first
REST_VELOCITY = 0.01  # rad/s: at rest (the servos hold within friction / kp)

TOUCH = re.compile(r"mujoco: (\S+) touches block at ([0-9.]+) s")
FAULT = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ERROR \S+: fault (\w+): (.*)$", re.M)


@pytest.fixture
def physics_arm(tmp_path: Path) -> Iterator[tuple[MqttProbe, ArmdProcess]]:
    """The daemon on config/so101_physics.yaml (its paths made absolute) and a probe."""
    broker = MosquittoBroker(tmp_path / "mosquitto")
    broker.start()
    config = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    config["model"] = str((CONFIG.parent / config["model"]).resolve())
    params = config["drivers"]["physics"]["params"]
    params["urdf"] = str((ROOT / "config" / params["urdf"]).resolve())
    config["mqtt"]["port"] = broker.port
    config["lock_file"] = str(tmp_path / "armd.lock")
    path = tmp_path / "so101_physics.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    daemon = ArmdProcess(path, tmp_path / "armd.out").start()
    probe = MqttProbe(broker.host, broker.port, arm=ARM)
    try:
        probe.wait_for(
            lambda: probe.availability() == "online" and bool(probe.on("state")),
            START_S,
            f"the physics daemon online\n{daemon.output()}",
        )
        probe.wait_mode("holding")
        yield probe, daemon
    finally:
        probe.close()
        daemon.stop()
        broker.stop()


def monotonic_of(asctime: str, realtime_minus_monotonic: float) -> float:
    """A log record's time (its ``asctime``: local time, ms) on CLOCK_MONOTONIC."""
    wall = datetime.strptime(asctime, "%Y-%m-%d %H:%M:%S,%f").timestamp()
    return wall - realtime_minus_monotonic


def strike_and_fault(daemon: ArmdProcess, offset: float) -> tuple[str, float, str, float, str]:
    """(the link that struck, its stamp; the fault's code, its latch time, its message), from
    the daemon's output (its writer thread, at normal priority, may lag the events)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        output = daemon.output()
        touch, fault = TOUCH.search(output), FAULT.search(output)
        if (touch and fault) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert touch is not None, f"no touch of the block logged:\n{output}"
    assert fault is not None, f"no fault logged:\n{output}"
    latched = monotonic_of(fault.group(1), offset)
    return touch.group(1), float(touch.group(2)), fault.group(2), latched, fault.group(3)


def at_rest(state: dict[str, Any]) -> bool:
    return bool(max(abs(j["velocity"]) for j in state["joints"].values()) < REST_VELOCITY)


def test_the_sweep_into_the_unknown_block_ends_in_a_contact_fault_soon_after_the_strike(
    physics_arm: tuple[MqttProbe, ArmdProcess],
) -> None:
    probe, daemon = physics_arm
    offset = time.time() - time.monotonic()
    ready = probe.run_goal({"id": "b", "type": "named", "name": "before_block"})
    assert ready["status"] == "succeeded", ready

    mark = probe.mark()
    with StallProbe(late_s=DAEMON_SLACK_S) as stalls:  # a normal-priority process's lateness
        final = probe.run_goal({"id": "s", "type": "named", "name": "past_block", "speed": 0.5})
    assert final["status"] == "aborted", final
    fault = probe.wait_for(lambda: [m.json() for m in probe.on("fault", mark) if m.payload])[0]
    link, strike, code, latched, message = strike_and_fault(daemon, offset)
    delay = latched - strike
    print(f"{link} struck the block; fault {code} {delay * 1e3:.0f} ms later: {message}")
    assert link in ("gripper_link", "moving_jaw_so101_v1_link", "wrist_link"), link
    assert fault["code"] == code
    # contact, unless the machine held normal-priority processes (the daemon) back long enough
    # for the loop's own following-error check to come first (module docstring)
    expected = {"contact"} if stalls.stalls == 0 else {"contact", "following_error"}
    assert code in expected, (fault, stalls.stalls, stalls.worst_s)
    # the record's time is truncated to the millisecond: the fault may be up to 1 ms later
    assert delay > 0.0, (delay, message)
    assert delay + 0.001 <= BOUND_S, (delay, message)

    rest = probe.wait_state(lambda s: s["mode"] == "fault" and at_rest(s), what="rest in fault")
    assert rest["mode"] == "fault"
    time.sleep(0.5)
    assert probe.latest_state()["mode"] == "fault"
    assert [m for m in probe.on("fault", mark) if not m.payload] == []  # never cleared

    cleared = probe.mark()
    probe.publish("estop", '{"reset": true}')
    probe.wait_for(lambda: any(not m.payload for m in probe.on("fault", cleared)), what="cleared")
    back = probe.run_goal({"id": "back", "type": "named", "name": "before_block"})
    assert back["status"] == "succeeded", back
