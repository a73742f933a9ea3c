"""Simulated devices answer like hardware on a busy machine: the tests run every ``armd
sim-device`` at real-time priority, as a device's firmware answers whatever the robot computer
does. Without it, a CPU-bound neighbour (CI machines are shared; `stress-ng --cpu 2` in the
loaded runs) delays a simulated servo's reply past the deadline its driver computes from the baud
rate, and a test fails for a reason that is no bug. Where the kernel refuses the priority (no
root, no RLIMIT_RTPRIO) the device says so in its log and runs at normal priority."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["SIM_PRIORITY", "with_sim_priority"]

# Below the control process's default (armd.config: realtime_priority 50): the loop still wins.
SIM_PRIORITY = 20


def with_sim_priority(args: Sequence[str]) -> list[str]:
    """``armd`` arguments with ``--realtime-priority`` added after ``sim-device KIND``."""
    args = [str(a) for a in args]
    if len(args) >= 2 and args[0] == "sim-device" and not args[1].startswith("-"):
        return [*args[:2], "--realtime-priority", str(SIM_PRIORITY), *args[2:]]
    return args
