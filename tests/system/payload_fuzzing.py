"""The MQTT fuzz of test_fuzz.py and test_fuzz_payload.py, run against a daemon: the payloads of
tests/system/payload_fuzzer.py are published with QoS 1 in batches, each batch answered before
the next is sent; every one must be answered with ``rejected`` (with the ``id`` when one could be
read, on ``goal``), nothing may crash the daemon and nothing may move the arm; every malformed
``estop`` payload engages the e-stop (fail-safe).

Each module fuzzes its own topics on a daemon of its own, so that two workers share the fuzz."""

from __future__ import annotations

import contextlib
import json
import os
import random
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from tests.broker import MosquittoBroker
from tests.system.helpers import Rig, attach_diagnostics, start_rig
from tests.system.payload_fuzzer import PER_TOPIC, FuzzStream, PayloadFuzzer, fuzz_stream
from tests.system.probe import ARM, WAIT_S, MqttProbe, at_rest, contract_violations, joint_positions

SEED = int(os.environ.get("ARMD_FUZZ_SEED", "20260521"))
BATCH = 1000
ENCODER_RESOLUTION = 2 * 3.141592653589793 / 16384  # rad: one count of the simulated encoders


@contextlib.contextmanager
def fuzzed_rig(directory: Path, request: pytest.FixtureRequest) -> Iterator[Rig]:
    """A daemon on a broker that queues enough QoS 1 messages for a batch (Mosquitto's default
    of 1000 per client would drop part of it, silently)."""
    with MosquittoBroker(
        directory / "mosquitto", extra_config=["max_queued_messages 100000"]
    ) as broker:
        rig = start_rig(directory / "arm", broker)
        attach_diagnostics(request, rig)
        try:
            yield rig
        finally:
            rig.close()


class StatusCounter:
    """``goal/status`` messages after `since`, parsed once each as they arrive."""

    def __init__(self, probe: MqttProbe, since: int) -> None:
        self.probe = probe
        self.cursor = since
        self.statuses: list[dict[str, Any]] = []

    def update(self) -> int:
        messages = self.probe.messages[self.cursor :]
        self.cursor += len(messages)
        self.statuses += [m.json() for m in messages if m.topic == "goal/status"]
        return len(self.statuses)

    def wait_for(self, count: int) -> None:
        self.probe.wait_for(
            lambda: self.update() >= count,
            4 * WAIT_S,
            f"{count} statuses (got {len(self.statuses)})",
        )


def publish_batches(rig: Rig, messages: list[tuple[str, bytes]], counter: StatusCounter) -> None:
    """Publish (QoS 1) in batches; each batch is acknowledged by the broker and answered by the
    daemon before the next goes out, so that no queue grows without bound."""
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"fuzz-{uuid.uuid4().hex[:8]}")
    client.max_inflight_messages_set(200)
    client.connect(rig.broker.host, rig.broker.port)
    client.loop_start()
    try:
        for start in range(0, len(messages), BATCH):
            batch = messages[start : start + BATCH]
            infos = [client.publish(f"armd/{ARM}/{t}", payload, qos=1) for t, payload in batch]
            for info in infos:
                info.wait_for_publish(WAIT_S)
                assert info.is_published(), "the broker did not acknowledge a payload"
            counter.wait_for(start + len(batch))
            assert rig.daemon.running, rig.daemon.output()[-3000:]
    finally:
        client.disconnect()
        client.loop_stop()


def fuzz(rig: Rig, topics: Sequence[str]) -> None:
    """`PER_TOPIC` payloads on each of `topics`, all rejected, the arm still; then a goal (after
    a reset, when the e-stop was fuzzed) still succeeds."""
    probe = rig.probe
    stream = fuzz_stream(SEED, rig, topics)
    assert len(stream.messages) == PER_TOPIC * len(topics)
    assert sum(stream.valid_skipped.values()) < 0.02 * len(stream.messages), stream.valid_skipped
    assert len(stream.strategies) == len(PayloadFuzzer(random.Random(0)).strategies)
    if "goal" in topics:
        assert sum(n for goal_id, n in stream.expected.items() if goal_id) > 3500, "too few ids"

    before = probe.wait_state(at_rest, what="the arm at rest")
    since = probe.mark()
    counter = StatusCounter(probe, since)
    publish_batches(rig, stream.messages, counter)
    check_answers(stream, counter.statuses, topics)
    check_still(rig, before, since, estopped="estop" in topics)

    if "estop" in topics:
        reset = probe.publish("estop", json.dumps({"reset": True}))
        probe.wait_mode("holding", since=reset)
    current = joint_positions(before)["wrist_3_joint"]
    goal = {"id": "after-fuzz", "type": "joints", "positions": {"wrist_3_joint": current + 0.2}}
    assert probe.run_goal(goal)["status"] == "succeeded"


def check_answers(
    stream: FuzzStream, statuses: list[dict[str, Any]], topics: Sequence[str]
) -> None:
    """Every payload: one status, rejected, with the id the contract says could be read; every
    malformed e-stop payload engaged the e-stop (fail-safe), and said so."""
    assert len(statuses) == len(stream.messages), (len(statuses), len(stream.messages))
    outcomes = Counter(s["status"] for s in statuses)
    assert outcomes == {"rejected": len(stream.messages)}, outcomes
    answered: Counter[str | None] = Counter(s.get("id") for s in statuses)
    missing = stream.expected - answered
    unexpected = answered - stream.expected
    assert not missing, f"ids expected but not answered: {list(missing.items())[:5]}"
    assert not unexpected, f"ids answered but not expected: {list(unexpected.items())[:5]}"
    assert all(s.get("reason") for s in statuses), "a rejection without a reason"
    estop_reports = [s for s in statuses if s["reason"].startswith("estop: ")]
    assert len(estop_reports) == (PER_TOPIC if "estop" in topics else 0), len(estop_reports)
    assert all(s["reason"].endswith("(fail-safe)") for s in estop_reports)
    assert contract_violations(statuses) == []


def check_still(rig: Rig, before: dict[str, Any], since: int, *, estopped: bool) -> None:
    """The arm never moved; the daemon is up, online, without a fault or a traceback."""
    probe = rig.probe
    states = probe.states(since)
    assert len(states) > 10, "too little telemetry to judge"
    reference = joint_positions(before)
    for state in states:
        moved = max(abs(p - reference[name]) for name, p in joint_positions(state).items())
        assert moved <= ENCODER_RESOLUTION, f"the arm moved by {moved:.6f} rad: {state}"
        assert state["mode"] in ("holding", "estop"), state
    assert states[-1]["mode"] == ("estop" if estopped else "holding")
    assert [m.text for m in probe.on("availability", since)] in ([], ["online"])
    assert probe.availability() == "online"
    assert [m.text for m in probe.on("fault", since) if m.text] == []
    assert rig.daemon.running
    output = rig.daemon.output()
    assert "Traceback" not in output, output[-5000:]
    assert "failed to handle" not in output, output[-5000:]
