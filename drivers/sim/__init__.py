"""The simulated arm: `SimDriver` (config name `sim`) and the motor model every simulated
device shares (`drivers.sim.motor`)."""
