"""The MIT driver's per-actuator bookkeeping: the torque limit law and the command it builds."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drivers.mit import protocol as proto
from drivers.mit.device import MotorRecord, limit_torque
from drivers.mit.params import MitDeviceParams

gains = st.floats(0.0, 500.0)
errors = st.floats(-30.0, 30.0)


@given(kp=gains, kd=st.floats(0.0, 5.0), e_p=errors, e_v=errors, limit=st.floats(0.01, 100.0))
def test_the_limited_torque_never_exceeds_the_limit(
    kp: float, kd: float, e_p: float, e_v: float, limit: float
) -> None:
    p, v = limit_torque(kp, kd, e_p, e_v, limit)
    assert abs(kp * p + kd * v) <= limit * (1 + 1e-9) + 1e-12
    if abs(kp * e_p + kd * e_v) <= limit:
        assert (p, v) == (e_p, e_v)  # untouched within the limit
    else:
        assert abs(p) <= abs(e_p) + 1e-12  # only ever shrunk
        assert abs(v) <= abs(e_v) + 1e-12


def record(**params: object) -> MotorRecord:
    device = MitDeviceParams.model_validate({"id": 1, "model": "DM4310", **params})
    return MotorRecord("j", device)


def test_a_command_carries_the_gains_and_no_torque_feed_forward_unless_given() -> None:
    motor = record(kp=30.0, kd=1.5, direction=-1)
    motor.reply = proto.MitReply(1, 0.2, 0.0, 0.0, 1, 30, 30)
    command = motor.command(-0.25, 1.0)  # armd's sign: the actuator's is flipped
    assert command == proto.MitCommand(0.25, -1.0, 30.0, 1.5, 0.0)


def test_the_spring_gives_way_first_under_the_torque_limit() -> None:
    motor = record(kp=20.0, kd=1.0, torque_limit=2.0)
    motor.reply = proto.MitReply(1, 0.0, 0.0, 0.0, 1, 30, 30)
    command = motor.command(1.0, 0.5)  # 20 + 0.5 N·m asked, 2 allowed: 1.5 N·m of spring
    assert command.position == pytest.approx(1.5 / 20.0, abs=1e-12)
    assert command.velocity == pytest.approx(0.5, abs=1e-12)


def test_velocity_is_clamped_and_position_beyond_p_max_refused() -> None:
    motor = record(kp=0.0, kd=0.0)
    assert motor.command(0.0, 100.0).velocity == 30.0  # DM4310: v_max 30 rad/s
    with pytest.raises(ValueError, match=r"outside ±12\.5 rad"):
        motor.command(12.6, 0.0)


def test_the_torque_feed_forward_goes_in_t_ff_with_the_devices_sign() -> None:
    motor = record(kp=30.0, kd=1.5, direction=-1)
    motor.reply = proto.MitReply(1, 0.2, 0.0, 0.0, 1, 30, 30)
    command = motor.command(-0.2, 0.0, 1.25)  # held where it is: only the feed-forward
    assert command == proto.MitCommand(0.2, 0.0, 30.0, 1.5, -1.25)


def test_the_feed_forward_and_the_spring_share_the_torque_limit() -> None:
    """t_ff within ±torque_limit; the spring and damping get what is left, so that the actuator's
    torque ``kp·e_p + kd·e_v + t_ff`` stays within the limit."""
    motor = record(kp=20.0, kd=1.0, torque_limit=2.0)
    motor.reply = proto.MitReply(1, 0.0, 0.0, 0.0, 1, 30, 30)
    command = motor.command(1.0, 0.0, 1.5)  # 20 N·m of spring asked, 0.5 left beside t_ff
    assert command.torque == pytest.approx(1.5, abs=1e-12)
    assert command.position == pytest.approx(0.5 / 20.0, abs=1e-12)
    clamped = motor.command(0.0, 0.0, -5.0)
    assert clamped.torque == pytest.approx(-2.0, abs=1e-12)
    assert clamped.position == pytest.approx(0.0, abs=1e-12)  # nothing left for the spring


def test_a_torque_feed_forward_that_is_not_finite_is_refused() -> None:
    motor = record()
    with pytest.raises(ValueError, match="torque feed-forward nan N·m must be finite"):
        motor.command(0.0, 0.0, float("nan"))
