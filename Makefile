# The two commands on the README's first screen: `make demo` and `make test`.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
# Two stamps: what the demo needs (tdview with JupyterLab, the front end), and what the
# tests add (scripts/bootstrap.sh demo|test).
DEMO_STAMP := $(VENV)/.tdview-demo
STAMP := $(VENV)/.tdview-installed
DEMO_DIR := notebooks/demo
HOST ?= 127.0.0.1
PORT ?= 8888

.PHONY: demo test test-python test-js test-gpu env env-demo lint bench bench-quick bench-report clean

$(DEMO_STAMP): pyproject.toml js/package.json js/package-lock.json scripts/bootstrap.sh
	./scripts/bootstrap.sh demo
	touch $(DEMO_STAMP)
$(DEMO_STAMP): labextension/package.json labextension/package-lock.json

$(STAMP): $(DEMO_STAMP) tests/browser/html-manager/package.json tests/browser/html-manager/package-lock.json
	./scripts/bootstrap.sh test
	touch $(STAMP)

env-demo: $(DEMO_STAMP)
env: $(STAMP)

# No news pop-up on the tour ("Would you like to get notified about official Jupyter
# news?"): JupyterLab 4 asks while its setting fetchNews is "none", whatever news_url
# says, so the demo's application settings default it to "false" (overrides.json), and
# news_url=None fetches nothing. tests/browser/test_demo_lab.py starts Lab with these.
DEMO_LAB_FLAGS := --LabApp.app_settings_dir=$(CURDIR)/scripts/demo-lab-settings --LabApp.news_url=None

# Main job: write the demo checkpoint and serve the tour notebook on loopback (JupyterLab).
demo: env-demo
	cd js && npm run --silent build
	$(PY) -m tdview demo --out $(DEMO_DIR)
	@echo "Starting JupyterLab on http://$(HOST):$(PORT)/ (open the URL printed below)"
	@# The venv's bin/ on PATH: the kernels, terminals and `!` commands find `tdview`.
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/jupyter lab --ip=$(HOST) --port=$(PORT) --no-browser $(if $(filter 0,$(shell id -u)),--allow-root) \
	  --ServerApp.root_dir=notebooks --LabApp.default_url=/lab/tree/tour.ipynb $(DEMO_LAB_FLAGS)

# Every test: the lints first (ruff, mypy, biome, tsc), then TypeScript (build, vitest,
# node --test), then Python (pytest, browser tests included).
test: env lint test-js test-python

test-js:
	cd js && npm run --silent build && npm test
	cd labextension && PATH="$(CURDIR)/$(VENV)/bin:$$PATH" npm run --silent build && npm test

test-python:
	$(PY) -m pytest

# ruff and mypy (Python), biome and tsc --noEmit (js/), tsc --noEmit (labextension/).
lint: env
	$(VENV)/bin/ruff check tdview tests bench
	$(VENV)/bin/ruff format --check tdview tests bench
	$(VENV)/bin/mypy tdview
	cd js && npm run --silent lint
	cd labextension && npm run --silent lint

# Every case, both sides; writes bench/results/latest.json and bench/RESULTS.md.
bench: env
	$(PY) -m bench

bench-quick: env
	$(PY) -m bench --quick

# bench/RESULTS.md again from bench/results/latest.json, nothing measured.
bench-report: env-demo
	$(PY) -m bench --report-only

# On a machine with a CUDA device: the tests marked `cuda`, then loads of a 1 GB checkpoint
# to the device (bench/gpu_cases.py, into bench/results/gpu-latest.json and RESULTS.md).
# Stops at once, in one line, without a CUDA device.
test-gpu: env
	@$(PY) -m bench.gpu_cases --check
	$(PY) -m pytest -m cuda -q
	$(PY) -m bench.gpu_cases
	$(PY) -m bench --report-only

clean:
	rm -rf $(VENV) js/node_modules tdview/static dist build $(DEMO_DIR)
	rm -rf labextension/node_modules labextension/lib tdview/labextension
	rm -rf tests/browser/html-manager/node_modules
