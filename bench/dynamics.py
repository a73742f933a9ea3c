"""Dynamics benchmark: gravity torques, inverse dynamics (RNEA), the mass matrix (CRBA) and the
Coriolis matrix per call on a 7-DOF arm (the Panda, its fingers locked at 0) and the UR5.

    python bench/dynamics.py [--repeats 31] [--calls 2000]

Prints the median over `--repeats` batches of the mean time of one call (µs), through the public
API (`kinematics.dynamics.Dynamics`: input checks, output allocated per call). Where Pinocchio
(`pip install -e '.[bench]'`) is installed, it is measured in the same run on the same states
after checking that it gives the same answer, and the ratio armd/Pinocchio is printed (< 1: armd
is faster); its `crba` fills the upper triangle only, armd's mass matrix is the full matrix.
The host's CPU steal time over the run is printed: timings are wall-clock on a shared machine,
compare ratios from one run, not absolute numbers across runs.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from collections.abc import Callable
from pathlib import Path

# bench/ holds scripts named like packages (kinematics.py, drivers.py): import the packages with
# this folder off the path, then put it back for the sibling bench modules.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
import numpy as np  # noqa: E402

from kinematics import ConstantMotor, Inertial, JointMotor, KinematicTree, Link, load_tree  # noqa: E402
from kinematics.dynamics import Dynamics  # noqa: E402

sys.path.append(str(_HERE))
from bench_common import per_call_us  # noqa: E402
from harness import CpuTimes, steal_pct  # noqa: E402

ROBOTS = _HERE.parent / "config" / "robots"
TARGETS_US = {"gravity": 3.0, "rnea": 5.0, "mass matrix": 10.0}  # the 7-DOF arm's


def locked(tree: KinematicTree, joints: set[str]) -> KinematicTree:
    """`tree` with `joints` fixed at 0 (as Pinocchio's buildReducedModel at the neutral q)."""
    links = []
    for link in tree.links:
        motor = link.motor
        if isinstance(motor, JointMotor) and link.joint_name in joints:
            motor = ConstantMotor(motor.origin)  # revolute or prismatic, at 0
        links.append(Link(link.name, link.parent, motor, link.inertial))
    return KinematicTree(links, name=tree.name)


def pinocchio_calls(
    path: Path, tree: KinematicTree, lock: set[str], state: tuple[np.ndarray, ...]
) -> dict[str, Callable[[], object]] | None:
    """Pinocchio's calls on the same model and state, checked against armd's answers first."""
    try:
        import pinocchio as pin  # noqa: PLC0415
    except ImportError as exc:
        print(f"Pinocchio not measured ({exc}); install the bench extra to compare.")
        return None
    full = pin.buildModelFromUrdf(str(path))
    ids = [full.getJointId(name) for name in sorted(lock)]
    model = pin.buildReducedModel(full, ids, pin.neutral(full)) if ids else full
    data = model.createData()
    order = [model.joints[model.getJointId(n)].idx_v for n in tree.joint_names]
    assert order == list(range(tree.dof)), "Pinocchio orders these joints as armd does"
    q, qd, qdd = state
    dynamics = Dynamics(tree)
    assert np.allclose(pin.rnea(model, data, q, qd, qdd), dynamics.rnea(q, qd, qdd), atol=1e-9)
    assert np.allclose(pin.computeGeneralizedGravity(model, data, q), dynamics.gravity(q))
    upper = pin.crba(model, data, q)
    assert np.allclose(np.triu(upper), np.triu(dynamics.mass_matrix(q)), atol=1e-12)
    coriolis = pin.computeCoriolisMatrix(model, data, q, qd)
    assert np.allclose(coriolis, dynamics.coriolis_matrix(q, qd), atol=1e-12)
    return {
        "gravity": lambda: pin.computeGeneralizedGravity(model, data, q),
        "rnea": lambda: pin.rnea(model, data, q, qd, qdd),
        "mass matrix": lambda: pin.crba(model, data, q),
        "coriolis matrix": lambda: pin.computeCoriolisMatrix(model, data, q, qd),
    }


def bench_arm(
    label: str, filename: str, tool: str, lock: set[str], args: argparse.Namespace
) -> None:
    path = ROBOTS / filename
    tree = locked(load_tree(path), lock)
    dynamics = Dynamics(tree)
    rng = np.random.default_rng(0)
    q = rng.uniform(tree.limits.lower, tree.limits.upper)
    qd, qdd = rng.normal(size=tree.dof), rng.normal(size=tree.dof)
    ours: dict[str, Callable[[], object]] = {
        "gravity": lambda: dynamics.gravity(q),
        "rnea": lambda: dynamics.rnea(q, qd, qdd),
        "mass matrix": lambda: dynamics.mass_matrix(q),
        "coriolis matrix": lambda: dynamics.coriolis_matrix(q, qd),
    }
    payload = dynamics.payload(tool, Inertial(1.0, (0.0, 0.0, 0.05)))
    ours["rnea with a payload"] = lambda: dynamics.rnea(q, qd, qdd, payload)
    theirs = pinocchio_calls(path, tree, lock, (q, qd, qdd))
    print(f"\n{label} ({filename}, dof {tree.dof}, {len(dynamics.bodies)} bodies)")
    for name, call in ours.items():
        us = per_call_us(call, args.calls, args.repeats)
        line = f"  {name:<22} armd {us:7.3f} µs"
        if theirs is not None and name in theirs:
            ref = per_call_us(theirs[name], args.calls, args.repeats)
            line += f"   pinocchio {ref:7.3f} µs   ratio {us / ref:5.2f}"
        if lock and name in TARGETS_US:
            line += f"   target ≤ {TARGETS_US[name]:g} µs"
        print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=31, help="timing batches (median)")
    parser.add_argument("--calls", type=int, default=2000, help="calls per batch")
    args = parser.parse_args()
    print(
        f"armd dynamics benchmark — {platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()}, numpy {np.__version__}"
    )
    print(f"load average {os.getloadavg()[0]:.2f} at the start (2 CPUs: above ~1, others run)")
    before = CpuTimes.now()
    fingers = {"panda_finger_joint1", "panda_finger_joint2"}
    bench_arm("Panda, fingers locked", "panda.urdf", "panda_hand_tcp", fingers, args)
    bench_arm("UR5", "ur5.urdf", "tool0", set(), args)
    steal = steal_pct(before, CpuTimes.now())
    print(f"\nCPU steal time during the run: {steal:.2f} %; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
