"""The configuration file: its schema, the checks against the model and the drivers, loading,
calibration and the LeRobot import. Runs in the daemon and the command line, never in the
control process."""

__all__: list[str] = []
