"""ODrive over CAN (CANSimple, firmware 0.5/0.6): the driver (config name `odrive`), its codec,
and a simulated set of axes on a python-can bus (`armd sim-device odrive`)."""
