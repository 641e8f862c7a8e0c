"""The CI skips check (.ci/check_skips.py): a skip whose reason .ci/allowed-skips.txt does not allow
fails CI with one line naming the test; allowed ones pass; skips counted but not listed fail.
The sample logs are pytest's own -rs output, written by hand."""
import importlib.util
import os

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
_SPEC = importlib.util.spec_from_file_location("gpufleet_check_skips", os.path.join(REPO, ".ci", "check_skips.py"))
check_skips = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(check_skips)

with open(os.path.join(REPO, ".ci", "allowed-skips.txt")) as _handle:
    ALLOWED_TEXT = _handle.read()

LOG = """\
........................................................................ [ 50%]
.............................sss..s..                                   [100%]
=========================== short test summary info ============================
SKIPPED [1] tests/integration/awx/conftest.py:98: the lab needs root (podman rootful, debootstrap)
SKIPPED [2] tests/integration/fabric/test_playbook.py:61: ansible-playbook absent (make venv)
SKIPPED [1] tests/unit/roles/test_validate_probe_script.py:42: this machine has a CUDA runtime: the H2D probe measured for real
108 passed, 4 skipped in 12.31s
"""


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_skip_lines_are_read_with_count_file_line_and_reason():
    found, counted = check_skips.skips(LOG)
    assert found == [
        (1, "tests/integration/awx/conftest.py", 98, "the lab needs root (podman rootful, debootstrap)"),
        (2, "tests/integration/fabric/test_playbook.py", 61, "ansible-playbook absent (make venv)"),
        (1, "tests/unit/roles/test_validate_probe_script.py", 42,
         "this machine has a CUDA runtime: the H2D probe measured for real"),
    ]
    assert counted == 4


def test_only_the_unexpected_skip_is_named():
    allowed = check_skips.load_allowed(ALLOWED_TEXT)
    assert check_skips.problems("pytest-a.log", LOG, allowed) == [
        "pytest-a.log: unexpected skip: tests/integration/fabric/test_playbook.py:61: ansible-playbook absent (make venv) (x2)"]


def test_main_fails_on_an_unexpected_skip_and_prints_one_line_each(tmp_path, capsys):
    allowed = _write(tmp_path, "allowed.txt", ALLOWED_TEXT)
    log = _write(tmp_path, "pytest-a.log", LOG)
    assert check_skips.main([allowed, log]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "%s: unexpected skip: tests/integration/fabric/test_playbook.py:61: ansible-playbook absent (make venv) (x2)" % log
    assert out[1].startswith("skips: 4, unexpected: 1")
    assert len(out) == 2


def test_main_passes_when_every_skip_is_allowed_or_none_skipped(tmp_path, capsys):
    allowed = _write(tmp_path, "allowed.txt", ALLOWED_TEXT)
    good = _write(tmp_path, "pytest-b.log", "SKIPPED [1] tests/integration/devices/test_storage.py:22: needs root, "
                  "losetup and mkfs.ext4 (loop devices)\n3 passed, 1 skipped in 1.02s\n")
    clean = _write(tmp_path, "pytest-c.log", "....\n4 passed in 0.50s\n")
    assert check_skips.main([allowed, good, clean]) == 0
    assert capsys.readouterr().out.splitlines() == ["skips: 1, unexpected: 0 (allowed reasons: %s)" % allowed]


def test_a_licence_skip_is_allowed_and_a_not_in_this_checkout_guard_is_not():
    allowed = check_skips.load_allowed(ALLOWED_TEXT)
    log = ("SKIPPED [1] tests/unit/x/test_fm.py:10: fabric-manager/fabricmanager.cfg is absent: NVIDIA's customer-use "
           "licence forbids redistribution (it stays in ../shared/realdata)\n"
           "SKIPPED [1] tests/integration/lab/test_lab.py:188: roles/bios is not in this checkout\n"
           "==================== 5 passed, 2 skipped in 3.10s ====================\n")
    assert check_skips.problems("log", log, allowed) == [
        "log: unexpected skip: tests/integration/lab/test_lab.py:188: roles/bios is not in this checkout"]


def test_skips_counted_but_not_listed_fail():
    """pytest run without -rs: the summary counts skips nobody can read."""
    assert check_skips.problems("pytest-b.log", "..s.\n3 passed, 1 skipped in 0.40s\n", []) == [
        "pytest-b.log: 1 skipped but 0 listed: run pytest with -rs so that each skip's reason is seen"]


def test_coloured_output_is_read_too():
    log = "\x1b[33mSKIPPED\x1b[0m [1] tests/a.py:3: no sh\n\x1b[32m1 passed\x1b[0m, \x1b[33m1 skipped\x1b[0m in 0.1s\n"
    assert check_skips.problems("log", log, []) == ["log: unexpected skip: tests/a.py:3: no sh"]


def test_allowed_file_comments_and_bad_patterns():
    assert [p.pattern for p in check_skips.load_allowed("# why\n\n^needs root\\b\n  # indented comment\n")] == ["^needs root\\b"]
    with pytest.raises(ValueError, match=r"line 2: '\(unclosed' is not a regular expression"):
        check_skips.load_allowed("ok\n(unclosed\n")


def test_bad_usage_and_unreadable_files(tmp_path, capsys):
    assert check_skips.main([]) == 2
    assert check_skips.main([str(tmp_path / "missing.txt"), "x.log"]) == 2
    allowed = _write(tmp_path, "allowed.txt", ALLOWED_TEXT)
    assert check_skips.main([allowed, str(tmp_path / "absent.log")]) == 1
    assert "absent.log: cannot be read" in capsys.readouterr().out


def test_the_allowed_list_stays_short_and_every_pattern_compiles():
    patterns = check_skips.load_allowed(ALLOWED_TEXT)
    assert 1 <= len(patterns) <= 10
