"""The dynamics options of the config file: `gravity`, `payload`, a driver's
`gravity_compensation` and a joint's `contact`; every problem names its path and value."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from armd.config.control_setup import control_setup
from armd.config.load import load_config
from tests.armd.config.test_config import Doc, _set, problems_of, ur5_config, write

CONFIG = Path(__file__).resolve().parents[3] / "config"

CASES = [
    pytest.param(
        _set("joints", "elbow_joint", "contact", value={"threshold": 4.0}),
        "joints.elbow_joint.contact: driver 'sim' (type sim) reports no torque",
        id="contact-without-torque",
    ),
    pytest.param(
        _set("gravity", value=[0.0, -9.81]), "gravity: must have at least 3 entries", id="gravity-2"
    ),
    pytest.param(_set("gravity", value=[0, 0, "down"]), "gravity.2: 'down'", id="gravity-text"),
    pytest.param(_set("payload", value={"mass": -1.0}), "payload.mass: -1 must be >= 0", id="mass"),
    pytest.param(_set("payload", value={"com": [0, 0, 0]}), "payload.mass", id="no-mass"),
    pytest.param(
        _set("payload", value={"mass": 1.0, "inertia": [1.0, 0, 0, 0.1, 0, 0.1]}),
        "break the triangle inequality",
        id="inertia",
    ),
    pytest.param(
        _set("payload", value={"mass": 1.0, "com": [0, 0, 50.0]}),
        "must be within ±10 m",
        id="com-far",
    ),
    pytest.param(
        _set("drivers", "sim", "gravity_compensation", value=True),
        "drivers.sim.gravity_compensation: driver type 'sim' takes no torque feed-forward",
        id="no-torque-input",
    ),
    pytest.param(
        _set("joints", "elbow_joint", "contact", value={"threshold": -2.0}),
        "joints.elbow_joint.contact.threshold: -2 must be > 0",
        id="contact-threshold",
    ),
]


@pytest.mark.parametrize(("mutate", "expected"), CASES)
def test_each_problem_is_reported_with_its_path(
    tmp_path: Path, mutate: Callable[[Doc], None], expected: str
) -> None:
    doc = ur5_config()
    mutate(doc)
    lines = problems_of(tmp_path, doc)
    assert any(expected in line for line in lines), "\n".join(lines)


def test_defaults_gravity_down_and_no_payload(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, ur5_config())).config
    assert config.gravity == [0.0, 0.0, -9.81]
    assert config.payload is None
    assert not any(d.gravity_compensation for d in config.drivers.values())


def test_a_wall_mount_and_a_payload_load(tmp_path: Path) -> None:
    doc = ur5_config()
    doc["gravity"] = [9.81, 0, 0]
    doc["payload"] = {"mass": 1.5, "com": [0, 0, 0.05], "inertia": [0.01, 0, 0, 0.01, 0, 0.005]}
    config = load_config(write(tmp_path, doc)).config
    assert config.gravity == [9.81, 0.0, 0.0]
    assert config.payload is not None
    inertial = config.payload.inertial()
    assert (inertial.mass, inertial.com) == (1.5, (0.0, 0.0, 0.05))


def test_the_mit_arm_takes_gravity_compensation_and_contact_detection(tmp_path: Path) -> None:
    """config/mit_arm.yaml (a UR5 on Damiao actuators) with both: its control setup samples
    every tick for the daemon's observer."""
    doc = yaml.safe_load((CONFIG / "mit_arm.yaml").read_text(encoding="utf-8"))
    doc["model"] = str(CONFIG / doc["model"])
    if doc.get("collision"):  # its geometry file, relative to the config like the model
        doc["collision"]["geometry"] = str(CONFIG / doc["collision"]["geometry"])
    doc["drivers"]["can"]["gravity_compensation"] = True
    doc["joints"]["elbow_joint"]["contact"] = {"threshold": 4.0}
    setup = load_config(write(tmp_path, doc))
    contact = setup.config.joints["elbow_joint"].contact
    assert contact is not None
    assert (contact.threshold, contact.time_s) == (4.0, pytest.approx(0.02, abs=1e-12))
    assert setup.config.drivers["can"].gravity_compensation
    assert control_setup(setup).loop.sample_every == 1
