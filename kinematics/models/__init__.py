"""Model files: a `KinematicTree` read from ``.kinematic.json`` (`kinematic_json.py`,
docs/kinematic-json.md) or URDF (`urdf.py`), and written as ``.kinematic.json``; `loaders.py`
picks the format by the file's suffix and is the only module of `kinematics` that touches the
file system."""

from kinematics.models.kinematic_json import tree_from_dict, tree_to_dict
from kinematics.models.loaders import (
    JSON_SUFFIXES,
    URDF_SUFFIXES,
    load_tree,
    model_format,
    model_name,
    save_tree,
)
from kinematics.models.urdf import tree_from_urdf

__all__ = [
    "JSON_SUFFIXES",
    "URDF_SUFFIXES",
    "load_tree",
    "model_format",
    "model_name",
    "save_tree",
    "tree_from_dict",
    "tree_from_urdf",
    "tree_to_dict",
]
