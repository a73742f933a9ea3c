// The arm's collision model as the `model` message carries it (its `collision` key, docs/mqtt.md):
// the shapes of each link in the link's frame, the environment in the root frame, the pairs never
// checked; where each shape is drawn; and the colliding pair named by a rejection's reason or by
// `state.collision_hold`. No three.js here: the pose math is unit-tested (test/collision.test.ts)
// and drawn by collision-meshes.ts. Quaternions are [w, x, y, z], lengths in m.
import { type Quat, type Transform, type Vec3, compose, rotate } from "./kinematics";

/** A link's shape, in the link's frame. A box's `size` is its full edge lengths. */
export type Shape =
  | { readonly type: "capsule"; readonly a: Vec3; readonly b: Vec3; readonly radius: number }
  | { readonly type: "sphere"; readonly center: Vec3; readonly radius: number }
  | { readonly type: "box"; readonly center: Vec3; readonly size: Vec3; readonly orientation: Quat };

/** An object fixed in the root frame: a plane (solid behind its normal), a keep-out box, or the
 * keep-in box (the workspace every moving link must stay inside). */
export type EnvironmentObject =
  | { readonly type: "plane"; readonly name: string; readonly point: Vec3; readonly normal: Vec3 }
  | {
      readonly type: "box" | "keep_in";
      readonly name: string;
      readonly center: Vec3;
      readonly size: Vec3;
      readonly orientation: Quat;
    };

/** A pair the daemon never checks, and why ("adjacent", "always in contact", "config", ...). */
export interface AllowedPair {
  readonly a: string;
  readonly b: string;
  readonly reason: string;
}

export interface CollisionModel {
  readonly margin: number;
  readonly selfCollision: boolean;
  /** Link name → its shapes (links without geometry are absent). */
  readonly links: ReadonlyMap<string, readonly Shape[]>;
  readonly environment: readonly EnvironmentObject[];
  readonly allowed: readonly AllowedPair[];
  /** Shapes of a type this dashboard does not know, left out of the drawing (what and where). */
  readonly skipped: readonly string[];
}

/** `state.collision_hold`: a stream holds in front of a collision between `pair`, `distance` m apart. */
export interface CollisionHold {
  readonly pair: readonly [string, string];
  readonly distance: number;
}

/** A malformed `collision` key; the message names the link or object, the field and the value. */
export class CollisionError extends Error {
  override name = "CollisionError";
}

// -- parsing -----------------------------------------------------------------------------------

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function wrong(where: string, key: string, expected: string, value: unknown): CollisionError {
  return new CollisionError(`${where}: ${key}: ${JSON.stringify(value) ?? "missing"} must be ${expected}`);
}

function numbers(value: unknown, count: number, where: string, key: string): number[] {
  if (!Array.isArray(value) || value.length !== count || !value.every((v) => Number.isFinite(v))) {
    throw wrong(where, key, `a list of ${count} finite numbers`, value);
  }
  return value as number[];
}

function vec3(data: Json, key: string, where: string): Vec3 {
  const [x, y, z] = numbers(data[key], 3, where, key) as Vec3;
  return [x, y, z];
}

function unit(v: readonly number[], where: string, key: string): number[] {
  const norm = Math.hypot(...v);
  if (norm < 1e-9) throw wrong(where, key, "non-zero", v);
  return v.map((c) => c / norm);
}

function orientation(data: Json, where: string): Quat {
  if (data.orientation === undefined) return [1, 0, 0, 0];
  const [w, x, y, z] = unit(numbers(data.orientation, 4, where, "orientation"), where, "orientation") as Quat;
  return [w, x, y, z];
}

function length(data: Json, key: string, where: string): number {
  const value = data[key];
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0) {
    throw wrong(where, key, "a finite number ≥ 0 (m)", value);
  }
  return value;
}

function size(data: Json, where: string): Vec3 {
  const v = vec3(data, "size", where);
  if (Math.min(...v) <= 0) throw wrong(where, "size", "> 0 on every axis (m)", v);
  return v;
}

/** One shape, or null for a type this dashboard does not know (left out, not refused). */
function parseShape(value: unknown, where: string): Shape | null {
  if (!isObject(value) || typeof value.type !== "string") {
    throw new CollisionError(`${where}: ${JSON.stringify(value)} must be an object with a "type"`);
  }
  if (value.type === "capsule") {
    const radius = length(value, "radius", where);
    return { type: "capsule", a: vec3(value, "a", where), b: vec3(value, "b", where), radius };
  }
  if (value.type === "sphere") {
    return { type: "sphere", center: vec3(value, "center", where), radius: length(value, "radius", where) };
  }
  if (value.type === "box") {
    const center = vec3(value, "center", where);
    return { type: "box", center, size: size(value, where), orientation: orientation(value, where) };
  }
  return null;
}

function parseObject(value: unknown, index: number, names: Set<string>): EnvironmentObject | null {
  let where = `collision: environment[${index}]`;
  if (!isObject(value) || typeof value.type !== "string") {
    throw new CollisionError(`${where}: ${JSON.stringify(value)} must be an object with a "type"`);
  }
  const name = value.name ?? (value.type === "keep_in" ? "workspace" : undefined);
  if (typeof name !== "string" || name === "") throw wrong(where, "name", "a non-empty string", name);
  if (names.has(name)) throw wrong(where, "name", "unique among the objects and the links with shapes", name);
  names.add(name);
  where = `collision: environment '${name}'`;
  if (value.type === "plane") {
    const [x, y, z] = unit(vec3(value, "normal", where), where, "normal") as Vec3;
    return { type: "plane", name, point: vec3(value, "point", where), normal: [x, y, z] };
  }
  if (value.type === "box" || value.type === "keep_in") {
    const center = vec3(value, "center", where);
    return { type: value.type, name, center, size: size(value, where), orientation: orientation(value, where) };
  }
  return null;
}

function parseAllowed(value: unknown): AllowedPair[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) throw wrong("collision", "allowed", "a list of [a, b, reason]", value);
  return value.map((pair, i) => {
    const ok =
      Array.isArray(pair) &&
      (pair.length === 2 || pair.length === 3) &&
      pair.every((name) => typeof name === "string" && name !== "");
    if (!ok) throw wrong("collision", `allowed[${i}]`, "[name, name, reason]", pair);
    const [a, b, reason] = pair as string[];
    return { a: a as string, b: b as string, reason: reason ?? "" };
  });
}

/**
 * The `collision` key of a `model` message. `links`: the model's link names (a shape on another
 * link is an error). Keys this dashboard does not know are ignored, and so are shapes and
 * objects of an unknown type (listed in `skipped`); anything else malformed throws
 * `CollisionError` naming the link or object, the field and the value.
 */
export function parseCollision(value: unknown, links: ReadonlySet<string>): CollisionModel {
  if (!isObject(value)) throw new CollisionError(`collision: ${JSON.stringify(value)} must be a JSON object`);
  const margin = length(value, "margin", "collision");
  const selfCollision = value.self_collision ?? true;
  if (typeof selfCollision !== "boolean") throw wrong("collision", "self_collision", "true or false", selfCollision);
  const linksIn = value.links ?? {};
  if (!isObject(linksIn)) throw wrong("collision", "links", "an object {link: [shapes]}", linksIn);
  const skipped: string[] = [];
  const shapes = new Map<string, Shape[]>();
  for (const [link, list] of Object.entries(linksIn)) {
    const where = `collision: link '${link}'`;
    if (!links.has(link)) throw new CollisionError(`${where}: not a link of the model`);
    if (!Array.isArray(list)) throw wrong(where, "shapes", "a list", list);
    const parsed: Shape[] = [];
    list.forEach((item, i) => {
      const shape = parseShape(item, `${where} shape ${i + 1}`);
      if (shape) parsed.push(shape);
      else skipped.push(`link '${link}' shape ${i + 1}: type ${JSON.stringify((item as Json).type)}`);
    });
    if (parsed.length > 0) shapes.set(link, parsed);
  }
  const envIn = value.environment ?? [];
  if (!Array.isArray(envIn)) throw wrong("collision", "environment", "a list of objects", envIn);
  const names = new Set(Object.keys(linksIn)); // an object is named apart from the links with shapes
  const environment: EnvironmentObject[] = [];
  envIn.forEach((item, i) => {
    const object = parseObject(item, i, names);
    if (object) environment.push(object);
    else skipped.push(`environment[${i}]: type ${JSON.stringify((item as Json).type)}`);
  });
  return { margin, selfCollision, links: shapes, environment, allowed: parseAllowed(value.allowed), skipped };
}

/** `state.collision_hold`, or null when absent or malformed (a state is never refused for it). */
export function parseHold(value: unknown): CollisionHold | null {
  if (!isObject(value) || !Array.isArray(value.pair) || typeof value.distance !== "number") return null;
  const [a, b] = value.pair as unknown[];
  if (value.pair.length !== 2 || typeof a !== "string" || typeof b !== "string") return null;
  return { pair: [a, b], distance: value.distance };
}

// -- where the shapes are ----------------------------------------------------------------------

export const Y: Vec3 = [0, 1, 0];
export const Z: Vec3 = [0, 0, 1];

export function transformPoint(frame: Transform, p: Vec3): Vec3 {
  const r = rotate(frame.q, p);
  return [frame.t[0] + r[0], frame.t[1] + r[1], frame.t[2] + r[2]];
}

/** The shortest rotation taking the unit vector `from` onto the unit vector `to`. */
export function rotationBetween(from: Vec3, to: Vec3): Quat {
  const dot = from[0] * to[0] + from[1] * to[1] + from[2] * to[2];
  if (dot < -1 + 1e-12) {
    // Opposite: half a turn about any axis perpendicular to `from`.
    const other: Vec3 = Math.abs(from[0]) < 0.9 ? [1, 0, 0] : [0, 1, 0];
    const axis = cross(from, other);
    const n = Math.hypot(...axis);
    return [0, axis[0] / n, axis[1] / n, axis[2] / n];
  }
  const [x, y, z] = cross(from, to);
  const w = 1 + dot;
  const n = Math.hypot(w, x, y, z);
  return [w / n, x / n, y / n, z / n];
}

function cross(a: Vec3, b: Vec3): Vec3 {
  return [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]];
}

/** A capsule's cylinder length |b − a| (m). */
export function capsuleLength(shape: Extract<Shape, { type: "capsule" }>): number {
  return Math.hypot(shape.b[0] - shape.a[0], shape.b[1] - shape.a[1], shape.b[2] - shape.a[2]);
}

/**
 * link_from_shape: where a shape's mesh sits in its link's frame. The meshes are built around
 * their own origin: a capsule's axis along its y (three.js's capsules), from −length/2 to
 * +length/2, so its frame is centred between a and b with y along b − a; a sphere at its centre;
 * a box at its centre, turned by its orientation.
 */
export function shapeFrame(shape: Shape): Transform {
  if (shape.type === "sphere") return { t: shape.center, q: [1, 0, 0, 0] };
  if (shape.type === "box") return { t: shape.center, q: shape.orientation };
  const { a, b } = shape;
  const middle: Vec3 = [(a[0] + b[0]) / 2, (a[1] + b[1]) / 2, (a[2] + b[2]) / 2];
  const length = capsuleLength(shape);
  if (length < 1e-9) return { t: middle, q: [1, 0, 0, 0] };
  const axis: Vec3 = [(b[0] - a[0]) / length, (b[1] - a[1]) / length, (b[2] - a[2]) / length];
  return { t: middle, q: rotationBetween(Y, axis) };
}

/** root_from_shape: the link's pose (root_from_link, from the forward kinematics) × shapeFrame. */
export function placeShape(rootFromLink: Transform, shape: Shape): Transform {
  return compose(rootFromLink, shapeFrame(shape));
}

/** root_from_object for a box or the keep-in box. */
export function objectFrame(object: Extract<EnvironmentObject, { center: Vec3 }>): Transform {
  return { t: object.center, q: object.orientation };
}

/**
 * root_from_square: the finite square a plane is drawn as, centred on the foot of `around` (the
 * root's origin: the arm's base) on the plane, its z along the plane's normal.
 */
export function planeSquare(
  plane: Extract<EnvironmentObject, { type: "plane" }>,
  around: Vec3 = [0, 0, 0],
): Transform {
  const [n, p] = [plane.normal, plane.point];
  const offset = (around[0] - p[0]) * n[0] + (around[1] - p[1]) * n[1] + (around[2] - p[2]) * n[2];
  const foot: Vec3 = [around[0] - offset * n[0], around[1] - offset * n[1], around[2] - offset * n[2]];
  return { t: foot, q: rotationBetween(Z, n) };
}

// -- the colliding pair ------------------------------------------------------------------------

const REASON_PREFIX = "collision: ";

/**
 * The two bodies a collision reason names, or null for another reason: the first `<a> with <b>`
 * after `collision: ` (`collision: wrist_3_link with table at 43 % of the path (...)`, or
 * `collision: the arm is in collision (wrist_3_link with table, ...)`). Known names (links,
 * objects) are looked for first, longest first, so that a name with spaces or one that prefixes
 * another is found whole; failing that, any two words around ` with ` are taken.
 */
export function collisionPair(reason: string | undefined, known: Iterable<string> = []): [string, string] | null {
  if (!reason?.startsWith(REASON_PREFIX)) return null;
  const rest = reason.slice(REASON_PREFIX.length);
  const names = [...known].sort((x, y) => y.length - x.length);
  const word = (text: string) => /^[^\s,;:()]+/.exec(text)?.[0];
  const byName = (text: string) =>
    names.find((name) => text.startsWith(name) && /^($|[\s,;:()])/.test(text.slice(name.length)));
  for (const lookup of [byName, (text: string) => byName(text) ?? word(text)]) {
    for (let i = 0; i < rest.length; i++) {
      if (i > 0 && !/[\s(]/.test(rest[i - 1] as string)) continue; // only where a word starts
      const first = lookup(rest.slice(i));
      const after = first === undefined ? "" : rest.slice(i + first.length);
      if (first === undefined || !after.startsWith(" with ")) continue;
      const second = lookup(after.slice(" with ".length));
      if (second !== undefined) return [first, second];
    }
  }
  return null;
}

/** How long the pair of a collision rejection stays highlighted, unless a new goal comes first. */
export const HIGHLIGHT_MS = 6000;

/**
 * Which bodies are highlighted: the pair of the latest collision rejection, for `HIGHLIGHT_MS`
 * or until the next goal, and the pair `state.collision_hold` names, while it does. Times are
 * ms on any monotonic clock (the page's `performance.now()`).
 */
export class CollisionHighlight {
  private rejected: { pair: [string, string]; until: number } | null = null;
  private held: readonly [string, string] | null = null;

  constructor(private readonly durationMs = HIGHLIGHT_MS) {}

  /** A goal was rejected (or aborted) naming this pair at `now`. */
  reject(pair: [string, string], now: number): void {
    this.rejected = { pair, until: now + this.durationMs };
  }

  /** A new goal: the previous rejection's pair is no longer the news. */
  nextGoal(): void {
    this.rejected = null;
  }

  /** The pair of `state.collision_hold` (null: the state carries none). */
  hold(pair: readonly [string, string] | null): void {
    this.held = pair;
  }

  /** The highlighted bodies at `now`, sorted. */
  names(now: number): string[] {
    if (this.rejected && now >= this.rejected.until) this.rejected = null;
    return [...new Set([...(this.rejected?.pair ?? []), ...(this.held ?? [])])].sort();
  }

  /** When the rejection's highlight ends (to redraw then), or null. */
  get expiresAt(): number | null {
    return this.rejected?.until ?? null;
  }
}
