#!/usr/bin/env bash
# The collection tarball (galaxy.yml build_ignore keeps the lab, its inventory, tests and CI out).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${VENV:-.venv}/bin
rm -f gpufleet-provision-*.tar.gz
"$BIN/ansible-galaxy" collection build --force .
