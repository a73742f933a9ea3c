"""Chain mapping: joint values that put the arm in the shape of another chain known by its
keypoints (`chain.py`: `map_chain`, the search; `path.py`: the path it walks and how each joint
turns a segment; `rotation_family.py`: the closed forms of one vector pair)."""

from kinematics.mapping.chain import (
    MIN_SEGMENT_LENGTH,
    PARALLEL_TOLERANCE,
    AxisRotation,
    ChainMapping,
    MappingOptions,
    RotationFamily,
    map_chain,
    rotation_about_axis,
    rotation_family,
)

__all__ = [
    "MIN_SEGMENT_LENGTH",
    "PARALLEL_TOLERANCE",
    "AxisRotation",
    "ChainMapping",
    "MappingOptions",
    "RotationFamily",
    "map_chain",
    "rotation_about_axis",
    "rotation_family",
]
