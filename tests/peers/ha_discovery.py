"""Home Assistant's own MQTT discovery code as a test peer, run with Home Assistant's Python.

    .venv-ha/bin/python tests/peers/ha_discovery.py < request.json > answer.json

Runs in the virtual environment `make ha-peer` creates (Home Assistant 2024.3, the last release
for Python 3.11); it imports Home Assistant, never armd. The request is ``{"prefix", "messages":
[[topic, payload], ...], "states": [payload, ...], "faults": [payload, ...]}``; for every message
the answer says what Home Assistant makes of it, exactly as its discovery does (topic matcher,
abbreviations, the component's discovery schema): ``{"topic", "component", "config" (after the
schema), "dropped" (keys the schema removed: unknown to Home Assistant), "error"}``, plus its
value template rendered against every state (or fault) payload and its command template rendered
(``"values"``, ``"command"``).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
import tempfile
from typing import Any

from homeassistant.components.mqtt.abbreviations import ABBREVIATIONS, DEVICE_ABBREVIATIONS
from homeassistant.components.mqtt.discovery import SUPPORTED_COMPONENTS, TOPIC_MATCHER
from homeassistant.components.mqtt.models import MqttCommandTemplate, MqttValueTemplate
from homeassistant.core import HomeAssistant
from homeassistant.helpers.template import Template


async def _check(request: dict[str, Any]) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as config_dir:
        hass = HomeAssistant(config_dir)
        return [_message(hass, request, topic, payload) for topic, payload in request["messages"]]


def _message(hass: HomeAssistant, request: dict[str, Any], topic: str, payload: str) -> Any:
    answer: dict[str, Any] = {"topic": topic}
    prefix = request["prefix"] + "/"
    match = TOPIC_MATCHER.match(topic.removeprefix(prefix)) if topic.startswith(prefix) else None
    if match is None:
        return answer | {"error": "not a discovery topic"}
    component = match.group("component")
    if component not in SUPPORTED_COMPONENTS:
        return answer | {"error": f"unsupported component {component}"}
    raw = json.loads(payload)
    raw = {ABBREVIATIONS.get(key, key): value for key, value in raw.items()}
    if "device" in raw:
        raw["device"] = {DEVICE_ABBREVIATIONS.get(k, k): v for k, v in raw["device"].items()}
    platform = importlib.import_module(f"homeassistant.components.mqtt.{component}")
    try:
        config = platform.DISCOVERY_SCHEMA(dict(raw))
    except Exception as exc:  # voluptuous.Invalid and its kin: what Home Assistant would log
        return answer | {"component": component, "error": str(exc)}
    answer |= {
        "component": component,
        "config": json.loads(json.dumps(config, default=str)),
        "dropped": sorted(set(raw) - set(config)),
    }
    if "value_template" in raw:
        sources = request["faults"] if "/fault" in raw.get("state_topic", "") else request["states"]
        template = MqttValueTemplate(Template(raw["value_template"], hass), hass=hass)
        answer["values"] = [template.async_render_with_possible_json_value(s) for s in sources]
    if "command_topic" in raw:
        command = MqttCommandTemplate(
            Template(raw["command_template"], hass) if "command_template" in raw else None,
            hass=hass,
        )
        answer["command"] = str(command.async_render(raw.get("payload_press", "PRESS")))
    return answer


if __name__ == "__main__":
    json.dump(asyncio.run(_check(json.load(sys.stdin))), sys.stdout)
