"""The collision kernels, loaded when a `CollisionModel` first computes, not on import.

Like the kinematics kernels (`kinematics.compiled`), numba compiles them once per machine into its
cache (~20 s cold, reported through `progress`); a warm cache loads them in well under a second.
A program that must not wait on its first check (the daemon) calls `load_collision_kernels`
beforehand, as it calls `kinematics.compiled.load_kernels`.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kinematics.compiled import Kernel, compile_entries

__all__ = ["COLLISION_COMPILE_ESTIMATE", "CollisionKernels", "load_collision_kernels"]

_log = logging.getLogger(__name__)

COLLISION_COMPILE_ESTIMATE = "compiling collision kernels, once, ~20 s"
"""The first line `load_collision_kernels` reports when numba's cache is cold."""


@dataclass(frozen=True, slots=True)
class CollisionKernels:
    """The entry points of `kinematics.collision._kernels.ENTRIES`, called without numba's type
    dispatch: callers pass exactly the arrays of the kernel's signature."""

    distances: Kernel
    distances_batch: Kernel
    min_distance: Kernel
    check_path: Kernel


def _entries() -> dict[str, tuple[Any, Any]]:
    from kinematics.collision import _kernels  # noqa: PLC0415 (imports numba: only when used)

    return dict(_kernels.ENTRIES)


@functools.cache
def load_collision_kernels(progress: Callable[[str], None] | None = None) -> CollisionKernels:
    """Compile the collision kernels, or load them from numba's cache (once per process; later
    calls only look them up). `progress` (default: an INFO log line) hears what compiles."""
    entries = _entries()
    (kernel, _), *_ = entries.values()
    announcement = f"{COLLISION_COMPILE_ESTIMATE} (cache: {kernel.stats.cache_path})"
    points = compile_entries(entries, progress or _log.info, announcement, "collision kernels")
    return CollisionKernels(**points)
