"""The mujoco driver's `urdf:`: a relative path starts at the config file's folder (the validation
context's `CONFIG_DIR`, as every other path of a config), wherever the process runs; an absolute
one is kept; without a folder (params validated on their own), the working directory."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError

pytest.importorskip("mujoco", reason="the mujoco driver needs MuJoCo: pip install -e '.[physics]'")

from drivers.mujoco.driver import MujocoDriver
from drivers.mujoco.params import CONFIG_DIR
from tests.drivers.mujoco_scenes import ROOT, params

SO101 = "so101_physics.yaml"


@pytest.fixture
def config_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A config folder holding robots/so101.urdf; the working directory elsewhere (empty)."""
    folder = tmp_path / "etc"
    (folder / "robots").mkdir(parents=True)
    shutil.copy(ROOT / "config" / "robots" / "so101.urdf", folder / "robots" / "so101.urdf")
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    return folder


def test_a_relative_urdf_starts_at_the_config_files_folder(config_folder: Path) -> None:
    raw = params(SO101, urdf="robots/so101.urdf")
    validated = MujocoDriver.Params.model_validate(raw, context={CONFIG_DIR: config_folder})
    assert validated.urdf == str(config_folder / "robots" / "so101.urdf")  # absolute now
    driver = MujocoDriver(validated, realtime=False)  # builds from it, whatever the cwd
    assert "shoulder_pan" in driver.device_names


def test_an_absolute_urdf_is_kept(config_folder: Path, tmp_path: Path) -> None:
    absolute = str(ROOT / "config" / "robots" / "so101.urdf")
    raw = params(SO101, urdf=absolute)
    validated = MujocoDriver.Params.model_validate(raw, context={CONFIG_DIR: tmp_path / "other"})
    assert validated.urdf == absolute


def test_a_relative_urdf_missing_from_the_config_folder_names_it(config_folder: Path) -> None:
    raw = params(SO101, urdf="robots/nowhere.urdf")
    with pytest.raises(ValidationError) as raised:
        MujocoDriver.Params.model_validate(raw, context={CONFIG_DIR: config_folder})
    assert f"no such file 'robots/nowhere.urdf' (relative to {config_folder})" in str(raised.value)


def test_without_a_config_folder_a_relative_urdf_starts_at_the_working_directory(
    config_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(config_folder)
    validated = MujocoDriver.Params.model_validate(params(SO101, urdf="robots/so101.urdf"))
    assert validated.urdf == "robots/so101.urdf"
