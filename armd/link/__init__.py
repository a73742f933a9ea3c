"""The seam between the daemon and its control process: the command and event vocabulary
(`protocol`), the values they carry (`messages`) and the socket pair that carries them
(`channel`). Imports neither side."""

__all__: list[str] = []
