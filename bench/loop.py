"""Control-loop benchmark on the `sim` driver (bench/README.md says more):

    python bench/loop.py [--duration 60] [--rates 250 500] [--goals 200] [--quick]

1. Loop timing: `python -m armd run` as a subprocess at each rate while a client sends a random
   joints goal every ~2 s; ticks, missed ticks and period error (p50/p99/max) from its final
   "loop timing" log line, CPU % from /proc/<pid>/stat (100 % = one core).
2. Goal-to-first-command latency over MQTT on loopback: the daemon as a subprocess logging the
   first command of each motion (``--log-level INFO,armd.control.loop=DEBUG``), goals from a client
   here,
   timed from the client's publish call and from the moment its PUBLISH reached the socket.

Every run uses its own Mosquitto on a free loopback port, stopped on any exit. Reports only: the
targets are printed beside the figures, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import json
import os
import random
import re
import sys
import tempfile
import time
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

# bench/ holds scripts named like packages (drivers.py, kinematics.py) that armd imports: import
# the packages with this folder off the path, then put it back for the sibling bench modules.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
import aiomqtt  # noqa: E402
import numpy as np  # noqa: E402
from numpy.typing import NDArray  # noqa: E402

from armd.api.contract import Topics  # noqa: E402
from armd.config.load import ArmSetup, load_config  # noqa: E402

sys.path.append(str(_HERE))
from harness import (  # noqa: E402
    HOME,
    HOST,
    NODELAY,
    CpuTimes,
    LoopTiming,
    PlatformWakeups,
    cpu_seconds,
    daemon_process,
    loop_timing,
    machine,
    mosquitto,
    platform_wakeups,
    steal_pct,
    write_config,
)

Array = NDArray[np.float64]
FINAL = {"succeeded", "aborted", "preempted", "rejected"}


class StatusWatcher:
    """Collects final goal statuses on `client` while open; `final(id)` waits for one."""

    def __init__(self, client: aiomqtt.Client, arm: str) -> None:
        self.client, self.arm = client, arm
        self.statuses: dict[str, str] = {}
        self.changed = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None

    async def __aenter__(self) -> StatusWatcher:
        await self.client.subscribe(Topics.for_arm(self.arm).goal_status, qos=1)
        self._reader = asyncio.create_task(self._read())
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._reader is not None:
            self._reader.cancel()

    async def _read(self) -> None:
        with suppress(aiomqtt.MqttError):  # the connection closed: nothing more to read
            async for message in self.client.messages:
                status = json.loads(bytes(message.payload))
                if status.get("status") in FINAL:
                    self.statuses[str(status.get("id"))] = status["status"]
                    self.changed.set()

    async def final(self, goal_id: str, timeout_s: float = 15.0) -> str:
        async with asyncio.timeout(timeout_s):
            while goal_id not in self.statuses:
                self.changed.clear()
                await self.changed.wait()
        return self.statuses[goal_id]


async def publish_goal(client: aiomqtt.Client, setup: ArmSetup, goal_id: str, q: Array) -> None:
    positions = dict(zip(setup.tree.joint_names, map(float, q), strict=True))
    payload = {"id": goal_id, "type": "joints", "positions": positions}
    await client.publish(Topics.for_arm(setup.name).goal, json.dumps(payload), qos=1)


async def send_random_goals(setup: ArmSetup, duration_s: float) -> dict[str, int]:
    """A random joints goal (home ± 0.6 rad per joint) every ~2 s; returns the final statuses."""
    rng, deadline, k = np.random.default_rng(0), time.monotonic() + duration_s, 0
    async with (
        aiomqtt.Client(
            HOST, setup.mqtt.port, identifier="bench-loop-goals", socket_options=NODELAY
        ) as client,
        StatusWatcher(client, setup.name) as watcher,
    ):
        while time.monotonic() < deadline:
            await publish_goal(client, setup, f"g{k}", HOME + rng.uniform(-0.6, 0.6, 6))
            k += 1
            await asyncio.sleep(min(rng.uniform(1.8, 2.2), max(0.0, deadline - time.monotonic())))
        with suppress(TimeoutError):
            await watcher.final(f"g{k - 1}", timeout_s=5.0)
    counts: dict[str, int] = {"sent": k}
    for status in watcher.statuses.values():
        counts[status] = counts.get(status, 0) + 1
    return counts


@dataclass(frozen=True)
class TimingRow:
    rate_hz: int
    timing: LoopTiming  # from the daemon's final log line
    cpu_pct: float  # of one core
    load: float  # 1-min load average at the end of the run
    goals: str
    steal_pct: float  # the host's CPU steal time during the run
    platform: PlatformWakeups | None  # cyclictest beside the run, when installed


def timing_run(workdir: Path, port: int, rate_hz: int, duration_s: float) -> TimingRow:
    """Run the daemon as a subprocess at `rate_hz`; the figures of its final timing line."""
    config = write_config(workdir, rate_hz, port)
    log_path = workdir / f"daemon-{rate_hz}.log"
    with daemon_process(config, log_path) as daemon:
        cpu0, wall0, host0 = cpu_seconds(daemon.pid), time.monotonic(), CpuTimes.now()
        with platform_wakeups(1.0 / rate_hz, duration_s) as platform:
            counts = asyncio.run(send_random_goals(load_config(config), duration_s))
            cpu = (cpu_seconds(daemon.pid) - cpu0) / (time.monotonic() - wall0) * 100.0
        steal = steal_pct(host0, CpuTimes.now())
    goals = ", ".join(f"{n} {s}" for s, n in counts.items())
    reference = platform[0] if platform else None
    timing = loop_timing(log_path)
    return TimingRow(rate_hz, timing, cpu, os.getloadavg()[0], goals, steal, reference)


FIRST_COMMAND = re.compile(r"goal (\S+): first command at monotonic (\d+\.\d+)")


class WireClock:
    """When `client`'s PUBLISH packets reach its socket: paho's `_sock_send` of this one client,
    timed (the client library's work before that, ~0.3–0.8 ms cold on this VM, is not armd's)."""

    def __init__(self, client: aiomqtt.Client) -> None:
        self.publishes: list[float] = []
        paho = client._client
        send = paho._sock_send

        def timed(data: bytes | bytearray) -> int:
            if data[0] & 0xF0 == 0x30:  # PUBLISH (PUBACKs of the statuses go here too)
                self.publishes.append(time.monotonic())
            return send(data)

        paho._sock_send = timed  # type: ignore[method-assign,assignment]

    def first_after(self, t: float) -> float:
        return self.publishes[bisect.bisect_left(self.publishes, t)]


def first_commands(log_path: Path) -> dict[str, float]:
    """Goal id → when the control loop issued its first command (`time.monotonic`, the same
    clock in every process), from the control process's DEBUG lines."""
    text = log_path.read_text(encoding="utf-8", errors="replace")
    return {goal_id: float(t) for goal_id, t in FIRST_COMMAND.findall(text)}


def measure_latency(workdir: Path, config: Path, goals: int) -> tuple[list[float], list[float]]:
    """Goal-to-first-command latencies (s) from the client's publish call and from the wire: the
    daemon as a subprocess (its loop in its control process), logging the first command of each
    motion (armd.control.loop at DEBUG)."""
    setup = load_config(config)
    log_path = workdir / f"latency-{setup.loop_hz:g}.log"
    with daemon_process(config, log_path, log_level="INFO,armd.control.loop=DEBUG"):
        sent, wire = asyncio.run(send_alternating_goals(setup, goals))
        deadline = time.monotonic() + 5.0
        while len(first_commands(log_path).keys() & sent.keys()) < len(sent):
            if time.monotonic() > deadline:
                raise RuntimeError(f"first commands missing in {log_path}")
            time.sleep(0.05)
    first = first_commands(log_path)
    return (
        [first[goal_id] - start for goal_id, start in sent.items()],
        [first[goal_id] - start for goal_id, start in wire.items()],
    )


async def send_alternating_goals(
    setup: ArmSetup, goals: int
) -> tuple[dict[str, float], dict[str, float]]:
    """Goal id → when it was published (the publish call; its PUBLISH reaching the socket);
    every goal succeeds before the next one."""
    rng, targets = random.Random(0), (HOME + 0.05, HOME - 0.05)
    sent = {}
    async with (
        aiomqtt.Client(
            HOST, setup.mqtt.port, identifier="bench-loop-latency", socket_options=NODELAY
        ) as client,
        StatusWatcher(client, setup.name) as watcher,
    ):
        wire = WireClock(client)
        for k in range(goals + 1):  # the first goal (from home) sets up the alternation
            await asyncio.sleep(rng.uniform(0.0, 0.02))  # spread publishes over the tick phase
            start = time.monotonic()
            await publish_goal(client, setup, f"lat{k}", targets[k % 2])
            status = await watcher.final(f"lat{k}")
            if status != "succeeded":
                raise RuntimeError(f"goal lat{k}: {status}")
            if k > 0:
                sent[f"lat{k}"] = start
    return sent, {goal_id: wire.first_after(start) for goal_id, start in sent.items()}


def print_timing(rows: list[TimingRow], duration_s: float) -> None:
    print(f"\n1. loop timing on the sim driver, {duration_s:g} s per rate (daemon subprocess,")
    print("   a random joints goal every ~2 s; CPU % of one core; load = 1-min load average)")
    print("   platform = cyclictest beside the run (rt-tests; C, locked memory, SCHED_FIFO, no")
    print("   work): its wake-ups a period or more late of its cycles, and its worst, in ms")
    print(f"{'rate Hz':>8} {'ticks':>7} {'missed':>6} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} "
          f"{'CPU %':>6} {'load':>5} {'steal %':>7} {'platform':>16}  goals")  # fmt: skip
    for r in rows:
        t, ref = r.timing, r.platform
        platform = f"{ref.late}/{ref.cycles} {ref.max_ms:.1f}" if ref else "(not installed)"
        print(f"{r.rate_hz:>8} {t.ticks:>7} {t.missed:>6} {t.p50_ms:>7.3f} {t.p99_ms:>7.3f} "
              f"{t.max_ms:>7.3f} {r.cpu_pct:>6.1f} {r.load:>5.2f} {r.steal_pct:>7.2f} "
              f"{platform:>16}  {r.goals}")  # fmt: skip
    print("   target: 500 Hz with p99 period error <= 0.25 ms and no missed tick")


def latency_row(label: str, start: str, rate_hz: int, latencies: list[float], steal: float) -> str:
    ms = np.array(latencies) * 1e3
    p50, p99, worst = np.percentile(ms, 50), np.percentile(ms, 99), ms.max()
    target = 1e3 / rate_hz + 1.0  # the target: p99 within one tick + 1 ms
    within = 100.0 * np.mean(ms <= target)
    return (f"{rate_hz:>8} {label:>9} {start:>5} {len(ms):>6} {p50:>7.2f} {p99:>7.2f} "
            f"{worst:>7.2f} {target:>7.1f} {within:>7.1f} {steal:>7.2f}")  # fmt: skip


def latency_runs(workdir: Path, rates: list[int], goals: int) -> None:
    print("\n2. goal-to-first-command latency over MQTT on loopback, joints goals, ms")
    print("   (the daemon as a subprocess, its control process logging each motion's first")
    print("    command; from the client's publish call ('call') and from its PUBLISH reaching")
    print("    the socket ('wire'); broker 'nodelay' = set_tcp_nodelay true, 'default' =")
    print("    Mosquitto's default, Nagle's algorithm on the broker's sockets)")
    print(f"{'rate Hz':>8} {'broker':>9} {'from':>5} {'goals':>6} {'p50':>7} {'p99':>7} "
          f"{'max':>7} {'target':>7} {'% <= t':>7} {'steal %':>7}")  # fmt: skip
    for label, nodelay, run_rates in (("nodelay", True, rates), ("default", False, rates[:1])):
        with mosquitto(workdir, nodelay) as port:
            for rate in run_rates:
                config = write_config(workdir, rate, port)
                host0 = CpuTimes.now()
                from_call, from_wire = measure_latency(workdir, config, goals)
                steal = steal_pct(host0, CpuTimes.now())
                for start, latencies in (("call", from_call), ("wire", from_wire)):
                    print(latency_row(label, start, rate, latencies, steal), flush=True)
    print("   target: p99 within one tick + 1 ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=60.0, help="s per rate (60)")
    parser.add_argument("--rates", type=int, nargs="+", default=[250, 500], help="Hz")
    parser.add_argument("--goals", type=int, default=200, help="latency samples per rate (200)")
    parser.add_argument("--quick", action="store_true", help="10 s per rate, at most 40 goals")
    args = parser.parse_args()
    duration, goals = (10.0, min(args.goals, 40)) if args.quick else (args.duration, args.goals)
    print(machine(), flush=True)
    with tempfile.TemporaryDirectory(prefix="armd-bench-") as tmp:
        with mosquitto(Path(tmp), nodelay=True) as port:
            rows = [timing_run(Path(tmp), port, rate, duration) for rate in args.rates]
        print_timing(rows, duration)
        latency_runs(Path(tmp), args.rates, goals)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
