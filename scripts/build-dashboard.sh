#!/usr/bin/env bash
# Builds the web dashboard into dashboard/dist when Node.js (>= 20.19, Vite's minimum) and npm are
# installed: `npm ci` when package-lock.json changed since the last install, `npm run build` (type
# check + Vite) when a source changed since the last build; otherwise says it is up to date.
# Without a suitable Node.js it says why the dashboard is skipped and exits 0: `make run` works
# without the dashboard, and the browser test skips with that reason.
set -euo pipefail
cd "$(dirname "$0")/.."
heartbeat=$PWD/scripts/heartbeat.sh
cd dashboard

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "dashboard: skipped: Node.js and npm are not installed (the dashboard needs Node.js >= 20.19 to build)"
    exit 0
fi
if ! node -e 'const [a, b] = process.versions.node.split(".").map(Number);
              process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)'; then
    echo "dashboard: skipped: Node.js $(node --version) is too old (the dashboard needs >= 20.19 to build)"
    exit 0
fi

# npm ci writes node_modules/.package-lock.json: older than package-lock.json means stale.
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    "$heartbeat" "dashboard: installing its npm packages (npm ci, ~20 s)" \
        npm ci --no-audit --no-fund --loglevel=error
fi

# public/ (config.json) is copied into dist/ as it is: a build without one of its files is stale.
sources=(index.html package.json package-lock.json tsconfig.json vite.config.ts src public)
copied() { (cd public && find . -type f) | while read -r file; do [ -f "dist/$file" ] || echo "$file"; done; }
if [ -f dist/index.html ] && [ -z "$(find "${sources[@]}" -newer dist/index.html -print -quit)" ] \
    && [ -z "$(copied)" ]; then
    echo "dashboard: dashboard/dist is up to date"
    exit 0
fi
"$heartbeat" "dashboard: building dashboard/dist (type check + Vite, ~10 s)" npm run --silent build
