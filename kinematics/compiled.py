"""The compiled kernels behind FK, Jacobians, IK and dynamics, loaded when first needed, not on
import.

Importing `kinematics` and loading a model import no numba and compile nothing: a tree loads the
kernels the first time it computes (FK, a Jacobian, IK), or when a program calls `load_kernels`
beforehand — the daemon does, before its control loop starts, so that no tick waits for them.

numba compiles each kernel once per machine and caches the machine code (it is specific to the
CPU): next to the sources (``kinematics/__pycache__``) when that folder is writable, otherwise in
``$NUMBA_CACHE_DIR`` (the systemd unit sets ``/var/cache/armd``) or a per-user folder. A cold cache
takes ~30 s on a PC (minutes on a small ARM board); a warm one ~0.5 s. `load_kernels` reports
through `progress` what it compiles, so that a cold start never looks hung.

numba keys a cached function on the one source file that defines it, yet its machine code holds
the helpers it calls from other modules and the constants it imports: after an upgrade that
changes only a helper, numba would serve the old code. So each kernel module's cached entries are
stamped with every source they are compiled from, and removed before loading when any of those
changed (`kinematics.kernel_cache`).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kinematics.kernel_cache import drop_stale_entries

__all__ = [
    "COMPILE_ESTIMATE",
    "Kernels",
    "cache_dir",
    "compile_entries",
    "load_kernels",
    "release_compiler_pages",
]

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
    gravity_torques: Kernel
    rnea: Kernel
    mass_matrix: Kernel
    coriolis_matrix: Kernel


def _entries() -> dict[str, tuple[Any, Any]]:
    # the kernels import numba: only when used
    from kinematics import _ik_kernels, _kernels  # noqa: PLC0415
    from kinematics.dynamics import _coriolis_kernels  # noqa: PLC0415
    from kinematics.dynamics import _kernels as _dynamics_kernels  # noqa: PLC0415

    return {
        **_kernels.ENTRIES,
        **_ik_kernels.ENTRIES,
        **_dynamics_kernels.ENTRIES,
        **_coriolis_kernels.ENTRIES,
    }


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
    report = progress or _log.info
    announcement = f"{COMPILE_ESTIMATE} (cache: {cache_dir()})"
    return Kernels(**compile_entries(_entries(), report, announcement, "kinematics kernels"))


def compile_entries(
    entries: dict[str, tuple[Any, Any]], report: Progress, announcement: str, what: str
) -> dict[str, Kernel]:
    """Compile (or load from numba's cache) each ``name: (kernel, signature)`` of `entries` and
    return the entry points by name. When anything must be compiled, `report` receives
    `announcement` first, then a line per kernel with its time, and every `HEARTBEAT_S` while one
    still compiles; `what` names the kernels in the closing line. Imports numba."""
    from numba.core import event  # noqa: PLC0415 (numba is imported only here)

    drop_stale_entries([kernel for kernel, _ in entries.values()], report)
    listener = _cold_cache_listener(report, announcement)
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
        report(f"{what} compiled and cached ({listener.compiled} functions)")
    return entry_points


def release_compiler_pages(smaps: Path = Path("/proc/self/smaps")) -> int:
    """Tell the kernel that this process will not run LLVM's own code again; returns how much of
    it was resident (bytes) in the mappings it advised (0 where nothing was: not Linux, no
    libllvmlite loaded, a kernel older than 5.4).

    numba needs LLVM (libllvmlite, ~180 MB on disk) to compile the kernels and to load them from
    its cache, never to run them: a loaded kernel is machine code in this process's memory,
    called through its entry point. Loading them leaves 70-110 MiB of LLVM's code and read-only
    data resident (more when the library was read in large folios, as after a fresh install).
    A long-running program calls this once its kernels are loaded (the daemon does): madvise
    ``MADV_PAGEOUT`` on libllvmlite's clean read-only mappings reclaims those pages at once.
    Should LLVM be needed again (a kernel compiled later), its pages fault back in from the file.
    """
    if not sys.platform.startswith("linux"):
        return 0
    try:
        text = smaps.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return 0
    madvise = ctypes.CDLL(None, use_errno=True).madvise
    madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    released = 0
    for start, end, resident in _clean_mappings(text, "libllvmlite"):
        if madvise(start, end - start, _MADV_PAGEOUT) == 0:
            released += resident
    return released


_MADV_PAGEOUT = 21  # <sys/mman.h>, Linux 5.4
_MAPPING = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) (\S{4}) \S+ \S+ \S+\s*(.*)$")


def _clean_mappings(smaps: str, library: str) -> list[tuple[int, int, int]]:
    """(start, end, resident bytes) of each mapping of `library` in `smaps` (/proc/<pid>/smaps)
    that is read-only and has no page of its own (code and constants as in the file; not the
    relocated ones, which paging out would swap)."""
    found: list[tuple[int, int, int]] = []
    current: list[int] | None = None  # start, end, resident, private dirty
    for line in [*smaps.splitlines(), "0-0 ---p 0 0 0"]:
        header = _MAPPING.match(line)
        if header is None:
            if current is not None and line.startswith(("Rss:", "Private_Dirty:")):
                current[2 if line.startswith("Rss:") else 3] = int(line.split()[1]) * 1024
            continue
        if current is not None and current[3] == 0:
            found.append((current[0], current[1], current[2]))
        start, end, perms, path = header.groups()
        mine = library in path and "w" not in perms
        current = [int(start, 16), int(end, 16), 0, 0] if mine else None
    return found


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
