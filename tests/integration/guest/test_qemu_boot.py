"""QEMU boots the plan: a guest started from ``qemu_args(plan, devices="stand-in", memory="ram")``
reports, from its own sysfs (lab/guest: Debian's cloud kernel + a busybox init that dumps it), the
NUMA nodes, CPUs, memory, HT siblings and device places the plan promised.

The lab model guest-mini (2 sockets x SNC2 x 1 core x 2 threads per node, GPU 0 + mlx5_0 on node 0,
GPU 1 + mlx5_1 on node 3, each pair under one PCIe switch) is small enough to boot under TCG.
KVM is used when it works (lab/guest/boot.py probes it); nothing here depends on which.
"""
import copy

import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._node.facts import collect
from ansible_collections.gpufleet.provision.plugins.module_utils._guest.qemu import qemu_args
from ansible_collections.gpufleet.provision.tests.integration.guest.conftest import MINI_OPTIONS, need
from ansible_collections.gpufleet.provision.tests.integration.guest.guest_view import beside, differences

CPU_MODEL = "Skylake-Server-v4"  # an Intel model: under TCG `-cpu max` shows no HT siblings
VIRTIO_VENDOR = "0x1af4"  # the stand-ins are virtio devices (qemu.STAND_IN)
def endpoints(seen):
    """The stand-in devices the guest sees, per guest NUMA node."""
    found = {}
    for bdf, dev in seen["pci"].items():
        if dev["vendor"] == VIRTIO_VENDOR:
            found.setdefault(dev["numa_node"], []).append(bdf)
    return found


@pytest.fixture(scope="module")
def booted(plans):
    """Factory: booted(requests) -> [(plan, topology seen from inside, GuestDump)] per guest, each booted once."""
    need("qemu-system-x86_64", "cpio")
    from lab.guest import boot
    done = {}

    def _boot(requests):
        key = repr(requests)
        if key not in done:
            out = []
            for plan in plans("guest-mini", requests, MINI_OPTIONS):
                dump = boot.boot(qemu_args(plan, devices="stand-in", memory="ram", cpu_model=CPU_MODEL))
                print("guest %s booted under %s in %.1f s" % (plan["name"], dump.accel, dump.seconds))
                out.append((plan, dump.topology(), dump))
            done[key] = out
        return done[key]
    return _boot


TWO_GPUS = [{"name": "g2", "gpus": 2}]
ONE_GPU_EACH = [{"name": "ga", "gpus": 1}, {"name": "gb", "gpus": 1}, {"name": "gc", "gpus": 0}]


@pytest.mark.parametrize("requests", [TWO_GPUS, ONE_GPU_EACH], ids=["one-guest-2-gpus", "guests-of-1-1-0-gpus"])
def test_guest_sees_the_plan(booted, requests):
    for plan, seen, _ in booted(requests):
        assert differences(plan, seen) == [], plan["name"]


def test_two_gpu_guest_by_hand(booted):
    """Expectations written from the model, not from the plan: both sockets' GPU nodes (0 and 3)
    become guest nodes 0 and 1, one host core each, so vCPUs 0-1 and 2-3 are sibling pairs; 2 GiB
    per node; two stand-ins per node, on one switch."""
    ((plan, seen, _),) = booted(TWO_GPUS)
    assert sorted(seen["nodes"]) == [0, 1]
    assert seen["nodes"][0]["cpus"] == [0, 1]
    assert seen["nodes"][1]["cpus"] == [2, 3]
    assert seen["siblings"] == [[0, 1], [2, 3]]
    for node in (0, 1):
        assert 1843 * 1024 <= seen["nodes"][node]["memory_kb"] <= 2048 * 1024
    per_node = endpoints(seen)
    assert sorted(per_node) == [0, 1]
    for node, found in per_node.items():
        assert len(found) == 2, (node, found)
        assert beside(seen["pci"][found[0]], seen["pci"][found[1]]), found
    # the host's GPU 0 (node 0) is in guest node 0, the host's GPU 1 (node 3) in guest node 1
    gpu = {d["host_pci"]: d["guest_pci"] for d in plan["devices"] if d["kind"] == "gpu"}
    assert seen["pci"][gpu["0000:18:00.0"]]["numa_node"] == 0
    assert seen["pci"][gpu["0000:bc:00.0"]]["numa_node"] == 1


def test_small_guests_by_hand(booted):
    """Two 1-GPU guests and one without GPUs: one host node each (never the same twice), so each
    guest is one node of one core (vCPUs 0-1, siblings); the GPU guests have their GPU and NIC
    stand-ins beside each other on node 0 and 2 GiB, the CPU-only guest no device and the 1 GiB of
    free hugepages of a node without GPUs."""
    guests = booted(ONE_GPU_EACH)
    assert [plan["name"] for plan, _, _ in guests] == ["ga", "gb", "gc"]
    for plan, seen, _ in guests:
        assert sorted(seen["nodes"]) == [0], plan["name"]
        assert seen["nodes"][0]["cpus"] == [0, 1]
        assert seen["siblings"] == [[0, 1]]
    for plan, seen, _ in guests[:2]:
        found = endpoints(seen)
        assert sorted(found) == [0] and len(found[0]) == 2, found
        assert beside(seen["pci"][found[0][0]], seen["pci"][found[0][1]])
        assert 1843 * 1024 <= seen["nodes"][0]["memory_kb"] <= 2048 * 1024
    _, seen, _ = guests[2]
    assert endpoints(seen) == {}
    assert 800 * 1024 <= seen["nodes"][0]["memory_kb"] <= 1024 * 1024
    hosts = [plan["host"]["numa_nodes"] for plan, _, _ in guests]
    assert sorted(hosts[:2]) == [[0], [3]] and hosts[2] in ([1], [2])


def test_differences_bite(booted):
    """The comparison above finds each kind of mismatch (a test that cannot fail proves nothing)."""
    ((plan, seen, _),) = booted(TWO_GPUS)
    wrong = copy.deepcopy(seen)
    wrong["nodes"][0]["cpus"] = [0]
    wrong["nodes"][1]["memory_kb"] = 4096 * 1024
    wrong["siblings"] = [[0], [1], [2, 3]]
    gpu = plan["guest"]["devices"][0]
    wrong["pci"][gpu["guest_pci"]]["numa_node"] = 1
    wrong["pci"][gpu["partner"]]["path"] = wrong["pci"][gpu["partner"]]["path"][:1] + ["0000:99:00.0", "0000:9a:00.0"]
    found = differences(plan, wrong)
    assert any(f.startswith("node 0 CPUs") for f in found), found
    assert any(f.startswith("node 1 memory") for f in found), found
    assert any(f.startswith("HT siblings") for f in found), found
    assert any("planned on node 0, guest says 1" in f for f in found), found
    assert any("not beside its partner" in f for f in found), found
    del wrong["nodes"][1]
    assert any(f.startswith("NUMA nodes") for f in differences(plan, wrong))


def test_the_dump_reads_as_node_facts(booted, tmp_path):
    """The guest's dump unpacks into a tree the node facts collector reads like a node's (the
    guest side of the gate runs on it): its NUMA nodes, CPUs and siblings are the plan's."""
    ((plan, _, dump),) = booted(TWO_GPUS)
    facts, _ = collect(dump.unpack(str(tmp_path / "guest")))
    assert [(n["id"], n["cpus"]) for n in facts["numa"]["nodes"]] == [(n["id"], n["cpus"]) for n in plan["guest"]["numa"]]
    assert facts["cpu"]["siblings"] == plan["guest"]["siblings"]
    assert facts["cpu"]["threads_per_core"] == 2 and facts["cpu"]["online_count"] == len(plan["vcpus"])
    assert not [p for p in facts["problems"] if "system/node" in str(p) or "system/cpu" in str(p)]
