"""`armd dashboard`: serve the web dashboard (dashboard/dist, built by ``make run`` or ``make
dashboard``) over HTTP, with a ``config.json`` that tells the page where the broker's WebSockets
listener is.

The page is static: it talks to the broker itself (MQTT over WebSockets), so this server only
hands out files. A thread per request (stdlib `http.server`), loopback by default: the dashboard
can command the arm as far as the broker lets its user, so exposing it (``--host 0.0.0.0``) is a
deliberate choice, and the broker's accounts and ACL (config/mosquitto/) are what protect the arm.
"""

from __future__ import annotations

import argparse
import functools
import io
import json
import logging
import os
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from armd.cli.common import EXIT_OK, UsageError, guarded

__all__ = ["DIST", "make_server", "register"]

DIST = Path(__file__).resolve().parents[2] / "dashboard" / "dist"
"""Where the build lands in a checkout (dashboard/dist; not part of an installed wheel)."""

DEFAULT_BROKER = "ws://{hostname}:9001"
"""``{hostname}`` is replaced by the page with its own host name: a browser on another machine
then reaches the broker next to this server, one on this machine reaches 127.0.0.1."""

logger = logging.getLogger(__name__)


def register(subparsers: Any) -> None:
    """Add ``dashboard`` to the CLI's subparsers."""
    parser = subparsers.add_parser(
        "dashboard",
        help="serve the web dashboard (see and drive the arms from a browser)",
        description="Serve the web dashboard (dashboard/dist) over HTTP until Ctrl-C. The page "
        "connects to the broker's MQTT-over-WebSockets listener given by --broker (docs/"
        "dashboard.md); a ?broker=ws://... in the page's address overrides it.",
    )
    parser.add_argument("--port", type=int, default=8080, help="HTTP port (default 8080)")
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1; 0.0.0.0 exposes the page to the network)",
    )
    parser.add_argument(
        "--broker",
        default=DEFAULT_BROKER,
        help="the broker's WebSockets URL, ws://HOST:PORT or wss://... (default "
        "ws://{hostname}:9001, {hostname} being the page's own host)",
    )
    parser.add_argument(
        "--dir", type=Path, default=DIST, help="the built dashboard (default: dashboard/dist)"
    )
    parser.set_defaults(func=_dashboard)


class _Handler(SimpleHTTPRequestHandler):
    """Files of the build, ``config.json`` from the command line, no directory listings, and
    requests logged at debug level (not one stderr line each)."""

    def __init__(self, *args: Any, config: bytes, **kwargs: Any) -> None:
        self._config = config
        super().__init__(*args, **kwargs)

    def do_GET(self) -> None:
        if urlsplit(self.path).path == "/config.json":
            self._send_config()
        else:
            super().do_GET()

    def _send_config(self) -> None:
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self._config)))
        self.end_headers()
        self.wfile.write(self._config)

    def end_headers(self) -> None:
        # The build is one index.html: revalidated on every load, a rebuild or a new --broker
        # shows at the next reload.
        self.send_header("Cache-Control", "no-cache")
        self.send_header("X-Content-Type-Options", "nosniff")
        super().end_headers()

    def list_directory(self, path: str | os.PathLike[str]) -> io.BytesIO | None:
        self.send_error(HTTPStatus.NOT_FOUND, "No directory listings")
        return None

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s %s", self.address_string(), format % args)


def _check_broker(url: str) -> str:
    parts = urlsplit(url.replace("{hostname}", "host"))
    if parts.scheme not in ("ws", "wss") or not parts.hostname:
        raise UsageError(f"--broker {url!r} must be a WebSockets URL, ws://HOST:PORT or wss://...")
    return url


def make_server(host: str, port: int, directory: Path, broker: str) -> ThreadingHTTPServer:
    """An HTTP server of `directory` plus ``config.json`` ({"broker": broker}); not yet serving."""
    config = json.dumps({"broker": broker}).encode()
    handler = functools.partial(_Handler, directory=str(directory), config=config)
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server


@guarded(OSError, context=lambda args: "dashboard")
def _dashboard(args: argparse.Namespace) -> int:
    broker = _check_broker(args.broker)
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port} must be in 0..65535")
    directory: Path = args.dir
    if not (directory / "index.html").is_file():
        raise FileNotFoundError(
            f"{directory / 'index.html'} not found: build the dashboard first (`make dashboard`, "
            "or `npm ci && npm run build` in dashboard/; Node.js >= 20.19)"
        )
    try:
        server = make_server(args.host, args.port, directory, broker)
    except OSError as exc:
        raise OSError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from exc
    port = server.server_address[1]
    print(
        f"serving the dashboard on http://{args.host}:{port}/ (broker {broker}); Ctrl-C stops",
        flush=True,
    )
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
    return EXIT_OK
