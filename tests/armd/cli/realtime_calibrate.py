"""A simulated chain served from the test's own process at `tests.realtime.SIM_PRIORITY`, as
``armd sim-device`` runs in the tests; ``armd calibrate --auto`` raises its own priority to the
config's ``realtime_priority`` once the search starts (`armd.control.timing.raise_priority`).

Why: the search commands and reads its devices every 20 ms and gives up on a device whose reading
is older than 0.25 s (`armd.tools.autocal.STALE_S`); at normal priority, a CPU-bound neighbour
(`stress-ng --cpu 2`, the other pytest worker) delays those ticks, or the servos' replies, past
it, and the search aborts for a reason that is no bug. Where the kernel refuses the priority (no
root, no RLIMIT_RTPRIO) the thread keeps its normal priority, as `tests.realtime` says of the
simulated devices."""

from __future__ import annotations

import contextlib
import os
import threading

from tests.realtime import SIM_PRIORITY

__all__ = ["serve_at_realtime"]


def serve_at_realtime(thread_name: str) -> None:
    """The test process's thread named `thread_name` (a simulated chain's serving thread, e.g.
    ``feetech-sim``) at `SIM_PRIORITY`; refused: left as it is."""
    (thread,) = [t for t in threading.enumerate() if t.name == thread_name]
    assert thread.native_id is not None
    with contextlib.suppress(PermissionError):
        os.sched_setscheduler(thread.native_id, os.SCHED_FIFO, os.sched_param(SIM_PRIORITY))
