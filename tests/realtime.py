"""Simulated devices answer like hardware on a busy machine: the tests run every ``armd
sim-device`` at real-time priority, as a device's firmware answers whatever the robot computer
does. Without it, a CPU-bound neighbour (CI machines are shared; `stress-ng --cpu 2` in the
loaded runs) delays a simulated servo's reply past the deadline its driver computes from the baud
rate, and a test fails for a reason that is no bug. Where the kernel refuses the priority (no
root, no RLIMIT_RTPRIO) the device says so in its log and runs at normal priority.

`StallProbe` is the machine's own reference where a test counts missed deadlines: it allows one
per stall it measured, never more."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

__all__ = ["SIM_PRIORITY", "StallProbe", "with_sim_priority"]

# Below the control process's default (armd.config: realtime_priority 50): the loop still wins.
SIM_PRIORITY = 20


def with_sim_priority(args: Sequence[str]) -> list[str]:
    """``armd`` arguments with ``--realtime-priority`` added after ``sim-device KIND``."""
    args = [str(a) for a in args]
    if len(args) >= 2 and args[0] == "sim-device" and not args[1].startswith("-"):
        return [*args[:2], "--realtime-priority", str(SIM_PRIORITY), *args[2:]]
    return args


class StallProbe:
    """The platform's own reference, in a test's process: a thread that sleeps `period_s` again
    and again and counts the wake-ups later than `late_s` (the stalls: a vCPU the host did not run,
    a core another process held). A driver waiting on a reply deadline shorter than a stall can
    time out through no fault of its own or of the device; a test that counts timeouts allows one
    per stall the probe saw, and none otherwise. Use as a context manager."""

    def __init__(self, late_s: float, period_s: float = 0.002) -> None:
        self.late_s = late_s
        self.period_s = period_s
        self.stalls = 0
        self.worst_s = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stall-probe", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            before = time.monotonic()
            time.sleep(self.period_s)
            late = time.monotonic() - before - self.period_s
            self.worst_s = max(self.worst_s, late)
            if late >= self.late_s:
                self.stalls += 1

    def __enter__(self) -> StallProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)
