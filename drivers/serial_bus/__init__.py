"""What the serial servo-bus families share (Dynamixel Protocol 2.0, Feetech SCS/STS): a half-duplex
bus of servos on one port. `framing` resynchronises a byte stream on a header and times a
transaction on the wire; `port` is the serial port (a pty or a USB adapter); `link` runs
transactions with reply deadlines on an I/O thread; `driver` is the `Driver` template of a chain
(one Sync Read and one Sync Write per cycle); `pty_chain` simulates a chain on a
pseudo-terminal. Each family keeps its codec, control table and quirks."""

__all__: list[str] = []
