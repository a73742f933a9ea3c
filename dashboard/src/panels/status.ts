// What the arm says about itself: mode, missed ticks, TCP pose, the retained fault, and the goal
// statuses — the active goal, a log of recent statuses, and the latest rejection with its reason
// (also shown over the 3D view, where it cannot be missed).
import type { Fault, State, Status } from "../contract";
import { FINAL_STATUSES } from "../contract";
import { byId, fixed, h } from "../dom";

const LOG_LENGTH = 40;

export class StatusPanel {
  private readonly mode = byId("mode");
  private readonly statusMode = byId("status-mode");
  private readonly missed = byId("status-missed");
  private readonly tcp = byId("status-tcp");
  private readonly goal = byId("status-goal");
  private readonly faultText = byId("status-fault");
  private readonly faultBanner = byId("fault");
  private readonly rejection = byId("rejection");
  private readonly log = byId<HTMLOListElement>("statuses");
  /** What the dashboard sent, by goal id (for the log and the active goal). */
  private readonly sent = new Map<string, string>();
  private active: string | null = null;

  constructor() {
    this.rejection.title = "click to dismiss";
    this.rejection.addEventListener("click", () => this.clearRejection());
  }

  reset(): void {
    this.showMode(null);
    this.missed.textContent = "–";
    this.tcp.textContent = "–";
    this.showFault(null);
    this.active = null;
    this.goal.textContent = "none";
    this.rejection.hidden = true;
    this.log.replaceChildren();
  }

  showMode(mode: string | null): void {
    this.mode.textContent = mode ?? "no arm";
    this.mode.dataset.mode = mode ?? "";
    this.statusMode.textContent = mode ?? "–";
  }

  showState(state: State): void {
    this.showMode(state.mode);
    this.missed.textContent = String(state.missed_ticks);
    this.missed.classList.toggle("warn", state.missed_ticks > 0);
    const [w, x, y, z] = state.tcp.orientation;
    this.tcp.textContent =
      `${state.tcp.link} [${state.tcp.position.map((v) => fixed(v)).join(", ")}] m\n` +
      `q [${[w, x, y, z].map((v) => fixed(v)).join(", ")}]`;
  }

  showFault(fault: Fault | null): void {
    const text = fault ? `${fault.code}${fault.joint ? ` (${fault.joint})` : ""}: ${fault.message}` : "";
    this.faultText.textContent = fault ? text : "none";
    this.faultText.classList.toggle("bad", fault !== null);
    this.faultBanner.hidden = fault === null;
    this.faultBanner.textContent = fault ? `FAULT ${text} — Reset once the cause is gone` : "";
  }

  /** Hide the latest rejection (a reset was sent, or the operator clicked it away). */
  clearRejection(): void {
    this.rejection.hidden = true;
  }

  /** A goal the dashboard sent, so its statuses can say what it was. */
  sentGoal(id: string, description: string): void {
    this.sent.set(id, description);
  }

  /** A refusal that never reached armd (a local check, the broker's ACL): shown like a rejection. */
  refused(what: string, reason: string): void {
    this.showStatus({ id: null, status: "rejected", reason: `${what}: ${reason}` });
  }

  showStatus(status: Status): void {
    const what = status.id ? (this.sent.get(status.id) ?? status.id) : "(no id)";
    if (status.status === "accepted") this.active = status.id;
    else if (status.id === this.active && FINAL_STATUSES.has(status.status)) this.active = null;
    this.goal.textContent = this.active ? (this.sent.get(this.active) ?? this.active) : "none";
    if (status.status === "rejected") {
      this.rejection.hidden = false;
      this.rejection.textContent = `rejected ${what}: ${status.reason ?? "(no reason given)"}`;
    } else if (status.status === "accepted") {
      this.rejection.hidden = true;
    }
    const entry = h(
      "li",
      { class: status.status },
      h("b", {}, status.status),
      ` ${what}`,
      status.reason ? h("span", { class: "reason" }, ` — ${status.reason}`) : null,
    );
    this.log.prepend(entry);
    while (this.log.children.length > LOG_LENGTH) this.log.lastElementChild?.remove();
  }
}
