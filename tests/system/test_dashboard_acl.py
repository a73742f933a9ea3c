"""The web dashboard behind config/mosquitto/armd.acl, in a real browser (Debian's chromium driven
by Playwright, the page served by ``armd dashboard``): a broker with accounts and the ACL and a
daemon of its own, so that this module runs beside test_dashboard.py's (a worker each), whose
helpers it uses. Skipped like it where chromium or Node.js cannot be installed."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.broker import MosquittoBroker, make_password_file
from tests.system.helpers import attach_diagnostics, start_rig
from tests.system.probe import ARM
from tests.system.test_dashboard import (
    UI_WAIT_MS,
    _dashboard_built,
    _first_status,
    _launch,
    _open,
    _served,
)
from tests.system.test_security import ACL, DASHBOARD, OPERATOR, daemon_mqtt


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's chromium, headless, once per module (test_dashboard.py's own is its module's)."""
    _dashboard_built()
    with sync_playwright() as driver:
        chromium = _launch(driver)
        yield chromium
        chromium.close()


def _log_in(page: Page, user: str, password: str) -> None:
    page.locator("#broker-user").fill(user)
    page.locator("#broker-password").fill(password)
    page.locator("#broker-form button[type=submit]").click()


def test_with_the_acl_the_read_only_account_is_refused_and_the_operator_served(
    tmp_path: Path, request: pytest.FixtureRequest, browser: Browser
) -> None:
    """config/mosquitto/armd.acl: anonymous is refused at connection, the read-only
    ``dashboard`` account sees the arm but its goal is refused by the broker (shown with the
    reason, never reaching the daemon), the ``operator`` account drives the arm."""
    passwords = {user: secrets.token_urlsafe(16) for user in (ARM, OPERATOR, DASHBOARD)}
    accounts = make_password_file(tmp_path / "passwd", passwords)
    acl = [f"acl_file {ACL}"]
    broker = MosquittoBroker(
        tmp_path / "mosquitto", password_file=accounts, websockets=True, extra_config=acl
    )
    with broker:
        rig = start_rig(
            tmp_path / "arm",
            broker,
            overrides=daemon_mqtt(tmp_path, passwords[ARM], None),
            probe_options={"username": OPERATOR, "password": passwords[OPERATOR]},
        )
        attach_diagnostics(request, rig)
        try:
            with _served(tmp_path, broker) as url:
                errors: list[str] = []
                page = _open(browser, url, errors)
                connection = page.locator("#connection")
                expect(connection).to_contain_text("Not authorized", timeout=UI_WAIT_MS)

                _log_in(page, DASHBOARD, passwords[DASHBOARD])
                expect(connection).to_contain_text("connected to", timeout=UI_WAIT_MS)
                expect(page.locator("#mode")).to_have_text("holding", timeout=UI_WAIT_MS)
                since = rig.probe.mark()
                page.locator('#named button[data-pose="ready"]').click()
                rejection = page.locator("#rejection")
                expect(rejection).to_contain_text("the broker refused goal", timeout=UI_WAIT_MS)
                expect(rejection).to_contain_text("Not authorized")
                rig.probe.wait_for(lambda: len(rig.probe.on("state", since)) >= 10, what="states")
                assert rig.probe.on("goal/status", since) == [], "the refused goal reached armd"

                _log_in(page, OPERATOR, passwords[OPERATOR])
                expect(connection).to_contain_text("connected to", timeout=UI_WAIT_MS)
                expect(page.locator("#mode")).to_have_text("holding", timeout=UI_WAIT_MS)
                since = rig.probe.mark()
                page.locator('#named button[data-pose="ready"]').click()
                accepted = _first_status(rig.probe, since)
                assert accepted["status"] == "accepted", accepted
                final = rig.probe.wait_status(accepted["id"], since=since)
                assert final["status"] == "succeeded", final
                assert errors == [], "errors in the page"
        finally:
            rig.close()
