// The list of arms: every arm whose retained `availability` the broker has, online or offline.
import { byId, h } from "../dom";

export class ArmList {
  onSelect: (arm: string) => void = () => {};
  private readonly arms = new Map<string, boolean>();
  private selected: string | null = null;
  private readonly list = byId<HTMLUListElement>("arm-list");
  private readonly empty = byId("no-arms");

  set(arm: string, online: boolean): void {
    this.arms.set(arm, online);
    this.render();
  }

  select(arm: string | null): void {
    this.selected = arm;
    this.render();
  }

  private render(): void {
    this.empty.hidden = this.arms.size > 0;
    const items = [...this.arms.entries()]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([arm, online]) => {
        const state = online ? "online" : "offline";
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
