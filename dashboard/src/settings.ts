// Where the broker is. In order: `?broker=ws://host:port` in the page's address; the `broker` of
// `config.json` next to the page (`armd dashboard --broker ...` serves its own; the build ships
// public/config.json with an empty one, so that the page served by Mosquitto's `http_dir` finds
// it too instead of a 404); otherwise the page's own host and port over ws:// (wss:// for an
// https page) — right when Mosquitto serves the page itself from its WebSockets listener.
// `?arm=NAME` picks the arm to show first.

export interface Settings {
  broker: string;
  arm: string | null;
}

export function sameOriginBroker(location: Location): string {
  return `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}`;
}

async function configuredBroker(): Promise<string | null> {
  try {
    const response = await fetch("config.json", { cache: "no-store" });
    if (!response.ok) return null;
    const config = (await response.json()) as { broker?: unknown };
    return typeof config.broker === "string" && config.broker ? config.broker : null;
  } catch {
    return null; // no config.json, or not JSON
  }
}

export async function loadSettings(location: Location): Promise<Settings> {
  const query = new URLSearchParams(location.search);
  const configured = (await configuredBroker())?.replace("{hostname}", location.hostname);
  const broker = query.get("broker") || configured || sameOriginBroker(location);
  return { broker, arm: query.get("arm") };
}
