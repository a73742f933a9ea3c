"""`armd sim-device`: simulated devices that speak the real wire protocol, in their own process."""

__all__: list[str] = []
