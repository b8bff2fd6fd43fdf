# Everyday commands. `make run` and `make test` work on a fresh clone: they create .venv with
# Python 3.11 and install the locked requirements, every package pinned with its hashes (again
# only when a lock file changes). `make lock` recompiles the locks from requirements*.in.

PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
RUN_STAMP := $(VENV)/.installed-requirements
DEV_STAMP := $(VENV)/.installed-requirements-dev
PYTEST_ARGS ?=

.DEFAULT_GOAL := help
.PHONY: help run test lint audit bench lock migrate seed clean screenshots

help:
	@echo "make run      start the portal (web, worker, beat) on embedded defaults"
	@echo "make test     run the test suite (PYTEST_ARGS='-k name -x' to narrow it)"
	@echo "make lint     ruff check, ruff format --check (migrations excluded), mypy, import contracts"
	@echo "make audit    pip-audit of both locks against PyPI's vulnerability data"
	@echo "make bench    run the benchmarks in bench/"
	@echo "make screenshots  regenerate docs/images (the README's pictures) with Chromium"
	@echo "make lock     recompile requirements.txt / requirements-dev.txt (hashed) from the .in files"
	@echo "make migrate  apply database migrations"
	@echo "make seed     create the demo cluster, nodes, label assignments and policies"
	@echo "make clean    remove var/ (database, secret key, static files); keeps .venv"

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --require-hashes -r deploy/pip.txt

$(RUN_STAMP): requirements.txt | $(PY)
	$(PY) -m pip install --quiet --require-hashes -r requirements.txt
	touch $@

$(DEV_STAMP): requirements.txt requirements-dev.txt | $(PY)
	$(PY) -m pip install --quiet --require-hashes -r requirements-dev.txt
	touch $@ $(RUN_STAMP)

run: $(RUN_STAMP)
	deploy/run-all.sh

test: $(DEV_STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

# Migrations stay as makemigrations writes them, so the format check leaves them out.
lint: $(DEV_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check --extend-exclude '*/migrations/*' .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

audit: $(DEV_STAMP)
	$(PY) deploy/audit.py

# Each benchmark prints its ratios and writes bench/results/; the two that need a service say
# so and are left out without it: the decision log's CPU and latency, its bytes per decision
# and the replay of 1 M and 10 M recorded calls, on PostgreSQL (DATABASE_URL=postgres://...;
# each makes and drops its own database) and kube-scheduler with and
# without the portal on a real control plane (KUBEBUILDER_ASSETS).
bench: $(DEV_STAMP)
	@for f in bench/extender.py bench/admission.py bench/sync.py bench/faults.py bench/preview.py bench/pages.py bench/login.py; do \
		if [ -f $$f ]; then echo "== $$f"; $(PY) $$f || exit 1; fi; \
	done
	@case "$$DATABASE_URL" in \
		postgres*) echo "== bench/decision_writer.py"; $(PY) bench/decision_writer.py && $(PY) bench/decision_writer.py --cpu || exit 1; \
			echo "== bench/decision_bytes.py"; $(PY) bench/decision_bytes.py || exit 1; \
			echo "== bench/replay.py"; $(PY) bench/replay.py || exit 1;; \
		*) echo "== bench/decision_writer.py, bench/decision_bytes.py, bench/replay.py left out: they need DATABASE_URL=postgres://...";; \
	esac
	@if [ -n "$$KUBEBUILDER_ASSETS" ]; then \
		echo "== bench/kube_scheduler.py (kube-scheduler's default client rate, then qps 1000)"; $(PY) bench/kube_scheduler.py && $(PY) bench/kube_scheduler.py --qps 1000 || exit 1; \
	else echo "== bench/kube_scheduler.py left out: it needs KUBEBUILDER_ASSETS (kube-apiserver, kube-scheduler, etcd)"; fi

screenshots: $(DEV_STAMP)
	$(PY) docs/screenshots.py

LOCK_OPTIONS := --quiet --generate-hashes --allow-unsafe --strip-extras --no-emit-index-url --no-emit-find-links

lock: $(DEV_STAMP)
	$(VENV)/bin/pip-compile $(LOCK_OPTIONS) --output-file requirements.txt requirements.in
	$(VENV)/bin/pip-compile $(LOCK_OPTIONS) --output-file requirements-dev.txt requirements-dev.in

migrate: $(RUN_STAMP)
	. deploy/local-env.sh && $(PY) manage.py migrate

seed: $(RUN_STAMP)
	. deploy/local-env.sh && $(PY) manage.py seed_demo

clean:
	rm -rf var
