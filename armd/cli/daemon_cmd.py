"""`armd run` (the daemon) and `armd compile` (the kinematics kernels, into numba's cache).

The first start after an install compiles the kinematics kernels (~30 s on a PC, minutes on a
small ARM board) and says so, with progress; `armd compile` does it ahead of time (`make run`,
`make test` and the systemd install steps run it).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

from armd.cli.common import EXIT_FAILURE, EXIT_OK

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add ``run`` and ``compile`` to the CLI's subparsers."""
    run = subparsers.add_parser("run", help="run the daemon", description="Run the daemon.")
    run.add_argument("--config", required=True, help="the arm's YAML configuration")
    run.set_defaults(func=_run)
    compile_ = subparsers.add_parser(
        "compile",
        help="compile the kinematics and collision kernels into numba's cache (once)",
        description="Compile the kinematics kernels, or check that numba's cache has them, and "
        "say where the cache is ($NUMBA_CACHE_DIR moves it; the systemd unit uses "
        "/var/cache/armd). Exit codes: 0 ready, 1 compilation failed.",
    )
    compile_.set_defaults(func=_compile)


def _run(args: argparse.Namespace) -> int:
    from armd.config.load import load_config
    from armd.daemon.process import run_daemon
    from armd.errors import ArmdError, ConfigError

    try:
        setup = load_config(args.config)  # compiles the kernels first when the cache is cold
    except ConfigError as exc:
        print(f"armd: error: {args.config}: invalid configuration:\n{exc}", file=sys.stderr)
        return EXIT_FAILURE
    try:
        asyncio.run(run_daemon(setup, log_level=args.log_level))
    except ArmdError as exc:
        print(f"armd: error: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK


def _compile(args: argparse.Namespace) -> int:
    from kinematics.collision.compiled import load_collision_kernels
    from kinematics.compiled import cache_dir, load_kernels

    started = time.perf_counter()
    try:
        load_kernels(progress=lambda line: print(line, flush=True))
        load_collision_kernels(progress=lambda line: print(line, flush=True))
    except Exception as exc:  # numba's errors have no common root
        print(f"armd: error: compiling the kinematics kernels failed: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    elapsed = time.perf_counter() - started
    print(f"kinematics and collision kernels ready in {elapsed:.1f} s (cache: {cache_dir()})")
    return EXIT_OK
