"""Work beside the daemon: leader-follower teleoperation, recording and replay, automatic
calibration."""

__all__: list[str] = []
