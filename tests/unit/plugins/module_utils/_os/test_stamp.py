"""The converged stamp (_os/stamp.py): what moves the files digest and what does not, every reason
a node is not converged, the checks that stopped passing, writing and reading. Expectations by hand."""
import json
import os

import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._os import stamp as _stamp

MANAGED = ("etc/sysctl.d", "etc/default/grub", "var/lib/dpkg/status")


@pytest.fixture
def os_root(tmp_path):
    root = tmp_path / "os"
    (root / "etc/sysctl.d").mkdir(parents=True)
    (root / "etc/sysctl.d/90-gpufleet-tuning.conf").write_text("vm.nr_hugepages = 0\n")
    (root / "etc/default").mkdir(parents=True)
    (root / "etc/default/grub").write_text('GRUB_CMDLINE_LINUX="iommu=pt"\n')
    (root / "etc/hostname").write_text("gpu001\n")
    return root


@pytest.fixture
def hw_root(tmp_path):
    root = tmp_path / "hw"
    (root / "proc/sys/kernel/random").mkdir(parents=True)
    (root / "proc/sys/kernel/random/boot_id").write_text("b0000000-0000-0000-0000-000000000001\n")
    (root / "proc/sys/kernel/osrelease").write_text("6.8.0-45-generic\n")
    return root


def _digest(root):
    return _stamp.files_digest(str(root), MANAGED)


def test_files_digest_moves_with_every_edit_of_a_managed_path(os_root):
    first = _digest(os_root)
    assert first.startswith("sha256:") and _digest(os_root) == first
    conf = os_root / "etc/sysctl.d/90-gpufleet-tuning.conf"
    conf.write_text("vm.nr_hugepages = 1\n")                      # same size, new mtime
    os.utime(str(conf), ns=(1, 1))
    edited = _digest(os_root)
    assert edited != first
    conf.chmod(0o600)
    assert _digest(os_root) != edited
    (os_root / "etc/sysctl.d/99-other.conf").write_text("x\n")     # a file added in a managed folder
    added = _digest(os_root)
    (os_root / "etc/sysctl.d/99-other.conf").unlink()
    assert added != _digest(os_root)
    (os_root / "var/lib/dpkg").mkdir(parents=True)                 # an absent path appearing
    before = _digest(os_root)
    (os_root / "var/lib/dpkg/status").write_text("Package: bash\n")
    assert _digest(os_root) != before


def test_files_digest_ignores_paths_that_are_not_managed(os_root):
    first = _digest(os_root)
    (os_root / "etc/hostname").write_text("gpu002\n")
    (os_root / "etc/motd").write_text("hello\n")
    assert _digest(os_root) == first


def test_the_stamp_itself_never_counts_even_in_a_managed_folder(os_root):
    stamp = os_root / "etc/sysctl.d/converged.json"
    first = _stamp.files_digest(str(os_root), MANAGED, skip=str(stamp))
    _stamp.write(str(stamp), {"schema": 1})
    (os_root / "etc/sysctl.d/.converged.tmp1").write_text("{")         # a write under way
    assert _stamp.files_digest(str(os_root), MANAGED, skip=str(stamp)) == first
    assert _stamp.files_digest(str(os_root), MANAGED) != first          # without skip it would count


def test_a_symlink_counts_by_its_target(os_root):
    link = os_root / "etc/sysctl.d/50-link.conf"
    link.symlink_to("/nonexistent/a")
    first = _digest(os_root)
    link.unlink()
    link.symlink_to("/nonexistent/b")
    assert _digest(os_root) != first


def test_state_reads_boot_id_and_kernel_through_the_hardware_root(os_root, hw_root):
    now = _stamp.state("sha256:d1", str(hw_root), str(os_root))
    assert now["boot"] == {"boot_id": "b0000000-0000-0000-0000-000000000001", "kernel": "6.8.0-45-generic"}
    assert now["desired"] == "sha256:d1" and now["schema"] == 1


def test_differences_name_every_reason(os_root, hw_root):
    old = _stamp.state("sha256:d1", str(hw_root), str(os_root))
    assert _stamp.differences(old, dict(old)) == []
    assert _stamp.differences(None, old) == ["no stamp of a green run (or one of another schema)"]
    assert _stamp.differences(dict(old, schema=0), old) == ["no stamp of a green run (or one of another schema)"]
    assert _stamp.differences(old, dict(old, desired="sha256:d2")) == [
        "the desired state changed (profile, role variables or collection)"]
    assert _stamp.differences(old, dict(old, desired="")) == [
        "the desired state changed (profile, role variables or collection)"]
    assert _stamp.differences(old, dict(old, files="sha256:other")) == [
        "files provisioning manages changed since the last green run"]
    rebooted = dict(old, boot={"boot_id": "b2", "kernel": "6.8.0-45-generic"})
    assert _stamp.differences(old, rebooted) == ["booted since the last green run"]
    unreadable = dict(old, boot={"boot_id": None, "kernel": "6.8.0-45-generic"})
    assert _stamp.differences(old, unreadable) == ["boot id or kernel release unreadable"]
    both = dict(old, desired="sha256:d2", files="sha256:other")
    assert len(_stamp.differences(old, both)) == 2


def test_passing_lost_names_checks_that_passed_then_and_not_now():
    old = {"passing": ["memory.thp", "pcie.acs", "cpu.smt"]}
    report = {"checks": [{"id": "memory.thp", "status": "fail"}, {"id": "pcie.acs", "status": "pass"},
                         {"id": "cpu.smt", "status": "skip"}, {"id": "gpu.count", "status": "fail"}]}
    assert _stamp.passing_lost(old, report) == ["cpu.smt no longer passes (skip)", "memory.thp no longer passes (fail)"]
    assert _stamp.passing_lost(old, {"checks": []})[0] == "cpu.smt no longer passes (not evaluated)"
    assert _stamp.with_gate({"schema": 1}, report) == {"schema": 1, "passing": ["pcie.acs"]}


def test_write_then_read_round_trip_and_errors_name_the_path(tmp_path):
    path = tmp_path / "var/lib/gpufleet/converged.json"
    _stamp.write(str(path), {"schema": 1, "desired": "sha256:d1"})
    assert json.loads(path.read_text()) == {"schema": 1, "desired": "sha256:d1"}
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    assert _stamp.read(str(path)) == {"schema": 1, "desired": "sha256:d1"}
    path.write_text("{not json")
    assert _stamp.read(str(path)) is None
    assert _stamp.read(str(tmp_path / "absent.json")) is None
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(_stamp.StampError, match=r"converged stamp .*/file/converged.json: cannot be written"):
        _stamp.write(str(blocker / "converged.json"), {"schema": 1})


def test_a_write_that_fails_leaves_nothing_and_names_the_path(tmp_path):
    folder = tmp_path / "var"
    folder.mkdir()
    (folder / "converged.json").mkdir()                      # a folder where the stamp goes
    with pytest.raises(_stamp.StampError, match=r"converged stamp .*/var/converged.json: cannot write, it is a folder"):
        _stamp.write(str(folder / "converged.json"), {"schema": 1})
    with pytest.raises(_stamp.StampError, match=r"other.json: cannot be written, not JSON"):
        _stamp.write(str(folder / "other.json"), {"schema": object()})
    assert os.listdir(str(folder)) == ["converged.json"]


def test_a_fifo_at_the_stamp_or_boot_id_never_blocks(tmp_path):
    # a FIFO where the stamp should be: read() says "no stamp" (wash) instead of waiting for a writer
    fifo = tmp_path / "converged.json"
    os.mkfifo(str(fifo))
    assert _stamp.read(str(fifo)) is None
    root = tmp_path / "root"
    (root / "proc/sys/kernel/random").mkdir(parents=True)
    os.mkfifo(str(root / "proc/sys/kernel/random/boot_id"))
    assert _stamp._read_text(str(root / "proc/sys/kernel/random/boot_id")) is None
