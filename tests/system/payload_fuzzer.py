"""The payload generator of the MQTT fuzz (test_fuzz.py, test_fuzz_payload.py): random and
malformed payloads for the daemon's input topics (``goal``, ``estop`` and ``payload``,
docs/mqtt.md), from a seeded `random.Random`, and the id the contract says the daemon must
answer each with: a UTF-8 JSON object of at most 64 KiB whose ``id`` is a string of 1–128
characters, computed here independently of the daemon. Payloads that happen to be valid (a
mutation that kept a goal intact, say) are checked with the daemon's own parsers, counted and
left out."""

from __future__ import annotations

import json
import random
import string
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from armd.api.load_payloads import parse_load
from armd.api.payloads import MAX_ID_LENGTH, MAX_PAYLOAD_BYTES, parse_estop, parse_goal
from armd.config.load import load_config
from armd.link.messages import Rejection
from tests.system.helpers import Rig

PER_TOPIC = 10_000
JOINTS = (
    "shoulder_pan_joint",
    "shoulder_lift_joint",
    "elbow_joint",
    "wrist_1_joint",
    "wrist_2_joint",
    "wrist_3_joint",
)
LINKS = ("base_link", "upper_arm_link", "forearm_link", "wrist_3_link", "ee_link", "tool0")


# -- the generator ------------------------------------------------------------------------------


class PayloadFuzzer:
    """Random and malformed payloads for the input topics. Every goal-like
    document carries a fresh id, so that each status can be traced to its payload."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.count = 0
        self.strategies: list[Callable[[], bytes]] = [
            self.random_bytes,
            self.truncated,
            self.mutated,
            self.wrong_types,
            self.huge_numbers,
            self.non_finite,
            self.deep_nesting,
            self.long_strings,
            self.unknown_fields,
            self.wrong_shape,
            self.non_utf8,
            self.duplicate_keys,
            self.estop_like,
            self.oversized,
        ]
        # the big ones (tens of kilobytes) are rarer
        self.weights: list[float] = [10, 10, 14, 12, 6, 6, 2, 4, 6, 8, 6, 4, 8, 0.3]

    # -- building blocks -------------------------------------------------------------------

    def fresh_id(self) -> str:
        """Unique; sometimes with characters that are awkward in logs and JSON."""
        self.count += 1
        decoration = self.rng.choice(["", "", "é✓", "\u0000\t\n", "\ud800", "💥" * 3, " "])
        return f"fz-{self.count}{decoration}"

    def number(self) -> float:
        return self.rng.choice([0.0, 0.1, -0.3, 1.0, 2.5, self.rng.uniform(-7, 7)])

    def valid_goal(self) -> dict[str, Any]:
        kind = self.rng.choice(["joints", "pose", "keypoints", "stop"])
        goal: dict[str, Any] = {"id": self.fresh_id(), "type": kind}
        if kind == "joints":
            names = self.rng.sample(JOINTS, self.rng.randint(1, len(JOINTS)))
            goal["positions"] = {name: round(self.rng.uniform(-1, 1), 3) for name in names}
        elif kind == "pose":
            goal["position"] = [round(self.rng.uniform(-0.6, 0.6), 3) for _ in range(3)]
            if self.rng.random() < 0.5:
                goal["orientation"] = [round(self.rng.uniform(-1, 1), 3) for _ in range(4)]
            if self.rng.random() < 0.3:
                goal["motion"] = self.rng.choice(["joint", "linear"])
            if self.rng.random() < 0.3:
                goal["link"] = self.rng.choice(LINKS)
        elif kind == "keypoints":
            links = self.rng.sample(LINKS, self.rng.randint(2, 4))
            goal["points"] = {
                link: [round(self.rng.uniform(-0.5, 0.5), 3) for _ in range(3)] for link in links
            }
        if kind != "stop" and self.rng.random() < 0.5:
            goal["speed"] = round(self.rng.uniform(0.05, 1), 3)
        return goal

    def text(self, document: object) -> bytes:
        """JSON, with non-ASCII characters escaped or not (a lone surrogate unescaped makes the
        payload invalid UTF-8)."""
        return _utf8(json.dumps(document, ensure_ascii=self.rng.random() < 0.5))

    def junk_value(self) -> object:
        return self.rng.choice(
            [None, True, False, "", "1.0", "elbow_joint", [], {}, [1], [[1, 2, 3]], {"x": 1},
             0, -1, 1.5, 10**30, -(10**30), [None] * 3, ["a", "b", "c"]]
        )  # fmt: skip

    # -- strategies ------------------------------------------------------------------------

    def random_bytes(self) -> bytes:
        return self.rng.randbytes(self.rng.randint(0, 300))

    def truncated(self) -> bytes:
        text = self.text(self.valid_goal())
        return text[: self.rng.randrange(len(text))]

    def mutated(self) -> bytes:
        data = bytearray(self.text(self.valid_goal()))
        for _ in range(self.rng.randint(1, 4)):
            position = self.rng.randrange(len(data))
            action = self.rng.randrange(3)
            if action == 0:
                data[position] = self.rng.randrange(256)
            elif action == 1:
                data.insert(position, self.rng.choice(b'{}[]",:0123456789.eE-+ntfaNI\\'))
            elif len(data) > 1:
                del data[position]
        return bytes(data)

    def wrong_types(self) -> bytes:
        goal = self.valid_goal()
        field = self.rng.choice([*goal, "positions", "position", "points", "speed"])
        if field == "id" and self.rng.random() < 0.7:
            field = "type"  # keep the id readable most of the time
        goal[field] = self.junk_value()
        positions = goal.get("positions")
        if isinstance(positions, dict) and positions and self.rng.random() < 0.3:
            positions[next(iter(positions))] = self.junk_value()
        return self.text(goal)

    def huge_numbers(self) -> bytes:
        huge = self.rng.choice(
            ["1e400", "-1e999", "1" + "0" * self.rng.randint(310, 5000), "4" * 4400,
             "1e308", "-1.7976931348623157e309", "123456789012345678901234567890"]
        )  # fmt: skip
        return self._with_number(huge)

    def non_finite(self) -> bytes:
        return self._with_number(self.rng.choice(["NaN", "Infinity", "-Infinity", "nan", "inf"]))

    def _with_number(self, literal: str) -> bytes:
        goal_id = json.dumps(self.fresh_id())
        joint = self.rng.choice(JOINTS)
        templates = [
            f'{{"id": {goal_id}, "type": "joints", "positions": {{"{joint}": {literal}}}}}',
            f'{{"id": {goal_id}, "type": "pose", "position": [0.4, {literal}, 0.3]}}',
            f'{{"id": {goal_id}, "type": "pose", "position": [0.4, 0.1, 0.3], '
            f'"orientation": [{literal}, 0, 0, 0]}}',
            f'{{"id": {goal_id}, "type": "joints", "positions": {{"{joint}": 0.1}}, '
            f'"speed": {literal}}}',
            f'{{"engage": {literal}, "id": {goal_id}}}',
        ]
        return self.rng.choice(templates).encode()

    def deep_nesting(self) -> bytes:
        depth = self.rng.choice([50, 500, 990, 1500, 1500, 20_000])
        opener, closer = self.rng.choice([("[", "]"), ('{"a":', "}")])
        nested = opener * depth + "1" + closer * depth
        goal_id = json.dumps(self.fresh_id())
        if self.rng.random() < 0.5:
            return f'{{"id": {goal_id}, "type": "joints", "positions": {nested}}}'.encode()
        return nested.encode()

    def long_strings(self) -> bytes:
        length = self.rng.choice([MAX_ID_LENGTH, MAX_ID_LENGTH + 1, 1000, 1000, 30_000])
        long = "".join(self.rng.choices(string.ascii_letters + "é中", k=length))
        goal = self.valid_goal()
        target = self.rng.choice(["id", "type", "joint", "link", "value"])
        if target == "id":
            goal["id"] = long
        elif target == "type":
            goal["type"] = long
        elif target == "joint":
            goal["positions"] = {long: 0.1}
        elif target == "link":
            goal["link"] = long
        else:
            goal["motion"] = long
        return self.text(goal)

    def unknown_fields(self) -> bytes:
        goal = self.valid_goal()
        for _ in range(self.rng.randint(1, 3)):
            key = self.rng.choice(["postion", "ID", "priority", "", "speed ", "__proto__", "💥"])
            goal[key] = self.junk_value()
        return self.text(goal)

    def wrong_shape(self) -> bytes:
        goal = self.valid_goal()
        shapes: list[object] = [
            [goal],
            [goal, goal],
            goal["id"],
            self.number(),
            None,
            True,
            {"goal": goal},
            {"id": goal["id"]},
            {"id": goal["id"], "type": None},
            {"id": [goal["id"]], "type": "stop"},
            {"id": 12345, "type": "stop"},
            {"id": "", "type": "stop"},
            {"id": goal["id"], "type": "joints", "positions": list(JOINTS)},
            {"id": goal["id"], "type": "pose", "position": {"x": 0.1, "y": 0.2, "z": 0.3}},
            {"id": goal["id"], "type": "pose", "position": [0.1, 0.2]},
            {"id": goal["id"], "type": "pose", "position": [0.1, 0.2, 0.3, 0.4]},
            {"id": goal["id"], "type": "pose", "position": [0.4, 0.1, 0.3], "orientation": [0] * 4},
            {"id": goal["id"], "type": "joints", "positions": {}},
            {"id": goal["id"], "type": "pose", "position": [0.4, 0.1, 0.3], "speed": 0},
            {"id": goal["id"], "type": "joints", "positions": {"elbow_joint": 1}, "speed": 1.5},
            {"id": goal["id"], "type": "keypoints", "points": {"tool0": [0, 0, 0]}},
            {"id": goal["id"], "type": "keypoints", "points": [[0, 0, 0], [0, 0, 1]]},
            {"id": goal["id"], "type": "keypoints", "points": {"tool0": [0, 0], "base": [1]}},
        ]
        return self.text(self.rng.choice(shapes))

    def non_utf8(self) -> bytes:
        goal = self.valid_goal()
        goal["id"] = goal["id"] + "ü"
        text = json.dumps(goal, ensure_ascii=False)
        choice = self.rng.randrange(5)
        if choice == 0:
            return text.encode("latin-1", errors="replace")
        if choice == 1:
            return text.encode("utf-16", errors="surrogatepass")
        if choice == 2:
            return text.encode("utf-32-le", errors="surrogatepass")
        data = bytearray(_utf8(text))
        bad = self.rng.choice([b"\xc0\xaf", b"\xed\xa0\x80", b"\xff", b"\xfe\xff", b"\x80"])
        position = self.rng.randrange(len(data))
        return bytes(data[:position] + bad + data[position:])

    def duplicate_keys(self) -> bytes:
        first, second = json.dumps(self.fresh_id()), json.dumps(self.fresh_id())
        return self.rng.choice(
            [f'{{"id": {first}, "id": {second}, "type": "stop"}}',
             f'{{"id": {first}, "type": "stop", "type": "stop"}}',
             f'{{"engage": true, "engage": true, "id": {first}}}']
        ).encode()  # fmt: skip

    def estop_like(self) -> bytes:
        return self.text(
            self.rng.choice(
                [{"engage": "true"}, {"engage": 1}, {"engage": False}, {"reset": False},
                 {"reset": "yes"}, {"engage": True, "reset": True}, {}, {"engage": None},
                 {"engage": True, "why": "test"}, {"id": self.fresh_id(), "engage": True},
                 {"id": self.fresh_id(), "reset": True}, {"engage": [True]}, {"stop": True}]
            )
        )  # fmt: skip

    def oversized(self) -> bytes:
        goal = self.valid_goal()
        goal["padding"] = "x" * (MAX_PAYLOAD_BYTES + self.rng.randint(-200, 200))
        return self.text(goal)


def _utf8(text: str) -> bytes:
    """UTF-8, except that lone surrogates are encoded as such (invalid UTF-8, on purpose)."""
    return text.encode("utf-8", errors="surrogatepass")


def readable_id(payload: bytes) -> str | None:
    """The id the daemon must answer with: the contract's rule, independent of its parser."""
    if len(payload) > MAX_PAYLOAD_BYTES:
        return None
    try:
        document = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(document, dict):
        return None
    goal_id = document.get("id")
    if isinstance(goal_id, str) and 1 <= len(goal_id) <= MAX_ID_LENGTH:
        return goal_id
    return None


@dataclass
class FuzzStream:
    """What is sent, in order, and what must come back."""

    messages: list[tuple[str, bytes]]  # (topic, payload)
    expected: Counter[str | None]  # rejected statuses per id (None: no readable id)
    valid_skipped: Counter[str]  # accidental valid payloads per topic, not sent
    strategies: Counter[str]


def fuzz_stream(seed: int, rig: Rig, topics: Sequence[str]) -> FuzzStream:
    """`PER_TOPIC` invalid payloads for each of `topics` (valid ones are counted and left out),
    shuffled together."""
    setup = load_config(rig.config)
    names, links, tool = setup.tree.joint_names, setup.tree.link_names, setup.tool_link
    assert set(names) == set(JOINTS), "the generator's joints are the sim arm's"
    rng = random.Random(seed)
    fuzzer = PayloadFuzzer(rng)
    stream = FuzzStream([], Counter(), Counter(), Counter())
    for topic in topics:
        sent = 0
        while sent < PER_TOPIC:
            strategy = rng.choices(fuzzer.strategies, fuzzer.weights)[0]
            payload = strategy()
            if topic == "goal":
                parsed: object = parse_goal(
                    payload, joint_names=names, link_names=links, default_link=tool
                )
                valid = not isinstance(parsed, Rejection)
            elif topic == "payload":
                valid = not isinstance(parse_load(payload), Rejection)
            else:
                valid = parse_estop(payload).problem is None
            if valid:
                stream.valid_skipped[topic] += 1
                continue
            stream.messages.append((topic, payload))
            # The e-stop's and the payload's statuses carry no id: they are not goals.
            stream.expected[readable_id(payload) if topic == "goal" else None] += 1
            stream.strategies[strategy.__name__] += 1
            sent += 1
    rng.shuffle(stream.messages)
    return stream
