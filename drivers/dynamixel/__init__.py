"""ROBOTIS Dynamixel X-series over Protocol 2.0 (serial): the driver (config name `dynamixel`),
its codec and control tables, and a simulated chain on a pty (`armd sim-device dynamixel`)."""
