"""The daemon's goal pipeline: goals and stream messages planned into the control loop's commands
(IK, paths, Cartesian streams)."""

__all__: list[str] = []
