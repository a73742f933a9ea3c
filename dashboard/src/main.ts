// The dashboard: connects the MQTT connection, the arm's model and state, the 3D view and the
// panels. Everything the page shows comes from the broker (docs/dashboard.md); every command
// goes out through `send`, which shows any refusal with its reason.
import "./style.css";
import { Connection } from "./connection";
import {
  type ArmModel,
  type ArmTopic,
  type State,
  type Status,
  parseFault,
  parseModel,
  parseState,
  parseStatus,
} from "./contract";
import type { CollisionDrawn } from "./collision-meshes";
import { byId } from "./dom";
import {
  ESTOP_ENGAGE,
  ESTOP_RESET,
  type Goal,
  LocalRejection,
  describe,
  gripperGoal,
  jointsGoal,
  namedGoal,
  poseGoal,
  stopGoal,
} from "./goals";
import { ArmList } from "./panels/arms";
import { CollisionPanel } from "./panels/collision";
import { Controls } from "./panels/controls";
import { JointsPanel } from "./panels/joints";
import { StatusPanel } from "./panels/status";
import { ArmView } from "./scene";
import { type Settings, loadSettings } from "./settings";

/** Timings for the curious and the browser test (ms since navigation start), and what the
 * latest frame drew of the collision model (null: the arm has none, or no 3D view). */
interface Metrics {
  connectedAt: number | null;
  modelAt: number | null;
  firstArmFrameAt: number | null;
  states: number;
  collision: CollisionDrawn | null;
}

declare global {
  interface Window {
    armdDashboard: Metrics;
  }
}

class Dashboard {
  readonly metrics: Metrics = { connectedAt: null, modelAt: null, firstArmFrameAt: null, states: 0, collision: null };
  private readonly view = Dashboard.createView();
  private readonly arms = new ArmList();
  private readonly status = new StatusPanel();
  private readonly joints = new JointsPanel();
  private readonly controls = new Controls();
  private readonly collision = new CollisionPanel();
  private readonly connection = new Connection({
    status: (text, connected) => this.connectionChanged(text, connected),
    availability: (arm, online) => {
      this.arms.set(arm, online);
      this.reachChanged(arm);
    },
    bridge: (arm, up) => {
      this.arms.setBridge(arm, up);
      this.reachChanged(arm);
    },
    message: (arm, topic, payload) => this.message(arm, topic, payload),
  });
  private arm: string | null = null;
  private wanted: string | null = null;
  private model: ArmModel | null = null;
  private state: State | null = null;

  constructor() {
    this.arms.onSelect = (arm) => this.choose(arm);
    this.joints.onJog = (joint, value) =>
      this.send(() => jointsGoal(this.needModel(), { [joint]: value }, this.controls.speed));
    this.controls.onNamed = (name) => this.send(() => namedGoal(this.needModel(), name, this.controls.speed));
    this.controls.onGripper = (position) => this.send(() => gripperGoal(position, this.controls.speed));
    this.controls.onTargetShown = (visible, mode) => this.view?.showTarget(visible, mode);
    this.controls.onTargetFromTcp = () => this.targetAtTcp();
    this.collision.onShown = (shown) => this.view?.showCollision(shown);
    this.collision.onHighlight = (names) => this.view?.highlight(names);
    this.controls.onTargetSend = () => {
      if (!this.view) return;
      const request = this.controls.request(this.view.targetPose());
      const orientation = request.withOrientation ? request.pose.orientation : null;
      this.send(() => poseGoal(request.pose.position, orientation, request.motion, this.controls.speed));
    };
    if (this.view) {
      this.view.onTargetMoved = (pose) => this.controls.showTarget(pose);
      this.view.onArmDrawn = () => {
        this.metrics.firstArmFrameAt ??= performance.now();
      };
      this.view.onCollisionDrawn = (drawn) => {
        this.metrics.collision = drawn;
      };
    }
    byId("stop").addEventListener("click", () => this.send(() => stopGoal()));
    byId("estop").addEventListener("click", () => this.estop(ESTOP_ENGAGE));
    byId("reset").addEventListener("click", () => this.estop(ESTOP_RESET));
    document.addEventListener("keydown", (event) => {
      if (event.key === "Escape") this.estop(ESTOP_ENGAGE);
    });
    byId<HTMLFormElement>("broker-form").addEventListener("submit", (event) => {
      event.preventDefault();
      this.connect();
    });
  }

  /** The 3D view, or null where the browser has no WebGL: everything else, the e-stop first,
   * must work without it. */
  private static createView(): ArmView | null {
    try {
      return new ArmView(byId("view"));
    } catch (error) {
      const note = document.createElement("p");
      note.className = "hint";
      note.textContent = `No 3D view: ${(error as Error).message}`;
      byId("overlay").append(note);
      return null;
    }
  }

  start(settings: Settings): void {
    byId<HTMLInputElement>("broker-url").value = settings.broker;
    this.wanted = settings.arm;
    this.connect();
  }

  private connect(): void {
    const value = (id: string) => byId<HTMLInputElement>(id).value.trim();
    this.connection.connect({
      url: value("broker-url"),
      username: value("broker-user"),
      password: byId<HTMLInputElement>("broker-password").value,
    });
  }

  private connectionChanged(text: string, connected: boolean): void {
    const pill = byId("connection");
    pill.textContent = text;
    pill.className = connected ? "pill on" : "pill off";
    if (connected) this.metrics.connectedAt ??= performance.now();
  }

  /** An arm's availability or bridge changed: choose it if it is the one wanted (or the first
   * online), and say so when the chosen arm is no longer reachable. */
  private reachChanged(arm: string): void {
    const reach = this.arms.reach(arm);
    if (this.arm === null && (arm === this.wanted || (this.wanted === null && reach === "online"))) {
      this.choose(arm);
    }
    if (arm === this.arm && reach !== "online") this.status.showMode(reach);
  }

  private choose(arm: string): void {
    if (arm === this.arm) return;
    this.arm = arm;
    this.arms.select(arm);
    byId("arm-name").textContent = arm;
    this.setModel(null);
    this.status.reset();
    this.collision.reset();
    this.connection.watch(arm);
  }

  private message(arm: string, topic: ArmTopic, payload: Uint8Array): void {
    if (arm !== this.arm) return;
    try {
      if (topic === "state") this.showState(parseState(payload));
      else if (topic === "model") this.setModel(parseModel(payload));
      else if (topic === "fault") this.status.showFault(parseFault(payload));
      else this.showStatus(parseStatus(payload));
    } catch (error) {
      this.status.refused(`a malformed ${topic} message`, (error as Error).message);
    }
  }

  private setModel(model: ArmModel | null): void {
    this.model = model;
    this.view?.setModel(model?.kinematics ?? null, model?.toolLink, model?.collision ?? null);
    this.joints.build(model);
    this.controls.build(model);
    this.collision.build(model);
    if (model) this.metrics.modelAt ??= performance.now();
    if (model && this.state) this.showState(this.state);
  }

  private showState(state: State): void {
    this.state = state;
    this.metrics.states += 1;
    this.status.showState(state);
    this.collision.state(state);
    const reach = this.arm ? this.arms.reach(this.arm) : "online";
    if (reach !== "online") this.status.showMode(reach); // a down bridge outranks a late state
    if (!this.model) return;
    this.joints.update(state);
    const positions = Object.fromEntries(Object.entries(state.joints).map(([j, s]) => [j, s.position]));
    this.view?.setPoses(this.model.kinematics.fkAll(positions));
  }

  private showStatus(status: Status): void {
    this.status.showStatus(status);
    this.collision.status(status);
  }

  private targetAtTcp(): void {
    if (!this.state) return;
    const pose = { position: this.state.tcp.position, orientation: this.state.tcp.orientation };
    this.view?.setTarget(pose);
    this.controls.showTarget(pose);
    this.controls.revealTarget();
  }

  private needModel(): ArmModel {
    if (!this.model) throw new LocalRejection("no model received for this arm yet");
    return this.model;
  }

  /** Build a goal and publish it; a local refusal or the broker's is shown as a rejection. */
  private send(build: () => Goal): void {
    if (!this.arm) {
      this.status.refused("not sent", "no arm chosen");
      return;
    }
    let goal: Goal;
    try {
      goal = build();
    } catch (error) {
      this.status.refused("not sent", (error as Error).message);
      return;
    }
    this.status.sentGoal(goal.id, describe(goal));
    this.collision.goalSent();
    this.connection.publish(this.arm, "goal", goal).catch((error: Error) => {
      this.status.refused(describe(goal), error.message);
    });
  }

  private estop(command: typeof ESTOP_ENGAGE | typeof ESTOP_RESET): void {
    const what = "engage" in command ? "e-stop" : "reset";
    if (!this.arm) {
      this.status.refused(what, "no arm chosen: nothing was sent");
      return;
    }
    if (what === "reset") this.status.clearRejection();
    this.connection.publish(this.arm, "estop", command).catch((error: Error) => {
      this.status.refused(what, error.message);
    });
  }
}

// Where the broker is (config.json) is asked first: the answer arrives while WebGL starts.
const settings = loadSettings(window.location);
const dashboard = new Dashboard();
window.armdDashboard = dashboard.metrics;
void settings.then((found) => dashboard.start(found));
