# One task runner. `make run` and `make test` are the README's two commands.
SHELL := /bin/bash
# The first interpreter that really runs and is 3.11+ (a pyenv shim may exist but not run).
PYTHON ?= $(shell for p in python3 python3.13 python3.12 python3.11; do \
	$$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1 && { command -v $$p; break; }; done)
VENV := .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: run test bench lint typecheck fmt venv chromium gettext openssh engines fonts clean manage

# The console, and `agpu` (cli/, its own package: the tests run it as customers do).
$(VENV)/.installed: pyproject.toml cli/pyproject.toml
	@test -n "$(PYTHON)" || { echo "Python 3.11+ is needed (python3 --version)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	$(PY) -m pip install --quiet -e ./cli
	touch $@

venv: $(VENV)/.installed

# Playwright drives Debian's chromium-headless-shell (the same Blink as chromium without its
# windowing layers: the browser tests took about a quarter less CPU than with the full
# browser in new headless mode); Playwright's own browser download cannot work here.
chromium:
	@command -v chromium-headless-shell >/dev/null || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq \
	    chromium-headless-shell >/dev/null; }

# DejaVu (Debian's fonts-dejavu-core): the invoices' PDFs embed it, so Polish letters print.
fonts:
	@test -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq \
	    fonts-dejavu-core >/dev/null; }

# xgettext and msgattrib: a test extracts every message from the code and finds each translated.
gettext:
	@command -v xgettext >/dev/null || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq gettext >/dev/null; }

# OpenSSH: the access tests log in with the real client; as root (CI) the isolation tests
# also run the reference agent against a real sshd of their own, with at and cron present
# (a tenant's queued jobs must never run), so those are installed there too.
openssh:
	@command -v ssh >/dev/null && command -v ssh-keygen >/dev/null || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq \
	    openssh-client >/dev/null; }
	@[ "$$(id -u)" != 0 ] || { test -x /usr/sbin/sshd && test -x /usr/sbin/atd && \
	  test -x /usr/bin/crontab; } || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    openssh-server at cron >/dev/null; }

# Prometheus and VictoriaMetrics (Debian's): the remote telemetry source's tests and benchmark
# run both real engines on loopback, scraping the simulator through our SD endpoint.
engines:
	@command -v prometheus >/dev/null && command -v victoria-metrics >/dev/null || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq \
	    --no-install-recommends prometheus victoria-metrics >/dev/null; }

run: venv fonts
	$(PY) -m anchorgpu.launcher run

# Three passes at once on the same servers: everything in parallel (pytest-xdist; each
# worker has its own PostgreSQL and Redis database, tests/parallel.py); beside it, one at a
# time, the tests that start servers or the whole product of their own (they mostly wait: a
# Redis held stopped for 20 s, restarts); and beside both the engine tests (real Prometheus
# and VictoriaMetrics scraping for real minutes, about 4 of them, mostly asleep), with
# databases of their own (ANCHORGPU_TEST_PASS). The other passes' output follows the
# first's. PYTEST_ARGS goes to all three; a pass it leaves empty (pytest's status 5) is no
# failure.
TEST_WORKERS ?= auto
# Holds no slow or engine test (tests/conftest.py checks): those passes need not collect it.
NOT_MARKED := --ignore=tests/test_schema_fuzz.py
# Bytecode is cached for the tests even where the machine turns it off: every test process,
# and each Django, gunicorn and Celery process the tests start, would otherwise compile the
# project and pytest would rewrite the asserts of its plugins' ~430 modules again (about
# 6 s of CPU a process).
test: export PYTHONDONTWRITEBYTECODE =
test: venv chromium gettext openssh engines fonts
	@mkdir -p test-artifacts
	$(PY) -m anchorgpu.launcher exec -- $(SHELL) -c '\
	  pass() { $(PY) -m pytest "$$@" $(PYTEST_ARGS); rc=$$?; [ $$rc = 5 ] && return 0; return $$rc; }; \
	  pass -p no:xdist -m "slow and not engines and not perf" $(NOT_MARKED) \
	    > test-artifacts/slow-tests.log 2>&1 & slow=$$!; \
	  ( export ANCHORGPU_TEST_PASS=engines; pass -p no:xdist -m "engines and not perf" $(NOT_MARKED) ) \
	    > test-artifacts/engine-tests.log 2>&1 & engines=$$!; \
	  pass -n $(TEST_WORKERS) --maxprocesses 8 --dist worksteal -m "not perf and not slow"; parallel=$$?; \
	  wait $$slow; serial=$$?; wait $$engines; engine=$$?; \
	  echo; echo "== the tests that start servers of their own"; cat test-artifacts/slow-tests.log; \
	  echo; echo "== the engine tests (Prometheus, VictoriaMetrics)"; cat test-artifacts/engine-tests.log; \
	  [ $$parallel = 0 ] && [ $$serial = 0 ] && [ $$engine = 0 ]'

bench: venv engines
	$(PY) -m anchorgpu.launcher exec -- $(PY) -m pytest -m perf -s tests/perf $(PYTEST_ARGS)

# A management command on the embedded servers (or DATABASE_URL / REDIS_URL when set):
# make manage ARGS="createsuperuser"
manage: venv
	$(PY) manage.py $(ARGS)

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) -m anchorgpu.launcher exec -- $(PY) manage.py makemigrations --check --dry-run
	$(PY) -m anchorgpu.launcher exec -- $(VENV)/bin/mypy

# mypy alone (also the last step of `lint`).
typecheck: venv
	$(PY) -m anchorgpu.launcher exec -- $(VENV)/bin/mypy

fmt: venv
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

clean:
	rm -rf .data

# Wheels for scripts/diffusion_memory_probe.py (a GPU machine with no network): downloaded
# here into the git-ignored .probe-wheels/, carried to the GPU machine with the tree.
probe-wheels:
	$(VENV)/bin/python -m pip download --dest .probe-wheels torch diffusers transformers accelerate
