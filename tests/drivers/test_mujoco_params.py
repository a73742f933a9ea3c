"""The mujoco driver's params: a bad value, a joint or link the URDF lacks, an element of the URDF
that MuJoCo cannot build, each named in the error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from drivers.errors import DriverConfigError
from drivers.sim.driver import SimDriver

pytest.importorskip("mujoco", reason="the mujoco driver needs MuJoCo: pip install -e '.[physics]'")

from drivers.mujoco.driver import MujocoDriver, MujocoDriverParams
from drivers.mujoco.params import MujocoParams
from tests.drivers.mujoco_scenes import ROOT, params

SO101 = "so101_physics.yaml"


def _error(raw: dict[str, Any]) -> str:
    """The error of `raw` as the config loader reports it: the driver's `Params`, which build
    the model."""
    with pytest.raises(ValidationError) as raised:
        MujocoDriver.Params.model_validate(raw)
    return str(raised.value)


def _with_device(**changes: Any) -> dict[str, Any]:
    raw = params(SO101)
    raw["devices"] = dict(raw["devices"], elbow_flex=dict(raw["devices"]["elbow_flex"], **changes))
    return raw


def test_the_shipped_configs_params_are_valid() -> None:
    assert MujocoDriver.Params is MujocoDriverParams
    for name in (SO101, "ur5_physics.yaml"):
        assert MujocoDriver.Params.model_validate(params(name)).devices


def test_the_params_alone_check_their_shape_and_the_driver_builds_the_model() -> None:
    raw = params(SO101, links={"hand": [{"type": "sphere", "center": [0, 0, 0], "radius": 0.01}]})
    shaped = MujocoParams.model_validate(raw)  # no link named: not the params' own concern
    with pytest.raises(DriverConfigError, match="has no link 'hand'"):
        MujocoDriver(shaped)


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"kp": 0.0}, "kp\n  Input should be greater than 0"),
        ({"torque_limit": -1.0}, "torque_limit\n  Input should be greater than 0"),
        ({"actuator": "stepper"}, "actuator\n  Input should be 'servo' or 'mit'"),
        ({"torque_feedforward": "gravity"}, "a servo takes no torque feed-forward"),
        ({"joint": "knee"}, "has no joint 'knee'; its movable joints: shoulder_pan, "),
        ({"joint": "shoulder_pan"}, "devices 'shoulder_pan' and 'elbow_flex' both drive joint"),
    ],
)
def test_a_bad_device_is_named(changes: dict[str, Any], expected: str) -> None:
    message = _error(_with_device(**changes))
    assert expected in message
    assert "elbow_flex" in message


def test_a_timestep_longer_than_a_millisecond_is_refused() -> None:
    assert "timestep_s\n  Input should be less than or equal to 0.001" in _error(
        params(SO101, timestep_s=0.002)
    )


def test_a_missing_urdf_is_named_with_the_folder_it_was_looked_for_in() -> None:
    message = _error(params(SO101, urdf="robots/nowhere.urdf"))
    assert "no such file 'robots/nowhere.urdf' (relative to " in message


def test_a_primitive_on_a_link_the_urdf_lacks_names_the_links() -> None:
    raw = params(SO101, links={"hand": [{"type": "sphere", "center": [0, 0, 0], "radius": 0.01}]})
    assert "has no link 'hand'; links: base_link, shoulder_link" in _error(raw)


@pytest.mark.parametrize(
    ("shape", "expected"),
    [
        ({"type": "capsule", "start": [0, 0, 0], "end": [0, 0, 0], "radius": 0.01}, "same point"),
        ({"type": "box", "center": [0, 0, 0], "size": [0.1, 0.0, 0.1]}, "every edge must be > 0"),
        ({"type": "cone", "center": [0, 0, 0], "radius": 0.1}, "'capsule', 'sphere', 'box'"),
        ({"type": "sphere", "center": [0, 0, "nan"], "radius": 0.1}, "finite number"),
    ],
)
def test_a_bad_primitive_is_named(shape: dict[str, Any], expected: str) -> None:
    assert expected in _error(params(SO101, links={"wrist_link": [shape]}))


def test_objects_need_distinct_names_and_a_positive_mass() -> None:
    cube = {"name": "cube", "size": [0.03, 0.03, 0.03], "mass": 0.05, "position": [0.2, 0, 0.1]}
    assert "objects named more than once: ['cube']" in _error(params(SO101, objects=[cube, cube]))
    assert "mass\n  Input should be greater than 0" in _error(
        params(SO101, objects=[cube | {"mass": 0}])
    )


def test_a_urdf_element_mujoco_cannot_build_is_named_with_its_line(tmp_path: Path) -> None:
    urdf = (ROOT / "config/robots/so101.urdf").read_text(encoding="utf-8")
    broken = urdf.replace('<child link="moving_jaw_so101_v1_link"/>', "", 1)
    path = tmp_path / "broken.urdf"
    path.write_text(broken, encoding="utf-8")
    message = _error(params(SO101, urdf=str(path)))
    assert "the model does not build: XML Error: missing element: 'child'" in message
    assert "Element 'joint', line 95" in message
    assert '(line 95: <joint name="gripper" type="revolute">)' in message


def test_a_urdf_with_meshes_builds_without_them(tmp_path: Path) -> None:
    urdf = (ROOT / "config/robots/so101.urdf").read_text(encoding="utf-8")
    mesh = (
        '<visual><geometry><mesh filename="package://so101/base.stl"/></geometry></visual>'
        '<collision><geometry><mesh filename="meshes/base.stl"/></geometry></collision>'
    )
    path = tmp_path / "meshes.urdf"
    path.write_text(urdf.replace('<link name="base_link">', f'<link name="base_link">{mesh}'))
    driver = MujocoDriver(MujocoDriver.Params.model_validate(params(SO101, urdf=str(path))))
    assert driver.scene.model.nmesh == 0
    assert driver.device_names[0] == "shoulder_pan"


def test_the_driver_refuses_another_drivers_params() -> None:
    other = SimDriver.Params.model_validate({"devices": {"a": {}}})
    with pytest.raises(DriverConfigError, match=r"needs MujocoDriver\.Params, got SimDriverParams"):
        MujocoDriver(other)
