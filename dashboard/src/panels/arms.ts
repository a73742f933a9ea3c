// The list of arms: every arm whose retained `availability` the broker has, online or offline,
// and "unreachable" while the bridge to an arm's own broker is down (its `availability` is then
// stale: docs/fleet.md).
import { byId, h } from "../dom";

export type Reach = "online" | "offline" | "unreachable";

export class ArmList {
  onSelect: (arm: string) => void = () => {};
  private readonly arms = new Map<string, boolean>();
  private readonly bridges = new Map<string, boolean>();
  private selected: string | null = null;
  private readonly list = byId<HTMLUListElement>("arm-list");
  private readonly empty = byId("no-arms");

  set(arm: string, online: boolean): void {
    this.arms.set(arm, online);
    this.render();
  }

  setBridge(arm: string, up: boolean): void {
    this.bridges.set(arm, up);
    if (this.arms.has(arm)) this.render();
  }

  reach(arm: string): Reach {
    if (this.bridges.get(arm) === false) return "unreachable";
    return this.arms.get(arm) ? "online" : "offline";
  }

  select(arm: string | null): void {
    this.selected = arm;
    this.render();
  }

  private render(): void {
    this.empty.hidden = this.arms.size > 0;
    const items = [...this.arms.entries()]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([arm]) => {
        const state = this.reach(arm);
        const button = h(
          "button",
          { class: arm === this.selected ? "arm selected" : "arm", "data-arm": arm, "data-state": state },
          h("span", { class: `dot ${state}` }),
          arm,
          h("small", {}, state),
        );
        button.addEventListener("click", () => this.onSelect(arm));
        return h("li", {}, button);
      });
    this.list.replaceChildren(...items);
  }
}
