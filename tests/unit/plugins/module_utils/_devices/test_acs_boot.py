"""The ACS boot unit's files planned in one pass: only what differs, the code shown by its hash."""
import os

import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._devices import acs_boot


def _reader(tree):
    return lambda path: tree.get(path, (None, None))


def test_plan_leaves_right_files_out_and_names_each_change():
    tree = {"/l/a.py": ("same\n", 0o644), "/l/b.py": ("old\n", 0o644), "/l/c.json": ("{}\n", 0o600),
            "/l/_facts.py": ("flat\n", 0o644)}
    files = [{"path": "/l/a.py", "content": "same\n", "mode": "0644", "diff": False},
             {"path": "/l/b.py", "content": "new\n", "mode": "0644", "diff": False},
             {"path": "/l/c.json", "content": "{}\n", "mode": "0644"},
             {"path": "/l/d.service", "content": "[Unit]\n", "mode": "0644"}]
    changes = acs_boot.plan(files, ["/l/_facts.py", "/l/_gone.py"], _reader(tree))
    assert [(c["path"], c["action"]) for c in changes] == [
        ("/l/b.py", "update"), ("/l/c.json", "mode"), ("/l/d.service", "create"), ("/l/_facts.py", "remove")]
    code = changes[0]
    assert code["before"].startswith("/l/b.py sha256:") and "old" not in code["before"]
    assert changes[2]["before"] == "" and changes[2]["after"] == "[Unit]\n"
    assert acs_boot.diff(changes)[1]["after_header"] == "/l/c.json (mode)"


def test_plan_of_a_converged_tree_is_empty():
    tree = {"/l/a.py": ("x\n", 0o644)}
    assert acs_boot.plan([{"path": "/l/a.py", "content": "x\n"}], ["/l/_old.py"], _reader(tree)) == []


def test_apply_writes_fixes_modes_and_removes(tmp_path):
    target, stale = tmp_path / "sub" / "f.json", tmp_path / "stale.py"
    stale.write_text("x")
    changes = acs_boot.plan([{"path": str(target), "content": "{}\n", "mode": "0640"}], [str(stale)])
    acs_boot.apply(changes)
    assert target.read_text() == "{}\n" and oct(target.stat().st_mode & 0o777) == "0o640" and not stale.exists()
    assert acs_boot.plan([{"path": str(target), "content": "{}\n", "mode": "0640"}], [str(stale)]) == []


@pytest.mark.parametrize("item, match", [
    ({"path": "/l/a", "content": "x", "mode": "abc"}, "/l/a: mode 'abc' is not an octal file mode"),
    ({"path": "/l/a", "content": "x", "mode": "10000"}, "mode '10000'"),
    ({"path": "l/a", "content": "x"}, "'l/a': not an absolute path"),
    ({"path": "/l/a", "content": None}, "/l/a: content must be text"),
])
def test_plan_refuses_what_cannot_be_a_boot_file(item, match):
    with pytest.raises(acs_boot.BootError, match=match):
        acs_boot.plan([item], [], lambda path: (None, None))


def test_plan_names_a_fifo_a_folder_and_a_blocked_folder(tmp_path):
    os.mkfifo(str(tmp_path / "fifo"))
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("")
    for name, match in (("fifo", "not a regular file"), ("dir", r"not a regular file \(a folder\)"),
                        ("file/sub/x", "%s is not a folder" % (tmp_path / "file"))):
        with pytest.raises(acs_boot.BootError, match=match):
            acs_boot.plan([{"path": str(tmp_path / name), "content": "x\n"}], [])
    assert sorted(os.listdir(str(tmp_path))) == ["dir", "fifo", "file"]
