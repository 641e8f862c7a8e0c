# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PCIe topology: paths, GPU-NIC affinity, pairing, and the ACS capability from config space.

Pure functions over data; the collector feeds them what it read from sysfs.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import struct

from ansible_collections.gpufleet.provision.plugins.module_utils._node.parsers import natural_key

BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
HOST_BRIDGE = re.compile(r"^pci[0-9a-f]{4}:[0-9a-f]{2}$")

# nvidia-smi topo -m names, best first.
AFFINITY_ORDER = ("PIX", "PXB", "PHB", "NODE", "SYS")

# ACS Control register bits (PCIe base spec 7.7.8.3), named as lspci prints them in ACSCtl.
ACS_BITS = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans")
ACS_CAP_ID = 0x000D


def split_device_path(resolved):
    """Resolved sysfs path of a PCI device -> (host_bridge, [bridges root port first], bdf).

    ``sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0`` ->
    ("pci0000:15", ["0000:15:01.0", "0000:16:00.0", "0000:17:00.0"], "0000:18:00.0").
    Components that are not PCI addresses (ACPI or virtio nodes in guests) are ignored.
    """
    parts = resolved.strip("/").split("/")
    host = None
    chain = []
    for part in parts:
        if HOST_BRIDGE.match(part):
            host = part
            chain = []
        elif BDF.match(part):
            chain.append(part)
    if not chain:
        raise ValueError("no PCI address in %r" % resolved)
    return host, chain[:-1], chain[-1]


def affinity(a, b):
    """Affinity of two devices, each {host_bridge, pcie_path, numa_node}: PIX|PXB|PHB|NODE|SYS.

    PIX: at most one bridge below the deepest common bridge on each side (one PCIe switch).
    PXB: common bridges, but more of them to cross. PHB: same host bridge, nothing else in common.
    NODE: different host bridges on the same NUMA node. SYS: different or unknown NUMA nodes.
    """
    if a.get("host_bridge") is None or a.get("host_bridge") != b.get("host_bridge"):
        na, nb = a.get("numa_node"), b.get("numa_node")
        return "NODE" if na is not None and na == nb else "SYS"
    pa, pb = a.get("pcie_path") or [], b.get("pcie_path") or []
    common = 0
    for x, y in zip(pa, pb):
        if x != y:
            break
        common += 1
    if common == 0:
        return "PHB"
    if len(pa) - common <= 1 and len(pb) - common <= 1:
        return "PIX"
    return "PXB"


def pair_gpus(gpus, nics):
    """One pair per GPU (PCI order): {gpu, nic, affinity, rail}. Returns (pairs, {nic name: rail}).

    Each GPU takes the NIC with the best affinity; among equals, one that no earlier GPU took,
    then the fastest port (rail NICs are the fast ones: a cloud guest's accelerated-networking NIC
    is as "near" as its IB NICs), then the one sharing the deepest bridge, then name order.
    rail = index of the GPU.
    """
    pairs = []
    nic_rail = {}
    ordered_gpus = sorted(gpus, key=lambda g: g["pci"])
    for rail, gpu in enumerate(ordered_gpus):
        best = None
        for nic in nics:
            aff = affinity(gpu, nic)
            depth = _common_depth(gpu, nic)
            rate = max([p.get("rate_gbps") or 0 for p in nic.get("ports") or []] or [0])
            key = (AFFINITY_ORDER.index(aff), nic["name"] in nic_rail, -rate, -depth, natural_key(nic["name"]))
            if best is None or key < best[0]:
                best = (key, nic, aff)
        if best is None:
            pairs.append({"gpu": gpu["pci"], "nic": None, "affinity": None, "rail": rail})
            continue
        nic, aff = best[1], best[2]
        nic_rail.setdefault(nic["name"], rail)
        pairs.append({"gpu": gpu["pci"], "nic": nic["name"], "affinity": aff, "rail": rail})
    return pairs, nic_rail


def path_between(a, b):
    """Bridges between two devices: each side below the deepest common bridge, plus that bridge
    (the switch that routes their peer traffic). No common bridge: both paths in full."""
    pa, pb = a.get("pcie_path") or [], b.get("pcie_path") or []
    common = _common_depth(a, b)
    out = []
    for bdf in (pa[common - 1:] if common else pa) + pb[common:]:
        if bdf not in out:
            out.append(bdf)
    return out


def _common_depth(a, b):
    if a.get("host_bridge") != b.get("host_bridge"):
        return 0
    depth = 0
    for x, y in zip(a.get("pcie_path") or [], b.get("pcie_path") or []):
        if x != y:
            break
        depth += 1
    return depth


def parse_acs(config):
    """ACS control of a PCI function from its config space bytes (as ``lspci -vvv`` ACSCtl).

    Walks the extended capability list at 0x100: each header is cap id (16 bits), version (4),
    next offset (12). The ACS capability (id 0x000D) has its control register at +6.
    Returns {"present": bool, "ctl": {bit: bool} | None}. ValueError when the extended space is not
    there (256-byte config: not root, or not a PCIe function) or the list loops (corrupt data).
    """
    if config is None or len(config) < 0x104:
        raise ValueError("config space has %d bytes: no PCIe extended capabilities (reading them needs root)"
                         % (0 if config is None else len(config)))
    offset, seen = 0x100, set()
    while offset and offset + 8 <= len(config):
        if offset in seen:
            # A chain that comes back on itself is corrupt config space, not "no ACS" (which
            # passes on bare metal): the reader must say it could not tell.
            raise ValueError("extended capability list loops at 0x%03x" % offset)
        seen.add(offset)
        header = struct.unpack_from("<I", config, offset)[0]
        if header in (0, 0xFFFFFFFF):
            break
        cap_id, nxt = header & 0xFFFF, (header >> 20) & 0xFFC
        if cap_id == ACS_CAP_ID:
            ctl = struct.unpack_from("<H", config, offset + 6)[0]
            return {"present": True, "ctl": dict((name, bool(ctl >> i & 1)) for i, name in enumerate(ACS_BITS))}
        if nxt and nxt < 0x100:
            break
        offset = nxt
    return {"present": False, "ctl": None}
