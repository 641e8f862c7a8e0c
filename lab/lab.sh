#!/usr/bin/env bash
# The lab's one command: lab/lab.sh up|down|status|reboot NAME (see lab/lab.py and docs/lab.md).
# Uses the checkout's venv when there is one (sushy-tools for the BMCs), else python3 + PyYAML.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
py=python3
if [ -x "$repo/.venv/bin/python" ]; then py=$repo/.venv/bin/python; fi
export CONTAINERS_CONF=${CONTAINERS_CONF:-$repo/lab/containers.conf}
cd "$repo"
exec "$py" -m lab.lab "$@"
