"""Simulated devices answer like hardware on a busy machine: the tests run every ``armd
sim-device`` at real-time priority, as a device's firmware answers whatever the robot computer
does. Without it, a CPU-bound neighbour (CI machines are shared; `stress-ng --cpu 2` in the
loaded runs) delays a simulated servo's reply past the deadline its driver computes from the baud
rate, and a test fails for a reason that is no bug. Where the kernel refuses the priority (no
root, no RLIMIT_RTPRIO) the device says so in its log and runs at normal priority.

`StallProbe` is the machine's own reference where a test counts missed deadlines: it allows one
per stall it measured, never more. `PtyStallProbe` is the reference of a simulated serial chain:
the kernel's pty path, which a device at real-time priority does not speed up; `UdpStallProbe`
the same of simulated CAN devices on `udp_multicast`: the kernel's loopback path. With `cpus`,
either also times each CPU at the devices' priority: a device in a process of its own is held
up when the CPU it runs on is (a vCPU the host stalled), which a probe's thread elsewhere misses."""

from __future__ import annotations

import contextlib
import logging
import os
import select
import socket
import subprocess
import sys
import threading
import time
import tty
from collections.abc import Iterator, Sequence
from typing import Protocol

__all__ = [
    "SIM_PRIORITY",
    "PtyStallProbe",
    "StallProbe",
    "UdpStallProbe",
    "at_sim_priority",
    "held_long_enough",
    "wait_out_stalls",
    "with_sim_priority",
]

log = logging.getLogger(__name__)

# Below the control process's default (armd.config: realtime_priority 50): the loop still wins.
SIM_PRIORITY = 20


def held_long_enough(held_s: float, bound_s: float, period_s: float) -> bool:
    """Whether a hold-up of `held_s` (a stall probe's, a path's) could have tripped a deadline
    of `bound_s` that a loop of period `period_s` keeps: the deadline less two periods (the last
    message may have come a period before the hold-up, the check a period after it)."""
    return held_s >= bound_s - 2 * period_s


def with_sim_priority(args: Sequence[str]) -> list[str]:
    """``armd`` arguments with ``--realtime-priority`` added after ``sim-device KIND``."""
    args = [str(a) for a in args]
    if len(args) >= 2 and args[0] == "sim-device" and not args[1].startswith("-"):
        return [*args[:2], "--realtime-priority", str(SIM_PRIORITY), *args[2:]]
    return args


@contextlib.contextmanager
def at_sim_priority() -> Iterator[bool]:
    """The calling thread at SCHED_FIFO `SIM_PRIORITY`, and so every thread it starts meanwhile
    (a Linux thread inherits its creator's scheduling): an in-process rig's control loop, its
    driver's I/O thread and its simulated devices' thread then run as the daemon's control
    process and a sim-device do, and a CPU-bound neighbour no longer starves them (of all that
    stalled a normal-priority thread for up to 1.6 s at load 7, a real-time one saw 159 ms at
    worst: the kernel's pty path). Yields whether the kernel allowed it (no root, no
    RLIMIT_RTPRIO: normal priority, said in the log). Nests: the thread's scheduling before is
    restored on exit."""
    policy, param = os.sched_getscheduler(0), os.sched_getparam(0)
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(SIM_PRIORITY))
    except OSError as exc:
        log.warning("real-time priority refused (%s): the rig runs at normal priority", exc)
        yield False
        return
    try:
        yield True
    finally:
        os.sched_setscheduler(0, policy, param)


class StallProbe:
    """The platform's own reference, in a test's process: a thread that sleeps `period_s` again
    and again and counts the wake-ups later than `late_s` (the stalls: a vCPU the host did not run,
    a core another process held). A driver waiting on a reply deadline shorter than a stall can
    time out through no fault of its own or of the device; a test that counts timeouts allows one
    per stall the probe saw, and none otherwise. `longest_s(since)`: the longest stall since
    then. Use as a context manager."""

    def __init__(self, late_s: float, period_s: float = 0.002) -> None:
        self.late_s = late_s
        self.period_s = period_s
        self.stalls = 0
        self.worst_s = 0.0
        self._held: list[tuple[float, float]] = []  # (from, until): a wake-up late_s or later
        self._due = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stall-probe", daemon=True)

    def longest_s(self, since: float) -> float:
        """The longest stall since `since` (`time.monotonic`), the one under way included."""
        return _longest([*self._held, (self._due, time.monotonic())], since, self.late_s)

    def _run(self) -> None:
        while not self._stop.is_set():
            before = time.monotonic()
            self._due = before + self.period_s
            time.sleep(self.period_s)
            after = time.monotonic()
            late = after - self._due
            self.worst_s = max(self.worst_s, late)
            if late >= self.late_s:
                self.stalls += 1
                self._held.append((self._due, after))

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
    stall; `stalls_s` holds how long each lasted. `stalled_s(since)` is how long the probe was
    held up since then, its own late wake-ups included: the reference of a peer in this process
    (a simulated chain's thread at normal priority), which waits for the same CPU, interpreter
    lock and pty path. With `cpus`, `longest_s` and `timeouts_allowed` add the spans each CPU did
    not run a thread at the devices' priority (`_CpuClocks`): the reference of devices in
    processes of their own at that priority. Use as a context manager."""

    def __init__(self, late_s: float, period_s: float = 0.005, cpus: bool = False) -> None:
        self.late_s = late_s
        self.period_s = period_s
        self.round_trips = 0
        self._stalls: list[tuple[float, float]] = []  # (from, until): round trips of late_s or more
        self.worst_s = 0.0
        self._held: list[tuple[float, float]] = []  # (from, until): the probe held up
        self._due = time.monotonic()  # when the round trip under way was due to start
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pty-stall-probe", daemon=True)
        self.cpus = _CpuClocks(late_s) if cpus else None

    @property
    def stalls_s(self) -> list[float]:
        """How long each stall (a round trip of `late_s` or more) took."""
        return [until - start for start, until in self._stalls]

    def stalled_s(self, since: float) -> float:
        """How long since `since` (`time.monotonic`) the probe was held up by `late_s` or more
        past when a round trip was due to start, until it was done: the spans it finished and
        the one under way; with `cpus`, each CPU's hold-ups too (a chain in a process of its own
        waits while the host holds its CPU up, where the pty path may not); overlapping
        hold-ups count once."""
        now = time.monotonic()
        spans = [*self._held, (self._due, now)]
        if self.cpus is not None:
            spans += self.cpus.spans()
        held = [
            (max(start, since), until)
            for start, until in spans
            if until - start >= self.late_s and until > since
        ]
        return sum(until - start for start, until in _merged(held))

    def longest_s(self, since: float, bridge_s: float = 0.0) -> float:
        """The longest of the hold-ups `stalled_s` adds up, and with `cpus` those of each CPU;
        with `bridge_s`, hold-ups less than that apart count as one (a path slow again and again:
        a peer that asks once a loop period may not have asked in the short while it was
        quick)."""
        now = time.monotonic()
        spans = [*self._held, (self._due, now)]
        if self.cpus is not None:
            spans += self.cpus.spans()
        return _longest(spans, since, self.late_s, bridge_s)

    def timeouts_allowed(self, deadline_s: float) -> int:
        """How many transactions with a reply deadline of `deadline_s` the stalls may have cost:
        a stall of L delays the one in flight and each started while it lasts, 1 + L // deadline.
        With `cpus`, each CPU's hold-ups count too; hold-ups that overlap count as one."""
        spans = list(self._stalls)
        if self.cpus is not None:
            spans += self.cpus.spans()
        merged = _merged([span for span in spans if span[1] - span[0] >= self.late_s])
        return sum(1 + int((until - start) // deadline_s) for start, until in merged)

    def _open_pair(self) -> tuple[int, int]:
        """The two ends the probe's byte crosses between: a pty's master and slave."""
        master, slave = os.openpty()
        tty.setraw(slave)  # no echo, no line discipline: bytes as a serial port passes them
        return master, slave

    def _run(self) -> None:
        master, slave = self._open_pair()
        try:
            self._due = time.monotonic() + self.period_s
            while not self._stop.wait(self.period_s):
                before = time.monotonic()
                _cross(master, slave)  # the request
                _cross(slave, master)  # the reply
                after = time.monotonic()
                took_s = after - before
                self.round_trips += 1
                self.worst_s = max(self.worst_s, took_s)
                if took_s >= self.late_s:
                    self._stalls.append((before, after))
                if after - self._due >= self.late_s:
                    self._held.append((self._due, after))
                self._due = after + self.period_s
        finally:
            os.close(slave)
            os.close(master)

    def __enter__(self) -> PtyStallProbe:
        self._thread.start()
        if self.cpus is not None:
            self.cpus.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)
        if self.cpus is not None:
            self.cpus.stop()


class UdpStallProbe(PtyStallProbe):
    """`PtyStallProbe` over loopback UDP instead of a pty: the path python-can's `udp_multicast`
    frames take between processes (a datagram sent on loopback is received in the kernel's
    network softirq, which a CPU-bound neighbour can delay as it delays a pty's flip-buffer
    work, while the processes at both ends run at real-time priority)."""

    def _open_pair(self) -> tuple[int, int]:
        ends = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(2)]
        for end in ends:
            end.bind(("127.0.0.1", 0))
        ends[0].connect(ends[1].getsockname())
        ends[1].connect(ends[0].getsockname())
        return ends[0].detach(), ends[1].detach()


class _CpuClocks:
    """A simulated device's own hold-ups, per CPU: a small process pinned to each CPU the tests
    may use, at `SIM_PRIORITY` when the kernel allows it (as the devices run), sleeping
    `period_s` again and again and reporting each wake-up `late_s` or more late: a span that CPU
    did not run a device at that priority, a vCPU the host did not run (these VMs do not count
    it as steal) or real-time work above it (a control process). The scheduler does not move a
    task off a CPU the host stalls, so a device that was on it waits as long, while a probe's
    single thread on the other CPU sees nothing. Processes, not threads: a thread would wait for
    the interpreter lock a normal-priority thread may hold. A span counts once it has ended."""

    def __init__(self, late_s: float, period_s: float = 0.002) -> None:
        self.late_s = late_s
        self.period_s = period_s
        self._held: list[tuple[float, float]] = []
        self._clocks: list[subprocess.Popen[str]] = []
        self._readers: list[threading.Thread] = []

    def spans(self) -> list[tuple[float, float]]:
        """The spans (from, until) reported so far, on the clock of `time.monotonic`."""
        return list(self._held)

    def start(self) -> None:
        for cpu in sorted(os.sched_getaffinity(0)):
            args = [str(a) for a in (cpu, self.period_s, self.late_s, SIM_PRIORITY, os.getpid())]
            clock = subprocess.Popen(
                [sys.executable, "-c", _CPU_CLOCK, *args], stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, text=True,
            )  # fmt: skip
            reader = threading.Thread(target=self._read, args=(clock,), daemon=True)
            reader.start()
            self._clocks.append(clock)
            self._readers.append(reader)

    def stop(self) -> None:
        for clock in self._clocks:
            clock.terminate()
            clock.wait(timeout=5.0)
        for reader in self._readers:
            reader.join(timeout=5.0)

    def _read(self, clock: subprocess.Popen[str]) -> None:
        assert clock.stdout is not None
        for line in clock.stdout:
            start, until = (float(field) for field in line.split())
            self._held.append((start, until))


_CPU_CLOCK = """
import os, sys, time
cpu, period_s, late_s, priority, parent = sys.argv[1:]
period_s, late_s = float(period_s), float(late_s)
os.sched_setaffinity(0, {int(cpu)})
try:
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(int(priority)))
except OSError:
    pass
while os.getppid() == int(parent):
    due = time.monotonic() + period_s
    time.sleep(period_s)
    after = time.monotonic()
    if after - due >= late_s:
        print(due, after, flush=True)
"""


def _longest(
    spans: list[tuple[float, float]], since: float, late_s: float, bridge_s: float = 0.0
) -> float:
    """The longest of `spans` (from, until) at least `late_s` long, counted from `since`; spans
    less than `bridge_s` apart are one."""
    spans = [
        (max(start, since), until)
        for start, until in spans
        if until - start >= late_s and until > since
    ]
    return max([0.0, *(until - start for start, until in _merged(spans, bridge_s))])


def _merged(spans: list[tuple[float, float]], bridge_s: float = 0.0) -> list[tuple[float, float]]:
    """`spans` (from, until) in order, those that overlap or are less than `bridge_s` apart as
    one."""
    merged: list[tuple[float, float]] = []
    for start, until in sorted(spans):
        if merged and start - merged[-1][1] < bridge_s:
            merged[-1] = (merged[-1][0], max(merged[-1][1], until))
        else:
            merged.append((start, until))
    return merged


def _cross(sender: int, receiver: int) -> None:
    """One byte from `sender` until `receiver` has read it."""
    os.write(sender, b"\x55")
    while not select.select([receiver], [], [], 1.0)[0]:
        pass
    os.read(receiver, 64)


class _SdkPort(Protocol):
    packet_timeout: float

    def getTimeSinceStart(self) -> float: ...  # noqa: N802 (the SDKs' names)
    def getBytesAvailable(self) -> int: ...  # noqa: N802
    def setPacketTimeout(self, packet_length: int) -> None: ...  # noqa: N802
    def setPacketTimeoutMillis(self, msec: float) -> None: ...  # noqa: N802


def wait_out_stalls(port: _SdkPort, probe: PtyStallProbe) -> None:
    """Make a manufacturer SDK's `PortHandler` (ROBOTIS' `dynamixel_sdk`, Feetech's
    `scservo_sdk`: the same class) wait for a reply its own time plus the stalls `probe`
    measured meanwhile. The SDK gives a reply 2 × LATENCY_TIMER + 2 ms (34 ms), polling in a
    loop; a simulated chain in the test's process answers through the same CPU, interpreter lock
    and pty path the probe times, so a reply missing after that wait in live time is missing. A
    reply waiting when the SDK looks is not missing either: its own thread may look late (the
    servo-bus link reads what arrived by its deadline alike)."""
    since = [time.monotonic()]
    set_timeout, set_millis = port.setPacketTimeout, port.setPacketTimeoutMillis

    def set_packet_timeout(packet_length: int) -> None:
        since[0] = time.monotonic()
        set_timeout(packet_length)

    def set_packet_timeout_millis(msec: float) -> None:
        since[0] = time.monotonic()
        set_millis(msec)

    def is_packet_timeout() -> bool:
        stalled_ms = 1000.0 * probe.stalled_s(since[0])
        late = port.getTimeSinceStart() > port.packet_timeout + stalled_ms
        if late and not port.getBytesAvailable():
            port.packet_timeout = 0
            return True
        return False

    port.setPacketTimeout = set_packet_timeout  # type: ignore[method-assign]
    port.setPacketTimeoutMillis = set_packet_timeout_millis  # type: ignore[method-assign]
    port.isPacketTimeout = is_packet_timeout  # type: ignore[attr-defined]
