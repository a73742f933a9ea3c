// The collision model of the `model` message: parsing and its refusals, where each shape is drawn
// (the pose math, and the three.js meshes built from it), the colliding pair of a reason, and how
// long a pair stays highlighted.
import { readFileSync } from "node:fs";
import * as THREE from "three";
import { describe, expect, it } from "vitest";
import {
  CollisionError,
  CollisionHighlight,
  type Shape,
  capsuleLength,
  collisionPair,
  parseCollision,
  parseHold,
  placeShape,
  planeSquare,
  rotationBetween,
  shapeFrame,
  transformPoint,
} from "../src/collision";
import { CollisionMeshes } from "../src/collision-meshes";
import { parseModel, parseState } from "../src/contract";
import { KinematicModel, type Quat, type Transform, type Vec3, axisAngle, rotate } from "../src/kinematics";

const ur5 = JSON.parse(readFileSync(new URL("./fk-fixture.json", import.meta.url), "utf-8"))["ur5.urdf"];
const kinematics = KinematicModel.fromDocument(ur5.model);
const LINKS = new Set(kinematics.links.map((link) => link.name));

/** A collision key as armd publishes it (docs/mqtt.md#model), on the UR5's links. */
const COLLISION = {
  margin: 0.01,
  self_collision: true,
  links: {
    upper_arm_link: [
      { type: "capsule", a: [0, -0.06, 0], b: [0, 0.06, 0], radius: 0.06 },
      { type: "capsule", a: [0, 0, 0], b: [0, 0, 0.425], radius: 0.06 },
    ],
    forearm_link: [{ type: "capsule", a: [0, 0, 0], b: [0, 0, 0.392], radius: 0.058 }],
    wrist_2_link: [{ type: "sphere", center: [0, 0, 0.08], radius: 0.05 }],
    wrist_3_link: [{ type: "box", center: [0, 0.06, 0], size: [0.08, 0.02, 0.08], orientation: [2, 0, 0, 2] }],
  },
  environment: [
    { name: "table", type: "plane", point: [0, 0, 0], normal: [0, 0, 3] },
    { name: "fixture", type: "box", center: [0.5, 0.2, 0.1], size: [0.2, 0.2, 0.2] },
    { type: "keep_in", center: [0, 0, 0.5], size: [2, 2, 1.2], orientation: [1, 0, 0, 0] },
  ],
  allowed: [
    ["upper_arm_link", "forearm_link", "adjacent"],
    ["forearm_link", "table", "config"],
  ],
};

const close = (a: readonly number[], b: readonly number[]) => Math.hypot(...a.map((v, i) => v - (b[i] ?? NaN)));

function withCollision(collision: unknown): string {
  const model = { format: "armd-model/1", name: "ur5-sim", root: "world", tool_link: "tool0", joints: ur5.joints };
  return JSON.stringify({ ...model, model: ur5.model, loop_hz: 250, telemetry_hz: 25, collision });
}

describe("the collision key", () => {
  const collision = parseCollision(COLLISION, LINKS);
  const capsule = { type: "capsule", a: [0, 0, 0], b: [0, 0, 1], radius: 0.1 };
  const box = { type: "box", center: [0, 0, 0], size: [1, 1, 1] };
  const forearm = (...shapes: object[]) => ({ margin: 0, links: { forearm_link: shapes } });
  const place = (...objects: object[]) => ({ margin: 0, environment: objects });

  it("is read whole: shapes by link, the environment, the allowed pairs", () => {
    expect(collision.margin).toBe(0.01);
    expect(collision.selfCollision).toBe(true);
    expect([...collision.links.keys()]).toEqual(["upper_arm_link", "forearm_link", "wrist_2_link", "wrist_3_link"]);
    expect(collision.links.get("upper_arm_link")).toHaveLength(2);
    expect(collision.environment.map((o) => [o.name, o.type])).toEqual([
      ["table", "plane"],
      ["fixture", "box"],
      ["workspace", "keep_in"], // the keep-in box's name defaults to "workspace"
    ]);
    expect(collision.allowed[1]).toEqual({ a: "forearm_link", b: "table", reason: "config" });
    expect(collision.skipped).toEqual([]);
  });

  it("normalises normals and quaternions", () => {
    const table = collision.environment[0];
    expect(table?.type === "plane" && table.normal).toEqual([0, 0, 1]);
    const box = collision.links.get("wrist_3_link")?.[0] as Extract<Shape, { type: "box" }>;
    expect(close(box.orientation, [Math.SQRT1_2, 0, 0, Math.SQRT1_2])).toBeLessThan(1e-12);
  });

  it.each([
    [{ ...COLLISION, margin: "wide" }, "collision: margin: \"wide\" must be a finite number"],
    [{ ...COLLISION, margin: -0.01 }, "margin: -0.01 must be a finite number ≥ 0"],
    [{ ...COLLISION, self_collision: "yes" }, "self_collision"],
    [{ ...COLLISION, links: [] }, "links: [] must be an object"],
    [{ ...COLLISION, links: { elbow: [] } }, "link 'elbow': not a link of the model"],
    [{ links: { forearm_link: [capsule] } }, "margin"],
    [forearm({ ...capsule, a: [0, 0] }), "link 'forearm_link' shape 1: a: [0,0] must be a list of 3"],
    [forearm({ type: "sphere", center: [0, 0, 0], radius: -1 }), "radius: -1"],
    [forearm({ ...box, size: [1, 0, 1] }), "size: [1,0,1] must be > 0"],
    [forearm({ ...box, orientation: [0, 0, 0, 0] }), "orientation: [0,0,0,0] must be non-zero"],
    [forearm({ type: "cone" }, { type: "box" }), "shape 2: center"],
    [place({ type: "plane", name: "t", point: [0, 0, 0], normal: [0, 0, 0] }), "environment 't': normal"],
    [place({ ...box, name: "" }), "environment[0]: name"],
    [{ ...forearm(capsule), environment: [{ ...box, name: "forearm_link" }] }, "unique"],
    [place({ ...box, name: "crate" }, { ...box, name: "crate" }), "unique"],
    [{ margin: 0, allowed: [["a"]] }, "allowed[0]"],
    ["collision", "must be a JSON object"],
  ])("refuses a malformed one, naming what is wrong (%#)", (value, words) => {
    expect(() => parseCollision(value, LINKS)).toThrow(CollisionError);
    expect(() => parseCollision(value, LINKS)).toThrow(words);
  });

  it("lets an object share the name of a link without shapes (as armd does)", () => {
    expect(parseCollision(place({ ...box, name: "tool0" }), LINKS).environment[0]?.name).toBe("tool0");
  });

  it("leaves out shapes and objects of a type it does not know, saying so", () => {
    const later = {
      margin: 0.01,
      links: { forearm_link: [{ type: "cylinder", radius: 0.1 }, { type: "sphere", center: [0, 0, 0], radius: 0.1 }] },
      environment: [{ name: "scan", type: "octree" }],
    };
    const parsed = parseCollision(later, LINKS);
    expect(parsed.links.get("forearm_link")).toHaveLength(1);
    expect(parsed.environment).toEqual([]);
    expect(parsed.skipped).toEqual(['link \'forearm_link\' shape 1: type "cylinder"', 'environment[0]: type "octree"']);
  });

  it("in a model message: absent, drawn, or malformed and left out with a notice", () => {
    const without = parseModel(withCollision(undefined));
    expect([without.collision, without.collisionNotice]).toEqual([null, null]);
    const drawn = parseModel(withCollision(COLLISION));
    expect(drawn.collision?.links.size).toBe(4);
    expect(drawn.collisionNotice).toBeNull();
    const malformed = parseModel(withCollision({ ...COLLISION, margin: "wide" }));
    expect(malformed.collision).toBeNull();
    expect(malformed.collisionNotice).toContain("the collision model is malformed, not drawn: collision: margin");
    expect(malformed.kinematics.links.length).toBe(kinematics.links.length); // the arm is still drawn
  });
});

describe("state.collision_hold", () => {
  const state = { t: 1, mode: "moving", missed_ticks: 0, joints: {}, tcp: {} };

  it("is read when well formed, dropped when not", () => {
    const hold = { pair: ["wrist_3_link", "table"], distance: 0.004 };
    expect(parseHold(hold)).toEqual(hold);
    expect(parseState(JSON.stringify({ ...state, collision_hold: hold })).collision_hold).toEqual(hold);
    for (const bad of [{ pair: ["a"], distance: 0 }, { pair: ["a", 2], distance: 0 }, { pair: ["a", "b"] }, "a b"]) {
      expect(parseHold(bad)).toBeNull();
      expect(parseState(JSON.stringify({ ...state, collision_hold: bad })).collision_hold).toBeUndefined();
    }
  });
});

// -- where the shapes are drawn ----------------------------------------------------------------

/** A seeded generator (the same cases on every run). */
function random(seed: number): () => number {
  let s = seed;
  return () => {
    s = (s * 1664525 + 1013904223) % 4294967296;
    return s / 4294967296;
  };
}
const next = random(42);
const vec = (scale = 1): Vec3 => [scale * (2 * next() - 1), scale * (2 * next() - 1), scale * (2 * next() - 1)];
const unitVec = (): Vec3 => {
  const v = vec();
  const n = Math.hypot(...v);
  return [v[0] / n, v[1] / n, v[2] / n];
};
const pose = (): Transform => ({ t: vec(), q: axisAngle(unitVec(), 6 * next()) });

describe("the pose math", () => {
  it("turns one unit vector onto another, opposite ones included", () => {
    const cases: [Vec3, Vec3][] = [
      [[0, 1, 0], [0, -1, 0]],
      [[1, 0, 0], [-1, 0, 0]],
      [[0, 0, 1], [0, 0, 1]],
    ];
    for (let i = 0; i < 50; i++) cases.push([unitVec(), unitVec()]);
    for (const [from, to] of cases) {
      const q = rotationBetween(from, to);
      expect(Math.hypot(...q), "unit").toBeCloseTo(1, 12);
      expect(close(rotate(q, from), to), `${from} → ${to}`).toBeLessThan(1e-9);
    }
  });

  it("puts a capsule's ends at root_from_link × a and × b", () => {
    const frames = kinematics.fkAll(ur5.cases[2].q);
    const capsules: Extract<Shape, { type: "capsule" }>[] = [
      { type: "capsule", a: [0, 0, 0], b: [0, 0, 0.425], radius: 0.06 },
      { type: "capsule", a: [0, 0.3, 0], b: [0, -0.1, 0], radius: 0.02 }, // along −y: a half turn
      { type: "capsule", a: [0.1, 0.1, 0.1], b: [0.1, 0.1, 0.1], radius: 0.05 }, // a sphere
    ];
    for (let i = 0; i < 20; i++) capsules.push({ type: "capsule", a: vec(0.5), b: vec(0.5), radius: 0.03 });
    for (const [link, rootFromLink] of frames) {
      for (const capsule of capsules) {
        const half = capsuleLength(capsule) / 2;
        const placed = placeShape(rootFromLink, capsule);
        const ends = [transformPoint(placed, [0, -half, 0]), transformPoint(placed, [0, half, 0])];
        expect(close(ends[0] as Vec3, transformPoint(rootFromLink, capsule.a)), `${link} a`).toBeLessThan(1e-9);
        expect(close(ends[1] as Vec3, transformPoint(rootFromLink, capsule.b)), `${link} b`).toBeLessThan(1e-9);
      }
    }
  });

  it("puts a box's corners at root_from_link × (center + orientation × corner)", () => {
    for (let i = 0; i < 20; i++) {
      const rootFromLink = pose();
      const box: Extract<Shape, { type: "box" }> = {
        type: "box",
        center: vec(0.3),
        size: [0.1 + next(), 0.1 + next(), 0.1 + next()],
        orientation: axisAngle(unitVec(), 6 * next()),
      };
      const placed = placeShape(rootFromLink, box);
      for (const sign of [-1, 1]) {
        const corner: Vec3 = [(sign * box.size[0]) / 2, (-sign * box.size[1]) / 2, (sign * box.size[2]) / 2];
        const inLink = rotate(box.orientation, corner).map((v, k) => v + (box.center[k] as number)) as Vec3;
        expect(close(transformPoint(placed, corner), transformPoint(rootFromLink, inLink))).toBeLessThan(1e-9);
      }
    }
  });

  it("puts a sphere at root_from_link × center", () => {
    const rootFromLink = pose();
    const sphere: Shape = { type: "sphere", center: [0.1, -0.2, 0.3], radius: 0.05 };
    const placed = placeShape(rootFromLink, sphere);
    expect(close(placed.t, transformPoint(rootFromLink, sphere.center))).toBeLessThan(1e-12);
    expect(shapeFrame(sphere).q).toEqual([1, 0, 0, 0]);
  });

  it("draws a plane as a square on it, around the foot of the base, facing its normal", () => {
    for (let i = 0; i < 20; i++) {
      const plane = { type: "plane", name: "p", point: vec(), normal: unitVec() } as const;
      const square = planeSquare(plane);
      const offset = (p: readonly number[]) =>
        p.reduce((sum, v, k) => sum + (v - plane.point[k]!) * plane.normal[k]!, 0);
      expect(Math.abs(offset(square.t)), "on the plane").toBeLessThan(1e-9);
      expect(close(rotate(square.q, [0, 0, 1]), plane.normal), "facing").toBeLessThan(1e-9);
      // The foot of the origin: the origin is straight above (or below) the square's centre.
      const toOrigin = square.t.map((v) => -v);
      const along = Math.abs(toOrigin.reduce((s, v, k) => s + v * plane.normal[k]!, 0));
      expect(Math.abs(along - Math.hypot(...toOrigin))).toBeLessThan(1e-9);
    }
  });
});

describe("the three.js meshes", () => {
  const collision = parseCollision(COLLISION, LINKS);
  const meshes = new CollisionMeshes(collision, 1);
  const frames = kinematics.fkAll(ur5.cases[3].q);
  meshes.update(frames);
  meshes.root.updateMatrixWorld(true);
  const world = (name: string) => meshes.root.getObjectByName(`collision:${name}`) as THREE.Group;

  it("put each capsule's tips where the link's pose puts a and b (± the radius)", () => {
    const group = world("upper_arm_link");
    const shapes = collision.links.get("upper_arm_link") as Extract<Shape, { type: "capsule" }>[];
    group.children.forEach((child, i) => {
      const mesh = child as THREE.Mesh;
      const shape = shapes[i] as Extract<Shape, { type: "capsule" }>;
      mesh.geometry.computeBoundingBox();
      const box = mesh.geometry.boundingBox as THREE.Box3;
      // three.js's capsule: along its y, the tips at ±(length/2 + radius).
      expect(box.max.y).toBeCloseTo(capsuleLength(shape) / 2 + shape.radius, 6); // float32 vertices
      const tip = (sign: number) => {
        const local = new THREE.Vector3(0, sign * (capsuleLength(shape) / 2 + shape.radius), 0);
        return local.applyMatrix4(mesh.matrixWorld).toArray();
      };
      const link = frames.get("upper_arm_link") as Transform;
      const direction = rotate(link.q, shape.b.map((v, k) => v - shape.a[k]!) as Vec3);
      const n = Math.hypot(...direction);
      const beyond = (p: Vec3, sign: number) =>
        transformPoint(link, p).map((v, k) => v + (sign * shape.radius * direction[k]!) / n);
      expect(close(tip(-1), beyond(shape.a, -1)), "a").toBeLessThan(1e-6);
      expect(close(tip(1), beyond(shape.b, 1)), "b").toBeLessThan(1e-6);
    });
  });

  it("leave the environment in the root frame", () => {
    const fixture = world("fixture").children[0] as THREE.Mesh;
    expect(fixture.getWorldPosition(new THREE.Vector3()).toArray()).toEqual([0.5, 0.2, 0.1]);
    expect(world("workspace").children[0]).toBeInstanceOf(THREE.LineSegments);
    expect(world("table").children[0]?.getWorldPosition(new THREE.Vector3()).toArray()).toEqual([0, 0, 0]);
  });

  it("are hidden until shown, except a highlighted pair", () => {
    expect(meshes.drawn()).toMatchObject({ shown: false, visible: [], highlighted: [] });
    expect(meshes.drawn().links).toEqual({ upper_arm_link: 2, forearm_link: 1, wrist_2_link: 1, wrist_3_link: 1 });
    expect(meshes.drawn().environment).toEqual({ table: "plane", fixture: "box", workspace: "keep_in" });
    meshes.setHighlighted(["wrist_3_link", "table", "nothing"]);
    const pair = ["wrist_3_link", "table"];
    expect(meshes.drawn()).toMatchObject({ visible: pair, highlighted: pair });
    meshes.setShown(true);
    expect(meshes.drawn().visible).toHaveLength(7);
    meshes.setHighlighted([]);
    const material = (world("wrist_3_link").children[0] as THREE.Mesh).material as THREE.MeshStandardMaterial;
    expect(material.color.getHex()).not.toBe(0xff2a2a);
  });
});

// -- the colliding pair ------------------------------------------------------------------------

describe("the pair a reason names", () => {
  const known = [...LINKS, "table", "tool shelf", "wrist_3_link_cover"];

  it.each([
    ["collision: wrist_2_link with upper_arm_link at the target", ["wrist_2_link", "upper_arm_link"]],
    ["collision: wrist_3_link with table at 43 % of the path (0.004 m inside the margin)", ["wrist_3_link", "table"]],
    ["collision: wrist_3_link with tool shelf at the target", ["wrist_3_link", "tool shelf"]],
    ["collision: wrist_3_link_cover with table, at the target", ["wrist_3_link_cover", "table"]],
    ["collision: gripper with crate at the target", ["gripper", "crate"]], // names the page does not know
    ["collision: wrist_3_link with table", ["wrist_3_link", "table"]],
    [
      "collision: the arm is in collision (wrist_3_link with table, 0.003 m inside the margin): only out of it",
      ["wrist_3_link", "table"],
    ],
    ["collision: the arm is in collision (gripper with crate, 0.003 m inside the margin)", ["gripper", "crate"]],
  ])("%s", (reason, pair) => {
    expect(collisionPair(reason, known)).toEqual(pair);
  });

  const others = [undefined, "reset first: the e-stop is engaged", "collision: nothing", "x with y"];
  it.each(others)("none in %s", (reason) => expect(collisionPair(reason, known)).toBeNull());
});

describe("the highlight", () => {
  it("shows a rejection's pair for a while, or until the next goal, and a hold while it lasts", () => {
    const highlight = new CollisionHighlight(5000);
    highlight.reject(["wrist_3_link", "table"], 1000);
    expect(highlight.names(1000)).toEqual(["table", "wrist_3_link"]);
    expect(highlight.expiresAt).toBe(6000);
    expect(highlight.names(5999)).toEqual(["table", "wrist_3_link"]);
    expect(highlight.names(6000)).toEqual([]);
    expect(highlight.expiresAt).toBeNull();

    highlight.reject(["a", "b"], 7000);
    highlight.nextGoal();
    expect(highlight.names(7001)).toEqual([]);

    highlight.hold(["forearm_link", "table"]);
    highlight.reject(["wrist_3_link", "table"], 8000);
    expect(highlight.names(8000)).toEqual(["forearm_link", "table", "wrist_3_link"]);
    expect(highlight.names(20000)).toEqual(["forearm_link", "table"]); // the hold stays
    highlight.hold(null);
    expect(highlight.names(20000)).toEqual([]);
  });
});

// A quaternion helper the tests above lean on, checked once: axisAngle about z by 90°.
it("axisAngle gives [w, x, y, z]", () => {
  const q: Quat = axisAngle([0, 0, 1], Math.PI / 2);
  expect(close(q, [Math.SQRT1_2, 0, 0, Math.SQRT1_2])).toBeLessThan(1e-12);
});
