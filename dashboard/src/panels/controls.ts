// The commands besides jogging: the speed of every goal, the Cartesian target (shown in the 3D
// view, dragged there, sent as a pose goal with joint or linear motion), the named poses and the
// gripper. The e-stop, reset and stop buttons are wired in main.ts: they are always visible.
import type { ArmModel } from "../contract";
import { byId, fixed, h } from "../dom";
import type { TargetPose } from "../scene";

export interface TargetRequest {
  pose: TargetPose;
  withOrientation: boolean;
  motion: "joint" | "linear";
}

export class Controls {
  onTargetShown: (visible: boolean, mode: "translate" | "rotate") => void = () => {};
  onTargetFromTcp: () => void = () => {};
  onTargetSend: () => void = () => {};
  onNamed: (name: string) => void = () => {};
  onGripper: (position: "open" | "close") => void = () => {};
  private readonly speedInput = byId<HTMLInputElement>("speed");
  private readonly show = byId<HTMLInputElement>("target-show");
  private readonly mode = byId<HTMLSelectElement>("target-mode");
  private readonly motion = byId<HTMLSelectElement>("target-motion");
  private readonly orientation = byId<HTMLInputElement>("target-orientation");
  private readonly poseText = byId("target-pose");

  constructor() {
    const speedValue = byId("speed-value");
    this.speedInput.addEventListener("input", () => {
      speedValue.textContent = this.speed.toFixed(2);
    });
    const shown = () => this.onTargetShown(this.show.checked, this.mode.value === "rotate" ? "rotate" : "translate");
    this.show.addEventListener("change", shown);
    this.mode.addEventListener("change", shown);
    byId("target-from-tcp").addEventListener("click", () => this.onTargetFromTcp());
    byId("target-send").addEventListener("click", () => this.onTargetSend());
    byId("gripper-open").addEventListener("click", () => this.onGripper("open"));
    byId("gripper-close").addEventListener("click", () => this.onGripper("close"));
  }

  get speed(): number {
    return Number(this.speedInput.value);
  }

  /** Show the target (and its gizmo) in the 3D view, e.g. once it was put at the TCP. */
  revealTarget(): void {
    if (!this.show.checked) {
      this.show.checked = true;
      this.show.dispatchEvent(new Event("change"));
    }
  }

  request(pose: TargetPose): TargetRequest {
    return {
      pose,
      withOrientation: this.orientation.checked,
      motion: this.motion.value === "linear" ? "linear" : "joint",
    };
  }

  showTarget(pose: TargetPose): void {
    this.poseText.textContent =
      `[${pose.position.map((v) => fixed(v)).join(", ")}] m\n` +
      `q [${pose.orientation.map((v) => fixed(v)).join(", ")}]`;
  }

  build(model: ArmModel | null): void {
    const names = Object.keys(model?.poses ?? {});
    byId("named-panel").hidden = names.length === 0;
    byId("named").replaceChildren(
      ...names.map((name) => {
        const button = h("button", { "data-pose": name }, name);
        button.addEventListener("click", () => this.onNamed(name));
        return button;
      }),
    );
    byId("gripper-panel").hidden = !model?.gripper;
  }
}
