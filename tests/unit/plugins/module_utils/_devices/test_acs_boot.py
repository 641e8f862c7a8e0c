"""The ACS boot unit's files planned in one pass: only what differs, the code shown by its hash."""
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
