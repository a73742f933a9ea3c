"""The `armd` command line: one module per command (rooms of their own for the client, calibration
and simulated-device commands). The only place that configures logging and calls `sys.exit`."""

__all__: list[str] = []
