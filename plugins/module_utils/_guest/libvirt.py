# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A libvirt domain XML from one guest plan (docs/guest-plan.md, "libvirt").

``cputune/vcpupin`` and ``emulatorpin``, ``numatune/memnode`` (strict, one per zone),
``cpu/topology`` and ``cpu/numa`` cells with distances, 1G ``hugepages`` per guest node, and the
same q35 PCI tree as the QEMU output: a ``pcie-expander-bus`` (``busNr``, ``<node>``) per guest
node, per pair a root port, a switch upstream port and two downstream ports (GPU, NIC).
Controller indexes follow the tree depth first, so libvirt builds the QEMU tree qemu.py writes
and the guest sees the same bus numbers.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import xml.etree.ElementTree as ET

from ansible_collections.gpufleet.provision.plugins.module_utils._guest import topology

DEVICES = ("vfio", "stand-in")
MEMORY = ("hugepages", "ram")
DOMAIN_TYPES = ("kvm", "qemu")


def domain_xml(plan, devices="vfio", memory="hugepages", cpu_model="host", domain_type="kvm",
               kernel=None, initrd=None, cmdline=None):
    """The ``<domain>`` document (text) for ``plan``. ``cpu_model`` "host" is host-passthrough,
    another name a custom model (e.g. Skylake-Server for TCG). ``memory="ram"`` leaves out hugepages
    and host-node binding (a test host has neither)."""
    for name, value, allowed in (("devices", devices, DEVICES), ("memory", memory, MEMORY),
                                 ("domain_type", domain_type, DOMAIN_TYPES)):
        if value not in allowed:
            raise ValueError("%s must be one of %s, got %r" % (name, ", ".join(allowed), value))
    dom = ET.Element("domain", type=domain_type)
    _text(dom, "name", plan["name"])
    _text(dom, "memory", str(sum(z["size_mib"] for z in plan["memory_zones"])), unit="MiB")
    if memory == "hugepages":
        backing = ET.SubElement(ET.SubElement(dom, "memoryBacking"), "hugepages")
        for zone in plan["memory_zones"]:
            ET.SubElement(backing, "page", size=str(zone["hugepage_size_kb"]), unit="KiB", nodeset=str(zone["guest_node"]))
    _text(dom, "vcpu", str(len(plan["vcpus"])), placement="static")
    _cputune(dom, plan)
    if memory == "hugepages":
        _numatune(dom, plan)
    _os(dom, kernel, initrd, cmdline)
    features = ET.SubElement(dom, "features")
    ET.SubElement(features, "acpi")
    ET.SubElement(features, "apic")
    _cpu(dom, plan, cpu_model, topology.pci_hole64_gib(plan, devices))
    _devices(ET.SubElement(dom, "devices"), plan, devices)
    _indent(dom)
    return ET.tostring(dom, encoding="unicode") + "\n"


def _text(parent, tag, text, **attrs):
    element = ET.SubElement(parent, tag, **attrs)
    element.text = text
    return element


def _cputune(dom, plan):
    tune = ET.SubElement(dom, "cputune")
    for vcpu in plan["vcpus"]:
        ET.SubElement(tune, "vcpupin", vcpu=str(vcpu["vcpu"]), cpuset=str(vcpu["host_cpu"]))
    if plan["host"]["emulator_cpus"]:
        ET.SubElement(tune, "emulatorpin", cpuset=topology.cpulist(plan["host"]["emulator_cpus"]))


def _numatune(dom, plan):
    tune = ET.SubElement(dom, "numatune")
    ET.SubElement(tune, "memory", mode="strict", nodeset=topology.cpulist(plan["host"]["numa_nodes"]))
    for zone in plan["memory_zones"]:
        ET.SubElement(tune, "memnode", cellid=str(zone["guest_node"]), mode="strict", nodeset=str(zone["host_node"]))


def _os(dom, kernel, initrd, cmdline):
    os_el = ET.SubElement(dom, "os")
    _text(os_el, "type", "hvm", arch="x86_64", machine="q35")
    for tag, value in (("kernel", kernel), ("initrd", initrd), ("cmdline", cmdline)):
        if value:
            _text(os_el, tag, value)


def _cpu(dom, plan, cpu_model, hole):
    if cpu_model == "host":
        cpu = ET.SubElement(dom, "cpu", mode="host-passthrough", check="none")
    else:
        cpu = ET.SubElement(dom, "cpu", mode="custom", match="exact", check="none")
        _text(cpu, "model", cpu_model, fallback="allow")
        if hole:  # a named model has 40 physical address bits: the GPUs' BARs need the host's
            ET.SubElement(cpu, "maxphysaddr", mode="passthrough")
    topo = plan["topology"]
    ET.SubElement(cpu, "topology", sockets=str(topo["packages"]), dies="1", cores=str(topo["cores_per_package"]),
                  threads=str(topo["threads_per_core"]))
    numa = ET.SubElement(cpu, "numa")
    for node in plan["guest"]["numa"]:
        cell = ET.SubElement(numa, "cell", id=str(node["id"]), cpus=topology.cpulist(node["cpus"]),
                             memory=str(node["memory_mib"]), unit="MiB")
        if node["distances"]:
            dist = ET.SubElement(cell, "distances")
            for other, value in enumerate(node["distances"]):
                ET.SubElement(dist, "sibling", id=str(other), value=str(value))


def _pci_address(parent, bus, slot=0):
    ET.SubElement(parent, "address", type="pci", domain="0x0000", bus="0x%02x" % bus, slot="0x%02x" % slot, function="0x0")


def _controller(parent, index, model, name=None, target=None, bus=None, slot=0):
    ctl = ET.SubElement(parent, "controller", type="pci", index=str(index), model=model)
    if name:
        ET.SubElement(ctl, "model", name=name)
    if target is not None:
        node = target.pop("node", None)
        tgt = ET.SubElement(ctl, "target", **dict((k, str(v)) for k, v in target.items()))
        if node is not None:
            _text(tgt, "node", str(node))
    if bus is not None:
        _pci_address(ctl, bus, slot)
    return index


def _devices(devs, plan, devices):
    root = ET.SubElement(devs, "controller", type="pci", index="0", model="pcie-root")
    hole = topology.pci_hole64_gib(plan, devices)
    if hole:
        _text(root, "pcihole64", str(hole * 1024 * 1024), unit="KiB")
    by_node, index, chassis = {}, 0, 0
    for dev in plan["devices"]:
        by_node.setdefault(dev["guest_node"], []).append(dev)
    for pxb_slot, node in enumerate(sorted(by_node)):
        index += 1
        pxb = _controller(devs, index, "pcie-expander-bus", "pxb-pcie",
                          {"busNr": by_node[node][0]["guest_bus"], "node": node}, bus=0, slot=0x10 + pxb_slot)
        for slot, pair in enumerate(sorted(set(d["pair"] for d in by_node[node]))):
            chassis += 1
            index += 1
            rport = _controller(devs, index, "pcie-root-port", "pcie-root-port", {"chassis": chassis, "port": 0}, pxb, slot)
            index += 1
            upstream = _controller(devs, index, "pcie-switch-upstream-port", "x3130-upstream", bus=rport)
            for port, dev in enumerate(d for d in by_node[node] if d["pair"] == pair):
                chassis += 1
                index += 1
                down = _controller(devs, index, "pcie-switch-downstream-port", "xio3130-downstream",
                                   {"chassis": chassis, "port": port}, upstream, port)
                _endpoint(devs, dev, down, devices)


def _endpoint(devs, dev, bus, devices):
    if devices == "stand-in":
        rng = ET.SubElement(devs, "rng", model="virtio")
        _text(rng, "backend", "/dev/urandom", model="random")
        ET.SubElement(rng, "alias", name="ua-%s%d" % (dev["kind"], dev["pair"]))
        _pci_address(rng, bus)
        return
    host = ET.SubElement(devs, "hostdev", mode="subsystem", type="pci", managed="yes")
    domain, hbus, rest = dev["host_pci"].split(":")
    slot, function = rest.split(".")
    source = ET.SubElement(host, "source")
    ET.SubElement(source, "address", domain="0x" + domain, bus="0x" + hbus, slot="0x" + slot, function="0x" + function)
    ET.SubElement(host, "alias", name="ua-%s%d" % (dev["kind"], dev["pair"]))
    _pci_address(host, bus)


def _indent(elem, level=0):
    """ElementTree.indent is Python 3.9+; this keeps the output readable on older controllers."""
    pad = "\n" + "  " * level
    if len(elem):
        if not (elem.text or "").strip():
            elem.text = pad + "  "
        for child in elem:
            _indent(child, level + 1)
        if not (child.tail or "").strip():
            child.tail = pad
    if level and not (elem.tail or "").strip():
        elem.tail = pad
