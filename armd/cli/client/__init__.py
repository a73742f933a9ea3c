"""`armd goal`, `armd estop` and `armd watch`: the MQTT API from a terminal."""

__all__: list[str] = []
