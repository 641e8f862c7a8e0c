# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The guest planner: node facts + guest requests -> one plan per guest (docs/guest-plan.md).

Pure: no I/O. A guest gets whole slots (host.py): the GPU-NIC pairs it asked for with their
NUMA node's cores and free hugepages. Guest NUMA nodes are the host nodes it was given (SNC/NPS
nodes are never merged), vCPU T*k..T*k+T-1 are the threads of one host core, one memory zone per
host node. Requests are placed largest first, each in the smallest group (a node, a package, the
host) with enough free pairs, so whole nodes and packages stay free for large guests.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufleet.provision.plugins.module_utils._guest import host as _host
from ansible_collections.gpufleet.provision.plugins.module_utils._guest import topology
from ansible_collections.gpufleet.provision.plugins.module_utils._guest.host import GuestPlanError

SCHEMA = 1
DEFAULTS = {"reserve_host_cpus": 1, "hugepage_size_kb": 1048576, "affinities": ["PIX", "PXB"]}
REQUEST_KEYS = ("name", "gpus", "memory_gib", "vcpus")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")

__all__ = ["GuestPlanError", "plan_guests", "DEFAULTS", "SCHEMA"]


def plan_guests(facts, requests, options=None):
    """Return one plan (dict, docs/guest-plan.md) per request, in request order, placed together.

    Raises GuestPlanError naming the guest and what is short when any request cannot be placed:
    no plan is returned then, not even for the requests that would fit."""
    opts = _options(options)
    model = _host.build(facts, opts)
    reqs = _requests(requests)
    placed = {}
    for req in sorted(reqs, key=lambda r: -r["gpus"]):
        placed[req["name"]] = _place(model, req)
    return [_plan(model, req, placed[req["name"]]) for req in reqs]


def _options(options):
    opts = dict(DEFAULTS)
    for key, value in (options or {}).items():
        if key not in DEFAULTS:
            raise GuestPlanError("options: unknown key %r (known: %s)" % (key, ", ".join(sorted(DEFAULTS))))
        if value is not None:
            opts[key] = value
    reserve = opts["reserve_host_cpus"]
    as_list = isinstance(reserve, list) and all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in reserve)
    if isinstance(reserve, bool) or not (isinstance(reserve, int) and reserve >= 0 or as_list):
        raise GuestPlanError("options: reserve_host_cpus must be a count of cores per NUMA node or a list of host CPUs, got %r"
                             % (reserve,))
    if not isinstance(opts["hugepage_size_kb"], int) or opts["hugepage_size_kb"] <= 0:
        raise GuestPlanError("options: hugepage_size_kb must be a page size in kB (1048576, 2048), got %r"
                             % (opts["hugepage_size_kb"],))
    return opts


def _requests(requests):
    if not isinstance(requests, list) or not requests:
        raise GuestPlanError("requests: expected a non-empty list of {name, gpus, memory_gib?, vcpus?}")
    out, names = [], set()
    for index, raw in enumerate(requests):
        if not isinstance(raw, dict) or not raw.get("name"):
            raise GuestPlanError("requests[%d]: a request needs a name" % index)
        name = str(raw["name"])
        if not _NAME.match(name):
            # the name goes into QEMU's -name (a comma starts another option), the pin script (a shell
            # script: a newline starts a command) and the libvirt domain
            raise GuestPlanError("requests[%d]: guest name %r: letters, digits, '.', '_' and '-' only, at most 64" % (index, name))
        unknown = sorted(set(raw) - set(REQUEST_KEYS))
        if unknown:
            raise GuestPlanError("guest %s: unknown request key(s) %s (known: %s)" % (name, ", ".join(unknown), ", ".join(REQUEST_KEYS)))
        if name in names:
            raise GuestPlanError("guest %s: name used by two requests" % name)
        names.add(name)
        req = {"name": name}
        for key in ("gpus", "memory_gib", "vcpus"):
            value = raw.get(key, 0 if key == "gpus" else None)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < (0 if key == "gpus" else 1)):
                raise GuestPlanError("guest %s: %s must be a whole number%s, got %r"
                                     % (name, key, " from 0" if key == "gpus" else " from 1", value))
            req[key] = value
        out.append(req)
    return out


def _place(model, req):
    """Take the slots of one request (marks them used). Returns the slots."""
    pair_slots = [s for s in model["slots"] if s["pair"]]
    if req["gpus"] > len(pair_slots):
        raise GuestPlanError("guest %s: %s requested, the host has %s"
                             % (req["name"], topology.count(req["gpus"], "GPU"), topology.count(len(pair_slots), "GPU-NIC pair")))
    slots = _gpu_slots(model, req) if req["gpus"] else _cpu_only_slot(model, req)
    slots = slots + _more_for_vcpus(model, req, slots)
    for slot in slots:
        slot["used"] = True
    return slots


def _groups(model):
    """Smallest first: each NUMA node, each package, the host."""
    ids = sorted(model["nodes"])
    return [[[nid] for nid in ids], model["packages"], [ids]]


def _gpu_slots(model, req):
    want = req["gpus"]
    for level in _groups(model):
        fits = []
        for group in level:
            free = [s for s in model["slots"] if s["pair"] and not s["used"] and s["node"] in group]
            if len(free) >= want:
                fits.append((len(free), group[0], free))
        if fits:
            dummy, dummy2, free = min(fits, key=lambda f: f[:2])
            left = dict((nid, sum(1 for s in free if s["node"] == nid)) for nid in set(s["node"] for s in free))
            # Fill nodes already partly taken first: whole nodes stay whole.
            free.sort(key=lambda s: (left[s["node"]], s["node"], s["pair"]["gpu"]["pci"]))
            return free[:want]
    free = [s for s in model["slots"] if s["pair"] and not s["used"]]
    where = sorted(set(s["node"] for s in free))
    raise GuestPlanError("guest %s: %s requested, %s free%s"
                         % (req["name"], topology.count(want, "GPU"), topology.count(len(free), "GPU-NIC pair"),
                            " (NUMA node %s)" % ", ".join(str(n) for n in where) if where else ""))


def _cpu_only_slot(model, req):
    free = [s for s in model["slots"] if not s["pair"] and not s["used"]]
    if not free:
        raise GuestPlanError("guest %s: a guest without GPUs needs a free NUMA node without GPUs, none is free "
                             "(the cores of GPU nodes stay with their GPU-NIC pairs)" % req["name"])
    return [free[0]]


def _more_for_vcpus(model, req, slots):
    """Whole nodes without GPUs added when the request asks more vCPUs than its slots hold:
    nodes of the packages it already spans first."""
    threads = model["threads"]
    have = sum(len(s["cores"]) for s in slots) * threads
    if req["vcpus"] is None or req["vcpus"] <= have:
        return []
    spanned = set(i for i, group in enumerate(model["packages"]) for s in slots if s["node"] in group)
    package_of = dict((nid, i) for i, group in enumerate(model["packages"]) for nid in group)
    free = [s for s in model["slots"] if not s["pair"] and not s["used"] and s not in slots]
    free.sort(key=lambda s: (package_of[s["node"]] not in spanned, s["node"]))
    added = []
    for slot in free:
        if have >= req["vcpus"]:
            break
        added.append(slot)
        have += len(slot["cores"]) * threads
    if have < req["vcpus"]:
        raise GuestPlanError("guest %s: %d vCPUs requested, %d free on its NUMA nodes and the free nodes without GPUs"
                             % (req["name"], req["vcpus"], have))
    return added


def _per_node(model, req, slots):
    """[{node, cores, pages, pairs}] in host node order, with the request's caps applied."""
    nodes = sorted(set(s["node"] for s in slots))
    cores = [[c for s in slots if s["node"] == nid for c in s["cores"]] for nid in nodes]
    pairs = [[s["pair"] for s in slots if s["node"] == nid and s["pair"]] for nid in nodes]
    pages = [_node_pages(model, req, nid, [s for s in slots if s["node"] == nid]) for nid in nodes]
    for nid, node_cores in zip(nodes, cores):
        if not node_cores:
            raise GuestPlanError("guest %s: NUMA node %s has no core left for it (its GPUs outnumber its free cores)"
                                 % (req["name"], nid))
    cores = _cap_cores(model, req, nodes, cores)
    pages = _cap_pages(model, req, nodes, pages)
    return [{"node": nodes[i], "cores": sorted(cores[i]), "pages": pages[i],
             "pairs": sorted(pairs[i], key=lambda p: p["gpu"]["pci"])} for i in range(len(nodes))]


def _node_pages(model, req, nid, slots):
    size = model["page_kb"]
    node = model["nodes"][nid]
    if node["free_pages"] is None:
        why = "free_hugepages missing from the facts (node_facts older than schema 1 with free pages?)" \
            if not node["has_free_key"] else "no %d kB pool on that node" % size
        raise GuestPlanError("guest %s: NUMA node %s: free %d kB hugepages unknown: %s" % (req["name"], nid, size, why))
    pages = sum(s["pages"] for s in slots)
    if not pages:
        raise GuestPlanError("guest %s: NUMA node %s has no free %d kB hugepages (free_hugepages %d): its memory zone "
                             "would be empty" % (req["name"], nid, size, node["free_pages"]))
    return pages


def _cap_cores(model, req, nodes, cores):
    if req["vcpus"] is None:
        return cores
    threads = model["threads"]
    if req["vcpus"] % threads:
        raise GuestPlanError("guest %s: %d vCPUs is not a multiple of %d threads per core: a guest core's threads "
                             "must be one host core's threads" % (req["name"], req["vcpus"], threads))
    want = req["vcpus"] // threads
    if want < len(nodes):
        raise GuestPlanError("guest %s: %d vCPUs cannot cover %d NUMA nodes (%s): at least one core (%d vCPUs) each"
                             % (req["name"], req["vcpus"], len(nodes), ", ".join(map(str, nodes)), threads))
    shares = topology.spread(want, [len(c) for c in cores])
    return [c[:n] for c, n in zip(cores, shares)]


def _cap_pages(model, req, nodes, pages):
    if req["memory_gib"] is None:
        return pages
    size = model["page_kb"]
    total_kb = req["memory_gib"] * 1048576
    if total_kb % size:
        raise GuestPlanError("guest %s: memory_gib %d is not a whole number of %d kB pages" % (req["name"], req["memory_gib"], size))
    shares = topology.spread(total_kb // size, pages)
    if shares is None:
        raise GuestPlanError("guest %s: %d GiB requested, %d GiB of free %d kB hugepages on its NUMA nodes (%s)"
                             % (req["name"], req["memory_gib"], sum(pages) * size // 1048576, size,
                                ", ".join(map(str, nodes))))
    if 0 in shares:
        raise GuestPlanError("guest %s: %d GiB cannot give each of its %d NUMA nodes a memory zone"
                             % (req["name"], req["memory_gib"], len(nodes)))
    return shares


def _plan(model, req, slots):
    per_node = _per_node(model, req, slots)
    host_nodes = [entry["node"] for entry in per_node]
    reserved = sorted(c for nid in host_nodes for core in model["nodes"][nid]["reserved"] for c in core)
    plan = {
        "schema": SCHEMA,
        "name": req["name"],
        "host": {"numa_nodes": host_nodes, "reserved_cpus": reserved, "emulator_cpus": list(reserved)},
        "topology": _topology(model, per_node),
        "vcpus": [],
        "memory_zones": [],
        "devices": [],
    }
    for guest_node, entry in enumerate(per_node):
        for core in entry["cores"]:
            for cpu in core:
                plan["vcpus"].append({"vcpu": len(plan["vcpus"]), "host_cpu": cpu, "guest_node": guest_node})
        plan["memory_zones"].append({"id": "mem%d" % guest_node, "host_node": entry["node"], "guest_node": guest_node,
                                     "size_mib": entry["pages"] * model["page_kb"] // 1024,
                                     "hugepage_size_kb": model["page_kb"]})
    try:
        plan["devices"] = _devices(per_node)
    except ValueError as exc:
        raise GuestPlanError("guest %s: %s" % (req["name"], exc))
    plan["guest"] = _guest_view(model, plan)
    return plan


def _topology(model, per_node):
    """Guest packages = host packages spanned when each holds the same number of the guest's cores
    (QEMU and cloud-hypervisor need equal packages), else one package."""
    package_of = dict((nid, i) for i, group in enumerate(model["packages"]) for nid in group)
    per_package = {}
    for entry in per_node:
        package = package_of[entry["node"]]
        per_package[package] = per_package.get(package, 0) + len(entry["cores"])
    total = sum(per_package.values())
    count = len(per_package) if len(set(per_package.values())) == 1 else 1
    return {"packages": count, "cores_per_package": total // count, "threads_per_core": model["threads"]}


def _devices(per_node):
    with_pairs = [(g, len(entry["pairs"])) for g, entry in enumerate(per_node) if entry["pairs"]]
    layout = topology.pci_layout(with_pairs)
    devices = []
    for guest_node, entry in enumerate(per_node):
        for i, pair in enumerate(entry["pairs"]):
            index = len(devices) // 2
            buses = layout[guest_node]["pairs"][i]
            for kind, dev, bus, slot in (("gpu", pair["gpu"], buses[0], 1), ("nic", pair["nic"], buses[1], 2)):
                device = {"kind": kind, "host_pci": dev["pci"], "pair": index, "rail": pair["rail"],
                          "host_node": entry["node"], "guest_node": guest_node, "guest_bus": layout[guest_node]["bus_nr"],
                          "guest_pci": topology.bdf(bus), "segment": index + 1, "segment_device": slot}
                if kind == "nic":
                    device["name"] = dev["name"]
                    device["affinity"] = pair["affinity"]
                else:
                    device["model"] = dev.get("model")
                devices.append(device)
    return devices


def _guest_view(model, plan):
    """What the guest must see from inside: the guest gate checks exactly this."""
    ids = sorted(model["nodes"])  # a distance row is in node order (numa.online)
    places = [ids.index(z["host_node"]) for z in plan["memory_zones"]]
    numa = []
    for zone in plan["memory_zones"]:
        row = model["distances"].get(str(zone["host_node"]))
        numa.append({"id": zone["guest_node"], "host_node": zone["host_node"], "memory_mib": zone["size_mib"],
                     "cpus": [v["vcpu"] for v in plan["vcpus"] if v["guest_node"] == zone["guest_node"]],
                     "distances": [row[i] for i in places] if row and max(places) < len(row) else None})
    threads = model["threads"]
    vcpus = [v["vcpu"] for v in plan["vcpus"]]
    devices = []
    for dev in plan["devices"]:
        partner = [d for d in plan["devices"] if d["pair"] == dev["pair"] and d is not dev][0]
        devices.append({"kind": dev["kind"], "guest_pci": dev["guest_pci"], "numa_node": dev["guest_node"],
                        "pair": dev["pair"], "partner": partner["guest_pci"],
                        "cloud_hypervisor_pci": topology.bdf(0, dev["segment_device"], domain=dev["segment"])})
    return {"numa": numa, "siblings": [vcpus[i:i + threads] for i in range(0, len(vcpus), threads)], "devices": devices}
