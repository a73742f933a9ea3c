"""Write config/collision/{ur5,panda,so101}.yaml from the published collision meshes.

    pip install example-robot-data trimesh && python scripts/fit_collision.py

The meshes are example-robot-data's (PyPI, BSD-3-Clause): the UR5's and the Panda's collision
meshes, and the SO-101's (TheRobotStudio SO-ARM100, Apache-2.0). Each mesh of a link's
``<collision>`` becomes the capsule that contains all its vertices
(`kinematics.collision.mesh_fit`), through the same URDF reader a user's URDF goes through
(`kinematics.collision.urdf_collision`). Coordinates are rounded to 0.1 mm and each radius grown by
0.1 mm, so the rounded capsule still contains the mesh. The link frames of those URDFs are the
ones of config/robots (the tests compare them). Each mesh becomes up to three capsules
(`fit_capsules`: slabs along its principal axis, kept when they cut the volume by a fifth), or,
for the links of SEGMENTS, capsules on chosen segments.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kinematics.collision.geometry import Box, Capsule, Shape, Sphere  # noqa: E402
from kinematics.collision.mesh_fit import fit_radii, read_mesh  # noqa: E402
from kinematics.collision.urdf_collision import collision_from_urdf_file  # noqa: E402

# Links whose mesh is a tube between two joint housings set across it: one capsule per part, on
# segments read off the mesh (m, link frame), each radius fitted so the union holds every triangle
# (`fit_radii`). A single capsule around such a link is so fat that it grazes the table from the
# shoulder axis in every configuration.
SEGMENTS = {
    "ur5": {
        "upper_arm_link": (
            "ur5/collision/upperarm.stl",
            [
                ((0, -0.06, 0), (0, 0.06, 0)),
                ((0, 0, 0), (0, 0, 0.425)),
                ((0, -0.06, 0.425), (0, 0.06, 0.425)),
            ],
        ),
        "forearm_link": (
            "ur5/collision/forearm.stl",
            [
                ((0, -0.025, 0), (0, 0.05, 0)),
                ((0, 0, 0), (0, 0, 0.3922)),
                ((0, -0.052, 0.3922), (0, 0.042, 0.3922)),
            ],
        ),
    },
}

ARMS = {
    "ur5": ("ur_description/urdf/ur5_robot.urdf", "UR5 (Universal Robots)", []),
    "panda": (
        "panda_description/urdf/panda.urdf",
        "Franka Emika Panda",
        # the fingers touch each other when the gripper closes: grasping is not a collision
        [["panda_leftfinger", "panda_rightfinger"]],
    ),
    "so101": ("so_arm_description/urdf/so101.urdf", "SO-101 follower (TheRobotStudio)", []),
}


def _erd_robots() -> Path:
    import cmeel  # noqa: PLC0415 (example-robot-data installs its files under cmeel's prefix)

    return (
        Path(cmeel.__file__).resolve().parent.parent
        / "cmeel.prefix/share/example-robot-data/robots"
    )


def _round(values: tuple[float, ...]) -> list[float]:
    return [round(v, 4) + 0.0 for v in values]


def _shape(shape: Shape) -> dict[str, object]:
    if isinstance(shape, Capsule):
        radius = round(shape.radius + 0.0001, 4)
        return {"type": "capsule", "a": _round(shape.a), "b": _round(shape.b), "radius": radius}
    if isinstance(shape, Sphere):
        return {
            "type": "sphere",
            "center": _round(shape.center),
            "radius": round(shape.radius + 0.0001, 4),
        }
    assert isinstance(shape, Box)
    size = [round(v + 0.0002, 4) for v in shape.size]
    return {
        "type": "box",
        "center": _round(shape.center),
        "size": size,
        "orientation": [round(v, 6) for v in shape.orientation],
    }


class _Flow(yaml.SafeDumper):
    pass


def _represent_dict(dumper: yaml.SafeDumper, data: dict[str, object]) -> yaml.Node:
    flow = "type" in data  # shapes and objects on one line each
    return dumper.represent_mapping("tag:yaml.org,2002:map", data.items(), flow_style=flow)


def _represent_list(dumper: yaml.SafeDumper, data: list[object]) -> yaml.Node:
    flow = all(not isinstance(v, dict) for v in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


_Flow.add_representer(dict, _represent_dict)
_Flow.add_representer(list, _represent_list)


def main() -> None:
    robots = _erd_robots()
    for name, (urdf, title, allowed) in ARMS.items():
        overrides = {
            link: fit_radii(*read_mesh(robots / "ur_description/meshes" / mesh), segments, 0.005)
            for link, (mesh, segments) in SEGMENTS.get(name, {}).items()
        }
        links = collision_from_urdf_file(robots / urdf, overrides=overrides, capsules_per_mesh=3)
        data: dict[str, object] = {
            "margin": 0.01,
            "self_collision": True,
            "links": {link: [_shape(s) for s in shapes] for link, shapes in links.items()},
        }
        if allowed:
            data["allowed"] = allowed
        data["environment"] = [
            {"name": "table", "type": "plane", "point": [0.0, 0.0, 0.0], "normal": [0.0, 0.0, 1.0]}
        ]
        header = (
            f"# Collision geometry of the {title}, for config/robots/{name}.urdf:\n"
            "# capsules fitted to the published collision meshes (example-robot-data 6.0.0,\n"
            f"# robots/{urdf}), their union holding every triangle of them;\n"
            "# written by scripts/fit_collision.py. Units: m. The arm's base stands on the table\n"
            "# (z = 0 of the root frame). docs/collision.md describes every key.\n"
        )
        text = yaml.dump(data, Dumper=_Flow, sort_keys=False, width=120)
        (ROOT / "config" / "collision" / f"{name}.yaml").write_text(header + text, encoding="utf-8")
        print(f"config/collision/{name}.yaml: {sum(len(s) for s in links.values())} shapes")


if __name__ == "__main__":
    main()
