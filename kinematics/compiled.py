"""The compiled kernels behind FK, Jacobians and IK, loaded when first needed, not on import.

Importing `kinematics` and loading a model import no numba and compile nothing: a tree loads the
kernels the first time it computes (FK, a Jacobian, IK), or when a program calls `load_kernels`
beforehand — the daemon does, before its control loop starts, so that no tick waits for them.

numba compiles each kernel once per machine and caches the machine code (it is specific to the
CPU): next to the sources (``kinematics/__pycache__``) when that folder is writable, otherwise in
``$NUMBA_CACHE_DIR`` (the systemd unit sets ``/var/cache/armd``) or a per-user folder. A cold cache
takes ~30 s on a PC (minutes on a small ARM board); a warm one ~0.5 s. `load_kernels` reports
through `progress` what it compiles, so that a cold start never looks hung.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["COMPILE_ESTIMATE", "Kernels", "cache_dir", "load_kernels"]

_log = logging.getLogger(__name__)

COMPILE_ESTIMATE = "compiling kinematics kernels, once, ~30 s"
"""The first line `load_kernels` reports when numba's cache is cold."""

Progress = Callable[[str], None]
Kernel = Callable[..., Any]


@dataclass(frozen=True, slots=True)
class Kernels:
    """The entry points of the compiled kernels, called without numba's type dispatch: callers
    pass exactly the arrays of the kernel's signature (`kinematics._kernels.ENTRIES`)."""

    fk_pose: Kernel
    fk_pose_jacobian: Kernel
    fk_batch: Kernel
    jacobian_batch: Kernel
    tree_fk: Kernel
    ik_attempt: Kernel


def _entries() -> dict[str, tuple[Any, Any]]:
    from kinematics import _ik_kernels, _kernels  # noqa: PLC0415 (imports numba: only when used)

    return {**_kernels.ENTRIES, **_ik_kernels.ENTRIES}


def cache_dir() -> str:
    """Where numba caches the kernels on this machine (imports numba)."""
    (kernel, _), *_ = _entries().values()
    return str(kernel.stats.cache_path)


@functools.cache
def load_kernels(progress: Progress | None = None) -> Kernels:
    """Compile the kernels, or load them from numba's cache: the machine code is loaded once per
    process, later calls (with any `progress`) only look it up and report nothing. When anything
    must be compiled, `progress` (default: an INFO log line) receives `COMPILE_ESTIMATE` first,
    then a line per kernel with its time, and every `HEARTBEAT_S` while one still compiles."""
    from numba.core import event  # noqa: PLC0415 (numba is imported only here)

    report = progress or _log.info
    entries = _entries()
    listener = _cold_cache_listener(report, f"{COMPILE_ESTIMATE} (cache: {cache_dir()})")
    entry_points: dict[str, Kernel] = {}
    with event.install_listener("numba:compile", listener):
        for i, (name, (kernel, signature)) in enumerate(entries.items(), start=1):
            step = f"kernel {i}/{len(entries)} {name}"
            started, compiled = time.perf_counter(), listener.compiled
            with _heartbeat(report, step, lambda: listener.compiled > 0):
                entry_points[name] = kernel.compile(signature)
            if listener.compiled > compiled:
                report(f"  {step}: compiled in {time.perf_counter() - started:.1f} s")
    if listener.compiled:
        report(f"kinematics kernels compiled and cached ({listener.compiled} functions)")
    return Kernels(**entry_points)


HEARTBEAT_S = 5.0
"""While one kernel compiles for longer (the IK kernel takes ~20 s), `progress` hears that it
still does at this interval, s."""


@contextlib.contextmanager
def _heartbeat(
    report: Progress, step: str, compiling: Callable[[], bool], interval_s: float = HEARTBEAT_S
) -> Iterator[None]:
    """Report "still compiling `step`" every `interval_s` while `compiling()` and the block runs
    (numba releases the interpreter lock while LLVM optimises, so the thread gets its turn)."""
    done = threading.Event()
    started = time.perf_counter()

    def beat() -> None:
        while not done.wait(interval_s):
            if compiling():
                report(f"  {step}: still compiling ({time.perf_counter() - started:.0f} s)")

    thread = threading.Thread(target=beat, name="kernel-compile-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def _cold_cache_listener(report: Progress, announcement: str) -> Any:
    """A numba event listener that counts the functions numba compiles (cache misses) in
    ``compiled`` and reports `announcement` before the first."""
    from numba.core import event  # noqa: PLC0415 (numba is imported only when kernels load)

    class ColdCacheListener(event.Listener):
        compiled = 0

        def on_start(self, event: Any) -> None:
            if self.compiled == 0:
                report(announcement)
            self.compiled += 1

        def on_end(self, event: Any) -> None:
            pass

    return ColdCacheListener()
