# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Checks run inside a guest: what it sees against the ``guest`` section of the plan it was booted
from (profile key ``guest``: NUMA nodes with their vCPUs and memory, HT sibling groups, passed-through
devices with their NUMA node and partner). Without that section they skip as not asked.

The h2d probe with its spread is ``gpu.h2d_bandwidth`` (probes.py): a guest profile enables it with
the tuned node's thresholds (inventories/profiles/hgx-h100-guest.yml).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.provision.plugins.module_utils._node import pcie as _pcie
from ansible_collections.gpufleet.provision.plugins.module_utils._desired import profile as _profile
from ansible_collections.gpufleet.provision.plugins.module_utils._gate.framework import NotAsked, Skip, outcome, registrar
from ansible_collections.gpufleet.provision.plugins.module_utils._node.parsers import format_cpulist

# A guest NUMA node's MemTotal is less than the memory zone behind it: the kernel keeps the node's
# struct page array (64 bytes per 4 KiB page, 1/64 = 1.6 %) and a little per-node data out of it.
# Measured under QEMU 7.2 TCG with Debian's 6.1 cloud kernel (nodes of 256 MiB to 3 GiB): 1.6-2.2 % short.
NODE_SHORT_PERCENT = 3.0
# Once per guest, on whichever nodes they land: the kernel image (KASLR places it anywhere), the
# 64 MiB swiotlb bounce buffer below 4 GiB and the firmware's tables. Measured: the node that held
# them 145 MiB short of 3 GiB (53 MiB beyond its 3 %), 129 MiB short of 2 GiB (68 MiB beyond).
BOOT_RESERVE_MIB = 192

# How many differences a reason names before it counts the rest.
_SHOWN = 8


CHECKS = []
check = registrar(CHECKS)


def _planned(ctx, key):
    """The plan's ``guest.<key>``; NotAsked when the profile has no guest section or it is empty."""
    value = _profile.section(ctx.profile, "guest", key)
    if not value:
        raise NotAsked("not in profile (guest.%s: the guest plan's section)" % key)
    return value


def _listed(items):
    """The first few of ``items`` joined, and how many more there are."""
    shown = "; ".join(items[:_SHOWN])
    return shown + ("; and %d more" % (len(items) - _SHOWN) if len(items) > _SHOWN else "")


def _guest_nodes(ctx):
    """The guest's NUMA nodes by id (facts), or no data."""
    nodes = ctx.need((ctx.facts.get("numa") or {}).get("nodes"), ["sys/devices/system/node*"])
    if not nodes:
        raise ctx.no_data(["sys/devices/system/node*"], "no NUMA node in sysfs")
    return dict((n.get("id"), n) for n in nodes)


def _node_differences(ctx, node, seen):
    """What guest node ``seen`` shows against planned ``node``: (its CPUs, its distance row, the
    differences); an unreadable CPU list or distance row is no data, never a node without CPUs."""
    name = "node%d" % node["id"]
    cpus = seen.get("cpus")
    if cpus is None:
        raise ctx.no_data(["sys/devices/system/node/%s/cpulist" % name], "%s CPU list" % name)
    differ = []
    if sorted(set(cpus)) != sorted(set(node["cpus"])):
        differ.append("%s CPUs %s, planned %s" % (name, format_cpulist(cpus) or "none", format_cpulist(node["cpus"])))
    row = None
    if node.get("distances") is not None:
        row = ((ctx.facts.get("numa") or {}).get("distances") or {}).get(str(node["id"]))
        if row is None:
            raise ctx.no_data(["sys/devices/system/node/%s/distance" % name], "%s distance row" % name)
        if list(row) != list(node["distances"]):
            differ.append("%s distances %s, planned %s" % (name, " ".join(str(d) for d in row),
                                                           " ".join(str(d) for d in node["distances"])))
    return format_cpulist(cpus), row, differ


@check("guest.numa", "a guest that sees other NUMA nodes than the host nodes it runs on (flattened to one node per "
       "socket, vCPUs on the wrong node, distances lost): its memory and DMA cross nodes unseen, H2D 26-44 instead of 48 GB/s",
       "boot the guest from its plan (gpufleet.provision.guest_plan): one guest NUMA node per host node with the planned "
       "vCPUs and distances (QEMU -numa node,cpus= and -numa dist; libvirt cpu/numa/cell with distances; "
       "cloud-hypervisor --numa guest_numa_id=,cpus=,distances=)")
def _numa(ctx):
    planned = _planned(ctx, "numa")
    nodes = _guest_nodes(ctx)
    failures = []
    want = sorted(n["id"] for n in planned)
    if sorted(nodes) != want:
        failures.append("NUMA nodes %s, planned %s" % (format_cpulist(nodes), format_cpulist(want)))
    observed, expected, differ = {"cpus": {}, "distances": {}}, {"cpus": {}, "distances": {}}, []
    for node in planned:
        name = "node%d" % node["id"]
        expected["cpus"][name] = format_cpulist(node["cpus"])
        expected["distances"][name] = node.get("distances")
        if node["id"] in nodes:
            observed["cpus"][name], observed["distances"][name], found = _node_differences(ctx, node, nodes[node["id"]])
            differ += found
    for nid in sorted(set(nodes) - set(want)):
        observed["cpus"]["node%d" % nid] = format_cpulist(nodes[nid].get("cpus") or [])
    if differ:
        failures.append(_listed(differ))
    return outcome(failures, [], observed, expected)


def _sibling_groups(ctx):
    """{CPU: its sibling group (sorted tuple)} from the facts, or no data."""
    cpu = ctx.facts.get("cpu") or {}
    groups = ctx.need(cpu.get("siblings"), ["sys/devices/system/cpu/cpu*/topology/thread_siblings_list"])
    by_cpu = {}
    for group in groups:
        for member in group:
            by_cpu[member] = tuple(sorted(group))
    return by_cpu, cpu.get("online")


@check("guest.siblings", "vCPUs pinned so that the guest's hyper-thread siblings are not one host core's two threads: "
       "the guest's scheduler and a job's pinning pair threads that contend for another core",
       "pin vCPU 2k and 2k+1 to one host core's two threads as the plan lists them (host thread_siblings_list; "
       "QEMU/cloud-hypervisor threads=2, libvirt cputune/vcpupin), then reboot the guest")
def _siblings(ctx):
    planned = [tuple(sorted(g)) for g in _planned(ctx, "siblings")]
    by_cpu, online = _sibling_groups(ctx)
    failures, observed = [], []
    for group in planned:
        seen = by_cpu.get(group[0])
        if seen is None:
            if online is not None and group[0] not in online:
                failures.append("CPU %d not online (planned siblings %s)" % (group[0], format_cpulist(group)))
                continue
            raise ctx.no_data(["sys/devices/system/cpu/cpu%d/topology/thread_siblings_list" % group[0]],
                              "CPU %d sibling list" % group[0])
        observed.append(format_cpulist(seen))
        if seen != group:
            failures.append("CPU %d siblings %s, planned %s" % (group[0], format_cpulist(seen), format_cpulist(group)))
    differ = ["%d of %d planned cores differ: %s" % (len(failures), len(planned), _listed(failures))] if failures else []
    return outcome(differ, [], observed, [format_cpulist(g) for g in planned])


def _memory_failures(planned, nodes):
    """Reasons and observed MiB per node: nodes missing, nodes larger than their zone, and the
    shortfalls beyond NODE_SHORT_PERCENT when together they pass BOOT_RESERVE_MIB."""
    absent, larger, beyond, observed = [], [], [], {}
    for node in planned:
        name = "node%d" % node["id"]
        seen = nodes.get(node["id"])
        if seen is None:
            absent.append("%s (%d MiB)" % (name, node["memory_mib"]))
            continue
        got = seen["memory_kb"] / 1024.0
        observed[name] = round(got, 1)
        short = node["memory_mib"] - got
        if short < 0:
            larger.append("%s %.0f MiB of a %d MiB zone" % (name, got, node["memory_mib"]))
            continue
        over = short - node["memory_mib"] * NODE_SHORT_PERCENT / 100.0
        if over > 0:
            beyond.append((-over, "%s %.0f MiB of %d (%.1f%% short)" % (name, got, node["memory_mib"], 100.0 * short / node["memory_mib"])))
    failures = []
    if absent:
        failures.append("planned nodes absent: " + _listed(absent))
    if larger:
        failures.append("more memory than planned (another zone on the node?): " + _listed(larger))
    if sum(-o for o, _text in beyond) > BOOT_RESERVE_MIB:
        failures.append("short beyond %.0f%% per node and %d MiB of boot reservations: %s"
                        % (NODE_SHORT_PERCENT, BOOT_RESERVE_MIB, _listed([text for _o, text in sorted(beyond)])))
    return failures, observed


@check("guest.memory", "a guest NUMA node without its planned memory (one large zone on one node, zones swapped or "
       "missing): its CPUs allocate from another node, and one node's OOM killer fires while others have room",
       "one memory zone per host node as the plan sizes it, bound to that host node and to its guest node (QEMU "
       "memory-backend-file/-ram host-nodes= with -numa node,memdev=; libvirt numatune/memnode and cell memory; "
       "cloud-hypervisor --memory-zone host_numa_node= with --numa memory_zones=)")
def _memory(ctx):
    planned = [n for n in _planned(ctx, "numa") if n.get("memory_mib") is not None]
    if not planned:
        raise NotAsked("not in profile (guest.numa[].memory_mib)")
    nodes = _guest_nodes(ctx)
    for node in planned:
        seen = nodes.get(node["id"])
        if seen is not None and seen.get("memory_kb") is None:
            raise ctx.no_data(["sys/devices/system/node/node%d/meminfo" % node["id"]], "node%d MemTotal" % node["id"])
    failures, observed = _memory_failures(planned, nodes)
    expected = {"mib": dict(("node%d" % n["id"], n["memory_mib"]) for n in planned),
                "short_percent_per_node": NODE_SHORT_PERCENT, "boot_reserve_mib": BOOT_RESERVE_MIB}
    return outcome(failures, [], {"mib": observed}, expected)


def _located(ctx, bdf):
    """The device at ``bdf`` as collect.PciDevices reads it (None: no device there)."""
    if ctx.pci is None:
        raise Skip("no data: PCI devices by address not collected (validate_node reads them through its root)")
    device = ctx.pci.get(bdf)
    if device is not None and (device.get("numa_node") is None or device.get("host_bridge") is None):
        base = "sys/bus/pci/devices/%s" % bdf
        raise ctx.no_data([base, base + "/numa_node"], "%s NUMA node or PCIe path" % bdf)
    return device


def _placement(device):
    """The device as _pcie.affinity reads it: numa_node -1 (none) is unknown."""
    return dict(device, numa_node=device["numa_node"] if device["numa_node"] >= 0 else None)


# Where the plan's devices are in the guest, and how close each pair must be: QEMU and libvirt put
# them at guest_pci, a pair under one PCIe switch; cloud-hypervisor, which has no switches, at
# cloud_hypervisor_pci, a pair alone on one PCI segment (its own host bridge: PHB at best).
ADDRESSINGS = (("guest_pci", ("PIX",), "under one PCIe switch"),
               ("cloud_hypervisor_pci", ("PIX", "PXB", "PHB"), "on one PCI segment"))


def _addressing(ctx, planned):
    """(addressing, {guest_pci: the device found at its address under it}) for the addressing under
    which more planned devices are present (guest_pci on a tie)."""
    best = None
    for addressing in ADDRESSINGS:
        key = addressing[0]
        if not all(d.get(key) for d in planned):
            continue
        found = dict((d["guest_pci"], _located(ctx, d[key])) for d in planned)
        present = sum(1 for v in found.values() if v is not None)
        if best is None or present > best[0]:
            best = (present, addressing, found)
    return best[1], best[2]


@check("guest.devices", "a passed-through GPU or NIC on the wrong guest NUMA node, on none (-1), or away from its "
       "partner: the guest's NCCL sees them as far apart, GPUDirect RDMA stays off, and the H2D copy runs from remote memory",
       "place each GPU with its rail NIC as the plan says: under one PCIe switch on an expander bus bound to the guest node "
       "(QEMU pxb-pcie numa_node=; libvirt pcie-expander-bus with <node>), or on one PCI segment bound to it (cloud-hypervisor)")
def _devices(ctx):
    planned = _planned(ctx, "devices")
    (key, allowed, together), found = _addressing(ctx, planned)
    allowed = _profile.section(ctx.profile, "nic", "affinity") or list(allowed)
    address = dict((d["guest_pci"], d[key]) for d in planned)
    absent, elsewhere, apart, observed, pairs = [], [], [], {}, set()
    for dev in planned:
        label = "%s %s" % (dev.get("kind") or "device", address[dev["guest_pci"]])
        device = found[dev["guest_pci"]]
        if device is None:
            absent.append(label)
            continue
        seen = observed[address[dev["guest_pci"]]] = {"numa_node": device["numa_node"]}
        if dev.get("numa_node") is not None and device["numa_node"] != dev["numa_node"]:
            elsewhere.append("%s on %s (planned %d)" % (label, device["numa_node"], dev["numa_node"]))
        partner = found.get(dev.get("partner"))
        if partner is None or frozenset((dev["guest_pci"], dev["partner"])) in pairs:
            continue   # no partner planned, the partner is missing (said above), or this pair is done
        pairs.add(frozenset((dev["guest_pci"], dev["partner"])))
        seen.update(partner=address[dev["partner"]], affinity=_pcie.affinity(_placement(device), _placement(partner)))
        if seen["affinity"] not in allowed:
            apart.append("%s - %s %s" % (label, address[dev["partner"]], seen["affinity"]))
    failures = [what + _listed(items) for what, items in (
        ("no PCI device at the planned address: ", absent), ("on another NUMA node than planned: ", elsewhere),
        ("not %s with the partner (allowed %s): " % (together, "/".join(allowed)), apart)) if items]
    expected = {"addressing": key, "affinity": allowed, "devices": dict(
        (address[d["guest_pci"]], {"numa_node": d.get("numa_node"), "partner": address.get(d.get("partner"))}) for d in planned)}
    return outcome(failures, [], {"addressing": key, "devices": observed}, expected)
