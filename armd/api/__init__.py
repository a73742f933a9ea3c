"""The MQTT API: the contract (topics, statuses, payloads and their validation), one broker
session, the bridge, Home Assistant discovery, the model topic and the client the command line
uses."""

__all__: list[str] = []
