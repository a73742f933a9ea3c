"""What holding still costs: the daemon on config/sim.yaml, idle (no goal), per process.

    python bench/idle.py [--duration 30] [--rates 250 500]

For each rate: `python -m armd run` as a subprocess on a private Mosquitto, ready and holding,
then over --duration seconds the CPU (% of one core) and memory (VmRSS, MiB) of the daemon and
of its control process separately, the loop's missed ticks, and the host's CPU steal time during
the run. Reports only; the targets are printed beside the figures.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

# bench/ holds scripts named like packages (drivers.py, kinematics.py): keep it off the path while
# importing armd's packages, then put it back for the sibling bench modules.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.append(str(_HERE))
import harness  # noqa: E402

SETTLE_S = 3.0  # after ready: imports done, caches warm


def own_cpu_seconds(pid: int) -> float:
    """CPU time of `pid` alone (not its children), s."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / harness.os.sysconf("SC_CLK_TCK")


def own_rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    line = next(v for v in status.splitlines() if v.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024.0


def control_pid(daemon_pid: int) -> int:
    children = Path(f"/proc/{daemon_pid}/task/{daemon_pid}/children").read_text().split()
    return int(children[0])


def measure(workdir: Path, port: int, rate_hz: int, duration_s: float) -> str:
    config = harness.write_config(workdir, rate_hz, port)
    log_path = workdir / f"idle-{rate_hz}.log"
    with harness.daemon_process(config, log_path) as daemon:
        time.sleep(SETTLE_S)
        control = control_pid(daemon.pid)
        pids = {"daemon": daemon.pid, "control": control}
        cpu0 = {name: own_cpu_seconds(pid) for name, pid in pids.items()}
        host0, wall0 = harness.CpuTimes.now(), time.monotonic()
        time.sleep(duration_s)
        wall = time.monotonic() - wall0
        cpu = {name: (own_cpu_seconds(pid) - cpu0[name]) / wall * 100 for name, pid in pids.items()}
        rss = {name: own_rss_mb(pid) for name, pid in pids.items()}
        steal = harness.steal_pct(host0, harness.CpuTimes.now())
    timing = harness.loop_timing(log_path)
    return (
        f"{rate_hz:>6} {cpu['daemon']:>9.1f} {cpu['control']:>9.1f} "
        f"{cpu['daemon'] + cpu['control']:>7.1f} {rss['daemon']:>9.1f} {rss['control']:>9.1f} "
        f"{rss['daemon'] + rss['control']:>7.1f} {timing.missed:>6} {steal:>7.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=30.0, help="s per rate (30)")
    parser.add_argument("--rates", type=int, nargs="+", default=[250, 500], help="Hz")
    args = parser.parse_args()
    print(harness.machine(), flush=True)
    print(f"\nidle holding on the sim driver, {args.duration:g} s per rate "
          "(CPU: % of one core; RSS: MiB)")  # fmt: skip
    print(f"{'rate':>6} {'CPU dmn':>9} {'CPU ctl':>9} {'CPU sum':>7} {'RSS dmn':>9} "
          f"{'RSS ctl':>9} {'RSS sum':>7} {'missed':>6} {'steal %':>7}")  # fmt: skip
    with (
        tempfile.TemporaryDirectory(prefix="armd-idle-") as tmp,
        harness.mosquitto(Path(tmp), nodelay=True) as port,
    ):
        for rate in args.rates:
            print(measure(Path(tmp), port, rate, args.duration), flush=True)
    print("targets at 250 Hz: CPU sum <= 8 %; RSS control <= 80 MiB, sum <= 220 MiB")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
