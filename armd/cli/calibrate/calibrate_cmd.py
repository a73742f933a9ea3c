"""``armd calibrate --config FILE [--joint NAME] [--out FILE]``: record each joint's offset and
range by hand, torque off, into a calibration file (docs/calibration.md).

The drivers are opened (as for ``armd run``) and never enabled: nothing is commanded; this command
writes no goal and no servo EEPROM of its own (docs/calibration.md says what a driver's open
does). For each joint (or each ``--joint``) the user moves it by hand through its whole range (a
refreshing line shows the reading and the recorded min and max) and presses Enter; then puts the
arm in its reference pose (the model's zero) and presses Enter. The offset makes the
reference pose read 0; the range is what was moved through, in joint units after that offset.
After a summary and a confirmation the file is written (default: the config's ``calibration``
file, else ``<config stem>.calibration.yaml`` next to the config); joints already in it and not
calibrated now are kept. Ctrl-C or Ctrl-D aborts with nothing written.

``--import-lerobot FILE.json`` converts a LeRobot so101/so100 follower calibration instead (motors
matched to joints by servo id, or ``--map lerobot_name=joint``). ``--auto`` drives each joint
into its two end stops at a low torque limit instead of the hand, and takes the middle of its
range as the reference (`armd.cli.calibrate.calibrate_auto`; feetech, sim and mujoco devices
only).

Exit codes: 0 written; 1 a bad file, a device that does not answer, a refused range, a joint
refused or an end-stop search failed (``--auto``), aborted by end of input or declined; 2 a wrong
argument; 130 Ctrl-C.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from armd.cli import interrupt
from armd.cli.calibrate.calibrate_auto import record_auto
from armd.cli.calibrate.calibrate_session import Aborted, Keyboard, record
from armd.cli.common import EXIT_FAILURE, EXIT_OK, UsageError, guarded
from armd.config.calibration import (
    FORMAT_VERSION,
    CalibrationFile,
    JointCalibration,
    default_path,
    device_id,
    joint_calibration,
    now_utc,
    position_units,
    read_calibration,
    write_calibration,
)
from armd.config.checks import resolve_path
from armd.config.lerobot import import_lerobot
from armd.config.load import ArmSetup, load_config
from armd.config.schema import JointConfig
from armd.errors import ConfigError
from armd.tools.autocal import AutoRefusedError, AutoSettings, EndStopError, limited_drivers
from drivers import DriverError

__all__ = ["register"]

EXIT_INTERRUPTED = 130
REFERENCE_TOLERANCE = 0.01
"""How far (joint units) the reference pose may lie outside the recorded range (encoder noise)."""


def register(subparsers: Any) -> None:
    """Add ``calibrate`` to the CLI's subparsers."""
    parser = subparsers.add_parser(
        "calibrate",
        help="record each joint's offset and range by hand (torque off) into a calibration file",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("--config", required=True, type=Path, metavar="FILE", help="YAML config")
    parser.add_argument(
        "--joint", action="append", metavar="NAME", help="only this joint (repeatable)"
    )
    parser.add_argument("--out", type=Path, metavar="FILE", help="the calibration file to write")
    parser.add_argument(
        "--auto",
        action="store_true",
        help=(
            "drive each joint into its end stops at a low torque limit "
            "(feetech, sim, mujoco devices)"
        ),
    )
    defaults = AutoSettings()
    for flag, default, unit, what in (
        ("--auto-torque", defaults.torque, "", "torque limit, fraction of stall"),
        ("--auto-speed", defaults.speed, " rad/s (m/s)", "speed"),
        ("--auto-max-travel", defaults.max_travel, " rad (m)", "the farthest from the start"),
        ("--auto-timeout", defaults.timeout_s, " s", "the longest search of one joint"),
    ):
        parser.add_argument(
            flag,
            type=float,
            default=default,
            metavar="X",
            help=f"--auto: {what} ({default:g}{unit})",
        )
    parser.add_argument(
        "--import-lerobot", type=Path, metavar="FILE.json", help="convert a LeRobot calibration"
    )
    parser.add_argument(
        "--map",
        action="append",
        default=[],
        metavar="MOTOR=JOINT",
        help="with --import-lerobot: the joint of a LeRobot motor (for devices without an id)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except KeyboardInterrupt:
        print("\naborted (Ctrl-C): nothing written", file=sys.stderr)
        return EXIT_INTERRUPTED


@guarded(ConfigError, AutoRefusedError, DriverError, OSError, context=lambda args: "calibrate")
def _run(args: argparse.Namespace) -> int:
    mapping = _mapping(args.map)
    if mapping and args.import_lerobot is None:
        raise UsageError("--map goes with --import-lerobot")
    setup = load_config(args.config, kernels=False, calibration=False)
    joints = _joints(setup.config.joints, args.joint)
    auto = _auto_settings(args) if args.auto else None
    if auto is not None:
        if args.import_lerobot is not None:
            raise UsageError("--auto and --import-lerobot: one or the other")
        # refused before anything opens: joints whose device has no settable torque limit
        limited_drivers(setup.drivers, [setup.joints[j] for j in joints], auto.torque)
    out = args.out or default_path(setup.path, setup.config)
    # a broken file there is reported now, before any work, and never overwritten blindly
    existing = read_calibration(out)[0] if out.exists() else None
    entries: dict[str, JointCalibration] | None
    if args.import_lerobot is not None:
        imported = import_lerobot(args.import_lerobot, setup, mapping)
        for note in imported.notes:
            print(f"note: {note}")
        entries = {joint: imported.joints[joint] for joint in joints if joint in imported.joints}
        left = [joint for joint in imported.joints if joint not in entries]
        if left:
            print(f"note: not imported (not a --joint, or calibrated: false): {', '.join(left)}")
        missing = [joint for joint in joints if joint not in entries]
        if missing:
            print(f"note: not in the LeRobot file: {', '.join(missing)}")
        _summary(setup, entries)
    else:
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            raise UsageError("a guided procedure: run it in a terminal (stdin and stdout)")
        try:
            entries = interrupt.run(_guided(setup, joints, auto))
        except (Aborted, EndStopError) as exc:
            print(f"\naborted ({exc}): nothing written", file=sys.stderr)
            return EXIT_FAILURE
        if entries is None:
            print("declined: nothing written")
            return EXIT_FAILURE
    return _write(setup, out, entries, existing)


def _mapping(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        motor, sep, joint = pair.partition("=")
        if not (sep and motor and joint):
            raise UsageError(f"--map {pair!r}: write MOTOR=JOINT, e.g. shoulder_pan=joint_1")
        out[motor] = joint
    return out


def _joints(configured: Mapping[str, JointConfig], wanted: list[str] | None) -> list[str]:
    calibrated = [name for name, joint in configured.items() if joint.calibrated]
    if not wanted:
        return calibrated
    for name in wanted:
        if name not in calibrated:
            why = "calibrated: false in the config" if name in configured else "not a driven joint"
            raise UsageError(f"--joint {name}: {why}; joints to calibrate: {calibrated}")
    return list(dict.fromkeys(wanted))


def _auto_settings(args: argparse.Namespace) -> AutoSettings:
    for flag, value, low, high in (
        ("--auto-torque", args.auto_torque, 0.0, 1.0),
        ("--auto-speed", args.auto_speed, 0.0, math.inf),
        ("--auto-max-travel", args.auto_max_travel, 0.0, math.inf),
        ("--auto-timeout", args.auto_timeout, 0.0, math.inf),
    ):
        if not (math.isfinite(value) and low < value <= high):
            bound = f"in (0, {high:g}]" if math.isfinite(high) else "finite and > 0"
            raise UsageError(f"{flag} {value:g}: must be {bound}")
    return AutoSettings(
        torque=args.auto_torque,
        speed=args.auto_speed,
        max_travel=args.auto_max_travel,
        timeout_s=args.auto_timeout,
    )


async def _guided(
    setup: ArmSetup, joints: list[str], auto: AutoSettings | None
) -> dict[str, JointCalibration] | None:
    """The terminal procedure (`calibrate_session.record`, or `calibrate_auto.record_auto` with
    `auto`), the summary and the confirmation: the new entries by joint, or None when the user
    declined."""
    keyboard = Keyboard(sys.stdin.fileno())
    try:
        if auto is None:
            readings = await record(setup, joints, keyboard, sys.stdout)
        else:
            readings = await record_auto(setup, joints, auto, keyboard, sys.stdout)
        recorded = now_utc()
        entries: dict[str, JointCalibration] = {}
        outside: list[str] = []
        for joint, r in readings.items():
            t = setup.joints[joint]
            offset, (low, high) = joint_calibration(
                t, r.motor_min, r.motor_max, r.motor_reference, r.reference
            )
            if not low - REFERENCE_TOLERANCE <= r.reference <= high + REFERENCE_TOLERANCE:
                outside.append(f"{joint} [{low:+.4f}, {high:+.4f}]")
            entries[joint] = JointCalibration(
                offset=offset,
                range=[low, high],
                recorded=recorded,
                driver=t.driver,
                device=t.device,
                device_id=device_id(setup.config, t.driver, t.device),
                source="armd calibrate" if auto is None else "armd calibrate --auto",
            )
        if outside:
            raise Aborted(
                "the reference pose lies outside the range recorded for "
                f"{'; '.join(outside)} (after the new offset, the pose reads 0): was the whole "
                "range covered, and the arm at the model's zero?"
            )
        _summary(setup, entries)
        sys.stdout.write("Write the calibration? [y/N] ")
        sys.stdout.flush()
        answer = await keyboard.line()
        return entries if answer is not None and answer.lower() in ("y", "yes") else None
    finally:
        keyboard.close()


def _summary(setup: ArmSetup, entries: Mapping[str, JointCalibration]) -> None:
    units = position_units(setup.tree)
    print("\njoint                    device           offset       range")
    for joint, e in entries.items():
        unit = units.get(joint, "rad")
        low, high = e.range
        print(
            f"{joint:<24} {e.driver + '/' + e.device:<16} {e.offset:+10.5f}  "
            f"[{low:+.5f}, {high:+.5f}] {unit}"
        )


def _write(
    setup: ArmSetup,
    out: Path,
    entries: Mapping[str, JointCalibration],
    existing: CalibrationFile | None,
) -> int:
    """Merge `entries` into `existing` (its joints not recalibrated are kept); write to `out`."""
    previous = existing.joints if existing else {}
    kept = {joint: e for joint, e in previous.items() if joint not in entries}
    merged = {**kept, **entries}
    order = [j for j in setup.config.joints if j in merged] + [
        j for j in merged if j not in setup.config.joints
    ]
    file = CalibrationFile(version=FORMAT_VERSION, joints={j: merged[j] for j in order})
    write_calibration(out, file)
    print(f"wrote {out} ({len(entries)} joint(s) calibrated, {len(kept)} kept)")
    named = setup.config.calibration
    if named is None:
        relative = os.path.relpath(out.resolve(), setup.path.resolve().parent)
        print(f"add this line to {setup.path} to use it: calibration: {relative}")
    elif resolve_path(setup.path.parent, named).resolve() != out.resolve():
        print(f"note: {setup.path} names another calibration file: calibration: {named}")
    return EXIT_OK
