"""The guest gate on a real guest: QEMU boots the plan of a lab model (lab/guest: Debian's cloud
kernel, a busybox init that dumps the guest's own sysfs as a ttar tree), and validate_node, run on
that dump through its root with the shipped guest profile plus the plan's guest section, passes the
guest checks. The same dump against a plan it was not booted from fails them, each naming what differs.

guest-mini (tests/fixtures/trees/guest-mini.yml): 2 sockets x SNC2, one core of 2 threads per node,
GPU 0 + mlx5_0 on host node 0, GPU 1 + mlx5_1 on host node 3, each pair under one PCIe switch. A
2-GPU guest gets host nodes 0 and 3 as guest nodes 0 and 1, 2 GiB each; the devices are stand-ins
(virtio) at the places the GPUs and NICs take. TCG or KVM: nothing here depends on which.
"""
import copy
import os
import shutil
import tempfile

import pytest
import yaml

from ansible_collections.gpufleet.provision.plugins.module_utils._node.facts import collect
from ansible_collections.gpufleet.provision.plugins.module_utils._guest.plan import plan_guests
from ansible_collections.gpufleet.provision.plugins.module_utils._guest.qemu import qemu_args
from ansible_collections.gpufleet.provision.plugins.modules import validate_node
from lab.hw import ttar

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__)))))
GUEST_IDS = ["guest.numa", "guest.siblings", "guest.memory", "guest.devices"]
CPU_MODEL = "Skylake-Server-v4"   # under TCG `-cpu max` shows no HT siblings


def _no_commands(argv, timeout=None):
    return 127, "", "%s: not run in this test" % argv[0]


@pytest.fixture(scope="module")
def booted():
    """(the plan, the root of the dumped tree of the guest QEMU booted from it), once per module."""
    for tool in ("qemu-system-x86_64", "cpio"):
        if not shutil.which(tool):
            pytest.skip("needs %s (apt-get install qemu-system-x86 cpio, or .ci/deps.sh)" % tool)
    from lab.guest import boot
    host = tempfile.mkdtemp(prefix="gpufleet-guest-gate-host-")
    guest = tempfile.mkdtemp(prefix="gpufleet-guest-gate-")
    try:
        with open(os.path.join(REPO, "tests", "fixtures", "trees", "guest-mini.ttar")) as handle:
            ttar.unpack(handle.read(), host)
        (plan,) = plan_guests(collect(host)[0], [{"name": "g2", "gpus": 2}], {"reserve_host_cpus": 0})
        dump = boot.boot(qemu_args(plan, devices="stand-in", memory="ram", cpu_model=CPU_MODEL))
        print("guest %s booted under %s in %.1f s" % (plan["name"], dump.accel, dump.seconds))
        yield plan, dump.unpack(guest)
    finally:
        shutil.rmtree(host, ignore_errors=True)
        shutil.rmtree(guest, ignore_errors=True)


def gate(root, guest_section):
    """validate_node as it runs on the node: the shipped guest profile plus ``guest_section``."""
    with open(os.path.join(REPO, "inventories", "profiles", "hgx-h100-guest.yml")) as handle:
        profile = yaml.safe_load(handle)
    profile["guest"] = guest_section
    result = validate_node.run({"profile": profile, "root": root, "checks": GUEST_IDS + ["cpu.smt"]},
                               runner=_no_commands, have=lambda name: None, systemd=False)
    return dict((c["id"], c) for c in result["report"]["checks"])


def test_the_guest_booted_from_its_plan_passes_the_guest_gate(booted):
    plan, root = booted
    got = gate(root, plan["guest"])
    assert dict((k, c["status"]) for k, c in got.items()) == dict.fromkeys(GUEST_IDS + ["cpu.smt"], "pass"), got
    # what the guest showed, by hand from the model: two nodes of one core each, SNC distances
    # across sockets, each a little under its 2 GiB zone, each pair on its node under one switch
    assert got["guest.numa"]["observed"] == {"cpus": {"node0": "0-1", "node1": "2-3"},
                                             "distances": {"node0": [10, 21], "node1": [21, 10]}}
    assert got["guest.siblings"]["observed"] == ["0-1", "2-3"]
    for mib in got["guest.memory"]["observed"]["mib"].values():
        assert 2048 * 0.9 < mib < 2048
    devices = got["guest.devices"]["observed"]["devices"]
    assert sorted((d["numa_node"], d.get("affinity", "-")) for d in devices.values()) == [(0, "-"), (0, "PIX"), (1, "-"), (1, "PIX")]


def test_the_same_guest_against_a_plan_it_was_not_booted_from_fails(booted):
    plan, root = booted
    wrong = copy.deepcopy(plan["guest"])
    wrong["numa"][0]["cpus"], wrong["numa"][1]["cpus"] = [0, 2], [1, 3]
    wrong["siblings"] = [[0, 2], [1, 3]]
    wrong["numa"][1]["memory_mib"] = 4096
    for dev in wrong["devices"]:
        dev["numa_node"] = 1 - dev["numa_node"]
    got = gate(root, wrong)
    assert dict((k, c["status"]) for k, c in got.items() if k in GUEST_IDS) == dict.fromkeys(GUEST_IDS, "fail")
    assert got["guest.numa"]["reason"] == "node0 CPUs 0-1, planned 0,2; node1 CPUs 2-3, planned 1,3"
    assert got["guest.siblings"]["reason"] == ("2 of 2 planned cores differ: CPU 0 siblings 0-1, planned 0,2; "
                                               "CPU 1 siblings 0-1, planned 1,3")
    assert got["guest.memory"]["reason"].startswith("short beyond 3% per node and 192 MiB of boot reservations: node1 ")
    gpus = sorted(d["guest_pci"] for d in plan["guest"]["devices"] if d["kind"] == "gpu")
    assert got["guest.devices"]["reason"].startswith("on another NUMA node than planned: gpu %s on 0 (planned 1); " % gpus[0])
