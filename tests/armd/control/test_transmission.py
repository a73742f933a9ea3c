"""Joint ↔ motor transmissions: the convention, its round trip, and the whole-arm helpers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from armd.control.transmission import ArmTransmission, Transmission
from armd.errors import ArmdError
from drivers import DeviceCommand

finite = st.floats(min_value=-1e3, max_value=1e3, allow_nan=False, allow_infinity=False)
ratios = st.floats(min_value=1e-3, max_value=1e3, allow_nan=False, allow_infinity=False)
signs = st.sampled_from([1, -1])


def _close(a: float, b: float, *, scale: float) -> bool:
    """Equal within 1e-12 relative to the magnitudes involved."""
    return abs(a - b) <= 1e-12 * max(1.0, abs(a), abs(b), scale)


@given(joint=finite, gear=ratios, sign=signs, offset=finite)
def test_joint_motor_joint_round_trip_is_identity(
    joint: float, gear: float, sign: int, offset: float
) -> None:
    t = Transmission("j", "bus", "dev", gear, sign, offset)  # type: ignore[arg-type]
    assert _close(t.joint_position(t.motor_position(joint)), joint, scale=abs(offset))
    assert _close(t.joint_velocity(t.motor_velocity(joint)), joint, scale=0.0)


@given(motor=finite, gear=ratios, sign=signs, offset=finite)
def test_motor_joint_motor_round_trip_is_identity(
    motor: float, gear: float, sign: int, offset: float
) -> None:
    t = Transmission("j", "bus", "dev", gear, sign, offset)  # type: ignore[arg-type]
    # The joint value carries the offset; its rounding is amplified by the gear ratio.
    assert _close(t.motor_position(t.joint_position(motor)), motor, scale=gear * abs(offset))


def test_the_convention() -> None:
    t = Transmission("elbow", "bus", "m1", gear_ratio=50.0, sign=-1, offset=0.1)
    assert t.motor_position(0.1) == 0.0
    assert t.motor_position(0.3) == pytest.approx(-10.0, abs=1e-12)
    assert t.motor_velocity(0.2) == pytest.approx(-10.0, abs=1e-12)  # no offset on velocities
    assert t.joint_velocity(-10.0) == pytest.approx(0.2, abs=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"gear_ratio": 0.0}, "gear_ratio 0.0 must be > 0"),
        ({"gear_ratio": math.inf}, "gear_ratio inf must be > 0"),
        ({"sign": 2}, "sign 2 must be 1 or -1"),
        ({"offset": math.nan}, "offset nan must be finite"),
    ],
)
def test_invalid_transmission_is_refused(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ArmdError, match=message):
        Transmission("j", "bus", "dev", **kwargs)  # type: ignore[arg-type]


def _arm() -> ArmTransmission:
    return ArmTransmission(
        ["a", "b", "finger", "c"],
        [
            Transmission("c", "can", "n2", 2.0, 1, 0.5),
            Transmission("a", "can", "n0", 10.0, -1, 0.0),
            Transmission("b", "serial", "s1", 1.0, 1, -1.0),
        ],
        {"finger": 0.02},
    )


def test_arm_orders_joints_as_q_and_holds_fixed_joints() -> None:
    arm = _arm()
    assert [t.joint for t in arm.joints] == ["a", "b", "c"]
    assert arm.driven.tolist() == [0, 1, 3]
    assert arm.fixed.tolist() == [2]
    assert arm.devices == (("can", "n0"), ("serial", "s1"), ("can", "n2"))
    assert len(arm) == 3
    q = np.array([0.1, 0.2, 0.02, 0.3])
    motor = arm.motor_positions(q)
    np.testing.assert_allclose(motor, [-1.0, 1.2, -0.4], atol=1e-12)
    back = arm.joint_positions(motor)
    np.testing.assert_allclose(back, q, atol=1e-12)
    np.testing.assert_allclose(arm.joint_velocities(arm.motor_velocities(q)), [0.1, 0.2, 0, 0.3])


@given(st.lists(finite, min_size=4, max_size=4))
def test_arm_round_trip_is_identity(values: list[float]) -> None:
    arm = _arm()
    q = np.array(values)
    q[2] = 0.02  # the fixed joint reads its fixed position
    back = arm.joint_positions(arm.motor_positions(q))
    assert np.all(np.abs(back - q) <= 1e-12 * np.maximum(1.0, np.abs(q)))


def test_per_device_mappings() -> None:
    arm = _arm()
    by_device = arm.by_device([1.0, 2.0, 3.0])
    assert by_device == {"can": {"n0": 1.0, "n2": 3.0}, "serial": {"s1": 2.0}}
    np.testing.assert_array_equal(arm.from_devices(by_device), [1.0, 2.0, 3.0])
    with pytest.raises(ArmdError, match=r"joints \['b'\]"):
        arm.from_devices({"can": {"n0": 1.0, "n2": 3.0}})


def test_commands_are_grouped_by_driver() -> None:
    commands = _arm().commands([0.1, 0.0, 0.02, 0.5], [1.0, 0.0, 0.0, 2.0])
    assert set(commands) == {"can", "serial"}
    assert commands["can"]["n0"] == DeviceCommand(pytest.approx(-1.0), pytest.approx(-10.0))
    assert commands["can"]["n2"] == DeviceCommand(pytest.approx(0.0), pytest.approx(4.0))
    assert commands["serial"]["s1"] == DeviceCommand(pytest.approx(1.0), 0.0)


def test_a_joint_torque_reaches_its_motor_through_the_gear_and_the_sign() -> None:
    """motor_torque = sign × joint_torque / gear_ratio: the same power as the joint's; the fixed
    joint's torque goes nowhere."""
    commands = _arm().commands([0.1, 0.0, 0.02, 0.5], [0.0] * 4, torque=[5.0, -2.0, 9.0, 3.0])
    assert commands["can"]["n0"].torque == pytest.approx(-0.5, abs=1e-12)  # 10:1, reversed
    assert commands["serial"]["s1"].torque == pytest.approx(-2.0, abs=1e-12)
    assert commands["can"]["n2"].torque == pytest.approx(1.5, abs=1e-12)  # 2:1
    plain = _arm().commands([0.1, 0.0, 0.02, 0.5], [0.0] * 4)
    assert all(c.torque == 0.0 for d in plain.values() for c in d.values())


def test_an_unchanged_command_is_the_previous_object() -> None:
    arm = _arm()
    first = arm.commands([0.1, 0.0, 0.02, 0.5], [1.0, 0.0, 0.0, 2.0])
    again = arm.commands([0.1, 0.0, 0.02, 0.5], [1.0, 0.0, 0.0, 2.0], first)
    moved = arm.commands([0.1, 0.0, 0.02, 0.6], [1.0, 0.0, 0.0, 2.0], again)
    assert again == first
    assert all(again[d][n] is first[d][n] for d in first for n in first[d])
    assert moved["can"]["n0"] is first["can"]["n0"]
    assert moved["can"]["n2"] == DeviceCommand(pytest.approx(0.2), pytest.approx(4.0))
    nan = arm.commands([np.nan, 0.0, 0.02, 0.5], [1.0, 0.0, 0.0, 2.0], moved)
    assert math.isnan(nan["can"]["n0"].position)  # never equal to the previous: a new command


@pytest.mark.parametrize(
    ("transmissions", "fixed", "message"),
    [
        ([("a", "d0"), ("b", "d1")], {"x": 0.0}, r"unknown joints \['x'\]"),
        ([("a", "d0"), ("b", "d1")], {"b": 0.0}, r"joints \['b'\] are both driven and fixed"),
        ([("a", "d0")], {}, r"joints \['b'\] are neither driven nor fixed"),
        ([("a", "d0"), ("b", "d0")], {}, "share a"),
    ],
)
def test_arm_refuses_inconsistent_mappings(
    transmissions: list[tuple[str, str]], fixed: dict[str, float], message: str
) -> None:
    with pytest.raises(ArmdError, match=message):
        ArmTransmission(["a", "b"], [Transmission(j, "bus", d) for j, d in transmissions], fixed)
