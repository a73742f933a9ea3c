// One row per degree of freedom: a slider between the joint's limits that follows the measured
// position and, when moved and released, sends a `joints` goal for that joint; the value; the
// limits, highlighted when the joint is within 5 % of one of them.
import type { ArmModel, State } from "../contract";
import { byId, fixed, h } from "../dom";
import type { Limits } from "../kinematics";

const NEAR_LIMIT = 0.05; // of the joint's range
const UNBOUNDED = { revolute: 2 * Math.PI, prismatic: 1 } as const; // slider span without limits

interface Row {
  slider: HTMLInputElement;
  value: HTMLElement;
  limits: Limits;
  editing: boolean;
}

export class JointsPanel {
  /** A slider was released at `value` (within the joint's limits). */
  onJog: (joint: string, value: number) => void = () => {};
  private readonly table = byId<HTMLTableElement>("joints");
  private rows = new Map<string, Row>();

  build(model: ArmModel | null): void {
    this.rows = new Map();
    if (!model) {
      this.table.replaceChildren();
      return;
    }
    const rows = model.joints.map((joint) => {
      const link = model.kinematics.joints.get(joint);
      const kind = link?.kind === "prismatic" ? "prismatic" : "revolute";
      const limits = link?.limits ?? { lower: -Infinity, upper: Infinity };
      const lower = Number.isFinite(limits.lower) ? limits.lower : -UNBOUNDED[kind];
      const upper = Number.isFinite(limits.upper) ? limits.upper : UNBOUNDED[kind];
      const slider = h("input", {
        type: "range",
        min: lower,
        max: upper,
        step: (upper - lower) / 1000,
        value: Math.min(upper, Math.max(lower, 0)),
        "data-joint": joint,
        "aria-label": joint,
        disabled: joint in model.fixedJoints, // held by the config: shown, never commanded
      });
      const value = h("td", { class: "mono value" }, "–");
      const row: Row = { slider, value, limits: { ...limits, lower, upper }, editing: false };
      slider.addEventListener("input", () => {
        row.editing = true;
        value.textContent = fixed(Number(slider.value));
      });
      slider.addEventListener("change", () => {
        row.editing = false;
        this.onJog(joint, Number(slider.value));
      });
      this.rows.set(joint, row);
      const unit = kind === "prismatic" ? "m" : "rad";
      return h(
        "tr",
        {},
        h("th", { title: joint }, joint),
        h("td", {}, slider),
        value,
        h("td", { class: "mono limits" }, `[${lower.toFixed(2)}, ${upper.toFixed(2)}] ${unit}`),
      );
    });
    this.table.replaceChildren(...rows);
  }

  update(state: State): void {
    for (const [joint, row] of this.rows) {
      const position = state.joints[joint]?.position;
      if (position === undefined || row.editing) continue;
      row.slider.value = String(position);
      row.value.textContent = fixed(position);
      const margin = NEAR_LIMIT * (row.limits.upper - row.limits.lower);
      const near = position < row.limits.lower + margin || position > row.limits.upper - margin;
      row.value.classList.toggle("warn", near);
    }
  }
}
