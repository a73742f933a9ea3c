"""A bounded collision fuzz through MQTT, first half: 150 of its 300 random goals (joints, pose,
linear pose, trajectory) and two of its four random streams against the real daemon on the
simulated UR5 standing on its table, sent faster than they finish so that most pre-empt a moving
arm; no measured state may be in collision, checked with coal (tests/system/collision_fuzzing.py).
The other half, on a daemon of its own, is test_collision_fuzz_reseeded.py: a worker each."""

from __future__ import annotations

from armd.config.load import ArmSetup
from tests.system.collision_fuzzing import check_no_collision
from tests.system.helpers import Rig

GOALS = 150  # with test_collision_fuzz_reseeded.py's: 300
SEED = 20261126


def test_random_goals_and_streams_never_bring_the_arm_into_collision(
    arm: Rig, arm_setup: ArmSetup
) -> None:
    check_no_collision(arm, arm_setup, SEED, GOALS)
