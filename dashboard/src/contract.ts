// armd's MQTT contract as the dashboard reads it (docs/mqtt.md): topic names, the shapes of the
// messages it receives, and checks that turn a malformed message into an error naming the field
// instead of a broken view.
import { type CollisionHold, type CollisionModel, parseCollision, parseHold } from "./collision";
import { KinematicModel } from "./kinematics";

export const PREFIX = "armd";
export const AVAILABILITY_FILTER = `${PREFIX}/+/availability`;
/** An arm behind a bridge (docs/fleet.md): `1` while the bridge to its broker is up, `0` when
 * it is down — its retained `availability` is then stale. */
export const BRIDGE_FILTER = `${PREFIX}/+/bridge`;

/** The topics of one arm the dashboard follows, relative to `armd/<name>/`. */
export const ARM_TOPICS = ["model", "state", "goal/status", "fault"] as const;
export type ArmTopic = (typeof ARM_TOPICS)[number];

export function armTopic(arm: string, topic: string): string {
  return `${PREFIX}/${arm}/${topic}`;
}

/** `armd/<name>/<rest>` → [name, rest], or null for another topic. */
export function splitTopic(topic: string): [string, string] | null {
  const match = /^armd\/([^/]+)\/(.+)$/.exec(topic);
  return match ? [match[1] as string, match[2] as string] : null;
}

export type Mode = "inactive" | "holding" | "moving" | "stopping" | "fault" | "estop";

export interface JointState {
  position: number;
  velocity: number;
  effort?: number;
  /** The commanded position, while the loop commands the joint. */
  command?: number;
}

export interface State {
  t: number;
  mode: Mode;
  missed_ticks: number;
  joints: Record<string, JointState>;
  tcp: { link: string; position: [number, number, number]; orientation: [number, number, number, number] };
  /** A stream holds in front of a collision (absent otherwise, or when malformed). */
  collision_hold?: CollisionHold;
}

export type StatusName = "accepted" | "rejected" | "succeeded" | "aborted" | "preempted";
export const FINAL_STATUSES: ReadonlySet<StatusName> = new Set(["rejected", "succeeded", "aborted", "preempted"]);

export interface Status {
  id: string | null;
  status: StatusName;
  reason?: string;
}

export interface Fault {
  code: string;
  message: string;
  joint?: string;
}

export interface Gripper {
  joint: string;
  open: number;
  closed: number;
}

/** The retained `model` message: the arm's kinematic tree and what the dashboard offers. */
export interface ArmModel {
  name: string;
  root: string;
  toolLink: string;
  joints: string[];
  /** Joints the config holds still ({name: position}): shown, never commanded. */
  fixedJoints: Record<string, number>;
  kinematics: KinematicModel;
  poses: Record<string, Record<string, number>>;
  gripper: Gripper | null;
  loopHz: number;
  telemetryHz: number;
  /** The collision model (its `collision` key), or null without one or when it is malformed. */
  collision: CollisionModel | null;
  /** Why the collision model is not drawn, or not all of it (null: nothing to say). */
  collisionNotice: string | null;
}

/** A message that does not follow the contract; names the topic and the field. */
export class ContractError extends Error {
  override name = "ContractError";
}

type Json = Record<string, unknown>;

function object(value: unknown, what: string): Json {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new ContractError(`${what}: ${JSON.stringify(value)} must be a JSON object`);
  }
  return value as Json;
}

function decode(payload: Uint8Array | string, what: string): Json {
  const text = typeof payload === "string" ? payload : new TextDecoder().decode(payload);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new ContractError(`${what}: not JSON (${(error as Error).message})`);
  }
  return object(value, what);
}

function number(data: Json, key: string, what: string): number {
  const value = data[key];
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw new ContractError(`${what}: ${key}: ${JSON.stringify(value)} must be a finite number`);
  }
  return value;
}

function string(data: Json, key: string, what: string): string {
  const value = data[key];
  if (typeof value !== "string") {
    throw new ContractError(`${what}: ${key}: ${JSON.stringify(value)} must be a string`);
  }
  return value;
}

export function parseState(payload: Uint8Array | string): State {
  const data = decode(payload, "state");
  object(data.joints, "state: joints");
  object(data.tcp, "state: tcp");
  string(data, "mode", "state");
  number(data, "missed_ticks", "state");
  // A malformed hold is dropped rather than the state refused: the state is what the page shows.
  const hold = parseHold(data.collision_hold);
  if (hold) data.collision_hold = hold;
  else delete data.collision_hold;
  return data as unknown as State;
}

export function parseStatus(payload: Uint8Array | string): Status {
  const data = decode(payload, "goal/status");
  string(data, "status", "goal/status");
  return data as unknown as Status;
}

/** The retained fault, or null when the payload is empty (cleared). */
export function parseFault(payload: Uint8Array | string): Fault | null {
  if (payload.length === 0) return null;
  const data = decode(payload, "fault");
  string(data, "code", "fault");
  string(data, "message", "fault");
  return data as unknown as Fault;
}

/** The `format` of the model messages this dashboard reads (fields may be added within it). */
export const MODEL_FORMAT = "armd-model/1";

export function parseModel(payload: Uint8Array | string): ArmModel {
  const data = decode(payload, "model");
  if (data.format !== undefined && data.format !== MODEL_FORMAT) {
    throw new ContractError(
      `model: format: ${JSON.stringify(data.format)} is not one this dashboard reads (${MODEL_FORMAT})`,
    );
  }
  const joints = data.joints;
  if (!Array.isArray(joints) || !joints.every((j) => typeof j === "string")) {
    throw new ContractError(`model: joints: ${JSON.stringify(joints)} must be a list of joint names`);
  }
  const poses = object(data.poses ?? {}, "model: poses") as ArmModel["poses"];
  let gripper: Gripper | null = null;
  if (data.gripper !== null && data.gripper !== undefined) {
    const g = object(data.gripper, "model: gripper");
    gripper = {
      joint: string(g, "joint", "model: gripper"),
      open: number(g, "open", "model: gripper"),
      closed: number(g, "closed", "model: gripper"),
    };
  }
  let kinematics: KinematicModel;
  try {
    kinematics = KinematicModel.fromDocument(data.model);
  } catch (error) {
    throw new ContractError(`model: model: ${(error as Error).message}`);
  }
  return {
    ...collisionOf(data.collision, kinematics),
    name: string(data, "name", "model"),
    root: string(data, "root", "model"),
    toolLink: string(data, "tool_link", "model"),
    joints: joints as string[],
    fixedJoints: object(data.fixed_joints ?? {}, "model: fixed_joints") as Record<string, number>,
    kinematics,
    poses,
    gripper,
    loopHz: number(data, "loop_hz", "model"),
    telemetryHz: number(data, "telemetry_hz", "model"),
  };
}

/** The model's collision key, parsed; a malformed one is left out with a notice saying why (the
 * arm is still drawn and driven: the daemon checks collisions, the page only shows them). */
function collisionOf(value: unknown, kinematics: KinematicModel): Pick<ArmModel, "collision" | "collisionNotice"> {
  if (value === undefined || value === null) return { collision: null, collisionNotice: null };
  try {
    const collision = parseCollision(value, new Set(kinematics.links.map((link) => link.name)));
    const skipped = collision.skipped;
    const notice = skipped.length > 0 ? `not drawn (a type this page does not know): ${skipped.join("; ")}` : null;
    return { collision, collisionNotice: notice };
  } catch (error) {
    const notice = `the collision model is malformed, not drawn: ${(error as Error).message}`;
    return { collision: null, collisionNotice: notice };
  }
}
