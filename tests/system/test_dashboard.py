"""The web dashboard in a real browser: Debian's chromium driven by Playwright, the page served by
``armd dashboard``, talking MQTT over WebSockets to a real Mosquitto, with the daemon on the
simulated UR5. What a person would check: the arm appears online and is drawn, a slider moves it,
the e-stop button stops it, a rejection shows its reason, an injected fault shows. The page logs
no error in the browser's console and raises none, neither there nor served by the broker itself
(Mosquitto's ``http_dir`` on its WebSockets listener, as `make run` serves it); both servers
listen on loopback only.

Skipped, saying why, only where Debian's chromium or Node.js (to build the dashboard) cannot be
installed (`make test` installs both: scripts/ensure-browser-test.sh). The page's load time
(navigation to the first frame that shows the arm) is printed and recorded as a property of the
test, never asserted. With ``ARMD_DOCS_SCREENSHOTS=1`` the screenshots replace those of
docs/images/ (shown in the README and docs/dashboard.md); otherwise they go to the test's folder.
The page behind the broker's ACL is test_dashboard_acl.py's, on a broker and daemon of its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import (
    Browser,
    ConsoleMessage,
    Page,
    Playwright,
    Response,
    expect,
    sync_playwright,
)
from playwright.sync_api import (
    TimeoutError as PlaywrightTimeoutError,
)

from tests.broker import MosquittoBroker
from tests.system.helpers import ROOT, SIM_WATCHDOG_S, Rig, attach_diagnostics, start_rig
from tests.system.listening import exposed, listening
from tests.system.probe import ARM, WAIT_S, MqttProbe, at_rest, joint_positions

CHROMIUM = Path("/usr/bin/chromium")
DIST = ROOT / "dashboard" / "dist"
SCREENSHOTS = ROOT / "docs" / "images"
JOINT = "elbow_joint"
# The UR5 has no gripper: its wrist roll stands in for one, so the page shows the gripper's buttons.
GRIPPER = {"gripper": {"joint": "wrist_3_joint", "open": 0.6, "closed": 0.0}}
UI_WAIT_MS = WAIT_S * 1000  # the page follows the 25 Hz telemetry; generous on a loaded machine


def _dashboard_built() -> None:
    """Build the dashboard if a source changed (a no-op when current); skip without Node.js."""
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed (scripts/ensure-browser-test.sh)")
    done = subprocess.run(
        [ROOT / "scripts" / "build-dashboard.sh"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    if not (DIST / "index.html").exists():
        pytest.skip(done.stdout.strip())  # "dashboard: skipped: Node.js ... (why)"


@dataclass
class Dashboard:
    rig: Rig
    browser: Browser
    page: Page
    url: str  # served by `armd dashboard`
    screenshots: Path
    load_ms: float
    errors: list[str]  # the page's console errors and uncaught script errors

    @property
    def broker_url(self) -> str:
        """The page served by Mosquitto itself (``http_dir`` on its WebSockets listener)."""
        return f"http://127.0.0.1:{self.rig.broker.websockets_port}/"

    def screenshot(self, name: str) -> None:
        self.page.screenshot(path=self.screenshots / name)


@contextlib.contextmanager
def _served(directory: Path, broker: MosquittoBroker) -> Iterator[str]:
    """``armd dashboard`` on a free port, pointing the page at the broker's WebSockets port;
    yields the page's URL."""
    argv = [sys.executable, "-m", "armd", "dashboard", "--port", "0"]
    argv += ["--broker", f"ws://127.0.0.1:{broker.websockets_port}"]
    with (directory / "dashboard.out").open("w") as log:
        server = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:\d+/", line)
        assert match, f"armd dashboard did not start: {line}"
        sockets = listening(server.pid)
        assert exposed(sockets) == [], f"armd dashboard listens beyond loopback: {sockets}"
        yield match.group(0)
    finally:
        server.terminate()
        server.wait(10)


@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    """Playwright, once per module (its synchronous API allows one at a time)."""
    _dashboard_built()
    with sync_playwright() as driver:
        yield driver


def _launch(playwright: Playwright, *args: str) -> Browser:
    """Debian's chromium, headless (never a browser Playwright downloads)."""
    return playwright.chromium.launch(executable_path=str(CHROMIUM), args=list(args))


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    chromium = _launch(playwright)
    yield chromium
    chromium.close()


def _watch(page: Page, errors: list[str]) -> Page:
    """Append the page's console errors (a failed request among them: a 404 is one) and its
    uncaught script errors to `errors`."""

    def logged(message: ConsoleMessage) -> None:
        if message.type == "error":
            errors.append(f"console: {message.text} ({message.location['url']})")

    page.on("console", logged)
    page.on("pageerror", lambda error: errors.append(f"uncaught: {error}"))
    return page


def _open(browser: Browser, url: str, errors: list[str]) -> Page:
    """A new page at `url`, its errors appended to `errors` (`_watch`). The page counts as open
    once its document has arrived (each test then waits for what it needs to see, within
    `UI_WAIT_MS`); if it does not arrive, the failure says whether the server answers a plain
    request, which tells a hung browser from a hung server."""
    page = _watch(browser.new_page(viewport={"width": 1400, "height": 820}), errors)
    try:
        page.goto(url, wait_until="commit", timeout=UI_WAIT_MS)
    except PlaywrightTimeoutError as exc:
        raise AssertionError(
            f"chromium did not receive {url} in {WAIT_S:.0f} s; {_plain_get(url)}"
        ) from exc
    return page


def _plain_get(url: str) -> str:
    start = time.monotonic()
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            size = len(response.read())
    except OSError as exc:
        return f"the server did not answer a plain GET either: {exc!r}"
    return f"a plain GET got {size} bytes in {time.monotonic() - start:.2f} s"


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory, browser: Browser) -> Iterator[Dashboard]:
    directory = tmp_path_factory.mktemp("dashboard")
    screenshots = SCREENSHOTS if os.environ.get("ARMD_DOCS_SCREENSHOTS") == "1" else directory
    # The broker serves the page too, as `make run` has it (http_dir on its WebSockets listener).
    with MosquittoBroker(directory / "mosquitto", websockets=True, http_dir=DIST) as broker:
        rig = start_rig(directory, broker, overrides=GRIPPER)
        try:
            with _served(directory, broker) as url:
                errors: list[str] = []
                page = _open(browser, url, errors)
                page.wait_for_function(
                    "window.armdDashboard && window.armdDashboard.firstArmFrameAt !== null",
                    timeout=UI_WAIT_MS,
                )
                load_ms = float(page.evaluate("window.armdDashboard.firstArmFrameAt"))
                yield Dashboard(rig, browser, page, url, screenshots, load_ms, errors)
        finally:
            rig.close()


def _first_status(probe: MqttProbe, since: int, status: str | None = None) -> dict[str, Any]:
    """The first ``goal/status`` after `since` (with that `status`, when given): the page makes
    the goal ids, the test learns them from the statuses."""

    def found() -> dict[str, Any] | None:
        statuses = [m.json() for m in probe.on("goal/status", since)]
        return next((s for s in statuses if status in (None, s["status"])), None)

    return probe.wait_for(found, what=f"a {status or 'goal'} status after the page's command")


@pytest.fixture
def ui(dashboard: Dashboard, request: pytest.FixtureRequest) -> Iterator[Dashboard]:
    """The page, with the arm at rest (holding) and the broker's and daemon's logs on failure;
    no console error and no uncaught script error in the page afterwards."""
    attach_diagnostics(request, dashboard.rig)
    dashboard.rig.probe.wait_state(at_rest, what="the arm at rest")
    yield dashboard
    assert dashboard.errors == [], "errors in the page"


# Pixels of the 3D view: how many differ from the background, how many have the joints' blue.
CANVAS_PIXELS = """() => {
    const canvas = document.querySelector('#view canvas');
    const copy = document.createElement('canvas');
    copy.width = canvas.width; copy.height = canvas.height;
    const context = copy.getContext('2d');
    context.drawImage(canvas, 0, 0);
    const data = context.getImageData(0, 0, copy.width, copy.height).data;
    let drawn = 0, joints = 0;
    for (let i = 0; i < data.length; i += 4) {
        const [r, g, b] = [data[i], data[i + 1], data[i + 2]];
        if (Math.abs(r - 0x1d) + Math.abs(g - 0x23) + Math.abs(b - 0x2b) > 24) drawn++;
        if (b > 150 && b > r + 60 && g > 70) joints++;
    }
    return {total: data.length / 4, drawn, joints};
}"""


def test_the_arm_appears_online_and_is_drawn(
    ui: Dashboard, record_property: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    arm = ui.page.locator('button.arm[data-arm="ur5-sim"]')
    expect(arm).to_have_attribute("data-state", "online")
    expect(arm).to_have_class(re.compile(r"\bselected\b"))  # the only online arm: shown at once
    expect(ui.page.locator("#mode")).to_have_text("holding")
    expect(ui.page.locator("#joints input[type=range]")).to_have_count(6)
    expect(ui.page.locator("#named button")).to_have_text(["home", "ready"])
    pixels = ui.page.evaluate(CANVAS_PIXELS)
    assert pixels["drawn"] > 0.05 * pixels["total"], pixels  # floor grid and arm, not blank
    assert pixels["joints"] > 500, pixels  # the joints' blue cylinders are there
    ui.screenshot("dashboard.png")
    record_property("load_ms", round(ui.load_ms))
    with capsys.disabled():
        print(f"\ndashboard: navigation to the first frame showing the arm: {ui.load_ms:.0f} ms")


def test_a_slider_moves_the_arm(ui: Dashboard) -> None:
    probe = ui.rig.probe
    target = round(joint_positions(probe.latest_state())[JOINT] - 0.4, 2)
    since = probe.mark()
    ui.page.locator(f'input[data-joint="{JOINT}"]').fill(str(target))
    goal = _first_status(probe, since)
    assert goal["status"] == "accepted", goal
    assert probe.wait_status(goal["id"], since=since)["status"] == "succeeded"
    state = probe.wait_state(at_rest, what="the arm at rest")
    assert abs(joint_positions(state)[JOINT] - target) < 0.005  # joint_tolerance
    log = ui.page.locator("#statuses li").first
    expect(log).to_contain_text(f"succeeded joints {JOINT}={target:.2f}", timeout=UI_WAIT_MS)


# Where the Cartesian target's magenta sphere is on the screen (its pixels' centre), or null.
TARGET_ON_SCREEN = """() => {
    const canvas = document.querySelector('#view canvas');
    const copy = document.createElement('canvas');
    copy.width = canvas.width; copy.height = canvas.height;
    const context = copy.getContext('2d');
    context.drawImage(canvas, 0, 0);
    const data = context.getImageData(0, 0, copy.width, copy.height).data;
    let n = 0, x = 0, y = 0;
    for (let i = 0; i < data.length; i += 4) {
        const [r, g, b] = [data[i], data[i + 1], data[i + 2]];
        if (r > 200 && b > 200 && g < 120) {
            n++;
            x += (i / 4) % copy.width;
            y += Math.floor(i / 4 / copy.width);
        }
    }
    const box = canvas.getBoundingClientRect();
    const scale = box.width / copy.width;
    return n < 20 ? null : {x: box.left + scale * x / n, y: box.top + scale * y / n, pixels: n};
}"""


def test_the_cartesian_target_is_dragged_and_sent_as_a_pose_goal(ui: Dashboard) -> None:
    probe = ui.rig.probe
    page = ui.page
    before = probe.latest_state()["tcp"]["position"]
    page.locator("#target-from-tcp").click()  # the target appears at the TCP, with its gizmo
    expect(page.locator("#target-show")).to_be_checked()
    page.wait_for_function(f"({TARGET_ON_SCREEN})() !== null", timeout=UI_WAIT_MS)
    start = page.evaluate(TARGET_ON_SCREEN)
    # Drag the gizmo's centre handle 40 px down: the target moves in the view's plane.
    page.mouse.move(start["x"], start["y"])
    page.mouse.down()
    for step in range(1, 11):
        page.mouse.move(start["x"], start["y"] + 4 * step)
    page.mouse.up()
    moved = page.evaluate(TARGET_ON_SCREEN)
    ui.screenshot("dashboard-target.png")
    assert moved["y"] > start["y"] + 20, (start, moved)
    page.locator("#target-motion").select_option("linear")
    since = probe.mark()
    page.locator("#target-send").click()
    accepted = _first_status(probe, since)
    assert accepted["status"] == "accepted", accepted
    assert probe.wait_status(accepted["id"], since=since)["status"] == "succeeded"
    after = probe.wait_state(at_rest, what="the arm at rest")["tcp"]["position"]
    assert after[2] < before[2] - 0.02, (before, after)  # dragged down on the screen: lower
    expect(page.locator("#statuses li").first).to_contain_text("succeeded pose (linear)")
    page.locator("#target-show").uncheck()


def test_an_arm_behind_a_bridge_that_is_down_shows_unreachable(ui: Dashboard) -> None:
    """docs/fleet.md: with `0` on ``armd/<name>/bridge`` the arm's retained availability is stale;
    the page says the arm is unreachable until the bridge is back (`1`)."""
    arm = ui.page.locator('button.arm[data-arm="ur5-sim"]')
    ui.rig.probe.publish("bridge", "0")
    expect(arm).to_have_attribute("data-state", "unreachable", timeout=UI_WAIT_MS)
    expect(ui.page.locator("#mode")).to_have_text("unreachable")
    ui.rig.probe.publish("bridge", "1")
    expect(arm).to_have_attribute("data-state", "online", timeout=UI_WAIT_MS)
    expect(ui.page.locator("#mode")).to_have_text("holding", timeout=UI_WAIT_MS)


def test_the_gripper_buttons_open_and_close_it(ui: Dashboard) -> None:
    probe = ui.rig.probe
    joint, opened = GRIPPER["gripper"]["joint"], GRIPPER["gripper"]["open"]
    for button, position in (("#gripper-open", opened), ("#gripper-close", 0.0)):
        since = probe.mark()
        ui.page.locator(button).click()
        accepted = _first_status(probe, since)
        assert accepted["status"] == "accepted", accepted
        assert probe.wait_status(accepted["id"], since=since)["status"] == "succeeded"
        state = probe.wait_state(at_rest, what="the arm at rest")
        assert abs(joint_positions(state)[joint] - position) < 0.005
    expect(ui.page.locator("#statuses li").first).to_contain_text("succeeded gripper close")


# The `collision` key of `model` (docs/mqtt.md#model) for the UR5 as armd makes it
# (kinematics.collision's CollisionModel.to_dict of config/collision/ur5.yaml), with a keep-out
# box and the workspace besides the table. Published by the test where the daemon's model has
# none (a config without a collision section).
UR5_COLLISION: dict[str, Any] = json.loads(
    (Path(__file__).parent / "data" / "ur5_collision.json").read_text(encoding="utf-8")
)

# What the latest frame drew of the collision model (window.armdDashboard.collision), once `done`.
COLLISION_DRAWN = (
    "(done) => { const c = window.armdDashboard.collision; return done(c) ? c : null; }"
)
# Pixels of the 3D view in the highlight's red.
RED_PIXELS = """() => {
    const canvas = document.querySelector('#view canvas');
    const copy = document.createElement('canvas');
    copy.width = canvas.width; copy.height = canvas.height;
    const context = copy.getContext('2d');
    context.drawImage(canvas, 0, 0);
    const data = context.getImageData(0, 0, copy.width, copy.height).data;
    let red = 0;
    for (let i = 0; i < data.length; i += 4) {
        const [r, g, b] = [data[i], data[i + 1], data[i + 2]];
        if (r > 90 && r > 2 * g && r > 2 * b) red++;
    }
    return red;
}"""


def _drawn(page: Page, done: str) -> dict[str, Any]:
    """What the page drew of the collision model, once the JavaScript predicate `done` holds."""
    handle = page.wait_for_function(f"({COLLISION_DRAWN})({done})", timeout=UI_WAIT_MS, polling=100)
    drawn: dict[str, Any] = handle.json_value()
    return drawn


def _retain(probe: MqttProbe, topic: str, payload: bytes | str) -> None:
    """Publish a retained message on the arm's `topic`, as the daemon does `model`."""
    info = probe.client.publish(probe.prefix + topic, payload, qos=1, retain=True)
    info.wait_for_publish(WAIT_S)
    assert info.is_published(), f"publishing on {topic} failed"


def test_the_collision_model_is_drawn_and_a_collision_rejection_highlights_its_pair(
    ui: Dashboard,
) -> None:
    """The `collision` key of `model` drawn when toggled (shapes on the links, the environment),
    a goal rejected for a collision highlights the two bodies it names until the next goal, and
    a malformed key is left out with a notice (and no console error)."""
    probe, page = ui.rig.probe, ui.page
    retained = probe.on("model")[-1].payload  # the daemon's
    model = json.loads(retained)
    collision: dict[str, Any] = model.get("collision") or UR5_COLLISION
    if "collision" not in model:
        _retain(probe, "model", json.dumps({**model, "collision": collision}))
    links = {link: len(shapes) for link, shapes in collision["links"].items()}
    environment = {
        obj.get("name", "workspace"): obj["type"] for obj in collision.get("environment", [])
    }
    try:
        panel = page.locator("#collision-panel")
        expect(panel).to_be_visible(timeout=UI_WAIT_MS)
        expect(panel).to_contain_text(f"on {len(links)} links")
        expect(page.locator("#collision-notice")).to_be_hidden()
        drawn = _drawn(page, "(c) => c !== null")
        assert drawn["links"] == links, drawn
        assert drawn["environment"] == environment, drawn
        assert (drawn["shown"], drawn["visible"]) == (False, []), drawn  # off until asked for

        page.locator("#collision-show").check()
        drawn = _drawn(page, "(c) => c.shown")
        assert sorted(drawn["visible"]) == sorted([*links, *environment]), drawn
        page.locator("#collision-show").uncheck()
        drawn = _drawn(page, "(c) => !c.shown")
        assert drawn["visible"] == [], drawn
        red_before = page.evaluate(RED_PIXELS)

        # A goal rejected for a collision (as armd words it): its pair is drawn in red.
        link = "wrist_3_link" if "wrist_3_link" in links else next(iter(links))
        other = next(iter(environment), next(name for name in links if name != link))
        reason = f"collision: {link} with {other} at 43 % of the path (0.004 m inside the margin)"
        status = {"id": "dash-test-collision", "status": "rejected", "reason": reason}
        probe.publish("goal/status", json.dumps(status))
        expect(page.locator("#rejection")).to_contain_text(reason, timeout=UI_WAIT_MS)
        latest = page.locator("#collision-latest")
        expect(latest).to_contain_text(reason)
        expect(latest).to_have_attribute("data-pair", f"{link} {other}")
        drawn = _drawn(page, "(c) => c.highlighted.length > 0")
        assert sorted(drawn["highlighted"]) == sorted([link, other]), drawn
        assert sorted(drawn["visible"]) == sorted([link, other]), drawn  # shown though toggled off
        red = page.evaluate(RED_PIXELS)
        assert red > red_before + 500, (red_before, red)
        page.locator("#collision-show").check()
        ui.screenshot("dashboard-collision.png")
        page.locator("#collision-show").uncheck()

        page.locator("#stop").click()  # the next goal: the pair is no longer highlighted
        drawn = _drawn(page, "(c) => c.highlighted.length === 0")
        assert drawn["visible"] == [], drawn

        # A malformed collision key: the arm is drawn without it, a notice says why.
        _retain(probe, "model", json.dumps({**model, "collision": {**collision, "margin": "wide"}}))
        notice = page.locator("#collision-notice")
        expect(notice).to_be_visible(timeout=UI_WAIT_MS)
        expect(notice).to_contain_text('malformed, not drawn: collision: margin: "wide"')
        expect(page.locator("#collision-show")).to_be_disabled()
        page.wait_for_function("window.armdDashboard.collision === null", timeout=UI_WAIT_MS)
        expect(page.locator("#mode")).to_have_text("holding")
    finally:
        _retain(probe, "model", retained)
    if "collision" not in model:  # the daemon's model again: nothing to draw
        expect(page.locator("#collision-panel")).to_be_hidden(timeout=UI_WAIT_MS)
        page.wait_for_function("window.armdDashboard.collision === null", timeout=UI_WAIT_MS)


def test_a_stream_held_before_a_collision_shows_its_pair(ui: Dashboard) -> None:
    """`state.collision_hold` turns its pair red and says so over the view while the state
    carries it. Replayed by the test as another arm (the daemon's states come 25 times a second
    and carry a hold only when a stream runs into a collision), then the UR5 chosen again."""
    page, broker = ui.page, ui.rig.broker
    model = ui.rig.probe.on("model")[-1].json()
    state = ui.rig.probe.latest_state()
    replay = MqttProbe(broker.host, broker.port, arm="replayed-arm")
    try:
        _retain(replay, "model", json.dumps({**model, "collision": UR5_COLLISION}))
        _retain(replay, "availability", "online")
        page.locator('button.arm[data-arm="replayed-arm"]').click()
        replay.publish("state", json.dumps(state))
        expect(page.locator("#mode")).to_have_text("holding", timeout=UI_WAIT_MS)
        _drawn(page, "(c) => c !== null && c.highlighted.length === 0")

        hold = {"pair": ["forearm_link", "table"], "distance": 0.004}
        replay.publish("state", json.dumps({**state, "mode": "moving", "collision_hold": hold}))
        banner = page.locator("#collision-hold")
        expect(banner).to_have_text(
            "held before a collision: forearm_link with table, 0.004 m", timeout=UI_WAIT_MS
        )
        drawn = _drawn(page, "(c) => c.highlighted.length > 0")
        assert sorted(drawn["highlighted"]) == ["forearm_link", "table"], drawn

        replay.publish("state", json.dumps(state))  # the hold is over
        expect(banner).to_be_hidden(timeout=UI_WAIT_MS)
        _drawn(page, "(c) => c.highlighted.length === 0")
    finally:
        for topic in ("availability", "model"):
            _retain(replay, topic, b"")  # no retained arm left for the pages that follow
        replay.close()
    page.locator(f'button.arm[data-arm="{ARM}"]').click()
    expect(page.locator("#mode")).to_have_text("holding", timeout=UI_WAIT_MS)
    expect(page.locator("#collision-hold")).to_be_hidden()


def test_the_estop_button_stops_the_arm_and_a_rejection_shows_its_reason(ui: Dashboard) -> None:
    probe = ui.rig.probe
    page = ui.page
    # From home, where the earlier tests' moves do not matter: bending the elbow back 1 rad
    # lifts the forearm, a path clear of the table the collision check would refuse.
    home = {"id": "dash-estop-home", "type": "named", "name": "home"}
    assert probe.run_goal(home)["status"] == "succeeded"
    page.locator("#speed").fill("0.05")  # a slow move: still moving when the e-stop comes
    target = round(joint_positions(probe.latest_state())[JOINT] - 1.0, 2)
    since = probe.mark()
    page.locator(f'input[data-joint="{JOINT}"]').fill(str(target))
    probe.wait_mode("moving", since=since)
    page.locator("#estop").click()
    state = probe.wait_state(lambda s: at_rest(s, mode="estop"), what="at rest in estop")
    assert abs(joint_positions(state)[JOINT] - target) > 0.1, "stopped before its target"
    expect(page.locator("#mode")).to_have_text("estop", timeout=UI_WAIT_MS)
    _first_status(probe, since, "aborted")  # the slow move's goal

    # A goal during the e-stop is rejected by the daemon: the page shows the reason it gave.
    since = probe.mark()
    page.locator('#named button[data-pose="home"]').click()
    rejected = _first_status(probe, since, "rejected")
    assert "reset first" in rejected["reason"], rejected
    rejection = page.locator("#rejection")
    expect(rejection).to_be_visible()
    expect(rejection).to_contain_text(f"rejected named home: {rejected['reason']}")
    ui.screenshot("dashboard-estop.png")

    since = probe.mark()
    page.locator("#reset").click()
    probe.wait_mode("holding", since=since)
    expect(page.locator("#mode")).to_have_text("holding", timeout=UI_WAIT_MS)
    page.locator("#speed").fill("1")


def test_an_injected_fault_shows_until_reset(ui: Dashboard) -> None:
    probe = ui.rig.probe
    # The control process stalls longer than the simulated devices' watchdog: a device fault.
    since = probe.mark()
    pid = ui.rig.daemon.control_pid
    os.kill(pid, signal.SIGSTOP)
    time.sleep(2 * SIM_WATCHDOG_S)
    os.kill(pid, signal.SIGCONT)
    fault = probe.wait_for(
        lambda: next((m.json() for m in probe.on("fault", since) if m.text), None),
        what="a fault",
    )
    banner = ui.page.locator("#fault")
    expect(banner).to_be_visible(timeout=UI_WAIT_MS)
    expect(banner).to_contain_text(f"FAULT {fault['code']}")
    expect(banner).to_contain_text(fault["message"])
    expect(ui.page.locator("#status-fault")).to_contain_text(fault["code"])
    ui.screenshot("dashboard-fault.png")

    since = probe.mark()
    ui.page.locator("#reset").click()
    probe.wait_for(lambda: "" in [m.text for m in probe.on("fault", since)], what="fault cleared")
    expect(banner).to_be_hidden(timeout=UI_WAIT_MS)
    expect(ui.page.locator("#status-fault")).to_have_text("none")
    probe.wait_mode("holding", since=since)


def test_without_webgl_the_estop_and_everything_but_the_view_work(
    ui: Dashboard, playwright: Playwright
) -> None:
    """A browser without WebGL (or with a broken GPU stack) still shows the arm and stops it,
    and its console stays free of errors. The page served by the broker this time (http_dir, as
    `make run` serves it): the other tests drive the one of `armd dashboard`."""
    probe = ui.rig.probe
    no_3d = _launch(playwright, "--disable-3d-apis")
    try:
        errors: list[str] = []
        page = _open(no_3d, ui.broker_url, errors)
        expect(page.locator("#overlay")).to_contain_text("No 3D view", timeout=UI_WAIT_MS)
        expect(page.locator("#overlay")).to_contain_text("no WebGL 2")
        expect(page.locator("#mode")).to_have_text("holding", timeout=UI_WAIT_MS)
        expect(page.locator("#joints input[type=range]")).to_have_count(6)
        since = probe.mark()
        page.locator("#estop").click()
        probe.wait_mode("estop", since=since)
        expect(page.locator("#mode")).to_have_text("estop", timeout=UI_WAIT_MS)
        since = probe.mark()
        page.locator("#reset").click()
        probe.wait_mode("holding", since=since)
        assert errors == [], "errors in the page"
    finally:
        no_3d.close()


@pytest.mark.parametrize("server", ["armd dashboard", "mosquitto http_dir"])
def test_a_fresh_load_fetches_nothing_from_elsewhere_and_logs_no_error(
    dashboard: Dashboard, server: str
) -> None:
    """Offline: every request of a fresh load goes to the page's server or the broker, and is
    answered (no 404: `config.json` is part of the build); nothing in the console is an error,
    nothing is thrown; the arm is drawn. Whichever serves the page."""
    url = dashboard.url if server == "armd dashboard" else dashboard.broker_url
    requests: list[str] = []
    failed: list[str] = []
    errors: list[str] = []
    page = _watch(dashboard.browser.new_page(), errors)
    page.on("request", lambda request: requests.append(request.url))
    page.on("requestfailed", lambda request: failed.append(f"{request.url}: {request.failure}"))

    def answered(response: Response) -> None:
        if response.status >= 400:
            failed.append(f"{response.url}: {response.status}")

    page.on("response", answered)
    page.goto(url)
    page.wait_for_function("window.armdDashboard.firstArmFrameAt !== null", timeout=UI_WAIT_MS)
    expect(page.locator("#mode")).to_have_text("holding")
    page.close()
    ws = f"ws://127.0.0.1:{dashboard.rig.broker.websockets_port}"
    own = (url, f"blob:{url}", ws)  # blob: made by the page itself
    outside = [request for request in requests if not request.startswith(own)]
    assert f"{url}config.json" in requests
    assert outside == [], outside
    assert errors == [], "errors in the page"
    assert failed == [], failed
