// The goals the dashboard sends: the shapes of docs/mqtt.md, and the local checks that keep it
// from ever commanding a joint outside its limits or a speed armd would refuse.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parseModel } from "../src/contract";
import { LocalRejection, gripperGoal, jointsGoal, namedGoal, poseGoal, stopGoal } from "../src/goals";

const ur5 = JSON.parse(readFileSync(new URL("./fk-fixture.json", import.meta.url), "utf-8"))["ur5.urdf"];
const model = parseModel(
  JSON.stringify({
    format: "armd-model/1",
    name: "ur5-sim",
    root: "world",
    tool_link: "tool0",
    joints: ur5.joints,
    model: ur5.model,
    fixed_joints: { wrist_3_joint: 0 },
    poses: { home: { elbow_joint: 1.5 } },
    gripper: null,
    loop_hz: 250,
    telemetry_hz: 25,
  }),
);

describe("the model message", () => {
  it("of another format is refused, naming it", () => {
    const later = JSON.stringify({ format: "armd-model/2", name: "x" });
    expect(() => parseModel(later)).toThrow('model: format: "armd-model/2" is not one this dashboard reads');
  });
});

describe("goals", () => {
  it("are the documented JSON with a new id each", () => {
    const a = jointsGoal(model, { elbow_joint: 1.2 }, 0.5);
    const b = jointsGoal(model, { elbow_joint: 1.2 }, 0.5);
    expect(a).toMatchObject({ type: "joints", positions: { elbow_joint: 1.2 }, speed: 0.5 });
    expect(a.id).not.toEqual(b.id);
    expect(poseGoal([0.4, 0.1, 0.3], null, "linear", 1)).toMatchObject({
      type: "pose",
      position: [0.4, 0.1, 0.3],
      motion: "linear",
    });
    expect(poseGoal([0.4, 0.1, 0.3], null, "joint", 1)).not.toHaveProperty("orientation");
    expect(namedGoal(model, "home", 1)).toMatchObject({ type: "named", name: "home" });
    expect(gripperGoal("close", 1)).toMatchObject({ type: "gripper", position: "close" });
    expect(stopGoal()).toEqual({ id: expect.any(String), type: "stop" });
  });

  it.each([
    [() => jointsGoal(model, { elbow_joint: 3.2 }, 1), "positions.elbow_joint: 3.2 is outside the joint's limits"],
    [() => jointsGoal(model, { elbow_joint: Number.NaN }, 1), "positions.elbow_joint: NaN"],
    [() => jointsGoal(model, { elbo_joint: 1 }, 1), "positions.elbo_joint: unknown joint"],
    [() => jointsGoal(model, { elbow_joint: 1 }, 0), "speed: 0 must be in [0.01, 1]"],
    [() => jointsGoal(model, { wrist_3_joint: 1 }, 1), "positions.wrist_3_joint: a fixed joint"],
    [() => namedGoal(model, "away", 1), "'away' is not a named pose of ur5-sim"],
    [() => poseGoal([0, Number.POSITIVE_INFINITY, 0], null, "joint", 1), "must be 3 finite numbers"],
  ])("are refused before sending when armd would refuse them (%#)", (build, reason) => {
    expect(build).toThrow(LocalRejection);
    expect(build).toThrow(reason);
  });
});
