"""The daemon started on a config that names a calibration file (a real ``armd run`` on a real
Mosquitto, the simulated UR5): the calibrated offset is in its telemetry, a goal beyond the
calibrated range is rejected although the model would allow it, one inside it succeeds."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.armd.config.test_calibration import calibration_doc
from tests.system.helpers import Rig
from tests.system.probe import joint_positions


def test_the_daemon_applies_the_calibration(start_arm: Callable[..., Rig], tmp_path: Path) -> None:
    directory = tmp_path / "arm-0"  # where start_arm writes the first arm's config
    directory.mkdir()
    (directory / "arm.calibration.yaml").write_text(yaml.safe_dump(calibration_doc()))
    arm = start_arm(overrides={"calibration": "arm.calibration.yaml"})
    state = arm.probe.latest_state()
    # the pan motor starts at 0, which the calibrated offset of 0.1 rad reads as 0.1
    assert joint_positions(state)["shoulder_pan_joint"] == pytest.approx(0.1, abs=1e-3)

    since = arm.probe.publish_goal(
        {"id": "beyond", "type": "joints", "positions": {"elbow_joint": 2.5}}
    )
    status: dict[str, Any] = arm.probe.wait_status("beyond", since=since)
    assert status["status"] == "rejected", status
    assert status["reason"] == "joint 'elbow_joint': 2.5 outside [1, 2]"

    since = arm.probe.publish_goal(
        {"id": "inside", "type": "joints", "positions": {"elbow_joint": 1.9}}
    )
    assert arm.probe.wait_status("inside", since=since, final=False)["status"] == "accepted"
    final = arm.probe.wait_status("inside", since=since)
    assert final["status"] == "succeeded", final
