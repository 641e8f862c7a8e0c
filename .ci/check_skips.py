"""Fail CI on a test that skipped for a reason nobody allowed.

    python .ci/check_skips.py .ci/allowed-skips.txt .build/ci/pytest-a.log [more logs...]

Reads pytest's skip report (``-rs``: ``SKIPPED [n] file:line: reason``) from each log and prints one
line per skip whose reason matches none of the allowed patterns (.ci/allowed-skips.txt: one Python
regular expression per line, searched in the reason; lines starting with ``#`` are comments). A log whose summary
counts more skips than its report lists (pytest run without ``-rs``) is a failure too: a skip nobody
can read is not allowed either. Exit 0 when every skip is allowed, 1 otherwise, 2 on bad usage.
"""
import re
import sys

SKIP_LINE = re.compile(r"^SKIPPED \[(\d+)\] (.+?):(\d+): (.*)$")
# pytest's closing line: "52 passed, 5 skipped in 356.82s (0:05:56)" (between "=" with -v)
SUMMARY = re.compile(r"^=*\s*\d+ (passed|failed|skipped|deselected|xfailed|xpassed|errors?|warnings?)\b.* in [0-9.]+s\b")
SKIPPED = re.compile(r"\b(\d+) skipped\b")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def load_allowed(text):
    """The allowed patterns of the file's text: [compiled regex]. Raises ValueError naming a bad line."""
    patterns = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            patterns.append(re.compile(line))
        except re.error as exc:
            raise ValueError("line %d: %r is not a regular expression: %s" % (number, line, exc))
    return patterns


def skips(text):
    """The skips a pytest log reports: [(count, file, line, reason)], and the count its summary gives
    (the last ``N skipped`` of the log; 0 when none)."""
    found, counted = [], 0
    for raw in text.splitlines():
        line = ANSI.sub("", raw).rstrip()
        match = SKIP_LINE.match(line)
        if match:
            found.append((int(match.group(1)), match.group(2), int(match.group(3)), match.group(4)))
            continue
        if SUMMARY.match(line):
            skipped = SKIPPED.search(line)
            counted = int(skipped.group(1)) if skipped else 0
    return found, counted


def problems(name, text, allowed):
    """One line per unexpected skip in the log ``name`` (and one when skips are counted but not listed)."""
    found, counted = skips(text)
    out = ["%s: unexpected skip: %s:%d: %s%s" % (name, path, line, reason, " (x%d)" % count if count > 1 else "")
           for count, path, line, reason in found if not any(p.search(reason) for p in allowed)]
    listed = sum(count for count, _path, _line, _reason in found)
    if counted > listed:
        out.append("%s: %d skipped but %d listed: run pytest with -rs so that each skip's reason is seen"
                   % (name, counted, listed))
    return out


def main(argv):
    if len(argv) < 2:
        sys.stderr.write("usage: check_skips.py ALLOWED_SKIPS_FILE PYTEST_LOG...\n")
        return 2
    try:
        with open(argv[0]) as handle:
            allowed = load_allowed(handle.read())
    except (IOError, OSError, ValueError) as exc:
        sys.stderr.write("check_skips: %s: %s\n" % (argv[0], exc))
        return 2
    bad, total = [], 0
    for path in argv[1:]:
        try:
            with open(path, errors="replace") as handle:
                text = handle.read()
        except (IOError, OSError) as exc:
            bad.append("%s: cannot be read: %s" % (path, exc))
            continue
        total += sum(count for count, _p, _l, _r in skips(text)[0])
        bad.extend(problems(path, text, allowed))
    for line in bad:
        print(line)
    print("skips: %d, unexpected: %d (allowed reasons: %s)" % (total, len(bad), argv[0]))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
