"""The shipped arms' collision geometry (config/collision/*.yaml) on their models: it holds the
published collision meshes it was fitted to, named poses are free, known collisions are found,
distances agree with coal at random configurations, and path checks miss nothing a fine
brute-force sampling finds."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
import yaml

from kinematics import KinematicTree, load_tree, solve_ik
from kinematics.collision import Capsule, CollisionModel, spec_from_dict
from kinematics.collision.bodies import pair_reach_weights, shape_points
from kinematics.collision.mesh_fit import read_mesh_vertices
from kinematics.collision.urdf_collision import resolve_mesh_path
from kinematics.errors import KinematicsError
from kinematics.pose import Pose
from kinematics.quaternion import quat_from_rpy, quat_rotate
from tests.kinematics.collision_peers import COAL_TOLERANCE, coal_distance, coal_object
from tests.kinematics.conftest import ROBOTS

CONFIG = ROBOTS.parent
ARMS = ("ur5", "panda", "so101")
PUBLISHED = {
    "ur5": "ur_description/urdf/ur5_robot.urdf",
    "panda": "panda_description/urdf/panda.urdf",
    "so101": "so_arm_description/urdf/so101.urdf",
}
EXACT = 1e-9


def load(name: str) -> tuple[KinematicTree, CollisionModel]:
    tree = load_tree(ROBOTS / f"{name}.urdf")
    data = yaml.safe_load((CONFIG / "collision" / f"{name}.yaml").read_text(encoding="utf-8"))
    return tree, CollisionModel(tree, spec_from_dict(data))


@pytest.fixture(scope="module", params=ARMS)
def arm(request: pytest.FixtureRequest) -> tuple[str, KinematicTree, CollisionModel]:
    return (request.param, *load(request.param))


@pytest.fixture(scope="module")
def ur5() -> tuple[KinematicTree, CollisionModel]:
    return load("ur5")


def _poses(config: str) -> dict[str, dict[str, float]]:
    poses: dict[str, dict[str, float]] = yaml.safe_load(
        (CONFIG / config).read_text(encoding="utf-8")
    )["poses"]
    return poses


# -- the geometry -----------------------------------------------------------------------------


def _published_robots() -> Path:
    cmeel = pytest.importorskip("cmeel")
    return (
        Path(cmeel.__file__).resolve().parent.parent
        / "cmeel.prefix/share/example-robot-data/robots"
    )


@pytest.mark.parametrize("name", ARMS)
def test_the_capsules_hold_every_vertex_of_the_published_meshes(name: str) -> None:
    urdf = _published_robots() / PUBLISHED[name]
    tree, model = load(name)
    published = load_tree(urdf)
    q = np.random.default_rng(0).uniform(-1.0, 1.0, tree.dof)  # the same frames at any q
    ours, theirs = tree.fk_all(q), published.fk_all(q)
    for link in tree.link_names:
        assert sum(ours[link].distance_to(theirs[link])) < 1e-12
    checked = 0
    for link in ET.parse(urdf).getroot().findall("link"):
        shapes = model.spec.links.get(link.get("name", ""), ())
        for collision in link.findall("collision"):
            mesh = collision.find("geometry/mesh")
            if mesh is None:
                continue
            origin = collision.find("origin")
            pose = (
                Pose()
                if origin is None
                else Pose(
                    [float(v) for v in origin.get("xyz", "0 0 0").split()],
                    quat_from_rpy([float(v) for v in origin.get("rpy", "0 0 0").split()]),
                )
            )
            path = resolve_mesh_path(mesh.get("filename", ""), urdf.parent)
            assert path is not None
            vertices = pose.transform_points(read_mesh_vertices(path))
            inside = np.zeros(len(vertices), dtype=bool)
            for shape in shapes:
                assert isinstance(shape, Capsule)
                a, b = np.array(shape.a), np.array(shape.b)
                d = b - a
                t = np.clip((vertices - a) @ d / max(float(d @ d), 1e-300), 0.0, 1.0)
                gap = np.linalg.norm(vertices - (a + t[:, None] * d), axis=1)
                inside |= gap <= shape.radius + 1e-9
            assert inside.all(), (link.get("name"), path.name, int((~inside).sum()))
            checked += 1
    assert checked >= 7


# -- poses ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "config", "pose"),
    [("ur5", "sim.yaml", "home"), ("ur5", "sim.yaml", "ready")]
    + [("so101", "so101.yaml", pose) for pose in ("home", "ready")],
)
def test_named_poses_are_collision_free(name: str, config: str, pose: str) -> None:
    tree, model = load(name)
    report = model.distances(tree.q_from_mapping(_poses(config)[pose]))
    assert report.collision_free, report.contacts


def test_the_so101_zero_pose_is_collision_free() -> None:
    tree, model = load("so101")
    assert model.first_contact(np.zeros(tree.dof)) is None


@pytest.mark.parametrize("start", ["home", "zero"])
def test_the_ur5_forearm_folded_through_the_upper_arm_collides(
    ur5: tuple[KinematicTree, CollisionModel], start: str
) -> None:
    tree, model = ur5
    base = tree.q_from_mapping(_poses("sim.yaml")["home"]) if start == "home" else None
    q = tree.q_from_mapping({"elbow_joint": 3.1, "shoulder_lift_joint": -1.0}, base)
    contacts = model.distances(q).contacts
    assert ("upper_arm_link", "wrist_1_link") in [(p.a, p.b) for p in contacts]
    assert model.first_contact(q) is not None


@pytest.mark.parametrize(
    ("name", "tool", "config", "pose"),
    [
        ("ur5", "tool0", "sim.yaml", "home"),
        ("so101", "gripper_frame_link", "so101.yaml", "ready"),
        ("panda", "panda_hand", None, None),
    ],
)
def test_the_tool_under_the_table_collides(
    name: str, tool: str, config: str | None, pose: str | None
) -> None:
    """The tool 0.3 m under the table (0.2 m for the SO-101, whose reach is 0.4 m), found by IK."""
    tree, model = load(name)
    seed = tree.q_from_mapping(_poses(config)[pose]) if config and pose else np.zeros(tree.dof)
    depth = 0.2 if name == "so101" else 0.3
    result = solve_ik(tree, np.array([0.25, 0.0, -depth]), seed, tool)
    assert result.success
    assert tree.fk(result.q, tool).translation[2] == pytest.approx(-depth, abs=1e-3)
    contacts = model.distances(result.q).contacts
    assert any(p.b == "table" and p.distance < -0.05 for p in contacts), contacts


# -- against coal -----------------------------------------------------------------------------


def test_random_configurations_agree_with_coal(
    arm: tuple[str, KinematicTree, CollisionModel],
) -> None:
    _, tree, model = arm
    env = {obj.name: obj for obj in model.spec.environment}
    qs = np.random.default_rng(1).uniform(
        np.maximum(tree.limits.lower, -np.pi), np.minimum(tree.limits.upper, np.pi), (60, tree.dof)
    )
    ours = model.distances_batch(qs)
    for q, row in zip(qs, ours, strict=True):
        frames = tree.fk_all(q)
        placed = {
            link: [
                coal_object(shape, frames[link].rotation_matrix, frames[link].translation)
                for shape in shapes
            ]
            for link, shapes in model.spec.links.items()
        }
        for (a, b), mine in zip(model.pair_names, row, strict=True):
            second = placed[b] if b in placed else [coal_object(env[b], np.eye(3), np.zeros(3))]
            theirs = min(coal_distance(x, y) for x in placed[a] for y in second)
            boxes = any(
                not isinstance(s, Capsule) and len(shape_points(s)[0]) == 8
                for s in (*model.spec.links[a], *model.spec.links.get(b, ()))
            )
            assert mine == pytest.approx(theirs, abs=COAL_TOLERANCE if boxes else EXACT), (a, b)
            if abs(theirs - model.margin) > COAL_TOLERANCE:
                assert (mine < model.margin) == (theirs < model.margin)


# -- paths ------------------------------------------------------------------------------------


def test_reach_weights_bound_every_point_of_every_link(
    arm: tuple[str, KinematicTree, CollisionModel],
) -> None:
    """For random configurations and joint steps, no point of a link's geometry (its shapes'
    defining points pushed out by their radius in random directions) moves more than
    weights · |Δq| along the straight joint-space path (checked at 40 points along it)."""
    _, tree, model = arm
    rng = np.random.default_rng(2)
    index = {name: i for i, name in enumerate(tree.link_names)}
    lower = np.maximum(tree.limits.lower, -np.pi)
    upper = np.minimum(tree.limits.upper, np.pi)
    for _ in range(12):
        q0 = rng.uniform(lower, upper)
        dq = rng.normal(size=tree.dof) * rng.choice([0.01, 0.3, 2.0])
        path = q0 + np.linspace(0.0, 1.0, 40)[:, None] * dq
        bound = model.reach_weights @ np.abs(dq)
        for link, shapes in model.spec.links.items():
            local = []
            for shape in shapes:
                points, radius = shape_points(shape)
                offsets = rng.normal(size=(len(points), 8, 3))
                offsets *= radius / np.linalg.norm(offsets, axis=2, keepdims=True)
                local.append((points[:, None, :] + offsets).reshape(-1, 3))
            pts = np.concatenate(local)
            translations, quaternions = tree.fk_batch(path, link)
            world = quat_rotate(quaternions[:, None, :], pts[None, :, :]) + translations[:, None]
            moved = np.linalg.norm(world - world[0], axis=2)
            assert moved.max() <= bound[index[link]] + 1e-12


def test_path_checks_miss_nothing_a_fine_sampling_finds(
    ur5: tuple[KinematicTree, CollisionModel],
) -> None:
    """Random 3-waypoint paths: where the checker says clear, 10 times finer sampling keeps every
    pair at least margin / 2 apart; where it reports a first contact, the samples before it are
    at least margin / 2 apart, and the reported configuration is on the path and in contact."""
    tree, model = ur5
    rng = np.random.default_rng(4)
    home = tree.q_from_mapping(_poses("sim.yaml")["home"])
    clear = hit = 0
    for _ in range(12):
        waypoints = home + rng.normal(size=(3, tree.dof)) * 0.6
        waypoints[0] = home
        result = model.check_path(waypoints)
        dense_s = np.linspace(0.0, 1.0, 10 * result.samples + 1)
        dense = np.stack([np.interp(2 * dense_s, [0, 1, 2], w) for w in waypoints.T], axis=1)
        least = model.distances_batch(dense).min(axis=1)
        if result.clear:
            clear += 1
            assert least.min() >= model.margin / 2 - 1e-12
        else:
            hit += 1
            assert result.fraction is not None
            assert result.distance is not None
            assert result.distance < model.margin
            before = dense_s < result.fraction
            assert np.all(least[before] >= model.margin / 2 - 1e-12)
            seg = min(int(result.fraction * 2), 1)
            local = result.fraction * 2 - seg
            on_path = waypoints[seg] + local * (waypoints[seg + 1] - waypoints[seg])
            assert result.q == pytest.approx(on_path, abs=1e-9)
            assert model.min_distance(result.q)[0] == pytest.approx(result.distance, abs=1e-12)
    assert clear
    assert hit


def test_trajectory_functions_are_sampled_from_the_velocity_bound(
    ur5: tuple[KinematicTree, CollisionModel],
) -> None:
    tree, model = ur5
    home = tree.q_from_mapping(_poses("sim.yaml")["home"])
    fold = tree.q_from_mapping({"elbow_joint": 3.1, "shoulder_lift_joint": -1.0}, home)
    duration = 4.0
    speed = np.abs(fold - home) / duration  # a straight line at constant speed

    def positions(t: np.ndarray) -> np.ndarray:
        return home + np.clip(t / duration, 0.0, 1.0)[:, None] * (fold - home)

    result = model.check_trajectory(positions, duration, speed)
    assert not result.clear
    assert result.fraction is not None
    assert 0.0 < result.fraction < 1.0
    straight = model.check_path([home, fold])
    assert result.fraction == pytest.approx(straight.fraction, abs=2.0 / straight.samples)
    free = model.check_trajectory(lambda t: np.tile(home, (len(t), 1)), duration, speed)
    assert free.clear


def test_trajectories_with_speed_bounds_per_piece_sample_each_piece_at_its_own_speed(
    ur5: tuple[KinematicTree, CollisionModel],
) -> None:
    """A fold of the elbow whose speed ramps up and down (s(t) = t² then its mirror): bounded
    per piece, every step between samples keeps every link's points within margin / 2 at the
    bounds of the pieces it overlaps, it takes fewer samples than with one bound for the whole
    trajectory, and it finds the same first contact as the straight path (within a sample of
    either)."""
    tree, model = ur5
    home = tree.q_from_mapping(_poses("sim.yaml")["home"])
    fold = tree.q_from_mapping({"elbow_joint": 3.1, "shoulder_lift_joint": -1.0}, home)
    duration, delta = 4.0, fold - home

    def progress(t: np.ndarray) -> np.ndarray:  # 0 → 1, speed 0 → 1 / 2 s⁻¹ → 0
        u = np.clip(t / duration, 0.0, 1.0)
        return np.where(u < 0.5, 2.0 * u * u, 1.0 - 2.0 * (1.0 - u) ** 2)

    def positions(t: np.ndarray) -> np.ndarray:
        return home + progress(t)[:, None] * delta

    breaks = np.linspace(0.0, duration, 9)
    peak = 1.0 - np.abs(np.linspace(-1.0, 1.0, 9))  # s's speed at each break, relative
    speeds = np.maximum(peak[:-1], peak[1:]) * 2.0 / duration  # the largest ṡ per piece
    bounds = speeds[:, None] * np.abs(delta)[None, :]
    times = model.sample_times(duration, bounds, breaks)
    # Each step's joint travel at the bounds: the pieces it overlaps, each for as long as it does.
    overlap = np.clip(
        np.minimum(times[1:, None], breaks[None, 1:]) - np.maximum(times[:-1, None], breaks[:-1]),
        0.0,
        None,
    )
    step = overlap @ bounds
    assert np.all((step @ model.reach_weights.T).max(axis=1) <= 0.5 * model.margin * (1 + 1e-12))
    uniform = model.sample_times(duration, bounds.max(axis=0))
    assert times.shape[0] < 0.7 * uniform.shape[0]
    result = model.check_trajectory(positions, duration, bounds, breaks)
    straight = model.check_path([home, fold])
    assert not result.clear
    assert result.fraction is not None
    assert straight.fraction is not None
    reached = float(progress(np.array([result.fraction * duration]))[0])
    assert reached == pytest.approx(straight.fraction, abs=2.0 / straight.samples)
    assert result.q == pytest.approx(positions(np.array([result.fraction * duration]))[0])


def test_sample_times_are_the_fewest_that_keep_every_step_within_half_the_margin(
    ur5: tuple[KinematicTree, CollisionModel],
) -> None:
    """Random pieces (some standing still, some of no length): every step's reach at the bounds
    of the pieces it overlaps is at most margin / 2, and one sample fewer could not do: the
    count is the total reach over margin / 2, rounded up."""
    _, model = ur5
    rng = np.random.default_rng(8)
    for _ in range(50):
        m = int(rng.integers(1, 40))
        breaks = np.concatenate([[0.0], np.cumsum(rng.choice([0.0, 0.05, 0.3], m))])
        bounds = rng.uniform(0.0, 2.0, (m, 6)) * rng.choice([0.0, 1.0], (m, 1), p=[0.2, 0.8])
        times = model.sample_times(float(breaks[-1]), bounds, breaks)
        assert times[0] == 0.0
        assert times[-1] == breaks[-1]
        assert np.all(np.diff(times) >= 0.0)
        ends = np.minimum(times[1:, None], breaks[None, 1:])
        overlap = np.clip(ends - np.maximum(times[:-1, None], breaks[:-1]), 0.0, None)
        reach = ((overlap @ bounds) @ model.reach_weights.T).max(axis=1)
        assert np.all(reach <= 0.5 * model.margin * (1 + 1e-9))
        total = np.diff(breaks) @ (bounds @ model.reach_weights.T).max(axis=1)
        assert times.shape[0] - 1 == max(1, int(np.ceil(total / (0.5 * model.margin))))


@pytest.mark.parametrize(
    ("velocity", "breaks", "message"),
    [
        (np.ones((2, 6)), [0.0, 2.0], "per piece between breaks_s, (1, 6), got shape (2, 6)"),
        (
            np.ones((2, 6)),
            [0.0, 1.0, 3.0],
            "[0.0, 1.0, 3.0] must increase from 0 to duration_s 2.0",
        ),
        (np.ones((2, 6)), [0.0, 1.5, 1.0], "must increase from 0 to duration_s 2.0"),
        (np.ones((1, 6)), 2.0, "breaks_s: 2.0 must increase from 0"),
        (np.full((1, 6), np.nan), [0.0, 2.0], "max_velocity must be finite, got [[nan"),
    ],
)
def test_bad_speed_bounds_per_piece_are_refused(
    ur5: tuple[KinematicTree, CollisionModel],
    velocity: np.ndarray,
    breaks: list[float],
    message: str,
) -> None:
    _, model = ur5
    with pytest.raises(KinematicsError, match=re.escape(message)):
        model.check_trajectory(lambda t: np.zeros((len(t), 6)), 2.0, velocity, breaks)


def test_a_pair_s_distance_changes_no_more_than_its_relative_reach(
    arm: tuple[str, KinematicTree, CollisionModel],
) -> None:
    """The bound that lets a path check skip a pair: for random configurations and joint steps
    (up to 0.3 rad or m), every checked pair's distance changes by at most its relative reach
    weights · |Δq|, which count only the joints above one of its two links; the joints above
    both count for nothing (checked on pairs that have such joints)."""
    _, tree, model = arm
    names = list(model.pair_names)
    relative = pair_reach_weights(tree, model.reach_weights, names)
    rng = np.random.default_rng(12)
    lower, upper = tree.limits.lower, tree.limits.upper
    q = rng.uniform(lower, upper, (300, tree.dof))
    step = rng.uniform(-0.3, 0.3, (300, tree.dof))
    change = np.abs(model.distances_batch(q + step) - model.distances_batch(q))
    assert np.all(change <= np.abs(step) @ relative.T + 1e-12)
    index = {name: i for i, name in enumerate(tree.link_names)}
    absolute = np.array(
        [model.reach_weights[index[a]] + model.reach_weights[index.get(b, 0)] * (b in index)
         for a, b in names]
    )  # fmt: skip
    assert np.any(relative.sum(axis=1) < absolute.sum(axis=1) - 1e-9)


def test_skipping_pairs_proven_clear_changes_no_result(
    ur5: tuple[KinematicTree, CollisionModel],
) -> None:
    """Random trajectories through the workspace: the first sample closer than the margin, its
    pair and distance are those of every pair evaluated at every one of the same samples."""
    tree, model = ur5
    rng = np.random.default_rng(21)
    home = tree.q_from_mapping(_poses("sim.yaml")["home"])
    found = 0
    for _ in range(20):
        ends = home + rng.normal(size=(2, tree.dof)) * 0.8
        speed = np.abs(ends[1] - ends[0]) / 2.0

        def positions(t: np.ndarray, ends: np.ndarray = ends) -> np.ndarray:
            u = 0.5 - 0.5 * np.cos(np.pi * np.clip(t / 2.0, 0.0, 1.0))  # peak speed π/2 × mean
            return ends[0] + u[:, None] * (ends[1] - ends[0])

        result = model.check_trajectory(positions, 2.0, speed * np.pi / 2)
        times = model.sample_times(2.0, speed * np.pi / 2)
        every = model.distances_batch(positions(times))
        close = np.argwhere(every < model.margin)
        assert result.clear == (close.size == 0)
        if close.size:
            found += 1
            sample, pair = close[0]
            assert result.fraction == pytest.approx(times[sample] / 2.0, abs=1e-12)
            assert result.pair == model.pair_names[pair]
            assert result.distance == pytest.approx(every[sample, pair], abs=1e-12)
    assert 0 < found < 20
