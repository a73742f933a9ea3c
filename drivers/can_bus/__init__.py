"""What the CAN actuator families share (ODrive CAN Simple, MIT mode): a python-can bus of
actuators. `frame` is the codecs' CAN frame; `link` opens a bus with a deadline and receives on a
thread; `driver` is the `Driver` template of a bus (frame routing by id to device records,
waiting for them, counting problems); `sim` serves simulated devices on a bus. Each family keeps
its codec, its records and its quirks."""

__all__: list[str] = []
