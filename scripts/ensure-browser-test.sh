#!/usr/bin/env bash
# What the browser test (tests/system/test_dashboard.py) needs besides Python: Debian's chromium
# (Playwright drives it; Playwright's own browser download is never used) and Node.js with npm to
# build the dashboard. Installs whichever is missing with apt; if that fails, says so and goes on:
# the browser test then skips, naming what is missing.
set -uo pipefail
here=$(dirname "$0")
if ! command -v chromium >/dev/null 2>&1; then
    "$here/heartbeat.sh" "installing chromium for the browser test (apt, ~1 min)" \
        "$here/apt-install.sh" chromium \
        || echo "chromium could not be installed: the browser test will be skipped" >&2
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    "$here/heartbeat.sh" "installing Node.js and npm to build the dashboard (apt)" \
        "$here/apt-install.sh" nodejs npm \
        || echo "Node.js could not be installed: the dashboard and its tests will be skipped" >&2
fi
exit 0
