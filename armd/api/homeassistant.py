"""Home Assistant MQTT discovery: one device per arm, its entities announced as retained configs.

Opt-in (config ``home_assistant:``, docs/home-assistant.md). On every connection the bridge
publishes, retained under the discovery prefix (``homeassistant`` by default), one config per
entity, each naming the arm's device and wired to its ``availability`` topic:

- sensors: the mode, the TCP position (x, y, z), every joint's position, the missed ticks;
- a binary sensor (device class ``problem``) on for a latched fault, with a sensor of its code;
- buttons: stop, e-stop, reset, one per named pose (``named`` goals), gripper open and close.

The entities read the daemon's own topics (``state``, ``fault``) with templates; the buttons
publish the goals and e-stop commands of docs/mqtt.md. A button that sends a goal gives it a fresh
id from Home Assistant's clock (``command_template``), since an id in use is refused.
"""

from __future__ import annotations

import json
from typing import Any

from armd import __version__
from armd.api.contract import Topics, encode
from armd.config.calibration import position_units
from armd.config.load import ArmSetup

__all__ = ["discovery_messages"]


def discovery_messages(setup: ArmSetup, prefix: str) -> list[tuple[str, bytes]]:
    """The (topic, payload) discovery configs of `setup`'s arm under `prefix`, in a stable
    order."""
    return [
        (f"{prefix}/{component}/armd_{setup.name}/{object_id}/config", encode(config))
        for component, object_id, config in _entities(setup)
    ]


def _entities(setup: ArmSetup) -> list[tuple[str, str, dict[str, Any]]]:
    """(component, object id, config) of every entity of the arm's device."""
    topics = Topics.for_arm(setup.name)
    device = {
        "identifiers": [f"armd_{setup.name}"],
        "name": setup.name,
        "manufacturer": "armd",
        "model": setup.tree.name or setup.model_path.name,
        "sw_version": __version__,
    }

    def entity(object_id: str, name: str, **options: Any) -> dict[str, Any]:
        return {
            "name": name,
            "unique_id": f"armd_{setup.name}_{object_id}",
            "object_id": f"armd_{setup.name}_{object_id}",
            "device": device,
            "origin": {"name": "armd", "sw_version": __version__},
            "availability_topic": topics.availability,
            "payload_available": "online",
            "payload_not_available": "offline",
            **options,
        }

    def sensor(object_id: str, name: str, template: str, **options: Any) -> tuple[str, str, Any]:
        config = entity(object_id, name, state_topic=topics.state, value_template=template)
        return ("sensor", object_id, config | options)

    def button(
        object_id: str, name: str, topic: str, payload: dict[str, Any]
    ) -> tuple[str, str, Any]:
        return ("button", object_id, entity(object_id, name, command_topic=topic) | _press(payload))

    position = {
        "unit_of_measurement": "m",
        "device_class": "distance",
        "state_class": "measurement",
    }
    entities = [
        sensor("mode", "Mode", "{{ value_json.mode }}", icon="mdi:robot-industrial"),
        *(
            sensor(
                f"tcp_{axis}", f"TCP {axis}", f"{{{{ value_json.tcp.position[{i}] }}}}", **position
            )
            for i, axis in enumerate("xyz")
        ),
        *(
            sensor(
                f"joint_{joint}",
                f"Joint {joint}",
                f"{{{{ value_json.joints[{json.dumps(joint)}].position }}}}",
                unit_of_measurement=unit,
                state_class="measurement",
                suggested_display_precision=3,
            )
            for joint, unit in position_units(setup.tree).items()
        ),
        sensor(
            "missed_ticks",
            "Missed ticks",
            "{{ value_json.missed_ticks }}",
            state_class="total_increasing",
            entity_category="diagnostic",
        ),
        (
            "binary_sensor",
            "fault",
            entity(
                "fault",
                "Fault",
                state_topic=topics.fault,
                value_template="{{ 'ON' if value else 'OFF' }}",  # an empty payload: cleared
                device_class="problem",
            ),
        ),
        (
            "sensor",
            "fault_code",
            entity(
                "fault_code",
                "Fault code",
                state_topic=topics.fault,
                value_template="{{ value_json.code if value else 'none' }}",
                entity_category="diagnostic",
            ),
        ),
        button("stop", "Stop", topics.goal, {"type": "stop"}),
        button("estop", "E-stop", topics.estop, {"engage": True}),
        button("reset", "Reset e-stop", topics.estop, {"reset": True}),
        *(
            button(f"pose_{name}", f"Go to {name}", topics.goal, _goal("named", name=name))
            for name in setup.config.poses
        ),
    ]
    if setup.config.gripper is not None:
        for action, label in (("open", "Open gripper"), ("close", "Close gripper")):
            entities.append(
                button(f"gripper_{action}", label, topics.goal, _goal("gripper", position=action))
            )
    return entities


def _goal(goal_type: str, **fields: Any) -> dict[str, Any]:
    """A goal with a placeholder id: `_press` replaces it with a fresh one per press."""
    return {"id": _ID_PLACEHOLDER, "type": goal_type, **fields}


_ID_PLACEHOLDER = "@id@"


def _press(payload: dict[str, Any]) -> dict[str, Any]:
    """The button options that publish `payload`: as is, or through a template giving a goal a
    fresh id (``ha-`` and Home Assistant's clock in µs)."""
    text = json.dumps(payload, separators=(",", ":"))
    if _ID_PLACEHOLDER not in text:
        return {"payload_press": text}
    fresh = "ha-{{ (now().timestamp() * 1000000) | int }}"
    return {"payload_press": text, "command_template": text.replace(_ID_PLACEHOLDER, fresh)}
