"""The plan's ``guest`` section against what a booted guest shows of itself (lab.guest's
GuestDump.topology()): shared by the QEMU and the libvirt boot tests."""

# memory a guest node reports (MemTotal) against its zone: the kernel keeps some for itself (its
# image, page tables, 64 MiB of swiotlb: about 130 MiB of a 2 GiB node 0 here); a zone of another
# size is off by its whole size (the smallest zone is 1 GiB)
MEMORY_KEPT_BY_KERNEL_MIB = 256


def differences(plan, seen):
    """What the booted guest (``seen``: lab.guest GuestDump.topology()) shows differently from the
    plan's ``guest`` section; [] when it matches."""
    want, out = plan["guest"], []
    if sorted(seen["nodes"]) != [n["id"] for n in want["numa"]]:
        out.append("NUMA nodes: planned %s, guest has %s" % ([n["id"] for n in want["numa"]], sorted(seen["nodes"])))
    for node in want["numa"]:
        got = seen["nodes"].get(node["id"])
        if got is None:
            continue
        if got["cpus"] != node["cpus"]:
            out.append("node %d CPUs: planned %s, guest has %s" % (node["id"], node["cpus"], got["cpus"]))
        low = (node["memory_mib"] - MEMORY_KEPT_BY_KERNEL_MIB) * 1024
        if not low <= (got["memory_kb"] or 0) <= node["memory_mib"] * 1024:
            out.append("node %d memory: planned %d MiB, guest has %s kB" % (node["id"], node["memory_mib"], got["memory_kb"]))
    if seen["siblings"] != sorted(want["siblings"]):
        out.append("HT siblings: planned %s, guest has %s" % (sorted(want["siblings"]), seen["siblings"]))
    return out + _device_differences(want["devices"], seen["pci"])


def _device_differences(devices, pci):
    out = []
    for dev in devices:
        got, partner = pci.get(dev["guest_pci"]), pci.get(dev["partner"])
        if got is None:
            out.append("%s %s: not in the guest" % (dev["kind"], dev["guest_pci"]))
            continue
        if got["numa_node"] != dev["numa_node"]:
            out.append("%s %s: planned on node %d, guest says %s" % (dev["kind"], dev["guest_pci"], dev["numa_node"], got["numa_node"]))
        if partner is None or not beside(got, partner):
            out.append("%s %s: not beside its partner %s (%s / %s)" % (
                dev["kind"], dev["guest_pci"], dev["partner"], got["path"], partner and partner["path"]))
    return out


def beside(a, b):
    """Two endpoints on two downstream ports of one PCIe switch: same host bridge, same bridges
    down to the switch's upstream port, different downstream ports (nvidia-smi's PIX)."""
    return (a["host_bridge"] == b["host_bridge"] and len(a["path"]) >= 2
            and a["path"][:-1] == b["path"][:-1] and a["path"][-1] != b["path"][-1])
