"""Root: reads relative to a root, records one problem per path, resolves links inside the root."""
import os
import re

import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._node import fs
from ansible_collections.gpufleet.provision.plugins.module_utils._node.fs import Root


def test_missing_optional_unreadable(tmp_path):
    (tmp_path / "a").write_text("  hello \n")
    (tmp_path / "dir").mkdir()
    fs = Root(str(tmp_path))
    assert fs.read("a") == "hello"
    assert fs.read("nope") is None
    assert fs.read("nope") is None  # recorded once
    assert fs.read("other", optional=True) is None
    assert fs.read("dir") is None  # a folder where a file should be: invalid, named
    assert [(p["path"], p["kind"]) for p in fs.problems] == [("nope", "missing"), ("dir", "invalid")]
    assert fs.warnings()[0] == "nope: file not found (missing)"


def test_parse_failure_is_invalid_with_sample(tmp_path):
    (tmp_path / "n").write_text("forty-two\n")
    fs = Root(str(tmp_path))
    assert fs.parse("n", int) is None
    assert fs.problems[0]["kind"] == "invalid" and "forty-two" in fs.problems[0]["detail"]


def test_binary_text_is_invalid(tmp_path):
    (tmp_path / "b").write_bytes(b"\xff\xfe\x00")
    fs = Root(str(tmp_path))
    assert fs.read("b") is None
    assert fs.problems[0]["kind"] == "invalid"


def test_resolve_relative_absolute_and_broken_links(tmp_path):
    (tmp_path / "sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0").mkdir(parents=True)
    (tmp_path / "sys/bus/pci/devices").mkdir(parents=True)
    os.symlink("../../../devices/pci0000:15/0000:15:01.0/0000:16:00.0", str(tmp_path / "sys/bus/pci/devices/0000:16:00.0"))
    # a captured tree may keep an absolute target as on the host: it is taken inside the root
    os.symlink("/sys/devices/pci0000:15/0000:15:01.0", str(tmp_path / "sys/bus/pci/devices/0000:15:01.0"))
    os.symlink("../../../devices/gone", str(tmp_path / "sys/bus/pci/devices/broken"))
    os.symlink("loop", str(tmp_path / "loop"))
    fs = Root(str(tmp_path))
    assert fs.resolve("sys/bus/pci/devices/0000:16:00.0") == "sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0"
    assert fs.resolve("sys/bus/pci/devices/0000:15:01.0") == "sys/devices/pci0000:15/0000:15:01.0"
    assert fs.resolve("sys/bus/pci/devices/broken") is None
    assert fs.resolve("loop") is None


def test_listdir_sorted_and_absent(tmp_path):
    for name in ("b", "a", "c"):
        (tmp_path / name).write_text("")
    fs = Root(str(tmp_path))
    assert fs.listdir(".") == ["a", "b", "c"]
    assert fs.listdir("absent") == []
    assert fs.problems == []


def test_entries_tells_absent_from_unreadable(tmp_path):
    root = Root(str(tmp_path))
    assert root.entries("sys/bus/pci/devices") is None and root.problems == []
    os.makedirs(str(tmp_path / "sys" / "bus" / "pci"))
    # sys/bus/pci/devices in a symlink loop: listing it fails with ELOOP
    os.symlink("devices", str(tmp_path / "sys" / "bus" / "pci" / "devices"))
    assert root.entries("sys/bus/pci/devices") is None
    assert root.problems == [{"path": "sys/bus/pci/devices", "kind": "unreadable", "detail": "Too many levels of symbolic links"}]
    assert root.listdir("sys/bus/pci/devices") == []
    os.makedirs(str(tmp_path / "sys" / "class" / "nvme"))
    assert root.entries("sys/class/nvme") == []


def test_fifo_device_and_folder_never_block_and_are_named(tmp_path):
    # a FIFO where a sysfs attribute should be: open() without O_NONBLOCK would wait for a writer forever
    os.mkfifo(str(tmp_path / "fifo"))
    (tmp_path / "folder").mkdir()
    os.symlink("loop_b", str(tmp_path / "loop_a"))
    os.symlink("loop_a", str(tmp_path / "loop_b"))
    root = fs.Root(str(tmp_path))
    assert root.read("fifo") is None
    assert root.read("folder") is None
    assert root.read("loop_a") is None
    assert root.read("/dev/null"[1:]) is None  # no such path inside the root: missing
    kinds = {p["path"]: (p["kind"], p["detail"]) for p in root.problems}
    assert kinds["fifo"] == ("invalid", "not a regular file (a FIFO)")
    assert kinds["folder"] == ("invalid", "not a regular file (a folder)")
    assert kinds["loop_a"] == ("unreadable", "symlink loop")


def test_read_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(fs, "MAX_READ_BYTES", 10)
    (tmp_path / "big").write_bytes(b"x" * 11)
    (tmp_path / "small").write_bytes(b"x" * 10)
    root = fs.Root(str(tmp_path))
    assert root.read("big") is None
    assert root.read("small") == "x" * 10
    assert root.problems == [{"path": "big", "kind": "invalid", "detail": "larger than 10 bytes"}]


def test_atomic_write_replaces_keeps_mode_and_validates_first(tmp_path):
    target = tmp_path / "grub"
    target.write_text("old\n")
    os.chmod(str(target), 0o600)
    fs.atomic_write(str(target), "new\n")
    assert target.read_text() == "new\n"
    assert oct(os.stat(str(target)).st_mode & 0o777) == oct(0o600)

    def refuse(data):
        raise ValueError("unterminated quote on line 1")
    with pytest.raises(fs.WriteError) as err:
        fs.atomic_write(str(target), "GRUB_CMDLINE_LINUX=\"x\n", validate=refuse)
    assert str(err.value) == "%s: not written, the new content is not valid: unterminated quote on line 1" % target
    assert target.read_text() == "new\n"
    assert sorted(os.listdir(str(tmp_path))) == ["grub"]


def test_atomic_write_failure_names_path_and_leaves_nothing(tmp_path):
    with pytest.raises(fs.WriteError) as err:
        fs.atomic_write(str(tmp_path / "absent" / "file"), b"x")
    assert str(err.value).startswith("%s: cannot write (" % (tmp_path / "absent" / "file"))
    (tmp_path / "dir").mkdir()
    with pytest.raises(fs.WriteError) as err:
        fs.atomic_write(str(tmp_path / "dir"), "x")
    assert "it is a folder" in str(err.value)
    assert sorted(os.listdir(str(tmp_path))) == ["dir"]
    new = tmp_path / "fresh"
    fs.atomic_write(str(new), "x")
    assert oct(os.stat(str(new)).st_mode & 0o777) == oct(0o644)


def test_a_nul_byte_in_a_path_is_a_named_problem_or_write_error(tmp_path):
    root = fs.Root(str(tmp_path))
    assert root.read("a\0b") is None and root.entries("d\0", optional=False) is None
    assert [p["detail"] for p in root.problems] == ["the path holds a NUL byte"] * 2
    with pytest.raises(fs.WriteError) as err:
        fs.atomic_write(str(tmp_path / "x\0y"), "z")
    assert "NUL" in str(err.value) and os.listdir(str(tmp_path)) == []


def test_atomic_write_keeps_the_owner_of_the_file_it_replaces(tmp_path):
    target = tmp_path / "owned"
    target.write_text("old")
    root = os.getuid() == 0
    if root:   # CI and the lab run as root: the owner is another user's, which a new file would not get
        os.chown(str(target), 4242, 4343)
    before = os.stat(str(target))
    fs.atomic_write(str(target), "new")
    after = os.stat(str(target))
    assert (after.st_uid, after.st_gid) == (before.st_uid, before.st_gid)
    assert not root or (after.st_uid, after.st_gid) == (4242, 4343)
    assert target.read_text() == "new"


def test_atomic_write_is_the_one_way_plugins_replace_a_file():
    # issue 31: atomic writes were written nine times, some without error handling; one helper now.
    # A rename-into-place anywhere else in plugins/ fails here, naming the file and line.
    plugins = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "..", "plugins")
    pattern = re.compile(r"\bos\.(replace|rename)\(|\bmkstemp\(|\batomic_move\(")
    found = []
    for folder, _dirs, files in os.walk(plugins):
        for name in files:
            path = os.path.join(folder, name)
            if not name.endswith(".py") or path.endswith(os.path.join("_node", "fs.py")):
                continue
            with open(path) as handle:
                for number, line in enumerate(handle, 1):
                    if pattern.search(line.split("#")[0]):
                        found.append("%s:%d: %s" % (os.path.relpath(path, plugins), number, line.strip()))
    assert found == [], "write through fs.atomic_write instead:\n" + "\n".join(found)


def test_unwritable_names_the_file_that_stands_where_a_folder_must(tmp_path):
    (tmp_path / "afile").write_text("x")
    assert fs.unwritable(str(tmp_path / "new/deeper/f.conf")) is None
    assert fs.unwritable(str(tmp_path / "afile/sub/f.conf")) == "%s is not a folder" % (tmp_path / "afile")
