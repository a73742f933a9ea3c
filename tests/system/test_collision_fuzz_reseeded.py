"""A bounded collision fuzz through MQTT, second half: the other 150 of its 300 random goals and
two of its four streams, from another seed, on a daemon of its own (test_collision_fuzz.py is the
first half; tests/system/collision_fuzzing.py the fuzz): no measured state may be in collision."""

from __future__ import annotations

from armd.config.load import ArmSetup
from tests.system.collision_fuzzing import check_no_collision
from tests.system.helpers import Rig

GOALS = 150  # with test_collision_fuzz.py's: 300
SEED = 20261127


def test_random_goals_and_streams_from_another_seed_never_bring_the_arm_into_collision(
    arm: Rig, arm_setup: ArmSetup
) -> None:
    check_no_collision(arm, arm_setup, SEED, GOALS)
