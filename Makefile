# `make test` from a fresh clone creates .venv, installs the project with its
# test extra, and runs the suite; `make run SCRIPT=…` does the same for the
# main job.  Both are what the README and .ci/run use.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install test test-portable test-fast stress lint bench run clean install-service pack-plugin dist

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

# Most of the suite's time is spent waiting on the daemons and fake HOL
# servers it starts, so it runs on two workers a core (tests/conftest.py),
# each taking a waiting test from another as it runs out.
test: $(STAMP)
	$(BIN)/python -m pytest -q -n auto --dist worksteal

# The tests of the portable fallbacks (holsrv/facilities.py: file watching,
# process family, parent death, peer credentials, memory), the daemon-death
# checks and what rests on file watching, run with every Linux-only facility
# off (HOLSRV_PORTABLE=1) as on macOS; about a minute.  The whole suite in
# that mode is `HOLSRV_PORTABLE=1 make test`, too long for CI twice.
PORTABLE_TESTS := tests/unit/test_statpoll.py tests/daemon/test_portable.py tests/daemon/test_scriptwatch.py \
	tests/daemon/test_watchdog.py tests/daemon/test_process.py tests/daemon/test_memory_budget.py \
	tests/daemon/test_security.py tests/daemon/test_unblocking.py tests/daemon/test_runaways.py \
	tests/daemon/test_replacement.py::test_a_rebuild_is_noticed_through_the_directory_watch_with_no_call \
	tests/daemon/test_pool.py::test_a_new_daemon_stops_servers_its_killed_predecessor_left
test-portable: $(STAMP)
	HOLSRV_PORTABLE=1 $(BIN)/python -m pytest -q -n auto --dist worksteal $(PORTABLE_TESTS)

# The unit tests alone (tests/unit: no daemon, no process), in seconds, on one
# worker: what to run after each change before `make test`.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q tests/unit

# The long forms: 10,000 fuzzed frames, 100 clients x 50 requests with hostile
# ones, a huge script beside cached answers; each prints its figures.
stress: $(STAMP)
	$(BIN)/python -m pytest -q -s -m stress

# ruff, then mypy: with the wire's exhaustive `match`es, a request nobody
# handles is a type error here.
lint: $(STAMP)
	$(BIN)/pip install --quiet ruff mypy types-psutil
	$(BIN)/ruff check holsrv holctl holmcp tests bench
	$(BIN)/mypy holsrv holctl holmcp

# Every figure of the performance issue next to its baseline, in one table
# (bench/README.md); `make bench HOL_BIN=/path/to/hol` adds real-HOL rows.
# bench/warm_vs_cold.py, run by hand, has more warm-against-cold detail.
bench: $(STAMP)
	$(BIN)/python bench/suite.py $(if $(HOL_BIN),--hol $(HOL_BIN),)
	$(BIN)/python bench/scanner_scaling.py --check

# make run SCRIPT=path/to/fooScript.sml — diagnostics through the daemon
run: $(STAMP)
	$(BIN)/holctl diagnostics $(SCRIPT)

# systemd user units for this checkout's holsrv, with the HOL settings of
# the calling shell; `$(BIN)/holctl uninstall-service` undoes it.
install-service: $(STAMP)
	$(BIN)/holctl install-service

# The Claude Code plugin (holmcp and the hol4-proof skill) as a one-plugin
# marketplace in build/plugin; HOLMCP=/path/to/holmcp to pin the command.
pack-plugin: $(STAMP)
	$(BIN)/python -m holmcp.plugin build/plugin $(if $(HOLMCP),--command $(HOLMCP),)

# The sdist and wheel in dist/, checked as PyPI would (docs/releasing.md).
dist: $(STAMP)
	$(BIN)/pip install --quiet build twine
	rm -rf dist
	$(BIN)/python -m build --outdir dist
	$(BIN)/twine check --strict dist/*

clean:
	rm -rf $(VENV) build dist *.egg-info
