#!/usr/bin/env bash
# galaxy-importer on the tarball, as Galaxy / Private Automation Hub import it (ansible-lint and
# ansible-doc on every plugin and role; no container here, so no ansible-test inside the importer:
# sanity runs on its own, on the lowest and highest supported ansible-core).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${VENV:-.venv}/bin
tarball=$(ls gpufleet-provision-*.tar.gz 2>/dev/null | head -1)
[ -n "$tarball" ] || { bash .ci/build.sh; tarball=$(ls gpufleet-provision-*.tar.gz | head -1); }
export GALAXY_IMPORTER_CONFIG=$PWD/.ci/galaxy-importer.cfg
out=$(mktemp -d "${TMPDIR:-/tmp}/gpufleet-importer.XXXXXX")
trap 'rm -rf "$out"' EXIT
cd "$out"
PATH=$OLDPWD/$BIN:$PATH "$OLDPWD/$BIN/python" -m galaxy_importer.main "$OLDPWD/$tarball" | tee importer.log
# the importer exits 0 on some errors it only logs: fail on them too
if grep -E '^(ERROR|CRITICAL)' importer.log; then exit 1; fi
