// The goals and e-stop commands the dashboard sends (docs/mqtt.md), built in one place with
// the checks armd would make anyway: a goal the dashboard can already tell is wrong (a joint
// outside its limits, a speed outside [0.01, 1]) is refused here with the same kind of reason,
// so the dashboard never commands a joint outside its limits.
import type { ArmModel } from "./contract";

export type Goal =
  | { id: string; type: "joints"; positions: Record<string, number>; speed: number }
  | {
      id: string;
      type: "pose";
      position: [number, number, number];
      orientation?: [number, number, number, number];
      motion: "joint" | "linear";
      speed: number;
    }
  | { id: string; type: "named"; name: string; speed: number }
  | { id: string; type: "gripper"; position: "open" | "close"; speed: number }
  | { id: string; type: "stop" };

export const ESTOP_ENGAGE = { engage: true } as const;
export const ESTOP_RESET = { reset: true } as const;
export const SPEED_RANGE = [0.01, 1] as const;

/** A goal refused before it was sent, with the reason (shown like armd's rejections). */
export class LocalRejection extends Error {
  override name = "LocalRejection";
}

const session = Math.random().toString(36).slice(2, 6);
let counter = 0;

/** A new goal id per goal (armd rejects an id still in progress): `dash-<session>-<n>-<kind>`. */
export function goalId(kind: string): string {
  counter += 1;
  return `dash-${session}-${counter}-${kind}`;
}

function checkSpeed(speed: number): number {
  if (!Number.isFinite(speed) || speed < SPEED_RANGE[0] || speed > SPEED_RANGE[1]) {
    throw new LocalRejection(`speed: ${speed} must be in [${SPEED_RANGE[0]}, ${SPEED_RANGE[1]}]`);
  }
  return speed;
}

export function jointsGoal(model: ArmModel, positions: Record<string, number>, speed: number): Goal {
  for (const [joint, value] of Object.entries(positions)) {
    const limits = model.kinematics.limits(joint);
    if (limits === null || !model.joints.includes(joint)) {
      throw new LocalRejection(`positions.${joint}: unknown joint; joints: ${model.joints.join(", ")}`);
    }
    if (joint in model.fixedJoints) {
      throw new LocalRejection(`positions.${joint}: a fixed joint (held by the config), never commanded`);
    }
    if (!Number.isFinite(value) || value < limits.lower || value > limits.upper) {
      throw new LocalRejection(
        `positions.${joint}: ${value} is outside the joint's limits [${limits.lower}, ${limits.upper}]`,
      );
    }
  }
  return { id: goalId("joints"), type: "joints", positions, speed: checkSpeed(speed) };
}

export function poseGoal(
  position: [number, number, number],
  orientation: [number, number, number, number] | null,
  motion: "joint" | "linear",
  speed: number,
): Goal {
  if (!position.every(Number.isFinite)) throw new LocalRejection(`position: ${position} must be 3 finite numbers`);
  return {
    id: goalId(motion === "linear" ? "linear" : "pose"),
    type: "pose",
    position,
    ...(orientation ? { orientation } : {}),
    motion,
    speed: checkSpeed(speed),
  };
}

export function namedGoal(model: ArmModel, name: string, speed: number): Goal {
  if (!(name in model.poses)) throw new LocalRejection(`name: '${name}' is not a named pose of ${model.name}`);
  return { id: goalId(`named-${name}`), type: "named", name, speed: checkSpeed(speed) };
}

export function gripperGoal(position: "open" | "close", speed: number): Goal {
  return { id: goalId(`gripper-${position}`), type: "gripper", position, speed: checkSpeed(speed) };
}

export function stopGoal(): Goal {
  return { id: goalId("stop"), type: "stop" };
}

/** A short description of a goal for the status log ("joints elbow_joint=1.20"). */
export function describe(goal: Goal): string {
  switch (goal.type) {
    case "joints":
      return `joints ${Object.entries(goal.positions).map(([j, v]) => `${j}=${v.toFixed(2)}`).join(" ")}`;
    case "pose":
      return `pose (${goal.motion}) [${goal.position.map((v) => v.toFixed(3)).join(", ")}]`;
    case "named":
      return `named ${goal.name}`;
    case "gripper":
      return `gripper ${goal.position}`;
    case "stop":
      return "stop";
  }
}
