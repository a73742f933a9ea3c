"""What holding still costs: the daemon on config/sim.yaml, idle (no goal), per process.

    python bench/idle.py [--duration 30] [--rates 250 500] [--repeats 1] [--baseline REV]

For each rate: `python -m armd run` as a subprocess on a private Mosquitto, ready and holding,
then over --duration seconds the CPU (% of one core) and memory (VmRSS, MiB) of the daemon and
of its control process separately, the loop's missed ticks, and the host's CPU steal time during
the run. With --repeats, each rate is measured that many times and the medians follow. With
--baseline, the code at that git revision (a temporary worktree) is measured too, alternating
with the working tree's run by run, and the ratio of the medians is printed: this machine's
idle cost drifts by a third within an hour, so compare within one run. Reports only; the
targets are printed beside the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

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


def measure(
    workdir: Path, port: int, rate_hz: int, duration_s: float, root: Path = harness.ROOT
) -> tuple[float, ...]:
    """(CPU daemon, CPU control, RSS daemon, RSS control, missed, steal %) of one run."""
    config = harness.write_config(workdir, rate_hz, port, root)
    log_path = workdir / f"idle-{rate_hz}.log"
    with harness.daemon_process(config, log_path, root=root) as daemon:
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
    return cpu["daemon"], cpu["control"], rss["daemon"], rss["control"], timing.missed, steal


def row(label: str, rate_hz: int, run: tuple[float, ...]) -> str:
    cpu_d, cpu_c, rss_d, rss_c, missed, steal = run
    return (
        f"{label:<9} {rate_hz:>6} {cpu_d:>9.1f} {cpu_c:>9.1f} {cpu_d + cpu_c:>7.1f} "
        f"{rss_d:>9.1f} {rss_c:>9.1f} {rss_d + rss_c:>7.1f} {missed:>6.0f} {steal:>7.2f}"
    )


def medians(runs: list[tuple[float, ...]]) -> tuple[float, ...]:
    sums = [(r[0] + r[1], r[2] + r[3]) for r in runs]  # the sums' own medians, not sums of them
    cpu_d, cpu_c, rss_d, rss_c, missed, steal = (
        float(np.median(c)) for c in zip(*runs, strict=True)
    )
    return cpu_d, cpu_c, rss_d, rss_c, missed, steal, *map(float, np.median(sums, axis=0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=30.0, help="s per rate (30)")
    parser.add_argument("--rates", type=int, nargs="+", default=[250, 500], help="Hz")
    parser.add_argument("--repeats", type=int, default=1, help="runs per rate (1)")
    parser.add_argument("--baseline", metavar="REV", help="also measure this git revision")
    args = parser.parse_args()
    print(harness.machine(), flush=True)
    print(f"\nidle holding on the sim driver, {args.duration:g} s per run "
          "(CPU: % of one core; RSS: MiB)")  # fmt: skip
    print(f"{'code':<9} {'rate':>6} {'CPU dmn':>9} {'CPU ctl':>9} {'CPU sum':>7} {'RSS dmn':>9} "
          f"{'RSS ctl':>9} {'RSS sum':>7} {'missed':>6} {'steal %':>7}")  # fmt: skip
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="armd-idle-")))
        port = stack.enter_context(harness.mosquitto(tmp, nodelay=True))
        roots = {"this": harness.ROOT}
        if args.baseline:
            baseline = stack.enter_context(harness.checkout(args.baseline))
            roots = {args.baseline[:9]: baseline} | roots
        for rate in args.rates:
            runs: dict[str, list[tuple[float, ...]]] = {label: [] for label in roots}
            for _ in range(args.repeats):
                for label, root in roots.items():  # alternating: the machine drifts
                    runs[label].append(measure(tmp, port, rate, args.duration, root))
                    print(row(label, rate, runs[label][-1]), flush=True)
            if args.repeats > 1 or len(roots) > 1:
                report_medians(rate, runs)
    print("targets at 250 Hz: CPU sum <= 8 %; RSS control <= 80 MiB, sum <= 220 MiB")


def report_medians(rate_hz: int, runs: dict[str, list[tuple[float, ...]]]) -> None:
    sums = {}
    for label, label_runs in runs.items():
        cpu_d, cpu_c, rss_d, rss_c, missed, steal, cpu_sum, rss_sum = medians(label_runs)
        sums[label] = cpu_sum
        print(f"{'median':<9} {rate_hz:>6} {cpu_d:>9.1f} {cpu_c:>9.1f} {cpu_sum:>7.1f} "
              f"{rss_d:>9.1f} {rss_c:>9.1f} {rss_sum:>7.1f} {missed:>6.0f} {steal:>7.2f}  "
              f"{label}, {len(label_runs)} runs")  # fmt: skip
    if len(sums) == 2:
        (base, base_cpu), (_, this_cpu) = sums.items()
        print(f"  CPU sum, this / {base}: {this_cpu / base_cpu:.2f}")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
