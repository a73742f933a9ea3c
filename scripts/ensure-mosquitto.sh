#!/usr/bin/env bash
# Makes sure the Mosquitto broker is available.
#   --installed          the mosquitto binary exists (tests start their own brokers on free ports)
#   --reachable HOST PORT  additionally a broker answers on HOST:PORT (started in the background if not)
set -euo pipefail

install_mosquitto() {
    echo "mosquitto not found: installing it from the Debian/Ubuntu packages" >&2
    "$(dirname "$0")/apt-install.sh" mosquitto mosquitto-clients
}

listening() {
    (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
}

mode=${1:---installed}
command -v mosquitto >/dev/null 2>&1 || [ -x /usr/sbin/mosquitto ] || install_mosquitto

if [ "$mode" = "--reachable" ]; then
    host=${2:-127.0.0.1}
    port=${3:-1883}
    if ! listening "$host" "$port"; then
        echo "no MQTT broker on $host:$port: starting mosquitto in the background" >&2
        mosquitto_bin=$(command -v mosquitto || echo /usr/sbin/mosquitto)
        conf=$(mktemp -d)/mosquitto.conf
        # Anonymous on loopback only (a development broker). Mosquitto's default queue of 1000
        # messages per client would silently drop goals in a burst: raise it; and without
        # set_tcp_nodelay, Nagle's algorithm holds small messages (goals) for 10-20 ms.
        printf 'listener %s 127.0.0.1\nallow_anonymous true\nmax_queued_messages 100000\n' \
            "$port" > "$conf"
        printf 'set_tcp_nodelay true\n' >> "$conf"
        "$mosquitto_bin" -d -c "$conf"
        for _ in $(seq 50); do listening "$host" "$port" && exit 0; sleep 0.1; done
        echo "mosquitto did not start listening on $host:$port" >&2
        exit 1
    fi
fi
