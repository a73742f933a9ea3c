// One MQTT-over-WebSockets connection to the broker (mqtt.js): the availability of every arm,
// the topics of the one arm being watched, and publishing goals and e-stop commands. MQTT 5, so
// that a publish the broker's ACL refuses (e.g. the read-only `dashboard` account of
// config/mosquitto/armd.acl) comes back as an error with its reason instead of vanishing.
import mqtt, { type MqttClient } from "mqtt";
import { ARM_TOPICS, AVAILABILITY_FILTER, type ArmTopic, BRIDGE_FILTER, armTopic, splitTopic } from "./contract";

export interface BrokerOptions {
  url: string;
  username?: string;
  password?: string;
}

export interface ConnectionEvents {
  /** The connection's state in words ("connected", "connecting", "error: ...") */
  status(text: string, connected: boolean): void;
  availability(arm: string, online: boolean): void;
  /** The bridge to the arm's own broker is up (true) or down (false): docs/fleet.md. */
  bridge(arm: string, up: boolean): void;
  message(arm: string, topic: ArmTopic, payload: Uint8Array): void;
}

export class Connection {
  private client: MqttClient | null = null;
  private watched: string | null = null;

  constructor(private readonly events: ConnectionEvents) {}

  connect(options: BrokerOptions): void {
    this.close();
    this.events.status(`connecting to ${options.url}`, false);
    const client = mqtt.connect(options.url, {
      protocolVersion: 5,
      clientId: `armd-dashboard-${Math.random().toString(16).slice(2, 10)}`,
      clean: true,
      reconnectPeriod: 2000,
      connectTimeout: 5000,
      ...(options.username ? { username: options.username } : {}),
      ...(options.password ? { password: options.password } : {}),
    });
    this.client = client;
    // The last error stays in view while the client retries (a refused login would otherwise
    // flash by, replaced by "reconnecting").
    let lastError = "";
    const because = () => (lastError ? ` (${lastError})` : "");
    const status = (text: string, connected: boolean) => {
      if (this.client === client) this.events.status(text, connected); // not a replaced client's
    };
    client.on("connect", () => {
      lastError = "";
      status(`connected to ${options.url}`, true);
      client.subscribe([AVAILABILITY_FILTER, BRIDGE_FILTER], { qos: 1 });
      if (this.watched) this.subscribeArm(this.watched);
    });
    client.on("reconnect", () => status(`reconnecting to ${options.url}${because()}`, false));
    client.on("close", () => status(`disconnected from ${options.url}${because()}`, false));
    client.on("error", (error) => {
      lastError = error.message;
      status(`error: ${error.message}`, false);
    });
    client.on("message", (topic, payload) => this.dispatch(topic, payload));
  }

  close(): void {
    this.client?.end(true);
    this.client = null;
  }

  get connected(): boolean {
    return this.client?.connected ?? false;
  }

  /** Follow `arm`'s topics (and stop following the previous arm's). */
  watch(arm: string | null): void {
    if (arm === this.watched) return;
    if (this.watched && this.client?.connected) {
      this.client.unsubscribe(ARM_TOPICS.map((t) => armTopic(this.watched as string, t)));
    }
    this.watched = arm;
    if (arm && this.client?.connected) this.subscribeArm(arm);
  }

  /** Publish a command (QoS 1, never retained); rejects with the broker's reason if refused. */
  publish(arm: string, topic: "goal" | "estop", payload: object): Promise<void> {
    const client = this.client;
    if (!client?.connected) return Promise.reject(new Error("not connected to the broker"));
    return new Promise((resolve, reject) => {
      client.publish(armTopic(arm, topic), JSON.stringify(payload), { qos: 1, retain: false }, (error) =>
        error ? reject(new Error(`the broker refused ${topic}: ${error.message}`)) : resolve(),
      );
    });
  }

  private subscribeArm(arm: string): void {
    this.client?.subscribe(
      ARM_TOPICS.map((t) => armTopic(arm, t)),
      { qos: 1 },
    );
  }

  private dispatch(topic: string, payload: Uint8Array): void {
    const parts = splitTopic(topic);
    if (!parts) return;
    const [arm, rest] = parts;
    const text = () => new TextDecoder().decode(payload);
    if (rest === "availability") {
      this.events.availability(arm, text() === "online");
    } else if (rest === "bridge") {
      this.events.bridge(arm, text() !== "0");
    } else if (arm === this.watched && (ARM_TOPICS as readonly string[]).includes(rest)) {
      this.events.message(arm, rest as ArmTopic, payload);
    }
  }
}
