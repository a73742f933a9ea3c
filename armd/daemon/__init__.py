"""The daemon process: composes the MQTT API, the goal pipeline and the handle on the control
process; talks to systemd."""

__all__: list[str] = []
