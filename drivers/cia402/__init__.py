"""CiA 402 servo drives over CANopen (config name ``cia402``) in cyclic synchronous position mode,
on python-can and the `canopen` library; with a simulated drive speaking the same protocol."""

__all__: list[str] = []
