"""Kinematics commands: ``armd model show|convert``, ``armd fk`` and ``armd ik``.

Text output is for people (aligned columns), in the units of the config, the API and `armd check`:
rad and m (``--degrees`` shows angles in degrees instead); ``--json`` output is for programs (SI
units: m, rad; quaternions ``[w, x, y, z]``; unbounded limits as null). Without ``--link``, fk and
ik use the model's tool link (`tool_link`). Exit codes: 0 success, 1 a model or file problem (an
output file that exists without ``--force``) or an IK target not reached, 2 bad arguments. Errors
are one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from armd.cli.common import EXIT_FAILURE, EXIT_OK, UsageError, guarded
from kinematics import KinematicsError, KinematicTree, Pose, solve_ik
from kinematics.ik import IKOptions, IKResult
from kinematics.limits import JointLimit
from kinematics.models.loaders import load_tree, save_tree
from kinematics.motors import JointMotor, Link

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


def _json_number(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _print_json(doc: dict[str, Any]) -> None:
    print(json.dumps(doc, allow_nan=False))


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


# -- model show / convert -----------------------------------------------------------------------


def _motor_text(link: Link) -> str:
    motor = link.motor
    if not isinstance(motor, JointMotor):
        return "constant"
    text = f"{motor.kind} {link.joint_name!r}"
    if motor.mimic is not None:
        text += f" (mimics {motor.mimic.joint!r})"
    return text


def _value_text(value: float, kind: str, degrees: bool, per: str = "") -> str:
    if math.isinf(value):
        return ("-inf" if value < 0 else "inf") if not per else "unlimited"
    if kind == "revolute":
        return f"{math.degrees(value):.2f}°{per}" if degrees else f"{value:.4f} rad{per}"
    return f"{value:g} m{per}"


def _limit_text(kind: str, limit: JointLimit, degrees: bool) -> str:
    if kind == "revolute" and limit.is_continuous:
        position = "continuous"
    else:
        lower, upper = (_value_text(v, kind, degrees) for v in (limit.lower, limit.upper))
        position = f"[{lower}, {upper}]"
    velocity = _value_text(limit.velocity, kind, degrees, "/s")
    acceleration = _value_text(limit.acceleration, kind, degrees, "/s²")
    return f"{position}  velocity {velocity}  acceleration {acceleration}"


def _joint_kind(tree: KinematicTree, joint: str) -> str:
    link = next(link for link in tree.links if link.joint_name == joint)
    assert isinstance(link.motor, JointMotor)
    return link.motor.kind


def _show_text(tree: KinematicTree, path: Path, degrees: bool) -> None:
    print(f"model  {tree.name}\nfile   {path}\nroot   {tree.root}\ndof    {tree.dof}")
    print(f"links ({len(tree.links)}):")
    depth: dict[str, int] = {}
    for link in tree.links:
        depth[link.name] = 0 if link.parent is None else depth[link.parent] + 1
        print(f"  {'  ' * depth[link.name]}{link.name}  [{_motor_text(link)}]")
    print("joints (q order):")
    width = max((len(name) for name in tree.joint_names), default=0)
    for i, (name, limit) in enumerate(tree.limits.items()):
        kind = _joint_kind(tree, name)
        print(f"  {i:>2}  {name:<{width}}  {kind:<9}  {_limit_text(kind, limit, degrees)}")
    for link in tree.links:
        motor = link.motor
        if isinstance(motor, JointMotor) and motor.mimic is not None:
            m = motor.mimic
            print(f"mimic  {link.joint_name} = {m.multiplier:g} * {m.joint} + {m.offset:g}")


def _show_json(tree: KinematicTree, path: Path) -> None:
    links = []
    for link in tree.links:
        entry: dict[str, Any] = {"name": link.name, "parent": link.parent, "motor": link.motor.kind}
        if isinstance(link.motor, JointMotor):
            entry["joint"] = link.joint_name
            mimic = link.motor.mimic
            if mimic is not None:
                entry["mimic"] = {
                    "joint": mimic.joint,
                    "multiplier": mimic.multiplier,
                    "offset": mimic.offset,
                }
        links.append(entry)
    joints = [
        {
            "name": name,
            "type": _joint_kind(tree, name),
            **{
                key: _json_number(getattr(limit, key))
                for key in ("lower", "upper", "velocity", "acceleration")
            },
        }
        for name, limit in tree.limits.items()
    ]
    _print_json(
        {
            "name": tree.name,
            "file": str(path),
            "root": tree.root,
            "dof": tree.dof,
            "links": links,
            "joints": joints,
        }
    )


@_guarded
def _cmd_show(args: argparse.Namespace) -> int:
    tree = load_tree(args.file)
    if args.json:
        _show_json(tree, args.file)
    else:
        _show_text(tree, args.file, args.degrees)
    return EXIT_OK


@_guarded
def _cmd_convert(args: argparse.Namespace) -> int:
    if args.output.exists() and not args.force:
        raise FileExistsError(f"{args.output}: exists; add --force to overwrite it")
    tree = load_tree(args.input)
    save_tree(tree, args.output)
    print(f"wrote {args.output} ({len(tree.links)} links, dof {tree.dof})")
    return EXIT_OK


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
        _print_json(
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
        _print_json(
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
        if _joint_kind(tree, name) != "revolute":
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


def _degrees_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--degrees", action="store_true", help="text output: angles in degrees (default rad)"
    )


def _add_model_parsers(subparsers: Any) -> None:
    model = subparsers.add_parser("model", help="inspect or convert a kinematic model file")
    actions = model.add_subparsers(dest="model_command", metavar="ACTION", required=True)
    show = actions.add_parser("show", help="print the link tree, DOF and joint limits")
    show.add_argument("file", type=Path, help=".kinematic.json or .urdf file")
    show.add_argument("--json", action="store_true", help="machine-readable output (SI units)")
    _degrees_argument(show)
    show.set_defaults(func=_cmd_show)
    convert = actions.add_parser("convert", help="convert a model to .kinematic.json")
    convert.add_argument("input", type=Path, help=".kinematic.json or .urdf file")
    convert.add_argument("output", type=Path, help="the .kinematic.json file to write")
    convert.add_argument("--force", action="store_true", help="overwrite OUTPUT if it exists")
    convert.set_defaults(func=_cmd_convert)


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
    _degrees_argument(fk)
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
    _degrees_argument(ik)
    ik.set_defaults(func=_cmd_ik)


def register(subparsers: Any) -> None:
    """Add ``model`` (``show``, ``convert``), ``fk`` and ``ik`` to the CLI's subparsers."""
    _add_model_parsers(subparsers)
    _add_fk_parser(subparsers)
    _add_ik_parser(subparsers)
