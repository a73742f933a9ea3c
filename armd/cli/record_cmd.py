"""`armd record` and `armd replay`: an arm's measured state to a file, and a file back to the arm
as a ``trajectory`` goal (docs/recording.md).

- ``record --config FILE --out FILE [--rate telemetry|HZ] [--duration S]`` writes every
  ``state`` message (or at most HZ of them per second) as a CSV row (`armd.tools.recording`), and
  the
  messages of the arm's ``stream`` topic, when there are any, as JSON lines beside it. It ends
  after --duration, on Ctrl-C or SIGTERM (the file complete, exit 0), or when the arm goes
  offline (exit 1, the file complete up to then).
- ``replay FILE --config FILE [--speed S] [--tolerance RAD] [--dry-run]`` makes the recording
  into a goal (`armd.tools.replay`), runs the daemon's checks on it from the arm's current state and
  prints what they found (points, simplification error, time scaling, duration); without
  --dry-run it then sends the goal and follows its statuses like ``armd goal``. --dry-run sends
  nothing; it reads one state when the arm is online, else plans from the first point.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import signal
import sys
import time
import uuid
from contextlib import ExitStack, suppress
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from armd.cli import interrupt
from armd.cli.common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, UsageError, say_error

if TYPE_CHECKING:
    from armd.api.client import ArmClient
    from armd.config.load import ArmSetup
    from armd.tools.recording import StateWriter
    from armd.tools.replay import Checked, ReplayGoal

__all__ = ["register"]

STATE_WAIT_S = 2.0
"""Longest wait for one ``state`` message (the arm's current position), s."""
FLUSH_S = 1.0
"""How often the recording is flushed to its file, s."""
LOOP_RATE = (
    "--rate loop: the loop's samples do not leave the daemon; it publishes `state` at the "
    "config's telemetry_hz ({hz:g} Hz). Raising telemetry_hz to the loop rate for a recording "
    "would load the broker, the daemon and every subscriber; record at --rate telemetry"
)


def register(subparsers: Any) -> None:
    """Add ``record`` and ``replay`` to the CLI's subparsers."""
    record = subparsers.add_parser(
        "record",
        help="record an arm's measured state (and its stream) to a CSV file",
        description="Record every `state` message of the arm as a CSV row (docs/recording.md); "
        "the `stream` topic's messages, if any, go to OUT's .stream.jsonl beside it. Ctrl-C "
        "ends the recording (the file is complete). A name ending in .gz is gzip-compressed.",
    )
    record.add_argument("--config", required=True, type=Path, help="the arm's YAML configuration")
    record.add_argument("--out", required=True, type=Path, help="the CSV file to write")
    record.add_argument(
        "--rate", default="telemetry", help="telemetry (every state, default) or HZ (at most)"
    )
    record.add_argument("--duration", type=float, metavar="S", help="stop after S seconds")
    record.set_defaults(func=_record)
    replay = subparsers.add_parser(
        "replay",
        help="replay a recording as a trajectory goal",
        description="Send a recording (armd record) as a `trajectory` goal, simplified to fit "
        "the goal's bounds, and follow its statuses; --dry-run only runs the daemon's checks.",
    )
    replay.add_argument("file", type=Path, help="a recording (CSV, .gz)")
    replay.add_argument("--config", required=True, type=Path, help="the arm's YAML configuration")
    replay.add_argument("--speed", type=float, default=1.0, help="0.01 <= speed <= 1 (1)")
    replay.add_argument(
        "--tolerance",
        type=float,
        default=0.001,
        metavar="RAD",
        help="simplification: the largest deviation from the recorded positions (0.001)",
    )
    replay.add_argument("--dry-run", action="store_true", help="check only, send nothing")
    replay.add_argument("--id", help="the goal id (default: a random one)")
    replay.set_defaults(func=_replay)


# -- record ---------------------------------------------------------------------------------------


def _rate(text: str, setup: ArmSetup) -> float | None:
    """The --rate in Hz (None: every state). Raises `UsageError`."""
    if text == "telemetry":
        return None
    if text == "loop":
        raise UsageError(LOOP_RATE.format(hz=setup.telemetry_hz))
    try:
        hz = float(text)
    except ValueError:
        raise UsageError(f"--rate: {text!r} must be telemetry or a rate in Hz") from None
    if not 0.0 < hz <= setup.telemetry_hz:
        raise UsageError(
            f"--rate: {text} Hz must be in (0, {setup.telemetry_hz:g}] (the config's telemetry_hz)"
        )
    return hz


def _record(args: argparse.Namespace) -> int:
    from armd.cli.client.client_cmd import connected, load_setup

    setup = load_setup(args.config)
    if setup is None:
        return EXIT_FAILURE
    try:
        hz = _rate(args.rate, setup)
        if args.duration is not None and not (args.duration > 0 and math.isfinite(args.duration)):
            raise UsageError(f"--duration: {args.duration} must be > 0 seconds")
    except UsageError as exc:
        say_error(f"record: {exc}")
        return EXIT_USAGE

    async def run(client: ArmClient) -> int:
        return await _recording(client, args.out, hz, args.duration)

    return connected(setup, run)


async def _recording(client: ArmClient, out: Path, hz: float | None, duration: float | None) -> int:
    from armd.tools.recording import StateWriter, open_text, stream_path

    early = await client.require_online()
    await client.client.subscribe(f"armd/{client.arm_name}/stream", qos=0)
    with ExitStack() as files:
        try:
            writer = StateWriter(files.enter_context(open_text(out, "w")))
        except OSError as exc:
            say_error(f"record: --out: {exc}")
            return EXIT_FAILURE
        streams = _StreamFile(stream_path(out), files)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        print(f"recording {client.topics.state} to {out}; Ctrl-C ends it", file=sys.stderr)
        reader = asyncio.create_task(_read(client, early, writer, streams, hz))
        stopped = asyncio.create_task(stop.wait())
        try:  # until Ctrl-C, the duration, or the reader ends (offline, or the broker lost)
            await asyncio.wait({reader, stopped}, timeout=duration, return_when="FIRST_COMPLETED")
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
            stopped.cancel()
            reader.cancel()
            with suppress(asyncio.CancelledError):
                await reader  # a broker error is raised here, once the file is complete
        span = (writer.last_t or 0.0) - (writer.first_t or 0.0)
        print(f"recorded {writer.rows} states over {span:.2f} s to {out}", file=sys.stderr)
        if streams.count:
            print(f"recorded {streams.count} stream messages to {streams.path}", file=sys.stderr)
    if not reader.cancelled() and reader.result():  # it ended: the arm went offline
        say_error(f"record: the arm went {client.availability}; the recording ends there")
        return EXIT_FAILURE
    return EXIT_OK


class _StreamFile:
    """The stream's messages as JSON lines, opened at the first one (most recordings have none)."""

    def __init__(self, path: Path, files: ExitStack) -> None:
        self.path = path
        self.count = 0
        self._files = files
        self._file: IO[str] | None = None

    def write(self, payload: Any, received: float) -> None:
        from armd.tools.recording import open_text

        if self._file is None:
            self._file = self._files.enter_context(open_text(self.path, "w"))
        self._file.write(json.dumps({"received": received, "payload": payload}) + "\n")
        self.count += 1


async def _read(
    client: ArmClient,
    early: list[Any],
    writer: StateWriter,
    streams: _StreamFile,
    hz: float | None,
) -> bool:
    """Write the arm's states and stream messages until cancelled; True when the arm went
    offline."""
    slot = -math.inf  # at --rate HZ, the first state of each 1/HZ slot of the daemon's clock
    flushed = time.monotonic()
    pending = list(early)
    while True:
        message = pending.pop(0) if pending else await client.next()
        received = time.monotonic()
        body = message.payload
        if message.topic == "state" and isinstance(body, dict):
            t = body.get("t")
            if hz is not None and isinstance(t, int | float):
                if math.floor(t * hz) == slot:
                    continue
                slot = math.floor(t * hz)
            writer.write(body, received)
            if received - flushed >= FLUSH_S:  # a reader of the file sees it grow
                writer.flush()
                flushed = received
        elif message.topic == "stream":
            streams.write(body, received)
        elif message.topic == "availability" and body != "online":
            return True


# -- replay ---------------------------------------------------------------------------------------


def _replay(args: argparse.Namespace) -> int:
    from armd.cli.client.client_cmd import load_setup

    if not 0.01 <= args.speed <= 1.0:
        say_error(f"replay: --speed: {args.speed} must be in [0.01, 1]")
        return EXIT_USAGE
    if not (args.tolerance > 0 and math.isfinite(args.tolerance)):
        say_error(f"replay: --tolerance: {args.tolerance} must be > 0 (rad or m)")
        return EXIT_USAGE
    setup = load_setup(args.config)
    if setup is None:
        return EXIT_FAILURE
    from armd.tools.recording import RecordingError, read_recording
    from armd.tools.replay import replay_goal

    try:
        recording = read_recording(args.file)
        replay = replay_goal(
            recording, setup, args.id or uuid.uuid4().hex[:12], args.speed, args.tolerance
        )
    except (RecordingError, OSError) as exc:
        say_error(f"replay: {exc}")
        return EXIT_FAILURE
    if args.dry_run:
        return _dry_run(setup, args.file, replay)
    return _send(setup, args.file, replay)


async def _current(client: ArmClient, setup: ArmSetup) -> Any:
    """The arm's measured position in q order from its next ``state``, or None."""
    import numpy as np

    with suppress(TimeoutError):
        async with asyncio.timeout(STATE_WAIT_S):
            while True:
                message = await client.next()
                if message.topic == "state" and isinstance(message.payload, dict):
                    joints = message.payload.get("joints") or {}
                    try:
                        return np.array(
                            [float(joints[name]["position"]) for name in setup.tree.joint_names]
                        )
                    except (KeyError, TypeError, ValueError):
                        return None
    return None


def _report(file: Path, replay: ReplayGoal, checked: Checked, out: IO[str]) -> None:
    goal = replay.goal
    print(
        f"replay {file}: {len(replay.times)} samples over {replay.times[-1]:.2f} s of "
        f"{len(goal.joints)} joints -> {len(goal.times)} points (tolerance {replay.tolerance:g}), "
        f"{len(replay.payload)} bytes",
        file=out,
    )
    if checked.reason is not None:
        print(f"rejected: {checked.reason}", file=out)
        return
    print(
        f"positions' error (simplification, rounding, spline): at most {checked.error:.5f} "
        f"({checked.error_joint})",
        file=out,
    )
    print(f"accepted: {checked.note or f'as recorded, at speed {goal.speed:g}'}", file=out)
    print(
        f"approach {checked.approach_s:.2f} s to the first point, then "
        f"{checked.duration_s - checked.approach_s:.2f} s: {checked.duration_s:.2f} s in all",
        file=out,
    )


def _dry_run(setup: ArmSetup, file: Path, replay: ReplayGoal) -> int:
    import aiomqtt

    from armd.api.client import ArmOfflineError, connect
    from armd.tools.replay import check_replay

    async def read_current() -> Any:
        async with connect(setup.mqtt) as client:
            await client.require_online()
            return await _current(client, setup)

    try:
        current, why = interrupt.run(read_current()), f"no state within {STATE_WAIT_S:g} s"
    except (ArmOfflineError, aiomqtt.MqttError, OSError) as exc:
        current, why = None, str(exc)
    if current is None:
        print(f"note: {why}; planned from the first point, without the approach", file=sys.stderr)
    checked = check_replay(replay, setup, current)
    _report(file, replay, checked, sys.stdout)
    return EXIT_OK if checked.reason is None else EXIT_FAILURE


def _send(setup: ArmSetup, file: Path, replay: ReplayGoal) -> int:
    from armd.cli.client.client_cmd import connected
    from armd.cli.client.goal_progress import send_goal
    from armd.tools.replay import check_replay

    async def run(client: ArmClient) -> int:
        await client.require_online()
        checked = check_replay(replay, setup, await _current(client, setup))
        _report(file, replay, checked, sys.stderr)
        if checked.reason is not None:
            return EXIT_FAILURE
        # The arm may move before the goal arrives: room for a longer approach.
        timeout = 1.5 * checked.duration_s + 30.0
        return await send_goal(client, setup, json.loads(replay.payload), timeout)

    return connected(setup, run)
