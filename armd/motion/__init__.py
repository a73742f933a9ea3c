"""Joint-space motions as values: time-parameterised paths and timed trajectories, planned in the
daemon and sampled by the control loop on both sides of the link."""

__all__: list[str] = []
