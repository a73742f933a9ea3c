"""`armd calibrate`: the guided calibration and `--auto`."""

__all__: list[str] = []
