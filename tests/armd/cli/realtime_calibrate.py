"""``armd calibrate --auto`` on a busy machine: once it waits for Enter (its imports done), the
test puts the calibrate process at the config's ``realtime_priority`` (``SCHED_FIFO`` 50 by
default, as the daemon runs its control process), and a simulated chain served from the test's own
process at `tests.realtime.SIM_PRIORITY`, as ``armd sim-device`` runs in the tests.

Why: the search commands and reads its devices every 20 ms and gives up on a device whose reading
is older than 0.25 s (`armd.tools.autocal.STALE_S`); at normal priority, a CPU-bound neighbour
(`stress-ng --cpu 2`, the other pytest worker) delays those ticks past it, and the search aborts
for a reason that is no bug. Where the kernel refuses the priority (no root, no RLIMIT_RTPRIO)
the process keeps its normal priority, as `tests.realtime` says of the simulated devices."""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

from tests.realtime import SIM_PRIORITY

__all__ = ["CONTROL_PRIORITY", "at_realtime", "serve_at_realtime"]

CONTROL_PRIORITY = 50  # armd.config.schema: realtime_priority's default, the configs' value


def at_realtime(pid: int, priority: int = CONTROL_PRIORITY) -> None:
    """Every thread of process `pid` at ``SCHED_FIFO`` `priority` (the threads it starts later
    inherit it); refused, or the process gone (its output says why): left as it is."""
    tasks: list[Path] = []
    with contextlib.suppress(FileNotFoundError):
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    for task in tasks:
        with contextlib.suppress(PermissionError, ProcessLookupError):
            os.sched_setscheduler(int(task.name), os.SCHED_FIFO, os.sched_param(priority))


def serve_at_realtime(thread_name: str) -> None:
    """The test process's thread named `thread_name` (a simulated chain's serving thread, e.g.
    ``feetech-sim``) at `SIM_PRIORITY`; refused: left as it is."""
    (thread,) = [t for t in threading.enumerate() if t.name == thread_name]
    assert thread.native_id is not None
    with contextlib.suppress(PermissionError):
        os.sched_setscheduler(thread.native_id, os.SCHED_FIFO, os.sched_param(SIM_PRIORITY))
