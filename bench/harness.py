"""Helpers shared by the daemon benchmarks (loop.py, soak.py): a private Mosquitto, a config
derived from config/sim.yaml, `python -m armd run` as a subprocess, its final "loop timing" line,
and CPU / memory from /proc.

Import it after the `armd`, `drivers` and `kinematics` packages (the scripts here take their own
folder off `sys.path` first, then put it back for this module).
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
SIM_CONFIG = ROOT / "config" / "sim.yaml"
HOST = "127.0.0.1"
# TCP_NODELAY, as on armd's own clients (armd.config.broker): without it, a goal written while the
# client's previous small packet (a PUBACK, a PINGREQ) waits for its delayed ACK is held back by
# Nagle's algorithm for up to ~40 ms.
NODELAY = ((socket.IPPROTO_TCP, socket.TCP_NODELAY, 1),)
HOME = np.array([0.0, -np.pi / 2, np.pi / 2, -np.pi / 2, -np.pi / 2, 0.0])  # sim.yaml, rad
_TIMING = re.compile(
    r"loop timing: (\d+) ticks, (\d+) missed, period error p50 ([\d.]+) ms, p99 ([\d.]+) ms, "
    r"max ([\d.]+) ms(?:; limiter interventions (\d+))?"
)


def machine() -> str:
    cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    model = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
    p50, p99 = steadiness_ms()
    return (
        f"machine: {os.cpu_count()} CPUs, {model.group(1) if model else 'unknown CPU'}; "
        f"load average {os.getloadavg()[0]:.2f}\n"
        f"CPU steadiness: a fixed piece of work (~0.5 ms), 200 times with 2 ms pauses: p50 "
        f"{p50:.3f} ms, p99 {p99:.3f} ms (p99/p50 {p99 / p50:.1f}; 1.0 = perfectly steady)\n"
        f"Python {platform.python_version()}; {datetime.now().isoformat(timespec='seconds')}"
    )


@dataclass(frozen=True)
class CpuTimes:
    """The host's aggregate CPU time counters from /proc/stat (USER_HZ ticks)."""

    total: int
    steal: int

    @classmethod
    def now(cls) -> CpuTimes:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = [int(v) for v in stat.readline().split()[1:]]
        # user nice system idle iowait irq softirq steal [guest guest_nice: already in user]
        return cls(total=sum(fields[:8]), steal=fields[7] if len(fields) > 7 else 0)


def steal_pct(before: CpuTimes, after: CpuTimes) -> float:
    """The share of CPU time the hypervisor gave to other guests between two readings (%):
    ticks a virtual machine misses for that reason are the machine's, not armd's."""
    total = after.total - before.total
    return 100.0 * (after.steal - before.steal) / total if total > 0 else 0.0


def steadiness_ms() -> tuple[float, float]:
    """How steady the CPU is now (shared VMs lose it to their neighbours): the median and p99
    time of the same computation, repeated with pauses like a control loop's."""
    durations = []
    for _ in range(200):
        start = time.perf_counter()
        total = 0
        for i in range(5000):
            total += i * i
        durations.append(time.perf_counter() - start)
        time.sleep(0.002)
    p50, p99 = np.percentile(durations, [50, 99]) * 1e3
    return float(p50), float(p99)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


@contextmanager
def mosquitto(workdir: Path, nodelay: bool, options: Sequence[str] = ()) -> Iterator[int]:
    """A private broker on a free loopback port; yields the port. `nodelay`: TCP_NODELAY on its
    client sockets (Mosquitto's default is off: Nagle's algorithm delays small messages);
    `options`: more mosquitto.conf lines."""
    port = free_port()
    conf = workdir / f"mosquitto-{port}.conf"
    lines = [f"listener {port} {HOST}", "allow_anonymous true", "persistence false"]
    lines.append(f"set_tcp_nodelay {'true' if nodelay else 'false'}")
    lines.extend(options)
    if os.geteuid() == 0:  # as root, mosquitto would drop to a user who cannot read workdir
        lines.append("user root")
    conf.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with (workdir / f"mosquitto-{port}.out").open("wb") as out:
        broker = subprocess.Popen(
            ["mosquitto", "-c", str(conf)], stdout=out, stderr=out, start_new_session=True
        )
    try:
        deadline = time.monotonic() + 10.0
        while True:
            with suppress(OSError), socket.create_connection((HOST, port), timeout=1.0):
                break
            if broker.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"mosquitto did not start on port {port}")
            time.sleep(0.02)
        yield port
    finally:
        stop_process(broker)


def stop_process(process: subprocess.Popen[bytes], timeout_s: float = 15.0) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def write_config(workdir: Path, rate_hz: int, port: int, root: Path = ROOT) -> Path:
    """`root`'s config/sim.yaml at `rate_hz`, on the benchmark's broker, its lock file in
    `workdir`."""
    sim_config = root / SIM_CONFIG.relative_to(ROOT)
    doc = yaml.safe_load(sim_config.read_text(encoding="utf-8"))
    doc["loop_hz"] = rate_hz
    doc["model"] = str(sim_config.parent / doc["model"])  # relative to the new file otherwise
    if isinstance(doc.get("collision"), dict) and "geometry" in doc["collision"]:
        doc["collision"]["geometry"] = str(sim_config.parent / doc["collision"]["geometry"])
    doc["mqtt"] = {**doc.get("mqtt", {}), "host": HOST, "port": port}
    doc["lock_file"] = str(workdir / "armd.lock")
    path = workdir / f"sim-{rate_hz}{'' if root == ROOT else '-' + root.name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


@contextmanager
def daemon_process(
    config: Path, log_path: Path, nice: int = 0, log_level: str = "INFO", root: Path = ROOT
) -> Iterator[subprocess.Popen[bytes]]:
    """`python -m armd --log-level LEVEL run --config config` in `root` (its packages are the
    ones imported: another checkout, see `checkout`), logging to `log_path`, at niceness `nice`
    (as the unit's Nice=; below 0 needs root); yields it once ready (its "ready:" log line) and
    sends it SIGTERM on any exit."""
    env = {k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"}
    command = [
        sys.executable,
        "-m",
        "armd",
        "--log-level",
        log_level,
        "run",
        "--config",
        str(config),
    ]
    if nice:
        command = ["nice", "-n", str(nice), *command]
    with log_path.open("wb") as log:
        daemon = subprocess.Popen(
            command, cwd=root, env=env, stdout=log, stderr=log, start_new_session=True
        )
    try:
        wait_ready(daemon, log_path)
        yield daemon
    finally:
        stop_process(daemon)


@contextmanager
def checkout(revision: str) -> Iterator[Path]:
    """This repository at `revision` in a temporary git worktree, its kinematics kernels compiled
    (`python -m armd compile` there: ``-m`` imports the worktree's packages, not the installed
    ones); removed on exit. For measuring a baseline beside the working tree in one run."""
    path = Path(tempfile.mkdtemp(prefix="armd-baseline-"))
    git = ["git", "-C", str(ROOT)]
    subprocess.run([*git, "worktree", "add", "--detach", str(path), revision], check=True,
                   capture_output=True)  # fmt: skip
    try:
        subprocess.run([sys.executable, "-m", "armd", "compile"], cwd=path, check=True,
                       capture_output=True)  # fmt: skip
        yield path
    finally:
        subprocess.run(
            [*git, "worktree", "remove", "--force", str(path)], check=False, capture_output=True
        )


def wait_ready(daemon: subprocess.Popen[bytes], log_path: Path, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s  # a cold numba cache compiles for ~25 s
    while "ready:" not in log_path.read_text(encoding="utf-8", errors="replace"):
        if daemon.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the daemon did not become ready:\n{log_path.read_text()}")
        time.sleep(0.05)


@dataclass(frozen=True)
class LoopTiming:
    """The daemon's last "loop timing" log line."""

    ticks: int
    missed: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    interventions: int | None  # limiter interventions (None: not in the line)


def loop_timing(log_path: Path) -> LoopTiming:
    found = _TIMING.findall(log_path.read_text(encoding="utf-8", errors="replace"))
    if not found:
        raise RuntimeError(f"no 'loop timing' line in {log_path}")
    ticks, missed, p50, p99, worst, interventions = found[-1]
    return LoopTiming(
        int(ticks),
        int(missed),
        float(p50),
        float(p99),
        float(worst),
        int(interventions) if interventions else None,
    )


def cpu_seconds(pid: int) -> float:
    """CPU time of `pid` and its children (the daemon and its control process), s."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    total = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
    with suppress(OSError):
        for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
            with suppress(OSError):  # it may have ended meanwhile
                total += cpu_seconds(int(child))
    return total


def rss_mb(pid: int, field: str = "VmRSS") -> float | None:
    """`field` of /proc/<pid>/status (VmRSS: resident memory now, VmHWM: its peak) in MiB, summed
    over the process and its children (the daemon and its control process); None once the
    process has exited."""
    with suppress(OSError):
        status = Path(f"/proc/{pid}/status").read_text()
        found = re.search(rf"^{field}:\s*(\d+) kB", status, re.M)
        if found is None:
            return None
        total = int(found.group(1)) / 1024.0
        for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
            total += rss_mb(int(child), field) or 0.0
        return total
    return None


@dataclass(frozen=True)
class PlatformWakeups:
    """cyclictest's wake-ups at one period (C, locked memory, SCHED_FIFO, no work at all): how
    often this machine alone wakes a real-time thread later than a period, i.e. the missed ticks
    that no program could avoid here."""

    cycles: int
    late: int  # woken one period or more after the deadline
    max_ms: float


@contextmanager
def platform_wakeups(period_s: float, duration_s: float) -> Iterator[list[PlatformWakeups]]:
    """Run `cyclictest` (Debian's rt-tests) beside a benchmark for `duration_s` at `period_s`,
    at real-time priority 1 (below the control process, which it never delays); the list gets
    its result on exit, or stays empty when cyclictest is not installed or could not run."""
    found: list[PlatformWakeups] = []
    if shutil.which("cyclictest") is None:
        yield found
        return
    period_us = max(1, round(period_s * 1e6))
    # --laptop: leave /dev/cpu_dma_latency alone (by default cyclictest holds it at 0, which
    # keeps idle CPUs polling and would make the benchmark's own figures better than they are)
    command = [
        "cyclictest", "--mlockall", "--quiet", "--laptop", "--priority=1",
        f"--interval={period_us}", f"--duration={max(1, round(duration_s))}",
        f"--histogram={4 * period_us}",
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        yield found
    finally:
        try:
            out, _ = process.communicate(timeout=duration_s + 30.0)
        except subprocess.TimeoutExpired:
            process.kill()
            out, _ = process.communicate()
        parsed = _parse_cyclictest(out.decode(errors="replace"), period_us)
        if parsed is not None:
            found.append(parsed)


def _parse_cyclictest(text: str, period_us: int) -> PlatformWakeups | None:
    """cyclictest's histogram: lines "latency_us count", then "# Total", "# Max Latencies" and
    "# Histogram Overflows" (latencies beyond the histogram, all later than a period here)."""
    cycles = late = 0
    max_us = overflows = None
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0].isdigit() and fields[1].isdigit():
            latency_us, count = int(fields[0]), int(fields[1])
            cycles += count
            late += count if latency_us >= period_us else 0
        elif line.startswith("# Max Latencies:") and len(fields) > 3:
            max_us = int(fields[3])
        elif line.startswith("# Histogram Overflows:") and len(fields) > 3:
            overflows = int(fields[3])
    if max_us is None or overflows is None:
        return None
    return PlatformWakeups(cycles + overflows, late + overflows, max_us / 1e3)
