"""The mujoco driver's touches (`drivers.mujoco.touches`): the first physics step in which the arm
touches the block it sweeps into, stamped on the driver's clock and logged once; nothing while
the arm touches nothing. The tests step the physics themselves (`advance`)."""

from __future__ import annotations

import logging

import pytest

pytest.importorskip("mujoco", reason="the mujoco driver needs MuJoCo: pip install -e '.[physics]'")

from drivers.base import DeviceCommand
from drivers.mujoco.driver import MujocoDriver
from tests.drivers.mujoco_scenes import TICK_S, driver, move, params, pose

SO101 = "so101_physics.yaml"
RAMP_S = 1.0  # the pan's 1.5 rad in 1 s: 1.5 rad/s at its peak, as past_block at speed 0.5


async def sweep(d: MujocoDriver, steps: int | None = None) -> float:
    """To before_block, then the pan toward past_block at 1.5 rad/s, into the block: the
    physics steps into that ramp or `steps` of them; returns the simulated time it began."""
    await d.enable()
    await move(d, pose("before_block", SO101), duration_s=2.0)
    d.advance(0.5)
    began = d.physics.time_s
    start = {name: state.position for name, state in (await d.read()).items()}
    target = pose("past_block", SO101)
    per_tick = round(TICK_S / d.physics.timestep_s)
    ticks = round(RAMP_S / TICK_S)
    left = ticks * per_tick if steps is None else steps
    for k in range(1, ticks + 1):  # as `move`: a smooth ramp, one command per tick
        s = k / ticks
        blend, rate = 3 * s * s - 2 * s**3, (6 * s - 6 * s * s) / RAMP_S
        await d.write(
            {
                name: DeviceCommand(
                    start[name] + (goal - start[name]) * blend, (goal - start[name]) * rate
                )
                for name, goal in target.items()
            }
        )
        run = min(per_tick, left)
        d.advance(run * d.physics.timestep_s)
        left -= run
        if left == 0:
            break
    return began


def block_contacts(d: MujocoDriver) -> int:
    """How many contacts the physics has between the arm and the block now."""
    scene, data = d.scene, d.physics.data
    block = scene.geom_owners.index("block")
    pairs = data.contact.geom[: data.ncon].tolist()
    arm = scene.arm_geoms
    return sum(1 for a, b in pairs if block in (a, b) and (arm[a] or arm[b]))


async def test_the_strike_is_the_first_step_the_arm_touches_the_block(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="drivers.mujoco")
    d = driver(params(SO101))
    async with d:
        began = await sweep(d)
        d.advance(0.5)  # pressing against the block
    assert d.touches(), "no touch"
    strike = d.touches()[0]  # before it, the arm touched nothing (the table neither)
    assert (strike.link, strike.other) == ("gripper_link", "block")
    assert strike.stamp == pytest.approx(d.physics.origin + strike.time_s, abs=1e-9)
    lines = [r.getMessage() for r in caplog.records if "touches block" in r.getMessage()]
    assert len(lines) == 1, lines  # pressed against it since: one touch
    assert f"at {strike.stamp:.4f} s" in lines[0]

    # MuJoCo is deterministic: the same sweep again, stopped one step before the strike,
    # touches nothing yet; one step more, it touches the block.
    steps = round((strike.time_s - began) / d.physics.timestep_s)
    again = driver(params(SO101))
    async with again:
        await sweep(again, steps - 1)
        assert block_contacts(again) == 0
        again.advance(again.physics.timestep_s)
        assert block_contacts(again) > 0
        assert again.physics.time_s == pytest.approx(strike.time_s, abs=1e-9)
