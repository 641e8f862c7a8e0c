"""The guest side of the gate (_gate/checks/guest.py): a guest's own sysfs against the ``guest``
section of the plan it was booted from. Facts come from trees (a fixture tree, or a small stand-in
guest written here as QEMU shows one); every plan section and expectation is written by hand."""
import copy
import json
import os

import pytest
import yaml

from ansible_collections.gpufleet.provision.plugins.module_utils._desired import profile as _profile
from ansible_collections.gpufleet.provision.plugins.module_utils._node.facts import collect
from ansible_collections.gpufleet.provision.plugins.module_utils._gate import gate
from ansible_collections.gpufleet.provision.plugins.module_utils._gate.collect import PciDevices
from lab.hw import ttar

GUEST_IDS = ["guest.numa", "guest.siblings", "guest.memory", "guest.devices"]
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
PROFILES = os.path.join(REPO, "inventories", "profiles")
GUESTS = os.path.join(REPO, "tests", "fixtures", "guests")

# A lab model small enough to boot (2 sockets x SNC2, one core of 2 threads per node, 2 GPU-NIC
# pairs): the plan's guest section as the planner gives it, written by hand. Node sizes differ so a
# zone on the wrong node shows.
# Distances as SNC2 gives them: 12 within a socket, 21 across. Devices at their QEMU/libvirt address
# (guest_pci) and at their cloud-hypervisor one (a PCI segment per pair).
SNC2 = ([10, 12, 21, 21], [12, 10, 21, 21], [21, 21, 10, 12], [21, 21, 12, 10])
PLAN = {
    "numa": [{"id": 0, "cpus": [0, 1], "memory_mib": 256, "host_node": 0, "distances": SNC2[0]},
             {"id": 1, "cpus": [2, 3], "memory_mib": 512, "host_node": 1, "distances": SNC2[1]},
             {"id": 2, "cpus": [4, 5], "memory_mib": 1024, "host_node": 2, "distances": SNC2[2]},
             {"id": 3, "cpus": [6, 7], "memory_mib": 3072, "host_node": 3, "distances": SNC2[3]}],
    "siblings": [[0, 1], [2, 3], [4, 5], [6, 7]],
    "devices": [{"kind": "gpu", "guest_pci": "0000:83:00.0", "numa_node": 0, "pair": 0, "partner": "0000:84:00.0",
                 "cloud_hypervisor_pci": "0001:00:01.0"},
                {"kind": "nic", "guest_pci": "0000:84:00.0", "numa_node": 0, "pair": 0, "partner": "0000:83:00.0",
                 "cloud_hypervisor_pci": "0001:00:02.0"},
                {"kind": "gpu", "guest_pci": "0000:a3:00.0", "numa_node": 2, "pair": 1, "partner": "0000:a4:00.0",
                 "cloud_hypervisor_pci": "0002:00:01.0"},
                {"kind": "nic", "guest_pci": "0000:a4:00.0", "numa_node": 2, "pair": 1, "partner": "0000:a3:00.0",
                 "cloud_hypervisor_pci": "0002:00:02.0"}],
}
# MemTotal of each node as a QEMU 7.2 TCG guest (Debian 6.1 cloud kernel) booted with zones of
# 256, 512, 1024 and 3072 MiB reported it (node 3 held the kernel image and the 64 MiB swiotlb).
MEASURED_KB = (256348, 515432, 1031528, 2997028)


def _write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)


def _device(root, chain, numa_node="0", vendor="0x1b36", klass="0x00ff00"):
    """A PCI device at the end of ``chain`` (host bridge folder, bridges..., device), with the
    symlink sys/bus/pci/devices/<bdf> that points at it."""
    rel = "sys/devices/" + "/".join(chain)
    for name, value in (("vendor", vendor), ("device", "0x0005"), ("class", klass), ("numa_node", numa_node)):
        if value is not None:
            _write(root, rel + "/" + name, value + "\n")
    link = os.path.join(root, "sys/bus/pci/devices", chain[-1])
    os.makedirs(os.path.dirname(link), exist_ok=True)
    os.symlink("../../../devices/" + "/".join(chain), link)


def standin_guest(root, memory_kb=MEASURED_KB, node_cpus=("0-1", "2-3", "4-5", "6-7"), siblings=None,
                  distances=SNC2, nic_own_port=False, pxb_numa=("0", "2"), hypervisor="qemu"):
    """A guest's sysfs as QEMU q35 shows one booted from PLAN with stand-in devices: per pair a
    pxb-pcie expander (its own host bridge, numa_node of its guest node), a root port, a switch
    (upstream and two downstream ports), the GPU stand-in and the NIC stand-in below it.
    ``nic_own_port``: pair 0's NIC on a root port of its own on the same expander.
    ``hypervisor="cloud-hypervisor"``: each pair alone on its PCI segment, no switch."""
    _write(root, "sys/devices/system/node/online", "0-%d\n" % (len(node_cpus) - 1))
    for nid, cpus in enumerate(node_cpus):
        base = "sys/devices/system/node/node%d/" % nid
        _write(root, base + "cpulist", cpus + "\n")
        _write(root, base + "distance", " ".join(str(d) for d in distances[nid]) + "\n")
        _write(root, base + "meminfo", "Node %d MemTotal:       %d kB\nNode %d MemFree:        %d kB\n"
               % (nid, memory_kb[nid], nid, memory_kb[nid] - 16000))
    _write(root, "sys/devices/system/cpu/online", "0-7\n")
    for cpu in range(8):
        topo = "sys/devices/system/cpu/cpu%d/topology/" % cpu
        _write(root, topo + "thread_siblings_list", (siblings or {}).get(cpu, "%d-%d" % (cpu - cpu % 2, cpu - cpu % 2 + 1)) + "\n")
        _write(root, topo + "physical_package_id", "%d\n" % (cpu // 4))
    if hypervisor == "cloud-hypervisor":
        for segment, numa in zip((1, 2), pxb_numa):
            _device(root, ["pci%04x:00" % segment, "%04x:00:01.0" % segment], numa)
            nic = 3 if nic_own_port and segment == 1 else segment
            _device(root, ["pci%04x:00" % nic, "%04x:00:02.0" % nic], numa)
        return root
    for bus, numa in zip(("8", "a"), pxb_numa):
        host, switch = "pci0000:%s0" % bus, ["0000:%s0:00.0" % bus, "0000:%s1:00.0" % bus]
        _device(root, [host] + switch + ["0000:%s2:00.0" % bus, "0000:%s3:00.0" % bus], numa)
        if nic_own_port and bus == "8":
            _device(root, [host, "0000:80:01.0", "0000:84:00.0"], numa)
        else:
            _device(root, [host] + switch + ["0000:%s2:01.0" % bus, "0000:%s4:00.0" % bus], numa)
    return root


def inputs(root, plan=None, profile=None, pci=True):
    """Inputs over the tree at ``root`` with ``plan`` as the profile's guest section (None: PLAN,
    False: no guest section)."""
    prof = {"name": "guest-test"}
    if plan is not False:
        prof["guest"] = copy.deepcopy(PLAN if plan is None else plan)
    prof.update(profile or {})
    return gate.Inputs(collect(root)[0], _profile.validate(prof, gate.CHECK_IDS), pci=PciDevices(root) if pci else None)


def guest_checks(ctx):
    return dict((c["id"], c) for c in gate.evaluate(ctx, checks=GUEST_IDS)["checks"])


@pytest.fixture
def guest(tmp_path):
    """guest(**faults) -> the root of a fresh stand-in guest tree."""
    made = []

    def _make(**faults):
        root = str(tmp_path / ("g%d" % len(made)))
        made.append(root)
        return standin_guest(root, **faults)
    return _make


def test_a_guest_that_matches_its_plan_passes_every_guest_check(guest):
    got = guest_checks(inputs(guest()))
    assert dict((k, v["status"]) for k, v in got.items()) == dict.fromkeys(GUEST_IDS, "pass"), got
    assert got["guest.numa"]["observed"] == {"cpus": {"node0": "0-1", "node1": "2-3", "node2": "4-5", "node3": "6-7"},
                                             "distances": {"node0": SNC2[0], "node1": SNC2[1], "node2": SNC2[2], "node3": SNC2[3]}}
    assert got["guest.siblings"]["observed"] == ["0-1", "2-3", "4-5", "6-7"]
    assert got["guest.memory"]["observed"] == {"mib": {"node0": 250.3, "node1": 503.4, "node2": 1007.4, "node3": 2926.8}}
    assert got["guest.devices"]["observed"] == {"addressing": "guest_pci", "devices": {
        "0000:83:00.0": {"numa_node": 0, "partner": "0000:84:00.0", "affinity": "PIX"}, "0000:84:00.0": {"numa_node": 0},
        "0000:a3:00.0": {"numa_node": 2, "partner": "0000:a4:00.0", "affinity": "PIX"}, "0000:a4:00.0": {"numa_node": 2}}}


def test_a_cloud_hypervisor_guest_is_read_at_its_segment_addresses(guest):
    # no switch there: a pair alone on its segment meets at the segment's host bridge (PHB)
    got = guest_checks(inputs(guest(hypervisor="cloud-hypervisor")))
    assert dict((k, v["status"]) for k, v in got.items()) == dict.fromkeys(GUEST_IDS, "pass"), got
    assert got["guest.devices"]["observed"] == {"addressing": "cloud_hypervisor_pci", "devices": {
        "0001:00:01.0": {"numa_node": 0, "partner": "0001:00:02.0", "affinity": "PHB"}, "0001:00:02.0": {"numa_node": 0},
        "0002:00:01.0": {"numa_node": 2, "partner": "0002:00:02.0", "affinity": "PHB"}, "0002:00:02.0": {"numa_node": 2}}}
    # pair 0's NIC on a segment of its own: a segment is the address's domain, so it is not where planned
    got = guest_checks(inputs(guest(hypervisor="cloud-hypervisor", nic_own_port=True)))["guest.devices"]
    assert got["status"] == "fail"
    assert got["reason"] == "no PCI device at the planned address: nic 0001:00:02.0"


def test_a_recorded_qemu_guest_passes_the_plan_it_was_booted_from(tmp_path):
    # tests/fixtures/guests/README.md: guest-mini's 2-GPU guest, booted by QEMU, its own sysfs
    with open(os.path.join(GUESTS, "guest-mini-g2.plan.json")) as handle:
        plan = json.load(handle)
    root = str(tmp_path)
    with open(os.path.join(GUESTS, "guest-mini-g2.ttar")) as handle:
        ttar.unpack(handle.read(), root)
    got = guest_checks(inputs(root, plan["guest"]))
    assert dict((k, v["status"]) for k, v in got.items()) == dict.fromkeys(GUEST_IDS, "pass"), got
    # by hand from the model: host nodes 0 and 3 as guest nodes 0 and 1 (one core each, 21 apart),
    # 2 GiB zones (node 0 holds the kernel and the swiotlb: 6.3 % short), each pair under a switch
    assert got["guest.numa"]["observed"] == {"cpus": {"node0": "0-1", "node1": "2-3"},
                                             "distances": {"node0": [10, 21], "node1": [21, 10]}}
    assert got["guest.memory"]["observed"] == {"mib": {"node0": 1918.6, "node1": 2014.6}}
    assert got["guest.devices"]["observed"] == {"addressing": "guest_pci", "devices": {
        "0000:13:00.0": {"numa_node": 0, "partner": "0000:14:00.0", "affinity": "PIX"}, "0000:14:00.0": {"numa_node": 0},
        "0000:23:00.0": {"numa_node": 1, "partner": "0000:24:00.0", "affinity": "PIX"}, "0000:24:00.0": {"numa_node": 1}}}
    # the same guest against the plan of a guest whose pairs sit the other way round
    swapped = copy.deepcopy(plan["guest"])
    for dev in swapped["devices"]:
        dev["numa_node"] = 1 - dev["numa_node"]
    got = guest_checks(inputs(root, swapped))["guest.devices"]
    assert got["status"] == "fail" and got["reason"] == (
        "on another NUMA node than planned: gpu 0000:13:00.0 on 0 (planned 1); nic 0000:14:00.0 on 0 (planned 1); "
        "gpu 0000:23:00.0 on 1 (planned 0); nic 0000:24:00.0 on 1 (planned 0)")


def test_a_flattened_cloud_guest_fails_a_plan_for_snc_nodes(unpacked_tree):
    # The cloud guest: 96 vCPUs in 2 nodes of 928 GiB, GPUs and NICs each alone on a Hyper-V vPCI
    # domain. The plan it should have had: the reference node's 8 SNC nodes, 12 vCPUs and 116 GiB each,
    # each GPU with its rail NIC under one switch on its node.
    snc = {
        "numa": [{"id": n, "cpus": list(range(12 * n, 12 * n + 12)), "memory_mib": 118784, "host_node": n} for n in range(8)],
        "siblings": [[c, c + 1] for c in range(0, 96, 2)],
        "devices": [d for n in range(8) for d in (
            {"kind": "gpu", "guest_pci": "000%d:00:00.0" % (n + 1), "numa_node": n, "pair": n, "partner": "010%d:00:00.0" % (n + 1)},
            {"kind": "nic", "guest_pci": "010%d:00:00.0" % (n + 1), "numa_node": n, "pair": n, "partner": "000%d:00:00.0" % (n + 1)})],
    }
    got = guest_checks(inputs(unpacked_tree("cloud-guest"), snc))
    assert dict((k, v["status"]) for k, v in got.items()) == {
        "guest.numa": "fail", "guest.siblings": "pass", "guest.memory": "fail", "guest.devices": "fail"}
    assert got["guest.numa"]["reason"].startswith("NUMA nodes 0-1, planned 0-7; node0 CPUs 0-47, planned 0-11; "
                                                  "node1 CPUs 48-95, planned 12-23")
    assert got["guest.memory"]["reason"] == (
        "planned nodes absent: node2 (118784 MiB); node3 (118784 MiB); node4 (118784 MiB); node5 (118784 MiB); "
        "node6 (118784 MiB); node7 (118784 MiB); more memory than planned (another zone on the node?): "
        "node0 950272 MiB of a 118784 MiB zone; node1 950272 MiB of a 118784 MiB zone")
    # pair 0 (GPU 0001, NIC 0101) sits on node 0 as planned; every pair is NODE apart (a vPCI domain each)
    assert got["guest.devices"]["reason"] == (
        "on another NUMA node than planned: gpu 0002:00:00.0 on 0 (planned 1); nic 0102:00:00.0 on 0 (planned 1); "
        "gpu 0003:00:00.0 on 0 (planned 2); nic 0103:00:00.0 on 0 (planned 2); gpu 0004:00:00.0 on 0 (planned 3); "
        "nic 0104:00:00.0 on 0 (planned 3); gpu 0005:00:00.0 on 1 (planned 4); nic 0105:00:00.0 on 1 (planned 4); "
        "and 6 more; not under one PCIe switch with the partner (allowed PIX): gpu 0001:00:00.0 - 0101:00:00.0 NODE; "
        "gpu 0002:00:00.0 - 0102:00:00.0 NODE; gpu 0003:00:00.0 - 0103:00:00.0 NODE; gpu 0004:00:00.0 - 0104:00:00.0 NODE; "
        "gpu 0005:00:00.0 - 0105:00:00.0 NODE; gpu 0006:00:00.0 - 0106:00:00.0 NODE; gpu 0007:00:00.0 - 0107:00:00.0 NODE; "
        "gpu 0008:00:00.0 - 0108:00:00.0 NODE")


@pytest.mark.parametrize("fault,check_id,reason", [
    # QEMU without -numa dist: every remote node at 20
    ({"distances": ([10, 20, 20, 20], [20, 10, 20, 20], [20, 20, 10, 20], [20, 20, 20, 10])}, "guest.numa",
     "node0 distances 10 20 20 20, planned 10 12 21 21; node1 distances 20 10 20 20, planned 12 10 21 21; "
     "node2 distances 20 20 10 20, planned 21 21 10 12; node3 distances 20 20 20 10, planned 21 21 12 10"),
    # vCPUs 2 and 4 given to each other's node: the counts per node stay right
    ({"node_cpus": ("0-1", "3-4", "2,5", "6-7")}, "guest.numa", "node1 CPUs 3-4, planned 2-3; node2 CPUs 2,5, planned 4-5"),
    # the guest numbers a core's threads cores-first (QEMU without threads=2 and a host-order pin)
    ({"siblings": {0: "0,4", 4: "0,4", 1: "1,5", 5: "1,5"}}, "guest.siblings",
     "2 of 4 planned cores differ: CPU 0 siblings 0,4, planned 0-1; CPU 4 siblings 0,4, planned 4-5"),
    # one zone of 3 GiB on node 0, the 256 MiB zone on node 3: zones swapped between guest nodes
    ({"memory_kb": [2997028, 515432, 1031528, 256348]}, "guest.memory",
     "more memory than planned (another zone on the node?): node0 2927 MiB of a 256 MiB zone; short beyond 3% per node and "
     "192 MiB of boot reservations: node3 250 MiB of 3072 (91.9% short)"),
    # node 2's zone half its plan (hugepages short on the host, a smaller backend)
    ({"memory_kb": [256348, 515432, 524288, 2997028]}, "guest.memory",
     "short beyond 3% per node and 192 MiB of boot reservations: node2 512 MiB of 1024 (50.0% short); node3 2927 MiB of 3072 (4.7% short)"),
    # the NIC stand-in on its own root port of the same expander: they meet at the host bridge
    ({"nic_own_port": True}, "guest.devices",
     "not under one PCIe switch with the partner (allowed PIX): gpu 0000:83:00.0 - 0000:84:00.0 PHB"),
    # the expander bus of pair 1 without numa_node=: the kernel says -1
    ({"pxb_numa": ("0", "-1")}, "guest.devices",
     "on another NUMA node than planned: gpu 0000:a3:00.0 on -1 (planned 2); nic 0000:a4:00.0 on -1 (planned 2)"),
])
def test_one_guest_fault_turns_its_check_red_and_only_it(guest, fault, check_id, reason):
    got = guest_checks(inputs(guest(**fault)))
    red = dict((k, v["reason"]) for k, v in got.items() if v["status"] != "pass")
    assert list(red) == [check_id], red
    assert got[check_id]["status"] == "fail" and red[check_id] == reason


def test_the_boot_reservations_count_once_across_the_guest(guest):
    # measured: node 3 is 145 MiB short, 53 MiB beyond its 3 % (92 MiB). Node 1 100 MiB beyond its
    # 3 % as well: 153 MiB of the 192 together, a pass; 150 MiB beyond: 203 MiB, a fail.
    kb = list(MEASURED_KB)
    kb[1] = int((512 - 512 * 0.03 - 100) * 1024)
    assert guest_checks(inputs(guest(memory_kb=kb)))["guest.memory"]["status"] == "pass"
    kb[1] = int((512 - 512 * 0.03 - 150) * 1024)
    got = guest_checks(inputs(guest(memory_kb=kb)))["guest.memory"]
    assert got["status"] == "fail"
    assert got["reason"] == ("short beyond 3% per node and 192 MiB of boot reservations: node1 347 MiB of 512 (32.3% short); "
                             "node3 2927 MiB of 3072 (4.7% short)")


def test_a_device_missing_from_its_planned_address_fails_naming_it(guest):
    root = guest()
    os.remove(os.path.join(root, "sys/bus/pci/devices/0000:a4:00.0"))
    got = guest_checks(inputs(root))["guest.devices"]
    assert got["status"] == "fail" and got["reason"] == "no PCI device at the planned address: nic 0000:a4:00.0"


def test_garbage_in_a_device_numa_node_is_an_error_naming_the_path(guest):
    root = guest()
    _write(root, "sys/devices/pci0000:a0/0000:a0:00.0/0000:a1:00.0/0000:a2:00.0/0000:a3:00.0/numa_node", "two\n")
    got = guest_checks(inputs(root))["guest.devices"]
    assert got["status"] == "error" and "sys/bus/pci/devices/0000:a3:00.0/numa_node" in got["reason"]


def test_without_the_plan_the_guest_checks_skip_and_a_requiring_profile_fails(guest):
    root = guest()
    got = guest_checks(inputs(root, plan=False))
    assert [(c["status"], c["reason"]) for c in got.values()] == [
        ("skip", "not in profile (guest.numa: the guest plan's section)"),
        ("skip", "not in profile (guest.siblings: the guest plan's section)"),
        ("skip", "not in profile (guest.numa: the guest plan's section)"),
        ("skip", "not in profile (guest.devices: the guest plan's section)")]
    got = guest_checks(inputs(root, plan=False, profile={"require": GUEST_IDS}))
    assert set(c["status"] for c in got.values()) == {"fail"}
    assert got["guest.siblings"]["reason"] == "required by profile, but not in profile (guest.siblings: the guest plan's section)"


def test_device_checks_without_device_locations_are_no_data(guest):
    got = guest_checks(inputs(guest(), pci=False))["guest.devices"]
    assert got["status"] == "skip" and got["reason"].startswith("no data: PCI devices by address not collected")


@pytest.mark.parametrize("section,message", [
    ({"devices": [{"kind": "gpu", "guest_pci": "83:00.0"}]},
     "profile key guest.devices[0].guest_pci: '83:00.0' is not a PCI address as sysfs names it (0000:83:00.0, lower case)"),
    ({"devices": [{"kind": "gpu", "guest_pci": "0000:83:00.0", "partner": "0000:84:00.0"}]},
     "profile key guest.devices[0].partner: 0000:84:00.0 is none of the guest.devices"),
    ({"devices": [{"kind": "fpga", "guest_pci": "0000:83:00.0"}]}, "profile key guest.devices[0].kind: 'fpga' is not one of gpu, nic"),
    ({"numa": [{"id": 0, "cpu": [0, 1]}]}, "profile key guest.numa[0].cpu: unknown (known: cpus, distances, host_node, id, memory_mib)"),
    ({"numa": [{"id": 0, "cpus": [0]}, {"id": 0, "cpus": [1]}]}, "profile key guest.numa: a node id given twice (0, 0)"),
    ({"siblings": [[0, 1], [2, "3"]]}, "profile key guest.siblings[1][1]: must be an integer, got str '3'"),
    ({"siblings": [0, 1]}, "profile key guest.siblings[0]: must be a list, got int 0"),
])
def test_a_bad_guest_section_is_an_error_naming_the_key(section, message):
    with pytest.raises(_profile.ProfileError) as err:
        _profile.validate({"guest": section}, gate.CHECK_IDS)
    assert str(err.value) == message


def _shipped_guest_profile():
    with open(os.path.join(PROFILES, "hgx-h100-guest.yml")) as handle:
        return yaml.safe_load(handle)


def test_the_shipped_guest_profile_requires_the_guest_checks_and_the_h2d_probe(guest):
    profile = _profile.validate(_shipped_guest_profile(), gate.CHECK_IDS)
    assert set(GUEST_IDS + ["gpu.h2d_bandwidth"]) <= set(profile["require"])
    assert profile["probes"]["h2d"] == {"enabled": True, "min_gbps": 48.0, "max_spread_gbps": 1.1}
    assert profile["guest"] is None     # each guest's own plan goes in: combine({'guest': plan.guest})
    root = guest()
    ctx = gate.Inputs(collect(root)[0], profile, pci=PciDevices(root))
    got = guest_checks(ctx)
    assert set(c["status"] for c in got.values()) == {"fail"}   # a guest gated without its plan is red


def _h2d(per_gpu):
    """The shipped probe's output: three runs per GPU."""
    return "".join("GPU %s: %.2f GB/s\n" % (bdf, value) for bdf, value in per_gpu for _run in range(3))


@pytest.mark.parametrize("values,status,reason", [
    # DOMAIN.md section 7: a tuned guest 48-49 GB/s on every GPU, spread under 1.1
    ([48.91, 48.62, 49.02, 48.4], "pass", "ok"),
    # an untuned guest: 29-44 GB/s
    ([43.8, 29.4, 41.2, 36.0], "fail", "min 29.4 GB/s < 48.0 (GPUs 0000:83:00.0, 0000:93:00.0, 0000:a3:00.0, 0000:b3:00.0); spread 14.40 GB/s > 1.1"),
    # a flattened cloud guest: a uniform 26.4 GB/s, no spread, too slow
    ([26.4, 26.4, 26.4, 26.4], "fail", "min 26.4 GB/s < 48.0 (GPUs 0000:83:00.0, 0000:93:00.0, 0000:a3:00.0, 0000:b3:00.0)"),
])
def test_the_guest_profile_h2d_thresholds(values, status, reason):
    profile = _profile.validate(_shipped_guest_profile(), gate.CHECK_IDS)
    gpus = ["0000:83:00.0", "0000:93:00.0", "0000:a3:00.0", "0000:b3:00.0"]
    ctx = gate.Inputs({}, profile, outputs={"h2d_bandwidth": _h2d(zip(gpus, values))})
    got = next(c for c in gate.evaluate(ctx, checks=["gpu.h2d_bandwidth"])["checks"])
    assert (got["status"], got["reason"]) == (status, reason)


@pytest.mark.parametrize("gpus", [8, 1])
def test_the_planners_guest_section_is_the_profile_key_as_it_is(unpacked_tree, gpus):
    # what an operator does: combine({'guest': plan.guest}); strict validation must take it unchanged
    from ansible_collections.gpufleet.provision.plugins.module_utils._guest.plan import plan_guests
    plan = plan_guests(collect(unpacked_tree("hgx-h100-ref"))[0], [{"name": "g", "gpus": gpus}])[0]
    profile = _profile.validate({"guest": plan["guest"]}, gate.CHECK_IDS)
    assert profile["guest"] == plan["guest"]
    assert len(profile["guest"]["devices"]) == 2 * gpus
