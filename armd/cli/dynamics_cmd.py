"""``armd dynamics``: the gravity torques, the inverse-dynamics torques and the mass matrix of a
model at one state, with an optional payload and gravity vector (`kinematics.dynamics`).

Joint vectors are given as ``NAME=VALUE`` words (``--q shoulder=0.3 elbow=-1.2``) or as plain
values in q order (``armd model show``), as ``armd fk`` takes them: ``--q`` names every joint,
``--qd`` and ``--qdd`` default to 0 for the joints they leave out. Units are SI: rad, rad/s,
rad/s², N·m and kg·m² (m, m/s, m/s², N and kg for prismatic joints). The payload sits on
``--link`` (default: the model's tool link, as for ``armd fk``), its centre of mass and inertia
in that link's frame. Exit codes: 0 success, 1 a model problem or an inertia no rigid body has,
2 bad arguments. Errors are one line on stderr.
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

from armd.cli.common import EXIT_OK, UsageError, guarded
from armd.cli.kinematics_cmd import LINK_HELP, link_name
from kinematics import Inertial, KinematicsError, KinematicTree
from kinematics.dynamics import STANDARD_GRAVITY, Dynamics, Payload
from kinematics.errors import InertialError
from kinematics.models.loaders import load_tree

__all__ = ["joint_values", "register"]

Array = NDArray[np.float64]

_guarded = guarded(KinematicsError, OSError)


def _number(option: str, word: str) -> float:
    try:
        value = float(word)
    except ValueError:
        raise UsageError(f"{option}: {word!r} must be a number or NAME=VALUE") from None
    if not math.isfinite(value):
        raise UsageError(f"{option}: {word!r} must be finite")
    return value


def joint_values(
    option: str, words: Sequence[str], tree: KinematicTree, *, required: bool
) -> Array:
    """The (dof,) vector of `words`: every one ``NAME=VALUE`` (joints left out are 0 unless
    `required`) or every one a plain value, in q order. Raises `UsageError` naming the word."""
    names = tree.joint_names
    if not any("=" in word for word in words):
        if (words or required) and len(words) != tree.dof:
            raise UsageError(
                f"{option}: expected {tree.dof} values ({', '.join(names)}) or NAME=VALUE "
                f"words, got {len(words)}"
            )
        return np.array([_number(option, w) for w in words] or np.zeros(tree.dof))
    values: dict[str, float] = {}
    for word in words:
        name, sep, text = word.partition("=")
        if not sep:
            raise UsageError(f"{option}: {word!r}: write every value as NAME=VALUE or none")
        if name not in names:
            raise UsageError(f"{option}: unknown joint {name!r} (joints: {', '.join(names)})")
        if name in values:
            raise UsageError(f"{option}: joint {name!r} given twice")
        values[name] = _number(f"{option} {name}", text)
    missing = [name for name in names if name not in values]
    if required and missing:
        raise UsageError(f"{option}: no value for {', '.join(missing)}")
    return np.array([values.get(name, 0.0) for name in names])


def _vector3(option: str, values: Sequence[float] | None, default: Sequence[float]) -> Array:
    arr = np.array(default if values is None else values, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise UsageError(f"{option}: {arr.tolist()} must be 3 finite numbers")
    return arr


def _payload(args: argparse.Namespace, dynamics: Dynamics, link: str) -> Payload | None:
    mass = args.payload_mass
    if mass is None:
        if args.payload_com is not None or args.payload_inertia is not None:
            raise UsageError("--payload-com and --payload-inertia need --payload-mass")
        return None
    if not (math.isfinite(mass) and mass >= 0.0):
        raise UsageError(f"--payload-mass: {mass:g} must be a finite mass >= 0 kg")
    com = _vector3("--payload-com", args.payload_com, (0.0, 0.0, 0.0))
    inertia = args.payload_inertia or (0.0,) * 6
    if not all(math.isfinite(v) for v in inertia):
        raise UsageError(f"--payload-inertia: {list(inertia)} must be 6 finite numbers")
    try:
        inertial = Inertial(mass, tuple(com), tuple(inertia))
    except InertialError as exc:
        raise InertialError(f"payload on link {link!r}: {exc}") from None
    return dynamics.payload(link, inertial)


def _fixed(values: Array) -> str:
    return "  ".join(f"{round(float(v), 6) + 0.0:>12.6f}" for v in values)


def _print_text(
    tree: KinematicTree, q: Array, gravity: Array, tau: Array, M: Array, notes: list[str]
) -> None:
    print("\n".join(notes))
    width = max((len(name) for name in tree.joint_names), default=0)
    print(f"  {'joint':<{width}}  {'q':>12}  {'gravity':>12}  {'tau':>12}   (N·m, N for sliders)")
    for i, name in enumerate(tree.joint_names):
        print(f"  {name:<{width}}  {_fixed(np.array([q[i], gravity[i], tau[i]]))}")
    print("mass matrix (kg·m², kg for sliders; rows and columns in q order):")
    for row in M:
        print(f"  {_fixed(row)}")


@_guarded
def _cmd_dynamics(args: argparse.Namespace) -> int:
    tree = load_tree(args.file)
    q = joint_values("--q", args.q, tree, required=True)
    qd = joint_values("--qd", args.qd, tree, required=False)
    qdd = joint_values("--qdd", args.qdd, tree, required=False)
    g = _vector3("--gravity", args.gravity, STANDARD_GRAVITY)
    dynamics = Dynamics(tree, gravity=g)
    payload = None
    if any(v is not None for v in (args.payload_mass, args.payload_com, args.payload_inertia)):
        payload = _payload(args, dynamics, link_name(tree, args.link))
    gravity = dynamics.gravity(q, payload)
    tau = dynamics.rnea(q, qd, qdd, payload)
    M = dynamics.mass_matrix(q, payload)
    if args.json:
        doc: dict[str, Any] = {
            "joints": list(tree.joint_names),
            "gravity": gravity.tolist(),
            "tau": tau.tolist(),
            "mass_matrix": M.tolist(),
        }
        print(json.dumps(doc, allow_nan=False))
    else:
        notes = [f"model    {tree.name}", f"gravity  {g.tolist()} m/s² (root frame)"]
        if payload is not None:
            inertial = payload.inertial
            notes.append(
                f"payload  {inertial.mass:g} kg on {payload.link}, centre of mass "
                f"{list(inertial.com)} m"
            )
        _print_text(tree, q, gravity, tau, M, notes)
    for violation in tree.limits.check(q):
        print(f"armd: warning: {violation}", file=sys.stderr)
    return EXIT_OK


def _joint_argument(parser: argparse.ArgumentParser, option: str, what: str) -> None:
    parser.add_argument(
        option,
        nargs="*",
        default=[],
        metavar="NAME=VALUE",
        help=f"{what}: NAME=VALUE words, or plain values in q order (see `armd model show`)",
    )


def register(subparsers: Any) -> None:
    """Add ``dynamics`` to the CLI's subparsers."""
    parser = subparsers.add_parser(
        "dynamics", help="gravity torques, inverse dynamics and mass matrix at a state"
    )
    parser.add_argument("file", type=Path, help=".kinematic.json or .urdf file")
    _joint_argument(parser, "--q", "joint positions (rad, m), every joint")
    _joint_argument(parser, "--qd", "joint velocities (rad/s, m/s; default 0)")
    _joint_argument(parser, "--qdd", "joint accelerations (rad/s², m/s²; default 0)")
    parser.add_argument("--link", help=f"the payload's link: {LINK_HELP}")
    parser.add_argument("--payload-mass", type=float, metavar="KG", help="payload mass (kg)")
    parser.add_argument(
        "--payload-com",
        nargs=3,
        type=float,
        metavar=("X", "Y", "Z"),
        help="payload centre of mass in the link's frame (m; default 0 0 0)",
    )
    parser.add_argument(
        "--payload-inertia",
        nargs=6,
        type=float,
        metavar=("IXX", "IXY", "IXZ", "IYY", "IYZ", "IZZ"),
        help="payload inertia about its centre of mass, link axes (kg·m²; default 0: a point)",
    )
    parser.add_argument(
        "--gravity",
        nargs=3,
        type=float,
        metavar=("X", "Y", "Z"),
        help="gravity acceleration in the root frame (m/s²; default 0 0 -9.81)",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output (SI units)")
    parser.set_defaults(func=_cmd_dynamics)
