# armd — the two commands a newcomer needs are `make run` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test

CONFIG ?= config/sim.yaml
MQTT_HOST ?= 127.0.0.1
MQTT_PORT ?= 1883
WS_PORT ?= 9001

DIST := dashboard/dist

.PHONY: all venv kernels ha-peer dashboard run test lint typecheck pytest bench soak clean

all: test

# The virtual environment is rebuilt whenever pyproject.toml changes: what running needs for
# `make run` ($(STAMP)), plus the test extras (linters, the SDK peers, the browser driver) for
# `make test` ($(TEST_STAMP)).
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || { echo "creating $(VENV) (a Python virtual environment)"; \
		$(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); scripts/apt-install.sh python3-venv \
			&& $(PYTHON) -m venv $(VENV); }; }
	@# setuptools says "Editable installation ... careful with folders named like the package"
	@# for every editable install of a flat layout: information only, and exactly our layout.
	@scripts/heartbeat.sh "installing armd and its dependencies into $(VENV) (~30 s the first time)" \
		env PYTHONWARNINGS='ignore:Editable installation' \
		sh -c "$(BIN)/python -m pip install --quiet --upgrade pip \
			&& $(BIN)/python -m pip install --quiet -e ."
	@touch $@

$(TEST_STAMP): $(STAMP)
	@scripts/heartbeat.sh "installing the test extras into $(VENV) (~1 min the first time)" \
		env PYTHONWARNINGS='ignore:Editable installation' \
		$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $@

venv: $(TEST_STAMP)

# Home Assistant itself, in a virtual environment of its own, as a test peer: its MQTT discovery
# code checks the discovery configs armd publishes (tests/peers/ha_discovery.py). 2024.3 is the
# last release for Python 3.11; paho-mqtt as its MQTT integration pins it.
HA_VENV := .venv-ha
$(HA_VENV)/.installed:
	@scripts/heartbeat.sh "installing Home Assistant 2024.3 into $(HA_VENV), a test peer (~2 min the first time)" \
		sh -c "rm -rf $(HA_VENV) && $(PYTHON) -m venv $(HA_VENV) \
			&& $(HA_VENV)/bin/python -m pip install --quiet 'homeassistant==2024.3.3' 'paho-mqtt==1.6.1'"
	@touch $@

ha-peer: $(HA_VENV)/.installed

# numba compiles the kinematics kernels once per machine (~30 s, with progress) into its cache;
# afterwards this step only checks the cache (~1 s).
# The numba kernels, and the bytecode of every module: a module compiled at its first import in a
# real-time process (the control loop, a simulated device) would hold a core at that priority
# for the compile's tens of milliseconds, in every process of a fresh clone that gets there first.
BYTECODE := env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m compileall -q -j 0
kernels: $(STAMP)
	$(BIN)/armd compile
	@$(BYTECODE) armd drivers kinematics

# The web dashboard in $(DIST) (Node.js >= 20.19: npm ci, type check, Vite; only what changed);
# without Node.js it says the dashboard is skipped, and everything else goes on.
dashboard:
	@scripts/build-dashboard.sh

# The daemon on the simulated arm, with a broker reachable on $(MQTT_HOST):$(MQTT_PORT) and MQTT over
# WebSockets on 127.0.0.1:$(WS_PORT), where Mosquitto also serves the dashboard (docs/dashboard.md).
run: kernels dashboard
	@scripts/ensure-mosquitto.sh --websockets $(MQTT_HOST) $(MQTT_PORT) $(WS_PORT) $(CURDIR)/$(DIST)
	@if [ -f $(DIST)/index.html ]; then echo "dashboard: http://127.0.0.1:$(WS_PORT)/ (or: $(BIN)/armd dashboard)"; fi
	@# A config on the physics-simulated arm needs the `physics` extra (MuJoCo).
	@if grep -Eq '^\s*type:\s*mujoco\b' $(CONFIG) && ! $(BIN)/python -c 'import mujoco' 2>/dev/null; then \
		echo "installing the physics extra (MuJoCo) for $(CONFIG)"; \
		$(BIN)/python -m pip install --quiet -e '.[physics]'; fi
	$(BIN)/armd run --config $(CONFIG)

lint: $(TEST_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(TEST_STAMP)
	$(BIN)/mypy

# Six workers on the reference machine's two cores, a test module per worker at a time (the
# system tests share one daemon per module): the suite waits on real time (arms moving at their
# speed, daemons, brokers, a browser) for much of its run, so two workers left a third of both
# cores idle (473 s), four 15-20 % (~310 s), six less (~290 s the same hour).
# `make pytest PYTEST_ARGS=` runs the tests one by one.
# The suite starts some 300 Python processes (daemons, control processes, CLI commands, simulated
# devices): with PYTHONDONTWRITEBYTECODE (set in many container images) each of them compiles
# every module it imports, and pytest rewrites every test module's asserts in each worker, again
# and again. Bytecode caches (in __pycache__/, ignored by git) take ~10 % off the suite's time;
# they are written before the run (`BYTECODE`), not by its real-time processes.
PYTEST_ARGS ?= -n 6 --dist loadscope
pytest: $(TEST_STAMP)
	@$(BYTECODE) armd drivers kinematics tests bench
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest -q $(PYTEST_ARGS)

test: kernels ha-peer
	@scripts/ensure-mosquitto.sh --installed
	@scripts/ensure-node-red.sh
	@scripts/ensure-browser-test.sh
	@scripts/build-dashboard.sh
	$(MAKE) --no-print-directory lint typecheck pytest

# cyclictest (rt-tests) runs beside the loop benchmarks and the soak: the platform's own late
# wake-ups, the ticks no program could keep on this machine. Without it that column is empty.
PLATFORM_REFERENCE := command -v cyclictest >/dev/null || scripts/apt-install.sh rt-tests \
	|| echo "rt-tests not installed: the benchmarks report no platform reference"

bench: $(STAMP)
	@$(PLATFORM_REFERENCE)
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python bench/kinematics.py
	$(BIN)/python bench/dynamics.py
	$(BIN)/python bench/collision.py
	$(BIN)/python bench/drivers.py
	$(BIN)/python bench/mapping.py
	$(BIN)/python bench/replay.py
	$(BIN)/python bench/loop.py
	$(BIN)/python bench/overload.py

# The 10-minute soak (random goals, stops, e-stops, malformed payloads): docs/performance.md.
soak: $(STAMP)
	@$(PLATFORM_REFERENCE)
	$(BIN)/python bench/soak.py

clean:
	rm -rf $(VENV) $(HA_VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis $(DIST) dashboard/node_modules
