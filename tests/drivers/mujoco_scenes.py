"""The mujoco driver's test scenes: the params of config/so101_physics.yaml and
config/ur5_physics.yaml (the URDF made absolute, so the tests run from any folder), and moves
stepped like the control loop (a command every 4 ms, the physics advanced in between)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from drivers.base import DeviceCommand
from drivers.mujoco.driver import MujocoDriver

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "config"
TICK_S = 0.004  # the control loop's period at loop_hz 250


def config(name: str) -> dict[str, Any]:
    """A config file of config/, parsed."""
    data: dict[str, Any] = yaml.safe_load((CONFIG / name).read_text(encoding="utf-8"))
    return data


def params(name: str, **overrides: Any) -> dict[str, Any]:
    """The `physics` driver's params of config file `name`, its URDF absolute; `overrides`
    replace top-level params."""
    raw = dict(config(name)["drivers"]["physics"]["params"])
    raw["urdf"] = str(ROOT / "config" / raw["urdf"])
    raw.update(overrides)
    return raw


def driver(raw: Mapping[str, Any]) -> MujocoDriver:
    """A driver on `raw` params, stepped by the test (`advance`), not by a thread."""
    return MujocoDriver(MujocoDriver.Params.model_validate(raw), realtime=False)


def pose(name: str, config_name: str) -> dict[str, float]:
    """Named pose `name` of a config, by device (the configs' devices drive joints 1:1)."""
    data = config(config_name)
    devices = {joint: j["device"] for joint, j in data["joints"].items()}
    return {devices[joint]: float(value) for joint, value in data["poses"][name].items()}


async def positions(d: MujocoDriver) -> dict[str, float]:
    return {name: state.position for name, state in (await d.read()).items()}


async def move(d: MujocoDriver, target: Mapping[str, float], duration_s: float) -> None:
    """Command a smooth move (a cubic in time, at rest at both ends, with its velocity
    feed-forward) from the measured positions to `target` over `duration_s`, one command per
    tick, as the control loop would."""
    start = await positions(d)
    ticks = max(1, round(duration_s / TICK_S))
    for k in range(1, ticks + 1):
        s = k / ticks
        blend, rate = 3 * s * s - 2 * s**3, (6 * s - 6 * s * s) / duration_s
        await d.write(
            {
                name: DeviceCommand(
                    start[name] + (goal - start[name]) * blend,
                    (goal - start[name]) * rate,
                )
                for name, goal in target.items()
            }
        )
        d.advance(TICK_S)
