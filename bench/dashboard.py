"""The web dashboard's size and load time.

    python bench/dashboard.py [--loads 10]

Size: dashboard/dist/index.html (the whole build: script and styles inline), raw and gzipped
(level 9, as a server or proxy would send it). Load time: Debian's chromium (headless, through
Playwright) loads the page --loads times, each in a fresh browser context (an empty cache), from
the in-process server of `armd dashboard`, talking MQTT over WebSockets to a private Mosquitto with
the daemon on config/sim.yaml; for each load, the page's own timestamps (ms since navigation
start, `window.armdDashboard`): the broker connected, the model received, the first frame that
shows the arm. Build the dashboard first (`make dashboard`). Reports only.
"""

from __future__ import annotations

import argparse
import gzip
import statistics
import sys
import tempfile
import threading
from pathlib import Path

# bench/ holds scripts named like packages (drivers.py, kinematics.py): keep it off the path while
# importing armd's packages, then put it back for the sibling bench modules.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
from playwright.sync_api import sync_playwright  # noqa: E402

from armd.cli.dashboard_cmd import DIST, make_server  # noqa: E402

sys.path.append(str(_HERE))
import harness  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
MARKS = ("connectedAt", "modelAt", "firstArmFrameAt")


def size() -> str:
    page = (DIST / "index.html").read_bytes()
    packed = gzip.compress(page, compresslevel=9)
    kib = len(page) / 1024, len(packed) / 1024
    return f"bundle: dashboard/dist/index.html {kib[0]:.0f} KiB, gzip {kib[1]:.0f} KiB"


def load_times(url: str, loads: int) -> dict[str, list[float]]:
    found: dict[str, list[float]] = {mark: [] for mark in MARKS}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        for _ in range(loads):
            context = browser.new_context(viewport={"width": 1400, "height": 820})
            page = context.new_page()
            page.goto(url)
            page.wait_for_function("window.armdDashboard.firstArmFrameAt !== null", timeout=30_000)
            metrics = page.evaluate("window.armdDashboard")
            for mark in MARKS:
                found[mark].append(float(metrics[mark]))
            context.close()
        browser.close()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loads", type=int, default=10)
    args = parser.parse_args()
    if not (DIST / "index.html").exists():
        sys.exit("dashboard/dist is not built: run `make dashboard` first")
    print(harness.machine())
    print(size())
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        ws_port = harness.free_port()
        # socket_domain ipv4: Mosquitto 2.0.11 binds WebSockets to every address without it.
        websockets = [
            f"listener {ws_port} {harness.HOST}",
            "protocol websockets",
            "socket_domain ipv4",
        ]
        with harness.mosquitto(workdir, nodelay=True, options=websockets) as port:
            config = harness.write_config(workdir, 250, port)
            with harness.daemon_process(config, workdir / "armd.log"):
                server = make_server(harness.HOST, 0, DIST, f"ws://{harness.HOST}:{ws_port}")
                threading.Thread(target=server.serve_forever, daemon=True).start()
                try:
                    url = f"http://{harness.HOST}:{server.server_address[1]}/"
                    found = load_times(url, args.loads)
                finally:
                    server.shutdown()
    print(
        f"load, ms since navigation start ({args.loads} loads, fresh cache each): median [min, max]"
    )
    for mark, values in found.items():
        print(
            f"  {mark:16} {statistics.median(values):6.0f}  [{min(values):.0f}, {max(values):.0f}]"
        )


if __name__ == "__main__":
    main()
