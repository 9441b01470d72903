# vllm-fleet developer entry points.  `make demo` and `make test` are the README's
# two commands; both set up what they need on a fresh machine.
SHELL := /bin/bash
VENV ?= .venv
PYTHON ?= python3
BIN := $(CURDIR)/$(VENV)/bin
export PATH := $(BIN):$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export ANSIBLE_FORCE_COLOR ?= 0
RELEASES ?= bookworm bullseye trixie
SCENARIOS ?= $(sort $(notdir $(patsubst %/molecule.yml,%,$(wildcard molecule/*/molecule.yml))))

.PHONY: docker images demo demo-image demo-down test lint unit integration unit-alone unit-hosts molecule molecule-alone test-rotation test-three-hosts clean

# Control node: a venv with the pinned toolchain (pyproject.toml).
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q .
	rm -rf build *.egg-info
	touch $@

docker:
	$(PYTHON) tools/fleet.py daemon

# One target per release, so that the tests needing only bookworm do not wait for the others.
images: $(addprefix image-,$(RELEASES))

image-%: docker
	$(PYTHON) tools/fleet.py image $*

# The demo boots bookworm hosts only: that one image is built (or reused) beside the
# control node's venv, which do not depend on each other; the other releases serve the tests.
demo:
	$(MAKE) --no-print-directory -j2 $(VENV)/.installed demo-image
	$(BIN)/python tools/demo.py

demo-image: image-bookworm

demo-down:
	$(PYTHON) tools/fleet.py down demo

# Lint, the integration suite (two pytest workers, each file's tests in one of them), each
# unit file alone and the host images side by side (-j5; --output-sync prints each
# job's output whole when it ends); the tests that boot bookworm hosts (HOST_TESTS) as soon
# as that image is built.  On a fresh machine the images (Docker installed, three
# debootstraps) had taken about five minutes before anything else started; side by side
# the whole phase took 414 s, images included (2 cores).  Then the scenarios, which need
# both cores.
HOST_TESTS := tests/integration/test_fleet_ssh.py tests/integration/test_serving_group.py

# The scenarios that set kernel state no container has its own of (molecule_all.py's ALONE:
# vm.* sysctls, transparent huge pages) run in the first phase, beside lint and the unit
# tests, which read none of it, and before the other scenarios, which do: alone after them
# they added their whole time to the run (89 s in CI).
test:
	$(MAKE) --no-print-directory -j5 --output-sync=target lint unit images molecule-alone
	$(MAKE) --no-print-directory molecule MOLECULE_PART=shared

lint: $(VENV)/.installed
	$(BIN)/yamllint --strict .
	$(BIN)/ansible-lint --profile production

unit: integration unit-alone unit-hosts

# The unit tests run once, each file alone (unit-alone): in this suite as well they ran twice
# in the first phase of `make test` (about 55 s of its CPU), to no more effect.
integration: $(VENV)/.installed
	$(BIN)/pytest -n 2 --dist loadfile $(addprefix --ignore=,$(HOST_TESTS)) tests/integration

unit-hosts: $(VENV)/.installed image-bookworm
	$(BIN)/pytest $(HOST_TESTS)

# Each unit test file alone, its tests in reverse order: no test passes because another
# file or an earlier test left something behind.
unit-alone: $(VENV)/.installed
	@n=0; for f in tests/unit/test_*.py; do log=$$(mktemp); \
	  if $(BIN)/pytest -q -p no:cacheprovider --reverse $$f >$$log 2>&1; then \
	    passed=$$(grep -oE '[0-9]+ passed' $$log | tail -1 | cut -d' ' -f1); n=$$((n + passed)); rm -f $$log; \
	  else cat $$log; rm -f $$log; echo "unit: $$f fails alone or in reverse order"; exit 1; fi; \
	done; echo "unit: each of $$(ls tests/unit/test_*.py | wc -l) unit test files passes alone, in reverse order ($$n tests)"

# serve (a whole fleet and its rollouts) beside the operator's path (tests/operator: the
# demo, then site.yml, fleet_status and diagnose on it) and then the other scenarios, one
# after another; then, alone, os_tuning (MOLECULE_PART=shared leaves it out, `molecule-alone`
# runs it alone); MOLECULE_JOBS=1 runs every one after another.
MOLECULE_PART ?= all
molecule: $(VENV)/.installed
	$(BIN)/python tools/molecule_all.py --part $(MOLECULE_PART) $(SCENARIOS) operator

molecule-alone: $(VENV)/.installed images
	$(BIN)/python tools/molecule_all.py --part alone $(SCENARIOS)

# On request, not in `make test` (ten minutes of rolling restarts): the engines' key rotated
# on the demo fleet under a load through the gateway (docs/day2.md).
test-rotation: $(VENV)/.installed demo-image
	VLLM_FLEET_ROTATION=1 $(BIN)/pytest -v -s -p no:cacheprovider tests/operator -k rotates

# On request, not in `make test` (a third CPU engine and two more rollouts, more than CI's
# time holds beside serve): node3 added to the serve fleet with site.yml --limit, then a
# change rolled through three hosts in two batches, under a load through the gateway.
test-three-hosts: $(VENV)/.installed
	$(BIN)/molecule create -s serve && $(BIN)/molecule converge -s serve && \
	  VLLM_FLEET_THREE_HOSTS=1 PYTEST_ADDOPTS="-k test_three_hosts" $(BIN)/molecule verify -s serve; \
	  rc=$$?; $(BIN)/molecule destroy -s serve; exit $$rc

clean: demo-down
	rm -rf $(VENV)
