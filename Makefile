# Quick start: `make run` (server on the embedded defaults) and `make test` (the whole suite).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.requirements-installed

.PHONY: setup run test test-fast browser-deps migrate bench eval clean-db

setup: $(STAMP)

$(STAMP): requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $(STAMP)

# Debian's Chromium for the Playwright browser tests (playwright cannot download its own here).
browser-deps:
	@command -v chromium >/dev/null 2>&1 || { \
		echo "Installing Debian's chromium for the browser tests"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

migrate: setup
	$(PY) manage.py migrate --noinput

# Starts the embedded PostgreSQL, migrates, creates the demo data on an empty database, then runs
# the django-q2 cluster and the web server on 127.0.0.1:8000 until Ctrl-C.
run: setup
	$(PY) manage.py runall

test: setup browser-deps
	$(PY) -m pytest

test-fast: setup
	$(PY) -m pytest -m "not browser and not slow"

bench: migrate
	$(PY) bench/search.py

eval: migrate
	$(PY) manage.py eval_locomo ../shared/data/locomo/locomo_dev5.json

clean-db:
	-$(PY) manage.py embedded_db stop
	rm -rf var/pgdata
