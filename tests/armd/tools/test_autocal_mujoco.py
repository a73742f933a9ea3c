"""``calibrate --auto``'s end-stop search (`armd.tools.autocal`) on the physics-simulated SO-101 of
config/so101_physics.yaml: the `mujoco` driver's joints stop at their URDF limits (MuJoCo's joint
limits, as a servo horn's stop), and the search finds them, the searched joint's torque lowered
to 0.2 of its 2.9 N·m stall torque. Simulated time: the search's clock is the physics' and its
sleep steps the physics (`advance`), so nothing depends on timing.

The shoulder pan and the wrist roll: both turn about axes gravity does not load (the pan's is
vertical, the roll's carries the gripper nearly balanced), so 0.58 N·m moves them, as it would the
real servos; the lift, elbow and wrist flex hold the arm's weight and would need more torque than
a safe search uses (and the whole arm's search, ~40 s of simulated time per joint, costs more
wall time than two joints show).

Bound: MuJoCo's joint limit is a soft constraint (solref 0.02 s, critically damped; solimp
d = 0.9 to 0.95): at rest, pushed into it, a joint gives way by r with d·k·r = (1 - d)·a0
(MuJoCo's constraint model), k = 1/(0.95 × 0.02 s)² and a0 the acceleration the push would
cause unconstrained, at most τ / armature (the armature, 0.01 kg·m², adds to every inertia the
joint sees). At τ = 0.2 × 2.9 N·m: r ≤ 0.1 × 0.58 / (0.9 × 2770 × 0.01) = 2.3 mrad. The search
records the stop when the joint is still, pushing at its torque limit: within that bound beyond
the URDF's limit (0.6 and 1.2 mrad measured), never short of it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

pytest.importorskip("mujoco", reason="the mujoco driver needs MuJoCo: pip install -e '.[physics]'")

from armd.config.load import load_config
from armd.tools.autocal import AutoSettings, EndStops, limited_drivers
from drivers.mujoco.driver import MujocoDriver
from drivers.mujoco.params import MujocoParams
from drivers.mujoco.physics import Physics

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "config" / "so101_physics.yaml"
JOINTS = ("shoulder_pan", "wrist_roll")
TORQUE = 0.2  # of the stall torque: the CLI's default
ARMATURE = 0.01  # kg·m², the joints' smallest inertia (config/so101_physics.yaml)
D_MIN, D_MAX, TIMECONST_S = 0.9, 0.95, 0.02  # MuJoCo's default solimp and solref
STIFFNESS = 1.0 / (D_MAX * TIMECONST_S) ** 2  # k, 1/s²
PUSH_IN = (1 - D_MIN) * TORQUE * 2.9 / (D_MIN * STIFFNESS * ARMATURE)  # rad


class SimulatedTime:
    """The physics' simulated time, s: the clock of the driver and of the search."""

    def __init__(self) -> None:
        self.physics: Physics | None = None

    def __call__(self) -> float:
        return 0.0 if self.physics is None else self.physics.time_s


def physics_config(tmp_path: Path) -> Path:
    config = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    config["model"] = str((CONFIG.parent / config["model"]).resolve())
    params = config["drivers"]["physics"]["params"]
    params["urdf"] = str((ROOT / "config" / params["urdf"]).resolve())
    path = tmp_path / "so101_physics.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


async def test_the_search_finds_the_physics_arms_end_stops_at_its_urdf_limits(
    tmp_path: Path,
) -> None:
    setup = load_config(physics_config(tmp_path), kernels=False)
    joints = [setup.joints[name] for name in JOINTS]
    limited = limited_drivers(setup.drivers, joints, TORQUE)["physics"]
    clock = SimulatedTime()
    driver = MujocoDriver(limited.params, clock=clock, realtime=False)
    clock.physics = driver.physics
    assert isinstance(limited.params, MujocoParams)
    torque = {t.joint: limited.params.devices[t.device].torque_limit for t in joints}
    assert torque == pytest.approx(dict.fromkeys(JOINTS, TORQUE * 2.9), abs=1e-12)

    async def sleep(seconds: float) -> None:
        driver.advance(seconds)

    search = EndStops({"physics": driver}, AutoSettings(), torque, clock=clock, sleep=sleep)
    found = {}
    async with driver:
        await driver.enable()
        for t in joints:
            found[t.joint] = await search.find(t, lambda line: None, setup.limits[t.joint])
    assert driver.touches() == ()  # the stops were the joints', not an object's
    for name, travel in found.items():
        limit = setup.tree.limits[name]
        assert travel.range_ends == ()
        assert limit.lower - PUSH_IN <= travel.low <= limit.lower, (travel, limit)
        assert limit.upper <= travel.high <= limit.upper + PUSH_IN, (travel, limit)
