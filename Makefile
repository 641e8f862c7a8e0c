# Two commands matter (see README): `make run` and `make test`.
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

.PHONY: venv deps link test units integration sanity lint build clean lab-up lab-down lab-status run \
	molecule docs importer ee

# .venv: the highest supported ansible-core and every tool; .venv-2.16: the lowest, for sanity.
venv: $(VENV)/.done $(VENV)-2.16/.done
$(VENV)/.done: requirements.txt requirements-test.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements-test.txt
	touch $@
$(VENV)-2.16/.done: requirements-2.16.txt
	$(PYTHON) -m venv $(VENV)-2.16
	$(VENV)-2.16/bin/pip install -q -r requirements-2.16.txt
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

# ansible-test sanity on the lowest and the highest supported ansible-core, side by side.
sanity: venv link
	GPUFLEET_CI_STEPS="sanity-2.19 sanity-2.16" bash .ci/test.sh

lint: venv link
	$(BIN)/ansible-lint --offline -q

build: venv
	bash .ci/build.sh

# galaxy-importer on the tarball, as Galaxy / Private Automation Hub import it.
importer: build
	bash .ci/importer.sh

# antsibull-docs lint-collection-docs, then the docsite (Sphinx, warnings are errors).
docs: venv link
	bash .ci/docs.sh lint && bash .ci/docs.sh site

# ansible-builder create: the execution environment's build context in .build/ee-context.
ee: build
	bash .ci/ee.sh

# Molecule scenarios over the lab's twins (extensions/molecule/README.md).
molecule: venv link deps
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/molecule test --all

# The lab: 4 twin nodes + 4 BMCs on 127.0.0.1 (needs root; docs/lab.md).
lab-up: venv link deps
	lab/lab.sh up

lab-down:
	lab/lab.sh down

lab-status:
	lab/lab.sh status

# The main job on the lab: provision (BIOS, one reboot, verify), gate, fabric inventory, summary.
# Output in reports/lab/ (gate/<host>.json|xml|prom, fabric/). Red twins are reported, not fatal.
# The checkout's ansible.cfg puts the collection on the path: the same command works without make.
run: lab-up
	env -u ANSIBLE_COLLECTIONS_PATH $(BIN)/ansible-playbook -i inventories/lab playbooks/provision.yml

# Everything CI runs (.ci/test.sh): pytest (unit, lab, integration, the AWX job) beside sanity x2,
# lint, build, galaxy-importer, docs lint and docsite, ansible-builder; then molecule.
test: venv link deps
	bash .ci/test.sh

clean:
	rm -rf .build tests/output gpufleet-provision-*.tar.gz .venv-2.16
