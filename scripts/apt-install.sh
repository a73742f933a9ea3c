#!/usr/bin/env bash
# Installs Debian/Ubuntu packages (with sudo when not root): scripts/apt-install.sh PACKAGE...
set -euo pipefail
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null
