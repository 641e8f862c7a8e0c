#!/usr/bin/env bash
# docs lint: antsibull-docs lint-collection-docs (plugin and role docs, the docs links);
# docs site: the collection's docsite as docs.ansible.com builds it (antsibull-docs + Sphinx, -W).
# No network here: intersphinx gets a local inventory of the two labels the pages link to on
# docs.ansible.com (.ci/docsite-objects.py), so a broken reference of ours still fails the build.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$PWD/${VENV:-.venv}/bin
export PATH=$BIN:$PATH ANSIBLE_COLLECTIONS_PATH=$PWD/collections ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false
case "${1:-lint}" in
lint)
  cd collections/ansible_collections/gpufleet/provision
  antsibull-docs lint-collection-docs --plugin-docs .
  ;;
site)
  dest=$(mktemp -d "${TMPDIR:-/tmp}/gpufleet-docsite.XXXXXX")
  trap 'rm -rf "$dest"' EXIT
  antsibull-docs sphinx-init --use-current --dest-dir "$dest" gpufleet.provision
  python .ci/docsite-objects.py "$dest/ansible-objects.inv"
  # offline: the docs.ansible.com inventories become the local one
  python - "$dest/conf.py" <<'PY'
import re, sys
path = sys.argv[1]
text = open(path).read()
inv = path.rsplit("/", 1)[0] + "/ansible-objects.inv"
text = re.sub(r"intersphinx_mapping = \{.*?\n\}", "intersphinx_mapping = {\n    'ansible_devel': ('https://docs.ansible.com/projects/ansible/devel/', %r),\n}" % inv, text, flags=re.S)
open(path, "w").write(text)
PY
  (cd "$dest" && ./build.sh)
  test -s "$dest/build/html/collections/gpufleet/provision/index.html"
  ls "$dest/build/html/collections/gpufleet/provision/" | sed 's/^/docsite: /'
  ;;
esac
