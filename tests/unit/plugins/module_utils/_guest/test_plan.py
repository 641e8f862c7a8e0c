"""The guest planner on the captured trees, against expectations written by hand.

Reference node (shared/DOMAIN.md section 2): 2 x 52 cores, HT cores-first (CPU n and n+104 are one
core), SNC4: node k holds cores 13k..13k+12, one GPU per node with its PIX rail NIC, 16 free 1G
pages per node. With the default of one core kept per node for the host (the node's last core),
a guest gets 12 cores (24 vCPUs) and 16 GiB per node.
"""
import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._guest.plan import GuestPlanError, plan_guests

REF_GPUS = ["0000:18:00.0", "0000:29:00.0", "0000:3a:00.0", "0000:4b:00.0",
            "0000:9a:00.0", "0000:ab:00.0", "0000:bc:00.0", "0000:cd:00.0"]
REF_NICS = [("mlx5_0", "0000:19:00.0"), ("mlx5_1", "0000:2a:00.0"), ("mlx5_2", "0000:3b:00.0"), ("mlx5_3", "0000:4c:00.0"),
            ("mlx5_6", "0000:9b:00.0"), ("mlx5_7", "0000:ac:00.0"), ("mlx5_8", "0000:bd:00.0"), ("mlx5_9", "0000:ce:00.0")]


def one(facts, request, **options):
    return plan_guests(facts, [request], options or None)[0]


def test_reference_full_guest(tree_facts):
    plan = one(tree_facts("hgx-h100-ref"), {"name": "big", "gpus": 8})
    assert plan["schema"] == 1 and plan["name"] == "big"
    assert plan["host"]["numa_nodes"] == list(range(8))
    assert plan["host"]["reserved_cpus"] == [12, 25, 38, 51, 64, 77, 90, 103, 116, 129, 142, 155, 168, 181, 194, 207]
    assert plan["host"]["emulator_cpus"] == plan["host"]["reserved_cpus"]
    assert plan["topology"] == {"packages": 2, "cores_per_package": 48, "threads_per_core": 2}
    pins = [(v["vcpu"], v["host_cpu"], v["guest_node"]) for v in plan["vcpus"]]
    assert len(pins) == 192
    assert pins[:4] == [(0, 0, 0), (1, 104, 0), (2, 1, 0), (3, 105, 0)]          # vCPU 2k/2k+1: one core
    assert pins[22:26] == [(22, 11, 0), (23, 115, 0), (24, 13, 1), (25, 117, 1)]  # core 12 kept; node 1 starts at 13
    assert pins[-2:] == [(190, 102, 7), (191, 206, 7)]
    assert not set(v["host_cpu"] for v in plan["vcpus"]) & set(plan["host"]["reserved_cpus"])
    assert [(z["id"], z["host_node"], z["guest_node"], z["size_mib"], z["hugepage_size_kb"]) for z in plan["memory_zones"]] == [
        ("mem%d" % k, k, k, 16384, 1048576) for k in range(8)]
    gpus = [d for d in plan["devices"] if d["kind"] == "gpu"]
    nics = [d for d in plan["devices"] if d["kind"] == "nic"]
    assert [(d["host_pci"], d["guest_node"], d["pair"]) for d in gpus] == [(g, k, k) for k, g in enumerate(REF_GPUS)]
    assert [(d["name"], d["host_pci"], d["guest_node"], d["affinity"]) for d in nics] == [
        (name, pci, k, "PIX") for k, (name, pci) in enumerate(REF_NICS)]
    # one pxb-pcie per node at bus 16(k+1); GPU behind downstream port 0 (bus +3), its NIC port 1 (+4)
    assert [(d["guest_bus"], d["guest_pci"]) for d in plan["devices"][:2]] == [(16, "0000:13:00.0"), (16, "0000:14:00.0")]
    assert [d["guest_pci"] for d in plan["devices"][-2:]] == ["0000:83:00.0", "0000:84:00.0"]
    assert [d["segment"] for d in gpus] == list(range(1, 9))


def test_reference_guest_view(tree_facts):
    guest = one(tree_facts("hgx-h100-ref"), {"name": "big", "gpus": 8})["guest"]
    assert [(n["id"], n["host_node"], n["memory_mib"]) for n in guest["numa"]] == [(k, k, 16384) for k in range(8)]
    assert guest["numa"][0]["cpus"] == list(range(24)) and guest["numa"][7]["cpus"] == list(range(168, 192))
    assert guest["numa"][0]["distances"] == [10, 12, 12, 12, 21, 21, 21, 21]
    assert guest["numa"][5]["distances"] == [21, 21, 21, 21, 12, 10, 12, 12]
    assert guest["siblings"][:2] == [[0, 1], [2, 3]] and len(guest["siblings"]) == 96
    assert guest["devices"][0] == {"kind": "gpu", "guest_pci": "0000:13:00.0", "numa_node": 0, "pair": 0,
                                   "partner": "0000:14:00.0", "cloud_hypervisor_pci": "0001:00:01.0"}
    assert guest["devices"][15] == {"kind": "nic", "guest_pci": "0000:84:00.0", "numa_node": 7, "pair": 7,
                                    "partner": "0000:83:00.0", "cloud_hypervisor_pci": "0008:00:02.0"}


@pytest.mark.parametrize("gpus, nodes", [(1, [0]), (2, [0, 1]), (3, [0, 1, 2]), (4, [0, 1, 2, 3]),
                                         (5, [0, 1, 2, 3, 4]), (6, [0, 1, 2, 3, 4, 5]), (7, list(range(7))),
                                         (8, list(range(8)))])
def test_reference_request_sizes(tree_facts, gpus, nodes):
    plan = one(tree_facts("hgx-h100-ref"), {"name": "g", "gpus": gpus})
    assert plan["host"]["numa_nodes"] == nodes
    assert len(plan["vcpus"]) == 24 * gpus and plan["vcpus"][1]["host_cpu"] == 104
    assert [d["host_pci"] for d in plan["devices"] if d["kind"] == "gpu"] == REF_GPUS[:gpus]
    # one package while the guest fits in socket 0; two equal packages only at 8 (5-7 are uneven)
    assert plan["topology"]["packages"] == (2 if gpus == 8 else 1)


def test_eight_one_gpu_guests_share_nothing(tree_facts):
    plans = plan_guests(tree_facts("hgx-h100-ref"), [{"name": "g%d" % i, "gpus": 1} for i in range(8)])
    assert [p["host"]["numa_nodes"] for p in plans] == [[k] for k in range(8)]
    assert [(p["vcpus"][0]["host_cpu"], p["vcpus"][1]["host_cpu"]) for p in plans] == [(13 * k, 13 * k + 104) for k in range(8)]
    cpus = [v["host_cpu"] for p in plans for v in p["vcpus"]]
    assert len(cpus) == len(set(cpus)) == 8 * 24
    assert [p["devices"][1]["name"] for p in plans] == [nic[0] for nic in REF_NICS]
    assert all(p["devices"][0]["guest_pci"] == "0000:13:00.0" for p in plans)   # each guest's own PCI tree


def test_smallest_fitting_group_first(tree_facts):
    # placed largest first: c (4) takes socket 0 whole, b (2) two nodes of socket 1, a and d the last two nodes
    plans = plan_guests(tree_facts("hgx-h100-ref"), [{"name": "a", "gpus": 1}, {"name": "b", "gpus": 2},
                                                     {"name": "c", "gpus": 4}, {"name": "d", "gpus": 1}])
    assert [(p["name"], p["host"]["numa_nodes"]) for p in plans] == [("a", [6]), ("b", [4, 5]), ("c", [0, 1, 2, 3]), ("d", [7])]
    zones = [(z["host_node"]) for p in plans for z in p["memory_zones"]]
    pairs = [d["host_pci"] for p in plans for d in p["devices"]]
    assert sorted(zones) == list(range(8)) and len(pairs) == len(set(pairs)) == 16


def test_what_is_short_is_named(tree_facts):
    with pytest.raises(GuestPlanError) as err:
        plan_guests(tree_facts("hgx-h100-ref"), [{"name": "a", "gpus": 4}, {"name": "b", "gpus": 3}, {"name": "g3", "gpus": 2}])
    assert str(err.value) == "guest g3: 2 GPUs requested, 1 GPU-NIC pair free (NUMA node 7)"


def test_request_larger_than_host(tree_facts):
    with pytest.raises(GuestPlanError) as err:
        one(tree_facts("hgx-h100-ref"), {"name": "huge", "gpus": 9})
    assert str(err.value) == "guest huge: 9 GPUs requested, the host has 8 GPU-NIC pairs"
    with pytest.raises(GuestPlanError, match=r"guest fat: 200 vCPUs requested, 192 free"):
        one(tree_facts("hgx-h100-ref"), {"name": "fat", "gpus": 8, "vcpus": 200})
    with pytest.raises(GuestPlanError, match=r"guest mem: 200 GiB requested, 128 GiB of free 1048576 kB hugepages"):
        one(tree_facts("hgx-h100-ref"), {"name": "mem", "gpus": 8, "memory_gib": 200})


def test_caps_spread_over_nodes(tree_facts):
    plan = one(tree_facts("hgx-h100-ref"), {"name": "small", "gpus": 2, "vcpus": 8, "memory_gib": 20})
    assert [(v["host_cpu"], v["guest_node"]) for v in plan["vcpus"]] == [
        (0, 0), (104, 0), (1, 0), (105, 0), (13, 1), (117, 1), (14, 1), (118, 1)]
    assert [z["size_mib"] for z in plan["memory_zones"]] == [10240, 10240]
    with pytest.raises(GuestPlanError, match="7 vCPUs is not a multiple of 2 threads per core"):
        one(tree_facts("hgx-h100-ref"), {"name": "odd", "gpus": 1, "vcpus": 7})


def test_reserved_cpus_as_a_list(tree_facts):
    plan = one(tree_facts("hgx-h100-ref"), {"name": "g", "gpus": 1}, reserve_host_cpus=[0])
    assert plan["host"]["reserved_cpus"] == [0, 104]           # CPU 0 keeps its core, both threads
    assert [v["host_cpu"] for v in plan["vcpus"][:2]] == [1, 105] and len(plan["vcpus"]) == 24


def test_amd_nps4_with_2m_pages(tree_facts):
    # AMD EPYC 2 x 48 cores, cores-first (n, n+96), NPS4: node k = cores 12k..12k+11; 1024 free 2M pages per node.
    plan = one(tree_facts("amd-12nic-nps4"), {"name": "amd", "gpus": 8}, hugepage_size_kb=2048)
    assert [v["host_cpu"] for v in plan["vcpus"][:4]] == [0, 96, 1, 97]
    assert len(plan["vcpus"]) == 8 * 22 and plan["host"]["reserved_cpus"][:2] == [11, 23]
    assert [(z["host_node"], z["size_mib"], z["hugepage_size_kb"]) for z in plan["memory_zones"]] == [(k, 2048, 2048) for k in range(8)]
    assert [(d["name"], d["affinity"]) for d in plan["devices"] if d["kind"] == "nic"] == [
        ("mlx5_0", "PIX"), ("mlx5_1", "PIX"), ("mlx5_2", "PIX"), ("mlx5_5", "PIX"),
        ("mlx5_6", "PXB"), ("mlx5_7", "PXB"), ("mlx5_8", "PXB"), ("mlx5_11", "PXB")]
    assert plan["topology"] == {"packages": 2, "cores_per_package": 44, "threads_per_core": 2}


def test_amd_without_1g_pages_names_the_node(tree_facts):
    with pytest.raises(GuestPlanError) as err:
        one(tree_facts("amd-12nic-nps4"), {"name": "amd", "gpus": 1})
    assert str(err.value) == ("guest amd: NUMA node 0 has no free 1048576 kB hugepages (free_hugepages 0): "
                              "its memory zone would be empty")


def test_amd_pix_only_names_the_pxb_gpu(tree_facts):
    with pytest.raises(GuestPlanError) as err:
        one(tree_facts("amd-12nic-nps4"), {"name": "amd", "gpus": 1}, hugepage_size_kb=2048, affinities=["PIX"])
    assert str(err.value).startswith("GPU 0000:86:00.0 (NUMA node 4): no NIC on its PCIe switch (nearest mlx5_6 is PXB, wanted PIX)")


def test_mini_whole_host(tree_facts):
    plan = one(tree_facts("guest-mini"), {"name": "g1", "gpus": 2, "vcpus": 8}, reserve_host_cpus=0)
    assert [(v["vcpu"], v["host_cpu"], v["guest_node"]) for v in plan["vcpus"]] == [
        (0, 0, 0), (1, 4, 0), (2, 1, 1), (3, 5, 1), (4, 2, 2), (5, 6, 2), (6, 3, 3), (7, 7, 3)]
    assert [(z["host_node"], z["size_mib"]) for z in plan["memory_zones"]] == [(0, 2048), (1, 1024), (2, 2048), (3, 2048)]
    assert plan["topology"] == {"packages": 2, "cores_per_package": 2, "threads_per_core": 2}
    assert [(d["kind"], d["host_pci"], d["guest_node"], d["guest_pci"]) for d in plan["devices"]] == [
        ("gpu", "0000:18:00.0", 0, "0000:13:00.0"), ("nic", "0000:19:00.0", 0, "0000:14:00.0"),
        ("gpu", "0000:bc:00.0", 3, "0000:23:00.0"), ("nic", "0000:bd:00.0", 3, "0000:24:00.0")]
    assert plan["guest"]["siblings"] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert plan["host"] == {"numa_nodes": [0, 1, 2, 3], "reserved_cpus": [], "emulator_cpus": []}


def test_mini_guests_side_by_side(tree_facts):
    plans = plan_guests(tree_facts("guest-mini"), [{"name": "a", "gpus": 1}, {"name": "b", "gpus": 1},
                                                   {"name": "c", "gpus": 0}, {"name": "d"}], {"reserve_host_cpus": 0})
    assert [(p["name"], p["host"]["numa_nodes"], [v["host_cpu"] for v in p["vcpus"]]) for p in plans] == [
        ("a", [0], [0, 4]), ("b", [3], [3, 7]), ("c", [1], [1, 5]), ("d", [2], [2, 6])]
    assert [p["devices"] for p in plans[2:]] == [[], []]
    with pytest.raises(GuestPlanError, match="guest e: a guest without GPUs needs a free NUMA node without GPUs, none is free"):
        plan_guests(tree_facts("guest-mini"), [{"name": n} for n in "cde"], {"reserve_host_cpus": 0})


def test_mini_keeps_no_core_when_reserving_the_only_one(tree_facts):
    with pytest.raises(GuestPlanError) as err:
        one(tree_facts("guest-mini"), {"name": "g", "gpus": 1})
    assert str(err.value) == "NUMA node 0: 1 core, reserve_host_cpus keeps 1 for the host: none left for guests"


def test_snc_off_cuts_a_node_into_slots(tree_facts):
    # The dirty box: SNC off (2 nodes of 52 cores, 4 GPUs each), HT off (one thread per core). Give it
    # 16 free 1G pages per node: a node is 4 slots of 13, 13, 13, 12 cores (its last core kept) and 4 pages.
    facts = tree_facts("hgx-h100-dirty")
    for node in facts["numa"]["nodes"]:
        node["free_hugepages"]["1048576"] = 16
    plans = plan_guests(facts, [{"name": "g%d" % i, "gpus": 1} for i in range(8)])
    assert [(p["vcpus"][0]["host_cpu"], len(p["vcpus"]), p["host"]["numa_nodes"]) for p in plans] == [
        (0, 13, [0]), (13, 13, [0]), (26, 13, [0]), (39, 12, [0]), (52, 13, [1]), (65, 13, [1]), (78, 13, [1]), (91, 12, [1])]
    assert all(p["topology"]["threads_per_core"] == 1 and p["memory_zones"][0]["size_mib"] == 4096 for p in plans)
    two = plan_guests(facts, [{"name": "pair", "gpus": 2}])[0]
    assert [(z["host_node"], z["size_mib"]) for z in two["memory_zones"]] == [(0, 8192)]   # one zone per host node
    assert [d["guest_pci"] for d in two["devices"]] == ["0000:13:00.0", "0000:14:00.0", "0000:17:00.0", "0000:18:00.0"]
