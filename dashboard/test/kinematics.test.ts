// The dashboard's forward kinematics against armd's: test/fk-fixture.json holds, for each robot
// model of config/robots/, armd's pose of every link at a few configurations (written by
// tests/dashboard/fk_fixture.py; tests/dashboard/test_fk.py checks it is current and runs this).
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { KinematicModel, ModelError, type Transform } from "../src/kinematics";

interface Case {
  q: Record<string, number>;
  links: Record<string, { t: number[]; q: number[] }>;
}
interface Fixture {
  model: unknown;
  joints: string[];
  cases: Case[];
}

const path = process.env.ARMD_FK_FIXTURE ?? new URL("./fk-fixture.json", import.meta.url);
const fixture = JSON.parse(readFileSync(path, "utf-8")) as Record<string, Fixture>;

function distance(a: readonly number[], b: readonly number[]): number {
  return Math.hypot(...a.map((v, i) => v - (b[i] ?? NaN)));
}

/** The angle between two rotations (q and -q are the same rotation). */
function angle(a: readonly number[], b: readonly number[]): number {
  const dot = Math.abs(a.reduce((sum, v, i) => sum + v * (b[i] ?? NaN), 0));
  return 2 * Math.acos(Math.min(1, dot));
}

describe.each(Object.entries(fixture))("forward kinematics of %s", (_name, data) => {
  const model = KinematicModel.fromDocument(data.model);

  it("has armd's degrees of freedom, in q order", () => {
    expect(model.dofJoints).toEqual(data.joints);
  });

  it.each(data.cases.map((c, i) => [i, c] as const))("matches armd at configuration %i", (_i, c) => {
    const frames = model.fkAll(c.q);
    expect([...frames.keys()].sort()).toEqual(Object.keys(c.links).sort());
    for (const [link, expected] of Object.entries(c.links)) {
      const actual = frames.get(link) as Transform;
      expect(distance(actual.t, expected.t), `${link} position`).toBeLessThan(1e-9);
      expect(angle(actual.q, expected.q), `${link} rotation`).toBeLessThan(1e-6);
    }
  });
});

describe("a malformed model", () => {
  const link = (motor: unknown, parent?: string) => ({ name: "a", ...(parent ? { parent } : {}), motor });
  const pose = { translation: [0, 0, 0], rotation: { axis: [0, 0, 1], angle_radians: 0 } };

  it.each([
    [{ links: [] }, 'a non-empty "links" list'],
    [{ links: [link({ type: "hinge", properties: {} })] }, "motor.type"],
    [{ links: [link({ type: "revolute", properties: { axis: [0, 0, 0] } })] }, "must be non-zero"],
    [{ links: [link({ type: "constant", properties: { pose: { ...pose, translation: [0, 0] } } })] }, "translation"],
    [{ links: [link({ type: "constant", properties: { pose } }, "nowhere")] }, "parent"],
  ])("is refused with a message naming the problem (%#)", (doc, words) => {
    expect(() => KinematicModel.fromDocument(doc)).toThrow(ModelError);
    expect(() => KinematicModel.fromDocument(doc)).toThrow(words);
  });
});
