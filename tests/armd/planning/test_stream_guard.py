"""Stream targets through the collision checks (`armd.planning.stream_guard`) on the UR5 of
config/sim.yaml standing on its table: slowing down near a contact, holding at the last clear
target, moving on when targets leave the collision, a start in contact."""

from __future__ import annotations

from functools import cache

import numpy as np
from numpy.typing import NDArray

from armd.daemon.process import stream_guard
from armd.planning.stream_guard import StreamGuard
from kinematics.collision import CollisionModel
from tests.armd.planning.test_collision_guard import ready, setup

Array = NDArray[np.float64]
NONE = np.full(6, np.nan)


@cache
def model() -> CollisionModel:
    found = setup().collision
    assert found is not None
    return found


def guard() -> StreamGuard:
    found = stream_guard(setup())
    assert found is not None
    return found


def lowering(start: Array, steps: int, to: float) -> list[Array]:
    """Targets that swing the shoulder down from `start` to `to` (rad): through the table."""
    targets = []
    for k in range(1, steps + 1):
        q = start.copy()
        q[1] = start[1] + (to - start[1]) * k / steps
        targets.append(q)
    return targets


def test_a_stream_into_the_table_slows_down_and_holds_above_it() -> None:
    g = guard()
    start = ready()
    g.start(start)
    sent = []
    for target in lowering(start, 300, 0.6):
        position, _ = g.filter(target, NONE)
        assert np.all(np.isfinite(position))  # these targets name every joint
        sent.append(position)
    table = model().pair_names.index(("upper_arm_link", "table"))
    distances = [model().distances_batch(q[None, :])[0] for q in sent]
    assert min(d[table] for d in distances) >= g.stop - 1e-9
    assert all(model().first_contact(q) is None for q in sent)
    assert g.hold is not None
    assert "table" in g.hold.pair
    assert g.hold.distance < model().margin
    steps = np.abs(np.diff([q[1] for q in sent]))
    assert steps[-20:].max() < steps[:20].max()  # it slowed down
    # held: the same target again, whatever comes
    position, _ = g.filter(lowering(start, 1, 1.0)[0], NONE)
    np.testing.assert_allclose(position, sent[-1], atol=1e-12)
    # targets that leave the collision are followed again
    away = start.copy()
    position, _ = g.filter(away, NONE)
    assert g.hold is None
    np.testing.assert_allclose(position, away, atol=1e-12)


def test_unnamed_joints_are_checked_at_the_last_followed_target() -> None:
    g = guard()
    g.start(ready())
    partial = NONE.copy()
    partial[1] = 0.6  # only the shoulder: the upper arm through the table
    position, velocity = g.filter(partial, NONE)
    assert g.hold is not None
    np.testing.assert_allclose(position, ready(), atol=1e-12)
    assert np.all(np.isnan(velocity))


def test_a_velocity_gliding_into_a_contact_is_dropped() -> None:
    """The loop moves a target on at its velocity for up to the stream timeout: a glide that
    would reach the table is not sent (the target is, at rest)."""
    g = guard()
    start = ready()
    start[1], start[2], start[3] = -0.25, 0.3, -2.2  # the arm low, reaching forward
    g.start(start)
    velocity = np.zeros(6)
    velocity[1] = 6.0  # rad/s down: 0.6 rad within the 0.1 s timeout
    target = start.copy()
    target[1] += 0.002
    end = target + velocity * g.timeout_s
    assert not model().check_path(np.vstack([target, end])).clear
    _, sent = g.filter(target, velocity)
    assert g.hold is None
    assert np.all(np.isnan(sent))
    _, sent = g.filter(target - 0.01 * velocity / 6.0, -velocity)  # gliding up: kept
    np.testing.assert_allclose(sent, -velocity, atol=1e-12)


def test_a_stream_started_in_contact_only_moves_out() -> None:
    g = guard()
    start = ready()
    start[1] = 0.05
    assert model().first_contact(start) is not None
    g.start(start)
    deeper = start.copy()
    deeper[1] = 0.1
    position, _ = g.filter(deeper, NONE)
    np.testing.assert_allclose(position, start, atol=1e-12)
    assert g.hold is not None
    out = start.copy()
    out[1] = 0.0
    position, _ = g.filter(out, NONE)
    np.testing.assert_allclose(position, out, atol=1e-12)
    assert g.hold is None
