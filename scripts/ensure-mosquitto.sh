#!/usr/bin/env bash
# Makes sure the Mosquitto broker is available.
#   --installed            the mosquitto binary exists (tests start their own brokers on free ports)
#   --reachable HOST PORT  additionally a broker answers on HOST:PORT (started in the background if not)
#   --websockets HOST PORT WS_PORT [HTTP_DIR]
#                          additionally MQTT over WebSockets on 127.0.0.1:WS_PORT (loopback only),
#                          for the web dashboard, serving HTTP_DIR (the built dashboard) on the
#                          same port:
#                          - no broker on HOST:PORT yet: one is started with both listeners;
#                          - one already answers there (e.g. the system's, without WebSockets):
#                            a second, user-level broker listens on WS_PORT and bridges armd/# to
#                            it both ways, so the browser sees every arm of the first one.
set -euo pipefail

install_mosquitto() {
    echo "mosquitto not found: installing it from the Debian/Ubuntu packages" >&2
    "$(dirname "$0")/apt-install.sh" mosquitto mosquitto-clients
}

listening() {
    (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
}

# The addresses other than loopback that something listens on at TCP port $1 (as ss shows them).
exposed() {
    command -v ss >/dev/null 2>&1 || return 0
    ss -ltnH "sport = :$1" | awk '{print $4}' | grep -v -E '^(127\.|\[::1\]:|\[::ffff:127\.)' || true
}

wait_listening() {  # HOST PORT WHAT
    for _ in $(seq 50); do listening "$1" "$2" && return 0; sleep 0.1; done
    echo "mosquitto did not start listening on $1:$2 ($3)" >&2
    exit 1
}

# A background Mosquitto with these configuration lines, in the folder $conf_dir, with its pid in
# $conf_dir/mosquitto.pid (to stop it: kill "$(cat .../mosquitto.pid)").
start_broker() {
    printf '%s\n' "$@" "pid_file $conf_dir/mosquitto.pid" > "$conf_dir/mosquitto.conf"
    "$mosquitto_bin" -d -c "$conf_dir/mosquitto.conf"
    echo "mosquitto started: configuration and pid in $conf_dir" >&2
}

mode=${1:---installed}
command -v mosquitto >/dev/null 2>&1 || [ -x /usr/sbin/mosquitto ] || install_mosquitto
mosquitto_bin=$(command -v mosquitto || echo /usr/sbin/mosquitto)
[ "$mode" = "--installed" ] && exit 0

host=${2:-127.0.0.1}
port=${3:-1883}
ws_port=${4:-}
http_dir=${5:-}
# Anonymous on loopback only (a development broker). Mosquitto's default queue of 1000 messages
# per client would silently drop goals in a burst: raise it; and without set_tcp_nodelay, Nagle's
# algorithm holds small messages (goals) for 10-20 ms.
common=("allow_anonymous true" "max_queued_messages 100000" "set_tcp_nodelay true")
websockets=()
if [ "$mode" = "--websockets" ]; then
    # socket_domain ipv4: without it Mosquitto 2.0.11 (Debian 12) binds a WebSockets listener to
    # every address of the machine, whatever address the listener line gives (libwebsockets);
    # with it, to 127.0.0.1 only. tests/system/test_listeners.py reads the sockets back.
    websockets=("listener $ws_port 127.0.0.1" "protocol websockets" "socket_domain ipv4")
    # http_dir: Mosquitto serves the dashboard's page on the WebSockets port itself.
    [ -n "$http_dir" ] && [ -f "$http_dir/index.html" ] && websockets+=("http_dir $http_dir")
    # Started as root, Mosquitto switches to user mosquitto, who may not read a checkout under
    # /root nor write this script's temporary folder: this loopback-only broker stays root.
    [ "$(id -u)" -eq 0 ] && common+=("user root")
fi

if ! listening "$host" "$port"; then
    echo "no MQTT broker on $host:$port: starting mosquitto in the background" >&2
    conf_dir=$(mktemp -d)
    start_broker "${common[@]}" "listener $port 127.0.0.1" "${websockets[@]}"
    wait_listening "$host" "$port" "MQTT"
    [ -z "$ws_port" ] || wait_listening 127.0.0.1 "$ws_port" "MQTT over WebSockets"
elif [ -n "$ws_port" ] && ! listening 127.0.0.1 "$ws_port"; then
    echo "MQTT over WebSockets for the dashboard: a mosquitto on 127.0.0.1:$ws_port bridged to $host:$port" >&2
    # Mosquitto 2.0.11 does not start with WebSockets listeners alone: a Unix socket is the other
    # listener. The bridge carries armd/# both ways; notifications off keeps it from retaining its
    # own connection state on the other broker.
    conf_dir=$(mktemp -d)
    start_broker "${common[@]}" "${websockets[@]}" "listener 0 $conf_dir/mqtt.sock" \
        "connection armd-dashboard-bridge" "address $host:$port" "topic armd/# both 1" \
        "cleansession true" "notifications false" "restart_timeout 2"
    wait_listening 127.0.0.1 "$ws_port" "MQTT over WebSockets"
fi
# WS_PORT reachable from other machines: a broker started above is stopped (a Mosquitto that
# ignores socket_domain), and one that was already there (a `make run` of before socket_domain
# ipv4 above, which listened on every address) is named in a warning.
if [ -n "$ws_port" ] && [ -n "$(exposed "$ws_port")" ]; then
    where=$(exposed "$ws_port" | tr '\n' ' ')
    if [ -n "${conf_dir:-}" ] && [ -f "$conf_dir/mosquitto.pid" ]; then
        kill "$(cat "$conf_dir/mosquitto.pid")"
        echo "the anonymous broker started for the dashboard listened on $where(not only 127.0.0.1): stopped" >&2
        exit 1
    fi
    echo "WARNING: port $ws_port (MQTT over WebSockets) listens on $where- reachable from other" \
        "machines: if that is an older \`make run\`'s broker, stop it (ss -ltnp 'sport = :$ws_port' shows its pid) and run again" >&2
fi
