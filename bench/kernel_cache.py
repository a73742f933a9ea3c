"""What keeping numba's cache fresh costs a warm start (`kinematics.kernel_cache`).

    python bench/kernel_cache.py [--repeats 15]

1. In this process, once the kernels are loaded: `drop_stale_entries` on the kinematics kernels'
   and on the collision kernels' entries, the cache warm and stamped (what every start pays:
   reading and parsing their sources, hashing them, reading the stamps), median over `--repeats`.
2. A warm start as `armd compile` makes it (both groups of kernels loaded from numba's cache,
   Python and numba imported), in a fresh process each time: with the check, and with it replaced
   by a no-op (the reference), alternating run by run; medians and their ratio.

Compiles the kernels first if the cache is cold. Prints the CPU steal time over the run: compare
the ratio from one run, not absolute times across runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
from kinematics import compiled  # noqa: E402
from kinematics.collision import compiled as collision_compiled  # noqa: E402
from kinematics.kernel_cache import drop_stale_entries  # noqa: E402

sys.path.append(str(_HERE))
from harness import CpuTimes, steal_pct  # noqa: E402

ROOT = _HERE.parent

START = """
import sys, time
started = time.perf_counter()
from kinematics import compiled
from kinematics.collision.compiled import load_collision_kernels
if sys.argv[1] == "reference":
    compiled.drop_stale_entries = lambda kernels, report: 0
lines = []
compiled.load_kernels(progress=lines.append)
load_collision_kernels(progress=lines.append)
assert not lines, lines  # warm: nothing compiled, nothing removed
print(time.perf_counter() - started)
"""


def check_ms(repeats: int) -> dict[str, float]:
    """Median time of one `drop_stale_entries` per group of kernels, ms."""
    groups = {
        "kinematics kernels (4 entry modules, 3 helpers)": compiled._entries(),
        "collision kernels (1 entry module, 5 helpers)": collision_compiled._entries(),
    }
    found = {}
    for name, entries in groups.items():
        kernels = [kernel for kernel, _ in entries.values()]
        samples = []
        for _ in range(repeats):
            started = time.perf_counter()
            removed = drop_stale_entries(kernels, print)
            samples.append((time.perf_counter() - started) * 1e3)
            assert removed == 0
        found[name] = statistics.median(samples)
    return found


def start_s(mode: str) -> float:
    done = subprocess.run(
        [sys.executable, "-c", START, mode],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if done.returncode:
        raise RuntimeError(f"a warm start ({mode}) failed:\n{done.stderr}")
    return float(done.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    compiled.load_kernels(progress=print)
    collision_compiled.load_collision_kernels(progress=print)
    before = CpuTimes.now()
    print("drop_stale_entries, warm and stamped (median):")
    for name, ms in check_ms(args.repeats).items():
        print(f"  {name}: {ms:.2f} ms")
    starts: dict[str, list[float]] = {"checked": [], "reference": []}
    for _ in range(args.repeats):
        for mode, samples in starts.items():
            samples.append(start_s(mode))
    checked, reference = (statistics.median(starts[m]) for m in ("checked", "reference"))
    print(f"warm start, both groups of kernels, {args.repeats} processes each (median):")
    print(f"  with the check: {checked:.3f} s; without (reference): {reference:.3f} s")
    print(f"  ratio {checked / reference:.3f}; difference {(checked - reference) * 1e3:.0f} ms")
    steal = steal_pct(before, CpuTimes.now())
    print(f"CPU steal time during the run: {steal:.2f} %; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
