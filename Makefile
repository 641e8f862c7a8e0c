# Two commands matter (see README): `make lab-run` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# ansible-test and `ansible_collections.gpufleet.provision` imports want the collection under
# ansible_collections/<ns>/<name>: a symlink to this checkout, never a copy.
COLL_ROOT := $(CURDIR)/.build
COLL := $(COLL_ROOT)/ansible_collections/gpufleet/provision
export ANSIBLE_COLLECTIONS_PATH := $(COLL_ROOT)
export ANSIBLE_COLLECTIONS_SCAN_SYS_PATH := false

.PHONY: venv deps link test units integration sanity lint build clean

venv: $(VENV)/.done
$(VENV)/.done: requirements.txt requirements-test.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements-test.txt
	touch $@

# System packages for the lab and the real-component tests (podman, debootstrap, equivs, slurm).
deps:
	bash .ci/deps.sh

link:
	@mkdir -p $(dir $(COLL))
	@ln -sfn $(CURDIR) $(COLL)

units: venv link
	$(BIN)/pytest -q tests/unit

integration: venv link deps
	$(BIN)/pytest -q tests/integration

sanity: venv link
	bash .ci/sanity.sh

lint: venv link
	$(BIN)/ansible-lint --offline -q

build: venv
	rm -f gpufleet-provision-*.tar.gz
	$(BIN)/ansible-galaxy collection build --force .

test: venv link deps
	$(BIN)/pytest -q tests
	$(MAKE) sanity lint build

clean:
	rm -rf .build tests/output gpufleet-provision-*.tar.gz
