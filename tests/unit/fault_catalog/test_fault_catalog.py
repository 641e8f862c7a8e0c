"""Fault catalog: for every check id, one real production fault injected into a copy of the
known-good reference tree (or into the collected inputs) turns exactly that check red, and every
other check keeps its status. Plus the reference passes everything, the dirty tree fails what its
faults imply, and bad input (a truncated sysfs file, garbage) is an error naming the path.
"""
import copy
import os
import shutil

import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._gate import gate


def _cpuinfo_without_vmx(node):
    node.write("proc/cpuinfo", node.read("proc/cpuinfo").replace(" vmx", ""))


def _kernel(node):
    # The node boots another kernel; OFED was rebuilt for it, so only the version is wrong.
    node.write("proc/sys/kernel/osrelease", "6.8.0-49-generic\n")
    node.outputs["modinfo_mlx5_core"] = "6.8.0-49-generic SMP preempt mod_unload modversions \n"


def _iommu_off(node):
    # VT-d off in the BIOS: the kernel registers no DMAR unit.
    for name in os.listdir(node.path("sys/class/iommu")):
        full = node.path("sys/class/iommu/" + name)
        if os.path.islink(full):
            os.remove(full)
        else:
            shutil.rmtree(full)


def _nic_in_wrong_slot(node):
    # mlx5_3 (0000:4c:00.0) plugged straight into the root port instead of GPU 3's switch.
    node.move_device("0000:4c:00.0", "sys/devices/pci0000:48/0000:48:01.0")


def _driver(node):
    node.write("sys/module/nvidia/version", "550.127.05\n")
    node.write("proc/driver/nvidia/version", node.read("proc/driver/nvidia/version").replace("550.90.07", "550.127.05"))


def _drop_mount(node):
    node.write("proc/self/mounts", "".join(l for l in node.read("proc/self/mounts").splitlines(True) if " /raid " not in l))


def _fm_version(node):
    node.packages["nvidia-fabricmanager-550"][0]["version"] = "550.127.05-1"


def _fm_stopped(node):
    node.services["nvidia-fabricmanager.service"]["state"] = "stopped"


def _fm_fabric(node):
    node.outputs["nvidia_smi_q"] = node.outputs["nvidia_smi_q"].replace("Completed", "In Progress", 1)


def _gen4_host(node):
    node.host_slot_generation({"0000:ab:00.0": 4})


def _not_held(node):
    node.outputs["apt_mark_showhold"] = "linux-image-6.8.0-45-generic\nnvidia-driver-550-server\n"


def _old_image(node):
    # Booted from last quarter's image: built when the profile pinned driver 550.54.15.
    older = copy.deepcopy(node.profile)
    older["nvidia"]["driver_version"] = "550.54.15"
    node.write_image(older)


def _ats_off(node):
    name = "mlxconfig_0000:4c:00.0"
    node.outputs[name] = node.outputs[name].replace("True(1)", "False(0)")


def _no_peermem(node):
    shutil.rmtree(node.path("sys/module/nvidia_peermem"))


def _xid79(node):
    node.outputs["kernel_log"] += ("Dec 01 08:02:17 gpu001 kernel: NVRM: Xid (PCI:0000:ab:00): 79, pid='<unknown>', "
                                   "name=<unknown>, GPU has fallen off the bus.\n")


def _ats_pending(node):
    # mlxconfig set ATS_ENABLED=0 was run, no mlxfwreset yet: still on now, off after the reboot.
    name = "mlxconfig_0000:4c:00.0"
    node.outputs[name] = node.build.mlxconfig("0000:4c:00.0", "True(1)", next_boot="False(0)")


def _vcpu_on_the_wrong_node(node):
    # CPUs 12 and 13 on each other's node: 26 CPUs per node still (numa.layout counts them)
    node.write("sys/devices/system/node/node0/cpulist", "0-11,13,104-116\n")
    node.write("sys/devices/system/node/node1/cpulist", "12,14-25,117-129\n")


def _siblings_crossed(node):
    # CPU 0 shares a core with 105, CPU 1 with 104: the second threads of two cores swapped
    for cpu, siblings in ((0, "0,105"), (105, "0,105"), (1, "1,104"), (104, "1,104")):
        node.write("sys/devices/system/cpu/cpu%d/topology/thread_siblings_list" % cpu, siblings + "\n")


FAULTS = [
    ("os.release", "another OS release", lambda n: n.write("etc/os-release", n.read("etc/os-release").replace('VERSION_ID="22.04"', 'VERSION_ID="24.04"'))),
    ("kernel.version", "another kernel booted", _kernel),
    ("kernel.cmdline", "hugepages= twice", lambda n: n.write("proc/cmdline", n.read("proc/cmdline").rstrip() + " hugepages=128\n")),
    ("kernel.cmdline", "iommu=pt missing", lambda n: n.write("proc/cmdline", n.read("proc/cmdline").replace(" iommu=pt", ""))),
    ("kernel.grub_sources", "cloud image cfg adds hugepages= again",
     lambda n: n.write("etc/default/grub.d/50-cloudimg-settings.cfg", 'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT hugepages=64"\n')),
    ("memory.hugepages", "1G pool short", lambda n: n.write("sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages", "64\n")),
    ("memory.thp", "THP always", lambda n: n.write("sys/kernel/mm/transparent_hugepage/enabled", "[always] madvise never\n")),
    ("memory.numa_balancing", "NUMA balancing on", lambda n: n.write("proc/sys/kernel/numa_balancing", "1\n")),
    ("cpu.smt", "hyper-threading off", lambda n: n.write("sys/devices/system/cpu/smt/active", "0\n")),
    ("cpu.governor", "one CPU on powersave", lambda n: n.write("sys/devices/system/cpu/cpu60/cpufreq/scaling_governor", "powersave\n")),
    ("cpu.vtx", "VT-x off in BIOS", _cpuinfo_without_vmx),
    ("iommu.enabled", "IOMMU off", _iommu_off),
    ("numa.layout", "a NUMA node with the wrong CPUs", lambda n: n.write("sys/devices/system/node/node0/cpulist", "0-12\n")),
    ("gpu.count", "an H200 in an H100 node", lambda n: n.write("sys/bus/pci/devices/0000:9a:00.0/device", "0x2335\n")),
    ("gpu.pcie_link", "GPU trained at x8", lambda n: n.write("sys/bus/pci/devices/0000:3a:00.0/current_link_width", "8\n")),
    ("gpu.pcie_link", "Gen5 GPU behind a Gen4 host port (sysfs max_link_speed cannot see it)", _gen4_host),
    ("nvidia.driver", "another driver loaded", _driver),
    ("nvidia.fabricmanager", "FM version != driver", _fm_version),
    ("nvidia.fabricmanager", "FM stopped", _fm_stopped),
    ("nvidia.fabricmanager", "fabric not Completed", _fm_fabric),
    ("nvidia.peermem", "nvidia_peermem not loaded", _no_peermem),
    ("gpu.persistence_mode", "persistence mode off on one GPU", lambda n: n.smi(persistence={"0000:3a:00.0": "Disabled"})),
    ("gpu.xid", "XID 79 since boot", _xid79),
    ("gpu.ecc", "uncorrectable volatile ECC errors", lambda n: n.smi(ecc={"0000:9a:00.0": 2})),
    ("gpu.ecc", "row remapping pending", lambda n: n.smi(remap={"0000:bc:00.0": ("Yes", "No")})),
    ("gpu.ecc", "row remapping failure", lambda n: n.smi(remap={"0000:bc:00.0": ("No", "Yes")})),
    ("gpu.throttle", "power brake asserted at idle",
     lambda n: n.smi(reasons={"0000:cd:00.0": ["HW Slowdown", "HW Power Brake Slowdown"]})),
    ("gpu.nvlink", "one NVLink inactive", lambda n: n.outputs.update(nvidia_smi_nvlink=n.build.nvlink_status(n.gpus, {5: [11]}))),
    ("packages.held", "FM not held", _not_held),
    ("image.profile", "booted from an image built for an older state of the profile", _old_image),
    ("nic.rails", "rail NIC not on its GPU's switch", _nic_in_wrong_slot),
    ("ib.ports", "IB port down", lambda n: n.write("sys/class/infiniband/mlx5_7/ports/1/state", "1: DOWN\n")),
    ("ib.counters", "a flapping link (link_downed 3)",
     lambda n: n.write("sys/class/infiniband/mlx5_6/ports/1/counters/link_downed", "3\n")),
    ("ib.counters", "symbol errors over the limit", lambda n: n.write("sys/class/infiniband/mlx5_2/ports/1/counters/symbol_error", "4711\n")),
    ("pcie.acs", "ACS redirect on a switch port", lambda n: n.set_acs("0000:28:01.0", ReqRedir=True, CmpltRedir=True)),
    ("nic.ats", "ATS off on one rail NIC", _ats_off),
    ("nic.ats", "ATS turned off, not live yet (Current on, Next Boot off)", _ats_pending),
    ("ofed.version", "another OFED", lambda n: n.outputs.update(ofed_info="MLNX_OFED_LINUX-24.01-0.3.3.1:\n")),
    ("ofed.kernel_match", "OFED built for another kernel", lambda n: n.outputs.update(modinfo_mlx5_core="6.8.0-40-generic SMP preempt mod_unload\n")),
    ("firmware.nic", "NIC firmware too old", lambda n: n.write("sys/class/infiniband/mlx5_4/fw_ver", "28.36.1010\n")),
    ("firmware.nvme", "NVMe firmware too old", lambda n: n.write("sys/class/nvme/nvme1/firmware_rev", "MPK7025Q\n")),
    ("storage.mounts", "/raid not mounted", _drop_mount),
    ("nvme.health", "a drive's critical warning set (spare low)",
     lambda n: n.outputs.update(nvme_smart_nvme1=n.build.smart_log(critical_warning=1, avail_spare=8))),
    ("nvme.health", "media errors", lambda n: n.outputs.update(nvme_smart_nvme0=n.build.smart_log(media_errors=3))),
    ("nvme.health", "a drive gone (its class link)", lambda n: os.remove(n.path("sys/class/nvme/nvme1"))),
    ("guest.numa", "a vCPU on another node than planned", _vcpu_on_the_wrong_node),
    ("guest.siblings", "two cores' second threads crossed", _siblings_crossed),
    ("guest.memory", "node 3 with half its memory", lambda n: n.write("sys/devices/system/node/node3/meminfo", n.read(
        "sys/devices/system/node/node3/meminfo").replace("MemTotal:        121634816", "MemTotal:         60817408"))),
    ("guest.devices", "a GPU on no NUMA node (-1)", lambda n: n.write("sys/bus/pci/devices/0000:4b:00.0/numa_node", "-1\n")),
    ("transport.nccl", "NCCL on sockets", lambda n: n.outputs.update(nccl_debug=n.outputs["nccl_debug"].replace("NET/IB : Using", "NET/Socket : Using"))),
    ("transport.nccl", "GPU Direct RDMA disabled",
     lambda n: n.outputs.update(nccl_debug=n.build.nccl(["mlx5_%d" % i for i in range(8)], gdr="Disabled"))),
    ("nccl.allreduce_bandwidth", "all-reduce bus bandwidth 301 GB/s",
     lambda n: n.outputs.update(nccl_debug=n.build.nccl(["mlx5_%d" % i for i in range(8)], busbw=301.2))),
    ("gpu.h2d_bandwidth", "one GPU at 29 GB/s", lambda n: n.outputs.update(h2d_bandwidth=n.outputs["h2d_bandwidth"].replace("48.90", "29.10", 1))),
    ("gpu.p2p_bandwidth", "one GPU pair at 120 GB/s", lambda n: n.outputs.update(p2p_bandwidth=n.build.p2p(8, slow={(2, 6): 120.3}))),
    ("ib.gdr_bandwidth", "one rail at 190 Gb/s", lambda n: n.outputs.update(
        gdr_bandwidth=n.outputs["gdr_bandwidth"].replace("392.44", "190.12", 1))),
    ("gpu.dcgm_diag", "DCGM Page Retirement/Row Remap fails", lambda n: n.outputs.update(dcgm_diag=n.build.dcgm_diag("Page Retirement/Row Remap"))),
]


# The reference profile gives the guest checks the node's own layout as their plan (conftest
# reference_guest): guest.numa is then the exact form of numa.layout (which CPUs, not how many) and
# guest.devices of nic.rails' pairing, so a fault of the layout or of a pair turns both red, no other.
SAME_FACT = {"numa.layout": "guest.numa", "nic.rails": "guest.devices"}


def _counts(c):
    """A check result a fault can change: not the Ethernet rail checks an InfiniBand profile does not ask for."""
    return c["status"] != "pass" and not (c["status"] == "skip" and c["reason"].startswith("not in profile (roce)"))


def _rail_link_down(node, nic="mlx5_2", netdev="ens55np0"):
    # ip link set ens55np0 down: the netdev and its RoCE port go down together.
    node.write("sys/class/net/%s/operstate" % netdev, "down\n")
    node.write("sys/class/net/%s/speed" % netdev, "-1\n")
    node.write("sys/class/infiniband/%s/ports/1/state" % nic, "1: DOWN\n")
    node.write("sys/class/infiniband/%s/ports/1/phys_state" % nic, "3: Disabled\n")


def _rail_address_typo(node):
    # ens72np0 (rail 3) given 10.65.48.2/20 instead of 10.64.48.2/20: route, fib_trie and the GIDs follow it.
    node.write("proc/net/route", node.read("proc/net/route").replace("ens72np0\t0030400A", "ens72np0\t0030410A"))
    node.write("proc/net/fib_trie", node.read("proc/net/fib_trie").replace("|-- 10.64.48.2\n", "|-- 10.65.48.2\n"))
    for index in (2, 3):
        rel = "sys/class/infiniband/mlx5_3/ports/1/gids/%d" % index
        node.write(rel, node.read(rel).replace("ffff:0a40:3002", "ffff:0a41:3002"))


def _roce_v1_only(node):
    # RoCE v2 off on mlx5_6 (its GID cache holds RoCE v1 entries only).
    for index in (1, 3):
        node.write("sys/class/infiniband/mlx5_6/ports/1/gid_attrs/types/%d" % index, "IB/RoCE v1\n")


# Faults of the Ethernet rail checks, injected into the RoCE twin (hgx-h100-roce, profile roce_profile()).
ROCE_FAULTS = [
    ("roce.link", "a rail netdev down", _rail_link_down),
    ("roce.mtu", "MTU 1500 on a rail", lambda n: n.write("sys/class/net/ens72np0/mtu", "1500\n")),
    ("roce.address", "a rail address outside its rail's subnet", _rail_address_typo),
    ("roce.gid", "RoCE v1 GIDs only on one rail", _roce_v1_only),
    ("roce.qos", "PFC off on the RDMA priority", lambda n: n.outputs.update(mlnx_qos_ens168np0=n.build.mlnx_qos(pfc=(0,) * 8))),
    ("roce.qos", "the NIC trusts PCP", lambda n: n.outputs.update(mlnx_qos_ens21np0=n.build.mlnx_qos(trust="pcp"))),
    ("transport.nccl", "NCCL on GID index 0 (link-local RoCE v1)", lambda n: n.outputs.update(nccl_debug=n.build.nccl(
        ["mlx5_%d" % i for i in (0, 1, 2, 3, 6, 7, 8, 9)], link="RoCE", env={"NCCL_IB_GID_INDEX": "0", "NCCL_IB_TC": "106"}))),
    ("transport.nccl", "NCCL_IB_TC unset: RDMA in the lossy class", lambda n: n.outputs.update(nccl_debug=n.build.nccl(
        ["mlx5_%d" % i for i in (0, 1, 2, 3, 6, 7, 8, 9)], link="RoCE", env={"NCCL_IB_GID_INDEX": "3"}))),
]


def test_catalog_has_a_fault_for_every_check_id():
    assert set(f[0] for f in FAULTS + ROCE_FAULTS) == set(gate.CHECK_IDS)


def test_reference_tree_passes_every_check(tree):
    node = tree("hgx-h100-ref")
    report = node.report()
    assert report["status"] == "pass"
    # the Ethernet rail checks are not asked for by an InfiniBand profile
    assert [(c["id"], c["status"], c["reason"]) for c in report["checks"] if c["status"] != "pass"] == [
        (i, "skip", "not in profile (roce): no roce section in the profile (InfiniBand rails)") for i in gate.CHECK_IDS if i.startswith("roce.")]


def test_roce_twin_passes_every_check(tree):
    node = tree("hgx-h100-roce")
    report = node.report()
    assert [(c["id"], c["status"], c["reason"]) for c in report["checks"] if c["status"] != "pass"] == []


@pytest.mark.parametrize("check_id,fault,inject", ROCE_FAULTS, ids=["%s: %s" % (f[0], f[1]) for f in ROCE_FAULTS])
def test_one_roce_fault_turns_exactly_its_check_red(tree, check_id, fault, inject):
    node = tree("hgx-h100-roce")
    inject(node)
    report = node.report()
    changed = dict((c["id"], (c["status"], c["reason"])) for c in report["checks"] if c["status"] != "pass")
    assert list(changed) == [check_id], changed
    assert changed[check_id][0] == "fail"


@pytest.mark.parametrize("check_id,fault,inject", FAULTS, ids=["%s: %s" % (f[0], f[1]) for f in FAULTS])
def test_one_fault_turns_exactly_its_check_red(tree, check_id, fault, inject):
    node = tree("hgx-h100-ref")
    inject(node)
    report = node.report()
    changed = dict((c["id"], (c["status"], c["reason"])) for c in report["checks"] if _counts(c))
    red = [check_id] + [SAME_FACT[check_id]] if check_id in SAME_FACT else [check_id]
    assert list(changed) == red, changed
    assert set(status for status, _reason in changed.values()) == {"fail"}
    assert report["status"] == "fail" and report["failed"] == red


def test_dirty_tree_fails_the_checks_its_faults_imply(tree):
    # hgx-h100-dirty.yml: SNC and HT reset by a BIOS update, kernel defaults (THP always, NUMA
    # balancing on, no hugepages, no IOMMU parameters), 4 CPUs on powersave. Against the node's own
    # SNC4 layout as plan, the guest checks see the same: 2 nodes, no siblings, devices on nodes 0-1.
    node = tree("hgx-h100-dirty")
    node.write("etc/default/grub", 'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT="quiet splash"\nGRUB_CMDLINE_LINUX=""\n')
    got = node.statuses()
    red = sorted(k for k, v in got.items() if v != "pass" and not k.startswith("roce."))
    assert red == sorted(["kernel.cmdline", "kernel.grub_sources", "memory.hugepages", "memory.thp", "memory.numa_balancing",
                          "cpu.smt", "cpu.governor", "iommu.enabled", "numa.layout",
                          "guest.numa", "guest.siblings", "guest.memory", "guest.devices"])
    assert all(got[k] == "fail" for k in red), got


def test_truncated_bridge_config_is_an_error_naming_the_path(tree):
    node = tree("hgx-h100-ref")
    rel = "sys/bus/pci/devices/0000:28:01.0/config"
    with open(node.path(rel), "rb") as handle:
        data = handle.read()
    os.chmod(node.path(rel), 0o644)
    with open(node.path(rel), "wb") as handle:
        handle.write(data[:64])      # what an unprivileged read of config returns
    report = node.report()
    bad = dict((c["id"], c) for c in report["checks"] if _counts(c))
    assert list(bad) == ["pcie.acs"]
    assert bad["pcie.acs"]["status"] == "error"
    assert rel in bad["pcie.acs"]["reason"]


@pytest.mark.parametrize("rel,text,check_id", [
    ("sys/kernel/mm/transparent_hugepage/enabled", "garbage\n", "memory.thp"),
    ("proc/sys/kernel/numa_balancing", "", "memory.numa_balancing"),
    ("sys/module/nvidia/version", "5x0\n", "nvidia.driver"),
])
def test_garbage_in_a_sysfs_file_is_an_error_for_that_check_only(tree, rel, text, check_id):
    node = tree("hgx-h100-ref")
    node.write(rel, text)
    bad = dict((c["id"], c) for c in node.report()["checks"] if _counts(c))
    assert list(bad) == [check_id]
    assert bad[check_id]["status"] == "error" and rel in bad[check_id]["reason"]


def test_missing_file_is_skip_no_data_unless_required(tree):
    node = tree("hgx-h100-ref")
    os.remove(node.path("sys/kernel/mm/transparent_hugepage/enabled"))
    node.profile["require"].remove("memory.thp")
    check = next(c for c in node.report()["checks"] if c["id"] == "memory.thp")
    assert check["status"] == "skip" and check["reason"].startswith("no data")
    node.profile["require"].append("memory.thp")
    check = next(c for c in node.report()["checks"] if c["id"] == "memory.thp")
    assert check["status"] == "fail" and "no data" in check["reason"]


def test_unlistable_pci_folder_is_an_error_naming_it_not_zero_gpus(tree):
    node = tree("hgx-h100-ref")
    shutil.rmtree(node.path("sys/bus/pci/devices"))
    os.symlink("devices", node.path("sys/bus/pci/devices"))
    checks = dict((c["id"], c) for c in node.report()["checks"])
    gpu = checks["gpu.count"]
    assert gpu["status"] == "error" and "sys/bus/pci/devices: Too many levels of symbolic links (unreadable)" in gpu["reason"]
    assert "RMA" not in gpu["reason"]
    assert checks["gpu.pcie_link"]["status"] == "error"


def test_unreadable_node_cpulist_is_an_error_not_zero_cpus(tree):
    node = tree("hgx-h100-ref")
    node.write("sys/devices/system/node/node5/cpulist", "13-\n")
    check = next(c for c in node.report()["checks"] if c["id"] == "numa.layout")
    assert check["status"] == "error" and "sys/devices/system/node/node5/cpulist" in check["reason"]


def test_looping_acs_capability_chain_is_an_error_not_no_acs(tree):
    node = tree("hgx-h100-ref")
    rel = "sys/bus/pci/devices/0000:28:01.0/config"
    with open(node.path(rel), "rb") as handle:
        data = bytearray(handle.read())
    # the first extended capability (AER, id 0x0001, version 1) points back at itself: the ACS
    # capability further down is never reached
    data[0x100:0x104] = (0x0001 | (1 << 16) | (0x100 << 20)).to_bytes(4, "little")
    os.chmod(node.path(rel), 0o644)
    with open(node.path(rel), "wb") as handle:
        handle.write(bytes(data))
    check = next(c for c in node.report()["checks"] if c["id"] == "pcie.acs")
    assert check["status"] == "error" and rel in check["reason"] and "loops at 0x100" in check["reason"]
