"""Tests of the web dashboard (dashboard/): its forward kinematics against armd's."""
