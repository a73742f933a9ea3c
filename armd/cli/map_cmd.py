"""``armd map MODEL --chain CHAIN.json``: put a model in the shape of a recorded chain.

A chain file holds the positions of another chain's joints (a leader arm, a tracked skeleton),
each under the name of the model's link that corresponds to it, like the MQTT keypoints goal:

    {"description": "optional text", "points": {"upper_arm_link": [x, y, z], ...},
     "joints": {"shoulder_pan_joint": 0.6, ...}}

Positions are in m in the model's root frame; only the directions between consecutive points
count (the points are taken in the model's link order, root first). ``joints`` (optional) are the
model's joint values (rad, m) where the chain was recorded, when known: they seed the mapping
(unless ``--seed`` is given), so that of the branches reaching the shape the recorded one wins
(the mapping prefers the branch closest to its seed). The command maps the points with
`kinematics.mapping.map_chain` and prints the joint values and the direction errors.

Text output is for people (aligned columns, rad; ``--degrees`` for degrees); ``--json`` output is
for programs (SI units).
Exit codes: 0 mapped within the tolerance, 1 a model or chain file problem or a shape not reached
within the tolerance, 2 bad arguments. Errors are one line on stderr.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from armd.cli.common import EXIT_FAILURE, EXIT_OK, UsageError, guarded
from armd.errors import ArmdError
from armd.planning.goals import KEYPOINTS_TOLERANCE
from kinematics import KinematicsError, KinematicTree
from kinematics.mapping import ChainMapping, MappingOptions, map_chain
from kinematics.models.loaders import load_tree
from kinematics.motors import JointMotor

__all__ = ["ChainFileError", "load_chain", "register"]

_KEYS = ("description", "points", "joints")

Array = NDArray[np.float64]


class ChainFileError(ArmdError):
    """A chain file is invalid; the message names the file and the key."""


_guarded = guarded(ChainFileError, KinematicsError, OSError)


def _is_number(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:  # an integer too large for a float
        return False


def _is_point(value: object) -> bool:
    return isinstance(value, list) and len(value) == 3 and all(_is_number(c) for c in value)


def _document(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise ChainFileError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(document, dict):
        raise ChainFileError(f"{path}: must be a JSON object with 'points'")
    unknown = sorted(set(document) - set(_KEYS))
    if unknown:
        raise ChainFileError(f"{path}: unknown key(s) {unknown}; expected {list(_KEYS)}")
    return document


def recorded_joints(path: Path, tree: KinematicTree) -> Array | None:
    """The chain file's ``joints`` as a joint vector (unnamed joints at 0, clamped into the
    limits), or None without them. Raises `ChainFileError` naming the file and key."""
    joints = _document(path).get("joints")
    if joints is None:
        return None
    if not isinstance(joints, dict):
        raise ChainFileError(f"{path}: joints: must be an object {{joint name: value}}")
    for name, value in joints.items():
        if name not in tree.joint_names:
            raise ChainFileError(
                f"{path}: joints.{name}: unknown joint of model {tree.name!r}; "
                f"joints: {', '.join(tree.joint_names)}"
            )
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise ChainFileError(f"{path}: joints.{name}: must be a finite number (rad or m)")
    return tree.limits.clamp(tree.q_from_mapping({k: float(v) for k, v in joints.items()}))


def load_chain(path: Path, tree: KinematicTree) -> tuple[list[str], Array]:
    """(link names in the model's order, their points (k, 3) m) from a chain file. Raises
    `ChainFileError` naming the file and key, `OSError` when it cannot be read."""
    document = _document(path)
    points = document.get("points")
    if not isinstance(points, dict):
        raise ChainFileError(f"{path}: points: must be an object {{link name: [x, y, z]}}")
    for name, point in points.items():
        if name not in tree.link_names:
            raise ChainFileError(
                f"{path}: points.{name}: unknown link of model {tree.name!r}; "
                f"links: {', '.join(tree.link_names)}"
            )
        if not _is_point(point):
            raise ChainFileError(f"{path}: points.{name}: must be 3 finite numbers [x, y, z]")
    if len(points) < 2:
        raise ChainFileError(f"{path}: points: must name at least 2 links")
    links = sorted(points, key=tree.link_names.index)
    return links, np.array([points[name] for name in links], dtype=np.float64)


def _seed(tree: KinematicTree, values: Sequence[float] | None) -> Array:
    if values is None:
        return tree.limits.clamp(np.zeros(tree.dof))
    if len(values) != tree.dof:
        raise UsageError(
            f"--seed: expected {tree.dof} values ({', '.join(tree.joint_names)}), got {len(values)}"
        )
    seed = np.array(values, dtype=np.float64)
    if not np.all(np.isfinite(seed)):
        raise UsageError(f"--seed: values must be finite, got {list(values)}")
    return seed


def _revolute(tree: KinematicTree, joint: str) -> bool:
    link = next(link for link in tree.links if link.joint_name == joint)
    return isinstance(link.motor, JointMotor) and link.motor.kind == "revolute"


def _print_text(
    tree: KinematicTree, links: list[str], result: ChainMapping, tolerance: float, degrees: bool
) -> None:
    errors = f"worst segment error {result.worst_error:.3g} rad, tolerance {tolerance:g} rad"
    print(f"mapped      {'yes' if result.success else 'no'} ({errors})")
    print(f"chain       {' -> '.join(links)}")
    print("joints:")
    width = max(len(name) for name in tree.joint_names)
    for i, name in enumerate(tree.joint_names):
        value = float(result.q[i])
        if not _revolute(tree, name):
            shown = f"{value:+.9f} m"
        else:
            shown = f"{math.degrees(value):+10.4f}°" if degrees else f"{value:+.9f} rad"
        origin = "from the directions" if result.determined[i] else "seed (no direction decides it)"
        print(f"  {name:<{width}}  {shown}  {origin}")
    print("segments:")
    segments = [f"{a} -> {b}" for a, b in itertools.pairwise(links)]
    width = max(len(segment) for segment in segments)
    for segment, error in zip(segments, result.segment_errors, strict=True):
        shown = f"{math.degrees(error):.4f}°" if degrees else f"{error:.3g} rad"
        print(f"  {segment:<{width}}  error {shown}")


def _print_json(
    tree: KinematicTree, links: list[str], result: ChainMapping, tolerance: float, _: bool
) -> None:
    names = tree.joint_names
    doc: dict[str, Any] = {
        "success": result.success,
        "tolerance": tolerance,
        "message": result.message,
        "links": links,
        "q": result.q.tolist(),
        "joints": dict(zip(names, result.q.tolist(), strict=True)),
        "determined": dict(zip(names, result.determined.tolist(), strict=True)),
        "segment_errors": result.segment_errors.tolist(),
        "joint_residuals": dict(zip(names, result.joint_residuals.tolist(), strict=True)),
    }
    print(json.dumps(doc, allow_nan=False))


@_guarded
def _cmd_map(args: argparse.Namespace) -> int:
    if not (0.0 < args.tolerance < math.pi):
        raise UsageError(f"--tolerance: {args.tolerance} must be in (0, pi) rad")
    tree = load_tree(args.file)
    links, points = load_chain(args.chain, tree)
    recorded = recorded_joints(args.chain, tree) if args.seed is None else None
    seed = recorded if recorded is not None else _seed(tree, args.seed)
    try:
        result = map_chain(tree, links, points, seed, options=MappingOptions(args.tolerance))
    except KinematicsError as exc:
        raise ChainFileError(f"{args.chain}: {exc}") from None
    (_print_json if args.json else _print_text)(tree, links, result, args.tolerance, args.degrees)
    if not result.success:
        print(f"armd: map did not reach the shape: {result.message}", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK


def register(subparsers: Any) -> None:
    """Add ``map`` to the CLI's subparsers."""
    parser = subparsers.add_parser(
        "map", help="joint values that put the arm in the shape of a recorded chain"
    )
    parser.add_argument("file", type=Path, help="the model: .kinematic.json or .urdf file")
    parser.add_argument(
        "--chain",
        type=Path,
        required=True,
        help="the recorded chain: a JSON file {'points': {link name: [x, y, z]}} (m, root frame)",
    )
    parser.add_argument(
        "--seed",
        nargs="*",
        type=float,
        metavar="Q",
        help="the current joint values, preferred where the shape leaves freedom (default: the "
        "chain file's recorded 'joints', else zeros clipped into the limits)",
    )
    parser.add_argument(
        "--tolerance",
        type=float,
        default=KEYPOINTS_TOLERANCE,
        metavar="RAD",
        help=f"worst segment direction error accepted ({KEYPOINTS_TOLERANCE:g}, as the daemon's "
        "keypoints goal)",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output (SI units)")
    parser.add_argument(
        "--degrees", action="store_true", help="text output: angles in degrees (default rad)"
    )
    parser.set_defaults(func=_cmd_map)
