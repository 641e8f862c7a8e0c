"""Root: reads relative to a root, records one problem per path, resolves links inside the root."""
import os

from ansible_collections.gpufleet.provision.plugins.module_utils._node.fs import Root


def test_missing_optional_unreadable(tmp_path):
    (tmp_path / "a").write_text("  hello \n")
    (tmp_path / "dir").mkdir()
    fs = Root(str(tmp_path))
    assert fs.read("a") == "hello"
    assert fs.read("nope") is None
    assert fs.read("nope") is None  # recorded once
    assert fs.read("other", optional=True) is None
    assert fs.read("dir") is None  # EISDIR: unreadable
    assert [(p["path"], p["kind"]) for p in fs.problems] == [("nope", "missing"), ("dir", "unreadable")]
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
