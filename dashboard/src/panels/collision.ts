// The collision model's panel: the toggle that shows its geometry in the 3D view, what it holds
// (shapes, environment, margin, the pairs never checked), a notice when it cannot be drawn; and
// the colliding pair — of the latest goal rejected (or aborted) for a collision, and of
// `state.collision_hold` — highlighted in the view, with the reason in words.
import { CollisionHighlight, collisionPair } from "../collision";
import type { ArmModel, State, Status } from "../contract";
import { byId, h } from "../dom";

export class CollisionPanel {
  onShown: (shown: boolean) => void = () => {};
  /** The bodies to draw highlighted changed. */
  onHighlight: (names: string[]) => void = () => {};
  private readonly panel = byId("collision-panel");
  private readonly show = byId<HTMLInputElement>("collision-show");
  private readonly summary = byId("collision-summary");
  private readonly notice = byId("collision-notice");
  private readonly allowed = byId("collision-allowed");
  private readonly latest = byId("collision-latest");
  private readonly holdBanner = byId("collision-hold");
  private readonly highlight = new CollisionHighlight();
  private known: string[] = [];
  private names: string[] = [];
  private holdText = "";
  private timer: ReturnType<typeof setTimeout> | null = null;
  private timerAt: number | null = null;

  constructor() {
    this.show.addEventListener("change", () => this.onShown(this.show.checked));
  }

  build(model: ArmModel | null): void {
    const collision = model?.collision ?? null;
    this.panel.hidden = collision === null && !model?.collisionNotice;
    this.show.disabled = collision === null;
    this.notice.hidden = !model?.collisionNotice;
    this.notice.textContent = model?.collisionNotice ?? "";
    this.known = [
      ...(model?.kinematics.links.map((link) => link.name) ?? []),
      ...(collision?.environment.map((object) => object.name) ?? []),
    ];
    if (!collision) {
      this.summary.textContent = "";
      this.allowed.replaceChildren();
      return;
    }
    const shapes = [...collision.links.values()].reduce((sum, list) => sum + list.length, 0);
    const objects = collision.environment.map((object) => `${object.name} (${object.type.replace("_", "-")})`);
    this.summary.textContent =
      `${shapes} shapes on ${collision.links.size} links; ` +
      `${objects.length > 0 ? objects.join(", ") : "no environment"}; ` +
      `margin ${Number((collision.margin * 1000).toFixed(1))} mm; self-collision ${collision.selfCollision ? "on" : "off"}`;
    const pairs = collision.allowed.map((p) => h("li", {}, `${p.a} – ${p.b}${p.reason ? ` (${p.reason})` : ""}`));
    this.allowed.replaceChildren(
      h("summary", {}, `${pairs.length} pair${pairs.length === 1 ? "" : "s"} never checked`),
      h("ul", {}, ...pairs),
    );
  }

  /** Another arm was chosen: nothing of the previous one's collisions stays. */
  reset(): void {
    this.highlight.nextGoal();
    this.highlight.hold(null);
    this.latest.hidden = true;
    this.holdText = "";
    this.holdBanner.hidden = true;
    this.refresh();
  }

  /** A goal status: a collision's rejection (or abort) highlights its pair; an accepted goal
   * ends that highlight. */
  status(status: Status): void {
    if (status.status === "accepted") {
      this.highlight.nextGoal();
    } else if (status.status === "rejected" || status.status === "aborted") {
      const pair = collisionPair(status.reason, this.known);
      if (!pair) return;
      this.highlight.reject(pair, performance.now());
      this.latest.hidden = false;
      this.latest.textContent = `${status.status}: ${status.reason}`;
      this.latest.dataset.pair = pair.join(" ");
    }
    this.refresh();
  }

  /** The page sent a goal: the previous rejection's pair is no longer highlighted. */
  goalSent(): void {
    this.highlight.nextGoal();
    this.refresh();
  }

  state(state: State): void {
    const hold = state.collision_hold ?? null;
    this.highlight.hold(hold?.pair ?? null);
    const text = hold
      ? `held before a collision: ${hold.pair[0]} with ${hold.pair[1]}, ${hold.distance.toFixed(3)} m`
      : "";
    if (text !== this.holdText) {
      this.holdText = text;
      this.holdBanner.hidden = !hold;
      this.holdBanner.textContent = text;
    }
    this.refresh();
  }

  private refresh(): void {
    const now = performance.now();
    const names = this.highlight.names(now);
    if (names.join("\n") !== this.names.join("\n")) {
      this.names = names;
      this.latest.classList.toggle("bad", names.length > 0);
      this.onHighlight(names);
    }
    // Once more when the rejection's highlight ends (states may not come: a stopped daemon).
    const until = this.highlight.expiresAt;
    if (until === this.timerAt) return;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timerAt = until;
    this.timer = until === null ? null : setTimeout(() => this.refresh(), Math.max(0, until - now) + 10);
  }
}
