#!/usr/bin/env bash
# `make test`: every test and check, as CI runs it (.ci/run). Steps run in parallel where the
# 2-core machine allows; each step's log goes to .build/ci/<step>.log, its time and exit code to
# the table at the end. Exits non-zero when any step failed.
#   stage 1: pytest (unit, lab, integration, AWX job)  ||  the static checks, one after the other
#   stage 2: galaxy-importer (its ansible-lint has a fixed timeout), then molecule (its lab uses
#            the same ports as pytest's: after it), then the skips check of the pytest logs
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
  step docs-lint bash .ci/docs.sh lint
  step docsite bash .ci/docs.sh site
  step ee bash .ci/ee.sh
}

t0=$SECONDS
# pytest in three processes side by side: each lab-backed folder brings up its own lab (own ports and
# container names, tests/integration/*/conftest.py), and most of a lab test's time is waiting for
# reboots and BMC resets, so they overlap well even on 2 cores. -rs lists every skip with its reason:
# the skips step below fails CI on one whose reason .ci/allowed-skips.txt does not allow.
step pytest-a "$BIN/pytest" -q -rs tests/unit tests/lab tests/integration/lab tests/integration/fabric \
  tests/integration/redfish tests/integration/validate &
pids=$!
step pytest-b "$BIN/pytest" -q -rs tests/integration/provision tests/integration/devices tests/integration/roce tests/integration/image &
pids="$pids $!"
step pytest-c "$BIN/pytest" -q -rs tests/integration/drivers tests/integration/awx tests/integration/guest tests/integration/roce_twin \
  tests/integration/example_inventory &
pids="$pids $!"
# every test folder is in exactly one of the three (a new folder must be added above)
missing=$(cd tests && ls -d unit lab integration/* | grep -vxE 'unit|lab|integration/(lab|fabric|redfish|validate|example_inventory|provision|devices|drivers|awx|guest|roce|roce_twin|image)|integration/__pycache__|integration/conftest.py' || true)
if [ -n "$missing" ]; then echo "ci: test folders in no pytest step: $missing"; echo 1 >"$LOGS/pytest-folders.rc"; echo 0 >"$LOGS/pytest-folders.time"; fi
static
wait $pids
# galaxy-importer gives its ansible-lint 180 s (hard-coded): beside three pytest processes on 2
# cores it ran out once (215 s); after them it takes about 75 s
step galaxy-importer bash .ci/importer.sh
molecule_all() { "$BIN/molecule" test --all; }
step molecule molecule_all
# A test that skipped is a test that did not run: every skip of this run's pytest steps needs a
# reason listed in .ci/allowed-skips.txt (one line per other skip, naming the test).
skip_logs=()
for name in pytest-a pytest-b pytest-c; do [ -e "$LOGS/$name.rc" ] && skip_logs+=("$LOGS/$name.log"); done
if [ ${#skip_logs[@]} -gt 0 ]; then
  GPUFLEET_CI_STEPS=skips step skips "$BIN/python" .ci/check_skips.py .ci/allowed-skips.txt "${skip_logs[@]}"
fi

echo "ci: step                 exit  seconds"
failed=0
for rc in "$LOGS"/*.rc; do
  [ -e "$rc" ] || continue
  name=$(basename "$rc" .rc)
  printf 'ci: %-20s %4s  %7s\n' "$name" "$(cat "$rc")" "$(cat "$LOGS/$name.time")"
  [ "$(cat "$rc")" = 0 ] || failed=1
done
echo "ci: total $((SECONDS - t0)) s; $([ $failed = 0 ] && echo all green || echo FAILED)"
# one closing line for the three pytest steps: "N passed, N failed, N skipped"
"$BIN/python" - "$LOGS" <<'PY'
import glob, re, sys
total = {"passed": 0, "failed": 0, "skipped": 0, "error": 0}
for path in sorted(glob.glob(sys.argv[1] + "/pytest-*.log")):
    lines = [l for l in open(path, errors="replace").read().splitlines() if l.strip()]
    last = lines[-1] if lines else ""
    for count, word in re.findall(r"(\d+) (passed|failed|skipped|errors?)", last):
        total["error" if word.startswith("error") else word] += int(count)
print("pytest: %d passed, %d failed, %d skipped" % (total["passed"], total["failed"] + total["error"], total["skipped"]))
PY
exit $failed
