"""The README's sim-device walk-through, end to end with real processes: ``armd sim-device odrive``
and ``armd sim-device dynamixel`` with their defaults, ``config/armd.example.yaml`` with only the
bus lines they print put in, the daemon on it, goals that move a joint of each driver at the
example's full joint speed, and a daemon restart on the same simulated devices. The suite's
other workers keep both cores busy meanwhile, and its loaded runs add `stress-ng --cpu 2`
(docs/performance.md).

What the test changes beyond the printed lines, and why: the broker is one it starts on a free
port, the lock file is in the test's folder, the model path is absolute (the control process runs
at its configured real-time priority and the simulated devices at tests/realtime.py's, as firmware
answers), and the multicast group is the test's own (other runs use the same port; each
udp_multicast bus hears its own group only, `drivers.can_bus.link.make_bus`). Nothing asserts
speed.
"""

from __future__ import annotations

import asyncio
import os
import select
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from drivers import DeviceCommand
from drivers.dynamixel.driver import DynamixelDriver
from drivers.feetech.driver import FeetechDriver
from drivers.serial_bus.link import PTY_REPLY_MARGIN_S
from tests.broker import MosquittoBroker
from tests.realtime import PtyStallProbe, with_sim_priority
from tests.system.helpers import ROOT, START_S, ArmdProcess, armd_command
from tests.system.probe import WAIT_S, MqttProbe, joint_positions, run_goal_through_stalls

EXAMPLE = ROOT / "config" / "armd.example.yaml"
ARM = "ur5-example"


@pytest.fixture
def spawn() -> Iterator[Any]:
    processes: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            armd_command(*with_sim_priority(args)), cwd=ROOT, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        processes.append(process)
        return process

    yield start
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            process.communicate(timeout=10.0)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()


def printed_config(process: subprocess.Popen[str], skip_first: bool = False) -> dict[str, Any]:
    """The config lines a sim-device prints once it serves (up to its last comment line)."""
    assert process.stdout is not None
    fd, text = process.stdout.fileno(), ""
    deadline = time.monotonic() + START_S
    while "# acceleration limits" not in text:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        chunk = os.read(fd, 4096).decode() if ready else ""  # raw: no buffer hides a line
        if not chunk:
            process.kill()
            _, err = process.communicate(timeout=10.0)
            pytest.fail(f"{process.args!r}: no config lines ({text!r}): {err}")
        text += chunk
    lines = text.splitlines()
    if skip_first:
        assert lines[0].startswith("/dev/"), lines[0]  # the pty, on its own first line
        lines = lines[1:]
    config = yaml.safe_load("\n".join(lines))
    assert isinstance(config, dict)
    return config


def example_config(
    tmp_path: Path, broker_port: int, odrive: dict[str, Any], dxl: dict[str, Any]
) -> Path:
    """config/armd.example.yaml with the printed bus lines put in."""
    config = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    config["model"] = str((EXAMPLE.parent / config["model"]).resolve())
    geometry = config["collision"]["geometry"]
    config["collision"]["geometry"] = str((EXAMPLE.parent / geometry).resolve())
    config["mqtt"]["port"] = broker_port
    config["lock_file"] = str(tmp_path / "armd.lock")
    can0, servos = config["drivers"]["can0"], config["drivers"]["servos"]
    assert (odrive["type"], dxl["type"]) == (can0["type"], servos["type"])
    for key in ("interface", "channel"):
        can0["params"][key] = odrive["params"][key]
    printed_nodes = [d["node_id"] for d in odrive["params"]["devices"].values()]
    for name, node_id in zip(can0["params"]["devices"], printed_nodes, strict=True):
        can0["params"]["devices"][name]["node_id"] = node_id
    servos["params"]["port"] = dxl["params"]["port"]
    assert servos["params"]["baudrate"] == dxl["params"]["baudrate"]
    printed_ids = {d["id"] for d in dxl["params"]["devices"].values()}
    assert {d["id"] for d in servos["params"]["devices"].values()} <= printed_ids
    path = tmp_path / "armd.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def start_daemon(config: Path, log: Path, probe: MqttProbe) -> ArmdProcess:
    daemon = ArmdProcess(config, log).start()
    since = probe.mark()

    def online() -> bool:
        if not daemon.running:
            raise AssertionError(f"armd exited (code {daemon.returncode}):\n{daemon.output()}")
        return probe.availability() == "online" and bool(probe.on("state", since))

    try:
        probe.wait_for(online, START_S, "the daemon online and publishing state")
    except AssertionError as exc:
        daemon.stop()  # not left running (its real-time control process) after the test
        raise AssertionError(f"{exc}\n{daemon.output()}") from None
    return daemon


@pytest.fixture
def pty_stalls() -> Iterator[PtyStallProbe]:
    """The kernel's pty path and each CPU timed beside the test (stalls of 10 ms or more): a
    stall longer than the example's `stale_hold_s` (50 ms) holds the arm, longer than its
    `stale_fault_s` (250 ms) faults it, as it should on a real bus that went quiet."""
    with PtyStallProbe(late_s=0.01, cpus=True) as probe:
        yield probe


def diagnosis(probe: MqttProbe, daemon: ArmdProcess, stalls: PtyStallProbe | None) -> str:
    """What explains a failed goal: the faults the daemon published (the retained ``fault``
    topic), its latest messages and mode, its log's warnings and errors (a long log's tail alone
    may have lost them), and the pty path's stalls (when timed)."""
    faults = [m.text or "(cleared)" for m in probe.on("fault")]
    log = daemon.output().splitlines()
    notable = [line for line in log if " WARNING " in line or " ERROR " in line]
    pty = "" if stalls is None else f"pty stalls (ms): {[round(s * 1e3) for s in stalls.stalls_s]}"
    if stalls is not None and stalls.cpus is not None:
        held = [round((until - start) * 1e3) for start, until in stalls.cpus.spans()]
        pty += f"; CPUs held at the devices' priority (ms): {held}"
    head = [f"faults published: {faults}", pty, probe.summary(), "warnings and errors:"]
    return "\n".join([*head, *notable[-40:], "the daemon's last lines:", *log[-15:]])


STALE_HOLD_S = 0.05  # the example's safety.stale_hold_s
PERIOD_S = 1 / 250  # the example's loop_hz
WATCHDOG_S = 0.1  # its devices' shortest watchdog (the sim driver's watchdog_s, bus_watchdog_s)


def run_goal(
    probe: MqttProbe,
    daemon: ArmdProcess,
    positions: dict[str, float],
    stalls: PtyStallProbe | None = None,
) -> None:
    """The goal succeeds, sent again after an abort for stale feedback only where `stalls`
    measured the pty path quiet that long (`run_goal_through_stalls`)."""
    goal = {"id": uuid.uuid4().hex[:12], "type": "joints", "positions": positions}
    status = run_goal_through_stalls(
        probe, goal, stalls, hold_s=STALE_HOLD_S, period_s=PERIOD_S, watchdog_s=WATCHDOG_S,
        timeout_s=2 * WAIT_S,
    )  # fmt: skip
    assert status["status"] == "succeeded", f"{status}\n{diagnosis(probe, daemon, stalls)}"


def test_the_example_config_drives_the_default_simulated_devices(
    tmp_path: Path, spawn: Any, pty_stalls: PtyStallProbe
) -> None:
    a, b, c = uuid.uuid4().bytes[:3]
    odrive = spawn("sim-device", "odrive", "--channel", f"239.{a}.{b}.{max(c, 1)}")
    dynamixel = spawn("sim-device", "dynamixel", "--ids", "1", "2", "3")
    config = example_config(
        tmp_path, 0, printed_config(odrive), printed_config(dynamixel, skip_first=True)
    )
    with MosquittoBroker(tmp_path / "mosquitto") as broker:
        text = config.read_text(encoding="utf-8").replace("port: 0", f"port: {broker.port}")
        config.write_text(text, encoding="utf-8")
        check = subprocess.run(
            armd_command("check", "--config", config, "--probe"), cwd=ROOT,
            capture_output=True, text=True, timeout=START_S, check=False,
        )  # fmt: skip
        assert check.returncode == 0, check.stdout + check.stderr
        probe = MqttProbe(broker.host, broker.port, arm=ARM)
        daemon = start_daemon(config, tmp_path / "armd-1.out", probe)
        try:
            start = joint_positions(probe.latest_state())
            away = {
                "shoulder_pan_joint": start["shoulder_pan_joint"] + 1.5,  # ODrive, gear 50
                "elbow_joint": start["elbow_joint"] + 0.5,  # ODrive, gear 50
                "wrist_1_joint": start["wrist_1_joint"] + 0.5,  # Dynamixel
                "wrist_3_joint": start["wrist_3_joint"] + 0.5,  # sim
            }
            run_goal(probe, daemon, away, pty_stalls)
        finally:
            daemon.stop()
        assert daemon.returncode == 0, daemon.output()
        # a restart finds the devices where the last run left them, and drives them back
        daemon = start_daemon(config, tmp_path / "armd-2.out", probe)
        try:
            there = joint_positions(probe.latest_state())
            for name, position in away.items():
                if name != "wrist_3_joint":  # the in-process `sim` driver starts afresh
                    assert there[name] == pytest.approx(position, abs=0.01), name
            run_goal(probe, daemon, {name: start[name] for name in away}, pty_stalls)
        finally:
            daemon.stop()
            probe.close()
        assert daemon.returncode == 0, daemon.output()
    for process in (odrive, dynamixel):
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=10.0)
        assert process.returncode == 0, err


async def _exercise(driver: Any, rounds: int = 500) -> Any:
    """Open, enable, stream the measured positions like a control loop, close; the stats."""
    await driver.open()
    try:
        await driver.enable()
        for _ in range(rounds):
            states = await driver.read()
            await driver.write({n: DeviceCommand(s.position) for n, s in states.items()})
            await asyncio.sleep(0.004)
        return driver.stats
    finally:
        await driver.close()


@pytest.mark.parametrize("kind", ["dynamixel", "feetech"])
async def test_a_driver_with_its_defaults_serves_a_default_pty_chain(spawn: Any, kind: str) -> None:
    """The README's second step for a serial chain: the port it prints and nothing else."""
    driver_class = {"dynamixel": DynamixelDriver, "feetech": FeetechDriver}[kind]
    process = spawn("sim-device", kind, "--ids", "1", "2", "3")
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout.fileno()], [], [], START_S)
    assert ready, f"{kind}: no pty printed"
    port = os.read(process.stdout.fileno(), 4096).decode().splitlines()[0]
    params = driver_class.Params.model_validate(
        {"port": port, "devices": {f"d{i}": {"id": i} for i in (1, 2, 3)}}
    )
    # A reply can miss its deadline only if the kernel's pty path stalled longer than the reply
    # margin: the device answers at real-time priority, and the driver reads what arrived by the
    # deadline even when its own thread was late. The PtyStallProbe times that path beside the
    # driver (its stalls: round trips of half the margin or more), and each CPU at the device's
    # priority (a vCPU the host did not run holds the device as long): each hold-up may have cost
    # the transaction in flight and one per margin it lasted, each of three servos; none without.
    # A packet the deadline cut off counts as corrupt: only in a transaction that timed out.
    margin_s = params.reply_margin_s if params.reply_margin_s is not None else PTY_REPLY_MARGIN_S
    with PtyStallProbe(late_s=margin_s / 2, cpus=True) as probe:
        stats = await _exercise(driver_class(params))
    allowed = probe.timeouts_allowed(margin_s)
    cpu_spans = [] if probe.cpus is None else probe.cpus.spans()
    seen = (kind, stats, allowed, probe.stalls_s, cpu_spans, probe.round_trips)
    assert stats.timeouts <= allowed, seen
    assert stats.missing_replies <= 3 * stats.timeouts, seen
    assert stats.corrupt_replies <= stats.timeouts, seen
