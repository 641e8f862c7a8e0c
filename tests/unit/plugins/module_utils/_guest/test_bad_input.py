"""Facts and requests a plan cannot be made from: each one error naming the thing and the cause, no plan."""
import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._guest.plan import GuestPlanError, plan_guests

EIGHT = [{"name": "big", "gpus": 8}]


def fails(facts, requests=None, options=None):
    with pytest.raises(GuestPlanError) as err:
        plan_guests(facts, EIGHT if requests is None else requests, options)
    return str(err.value)


def test_missing_sibling_lists(tree_facts):
    facts = tree_facts("hgx-h100-ref")
    facts["cpu"]["siblings"] = []
    assert fails(facts) == ("facts: cpu.siblings is missing or empty (no thread_siblings_list read): "
                            "vCPU siblings cannot be placed on host siblings")


def test_one_core_without_sibling_list(tree_facts):
    facts = tree_facts("hgx-h100-ref")
    facts["cpu"]["siblings"].remove([5, 109])
    assert fails(facts) == ("NUMA node 0: CPU 5 has no sibling list in cpu.siblings (thread_siblings_list missing): "
                            "its core's threads are unknown")


def test_offline_sibling(tree_facts):
    facts = tree_facts("hgx-h100-ref")
    facts["cpu"]["siblings"][facts["cpu"]["siblings"].index([40, 144])] = [40]
    facts["numa"]["nodes"][3]["cpus"].remove(144)
    assert fails(facts).startswith("NUMA node 3: CPU 40 is in a core of 1 thread(s) (40), the host has 2 per core")


def test_node_without_free_hugepages(tree_facts):
    facts = tree_facts("hgx-h100-ref")
    facts["numa"]["nodes"][3]["free_hugepages"]["1048576"] = 0
    assert fails(facts) == ("guest big: NUMA node 3 has no free 1048576 kB hugepages (free_hugepages 0): "
                            "its memory zone would be empty")
    # guests that stay off node 3 are planned
    assert [p["host"]["numa_nodes"] for p in plan_guests(facts, [{"name": "a", "gpus": 3}])] == [[0, 1, 2]]


def test_facts_without_free_hugepages(tree_facts):
    facts = tree_facts("hgx-h100-ref")
    del facts["numa"]["nodes"][0]["free_hugepages"]
    assert fails(facts).startswith("guest big: NUMA node 0: free 1048576 kB hugepages unknown: free_hugepages missing")


def test_gpu_without_nic_on_its_switch(tree_facts):
    facts = tree_facts("hgx-h100-ref")
    facts["pairs"][2]["affinity"] = "NODE"    # its NIC moved off the GPU's switch
    assert fails(facts) == ("GPU 0000:3a:00.0 (NUMA node 2): no NIC on its PCIe switch (nearest mlx5_2 is NODE, "
                            "wanted PIX or PXB): GPUDirect RDMA would cross the host bridge")


def test_gpu_without_any_nic(tree_facts):
    facts = tree_facts("hgx-h100-ref")
    facts["nics"] = [n for n in facts["nics"] if n["name"] != "mlx5_7"]
    assert fails(facts).startswith("GPU 0000:ab:00.0 (NUMA node 5): no NIC paired with it in facts pairs")


def test_gpu_without_numa_node(tree_facts):
    facts = tree_facts("hgx-h100-ref")
    facts["gpus"][0]["numa_node"] = None
    assert fails(facts).startswith("GPU 0000:18:00.0: NUMA node unknown (numa_node -1)")


def test_no_numa_nodes(tree_facts):
    facts = tree_facts("hgx-h100-ref")
    facts["numa"]["nodes"] = []
    assert fails(facts).startswith("facts: numa.nodes is missing or empty")


@pytest.mark.parametrize("requests, message", [
    ([], "requests: expected a non-empty list"),
    ([{"gpus": 1}], "requests[0]: a request needs a name"),
    ([{"name": "a", "gpu": 1}], "guest a: unknown request key(s) gpu (known: name, gpus, memory_gib, vcpus)"),
    ([{"name": "a"}, {"name": "a"}], "guest a: name used by two requests"),
    ([{"name": "a", "gpus": -1}], "guest a: gpus must be a whole number from 0, got -1"),
    ([{"name": "a", "gpus": "2"}], "guest a: gpus must be a whole number from 0, got '2'"),
    ([{"name": "a", "gpus": 1, "memory_gib": 0}], "guest a: memory_gib must be a whole number from 1, got 0"),
])
def test_bad_requests(tree_facts, requests, message):
    assert fails(tree_facts("hgx-h100-ref"), requests).startswith(message)


@pytest.mark.parametrize("options, message", [
    ({"reserve": 1}, "options: unknown key 'reserve'"),
    ({"reserve_host_cpus": -1}, "options: reserve_host_cpus must be a count of cores per NUMA node or a list"),
    ({"reserve_host_cpus": 13}, "NUMA node 0: 13 cores, reserve_host_cpus keeps 13 for the host: none left"),
    ({"hugepage_size_kb": "1G"}, "options: hugepage_size_kb must be a page size in kB"),
])
def test_bad_options(tree_facts, options, message):
    assert fails(tree_facts("hgx-h100-ref"), options=options).startswith(message)


def test_not_facts():
    assert fails(["not", "facts"]) == "facts: expected the ansible_facts.gpufleet dict, got list"


def test_memory_only_node_is_left_out(tree_facts):
    # a CPU-less node (CXL memory): no guest lands on it, the others plan as before
    facts = tree_facts("guest-mini")
    facts["numa"]["nodes"].append({"id": 4, "cpus": [], "memory_kb": 1048576, "hugepages": {"1048576": 0},
                                   "free_hugepages": {"1048576": 0}})
    plans = plan_guests(facts, [{"name": "a", "gpus": 2, "vcpus": 8}], {"reserve_host_cpus": 0})
    assert plans[0]["host"]["numa_nodes"] == [0, 1, 2, 3]
    assert fails(facts, [{"name": "a", "gpus": 1}], {"reserve_host_cpus": 1}).startswith("NUMA node 0: 1 core, reserve")


def test_reserve_list_of_text(tree_facts):
    assert fails(tree_facts("guest-mini"), options={"reserve_host_cpus": ["0"]}).startswith(
        "options: reserve_host_cpus must be a count of cores per NUMA node or a list of host CPUs, got ['0']")
