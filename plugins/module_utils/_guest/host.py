# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host as the guest planner sees it: NUMA nodes cut into slots, from ``ansible_facts.gpufleet``.

A slot is what one GPU-NIC pair brings to a guest: the pair, an equal share of its NUMA node's
cores (whole cores: both hyper-threads) and of the node's free hugepages. On the reference node
(SNC4, one GPU per node) a slot is a whole node; with SNC off (4 GPUs per node) a quarter of one.
A node without GPUs is one slot without a pair (for guests without GPUs, or more vCPUs).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.provision.plugins.module_utils._guest import topology


class GuestPlanError(Exception):
    """A plan that cannot be made: the message names the guest, node, CPU or device and the cause."""


def build(facts, opts):
    """facts -> {"threads": T, "page_kb": kB, "nodes": {id: node}, "packages": [[ids]], "slots": [...],
    "distances": {...}}. Raises GuestPlanError on facts a plan cannot be made from."""
    check_facts(facts)
    core_of, threads = _cores(facts)
    check_reserved(facts, opts["reserve_host_cpus"])
    numa = facts.get("numa") or {}
    if not numa.get("nodes"):
        raise GuestPlanError("facts: numa.nodes is missing or empty (node_facts could not read sys/devices/system/node)")
    pairs = _pairs(facts, opts)
    nodes, slots = {}, []
    for raw in numa["nodes"]:
        node = _node(raw, core_of, threads, opts)
        nodes[node["id"]] = node
        here = [p for p in pairs if p["numa_node"] == node["id"]]
        if node["cores"] or here:  # a memory-only node (CXL, HBM) holds no guest of its own
            slots.extend(_slots(node, here))
    for pair in pairs:
        if pair["numa_node"] not in nodes:
            raise GuestPlanError("GPU %s: NUMA node %s is not among numa.nodes" % (pair["gpu"]["pci"], pair["numa_node"]))
    ids = sorted(nodes)
    return {"threads": threads, "page_kb": opts["hugepage_size_kb"], "nodes": nodes, "slots": slots,
            "packages": topology.packages(ids, numa.get("distances")), "distances": numa.get("distances") or {}}


def _is_cpu(value):
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _where(path, value, want):
    return GuestPlanError("facts: %s must be %s, got %r" % (path, want, value))


def _list_of(path, value, test, want, optional=False):
    """``value`` is a list whose items pass ``test``; else GuestPlanError naming the path and the item."""
    if value is None and optional:
        return []
    if not isinstance(value, list):
        raise _where(path, value, "a list")
    for index, item in enumerate(value):
        if not test(item):
            raise _where("%s[%d]" % (path, index), item, want)
    return value


def _dict(value):
    return isinstance(value, dict)


def _unique(path, values, what):
    seen = set()
    for value in values:
        if value in seen:
            raise GuestPlanError("facts: %s: %s %s given twice (a CPU or node in two places cannot be pinned)" % (path, what, value))
        seen.add(value)


def check_facts(facts):
    """The part of ansible_facts.gpufleet the planner reads, by type (docs/facts.md), or GuestPlanError
    naming the key path and the value: facts from a file or another tool reach the planner as they are."""
    if not isinstance(facts, dict):
        raise GuestPlanError("facts: expected the ansible_facts.gpufleet dict, got %s" % type(facts).__name__)
    for key in ("cpu", "numa"):
        if facts.get(key) is not None and not isinstance(facts[key], dict):
            raise _where(key, facts[key], "a mapping")
    siblings = _list_of("cpu.siblings", (facts.get("cpu") or {}).get("siblings"), lambda c: isinstance(c, list),
                        "a list of CPU numbers", optional=True)
    for index, core in enumerate(siblings):
        _list_of("cpu.siblings[%d]" % index, core, _is_cpu, "a CPU number (0 or more)")
    _unique("cpu.siblings", [cpu for core in siblings for cpu in set(core)], "CPU")
    numa = facts.get("numa") or {}
    for index, node in enumerate(_list_of("numa.nodes", numa.get("nodes"), _dict, "a mapping", optional=True)):
        where = "numa.nodes[%d]" % index
        if not _is_cpu(node.get("id")):
            raise _where(where + ".id", node.get("id"), "a NUMA node id (0 or more)")
    _unique("numa.nodes", [node["id"] for node in numa.get("nodes") or []], "node id")
    for index, node in enumerate(numa.get("nodes") or []):
        where = "numa.nodes[%d]" % index
        _list_of(where + ".cpus", node.get("cpus"), _is_cpu, "a CPU number (0 or more)", optional=True)
        free = node.get("free_hugepages")
        if free is not None and not (_dict(free) and all(v is None or _is_cpu(v) for v in free.values())):
            raise _where(where + ".free_hugepages", free, "a mapping of page size to a count")
    distances = numa.get("distances")
    if distances is not None and not (_dict(distances) and all(
            v is None or (isinstance(v, list) and all(_is_cpu(d) for d in v)) for v in distances.values())):
        raise _where("numa.distances", distances, "a mapping of node id to a list of distances")
    for key, name in (("gpus", "pci"), ("nics", "name"), ("pairs", "gpu")):
        for index, item in enumerate(_list_of(key, facts.get(key), _dict, "a mapping", optional=True)):
            if not isinstance(item.get(name), str):
                raise _where("%s[%d].%s" % (key, index, name), item.get(name), "a string")
    for index, gpu in enumerate(facts.get("gpus") or []):
        if gpu.get("numa_node") is not None and not isinstance(gpu["numa_node"], int):
            raise _where("gpus[%d].numa_node" % index, gpu["numa_node"], "a NUMA node id")


def _cores(facts):
    siblings = (facts.get("cpu") or {}).get("siblings")
    if not siblings:
        raise GuestPlanError("facts: cpu.siblings is missing or empty (no thread_siblings_list read): "
                             "vCPU siblings cannot be placed on host siblings")
    core_of = {}
    for core in siblings:
        for cpu in core:
            core_of[cpu] = tuple(sorted(core))
    return core_of, max(len(core) for core in siblings)


def _node(raw, core_of, threads, opts):
    nid = raw.get("id")
    if raw.get("cpus") is None:
        raise GuestPlanError("NUMA node %s: CPU list missing (node%s/cpulist not read)" % (nid, nid))
    cores = []
    for cpu in raw["cpus"]:
        core = core_of.get(cpu)
        if core is None:
            raise GuestPlanError("NUMA node %s: CPU %d has no sibling list in cpu.siblings "
                                 "(thread_siblings_list missing): its core's threads are unknown" % (nid, cpu))
        if len(core) != threads:
            raise GuestPlanError("NUMA node %s: CPU %d is in a core of %d thread(s) (%s), the host has %d per core: "
                                 "a sibling is offline" % (nid, cpu, len(core), topology.cpulist(core), threads))
        if core not in cores:
            cores.append(core)
    cores.sort()
    reserved = _reserved(nid, cores, opts["reserve_host_cpus"])
    free = (raw.get("free_hugepages") or {}).get(str(opts["hugepage_size_kb"]))
    return {"id": nid, "cores": [c for c in cores if c not in reserved], "reserved": sorted(reserved),
            "free_pages": free, "has_free_key": "free_hugepages" in raw}


def _reserved(nid, cores, reserve):
    """Cores kept for the host on node ``nid``: the last ``reserve`` cores (so vCPU 0 lands on the
    node's first CPU), or the cores of the CPUs listed."""
    if not cores:
        return set()
    if isinstance(reserve, int):
        if reserve >= len(cores):
            raise GuestPlanError("NUMA node %s: %s, reserve_host_cpus keeps %d for the host: none left for guests"
                                 % (nid, topology.count(len(cores), "core"), reserve))
        return set(cores[len(cores) - reserve:]) if reserve else set()
    listed = set(reserve)
    return set(core for core in cores if listed & set(core))


def check_reserved(facts, reserve):
    """A list of host CPUs to keep must name CPUs the host has (a typo would keep nothing)."""
    if not isinstance(reserve, list):
        return
    known = set(cpu for core in (facts.get("cpu") or {}).get("siblings") or [] for cpu in core)
    unknown = sorted(set(reserve) - known)
    if unknown:
        raise GuestPlanError("reserve_host_cpus: CPU %s not on this host (its CPUs: %s)"
                             % (topology.cpulist(unknown), topology.cpulist(sorted(known)) or "none"))


def _pairs(facts, opts):
    """GPU-NIC pairs of the facts, each GPU with its NIC on its PCIe switch, or an error naming the GPU."""
    gpus = dict((g["pci"], g) for g in facts.get("gpus") or [])
    nics = dict((n["name"], n) for n in facts.get("nics") or [])
    by_gpu = dict((p["gpu"], p) for p in facts.get("pairs") or [])
    out = []
    for pci in sorted(gpus):
        gpu, pair = gpus[pci], by_gpu.get(pci) or {}
        nic = nics.get(pair.get("nic"))
        if nic is None or nic.get("pci") is None:
            raise GuestPlanError("GPU %s (NUMA node %s): no NIC paired with it in facts pairs: "
                                 "it cannot be passed through with a rail NIC beside it" % (pci, gpu.get("numa_node")))
        if pair.get("affinity") not in opts["affinities"]:
            raise GuestPlanError("GPU %s (NUMA node %s): no NIC on its PCIe switch (nearest %s is %s, wanted %s): "
                                 "GPUDirect RDMA would cross the host bridge"
                                 % (pci, gpu.get("numa_node"), nic["name"], pair.get("affinity"),
                                    " or ".join(opts["affinities"])))
        if gpu.get("numa_node") is None:
            raise GuestPlanError("GPU %s: NUMA node unknown (numa_node -1): it cannot be given a guest NUMA node" % pci)
        out.append({"gpu": gpu, "nic": nic, "rail": pair.get("rail"), "affinity": pair["affinity"],
                    "numa_node": gpu["numa_node"]})
    return out


def _slots(node, pairs):
    """One slot per pair (or one without a pair), each an equal share of the node's cores and pages."""
    count = max(1, len(pairs))
    core_shares = topology.spread(len(node["cores"]), [len(node["cores"])] * count)
    page_shares = None if node["free_pages"] is None else topology.spread(node["free_pages"], [node["free_pages"]] * count)
    slots, start = [], 0
    for i in range(count):
        slots.append({"node": node["id"], "pair": pairs[i] if pairs else None,
                      "cores": node["cores"][start:start + core_shares[i]],
                      "pages": None if page_shares is None else page_shares[i], "used": False})
        start += core_shares[i]
    return slots
