"""Streaming and teleoperation benchmark on the `sim` driver (bench/README.md says more):

    python bench/stream.py [--rates 250 500] [--stream-rates 30 60 250] [--starts 100]
                           [--duration 10] [--quick]

1. Stream start → first command: a client publishes the first message of a new stream (then its
   ``end``, and waits for ``succeeded``), the follower daemon (a subprocess, armd.control.loop at
   DEBUG)
   logs its first command; per loop rate.
2. Leader read → follower command: ``armd leader``'s loop (`armd.tools.teleop.run_leader`) runs here
   on config/sim_leader.yaml's simulated UR5, moved by a scripted hand, at the follower's loop
   rate; it logs when it read each message's joints, the follower when it first commanded each
   message's target (by seq); per loop rate.
3. Tracking error: the same leader at each stream rate, the follower at 250 Hz publishing its
   state every tick; the follower's measured joints against the script at the same instant (the
   lag included), the lag that explains them best, the error left at that lag, and the ticks the
   follower missed.

Every run uses its own Mosquitto on a free loopback port (set_tcp_nodelay true), stopped on any
exit. Reports only: the targets are printed beside the figures, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import math
import re
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# bench/ holds scripts named like packages (drivers.py, kinematics.py) that armd imports: import
# the packages with this folder off the path, then put it back for the sibling bench modules.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
import aiomqtt  # noqa: E402
import numpy as np  # noqa: E402
import yaml  # noqa: E402
from numpy.typing import NDArray  # noqa: E402

from armd.api.contract import Topics  # noqa: E402
from armd.config.load import build_drivers, load_config  # noqa: E402
from armd.control.hardware import ArmHardware  # noqa: E402
from armd.link.protocol import MeasuredState  # noqa: E402
from armd.tools.leader import LeaderSetup, leader_setup  # noqa: E402
from armd.tools.teleop import follower_settings, run_leader  # noqa: E402
from drivers.sim.driver import SimDriver  # noqa: E402

sys.path.append(str(_HERE))
from harness import (  # noqa: E402
    HOME,
    HOST,
    NODELAY,
    ROOT,
    CpuTimes,
    daemon_process,
    machine,
    mosquitto,
    steal_pct,
    write_config,
)
from loop import StatusWatcher, first_commands  # noqa: E402

Array = NDArray[np.float64]
LEADER_CONFIG = ROOT / "config" / "sim_leader.yaml"
ARM = "ur5-sim"
# the scripted hand: three joints of the leader (devices at gear ratio 1), a sinusoid
DEVICES = ("base", "shoulder", "elbow")
JOINTS = (0, 1, 2)  # their q indices
AMPLITUDE = np.array([0.3, 0.2, -0.25])  # rad
FREQUENCY_HZ = 0.5  # peak 0.94 rad/s, 3.0 rad/s²: within the UR5 config's limits
COMMANDED = re.compile(r"stream (\S+) seq (\d+): first command at monotonic (\d+\.\d+)")


def script(t: float) -> Array:
    """The scripted joints (JOINTS) `t` s after the start: from home, a smooth sinusoid."""
    return HOME[list(JOINTS)] + AMPLITUDE * math.sin(math.pi * FREQUENCY_HZ * max(t, 0.0)) ** 2


class ScriptedLeader(ArmHardware):
    """The leader's hardware, its torque-off devices put where the script says just before each
    read (a hand moving the arm continuously)."""

    def __init__(self, setup: LeaderSetup) -> None:
        super().__init__(build_drivers(setup.arm), setup.arm.transmission)
        (driver,) = self.drivers.values()
        assert isinstance(driver, SimDriver)
        self.motors = [driver.motor(name) for name in DEVICES]
        self.start = math.nan

    async def read(self) -> MeasuredState:
        if math.isnan(self.start):
            self.start = time.monotonic()
        for motor, position in zip(self.motors, script(time.monotonic() - self.start), strict=True):
            motor.move_by_hand(float(position))
        return await super().read()


class ReadTimes(logging.Handler):
    """Collects the leader's "stream seq N: read at monotonic T" debug lines: seq → T."""

    PATTERN = re.compile(r"stream seq (\d+): read at monotonic (\d+\.\d+)")

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.reads: dict[int, float] = {}

    def emit(self, record: logging.LogRecord) -> None:
        found = self.PATTERN.match(record.getMessage())
        if found:
            self.reads[int(found.group(1))] = float(found.group(2))


@contextmanager
def read_times() -> Iterator[ReadTimes]:
    handler, logger = ReadTimes(), logging.getLogger("armd.tools.teleop")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)


@contextmanager
def follower(config: Path, log_path: Path, log_level: str = "INFO") -> Iterator[None]:
    """The follower daemon, once online on the broker (a previous run's retained ``offline``
    would refuse the leader)."""
    with daemon_process(config, log_path, log_level=log_level):
        deadline = time.monotonic() + 30.0
        while "MQTT: online" not in log_path.read_text(encoding="utf-8", errors="replace"):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the follower did not come online: {log_path}")
            time.sleep(0.05)
        yield


def follower_config(workdir: Path, rate_hz: int, port: int, telemetry_hz: float = 25.0) -> Path:
    """config/sim.yaml at `rate_hz` with streaming enabled."""
    path = write_config(workdir, rate_hz, port)
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    doc["stream"] = {"enabled": True}
    doc["telemetry_hz"] = telemetry_hz
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def leader_config(workdir: Path, rate_hz: float, port: int) -> LeaderSetup:
    """config/sim_leader.yaml on the benchmark's broker, read at `rate_hz`, no hand file."""
    doc = yaml.safe_load(LEADER_CONFIG.read_text(encoding="utf-8"))
    for section, key in ((doc, "model"), (doc["leader"], "follower_model")):
        section[key] = str(LEADER_CONFIG.parent / section[key])
    doc["mqtt"] = {"host": HOST, "port": port}
    doc["lock_file"] = str(workdir / "leader.lock")
    del doc["drivers"]["sim"]["params"]["hand_file"]
    path = workdir / "leader.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return leader_setup(load_config(path), ARM, rate_hz)


async def lead(setup: LeaderSetup, duration_s: float, stream_id: str) -> ScriptedLeader:
    """Run the leader for `duration_s`, then end its stream."""
    hardware, stop = ScriptedLeader(setup), asyncio.Event()
    settings = follower_settings(setup, None, None)
    task = asyncio.create_task(run_leader(setup, settings, stop, stream_id, hardware))
    await asyncio.sleep(duration_s)
    stop.set()
    await task
    return hardware


# -- 1. stream start -> first command -------------------------------------------------------------


async def stream_starts(port: int, count: int) -> dict[str, float]:
    """Stream id → when its first message was published; each stream ends and succeeds before
    the next starts."""
    topics, sent = Topics.for_arm(ARM), {}
    joints = {"shoulder_pan_joint": 0, "elbow_joint": 2}  # name: q index
    async with (
        aiomqtt.Client(
            HOST, port, identifier="bench-stream-starts", socket_options=NODELAY
        ) as client,
        StatusWatcher(client, ARM) as watcher,
    ):
        for k in range(count + 1):  # the first stream (from home) sets up the alternation
            target = {j: float(HOME[i] + (0.05 if k % 2 else -0.05)) for j, i in joints.items()}
            await asyncio.sleep(np.random.default_rng(k).uniform(0.0, 0.02))  # any tick phase
            start = time.monotonic()
            first = {"seq": 1, "id": f"s{k}", "type": "joints", "positions": target}
            await client.publish(topics.stream, json.dumps(first), qos=0)
            await client.publish(
                topics.stream, json.dumps({"seq": 2, "id": f"s{k}", "type": "end"})
            )
            status = await watcher.final(f"s{k}")
            if status != "succeeded":
                raise RuntimeError(f"stream s{k}: {status}")
            if k > 0:
                sent[f"s{k}"] = start
    return sent


def start_latency(workdir: Path, port: int, rate_hz: int, count: int) -> list[float]:
    config = follower_config(workdir, rate_hz, port)
    log_path = workdir / f"starts-{rate_hz}.log"
    with follower(config, log_path, log_level="INFO,armd.control.loop=DEBUG"):
        sent = asyncio.run(stream_starts(port, count))
        time.sleep(0.5)
    first = first_commands(log_path)
    return [first[s] - t for s, t in sent.items() if s in first]


# -- 2. leader read -> follower command -----------------------------------------------------------


def leader_latency(
    workdir: Path, port: int, rate_hz: int, duration_s: float
) -> tuple[list[float], int]:
    """(latencies of the commanded messages, messages read); the leader at the loop rate."""
    config = follower_config(workdir, rate_hz, port)
    log_path = workdir / f"leader-{rate_hz}.log"
    setup = leader_config(workdir, rate_hz, port)
    with (
        follower(config, log_path, log_level="INFO,armd.control.loop=DEBUG"),
        read_times() as reads,
    ):
        asyncio.run(lead(setup, duration_s, f"lead{rate_hz}"))
        time.sleep(0.5)
    text = log_path.read_text(encoding="utf-8", errors="replace")
    commanded = {int(seq): float(t) for _, seq, t in COMMANDED.findall(text)}
    latencies = [commanded[seq] - t for seq, t in reads.reads.items() if seq in commanded]
    return latencies, len(reads.reads)


# -- 3. tracking -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tracking:
    stream_hz: float
    samples: int
    error_p50: float  # rad, the worst of JOINTS at each sample, against the script at that time
    error_p99: float
    error_max: float
    lag_ms: float  # the delay that explains the follower best
    lagged_max: float  # rad, the largest error left at that lag
    missed: int  # the follower's missed ticks during the run
    steal_pct: float


async def track(
    setup: LeaderSetup, port: int, duration_s: float
) -> tuple[list[tuple[float, Array]], float, int]:
    """Lead for `duration_s` while recording the follower's state: (t since the script's start,
    measured JOINTS), the script's start, the follower's missed ticks meanwhile."""
    states: list[dict[str, Any]] = []

    async def record(client: aiomqtt.Client) -> None:
        async for message in client.messages:
            states.append(json.loads(bytes(message.payload)))

    async with aiomqtt.Client(HOST, port, identifier="bench-stream-track") as client:
        await client.subscribe(Topics.for_arm(ARM).state, qos=0)
        recorder = asyncio.create_task(record(client))
        hardware = await lead(setup, duration_s, f"track{setup.rate_hz:g}")
        await asyncio.sleep(0.5)
        recorder.cancel()
        with suppress(asyncio.CancelledError):
            await recorder
    names = ("shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint")
    start = hardware.start
    during = [s for s in states if start <= s["t"] <= start + duration_s]
    samples = [
        (s["t"] - start, np.array([s["joints"][n]["position"] for n in names])) for s in during
    ]
    missed = during[-1]["missed_ticks"] - during[0]["missed_ticks"] if during else -1
    return samples, hardware.start, missed


def tracking_run(workdir: Path, port: int, stream_hz: float, duration_s: float) -> Tracking:
    config = follower_config(workdir, 250, port, telemetry_hz=250.0)
    setup = leader_config(workdir, stream_hz, port)
    with follower(config, workdir / f"track-{stream_hz:g}.log"):
        host0 = CpuTimes.now()
        samples, _, missed = asyncio.run(track(setup, port, duration_s))
        steal = steal_pct(host0, CpuTimes.now())
    samples = [(t, q) for t, q in samples if t >= 1.0]  # from 1 s on: the stream under way
    errors = np.array([np.max(np.abs(q - script(t))) for t, q in samples])
    lags = np.arange(0.0, 0.2, 0.001)
    lagged = [max(float(np.max(np.abs(q - script(t - lag)))) for t, q in samples) for lag in lags]
    best = int(np.argmin(lagged))
    p50, p99 = np.percentile(errors, [50, 99])
    return Tracking(
        stream_hz, len(samples), float(p50), float(p99), float(errors.max()),
        float(lags[best] * 1e3), lagged[best], missed, steal,
    )  # fmt: skip


# -- report ----------------------------------------------------------------------------------------


def latency_row(
    label: str, rate_hz: int, latencies: list[float], ticks: int, extra: str = ""
) -> str:
    if not latencies:
        return f"{rate_hz:>8} {label:>14}   not measured{extra}"
    ms = np.array(latencies) * 1e3
    p50, p99, worst = np.percentile(ms, 50), np.percentile(ms, 99), ms.max()
    target = ticks * 1e3 / rate_hz + ticks  # ticks × period + ticks ms: 1 tick + 1, 2 ticks + 2
    within = 100.0 * np.mean(ms <= target)
    return (f"{rate_hz:>8} {label:>14} {len(ms):>6} {p50:>7.2f} {p99:>7.2f} {worst:>7.2f} "
            f"{target:>7.1f} {within:>7.1f}{extra}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", type=int, nargs="+", default=[250, 500], help="loop Hz")
    parser.add_argument("--stream-rates", type=float, nargs="+", default=[30.0, 60.0, 250.0])
    parser.add_argument("--starts", type=int, default=100, help="stream starts per rate (100)")
    parser.add_argument("--duration", type=float, default=10.0, help="s per leader run (10)")
    parser.add_argument("--quick", action="store_true", help="20 starts, 4 s runs")
    args = parser.parse_args()
    starts, duration = (20, 4.0) if args.quick else (args.starts, args.duration)
    print(machine(), flush=True)
    with (
        tempfile.TemporaryDirectory(prefix="armd-bench-") as tmp,
        mosquitto(Path(tmp), True) as port,
    ):
        workdir = Path(tmp)
        print("\n1-2. latency over MQTT on loopback, ms (the follower daemon a subprocess)")
        print(f"{'loop Hz':>8} {'from':>14} {'n':>6} {'p50':>7} {'p99':>7} {'max':>7} "
              f"{'target':>7} {'% <= t':>7}")  # fmt: skip
        for rate in args.rates:
            host0 = CpuTimes.now()
            latencies = start_latency(workdir, port, rate, starts)
            print(latency_row("stream start", rate, latencies, 1), flush=True)
            latencies, read = leader_latency(workdir, port, rate, duration)
            steal = steal_pct(host0, CpuTimes.now())
            extra = f"  ({len(latencies)} of {read} messages commanded; steal {steal:.2f} %)"
            print(latency_row("leader read", rate, latencies, 2, extra), flush=True)
        print("   targets: stream start -> first command p99 <= 1 tick + 1 ms; leader read ->")
        print("   follower command p99 <= 2 ticks + 2 ms")
        print(f"\n3. tracking: the follower at 250 Hz, the scripted leader ({duration:g} s, three")
        print("   joints, up to 0.94 rad/s) at each stream rate; error = the worst joint's")
        print(
            "   |follower - leader| at the same instant, rad; lagged = the largest left at the lag"
        )
        print(f"{'stream Hz':>9} {'samples':>7} {'p50':>7} {'p99':>7} {'max':>7} {'lag ms':>7} "
              f"{'lagged':>7} {'missed':>6} {'steal %':>7}")  # fmt: skip
        for stream_hz in args.stream_rates:
            r = tracking_run(workdir, port, stream_hz, duration)
            print(f"{r.stream_hz:>9g} {r.samples:>7} {r.error_p50:>7.4f} {r.error_p99:>7.4f} "
                  f"{r.error_max:>7.4f} {r.lag_ms:>7.1f} {r.lagged_max:>7.4f} {r.missed:>6} "
                  f"{r.steal_pct:>7.2f}", flush=True)  # fmt: skip
        print("   target: a 250 Hz stream followed with no missed tick")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
