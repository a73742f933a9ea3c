"""Every file under config/ is loaded: configs through `load_config`, robot models through
`kinematics.load_tree`. A new kind of file there needs a loader here (or an explicit skip)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import pytest
from pydantic import BaseModel

from armd.config.load import load_config
from armd.config.schema import ArmConfig
from drivers import DRIVERS, load_driver_class
from kinematics import load_tree

CONFIG = Path(__file__).resolve().parent.parent / "config"
FILES = sorted(path for path in CONFIG.rglob("*") if path.is_file())
MODEL_SUFFIXES = (".urdf", ".kinematic.json")
SKIPPED = {"README.md": "documentation: attribution of the robot models"}
LOADED_ELSEWHERE = {  # folders whose files other tests load, with the test that does
    "chains": "recorded chains: mapped onto the UR5 by "
    "tests/armd/cli/test_map_cmd.py::test_every_recorded_chain_maps_onto_the_ur5",
    "mosquitto": "broker config, ACL and bridge: loaded into real Mosquittos by "
    "tests/system/test_security.py and tests/system/test_bridge.py",
    "collision": "collision geometry: loaded onto its arm by "
    "tests/kinematics/test_collision_arms.py, and by the configs that name it (below, and "
    "tests/armd/config/test_collision_config.py)",
}


def _id(path: Path) -> str:
    return str(path.relative_to(CONFIG))


def test_config_folder_holds_the_expected_files() -> None:
    names = {_id(path) for path in FILES}
    assert {"sim.yaml", "armd.example.yaml", "robots/ur5.urdf", "robots/panda.urdf"} <= names


@pytest.mark.parametrize("path", FILES, ids=_id)
def test_every_file_loads(path: Path) -> None:
    if path.name in SKIPPED:
        pytest.skip(SKIPPED[path.name])
    folder = path.relative_to(CONFIG).parts[0]
    if folder in LOADED_ELSEWHERE:
        pytest.skip(LOADED_ELSEWHERE[folder])
    if path.suffix in (".yaml", ".yml"):
        setup = load_config(path)
        assert setup.tree.dof == len(setup.joints) + len(setup.fixed_joints)
    elif path.name.endswith(MODEL_SUFFIXES):
        tree = load_tree(path)
        assert tree.dof > 0
    else:
        pytest.fail(f"{_id(path)}: no loader for this file: add one to this test, or skip it")


def test_sim_config_runs_a_six_dof_arm_on_the_sim_driver() -> None:
    setup = load_config(CONFIG / "sim.yaml")
    assert setup.tree.dof == 6
    assert setup.tool_link == "tool0"
    assert setup.config.loop_hz == 250
    assert setup.config.telemetry_hz == 25
    assert (setup.mqtt.host, setup.mqtt.port) == ("127.0.0.1", 1883)
    assert [d.type_name for d in setup.drivers.values()] == ["sim"]
    assert len(setup.drivers["sim"].joints) == 6
    assert any(t.gear_ratio != 1.0 for t in setup.joints.values())
    assert any(t.sign == -1 for t in setup.joints.values())
    assert setup.limits["elbow_joint"].upper == pytest.approx(3.14159265359, abs=1e-12)
    assert all(a < float("inf") for a in setup.limits.acceleration)


def test_example_config_uses_every_driver_type() -> None:
    setup = load_config(CONFIG / "armd.example.yaml")
    assert sorted(d.type_name for d in setup.drivers.values()) == ["dynamixel", "odrive", "sim"]


def _options(model: type[BaseModel]) -> set[str]:
    """The option names of `model` and of the models nested in it (directly, in a dict, or
    optional)."""
    names = set(model.model_fields)
    for field in model.model_fields.values():
        pending: list[object] = [field.annotation]
        while pending:
            tp = pending.pop()
            if isinstance(tp, type) and issubclass(tp, BaseModel):
                names |= _options(tp)
            else:
                pending.extend(get_args(tp))
    return names


def test_example_config_documents_every_option() -> None:
    text = (CONFIG / "armd.example.yaml").read_text(encoding="utf-8")
    options = _options(ArmConfig)
    for driver in DRIVERS:
        options |= _options(load_driver_class(driver).Params)
    missing = sorted(name for name in options if not re.search(rf"\b{name}:", text))
    assert missing == []
