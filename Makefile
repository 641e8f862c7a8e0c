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

.PHONY: venv deps link test units integration sanity lint build clean lab-up lab-down lab-status run

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

# The lab: 4 twin nodes + 4 BMCs on 127.0.0.1 (needs root; docs/lab.md).
lab-up: venv link deps
	lab/lab.sh up

lab-down:
	lab/lab.sh down

lab-status:
	lab/lab.sh status

# The main job on the lab: provision (BIOS, one reboot, verify), gate, fabric inventory.
# Output in reports/lab/ (gate/<host>.json|xml|prom, fabric/). Red twins are reported, not fatal.
run: lab-up
	$(BIN)/ansible-playbook -i inventories/lab playbooks/provision.yml

test: venv link deps
	$(BIN)/pytest -q tests
	$(MAKE) sanity lint build

clean:
	rm -rf .build tests/output gpufleet-provision-*.tar.gz
