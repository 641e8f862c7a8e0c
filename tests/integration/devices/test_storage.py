"""The storage role on loop devices backed by files in a temporary folder (never a disk of this
machine), mounted under that folder, run on this machine with a local connection.

Why not in a twin: a twin is an unprivileged container (no CAP_SYS_ADMIN, no /dev/loop*), so mount
and mkfs cannot run there; what the role does is the same on any Linux host, so the test runs it
here and cleans up (unmount, detach) whatever happens.
"""
import json
import os
import shutil
import struct
import subprocess
import sys

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PLAYBOOK_BIN = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
SIZE = 96 * 1024 * 1024

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("losetup") or not shutil.which("mkfs.ext4"),
                                reason="needs root, losetup and mkfs.ext4 (loop devices)")


class Loops:
    def __init__(self, base):
        self.base = base
        self.devices = []
        self.mounts = []

    def add(self, name):
        path = os.path.join(self.base, name + ".img")
        with open(path, "wb") as handle:
            handle.truncate(SIZE)
        dev = subprocess.run(["losetup", "--find", "--show", path], capture_output=True, text=True, check=True).stdout.strip()
        self.devices.append(dev)
        return dev

    def cleanup(self):
        for mnt in reversed(self.mounts):
            subprocess.run(["umount", "-l", mnt], capture_output=True, check=False)
        for dev in self.devices:
            subprocess.run(["losetup", "-d", dev], capture_output=True, check=False)


@pytest.fixture
def loops(tmp_path):
    handle = Loops(str(tmp_path))
    try:
        yield handle
    finally:
        handle.cleanup()


def run_role(tmp_path, mounts, check=False, diff=False):
    profile = yaml.safe_load(open(os.path.join(REPO, "inventories", "profiles", "hgx-h100.yml")))
    profile["storage"] = {"mounts": mounts}
    ppath = tmp_path / "profile.yml"
    ppath.write_text(yaml.safe_dump(profile))
    play = tmp_path / "play.yml"
    play.write_text(yaml.safe_dump([{"hosts": "localhost", "connection": "local", "gather_facts": False,
                                     "vars": {"gpufleet_profile": str(ppath), "storage_fstab": str(tmp_path / "fstab"),
                                              "storage_packages": []},
                                     "roles": ["gpufleet.provision.storage"]}]))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".build"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
               ANSIBLE_PYTHON_INTERPRETER=sys.executable, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default")
    cmd = [PLAYBOOK_BIN, "-i", "localhost,", str(play)] + (["--check"] if check else []) + (["--diff"] if diff else [])
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)


def recap(proc):
    line = [l for l in proc.stdout.splitlines() if l.startswith("localhost") and "ok=" in l][-1]
    return dict(part.split("=") for part in line.split()[2:])


def blkid(dev):
    proc = subprocess.run(["blkid", "-p", "-o", "export", dev], capture_output=True, text=True)
    return dict(l.split("=", 1) for l in proc.stdout.split() if "=" in l)


def test_blank_device_is_created_mounted_and_kept_by_uuid(tmp_path, loops):
    dev = loops.add("blank")
    mnt = str(tmp_path / "mnt" / "raid")
    loops.mounts.append(mnt)
    mounts = [{"path": mnt, "device": dev, "fstype": "ext4", "options": "defaults,noatime", "min_size_gb": 0.05}]
    # check mode predicts and changes nothing: the device stays blank, no fstab, no mount point
    proc = run_role(tmp_path, mounts, check=True, diff=True)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "mkfs -t ext4 %s" % dev in proc.stdout and recap(proc)["changed"] != "0"
    assert blkid(dev) == {} and not (tmp_path / "fstab").exists() and not os.path.exists(mnt)
    proc = run_role(tmp_path, mounts)
    assert proc.returncode == 0, proc.stdout[-3000:]
    fields = blkid(dev)
    assert fields["TYPE"] == "ext4"
    assert (tmp_path / "fstab").read_text() == "UUID=%s %s ext4 defaults,noatime 0 2\n" % (fields["UUID"], mnt)
    mounted = [l.split() for l in open("/proc/self/mounts") if l.split()[1] == mnt]
    assert mounted and os.path.realpath(mounted[-1][0]) == dev and mounted[-1][2] == "ext4"
    # second run: nothing to do
    proc = run_role(tmp_path, mounts)
    assert proc.returncode == 0 and recap(proc)["changed"] == "0", proc.stdout[-3000:]
    # unmounted (a reboot without the fstab being read, say): mounted again, never formatted again
    subprocess.run(["umount", mnt], check=True)
    proc = run_role(tmp_path, mounts)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert blkid(dev)["UUID"] == fields["UUID"]


@pytest.mark.parametrize("make,found", [
    (["mkfs.ext4", "-q"], "ext2/3/4"),
    (["mkswap"], "swap"),
    (None, "dos partition table (types 0x83)"),
])
def test_device_holding_data_is_refused_and_untouched(tmp_path, loops, make, found):
    dev = loops.add("data")
    if make:
        subprocess.run(make + [dev], check=True, capture_output=True)
    else:   # an MBR with one Linux partition, written by hand
        mbr = bytearray(512)
        mbr[446 + 4] = 0x83
        struct.pack_into("<II", mbr, 446 + 8, 2048, 4096)
        mbr[510:512] = b"\x55\xaa"
        with open(dev, "r+b") as handle:
            handle.write(bytes(mbr))
    with open(dev, "rb") as handle:
        before = handle.read(1024 * 1024)
    mnt = str(tmp_path / "mnt" / "scratch")
    loops.mounts.append(mnt)
    # xfs wanted: the ext4 is not "the wanted file system", so it is data, never formatted
    proc = run_role(tmp_path, [{"path": mnt, "device": dev, "fstype": "xfs"}])
    assert proc.returncode != 0
    out = proc.stdout
    assert "%s holds data (" % dev in out and found in out and "refused, never formatted or wiped" in out, out[-3000:]
    assert "Inspect the devices (read-only)" in out.split("holds data")[0].rsplit("TASK [", 1)[-1]   # refused in preflight
    with open(dev, "rb") as handle:
        assert handle.read(1024 * 1024) == before
    assert not (tmp_path / "fstab").exists() and not os.path.exists(mnt)


def test_existing_wanted_file_system_is_used_not_formatted(tmp_path, loops):
    dev = loops.add("kept")
    subprocess.run(["mkfs.ext4", "-q", dev], check=True, capture_output=True)
    uuid = blkid(dev)["UUID"]
    mnt = str(tmp_path / "mnt" / "kept")
    loops.mounts.append(mnt)
    proc = run_role(tmp_path, [{"path": mnt, "device": dev, "fstype": "ext4"}])
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert blkid(dev)["UUID"] == uuid and "mkfs" not in proc.stdout.split("PLAY RECAP")[0].split("Make each mount")[-1]
    assert (tmp_path / "fstab").read_text() == "UUID=%s %s ext4 defaults 0 2\n" % (uuid, mnt)
