"""A physics-simulated arm: `MujocoDriver` (config name `mujoco`), the arm's URDF in MuJoCo with
actuators like the real families', contacts, a table and objects, stepped in real time."""

from drivers.mujoco.params import MujocoDeviceParams, MujocoParams, ObjectParams

__all__ = ["MujocoDeviceParams", "MujocoParams", "ObjectParams"]
