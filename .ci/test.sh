#!/usr/bin/env bash
# `make test`: every test and check, as CI runs it (.ci/run). Steps run in parallel where the
# 2-core machine allows; each step's log goes to .build/ci/<step>.log, its time and exit code to
# the table at the end. Exits non-zero when any step failed.
#   stage 1: pytest (unit, lab, integration, AWX job)  ||  the static checks, one after the other
#   stage 2: molecule (its lab uses the same ports as pytest's: after it)
# GPUFLEET_CI_STEPS="sanity-2.16 lint" runs only the named steps (any stage).
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${VENV:-.venv}/bin
LOGS=.build/ci
mkdir -p "$LOGS"
rm -f "$LOGS"/*.rc "$LOGS"/*.time
export PATH=$PWD/$BIN:$PATH

want() { [ -z "${GPUFLEET_CI_STEPS:-}" ] || [[ " $GPUFLEET_CI_STEPS " == *" $1 "* ]]; }

step() {  # step NAME COMMAND...: run, log, time, record the exit code
  local name=$1; shift
  want "$name" || return 0
  local t0=$SECONDS rc
  echo "ci: $name: start"
  "$@" >"$LOGS/$name.log" 2>&1
  rc=$?
  echo $rc >"$LOGS/$name.rc"
  echo $((SECONDS - t0)) >"$LOGS/$name.time"
  echo "ci: $name: exit $rc after $((SECONDS - t0)) s"
  [ $rc -eq 0 ] || tail -40 "$LOGS/$name.log" | sed "s/^/ci: $name: /"
  return 0
}

static() {
  step sanity-2.19 env VENV="$PWD/.venv" bash .ci/sanity.sh
  # 2.16 still runs the Python 2 era boilerplate tests (2.17 dropped them): the plugins keep the
  # boilerplate, the unit tests (Python 3 only) do not
  step sanity-2.16 env VENV="$PWD/.venv-2.16" bash .ci/sanity.sh --skip-test future-import-boilerplate --skip-test metaclass-boilerplate
  step lint "$BIN/ansible-lint" --offline -q
  step changelog-lint "$BIN/antsibull-changelog" lint
  step build bash .ci/build.sh
  step galaxy-importer bash .ci/importer.sh
  step docs-lint bash .ci/docs.sh lint
  step docsite bash .ci/docs.sh site
  step ee bash .ci/ee.sh
}

t0=$SECONDS
step pytest "$BIN/pytest" -q tests &
pytest_pid=$!
static
wait $pytest_pid
molecule_all() { "$BIN/python" molecule/_shared/lab.py inventory && "$BIN/molecule" test --all; }
step molecule molecule_all

echo "ci: step                 exit  seconds"
failed=0
for rc in "$LOGS"/*.rc; do
  [ -e "$rc" ] || continue
  name=$(basename "$rc" .rc)
  printf 'ci: %-20s %4s  %7s\n' "$name" "$(cat "$rc")" "$(cat "$LOGS/$name.time")"
  [ "$(cat "$rc")" = 0 ] || failed=1
done
echo "ci: total $((SECONDS - t0)) s; $([ $failed = 0 ] && echo all green || echo FAILED)"
# pytest's own closing line last, for whoever reads the end of the log
[ -e "$LOGS/pytest.log" ] && tail -1 "$LOGS/pytest.log"
exit $failed
