"""Kinematics commands: ``armd fk`` and ``armd ik`` (``armd model``: `armd.cli.model_cmd`).

Text output is for people (aligned columns), in the units of the config, the API and `armd check`:
rad and m (``--degrees`` shows angles in degrees instead); ``--json`` output is for programs (SI
units: m, rad; quaternions ``[w, x, y, z]``). Without ``--link``, fk and ik use the model's tool
link (`tool_link`). Exit codes: 0 success, 1 a model or file problem or an IK target not reached,
2 bad arguments. Errors are one line on stderr.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from armd.cli.common import EXIT_FAILURE, EXIT_OK, UsageError, guarded
from armd.cli.model_cmd import degrees_argument, joint_kind, print_json
from kinematics import KinematicsError, KinematicTree, Pose, solve_ik
from kinematics.ik import IKOptions, IKResult
from kinematics.models.loaders import load_tree

__all__ = ["LINK_HELP", "link_name", "register", "tool_link"]


Array = NDArray[np.float64]


_guarded = guarded(KinematicsError, OSError)


# -- argument helpers ---------------------------------------------------------------------------


def _finite(option: str, values: Sequence[float], count: int) -> Array:
    arr = np.array(values, dtype=np.float64)
    if arr.shape != (count,):
        raise UsageError(f"{option}: expected {count} values, got {len(values)}")
    if not np.all(np.isfinite(arr)):
        raise UsageError(f"{option}: values must be finite, got {list(values)}")
    return arr


def _joint_vector(option: str, values: Sequence[float], tree: KinematicTree) -> Array:
    if len(values) != tree.dof:
        raise UsageError(
            f"{option}: expected {tree.dof} values ({', '.join(tree.joint_names)}), "
            f"got {len(values)}"
        )
    return _finite(option, values, tree.dof)


TOOL_NAMES = ("tool0", "tcp", "tool", "flange", "ee_link", "end_effector")
"""Leaf names that mark a tool link, most specific first (a leaf ending in one counts: a Panda's
``panda_hand_tcp``)."""


def tool_link(tree: KinematicTree) -> str | None:
    """The link fk and ik use without ``--link``: the only leaf of a serial chain; on a branching
    model the leaf named like a tool (`TOOL_NAMES`, in that order), if exactly one is."""
    leaves = tree.leaves
    if len(leaves) == 1:
        return leaves[0]
    for name in TOOL_NAMES:
        matches = [leaf for leaf in leaves if leaf.lower().endswith(name)]
        if len(matches) == 1:
            return matches[0]
    return None


def link_name(tree: KinematicTree, link: str | None) -> str:
    if link is None:
        default = tool_link(tree)
        if default is None:
            raise UsageError(
                f"--link is required: the model branches and no leaf is named like a tool "
                f"(leaves: {', '.join(tree.leaves)})"
            )
        return default
    if link not in tree.link_names:
        raise UsageError(f"--link: unknown link {link!r} (links: {', '.join(tree.link_names)})")
    return link


def _fixed(values: Array, decimals: int) -> str:
    return "  ".join(f"{round(float(v), decimals) + 0.0:.{decimals}f}" for v in values)


def _rpy(pose: Pose) -> Array:
    """Fixed-axis roll, pitch, yaw (rad) of the pose's rotation, ``R = Rz(y) Ry(p) Rx(r)``;
    at pitch ±90° the roll is set to 0."""
    R = pose.rotation_matrix
    pitch = math.atan2(-R[2, 0], math.hypot(R[0, 0], R[1, 0]))
    if math.hypot(R[0, 0], R[1, 0]) < 1e-9:
        return np.array([0.0, pitch, math.atan2(-R[0, 1], R[1, 1])])
    return np.array([math.atan2(R[2, 1], R[2, 2]), pitch, math.atan2(R[1, 0], R[0, 0])])


# -- fk / ik ------------------------------------------------------------------------------------


def _pose_lines(pose: Pose, degrees: bool) -> list[str]:
    rpy = _rpy(pose)
    rpy_text = f"{_fixed(np.degrees(rpy), 4)}  deg" if degrees else f"{_fixed(rpy, 6)}  rad"
    return [
        f"position    {_fixed(pose.translation, 6)}  m",
        f"quaternion  {_fixed(pose.quaternion, 6)}  [w x y z]",
        f"rpy         {rpy_text} (fixed axes x, y, z)",
    ]


@_guarded
def _cmd_fk(args: argparse.Namespace) -> int:
    tree = load_tree(args.file)
    link = link_name(tree, args.link)
    q = _joint_vector("--q", args.q, tree)
    pose = tree.fk(q, link)
    outside = [str(v) for v in tree.limits.check(q)]
    if args.json:
        print_json(
            {
                "link": link,
                "q": q.tolist(),
                "position": pose.translation.tolist(),
                "orientation": pose.quaternion.tolist(),
                "outside_limits": outside,
            }
        )
    else:
        print("\n".join([f"link        {link}", *_pose_lines(pose, args.degrees)]))
    for violation in outside:
        print(f"armd: warning: {violation}", file=sys.stderr)
    return EXIT_OK


def _ik_target(args: argparse.Namespace) -> Pose | Array:
    position = _finite("--position", args.position, 3)
    if args.orientation is None:
        return position
    orientation = _finite("--orientation", args.orientation, 4)
    if np.linalg.norm(orientation) < 1e-9:
        raise UsageError(f"--orientation: {args.orientation} must be a non-zero quaternion")
    return Pose(position, orientation)


@_guarded
def _cmd_ik(args: argparse.Namespace) -> int:
    tree = load_tree(args.file)
    link = link_name(tree, args.link)
    target = _ik_target(args)
    if args.seed is None:
        seed = tree.limits.clamp(np.zeros(tree.dof))
    else:
        seed = _joint_vector("--seed", args.seed, tree)
    if not (args.time_budget >= 0.0 and math.isfinite(args.time_budget)):
        raise UsageError(f"--time-budget: {args.time_budget} must be >= 0 seconds")
    result = solve_ik(
        tree, target, seed, link=link, options=IKOptions(time_budget_s=args.time_budget)
    )
    pose = tree.fk(result.q, link)
    if args.json:
        print_json(
            {
                "success": result.success,
                "link": link,
                "q": result.q.tolist(),
                "joints": dict(zip(tree.joint_names, result.q.tolist(), strict=True)),
                "position_error": result.position_error,
                "rotation_error": result.rotation_error,
                "iterations": result.iterations,
                "position": pose.translation.tolist(),
                "orientation": pose.quaternion.tolist(),
            }
        )
    else:
        _ik_text(tree, link, result, pose, args.degrees)
    errors = f"position error {result.position_error:.3g} m"
    if isinstance(target, Pose):
        errors += f", rotation error {result.rotation_error:.3g} rad"
    if not result.success:
        print(f"armd: ik did not converge: {errors}", file=sys.stderr)
        return EXIT_FAILURE
    if not args.json:
        print(errors)
    return EXIT_OK


def _ik_text(tree: KinematicTree, link: str, result: IKResult, pose: Pose, degrees: bool) -> None:
    print(f"converged   {'yes' if result.success else 'no'} ({result.iterations} iterations)")
    print(f"link        {link}")
    width = max((len(name) for name in tree.joint_names), default=0)
    for name, value in zip(tree.joint_names, result.q, strict=True):
        if joint_kind(tree, name) != "revolute":
            shown = f"{value:+.9f} m"
        else:
            shown = f"{math.degrees(value):+.4f}°" if degrees else f"{value:+.9f} rad"
        print(f"  {name:<{width}}  {shown}")
    print("\n".join(_pose_lines(pose, degrees)))


# -- registration -------------------------------------------------------------------------------


LINK_HELP = (
    "the link (default: the end of a serial chain; on a branching model the leaf named like a "
    "tool: tool0, *tcp, *tool, *flange, ee_link, *end_effector)"
)


def _add_fk_parser(subparsers: Any) -> None:
    fk = subparsers.add_parser("fk", help="forward kinematics: the pose of a link at q")
    fk.add_argument("file", type=Path, help=".kinematic.json or .urdf file")
    fk.add_argument(
        "--q",
        nargs="*",
        type=float,
        default=[],
        metavar="Q",
        help="joint values in q order (rad, m; see `armd model show`); write negative values "
        "in plain decimals (-0.001, not -1e-3)",
    )
    fk.add_argument("--link", help=LINK_HELP)
    fk.add_argument("--json", action="store_true", help="machine-readable output")
    degrees_argument(fk)
    fk.set_defaults(func=_cmd_fk)


def _add_ik_parser(subparsers: Any) -> None:
    ik = subparsers.add_parser("ik", help="inverse kinematics: q that puts a link at a target")
    ik.add_argument("file", type=Path, help=".kinematic.json or .urdf file")
    ik.add_argument(
        "--position",
        nargs=3,
        type=float,
        required=True,
        metavar=("X", "Y", "Z"),
        help="target position in the root frame (m)",
    )
    ik.add_argument(
        "--orientation",
        nargs=4,
        type=float,
        metavar=("W", "X", "Y", "Z"),
        help="target orientation quaternion (default: position only)",
    )
    ik.add_argument(
        "--seed",
        nargs="*",
        type=float,
        metavar="Q",
        help="initial joint values (default: zeros clipped into the limits)",
    )
    ik.add_argument("--link", help=LINK_HELP)
    ik.add_argument(
        "--time-budget",
        type=float,
        default=0.1,
        metavar="S",
        help="seconds for random restarts when the seed does not converge (0.1)",
    )
    ik.add_argument("--json", action="store_true", help="machine-readable output")
    degrees_argument(ik)
    ik.set_defaults(func=_cmd_ik)


def register(subparsers: Any) -> None:
    """Add ``fk`` and ``ik`` to the CLI's subparsers."""
    _add_fk_parser(subparsers)
    _add_ik_parser(subparsers)
