#!/usr/bin/env bash
# Installs what the Node-RED test (tests/system/test_node_red.py) needs: Node.js and npm (from the
# Debian/Ubuntu packages when missing), then Node-RED as pinned by examples/node-red/package-lock.json
# into examples/node-red/node_modules (git-ignored) with `npm ci`. The install is kept between runs
# and redone only when package-lock.json changes (its hash is stamped into node_modules).
# Where Node.js cannot be installed this says so and succeeds: the test then skips, naming why.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
project="$here/examples/node-red"
stamp="$project/node_modules/.package-lock.sha256"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "Node.js/npm not found: installing them from the Debian/Ubuntu packages" >&2
    if ! "$here/scripts/apt-install.sh" nodejs npm; then
        echo "Node.js/npm could not be installed: tests/system/test_node_red.py will be skipped" >&2
        exit 0
    fi
fi

wanted=$(sha256sum "$project/package-lock.json" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" = "$wanted" ]; then
    exit 0
fi
cd "$project"
"$here/scripts/heartbeat.sh" "installing Node-RED (pinned in examples/node-red/package-lock.json) with npm ci (~20 s)" \
    npm ci --no-audit --no-fund --loglevel=error
echo "$wanted" > "$stamp"
