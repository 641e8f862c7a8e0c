# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Small pure helpers shared by the guest planner and its three outputs (docs/guest-plan.md)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.provision.plugins.module_utils._node.parsers import format_cpulist

# The kernel's REMOTE_DISTANCE (include/linux/topology.h): a SLIT distance at or above it is
# another socket; below it (11, 12 between SNC/NPS nodes) the same package.
REMOTE_DISTANCE = 20

# Guest PCI buses of one GPU-NIC pair under a pxb-pcie (firmware numbers depth first, in slot
# order): root port -> +1, switch upstream port -> +2, downstream port 0 (GPU) -> +3, 1 (NIC) -> +4.
BUSES_PER_PAIR = 4


def cpulist(cpus):
    """[0, 1, 2, 5] -> "0-2,5" (the kernel's and the hypervisors' list syntax)."""
    return format_cpulist(cpus)


def spread(total, caps):
    """Share ``total`` units over bins with capacities ``caps`` as evenly as the caps allow (water
    filling; earlier bins take the remainder). Returns a list of ints, or None when it cannot fit."""
    if total > sum(caps):
        return None
    out = [0] * len(caps)
    left = total
    open_bins = [i for i, cap in enumerate(caps) if cap > 0]
    while left > 0 and open_bins:
        share, extra = divmod(left, len(open_bins))
        for rank, i in enumerate(open_bins):
            give = min(caps[i] - out[i], share + (1 if rank < extra else 0))
            out[i] += give
            left -= give
        open_bins = [i for i in open_bins if out[i] < caps[i]]
    return out


def packages(node_ids, distances):
    """Group NUMA nodes into packages from the SLIT distances (facts ``numa.distances``): nodes
    closer than REMOTE_DISTANCE share a package. Nodes without a distance row are alone."""
    groups, seen = [], set()
    for nid in node_ids:
        if nid in seen:
            continue
        row = (distances or {}).get(str(nid)) or []
        group = [other for pos, other in enumerate(node_ids)
                 if other not in seen and pos < len(row) and row[pos] < REMOTE_DISTANCE]
        group = sorted(set(group) | {nid})
        seen.update(group)
        groups.append(group)
    return groups


def pci_layout(nodes_pairs):
    """Guest PCI places for QEMU and libvirt (both build the same q35 tree).

    ``nodes_pairs``: [(guest_node, pair_count)] for the guest nodes that hold pairs, in order.
    Returns {guest_node: {"bus_nr": B, "pairs": [(gpu_bus, nic_bus), ...]}}: one pxb-pcie per
    node at bus B, and under it per pair one root port, one switch (upstream port) and two
    downstream ports, the GPU on the first and its NIC on the second.
    """
    most = max([entry[1] for entry in nodes_pairs] or [0])
    stride = 16 * -(-(BUSES_PER_PAIR * most + 1) // 16)
    layout = {}
    for index, (node, count) in enumerate(nodes_pairs):
        bus_nr = stride * (index + 1)
        pairs = [(bus_nr + BUSES_PER_PAIR * i + 3, bus_nr + BUSES_PER_PAIR * i + 4) for i in range(count)]
        layout[node] = {"bus_nr": bus_nr, "pairs": pairs}
    last = max([b for entry in layout.values() for pair in entry["pairs"] for b in pair] or [0])
    if last > 0xff:
        raise ValueError("%d pairs on %d guest NUMA nodes need guest PCI bus %d, past 255"
                         % (sum(entry[1] for entry in nodes_pairs), len(nodes_pairs), last))
    return layout


# 64-bit MMIO per passed-through GPU: an H100's BAR1 is 128 GiB and must fit naturally aligned in
# the window of its expander; twice that leaves room for the other BARs and the alignment.
HOLE64_PER_GPU_GIB = 256


def pci_hole64_gib(plan, devices):
    """Size of q35's 64-bit PCI hole for the plan's GPUs (a power of two), None when no real GPU
    is passed through (stand-ins have small BARs: QEMU's default hole holds them)."""
    gpus = sum(1 for d in plan["devices"] if d["kind"] == "gpu")
    if devices != "vfio" or not gpus:
        return None
    size = 1
    while size < gpus * HOLE64_PER_GPU_GIB:
        size *= 2
    return size


def count(number, noun):
    """count(1, "GPU") -> "1 GPU", count(2, "GPU") -> "2 GPUs" (error messages read as sentences)."""
    return "%d %s%s" % (number, noun, "" if number == 1 else "s")


def bdf(bus, slot=0, function=0, domain=0):
    return "%04x:%02x:%02x.%d" % (domain, bus, slot, function)
