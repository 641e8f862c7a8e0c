"""Hostile input for the guest planner and the CPU-list filters: facts of the wrong types, CPUs
that do not exist or are negative, options the argument spec lets through. Each case is a clear
error naming the input (the module fails with no plan; a filter raises AnsibleFilterError), or the
documented result."""
import copy
import json

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.provision.plugins.filter.topology import FilterModule
from ansible_collections.gpufleet.provision.plugins.module_utils._guest.plan import GuestPlanError, plan_guests
from ansible_collections.gpufleet.provision.plugins.module_utils._node.facts import collect

COVERS = ["module:guest_plan", "filter:cpulist", "filter:cpus", "filter:sibling_order"]

FILTERS = FilterModule().filters()
_FACTS = {}


@pytest.fixture
def ref_facts(unpacked_tree):
    if "ref" not in _FACTS:
        _FACTS["ref"], warnings = collect(unpacked_tree("hgx-h100-ref"))
        assert warnings == []
    return copy.deepcopy(_FACTS["ref"])


def _set(facts, path, value):
    """facts with the value at the dotted ``path`` (list indexes as numbers) replaced."""
    node, keys = facts, path.split(".")
    for key in keys[:-1]:
        node = node[int(key)] if isinstance(node, list) else node[key]
    last = keys[-1]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return facts


def _plan(run_module, facts, requests=None, **extra):
    args = dict(facts=facts, requests=[{"name": "g1", "gpus": 2}] if requests is None else requests, format=["libvirt"])
    args.update(extra)
    return run_module("guest_plan", args)


# ---- facts of the wrong types: an error naming the key path, never a traceback ----

@pytest.mark.parametrize("path, value, names", [
    ("cpu", "x", ["cpu", "'x'"]),
    ("cpu.siblings", "0-3", ["cpu.siblings", "0-3"]),
    ("cpu.siblings", [1, 2], ["cpu.siblings[0]", "1"]),
    ("cpu.siblings.3", [3, -107], ["cpu.siblings[3][1]", "-107"]),
    ("cpu.siblings.3", [3, "107"], ["cpu.siblings[3][1]", "'107'"]),
    ("numa", [], ["numa", "[]"]),
    ("numa.nodes", "node0", ["numa.nodes", "node0"]),
    ("numa.nodes.0", 0, ["numa.nodes[0]", "0"]),
    ("numa.nodes.0.id", "0", ["numa.nodes[0].id", "'0'"]),
    ("numa.nodes.0.cpus", "0-12", ["numa.nodes[0].cpus", "0-12"]),
    ("numa.nodes.0.cpus.0", 1.5, ["numa.nodes[0].cpus[0]", "1.5"]),
    ("numa.nodes.0.free_hugepages", [64], ["numa.nodes[0].free_hugepages", "64"]),
    ("numa.nodes.0.free_hugepages", {"1048576": "many"}, ["numa.nodes[0].free_hugepages", "many"]),
    ("numa.distances", [[10, 21]], ["numa.distances"]),
    ("gpus", {"0000:18:00.0": {}}, ["gpus"]),
    ("gpus.0", "0000:18:00.0", ["gpus[0]", "0000:18:00.0"]),
    ("gpus.0.pci", 18, ["gpus[0].pci", "18"]),
    ("gpus.0.numa_node", "zero", ["gpus[0].numa_node", "zero"]),
    ("nics.0", None, ["nics[0]", "None"]),
    ("pairs", "all", ["pairs", "all"]),
    ("pairs.0.gpu", None, ["pairs[0].gpu", "None"]),
    ("cpu.siblings.1", [0, 105], ["cpu.siblings", "CPU 0 given twice"]),
    ("numa.nodes.1.id", 0, ["numa.nodes", "node id 0 given twice"]),
])
def test_facts_of_wrong_types(run_module, clear_error, ref_facts, path, value, names):
    clear_error(_plan(run_module, _set(ref_facts, path, value)), *names)


@pytest.mark.parametrize("facts", ["garbage", [1, 2], 42])
def test_facts_not_a_mapping(run_module, clear_error, facts):
    out = run_module("guest_plan", {"facts": facts, "requests": [{"name": "g1"}]})
    clear_error(out, "facts")


def test_facts_of_a_node_whose_infiniband_class_was_unreadable(run_module, clear_error, ref_facts):
    # node_facts gives nics None when sys/class/infiniband cannot be listed: every GPU lacks its NIC
    ref_facts["nics"] = None
    clear_error(_plan(run_module, ref_facts), "GPU 0000:18:00.0", "no NIC")


# ---- reserve_host_cpus ----

@pytest.mark.parametrize("reserve, names", [
    ([9999], ["reserve_host_cpus", "9999"]),
    ("12,9999", ["reserve_host_cpus", "9999"]),
    ([-1], ["reserve_host_cpus", "-1"]),
    (-1, ["reserve_host_cpus", "-1"]),
    ([1.5], ["reserve_host_cpus", "1.5"]),
    ([True], ["reserve_host_cpus", "True"]),
    ("some", ["reserve_host_cpus", "some"]),
    ({"a": 1}, ["reserve_host_cpus"]),
    (13, ["reserve_host_cpus", "none left"]),
])
def test_reserve_host_cpus(run_module, clear_error, ref_facts, reserve, names):
    clear_error(_plan(run_module, ref_facts, reserve_host_cpus=reserve), *names)


def test_reserve_list_in_process_names_the_cpu(ref_facts):
    with pytest.raises(GuestPlanError) as err:
        plan_guests(ref_facts, [{"name": "g1", "gpus": 1}], {"reserve_host_cpus": [12, 500]})
    assert "reserve_host_cpus: CPU 500 not on this host" in str(err.value)


# ---- requests and options ----

@pytest.mark.parametrize("requests, names", [
    ([{"name": "g1", "gpus": -1}], ["g1", "gpus"]),
    ([{"name": "g1", "gpus": "two"}], ["gpus"]),
    ([{"name": "g1", "gpus": 9}], ["g1", "9 GPUs"]),
    ([{"name": "g1", "vcpus": 0, "gpus": 1}], ["g1", "vcpus"]),
    ([{"name": "g1", "vcpus": 3, "gpus": 1}], ["g1", "3 vCPUs"]),
    ([{"name": "g1", "memory_gib": 10 ** 9, "gpus": 1}], ["g1", "1000000000 GiB"]),
    ([{"name": "g1", "gpus": 1}, {"name": "g1", "gpus": 1}], ["g1", "two requests"]),
    ([{"gpus": 1}], ["name"]),
    ([], ["requests"]),
    ([{"name": "g1\nrm -rf /", "gpus": 1}], ["guest name", "rm -rf"]),
    ([{"name": "g1,debug-threads=off", "gpus": 1}], ["guest name", "debug-threads=off"]),
    ([{"name": "../g1", "gpus": 1}], ["guest name", "../g1"]),
])
def test_bad_requests(run_module, clear_error, ref_facts, requests, names):
    clear_error(_plan(run_module, ref_facts, requests), *names)


def test_request_that_is_no_mapping(run_module, clear_error, ref_facts):
    # ansible-core's own argument check refuses it ("dictionary requested, could not parse JSON or
    # key=value", without the option's name: its wording, not ours); no plan, no traceback
    clear_error(_plan(run_module, ref_facts, ["g1"]), "dictionary requested")


@pytest.mark.parametrize("extra, names", [
    ({"hugepage_size_kb": 0}, ["hugepage_size_kb", "0"]),
    ({"hugepage_size_kb": -2048}, ["hugepage_size_kb", "-2048"]),
    ({"hugepage_size_kb": 4}, ["4 kB"]),
    ({"affinities": ["ANY"]}, ["affinities", "ANY"]),
    ({"format": ["vmware"]}, ["format", "vmware"]),
])
def test_bad_options(run_module, clear_error, ref_facts, extra, names):
    clear_error(_plan(run_module, ref_facts, **extra), *names)


def test_gpus_zero_is_a_guest_without_gpus(run_module, succeeded, ref_facts):
    # the documented result (module docs and docs/guest-plan.md): no GPU, a node without GPUs; the
    # reference node has a GPU on every node, so it is a clear refusal there
    out = _plan(run_module, ref_facts, [{"name": "cpu0", "gpus": 0}])
    assert out.failed and not out["_traceback"]
    assert "cpu0: a guest without GPUs needs a free NUMA node without GPUs" in out.msg


def test_return_sample_is_what_the_planner_gives(run_module, succeeded, ref_facts):
    out = _plan(run_module, ref_facts, [{"name": "train0", "gpus": 4}])
    succeeded(out)
    assert out["plans"][0]["host"] == {"numa_nodes": [0, 1, 2, 3], "reserved_cpus": [12, 25, 38, 51, 116, 129, 142, 155],
                                       "emulator_cpus": [12, 25, 38, 51, 116, 129, 142, 155]}


def test_root_that_is_not_a_folder(run_module, clear_error, tmp_path):
    path = tmp_path / "file"
    path.write_text("x")
    clear_error(run_module("guest_plan", {"root": str(path), "requests": [{"name": "g1"}]}), str(path))


# ---- filters: garbage in, AnsibleFilterError naming it ----

@pytest.mark.parametrize("value, named", [
    ([-1], "-1"), ([0, -3], "-3"), ("123", "123"), ([1.5], "1.5"), ([True], "True"), (None, "None"),
    ({"0": 1}, "{'0': 1}"), ([[0, 1]], "[0, 1]"), ([10 ** 9], "1000000000"), (["x"], "'x'"), (5, "5"),
])
def test_cpulist_garbage(value, named):
    with pytest.raises(AnsibleFilterError) as err:
        FILTERS["cpulist"](value)
    assert "cpulist" in str(err.value) and named in str(err.value), str(err.value)


def test_cpulist_accepts_digit_strings():
    assert FILTERS["cpulist"](["0", "1", 2, 104]) == "0-2,104"


@pytest.mark.parametrize("value", ["-1", "3-1", "0-999999999", "a", "0,,1", None, [0, 1], 5, b"0-3", "0-3\x00"])
def test_cpus_garbage(value):
    with pytest.raises(AnsibleFilterError) as err:
        FILTERS["cpus"](value)
    assert "cpus" in str(err.value) and repr(value) in str(err.value), str(err.value)


@pytest.mark.parametrize("siblings, only, named", [
    ("0,104", None, "'0,104'"),
    ([0, 104], None, "0"),
    ([[0, -104]], None, "-104"),
    ([["a"]], None, "'a'"),
    ([[0, 104], [104, 1]], None, "104"),
    ([[0, 104]], "0", "'0'"),
    ([[0, 104]], [-1], "-1"),
    (None, None, "None"),
])
def test_sibling_order_garbage(siblings, only, named):
    with pytest.raises(AnsibleFilterError) as err:
        FILTERS["sibling_order"](siblings, only)
    assert "sibling_order" in str(err.value) and named in str(err.value), str(err.value)


def test_sibling_order_good_input_unchanged():
    assert FILTERS["sibling_order"]([[1, 105], [0, 104], [0, 104]]) == [0, 104, 1, 105]
    assert FILTERS["sibling_order"]([[1, 105], [0, 104]], [0, 104]) == [0, 104]


def test_facts_json_round_trip_still_plans(run_module, succeeded, ref_facts):
    # facts as a gate report stores them (JSON: node ids as strings in distances) plan as before
    facts = json.loads(json.dumps(ref_facts))
    out = _plan(run_module, facts)
    succeeded(out)
    assert [p["name"] for p in out["plans"]] == ["g1"]
