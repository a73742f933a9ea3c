"""Feetech STS/SCS serial bus servos (the SO-100/SO-101 arms' STS3215): the driver (config name
`feetech`), its codec and control table, and a simulated STS3215 chain on a pty
(`armd sim-device feetech`)."""

__all__: list[str] = []
