"""storage_mount's run past the device read, in process: the device's inspection is replaced (a test
has no disk to spare), the commands are recorded. Problems of the fstab are found before mkfs, a
UUID that fstab cannot name is refused, and the fstab is replaced whole."""
import os

import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._devices import storage
from ansible_collections.gpufleet.provision.plugins.modules import storage_mount


class _Module:
    def __init__(self, params, blkid="", check=False):
        self.params = dict({"fstype": "ext4", "options": "defaults", "min_size_gb": None, "device": "/dev/fake0"}, **params)
        self.check_mode, self._diff, self.calls, self._blkid = check, False, [], blkid

    def get_bin_path(self, name, required=False):
        return "/sbin/" + name

    def run_command(self, argv):
        self.calls.append(argv)
        if argv[0].endswith("blkid"):
            return 0, self._blkid, ""
        return 0, "", ""


def _state(blank=True, uuid="0b0f1a5e-1111-2222-3333-444455556666", mounted=False):
    blk = {} if blank else {"TYPE": "ext4", "UUID": uuid, "USAGE": "filesystem"}
    return {"device": "/dev/fake0", "size_bytes": 10 ** 12, "signatures": [] if blank else [{"type": "ext2/3/4", "offset": 1024}],
            "blkid": blk, "holders": [], "partitions": [], "mounted_at": ["/raid"] if mounted else [],
            "mounts_at_path": [("/dev/fake0", "ext4")] if mounted else []}


@pytest.fixture
def fake(monkeypatch, tmp_path):
    def make(state):
        monkeypatch.setattr(storage_mount, "inspect", lambda module, device, path: state)
    return make


def test_two_entries_for_the_mount_point_refused_before_mkfs(fake, tmp_path):
    fstab = tmp_path / "fstab"
    fstab.write_text("UUID=a /raid ext4 defaults 0 2\nUUID=b /raid xfs defaults 0 0\n")
    fake(_state(blank=True))
    module = _Module({"path": "/raid", "fstab": str(fstab)})
    with pytest.raises(storage.StorageError, match="fstab has 2 entries for /raid"):
        storage_mount.run(module)
    assert module.calls == [] and fstab.read_text().count("\n") == 2


def test_a_uuid_fstab_cannot_name_is_refused_before_anything(fake, tmp_path):
    fstab = tmp_path / "fstab"
    fstab.write_text("")
    fake(_state(blank=False, uuid="a b\nUUID=c"))
    module = _Module({"path": "/raid", "fstab": str(fstab)})
    with pytest.raises(storage.StorageError, match="not one fstab can name"):
        storage_mount.run(module)
    assert module.calls == [] and fstab.read_text() == ""


def test_mkfs_then_a_bad_uuid_is_named_and_fstab_untouched(fake, tmp_path):
    fstab = tmp_path / "fstab"
    fstab.write_text("# empty\n")
    fake(_state(blank=True))
    module = _Module({"path": "/raid", "fstab": str(fstab)}, blkid="UUID=x y\nTYPE=ext4\n")
    with pytest.raises(storage.StorageError, match="/dev/fake0: blkid gave UUID 'x y'"):
        storage_mount.run(module)
    assert [c[0] for c in module.calls] == ["/sbin/mkfs", "/sbin/blkid"] and fstab.read_text() == "# empty\n"


def test_fstab_replaced_whole_with_its_mode(fake, tmp_path):
    fstab = tmp_path / "fstab"
    fstab.write_text("UUID=r / ext4 defaults 0 1\n")
    fstab.chmod(0o600)
    fake(_state(blank=False, mounted=True))
    result = storage_mount.run(_Module({"path": "/raid/", "fstab": str(fstab), "options": "defaults,noatime"}))
    assert result["changed"] and result["action"] == "use"
    assert fstab.read_text() == ("UUID=r / ext4 defaults 0 1\n"
                                 "UUID=0b0f1a5e-1111-2222-3333-444455556666 /raid ext4 defaults,noatime 0 2\n")
    assert oct(fstab.stat().st_mode & 0o777) == "0o600" and os.listdir(str(tmp_path)) == ["fstab"]
