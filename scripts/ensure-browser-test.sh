#!/usr/bin/env bash
# What the dashboard's browser test (tests/system/test_dashboard.py) needs besides Python and
# Node.js (which scripts/ensure-node-red.sh installs, before this in `make test`): Debian's
# chromium, which Playwright drives (its own browser download is never used). Installed with apt
# when missing; if that fails, this says so and succeeds: the browser test then skips, naming why.
set -uo pipefail
here=$(dirname "$0")
if ! command -v chromium >/dev/null 2>&1; then
    "$here/heartbeat.sh" "installing chromium for the browser test (apt, ~1 min)" \
        "$here/apt-install.sh" chromium \
        || echo "chromium could not be installed: the browser test will be skipped" >&2
fi
exit 0
