"""Soak run of the daemon on the simulated arm (bench/README.md says more):

    python bench/soak.py [--duration 600] [--rate 250] [--seed 1]

`python -m armd run` on config/sim.yaml (`loop_hz` = --rate) as a subprocess, on a private
Mosquitto, while a seeded client sends a random mix for --duration seconds: reachable joints and
pose goals (FK of random configurations near home; some linear), unreachable and out-of-limit
goals, bursts (newest wins), stops, e-stop engage + reset pairs and malformed payloads. It prints
goals by kind and final status (each goal must get exactly one), goals whose statuses break the
contract (a bare final status without `accepted`/`rejected` first must never happen), the loop's
timing, processes restarted, telemetry outside the joint limits, faults, the daemon's memory and
CPU, the host's CPU steal time during the run and, where rt-tests is installed, how often
cyclictest beside it woke a period or more late (a missed tick on a VM that lost its CPU is the
machine's, not armd's) and a one-line verdict. Reports only: nothing about speed is asserted.
A malformed e-stop payload engages the e-stop (fail-safe): the client then resets it, as an
operator would.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

# bench/ holds scripts named like packages (drivers.py, kinematics.py) that armd imports: import
# the packages with this folder off the path, then put it back for the sibling bench modules.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
import aiomqtt  # noqa: E402
import numpy as np  # noqa: E402

from armd.api.contract import Topics  # noqa: E402
from armd.config.load import ArmSetup, load_config  # noqa: E402

sys.path.append(str(_HERE))
import harness  # noqa: E402

FINAL = ("succeeded", "rejected", "aborted", "preempted")
ACTIONS = {  # relative weights of the client's actions
    "joints": 30, "pose": 22, "linear": 8, "unreachable": 5, "out_of_limits": 4,
    "burst": 5, "stop": 7, "estop": 3, "malformed": 16,
}  # fmt: skip
MUST_REJECT = {"unreachable", "out_of_limits", "malformed"}
MEMORY_GROWTH_MB = 20.0  # more than this between warm-up and the end is reported
SETTLE_S = 30.0  # after the last action, for the outstanding goals to end


@dataclass
class Record:
    """What the client saw on `goal/status`, `state` and `fault`."""

    limits: dict[str, tuple[float, float]]  # joint -> (lower, upper)
    kinds: dict[str, str] = field(default_factory=dict)  # goal id -> what it was sent as
    statuses: defaultdict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    idless: Counter[str] = field(default_factory=Counter)  # statuses without an id
    idless_sent: int = 0  # malformed payloads without a readable id
    estops: int = 0  # engage + reset pairs sent
    modes: Counter[str] = field(default_factory=Counter)  # state messages by mode
    violations: int = 0  # joint positions outside the limits in state messages
    worst_excess: float = 0.0  # rad beyond a limit
    faults: list[str] = field(default_factory=list)
    reasons: Counter[str] = field(default_factory=Counter)  # of aborts and rejections
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def on_status(self, doc: dict[str, Any]) -> None:
        if doc.get("id") is None:
            self.idless[doc["status"]] += 1
        else:
            self.statuses[doc["id"]].append(doc["status"])
            if doc["status"] in ("aborted", "rejected"):
                kind = self.kinds.get(doc["id"], "?")
                self.reasons[f"{kind} {doc['status']}: {doc.get('reason', '')}"] += 1
            self.changed.set()

    def on_state(self, doc: dict[str, Any]) -> None:
        self.modes[doc["mode"]] += 1
        for name, joint in doc["joints"].items():
            lower, upper = self.limits[name]
            excess = max(lower - joint["position"], joint["position"] - upper)
            if excess > 0.0:
                self.violations += 1
                self.worst_excess = max(self.worst_excess, excess)

    def on_fault(self, payload: bytes) -> None:
        if payload:  # empty: cleared
            self.faults.append(json.loads(payload).get("code", "?"))

    def finals(self, goal_id: str) -> list[str]:
        return [s for s in self.statuses.get(goal_id, []) if s in FINAL]

    def bare_finals(self) -> int:
        """Goals whose first status is final but not ``rejected`` (no ``accepted`` first)."""
        return sum(s[0] in FINAL and s[0] != "rejected" for s in self.statuses.values() if s)

    def repeated_first(self) -> int:
        """Goals with more than one first status (``accepted`` or ``rejected``)."""
        return sum(
            sum(x in ("accepted", "rejected") for x in s) > 1 for s in self.statuses.values()
        )

    def pending(self) -> list[str]:
        return [goal_id for goal_id in self.kinds if not self.finals(goal_id)]

    async def wait(self, done: Callable[[], object], timeout_s: float) -> None:
        """Until `done()` is true or `timeout_s` passed."""
        with suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                while not done():
                    self.changed.clear()
                    await self.changed.wait()


class Traffic:
    """Seeded goal payloads (dicts without an id) for the simulated UR5."""

    def __init__(self, setup: ArmSetup, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.setup = setup
        self.lower, self.upper = setup.limits.lower, setup.limits.upper

    def near_home(self) -> np.ndarray:
        q = harness.HOME + self.rng.uniform(-0.5, 0.5, len(harness.HOME))  # rad
        return np.clip(q, self.lower, self.upper)

    def joints(self, q: np.ndarray | None = None) -> dict[str, Any]:
        q = self.near_home() if q is None else q
        names = self.setup.tree.joint_names
        doc: dict[str, Any] = {
            "type": "joints",
            "positions": dict(zip(names, q.tolist(), strict=True)),
        }
        if self.rng.random() < 0.3:
            doc["speed"] = round(float(self.rng.uniform(0.2, 1.0)), 2)
        return doc

    def pose(self, linear: bool = False) -> dict[str, Any]:
        tool = self.setup.tree.fk(self.near_home(), self.setup.tool_link)
        doc: dict[str, Any] = {"type": "pose", "position": tool.translation.tolist()}
        if self.rng.random() < 0.8:
            doc["orientation"] = tool.quaternion.tolist()
        if linear:
            doc |= {"motion": "linear", "speed": round(float(self.rng.uniform(0.3, 1.0)), 2)}
        return doc

    def unreachable(self) -> dict[str, Any]:
        direction = self.rng.normal(size=3)
        position = direction / np.linalg.norm(direction) * self.rng.uniform(1.5, 3.0)  # m
        return {"type": "pose", "position": position.tolist()}

    def out_of_limits(self) -> dict[str, Any]:
        q, j = self.near_home(), int(self.rng.integers(len(harness.HOME)))
        beyond = self.rng.uniform(0.05, 1.0)
        q[j] = self.upper[j] + beyond if self.rng.random() < 0.5 else self.lower[j] - beyond
        return self.joints(q)

    def malformed(self, goal_id: str) -> tuple[str, dict[str, Any] | bytes]:
        """(topic: "goal" or "estop", payload); dict payloads with an "id" carry `goal_id`."""
        cases: list[tuple[str, dict[str, Any] | bytes]] = [
            ("goal", {"id": goal_id, "type": "joints", "positions": {"no_joint": 1.0}}),
            ("goal", {"id": goal_id, "type": "pose", "position": [float("nan"), 0, 0.3]}),
            ("goal", {"id": goal_id, "type": "pose", "position": [0.4, 0.1]}),
            ("goal", {"id": goal_id, "type": "pose", "postion": [0.4, 0.1, 0.3]}),
            ("goal", {"id": goal_id, "type": "pose", "position": [0.4, 0, 0.3], "link": "x"}),
            ("goal", {"id": goal_id, **self.joints(), "speed": 2.0}),
            ("goal", {"id": goal_id, "type": "teleport"}),
            ("estop", {"id": goal_id, "engage": "yes"}),
            ("goal", b"{not json"),
            ("goal", b"\xff\xfe\x00"),
            ("goal", b"[1, 2, 3]"),
            ("goal", {"type": "joints", "positions": {}}),
            ("estop", {"engage": False}),
            ("estop", {"engage": True, "reset": True}),
        ]
        return cases[int(self.rng.integers(len(cases)))]


class Client:
    """Sends the seeded mix of actions and records what comes back."""

    def __init__(self, mqtt: aiomqtt.Client, setup: ArmSetup, traffic: Traffic, record: Record):
        self.mqtt, self.topics = mqtt, Topics.for_arm(setup.name)
        self.traffic, self.rng, self.record = traffic, traffic.rng, record
        self.sent = 0

    async def read(self) -> None:
        async for message in self.mqtt.messages:
            payload = bytes(message.payload)
            if message.topic.matches(self.topics.goal_status):
                self.record.on_status(json.loads(payload))
            elif message.topic.matches(self.topics.state):
                self.record.on_state(json.loads(payload))
            elif message.topic.matches(self.topics.fault):
                self.record.on_fault(payload)

    async def publish(self, topic: str, payload: dict[str, Any] | bytes) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload)
        await self.mqtt.publish(topic, data, qos=1)

    async def goal(self, kind: str, doc: dict[str, Any]) -> str:
        self.sent += 1
        goal_id = f"{kind}-{self.sent}"
        self.record.kinds[goal_id] = kind
        await self.publish(self.topics.goal, {"id": goal_id, **doc})
        return goal_id

    async def act(self, action: str) -> str | None:
        """One action; returns the id of the goal to wait for, if any."""
        t = self.traffic
        makers: dict[str, Callable[[], dict[str, Any]]] = {
            "joints": t.joints, "pose": t.pose, "linear": lambda: t.pose(linear=True),
            "unreachable": t.unreachable, "out_of_limits": t.out_of_limits,
            "stop": lambda: {"type": "stop"},
        }  # fmt: skip
        if action in makers:
            return await self.goal(action, makers[action]())
        if action == "burst":  # back to back: the newest wins
            for _ in range(int(self.rng.integers(3, 25))):
                doc = t.joints() if self.rng.random() < 0.7 else t.pose()
                goal_id = await self.goal(action, doc)
            return goal_id
        if action == "estop":
            await self.estop()
            return None
        return await self.malformed()

    async def estop(self) -> None:
        """Engage, maybe a goal while engaged, reset."""
        self.record.estops += 1
        await self.publish(self.topics.estop, {"engage": True})
        await asyncio.sleep(self.rng.uniform(0.05, 0.8))
        if self.rng.random() < 0.5:
            await self.goal("during_estop", self.traffic.joints())
        await self.publish(self.topics.estop, {"reset": True})

    async def malformed(self) -> str | None:
        self.sent += 1
        goal_id = f"malformed-{self.sent}"
        topic, payload = self.traffic.malformed(goal_id)
        has_id = topic == "goal" and isinstance(payload, dict) and "id" in payload
        if has_id:
            self.record.kinds[goal_id] = "malformed"
        else:  # e-stop statuses carry no id
            self.record.idless_sent += 1
        await self.publish(getattr(self.topics, topic), payload)
        if topic == "estop":  # it engaged the e-stop (fail-safe): the operator resets it
            self.record.estops += 1
            await asyncio.sleep(self.rng.uniform(0.05, 0.5))
            await self.publish(self.topics.estop, {"reset": True})
        return goal_id if has_id else None

    async def drive(self, duration_s: float) -> None:
        actions, weights = list(ACTIONS), np.array(list(ACTIONS.values()), dtype=float)
        deadline = time.monotonic() + duration_s
        while time.monotonic() < deadline:
            goal_id = await self.act(str(self.rng.choice(actions, p=weights / weights.sum())))
            if goal_id is not None and self.rng.random() < 0.35:  # let it finish, else preempt
                await self.record.wait(partial(self.record.finals, goal_id), 15.0)
            await asyncio.sleep(self.rng.uniform(0.05, 1.5))


async def rss_after(delay_s: float, pid: int) -> float | None:
    await asyncio.sleep(delay_s)
    return harness.rss_mb(pid)


def children(pid: int) -> set[int]:
    with suppress(OSError):
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text(encoding="ascii")
        return {int(child) for child in text.split()}
    return set()


async def watch_processes(pid: int, seen: set[int]) -> None:
    """Collect the daemon's child processes (its control process) every second: more than one
    over the run means the control process was restarted."""
    while True:
        seen |= children(pid)
        await asyncio.sleep(1.0)


async def soak(
    setup: ArmSetup, duration_s: float, seed: int, pid: int, controls: set[int]
) -> tuple[Record, float | None]:
    """Run the client; returns what it recorded and the daemon's VmRSS after warm-up (MiB)."""
    limits = setup.limits
    record = Record({n: (limits[n].lower, limits[n].upper) for n in limits.names})
    topics = Topics.for_arm(setup.name)
    async with aiomqtt.Client(
        harness.HOST, setup.mqtt.port, identifier="bench-soak", socket_options=harness.NODELAY
    ) as mqtt:
        for topic in (topics.goal_status, topics.state, topics.fault):
            await mqtt.subscribe(topic, qos=1)
        client = Client(mqtt, setup, Traffic(setup, seed), record)
        async with asyncio.TaskGroup() as tasks:
            reader = tasks.create_task(client.read())
            warm = tasks.create_task(rss_after(min(30.0, duration_s / 2), pid))
            watcher = tasks.create_task(watch_processes(pid, controls))
            await client.drive(duration_s)
            await record.wait(lambda: not record.pending(), SETTLE_S)
            reader.cancel()
            watcher.cancel()
    return record, warm.result()


@dataclass(frozen=True)
class Outcome:
    record: Record
    timing: harness.LoopTiming
    warm_mb: float | None  # VmRSS after warm-up
    end_mb: float | None  # VmRSS at the end, before SIGTERM
    peak_mb: float | None  # VmHWM
    cpu_pct: float  # of one core
    steal_pct: float  # of the host's CPU time during the run, given to other guests
    platform: harness.PlatformWakeups | None  # cyclictest beside the run, when installed
    restarts: int  # control processes beyond the first, and a daemon that died before the end
    exit_code: int | None
    log_errors: int  # ERROR / CRITICAL lines and tracebacks in the daemon's log


def run(duration_s: float, rate_hz: int, seed: int, keep_log: Path | None = None) -> Outcome:
    with tempfile.TemporaryDirectory(prefix="armd-soak-") as tmp:
        workdir = Path(tmp)
        broker_options = ["max_queued_messages 100000"]
        with harness.mosquitto(workdir, nodelay=True, options=broker_options) as port:
            config, log_path = harness.write_config(workdir, rate_hz, port), workdir / "daemon.log"
            setup = load_config(config)
            with harness.daemon_process(config, log_path) as daemon:
                cpu0, wall0 = harness.cpu_seconds(daemon.pid), time.monotonic()
                host0, controls = harness.CpuTimes.now(), children(daemon.pid)
                with harness.platform_wakeups(1.0 / rate_hz, duration_s) as platform:
                    record, warm_mb = asyncio.run(
                        soak(setup, duration_s, seed, daemon.pid, controls)
                    )
                steal = harness.steal_pct(host0, harness.CpuTimes.now())
                died = daemon.poll() is not None
                end_mb, peak_mb = harness.rss_mb(daemon.pid), harness.rss_mb(daemon.pid, "VmHWM")
                cpu = (harness.cpu_seconds(daemon.pid) - cpu0) / (time.monotonic() - wall0) * 100.0
            log = log_path.read_text(encoding="utf-8", errors="replace")
            if keep_log is not None:
                keep_log.write_text(log, encoding="utf-8")
            errors = len(re.findall(r" (?:ERROR|CRITICAL) |^Traceback", log, re.M))
            restarts = max(0, len(controls) - 1) + died
            return Outcome(
                record, harness.loop_timing(log_path), warm_mb, end_mb, peak_mb, cpu, steal,
                platform[0] if platform else None, restarts, daemon.returncode, errors,
            )  # fmt: skip


def print_goals(record: Record) -> None:
    header = "".join(f"{s:>11}" for s in FINAL)
    print(f"\n{'goals by kind':<14}{'sent':>6}{header}{'none':>6}{'>1':>4}")
    rows: dict[str, Counter[str]] = {k: Counter() for k in [*ACTIONS, "during_estop"]}
    for goal_id, kind in record.kinds.items():
        finals = record.finals(goal_id)
        rows[kind].update(["sent", finals[0] if finals else "none"] + [">1"] * (len(finals) > 1))
    total: Counter[str] = Counter()
    for n in rows.values():
        total.update(n)
    rows["total"] = total
    for kind, n in rows.items():
        cells = "".join(f"{n[s]:>11}" for s in FINAL)
        if n["sent"]:
            print(f"{kind:<14}{n['sent']:>6}{cells}{n['none']:>6}{n['>1']:>4}")
    print(f"id-less malformed payloads: {record.idless_sent} sent, {record.idless['rejected']} "
          f"id-less rejections; e-stop engage + reset pairs: {record.estops}")  # fmt: skip
    reasons = record.reasons.most_common()  # why valid goals ended without success
    for reason, count in [(r, c) for r, c in reasons if r.split()[0] not in MUST_REJECT][:8]:
        print(f"{count:>5} x {reason[:120]}")


def print_report(o: Outcome) -> None:
    r, t = o.record, o.timing
    print_goals(r)
    modes = ", ".join(f"{m} {n}" for m, n in r.modes.most_common())
    rows = {
        "loop ticks / missed": f"{t.ticks} / {t.missed}",
        "period error p50/p99/max": f"{t.p50_ms:.3f} / {t.p99_ms:.3f} / {t.max_ms:.3f} ms",
        "limiter interventions": t.interventions,
        "state messages": f"{r.modes.total()} ({modes})",
        "limit violations": f"{r.violations} (worst {r.worst_excess:.4f} rad beyond a limit)",
        "faults": f"{len(r.faults)} {dict(Counter(r.faults))}",
        "VmRSS after warm-up / end": f"{mb(o.warm_mb)} / {mb(o.end_mb)}",
        "VmRSS growth / peak (HWM)": f"{mb(growth(o))} / {mb(o.peak_mb)}",
        "bare final statuses": f"{r.bare_finals()} (a final status with no accepted first)",
        "repeated first statuses": r.repeated_first(),
        "processes restarted": o.restarts,
        "daemon CPU (one core)": f"{o.cpu_pct:.1f} %, load average {os.getloadavg()[0]:.2f}",
        "host CPU steal time": f"{o.steal_pct:.2f} % of the run's CPU time",
        "platform (cyclictest)": platform(o.platform),
        "daemon exit code": o.exit_code,
        "ERROR/traceback log lines": o.log_errors,
    }
    print()
    for label, value in rows.items():
        print(f"{label:<27} {value}")
    problems = verdict(o)
    print(f"\nverdict: {'; '.join(problems) if problems else 'OK, no expectation broken'}")


def platform(wakeups: harness.PlatformWakeups | None) -> str:
    """What the machine alone did meanwhile: a thread that only sleeps and wakes up, in C, at the
    loop's period (a period late is a tick no program could have kept)."""
    if wakeups is None:
        return "n/a (cyclictest not installed: apt install rt-tests)"
    return (
        f"{wakeups.late} of {wakeups.cycles} wake-ups a period or more late, worst "
        f"{wakeups.max_ms:.1f} ms (a C thread beside the run doing nothing else)"
    )


def mb(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f} MiB"


def growth(o: Outcome) -> float | None:
    return None if o.warm_mb is None or o.end_mb is None else o.end_mb - o.warm_mb


def verdict(o: Outcome) -> list[str]:
    r = o.record
    finals = {goal_id: r.finals(goal_id) for goal_id in r.kinds}
    checks = {
        "goals without a final status": sum(not f for f in finals.values()),
        "goals with more than one final status": sum(len(f) > 1 for f in finals.values()),
        "invalid goals not rejected": sum(
            bool(f) and f[0] != "rejected" for g, f in finals.items() if r.kinds[g] in MUST_REJECT
        ),
        "id-less malformed payloads unanswered": r.idless_sent - r.idless["rejected"],
        "goals with a bare final status": r.bare_finals(),
        "goals with more than one first status": r.repeated_first(),
        "processes restarted": o.restarts,
        "limit violations in telemetry": r.violations,
        "unexpected faults": len(r.faults),
        "ERROR/traceback lines in the daemon's log": o.log_errors,
    }
    problems = [f"{n} {what}" for what, n in checks.items() if n]
    if o.exit_code != 0:
        problems.append(f"daemon exit code {o.exit_code}")
    grown = growth(o)
    if grown is None or grown > MEMORY_GROWTH_MB:
        problems.append(f"memory growth {mb(grown)} (> {MEMORY_GROWTH_MB:g} MiB or unknown)")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=600.0, help="s of traffic (600)")
    parser.add_argument("--rate", type=int, default=250, help="loop rate, Hz (250)")
    parser.add_argument("--seed", type=int, default=1, help="of the client's mix (1)")
    parser.add_argument("--log", type=Path, help="keep the daemon's log in this file")
    args = parser.parse_args()
    print(harness.machine())
    print(f"soak: {args.duration:g} s at {args.rate} Hz, seed {args.seed}: the daemon on the sim "
          "driver (subprocess), a private Mosquitto", flush=True)  # fmt: skip
    print_report(run(args.duration, args.rate, args.seed, args.log))


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
