"""Control-loop timing while a client floods the goal topic (the "overload" case):

    python bench/overload.py [--duration 30] [--rates 250 500] [--priorities 50 0]

`python -m armd run` on config/sim.yaml runs as a subprocess at each rate and real-time priority
(`realtime_priority`, 0 = normal scheduling) while a second process publishes valid joints goals
back to back at QoS 1 (up to 1000 in flight) for the whole run and counts the final statuses that
come back. Ticks, missed ticks and period error come from the daemon's final "loop timing" log
line, CPU % from /proc/<pid>/stat (daemon and control process; 100 % = one core). Every run uses
its own Mosquitto on a free loopback port. Reports only: the budget is printed beside the
figures, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
import paho.mqtt.client as mqtt  # noqa: E402
import yaml  # noqa: E402
from paho.mqtt.enums import CallbackAPIVersion  # noqa: E402

sys.path.append(str(_HERE))
from harness import (  # noqa: E402
    HOST,
    LoopTiming,
    cpu_seconds,
    daemon_process,
    loop_timing,
    machine,
    mosquitto,
    write_config,
)

IN_FLIGHT = 1000
FINAL = {"succeeded", "aborted", "preempted", "rejected"}
TARGETS = ({"elbow_joint": 1.2, "wrist_3_joint": 0.5}, {"elbow_joint": 1.9, "wrist_3_joint": -0.5})


def flood(port: int, arm: str, duration_s: float) -> None:
    """The flooding client (a process of its own): prints "sent answered" when done."""
    answered = 0

    def on_message(client: mqtt.Client, userdata: object, message: mqtt.MQTTMessage) -> None:
        nonlocal answered
        if json.loads(message.payload).get("status") in FINAL:
            answered += 1

    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"bench-flood-{os.getpid()}")
    client.max_inflight_messages_set(IN_FLIGHT)
    client.on_message = on_message
    client.connect(HOST, port)
    client.subscribe(f"armd/{arm}/goal/status", qos=1)
    client.loop_start()
    in_flight: deque[mqtt.MQTTMessageInfo] = deque()
    sent, deadline = 0, time.monotonic() + duration_s
    while time.monotonic() < deadline:
        if len(in_flight) >= IN_FLIGHT:
            in_flight.popleft().wait_for_publish(10.0)
        goal = {"id": f"f{sent}", "type": "joints", "positions": TARGETS[sent % 2], "speed": 0.5}
        in_flight.append(client.publish(f"armd/{arm}/goal", json.dumps(goal), qos=1))
        sent += 1
    while in_flight:
        in_flight.popleft().wait_for_publish(10.0)
    time.sleep(2.0)  # the last statuses
    client.disconnect()
    client.loop_stop()
    print(sent, answered)


@dataclass(frozen=True)
class Row:
    rate_hz: int
    priority: int
    nice: int
    timing: LoopTiming
    cpu_pct: float
    sent: int
    answered: int
    duration_s: float


def run(workdir: Path, port: int, rate_hz: int, priority: int, nice: int, duration_s: float) -> Row:
    config = write_config(workdir, rate_hz, port)
    doc = yaml.safe_load(config.read_text(encoding="utf-8"))
    doc["realtime_priority"] = priority
    config.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    log_path = workdir / f"daemon-{rate_hz}-{priority}.log"
    with daemon_process(config, log_path, nice) as daemon:
        cpu0, wall0 = cpu_seconds(daemon.pid), time.monotonic()
        command = [sys.executable, __file__, "--flood", str(port), doc["name"], str(duration_s)]
        result = subprocess.run(command, capture_output=True, text=True, check=True)
        cpu = (cpu_seconds(daemon.pid) - cpu0) / (time.monotonic() - wall0) * 100.0
    sent, answered = map(int, result.stdout.split())
    return Row(rate_hz, priority, nice, loop_timing(log_path), cpu, sent, answered, duration_s)


def print_rows(rows: list[Row]) -> None:
    print("\nloop timing under a flood of joints goals (QoS 1, up to 1000 in flight), sim driver")
    print("(rt = realtime_priority, 0: normal scheduling; nice = the daemon's niceness, the unit's")
    print(" Nice=; CPU % of one core; the daemon's whole run, start-up and shutdown included)")
    print(f"{'rate Hz':>8} {'rt':>3} {'nice':>4} {'goals/s':>8} {'answered':>9} {'ticks':>7} "
          f"{'missed':>6} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} {'CPU %':>6}")  # fmt: skip
    for r in rows:
        t = r.timing
        print(f"{r.rate_hz:>8} {r.priority:>3} {r.nice:>4} {r.sent / r.duration_s:>8.0f} "
              f"{100.0 * r.answered / max(r.sent, 1):>8.1f}% {t.ticks:>7} {t.missed:>6} "
              f"{t.p50_ms:>7.3f} {t.p99_ms:>7.3f} {t.max_ms:>7.3f} {r.cpu_pct:>6.1f}",
              flush=True)  # fmt: skip
    print("   budget: a flood never delays the loop beyond its period (no missed tick)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=30.0, help="s of flood per run (30)")
    parser.add_argument("--rates", type=int, nargs="+", default=[250, 500], help="Hz")
    parser.add_argument("--priorities", type=int, nargs="+", default=[50, 0], help="rt priority")
    parser.add_argument(
        "--nice", type=int, nargs="+", default=[-10, 0], help="daemon niceness (unit: -10)"
    )
    parser.add_argument(
        "--flood", nargs=3, metavar=("PORT", "ARM", "SECONDS"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.flood:
        port, arm, seconds = args.flood
        flood(int(port), arm, float(seconds))
        return
    print(machine(), flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="armd-bench-") as tmp:
        options = ["max_queued_messages 100000"]  # the default 1000 would drop part of the flood
        with mosquitto(Path(tmp), nodelay=True, options=options) as port:
            for rate in args.rates:
                for priority in args.priorities:
                    for nice in args.nice if os.geteuid() == 0 else [0]:
                        rows.append(run(Path(tmp), port, rate, priority, nice, args.duration))
    print_rows(rows)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
