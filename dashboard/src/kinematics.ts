// The arm's kinematic tree as published on `armd/<name>/model` (the `.kinematic.json` document of
// docs/kinematic-json.md) and its forward kinematics, in plain TypeScript: no three.js here, so
// the same code is unit-tested against armd's own FK (test/kinematics.test.ts) and drawn by
// scene.ts. Transforms are a translation and a unit quaternion [w, x, y, z], like armd's Pose.

export type Vec3 = [number, number, number];
export type Quat = [number, number, number, number]; // [w, x, y, z]

export interface Transform {
  readonly t: Vec3;
  readonly q: Quat;
}

export const IDENTITY: Transform = { t: [0, 0, 0], q: [1, 0, 0, 0] };

export interface Limits {
  readonly lower: number; // -Infinity when absent (a continuous joint)
  readonly upper: number; // +Infinity when absent
  readonly velocity?: number;
  readonly acceleration?: number;
}

export interface Mimic {
  readonly joint: string;
  readonly multiplier: number;
  readonly offset: number;
}

export type MotorKind = "constant" | "revolute" | "prismatic";

export interface LinkInfo {
  readonly name: string;
  readonly parent: string | null;
  readonly kind: MotorKind;
  /** The constant transform parent → link (for joints: applied before the motion). */
  readonly pose: Transform;
  /** Joints only: the unit axis, the joint's name, its limits and its mimic rule. */
  readonly axis: Vec3 | null;
  readonly joint: string | null;
  readonly limits: Limits | null;
  readonly mimic: Mimic | null;
}

/** A malformed model document; the message names the link, the key and what was expected. */
export class ModelError extends Error {
  override name = "ModelError";
}

// -- quaternion and transform algebra ----------------------------------------------------------

export function quatMultiply(a: Quat, b: Quat): Quat {
  const [aw, ax, ay, az] = a;
  const [bw, bx, by, bz] = b;
  return [
    aw * bw - ax * bx - ay * by - az * bz,
    aw * bx + ax * bw + ay * bz - az * by,
    aw * by - ax * bz + ay * bw + az * bx,
    aw * bz + ax * by - ay * bx + az * bw,
  ];
}

export function rotate(q: Quat, v: Vec3): Vec3 {
  // v' = v + 2 w (u × v) + 2 u × (u × v), u the vector part
  const [w, x, y, z] = q;
  const cx = y * v[2] - z * v[1];
  const cy = z * v[0] - x * v[2];
  const cz = x * v[1] - y * v[0];
  return [
    v[0] + 2 * (w * cx + y * cz - z * cy),
    v[1] + 2 * (w * cy + z * cx - x * cz),
    v[2] + 2 * (w * cz + x * cy - y * cx),
  ];
}

export function compose(a: Transform, b: Transform): Transform {
  const r = rotate(a.q, b.t);
  return { t: [a.t[0] + r[0], a.t[1] + r[1], a.t[2] + r[2]], q: quatMultiply(a.q, b.q) };
}

export function axisAngle(axis: Vec3, angle: number): Quat {
  const s = Math.sin(angle / 2);
  return [Math.cos(angle / 2), axis[0] * s, axis[1] * s, axis[2] * s];
}

/** The joint's own motion: a turn about `axis` (revolute) or a shift along it (prismatic). */
function motion(link: LinkInfo, value: number): Transform {
  const axis = link.axis as Vec3;
  if (link.kind === "revolute") return { t: [0, 0, 0], q: axisAngle(axis, value) };
  return { t: [axis[0] * value, axis[1] * value, axis[2] * value], q: [1, 0, 0, 0] };
}

// -- parsing the document ----------------------------------------------------------------------

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function field(where: string, key: string, expected: string, value: unknown): ModelError {
  return new ModelError(`${where}: ${key}: ${JSON.stringify(value)} must be ${expected}`);
}

function finite(value: unknown, where: string, key: string): number {
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw field(where, key, "a finite number", value);
  }
  return value;
}

function vector(value: unknown, where: string, key: string, unit = false): Vec3 {
  if (!Array.isArray(value) || value.length !== 3 || !value.every(Number.isFinite)) {
    throw field(where, key, "a list of 3 finite numbers", value);
  }
  const v = value as Vec3;
  if (!unit) return [v[0], v[1], v[2]];
  const n = Math.hypot(v[0], v[1], v[2]);
  if (n < 1e-12) throw field(where, key, "non-zero", value);
  return [v[0] / n, v[1] / n, v[2] / n];
}

function parsePose(value: unknown, where: string, key: string): Transform {
  if (!isObject(value) || !isObject(value.rotation)) {
    throw field(where, key, "an object with translation and rotation", value);
  }
  const rotation = value.rotation;
  const degrees = "angle_degrees" in rotation;
  const angle = finite(
    degrees ? rotation.angle_degrees : rotation.angle_radians,
    where,
    `${key}.rotation.${degrees ? "angle_degrees" : "angle_radians"}`,
  );
  const axis = vector(rotation.axis, where, `${key}.rotation.axis`, true);
  return {
    t: vector(value.translation, where, `${key}.translation`),
    q: axisAngle(axis, degrees ? (angle * Math.PI) / 180 : angle),
  };
}

function parseLimits(value: unknown, where: string): Limits {
  if (value === undefined) return { lower: -Infinity, upper: Infinity };
  if (!isObject(value)) throw field(where, "motor.properties.limits", "an object", value);
  const bound = (key: string, missing: number): number =>
    value[key] === undefined ? missing : finite(value[key], where, `motor.properties.limits.${key}`);
  const limits: Limits = { lower: bound("lower", -Infinity), upper: bound("upper", Infinity) };
  const velocity = bound("velocity", NaN);
  const acceleration = bound("acceleration", NaN);
  return {
    ...limits,
    ...(Number.isNaN(velocity) ? {} : { velocity }),
    ...(Number.isNaN(acceleration) ? {} : { acceleration }),
  };
}

function parseMimic(value: unknown, where: string): Mimic | null {
  if (value === undefined) return null;
  if (!isObject(value) || typeof value.joint !== "string") {
    throw field(where, "motor.properties.mimic", "an object with a joint name", value);
  }
  const number = (key: string, missing: number): number =>
    value[key] === undefined ? missing : finite(value[key], where, `motor.properties.mimic.${key}`);
  return { joint: value.joint, multiplier: number("multiplier", 1), offset: number("offset", 0) };
}

function parseLink(value: unknown, index: number): LinkInfo {
  if (!isObject(value) || typeof value.name !== "string" || value.name === "") {
    throw new ModelError(`links[${index}]: must be an object with a non-empty "name"`);
  }
  const where = `link '${value.name}'`;
  const parent = value.parent === undefined ? null : value.parent;
  if (parent !== null && typeof parent !== "string") {
    throw field(where, "parent", "a link name", parent);
  }
  const motor = value.motor;
  if (!isObject(motor) || !isObject(motor.properties)) {
    throw field(where, "motor", "an object with type and properties", motor);
  }
  const props = motor.properties;
  const kind = motor.type;
  if (kind === "constant") {
    const pose = parsePose(props.pose, where, "motor.properties.pose");
    const none = { axis: null, joint: null, limits: null, mimic: null };
    return { name: value.name, parent, kind, pose, ...none };
  }
  if (kind !== "revolute" && kind !== "prismatic") {
    throw field(where, "motor.type", "one of 'constant', 'revolute', 'prismatic'", kind);
  }
  if (props.joint !== undefined && typeof props.joint !== "string") {
    throw field(where, "motor.properties.joint", "a joint name", props.joint);
  }
  return {
    name: value.name,
    parent,
    kind,
    pose: props.pose === undefined ? IDENTITY : parsePose(props.pose, where, "motor.properties.pose"),
    axis: vector(props.axis, where, "motor.properties.axis", true),
    joint: typeof props.joint === "string" ? props.joint : value.name,
    limits: parseLimits(props.limits, where),
    mimic: parseMimic(props.mimic, where),
  };
}

/** Links ordered parents first (depth-first from the root, children in document order). */
function topological(links: LinkInfo[]): LinkInfo[] {
  const roots = links.filter((link) => link.parent === null);
  if (roots.length !== 1) {
    throw new ModelError(`the model needs exactly one root link (without parent), has ${roots.length}`);
  }
  const names = new Set(links.map((link) => link.name));
  if (names.size !== links.length) throw new ModelError("link names must be unique");
  for (const link of links) {
    if (link.parent !== null && !names.has(link.parent)) {
      throw field(`link '${link.name}'`, "parent", "the name of another link", link.parent);
    }
  }
  const ordered: LinkInfo[] = [];
  const stack = [roots[0] as LinkInfo];
  while (stack.length > 0) {
    const link = stack.pop() as LinkInfo;
    ordered.push(link);
    const children = links.filter((child) => child.parent === link.name);
    stack.push(...children.reverse());
  }
  if (ordered.length !== links.length) throw new ModelError("the links' parents form a cycle");
  return ordered;
}

// -- the model ---------------------------------------------------------------------------------

export class KinematicModel {
  /** Parents before children. */
  readonly links: readonly LinkInfo[];
  /** Every joint (including mimic joints) by joint name. */
  readonly joints: ReadonlyMap<string, LinkInfo>;

  constructor(links: LinkInfo[]) {
    this.links = topological(links);
    this.joints = new Map(
      this.links.filter((link) => link.joint !== null).map((link) => [link.joint as string, link]),
    );
    for (const link of this.links) {
      const source = link.mimic && this.joints.get(link.mimic.joint);
      if (link.mimic && (!source || source.mimic)) {
        throw field(
          `link '${link.name}'`,
          "motor.properties.mimic.joint",
          "an independent joint of this model",
          link.mimic.joint,
        );
      }
    }
  }

  /** Parse a decoded `.kinematic.json` document; throws `ModelError` naming what is wrong. */
  static fromDocument(doc: unknown): KinematicModel {
    if (!isObject(doc) || !Array.isArray(doc.links) || doc.links.length === 0) {
      throw new ModelError('the model must be an object with a non-empty "links" list');
    }
    return new KinematicModel(doc.links.map(parseLink));
  }

  /** The independent joints (the degrees of freedom), in link order. */
  get dofJoints(): string[] {
    return [...this.joints.values()].filter((l) => !l.mimic).map((l) => l.joint as string);
  }

  limits(joint: string): Limits | null {
    return this.joints.get(joint)?.limits ?? null;
  }

  /** The value of a joint link given the independent joints' values (0 when absent). */
  jointValue(link: LinkInfo, values: Readonly<Record<string, number>>): number {
    if (link.mimic) return link.mimic.multiplier * (values[link.mimic.joint] ?? 0) + link.mimic.offset;
    return values[link.joint as string] ?? 0;
  }

  /** Every link's transform in the root frame (root_from_link), by link name. */
  fkAll(values: Readonly<Record<string, number>>): Map<string, Transform> {
    const frames = new Map<string, Transform>();
    for (const link of this.links) {
      const parent = link.parent === null ? IDENTITY : (frames.get(link.parent) as Transform);
      let local = link.pose;
      if (link.kind !== "constant") local = compose(link.pose, motion(link, this.jointValue(link, values)));
      frames.set(link.name, compose(parent, local));
    }
    return frames;
  }
}
