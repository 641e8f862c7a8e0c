# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""QEMU arguments from one guest plan (docs/guest-plan.md, "QEMU").

q35; one memory backend per zone bound to its host node; ``-numa node`` per guest node with its
vCPUs and zone, ``-numa dist`` from the host's distances; per guest node with pairs one
``pxb-pcie`` (``numa_node=``), and per pair a root port, a switch (x3130 upstream port) and two
downstream ports holding the GPU and its NIC. QEMU has no option that pins a vCPU thread:
``pin_script`` pins them by thread name (``-name ...,debug-threads=on``: "CPU 3/KVM").
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.provision.plugins.module_utils._guest import topology

DEVICES = ("vfio", "stand-in")
MEMORY = ("hugepages", "ram")
# Emulated PCIe endpoint placed where a GPU or NIC would go when devices="stand-in": needs no
# backend and no host device, and shows in the guest's sysfs with its numa_node like the real one.
STAND_IN = "virtio-rng-pci"


def qemu_args(plan, devices="vfio", memory="hugepages", cpu_model="host"):
    """The QEMU command line (without the binary, kernel and disks) that gives the guest ``plan``."""
    if devices not in DEVICES:
        raise ValueError("devices must be one of %s, got %r" % (", ".join(DEVICES), devices))
    if memory not in MEMORY:
        raise ValueError("memory must be one of %s, got %r" % (", ".join(MEMORY), memory))
    topo = plan["topology"]
    total = sum(z["size_mib"] for z in plan["memory_zones"])
    hole = topology.pci_hole64_gib(plan, devices)
    if hole and cpu_model != "host":
        # a named model has 40 physical address bits (1 TiB): the GPUs' BARs need the host's
        cpu_model += ",host-phys-bits=on"
    args = ["-name", "%s,debug-threads=on" % plan["name"], "-machine", "q35", "-cpu", cpu_model,
            "-smp", "%d,sockets=%d,cores=%d,threads=%d" % (len(plan["vcpus"]), topo["packages"],
                                                           topo["cores_per_package"], topo["threads_per_core"]),
            "-m", "%dM" % total]
    for zone in plan["memory_zones"]:
        args += ["-object", _backend(zone, memory)]
    for node in plan["guest"]["numa"]:
        args += ["-numa", "node,nodeid=%d,cpus=%s,memdev=%s" % (node["id"], _range(node["cpus"]), "mem%d" % node["id"])]
    args += _distances(plan)
    if hole:
        args += ["-global", "q35-pcihost.pci-hole64-size=%dG" % hole]
    args += _pci(plan, devices)
    return args


def _range(cpus):
    # -numa node takes one range per cpus=; a guest node's vCPUs are always one range.
    text = topology.cpulist(cpus)
    if "," in text:
        raise ValueError("guest node vCPUs %s are not one range" % text)
    return text


def _backend(zone, memory):
    size = "id=%s,size=%dM" % (zone["id"], zone["size_mib"])
    if memory == "ram":  # the test host has neither the pages nor the host node
        return "memory-backend-ram," + size
    return ("memory-backend-memfd,%s,hugetlb=on,hugetlbsize=%dK,prealloc=on,host-nodes=%d,policy=bind"
            % (size, zone["hugepage_size_kb"], zone["host_node"]))


def _distances(plan):
    args = []
    for node in plan["guest"]["numa"]:
        for other, value in enumerate(node["distances"] or []):
            if other != node["id"]:
                args += ["-numa", "dist,src=%d,dst=%d,val=%d" % (node["id"], other, value)]
    return args


def _pci(plan, devices):
    args, chassis = [], 0
    by_node = {}
    for dev in plan["devices"]:
        by_node.setdefault(dev["guest_node"], []).append(dev)
    for node in sorted(by_node):
        pxb = "pxb%d" % node
        args += ["-device", "pxb-pcie,id=%s,bus_nr=%d,numa_node=%d,bus=pcie.0" % (pxb, by_node[node][0]["guest_bus"], node)]
        pairs = sorted(set(d["pair"] for d in by_node[node]))
        for slot, pair in enumerate(pairs):
            chassis += 1
            rport, up = "rp%d" % pair, "sw%d" % pair
            args += ["-device", "pcie-root-port,id=%s,bus=%s,chassis=%d,addr=%x.0" % (rport, pxb, chassis, slot),
                     "-device", "x3130-upstream,id=%s,bus=%s" % (up, rport)]
            for port, dev in enumerate(d for d in by_node[node] if d["pair"] == pair):
                chassis += 1
                down = "%s%d-port" % (dev["kind"], pair)
                args += ["-device", "xio3130-downstream,id=%s,bus=%s,chassis=%d,slot=0,addr=%x.0" % (down, up, chassis, port),
                         "-device", _endpoint(dev, down, devices)]
    return args


def _endpoint(dev, bus, devices):
    ident = "%s%d" % (dev["kind"], dev["pair"])
    if devices == "stand-in":
        return "%s,id=%s,bus=%s,addr=0.0" % (STAND_IN, ident, bus)
    return "vfio-pci,host=%s,id=%s,bus=%s,addr=0.0" % (dev["host_pci"], ident, bus)


def pin_script(plan, pid="$1"):
    """POSIX sh that pins each vCPU thread of the running QEMU ``pid`` to its host CPU and the
    other threads (emulator, I/O) to the plan's emulator CPUs. QEMU names vCPU threads
    "CPU <n>/KVM" (or "/TCG") when started with debug-threads=on, which qemu_args asks for."""
    lines = ["#!/bin/sh", "# vCPU pinning of guest %s (gpufleet guest plan)" % plan["name"], "pid=%s" % pid,
             "for task in /proc/$pid/task/*; do", "  tid=${task##*/}", "  name=$(cat $task/comm)",
             "  case \"$name\" in"]
    for vcpu in plan["vcpus"]:
        lines.append("    'CPU %d/'*) taskset -pc %d $tid >/dev/null ;;" % (vcpu["vcpu"], vcpu["host_cpu"]))
    emulator = topology.cpulist(plan["host"]["emulator_cpus"])
    lines.append("    *) %s ;;" % ("taskset -pc %s $tid >/dev/null" % emulator if emulator else ":"))
    lines += ["  esac", "done"]
    return "\n".join(lines) + "\n"
