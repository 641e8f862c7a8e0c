#!/usr/bin/env bash
# ansible-builder create: the execution environment's build context (Containerfile, the collection
# tarball, Python requirements). No container engine can build it here; CI checks what it wrote.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${VENV:-.venv}/bin
ls gpufleet-provision-*.tar.gz >/dev/null 2>&1 || bash .ci/build.sh
ctx=.build/ee-context
rm -rf "$ctx"
"$BIN/ansible-builder" create -f execution-environment.yml --context "$ctx" -v 2
test -s "$ctx/Containerfile"
version=$(sed -n 's/^version: *//p' galaxy.yml)
grep -q "name: /build/gpufleet-provision-$version.tar.gz" "$ctx/_build/requirements.yml" \
  || { echo "ee: execution-environment.yml does not install gpufleet-provision-$version.tar.gz (galaxy.yml's version)"; exit 1; }
ls "$ctx"/_build/gpufleet-provision-*.tar.gz
grep -q 'ansible-core>=2.16,<2.20' "$ctx/Containerfile"
grep -q '^jmespath' "$ctx/_build/requirements.txt"
grep -n 'FROM\|ansible-galaxy\|requirements' "$ctx/Containerfile" | head -20
