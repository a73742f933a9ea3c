"""MIT-mode CAN actuators (Damiao DM-J series, CubeMars AK series): the driver (config name
`mit`), its codec, the per-model ranges, and a simulated actuator set on a python-can bus
(`armd sim-device mit`)."""

__all__: list[str] = []
