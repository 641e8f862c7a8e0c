"""The lab guest harness without booting: the console parser, the topology reader on a hand-made
dump, and the initramfs builder (tests/integration/guest boots it for real)."""
import gzip
import os
import shutil
import subprocess

import pytest

from lab.guest import boot, build

# what init.sh prints for a guest with 2 nodes, one core of 2 threads each, one device behind a
# root port of an expander bus on node 1 (symlinks as sysfs has them), amid kernel noise
CONSOLE = "\r\n".join([
    "SeaBIOS (version 1.16.2)", "[    0.000000] Linux version 6.1.0", boot.BEGIN, "# gpufleet ttar v1",
    "Path: sys/devices/system/node/node0/cpulist", "Lines: 1", "0-1", "Mode: 444", "# ttar - - -",
    "Path: sys/devices/system/node/node0/meminfo", "Lines: 2", "Node 0 MemTotal:        1964608 kB",
    "Node 0 MemFree:         1900000 kB", "Mode: 444", "# ttar - - -",
    "Path: sys/devices/system/node/node1/cpulist", "Lines: 1", "2-3", "Mode: 444", "# ttar - - -",
    "Path: sys/devices/system/node/node1/meminfo", "Lines: 1", "Node 1 MemTotal:        2062908 kB", "Mode: 444",
    "# ttar - - -",
] + sum([["Path: sys/devices/system/cpu/cpu%d/topology/thread_siblings_list" % c, "Lines: 1",
          "0-1" if c < 2 else "2-3", "Mode: 444", "# ttar - - -"] for c in range(4)], []) + [
    "Path: sys/devices/pci0000:20/0000:20:00.0/numa_node", "Lines: 1", "1", "Mode: 644", "# ttar - - -",
    "Path: sys/devices/pci0000:20/0000:20:00.0/0000:21:00.0/numa_node", "Lines: 1", "1", "Mode: 644", "# ttar - - -",
    "Path: sys/devices/pci0000:20/0000:20:00.0/0000:21:00.0/vendor", "Lines: 1", "0x1af4", "Mode: 444", "# ttar - - -",
    "Path: sys/bus/pci/devices/0000:20:00.0", "SymlinkTo: ../../../devices/pci0000:20/0000:20:00.0", "# ttar - - -",
    "Path: sys/bus/pci/devices/0000:21:00.0",
    "SymlinkTo: ../../../devices/pci0000:20/0000:20:00.0/0000:21:00.0", "# ttar - - -",
    boot.END, "[    4.1] reboot: Power down", ""])


def test_console_dump_reads_as_the_guest_topology():
    seen = boot.parse_console(CONSOLE, "tcg", 1.0).topology()
    assert seen["nodes"] == {0: {"cpus": [0, 1], "memory_kb": 1964608}, 1: {"cpus": [2, 3], "memory_kb": 2062908}}
    assert seen["siblings"] == [[0, 1], [2, 3]]
    assert seen["pci"]["0000:21:00.0"] == {"host_bridge": "pci0000:20", "path": ["0000:20:00.0"], "numa_node": 1,
                                           "vendor": "0x1af4", "device": None, "class": None}
    assert seen["pci"]["0000:20:00.0"]["path"] == []


def test_a_console_without_the_end_marker_is_an_error_with_its_last_lines():
    cut = CONSOLE.split(boot.END)[0] + "Kernel panic - not syncing: Attempted to kill init!"
    with pytest.raises(boot.GuestBootError, match="(?s)no complete dump.*Kernel panic"):
        boot.parse_console(cut, "kvm", 3.0, rc=0)


def test_forced_accelerator_wins(monkeypatch):
    monkeypatch.setenv("GPUFLEET_GUEST_ACCEL", "tcg")
    assert boot.choose_accel(["-cpu", "Skylake-Server-v4"]) == "tcg"


def test_option_takes_the_last_value():
    assert boot._option(["-cpu", "a", "-m", "1G", "-cpu", "b"], "-cpu") == "b"
    assert boot._option(["-m", "1G"], "-cpu") is None


@pytest.mark.skipif(not (shutil.which("cpio") and os.path.exists(build.BUSYBOX)),
                    reason="needs cpio and busybox-static (.ci/deps.sh)")
def test_initramfs_holds_init_and_busybox_and_is_named_by_their_hash(tmp_path):
    first = build.initramfs(str(tmp_path))
    listing = subprocess.run(["cpio", "-t", "--quiet"], input=gzip.open(first).read(), capture_output=True, check=True)
    names = set(listing.stdout.decode().split())
    assert {"init", "bin/busybox", "bin/sh", "dev", "proc", "sys"} <= names
    assert build.initramfs(str(tmp_path)) == first  # cached
    assert os.path.basename(first) == "initramfs-%s.cpio.gz" % build._initramfs_key()
