"""armd, the arm controller daemon: config, control loop, goals, trajectories, safety, MQTT API,
CLI and systemd integration. The only package that composes `kinematics` and `drivers`."""

__all__ = ["__version__"]

__version__ = "0.1.0"
