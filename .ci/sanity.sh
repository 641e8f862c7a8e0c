#!/usr/bin/env bash
# ansible-test sanity on a copy of the checkout under ansible_collections/gpufleet/provision
# (ansible-test resolves symlinks, so the .build link is not enough).
# This machine cannot reach the host ansible-test downloads pip's bootstrap script from: the cache
# is pre-seeded with a small script that installs pip from a wheel fetched from PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
BIN=${VENV:-$REPO/.venv}/bin
# Outside the checkout: inside it, git would report the copy as ignored and ansible-test would skip it.
SANITY_ROOT=${SANITY_ROOT:-$(mktemp -d "${TMPDIR:-/tmp}/gpufleet-sanity.XXXXXX")}
trap 'rm -rf "$SANITY_ROOT"' EXIT
DEST=$SANITY_ROOT/ansible_collections/gpufleet/provision
rm -rf "$SANITY_ROOT"
mkdir -p "$DEST"
# Only the collection and its unit tests: the lab harness, benchmarks, fixture archives and the
# real-component tests are not part of the collection tarball (galaxy.yml build_ignore).
git ls-files -co --exclude-standard -z | while IFS= read -r -d '' f; do
  case "$f" in lab/*|benchmarks/*|extensions/*|tests/lab/*|tests/integration/*|tests/fixtures/*|.ci/*|collections/*|playbooks/collections) continue ;; esac
  [ -e "$f" ] || [ -L "$f" ] || continue
  mkdir -p "$DEST/$(dirname "$f")"; cp -P "$f" "$DEST/$f"
done

cache=$HOME/.ansible/test/cache
at=$("$BIN/python" -c 'import ansible_test, os; print(os.path.dirname(ansible_test.__file__))')
pipver=$(grep -oE "pip='[0-9.]+'" "$at/_internal/python_requirements.py" | head -1 | cut -d"'" -f2)
script=$cache/get_pip_${pipver//./_}.py
if [ -n "$pipver" ] && [ ! -s "$script" ]; then
  mkdir -p "$cache/wheels"
  "$BIN/pip" download -q --no-deps -d "$cache/wheels" "pip==$pipver"
  wheel=$(ls "$cache"/wheels/pip-"$pipver"-*.whl | head -1)
  cat > "$script" <<PY
# Stand-in for get-pip.py (its host is not reachable here): run pip from its wheel to install
# the requested packages. get-pip's own flags are dropped.
import runpy, sys
sys.path.insert(0, "$wheel")
args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
sys.argv = ["pip", "install", "--find-links", "$cache/wheels"] + args
runpy.run_module("pip", run_name="__main__", alter_sys=True)
PY
fi
cd "$DEST"
"$BIN/ansible-test" sanity --venv --python 3.11 --color no "$@"
