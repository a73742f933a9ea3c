"""Simulated devices answer like hardware on a busy machine: the tests run every ``armd
sim-device`` at real-time priority, as a device's firmware answers whatever the robot computer
does. Without it, a CPU-bound neighbour (CI machines are shared; `stress-ng --cpu 2` in the
loaded runs) delays a simulated servo's reply past the deadline its driver computes from the baud
rate, and a test fails for a reason that is no bug. Where the kernel refuses the priority (no
root, no RLIMIT_RTPRIO) the device says so in its log and runs at normal priority.

`StallProbe` is the machine's own reference where a test counts missed deadlines: it allows one
per stall it measured, never more. `PtyStallProbe` is the reference of a simulated serial chain:
the kernel's pty path, which a device at real-time priority does not speed up."""

from __future__ import annotations

import os
import select
import threading
import time
import tty
from collections.abc import Sequence

__all__ = ["SIM_PRIORITY", "PtyStallProbe", "StallProbe", "with_sim_priority"]

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


class PtyStallProbe:
    """The kernel's half of a simulated serial chain, timed: a thread that writes one byte into
    a pseudo-terminal pair of its own every `period_s`, reads it on the other end, answers it back
    and reads the answer, as a request and its reply cross a chain's pty. Bytes written to a pty
    reach the other end through the tty layer's flip-buffer work, run by a kernel worker at normal
    priority: a CPU-bound neighbour can delay it by tens of milliseconds while a device at
    real-time priority and a `StallProbe` see nothing. Every round trip of at least `late_s` is a
    stall; `stalls_s` holds how long each lasted. Use as a context manager."""

    def __init__(self, late_s: float, period_s: float = 0.005) -> None:
        self.late_s = late_s
        self.period_s = period_s
        self.round_trips = 0
        self.stalls_s: list[float] = []
        self.worst_s = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pty-stall-probe", daemon=True)

    def timeouts_allowed(self, deadline_s: float) -> int:
        """How many transactions with a reply deadline of `deadline_s` the stalls may have cost:
        a stall of L delays the one in flight and each started while it lasts, 1 + L // deadline."""
        return sum(1 + int(stall_s // deadline_s) for stall_s in self.stalls_s)

    def _run(self) -> None:
        master, slave = os.openpty()
        try:
            tty.setraw(slave)  # no echo, no line discipline: bytes as a serial port passes them
            while not self._stop.wait(self.period_s):
                before = time.monotonic()
                _cross(master, slave)  # the request
                _cross(slave, master)  # the reply
                took_s = time.monotonic() - before
                self.round_trips += 1
                self.worst_s = max(self.worst_s, took_s)
                if took_s >= self.late_s:
                    self.stalls_s.append(took_s)
        finally:
            os.close(slave)
            os.close(master)

    def __enter__(self) -> PtyStallProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)


def _cross(sender: int, receiver: int) -> None:
    """One byte from `sender` until `receiver` has read it."""
    os.write(sender, b"\x55")
    while not select.select([receiver], [], [], 1.0)[0]:
        pass
    os.read(receiver, 64)
