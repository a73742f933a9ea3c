"""The mujoco driver's real-time thread, on an injected clock that moves only when the test moves
it: simulated time follows the clock, the state is stamped with the clock time it stands for, and
a stall longer than `max_lag_s` is skipped rather than caught up. The test waits for the thread
(polling, with a generous deadline) but asserts no duration."""

from __future__ import annotations

import asyncio

import pytest

from drivers.base import DeviceCommand
from drivers.errors import DriverIOError
from drivers.sim.driver import ManualClock

pytest.importorskip("mujoco", reason="the mujoco driver needs MuJoCo: pip install -e '.[physics]'")

from drivers.mujoco.driver import MujocoDriver
from tests.drivers.mujoco_scenes import params

DEADLINE_S = 30.0  # a thread that waits 1 ms between steps: far beyond any busy machine


async def _until_simulated(d: MujocoDriver, time_s: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE_S
    while d.physics.snapshot.time_s < time_s - 1e-9:
        assert loop.time() < deadline, f"the physics thread did not reach {time_s} s"
        await asyncio.sleep(0.001)


async def test_the_thread_follows_the_clock_and_skips_a_stall() -> None:
    clock = ManualClock(now=100.0)
    d = MujocoDriver(MujocoDriver.Params.model_validate(params("so101_physics.yaml")), clock=clock)
    assert not d.stepping
    async with d:
        assert d.stepping
        clock.advance(0.02)
        await _until_simulated(d, 0.02)
        state = (await d.read())["elbow_flex"]
        assert state.timestamp == pytest.approx(100.02, abs=1e-9)
        assert d.skipped_steps == 0
        clock.advance(1.0)  # the machine stalled the thread for 1 s: 0.05 s is caught up
        await _until_simulated(d, 0.07)
        state = (await d.read())["elbow_flex"]
        assert d.physics.snapshot.time_s == pytest.approx(0.07, abs=1e-9)
        assert state.timestamp == pytest.approx(101.02, abs=1e-9)
        assert d.skipped_steps == 950
    clock.advance(5.0)  # closed: simulated time pauses
    async with d:
        clock.advance(0.01)
        await _until_simulated(d, 0.08)
        assert (await d.read())["elbow_flex"].timestamp == pytest.approx(106.03, abs=1e-9)


class _BrokenClock(ManualClock):
    """A clock that raises once `broken` is set, as anything in the physics thread might."""

    broken: bool = False

    def __call__(self) -> float:
        if self.broken:
            raise RuntimeError("clock gone")
        return self.now


async def test_a_physics_thread_that_dies_fails_the_driver_like_a_lost_bus(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = _BrokenClock()
    d = MujocoDriver(MujocoDriver.Params.model_validate(params("so101_physics.yaml")), clock=clock)
    loop = asyncio.get_running_loop()
    async with d:
        await d.enable()
        clock.broken = True
        deadline = loop.time() + DEADLINE_S
        while d.stepping:
            assert loop.time() < deadline, "the physics thread did not stop"
            await asyncio.sleep(0.001)
        with pytest.raises(
            DriverIOError, match="cannot read: the physics thread stopped: clock gone"
        ):
            await d.read()
        with pytest.raises(DriverIOError, match="cannot write: the physics thread stopped"):
            await d.write({"elbow_flex": DeviceCommand(0.0)})
    assert "mujoco: the physics thread stopped" in caplog.text
