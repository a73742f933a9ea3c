"""``armd model show`` (the link tree, DOF and joint limits of a model file) and ``armd model
convert`` (to ``.kinematic.json``), with what the other kinematics commands print alike
(`print_json`, `joint_kind`, ``--degrees``).

Text output is for people, in rad and m (``--degrees`` shows angles in degrees instead);
``--json`` output is for programs (SI units; unbounded limits as null). Exit codes: 0 success, 1 a
model or file problem (an output file that exists without ``--force``), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from armd.cli.common import EXIT_OK, guarded
from kinematics import KinematicsError, KinematicTree
from kinematics.limits import JointLimit
from kinematics.models.loaders import load_tree, save_tree
from kinematics.motors import JointMotor, Link

__all__ = ["degrees_argument", "joint_kind", "print_json", "register"]


_guarded = guarded(KinematicsError, OSError)


def _json_number(value: float) -> float | None:
    return value if math.isfinite(value) else None


def print_json(doc: dict[str, Any]) -> None:
    """`doc` as one line of JSON on stdout (strict: no NaN or infinity)."""
    print(json.dumps(doc, allow_nan=False))


def degrees_argument(parser: argparse.ArgumentParser) -> None:
    """``--degrees``: text output with angles in degrees."""
    parser.add_argument(
        "--degrees", action="store_true", help="text output: angles in degrees (default rad)"
    )


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


def joint_kind(tree: KinematicTree, joint: str) -> str:
    """``revolute`` or ``prismatic``: the kind of `joint`'s motor."""
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
        kind = joint_kind(tree, name)
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
            "type": joint_kind(tree, name),
            **{
                key: _json_number(getattr(limit, key))
                for key in ("lower", "upper", "velocity", "acceleration")
            },
        }
        for name, limit in tree.limits.items()
    ]
    print_json(
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


def register(subparsers: Any) -> None:
    """Add ``model`` (``show``, ``convert``) to the CLI's subparsers."""
    model = subparsers.add_parser("model", help="inspect or convert a kinematic model file")
    actions = model.add_subparsers(dest="model_command", metavar="ACTION", required=True)
    show = actions.add_parser("show", help="print the link tree, DOF and joint limits")
    show.add_argument("file", type=Path, help=".kinematic.json or .urdf file")
    show.add_argument("--json", action="store_true", help="machine-readable output (SI units)")
    degrees_argument(show)
    show.set_defaults(func=_cmd_show)
    convert = actions.add_parser("convert", help="convert a model to .kinematic.json")
    convert.add_argument("input", type=Path, help=".kinematic.json or .urdf file")
    convert.add_argument("output", type=Path, help="the .kinematic.json file to write")
    convert.add_argument("--force", action="store_true", help="overwrite OUTPUT if it exists")
    convert.set_defaults(func=_cmd_convert)
