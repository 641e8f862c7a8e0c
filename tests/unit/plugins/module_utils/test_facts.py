"""node facts on the captured trees, against expectations written by hand from shared/DOMAIN.md.

None of the expected values below comes from the renderer: they are what the reference box,
the dirty box, the cloud guest and the AMD 12-NIC box must show (docs/facts.md).
"""
import os
import shutil

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ansible_collections.gpufleet.provision.plugins.module_utils._facts import collect

REF_GPUS = ["0000:18:00.0", "0000:29:00.0", "0000:3a:00.0", "0000:4b:00.0",
            "0000:9a:00.0", "0000:ab:00.0", "0000:bc:00.0", "0000:cd:00.0"]


def test_reference_node(unpacked_tree):
    facts, warnings = collect(unpacked_tree("hgx-h100-ref"))
    assert warnings == []
    cpu = facts["cpu"]
    assert (cpu["sockets"], cpu["cores"], cpu["threads_per_core"], cpu["online_count"]) == (2, 104, 2, 208)
    assert cpu["smt_active"] is True
    assert cpu["siblings"][0] == [0, 104]          # cores first: n and n+104
    assert [51, 155] in cpu["siblings"] and [52, 156] in cpu["siblings"]
    assert len(cpu["siblings"]) == 104
    assert cpu["flags"] == {"vmx": True, "svm": False}
    nodes = facts["numa"]["nodes"]
    assert [n["id"] for n in nodes] == list(range(8))                        # SNC4
    assert nodes[0]["cpus"] == list(range(0, 13)) + list(range(104, 117))   # "0-12,104-116"
    assert nodes[7]["cpus"] == list(range(91, 104)) + list(range(195, 208))
    assert all(len(n["cpus"]) == 26 and n["memory_kb"] == 121634816 for n in nodes)
    assert all(n["hugepages"]["1048576"] == 16 for n in nodes)            # 128 x 1G over 8 nodes
    assert all(n["free_hugepages"] == {"2048": 0, "1048576": 16} for n in nodes)   # none given out yet
    assert facts["numa"]["distances"]["0"] == [10, 12, 12, 12, 21, 21, 21, 21]
    assert [g["pci"] for g in facts["gpus"]] == REF_GPUS
    assert [g["numa_node"] for g in facts["gpus"]] == list(range(8))
    gpu0 = facts["gpus"][0]
    assert (gpu0["vendor_id"], gpu0["device_id"], gpu0["class"], gpu0["driver"]) == ("0x10de", "0x2330", "0x030200", "nvidia")
    assert gpu0["link"] == {"speed": "32.0 GT/s PCIe", "width": 16, "max_speed": "32.0 GT/s PCIe", "max_width": 16}
    assert gpu0["pcie_path"] == ["0000:15:01.0", "0000:16:00.0", "0000:17:00.0"]
    assert gpu0["model"] == "NVIDIA H100 80GB HBM3"
    assert len(facts["nvswitches"]) == 4 and facts["nvidia"]["nvswitch_present"] is True
    assert [(p["nic"], p["affinity"], p["rail"]) for p in facts["pairs"]] == [
        ("mlx5_0", "PIX", 0), ("mlx5_1", "PIX", 1), ("mlx5_2", "PIX", 2), ("mlx5_3", "PIX", 3),
        ("mlx5_6", "PIX", 4), ("mlx5_7", "PIX", 5), ("mlx5_8", "PIX", 6), ("mlx5_9", "PIX", 7)]
    roles = dict((n["name"], n["role"]) for n in facts["nics"])
    assert [n for n, r in roles.items() if r == "non-rail"] == ["mlx5_4", "mlx5_5"]
    mlx0 = facts["nics"][0]
    assert (mlx0["name"], mlx0["pci"], mlx0["link_layer"], mlx0["fw_ver"], mlx0["numa_node"]) == (
        "mlx5_0", "0000:19:00.0", "InfiniBand", "28.39.1002", 0)
    assert mlx0["node_desc"] == "gpu001 mlx5_0" and mlx0["netdevs"] == ["ibp25s0"]
    port = mlx0["ports"][0]
    assert (port["port"], port["state"], port["state_code"], port["phys_state"], port["rate_gbps"]) == (1, "ACTIVE", 4, "LinkUp", 400.0)
    assert facts["pcie"]["bridges"]["0000:16:00.0"]["acs"]["present"] is True
    assert not any(facts["pcie"]["bridges"]["0000:17:00.0"]["acs"]["ctl"].values())
    kernel = facts["kernel"]
    assert kernel["release"] == "6.8.0-45-generic"
    keys = [p["key"] for p in kernel["cmdline"]["params"]]
    assert keys.count("hugepages") == 1 and keys.index("hugepagesz") < keys.index("hugepages")
    assert kernel["thp"]["enabled"] == "never" and kernel["numa_balancing"] == 0
    assert kernel["hugepages"] == {"2048": 0, "1048576": 128}
    assert kernel["governor"] == {"counts": {"performance": 208}, "not_performance": [], "without_cpufreq": []}
    assert kernel["iommu"]["active"] is True and kernel["kvm"] is True
    assert facts["nvidia"]["driver_version"] == "550.90.07" == facts["nvidia"]["proc_version"]
    assert [(d["name"], d["firmware"]) for d in facts["nvme"]] == [("nvme0", "MPK7525Q"), ("nvme1", "MPK7525Q")]
    assert facts["os"]["VERSION_ID"] == "22.04"
    assert {"/", "/raid"} <= set(m["mountpoint"] for m in facts["mounts"])


def test_dirty_node(unpacked_tree):
    facts = collect(unpacked_tree("hgx-h100-dirty"))[0]
    assert facts["cpu"]["smt_active"] is False and facts["cpu"]["online_count"] == 104
    assert facts["cpu"]["siblings"][0] == [0]
    assert [n["cpus"] for n in facts["numa"]["nodes"]] == [list(range(0, 52)), list(range(52, 104))]
    assert facts["kernel"]["thp"]["enabled"] == "always"
    assert facts["kernel"]["numa_balancing"] == 1
    assert facts["kernel"]["governor"]["not_performance"] == [3, 4, 5, 60]
    assert facts["kernel"]["hugepages"] == {"2048": 0, "1048576": 0}
    # SNC off moves GPUs 0-3 to node 0 and 4-7 to node 1; PCIe pairing is unchanged
    assert [g["numa_node"] for g in facts["gpus"]] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert all(p["affinity"] == "PIX" for p in facts["pairs"])


def test_cloud_guest_is_flat(unpacked_tree):
    facts, warnings = collect(unpacked_tree("cloud-guest"))
    assert warnings == []
    assert facts["cpu"]["siblings"][:2] == [[0, 1], [2, 3]]   # pairs, not cores-first
    assert len(facts["numa"]["nodes"]) == 2
    assert all(g["pcie_path"] == [] for g in facts["gpus"])
    assert [p["affinity"] for p in facts["pairs"]] == ["NODE"] * 8
    assert [p["nic"] for p in facts["pairs"]] == ["mlx5_ib%d" % i for i in range(8)]
    assert [n["name"] for n in facts["nics"] if n["role"] == "non-rail"] == ["mlx5_an0"]
    assert facts["nvswitches"] == [] and facts["nvidia"]["nvswitch_present"] is False
    assert facts["kernel"]["iommu"]["active"] is False and facts["kernel"]["kvm"] is False
    assert facts["cpu"]["flags"] == {"vmx": False, "svm": False}


def test_amd_twelve_nics_with_gaps(unpacked_tree):
    facts, warnings = collect(unpacked_tree("amd-12nic-nps4"))
    assert warnings == []
    assert [p["nic"] for p in facts["pairs"]] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_11"]
    assert [p["affinity"] for p in facts["pairs"]] == ["PIX"] * 4 + ["PXB"] * 4
    assert [n["name"] for n in facts["nics"]][:4] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]  # natural order
    assert [n["name"] for n in facts["nics"] if n["role"] == "non-rail"] == ["mlx5_3", "mlx5_4", "mlx5_9", "mlx5_10"]
    assert facts["cpu"]["flags"] == {"vmx": False, "svm": True}
    assert len(facts["numa"]["nodes"]) == 8 and all(len(n["cpus"]) == 24 for n in facts["numa"]["nodes"])
    assert facts["kernel"]["iommu"]["units"][0].startswith("ivhd")
    assert facts["kernel"]["hugepages"]["2048"] == 8192
    mlx7 = [n for n in facts["nics"] if n["name"] == "mlx5_7"][0]
    assert mlx7["ports"][0]["rate_gbps"] == 200.0


def test_live_root_of_this_machine():
    """The machine the tests run on has no GPU: the collector must succeed with empty lists."""
    nvidia = [d for d in os.listdir("/sys/bus/pci/devices")
              if open("/sys/bus/pci/devices/%s/vendor" % d).read().strip() == "0x10de"] if os.path.isdir("/sys/bus/pci/devices") else []
    if nvidia:
        pytest.skip("this machine has NVIDIA PCI devices: %s" % nvidia)
    facts = collect("/")[0]
    assert facts["gpus"] == [] and facts["pairs"] == [] and facts["nvswitches"] == []
    assert isinstance(facts["nics"], list)
    assert facts["cpu"]["online_count"] == os.cpu_count()
    assert facts["kernel"]["release"] == os.uname().release


def test_missing_and_garbage_files_become_none_plus_warning(unpacked_tree):
    root = unpacked_tree("hgx-h100-ref")
    os.remove(os.path.join(root, "sys/kernel/mm/transparent_hugepage/enabled"))
    with open(os.path.join(root, "proc/sys/kernel/numa_balancing"), "w") as handle:
        handle.write("\x00\x01garbage")
    with open(os.path.join(root, "sys/devices/system/node/node3/cpulist"), "w") as handle:
        handle.write("12-")
    shutil.rmtree(os.path.join(root, "sys/class/infiniband/mlx5_2/ports/1"))
    os.symlink("nowhere", os.path.join(root, "sys/bus/pci/devices/0000:ff:00.0"))
    facts, warnings = collect(root)
    assert facts["kernel"]["thp"]["enabled"] is None
    assert facts["kernel"]["numa_balancing"] is None
    assert facts["numa"]["nodes"][3]["cpus"] is None
    problems = dict((p["path"], p["kind"]) for p in facts["problems"])
    assert problems["sys/kernel/mm/transparent_hugepage/enabled"] == "missing"
    assert problems["proc/sys/kernel/numa_balancing"] == "invalid"
    assert problems["sys/devices/system/node/node3/cpulist"] == "invalid"
    assert len(warnings) == len(facts["problems"])
    assert any(w.startswith("sys/kernel/mm/transparent_hugepage/enabled:") for w in warnings)
    mlx2 = [n for n in facts["nics"] if n["name"] == "mlx5_2"][0]
    assert mlx2["ports"] == []
    assert len(facts["gpus"]) == 8


def test_truncated_config_space_gives_no_acs_and_a_warning(unpacked_tree):
    root = unpacked_tree("hgx-h100-ref")
    with open(os.path.join(root, "sys/bus/pci/devices/0000:16:00.0/config"), "wb") as handle:
        handle.write(bytes(64))
    facts, warnings = collect(root)
    assert facts["pcie"]["bridges"]["0000:16:00.0"]["acs"] is None
    assert any("0000:16:00.0/config" in w for w in warnings)


FILES = ["sys/devices/system/cpu/online", "sys/devices/system/cpu/cpu0/topology/thread_siblings_list",
         "sys/devices/system/node/node0/meminfo", "sys/devices/system/node/node1/distance",
         "proc/cpuinfo", "proc/cmdline", "proc/self/mounts", "etc/os-release", "sys/kernel/mm/transparent_hugepage/defrag",
         "sys/class/infiniband/mlx5_ib0/ports/1/state", "sys/class/infiniband/mlx5_ib0/ports/1/rate",
         "sys/bus/pci/devices/0001:00:00.0/numa_node", "sys/bus/pci/devices/0001:00:00.0/class",
         "sys/module/nvidia/version", "proc/driver/nvidia/version",
         "proc/driver/nvidia/gpus/0001:00:00.0/information", "sys/devices/system/cpu/cpu5/cpufreq/scaling_governor"]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(FILES), content=st.binary(max_size=200))
def test_arbitrary_content_never_raises(unpacked_tree, path, content):
    """Any bytes in any of these files: data or None plus a warning naming that path, never an exception."""
    # hypothesis runs every example inside one call of the test: unpack the tree once per call
    root = getattr(test_arbitrary_content_never_raises, "_root", None)
    if root is None or not os.path.isdir(root):
        root = unpacked_tree("cloud-guest")
        test_arbitrary_content_never_raises._root = root
    full = os.path.join(root, path)
    with open(full, "rb") as handle:
        original = handle.read()
    try:
        with open(full, "wb") as handle:
            handle.write(content)
        facts, warnings = collect(root)
        assert isinstance(facts["gpus"], list) and isinstance(facts["nics"], list)
        assert len(warnings) == len(facts["problems"])
        assert all(p["path"] == path or p["path"].startswith(os.path.dirname(path)) for p in facts["problems"]), facts["problems"]
    finally:
        with open(full, "wb") as handle:
            handle.write(original)


def _write(root, rel, text):
    path = os.path.join(root, rel)
    if os.path.lexists(path) and not os.path.isdir(path):
        os.chmod(path, 0o644)
    with open(path, "w") as handle:
        handle.write(text)


def test_pci_folder_in_a_symlink_loop_is_no_gpu_list_not_zero_gpus(unpacked_tree):
    root = unpacked_tree("hgx-h100-ref")
    shutil.rmtree(os.path.join(root, "sys/bus/pci/devices"))
    os.symlink("devices", os.path.join(root, "sys/bus/pci/devices"))
    facts, warnings = collect(root)
    assert facts["gpus"] is None and facts["nvswitches"] is None
    assert {"path": "sys/bus/pci/devices", "kind": "unreadable", "detail": "Too many levels of symbolic links"} in facts["problems"]
    assert facts["pairs"] == [] and facts["nvidia"]["nvswitch_count"] == 4   # proc/driver/nvidia-nvswitch still says 4


def test_empty_cpu_online_is_invalid_and_governors_come_from_the_cpu_folders(unpacked_tree):
    root = unpacked_tree("hgx-h100-ref")
    _write(root, "sys/devices/system/cpu/online", "\n")
    facts, _warnings = collect(root)
    assert facts["cpu"]["online"] is None and facts["cpu"]["online_count"] is None
    assert {"path": "sys/devices/system/cpu/online", "kind": "invalid", "detail": "cannot parse '': no online CPU"} in facts["problems"]
    assert facts["kernel"]["governor"]["counts"] == {"performance": 208}
    os.remove(os.path.join(root, "sys/devices/system/cpu/online"))
    facts, _warnings = collect(root)
    assert facts["kernel"]["governor"]["counts"] == {"performance": 208} and facts["cpu"]["cores"] == 104


def test_rdma_device_without_device_link_is_kept(unpacked_tree):
    root = unpacked_tree("hgx-h100-ref")
    os.remove(os.path.join(root, "sys/class/infiniband/mlx5_0"))
    # a software RDMA device (rxe): a class entry with ports, no PCI device behind it
    os.makedirs(os.path.join(root, "sys/class/infiniband/rxe0/ports/1"))
    for rel, text in (("fw_ver", "0.0.0"), ("node_guid", "0000:0000:0000:0000"), ("ports/1/state", "4: ACTIVE"),
                      ("ports/1/phys_state", "5: LinkUp"), ("ports/1/rate", "100 Gb/sec (4X EDR)"), ("ports/1/link_layer", "Ethernet")):
        _write(root, "sys/class/infiniband/rxe0/" + rel, text)
    facts, warnings = collect(root)
    rxe = [n for n in facts["nics"] if n["name"] == "rxe0"][0]
    assert rxe["pci"] is None and rxe["pcie_path"] is None and rxe["role"] == "non-rail" and rxe["ports"][0]["state"] == "ACTIVE"
    assert not any("rxe0/device" in w for w in warnings)
