"""`armd dashboard` serves the built dashboard and a config.json naming the broker, nothing else:
no directory listings, nothing outside its folder; a missing build or a broker URL that is not a
WebSockets URL is one line and an exit code (1, 2). Run as a real subprocess on a free port."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from email.message import Message
from pathlib import Path

import pytest

PAGE = "<!doctype html><title>armd dashboard</title>"


def _get(url: str) -> tuple[int, Message, bytes]:
    """Status, headers (case-insensitive) and body of a GET."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """`armd dashboard` on a free port (--port 0) serving a stand-in build; yields its URL."""
    dist = tmp_path / "dist"
    (dist / "assets").mkdir(parents=True)
    (dist / "index.html").write_text(PAGE, encoding="utf-8")
    (tmp_path / "secret.txt").write_text("outside the build", encoding="utf-8")
    argv = [sys.executable, "-m", "armd", "dashboard", "--port", "0", "--dir", str(dist)]
    argv += ["--broker", "ws://127.0.0.1:9001"]
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as server:
        assert server.stdout is not None
        line = server.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert match, line + server.stdout.read()
        assert "broker ws://127.0.0.1:9001" in line, line
        yield f"http://127.0.0.1:{match.group(1)}"
        server.terminate()
        server.wait(10)


def test_it_serves_the_page_and_where_the_broker_is(served: str) -> None:
    status, headers, body = _get(served + "/")
    assert (status, body.decode()) == (200, PAGE)
    assert headers["Content-Type"] == "text/html"
    assert headers["Cache-Control"] == "no-cache"  # a rebuild shows at the next reload
    status, headers, body = _get(served + "/config.json")
    assert status == 200
    assert headers["Content-Type"] == "application/json"
    assert json.loads(body) == {"broker": "ws://127.0.0.1:9001"}


@pytest.mark.parametrize("path", ["/assets/", "/../secret.txt", "/%2e%2e/secret.txt", "/nothing"])
def test_nothing_else_is_served(served: str, path: str) -> None:
    status, _, body = _get(served + path)
    assert status == 404, body
    assert b"outside the build" not in body


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "armd", "dashboard", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)


def test_a_missing_build_says_how_to_build_it(tmp_path: Path) -> None:
    done = _run("--port", "0", "--dir", str(tmp_path / "nowhere"))
    assert done.returncode == 1
    assert "index.html not found: build the dashboard first (`make dashboard`" in done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (
            ["--broker", "http://127.0.0.1:9001"],
            "--broker 'http://127.0.0.1:9001' must be a WebSockets URL",
        ),
        (["--broker", "ws://"], "must be a WebSockets URL"),
        (["--port", "70000"], "--port 70000 must be in 0..65535"),
    ],
)
def test_wrong_arguments_are_one_line_and_exit_2(args: list[str], words: str) -> None:
    done = _run(*args)
    assert done.returncode == 2
    assert words in done.stderr, done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
