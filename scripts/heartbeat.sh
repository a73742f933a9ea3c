#!/usr/bin/env bash
# heartbeat.sh LABEL COMMAND...: runs COMMAND and, while it runs, says every 5 s that it still does
# (pip installs numpy, numba and llvmlite in one silent step of ~15 s). Exits with COMMAND's code.
set -uo pipefail
label=$1
shift
echo "$label ..."
"$@" &
pid=$!
trap 'kill -INT "$pid" 2>/dev/null' INT TERM
started=$SECONDS
next=5
while kill -0 "$pid" 2>/dev/null; do
    sleep 0.2
    if (( SECONDS - started >= next )) && kill -0 "$pid" 2>/dev/null; then
        echo "  $label: still running ($((SECONDS - started)) s)"
        next=$((next + 5))
    fi
done
wait "$pid"
status=$?
if [ "$status" -eq 0 ]; then
    echo "$label: done in $((SECONDS - started)) s"
else
    echo "$label: failed (exit $status)" >&2
fi
exit "$status"
