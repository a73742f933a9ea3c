"""The mujoco driver's arm: at rest its efforts balance gravity, it reaches commanded poses, a
joint driven into a block it cannot see stalls at its torque limit, the gripper holds the cube
it closes on, and the two actuator families behave as their laws say. The tests step the physics
themselves (`advance`): nothing depends on timing.

Bounds used below, from the actuator laws (docs/drivers/mujoco.md): at rest a joint's actuator
torque τ balances gravity g(q) and the joint's Coulomb friction f, |τ - g(q)| ≤ f; a servo rests
at p* - q = (g(q) + friction) / kp; following a ramp at ω, a servo lags
((kd + damping)·ω ± f) / kp and an MIT actuator, fed v* = ω, (damping·ω ± f) / kp.
"""

from __future__ import annotations

import numpy as np
import pytest

from drivers.base import DeviceCommand
from drivers.errors import DriverStateError

pytest.importorskip("mujoco", reason="the mujoco driver needs MuJoCo: pip install -e '.[physics]'")

from drivers.mujoco.driver import MujocoDriver
from tests.drivers.mujoco_scenes import config, driver, move, params, pose, positions

SO101 = "so101_physics.yaml"
UR5 = "ur5_physics.yaml"
# Residual motion of an arm called at rest after 2 s of settling: 1e-3 rad/s through kd ≤ 40
# N·m·s/rad is 0.04 N·m on the UR5, 6e-4 N·m on the SO-101.
AT_REST_RAD_S = 1e-3


async def test_efforts_at_rest_balance_the_gravity_torques() -> None:
    for name in (SO101, UR5):
        d = driver(params(name))
        async with d:
            await d.enable()
            d.advance(2.0)
            states = await d.read()
            gravity = d.gravity_torques()
            for device, state in states.items():
                spec = d.params.devices[device]
                assert abs(state.velocity) < AT_REST_RAD_S, (name, device)
                bound = spec.friction + (spec.kd + spec.damping) * AT_REST_RAD_S + 1e-9
                assert state.effort == pytest.approx(gravity[device], abs=bound), (name, device)


async def test_a_servo_sags_by_its_gravity_torque_over_kp_and_an_mit_actuator_fed_gravity_not() -> (
    None
):
    """The servo (SO-101) holds where kp·error meets gravity; the MIT actuators (UR5), sent g at
    the commanded position as their torque feed-forward (the daemon's gravity compensation), hold
    within friction / kp."""
    servo = driver(params(SO101))
    async with servo:
        await servo.enable()
        held = await positions(servo)
        await servo.write({n: DeviceCommand(q) for n, q in held.items()})
        servo.advance(2.0)
        now, gravity = await positions(servo), servo.gravity_torques()
        for device, spec in servo.params.devices.items():
            sag = held[device] - now[device]
            expected = gravity[device] / spec.kp
            assert sag == pytest.approx(expected, abs=(spec.friction + 1e-6) / spec.kp), device
        spec = servo.params.devices["elbow_flex"]
        assert abs(held["elbow_flex"] - now["elbow_flex"]) > 10 * spec.friction / spec.kp
    mit = driver(params(UR5))
    async with mit:
        await mit.enable()
        held = await positions(mit)
        gravity = mit.gravity_torques()  # what the daemon's gravity compensation sends
        await mit.write({n: DeviceCommand(q, torque=gravity[n]) for n, q in held.items()})
        mit.advance(2.0)
        now = await positions(mit)
        for device, spec in mit.params.devices.items():
            assert now[device] == pytest.approx(held[device], abs=spec.friction / spec.kp)


async def test_the_arm_reaches_a_commanded_pose() -> None:
    for name, target in ((SO101, "over_cube"), (UR5, "ready")):
        d = driver(params(name))
        goal = pose(target, name)
        async with d:
            await d.enable()
            await move(d, goal, duration_s=2.0)
            d.advance(1.0)
            now, gravity = await positions(d), d.gravity_torques()
            for device, position in goal.items():
                spec = d.params.devices[device]
                compensated = spec.torque_feedforward.value == "gravity"
                offset = 0.0 if compensated else gravity[device] / spec.kp
                bound = spec.friction / spec.kp + 1e-4
                assert now[device] == pytest.approx(position - offset, abs=bound), (name, device)


async def test_a_joint_driven_into_the_fixed_block_stops_at_its_torque_limit() -> None:
    """before_block -> past_block sweeps the shoulder pan through the block the collision check
    does not know; the pan stops against it and pushes with all its torque."""
    d = driver(params(SO101))
    async with d:
        await d.enable()
        await move(d, pose("before_block", SO101), duration_s=2.0)
        d.advance(0.5)
        past = pose("past_block", SO101)
        await move(d, past, duration_s=1.0)  # 1.5 rad/s: velocity limit 3 rad/s at speed 0.5
        d.advance(0.5)
        first = (await d.read())["shoulder_pan"]
        d.advance(0.5)
        pan = (await d.read())["shoulder_pan"]
    limit = d.params.devices["shoulder_pan"].torque_limit
    assert pan.position < past["shoulder_pan"] - 0.5  # stopped well short of its target
    assert pan.position == pytest.approx(first.position, abs=1e-3)  # and stays there
    assert abs(pan.velocity) < AT_REST_RAD_S
    assert pan.effort == pytest.approx(limit, abs=1e-9)  # clamped at the limit, along the axis


async def test_the_gripper_closing_on_the_cube_holds_it_with_its_effort() -> None:
    d = driver(params(SO101))
    closed = config(SO101)["gripper"]["closed"]
    async with d:
        await d.enable()
        await move(d, pose("over_cube", SO101), duration_s=2.0)
        await move(d, pose("grasp_cube", SO101), duration_s=1.0)
        d.advance(0.5)
        cube_before = d.object_position("cube")
        await move(d, {"gripper": closed}, duration_s=0.5)
        d.advance(0.5)
        gripper = (await d.read())["gripper"]
        await move(d, pose("over_cube", SO101) | {"gripper": closed}, duration_s=1.0)
        d.advance(1.0)
        lifted = d.object_position("cube")
        held = (await d.read())["gripper"]
    limit = d.params.devices["gripper"].torque_limit
    assert gripper.position > closed + 0.2  # the jaws stopped on the cube
    assert gripper.effort == pytest.approx(-limit, abs=1e-9)  # closing: against the axis
    assert held.effort == pytest.approx(-limit, abs=1e-9)
    assert lifted[2] > cube_before[2] + 0.05  # the cube came up with the gripper (8 cm)


async def test_a_servo_lags_a_ramp_by_kd_omega_over_kp_more_than_an_mit_actuator() -> None:
    """wrist_3 of the UR5 turns about the vertical at home (no gravity torque): ramp it at
    ω = 0.5 rad/s, once on its MIT actuator and once on a servo with the same gains. A setpoint
    holds for its tick (4 ms), so on average it lags the ramp by a further ω·4 ms / 2."""
    omega, duration_s = 0.5, 2.0
    lags: dict[str, float] = {}
    for kind in ("mit", "servo"):
        raw = params(UR5)
        wrist = dict(raw["devices"]["wrist3"], actuator=kind, torque_feedforward="command")
        raw["devices"] = dict(raw["devices"], wrist3=wrist)
        d = driver(raw)
        async with d:
            await d.enable()
            start = (await d.read())["wrist3"].position
            ticks = round(duration_s / 0.004)
            for k in range(1, ticks + 1):
                target = start + omega * 0.004 * k
                await d.write({"wrist3": DeviceCommand(target, omega)})
                d.advance(0.004)
            state = (await d.read())["wrist3"]
        assert state.velocity == pytest.approx(omega, abs=1e-3)  # in steady state
        lags[kind] = target - state.position
    spec = d.params.devices["wrist3"]
    friction = spec.friction / spec.kp
    # Measured at the end of a tick, 4 ms after its command: the setpoint has stood still since.
    held = omega * 0.004 / 2
    expected = spec.damping * omega / spec.kp - held
    assert lags["mit"] == pytest.approx(expected, abs=friction + 1e-4)
    assert lags["servo"] - lags["mit"] == pytest.approx(spec.kd * omega / spec.kp, abs=1e-3)


async def test_torque_off_the_efforts_are_zero_and_only_a_brake_holds_the_arm() -> None:
    for brake, moves in ((0.6, False), (0.0, True)):
        raw = params(SO101)
        raw["devices"] = {n: dict(s, brake_torque=brake) for n, s in raw["devices"].items()}
        d = driver(raw)
        async with d:
            await d.enable()
            held = await positions(d)
            await d.disable()
            d.advance(1.0)
            states = await d.read()
        assert all(s.effort == 0.0 and not s.enabled for s in states.values())
        drop = abs(states["elbow_flex"].position - held["elbow_flex"])
        assert (drop > 0.1) is moves, (brake, drop)


async def test_a_free_cube_rests_on_the_table_and_reads_carry_the_simulated_time() -> None:
    d = driver(params(SO101))
    async with d:
        before = (await d.read())["gripper"].timestamp
        d.advance(0.25)
        after = (await d.read())["gripper"].timestamp
    assert after - before == pytest.approx(0.25, abs=1e-9)
    x, y, z = d.object_position("cube")
    assert (x, y) == pytest.approx((0.2, 0.05), abs=1e-4)
    assert z == pytest.approx(0.015, abs=1e-3)  # its half edge, within the contact's softness


async def test_advance_is_refused_while_a_thread_steps_the_physics() -> None:
    d = MujocoDriver(MujocoDriver.Params.model_validate(params(SO101)))
    with pytest.raises(DriverStateError, match="real-time thread"):
        d.advance(0.1)


async def test_an_mit_actuator_applies_the_torque_feed_forward_it_is_given() -> None:
    """The UR5's MIT actuators with `command` feed-forward: given τff = 0 they sag by g / kp;
    given τff = g(q*), as the daemon's gravity compensation would send, they hold q*."""
    raw = params(UR5)
    raw["devices"] = {n: dict(s, torque_feedforward="command") for n, s in raw["devices"].items()}
    d = driver(raw)
    async with d:
        await d.enable()
        physics = d.physics
        held = physics.snapshot.position.copy()
        zeros = np.zeros_like(held)
        physics.command(held, zeros, zeros, True)
        d.advance(2.0)
        sagged = physics.snapshot.position.copy()
        at_rest, gravity = physics.gravity_torques(sagged), physics.gravity_torques(held)
        physics.command(held, zeros, gravity, True)
        d.advance(2.0)
        compensated = physics.snapshot.position.copy()
    kp = np.array([d.params.devices[n].kp for n in d.device_names])
    friction = np.array([d.params.devices[n].friction for n in d.device_names])
    shoulder = d.device_names.index("shoulder")
    assert abs(gravity[shoulder]) > 10.0  # N·m: the shoulder holds the arm up at home
    assert np.allclose(held - sagged, at_rest / kp, atol=friction / kp + 1e-6)  # kp·error = g
    assert np.allclose(compensated, held, atol=friction / kp + 1e-6)
