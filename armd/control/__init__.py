"""The control process: the drivers behind one hardware interface, the control loop (read, safety,
motion, limiter, write), its motions, timing and entry point. No kinematics, no numba, no MQTT."""

__all__: list[str] = []
