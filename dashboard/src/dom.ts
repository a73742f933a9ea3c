// A few DOM helpers, so the panels read as the markup they build.

type Attributes = Record<string, string | number | boolean | undefined>;
type Child = Node | string | null | undefined | false;

/** `h("button", {class: "big"}, "E-STOP")`: an element with attributes and children. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attributes: Attributes = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes)) {
    if (value === undefined || value === false) continue;
    element.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children) if (child) element.append(child);
  return element;
}

/** The element with this id (the page's skeleton is index.html); throws if it is missing. */
export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const element = document.getElementById(id);
  if (!element) throw new Error(`index.html has no element #${id}`);
  return element as T;
}

/** Numbers as the panels show them: fixed decimals, with a sign column. */
export function fixed(value: number, digits = 3): string {
  return (value >= 0 ? "\u2007" : "") + value.toFixed(digits);
}
