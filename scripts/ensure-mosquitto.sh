#!/usr/bin/env bash
# Makes sure the Mosquitto broker is available.
#   --installed          the mosquitto binary exists (tests start their own brokers on free ports)
#   --reachable HOST PORT  additionally a broker answers on HOST:PORT (started in the background if not)
set -euo pipefail

install_mosquitto() {
    echo "mosquitto not found: installing it from the Debian/Ubuntu packages" >&2
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq mosquitto mosquitto-clients >/dev/null
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
        "$mosquitto_bin" -d -p "$port"
        for _ in $(seq 50); do listening "$host" "$port" && exit 0; sleep 0.1; done
        echo "mosquitto did not start listening on $host:$port" >&2
        exit 1
    fi
fi
