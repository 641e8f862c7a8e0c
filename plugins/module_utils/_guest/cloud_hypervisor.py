# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""cloud-hypervisor from one guest plan (docs/guest-plan.md, "cloud-hypervisor"): the ``VmConfig``
its REST API takes (``PUT /api/v1/vm.create``) and the same VM as command-line arguments.

cloud-hypervisor has no PCIe switches; a PCI segment (its own host bridge) is the closest it
has: each GPU-NIC pair gets one segment, bound to the guest NUMA node of its host node, the GPU
at device 1 and its NIC at device 2. Pinning is ``cpus.affinity``; memory is one zone per host
node (``host_numa_node``, 1G hugepages) under its guest node.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.provision.plugins.module_utils._guest import topology

DEVICES = ("vfio", "stand-in")
MEMORY = ("hugepages", "ram")
MIB = 1024 * 1024


def _check(devices, memory):
    if devices not in DEVICES:
        raise ValueError("devices must be one of %s, got %r" % (", ".join(DEVICES), devices))
    if memory not in MEMORY:
        raise ValueError("memory must be one of %s, got %r" % (", ".join(MEMORY), memory))


def vm_config(plan, devices="vfio", memory="hugepages", kernel=None, cmdline=None, initramfs=None,
              gpudirect_clique=0):
    """The VmConfig dict (schema: cloud-hypervisor's OpenAPI ``VmConfig``) for ``plan``.
    ``devices="stand-in"`` puts a virtio-net device where each GPU and NIC would be (same segment
    and device number); ``gpudirect_clique`` (None: left out) tells the guest's NVIDIA driver that
    the passed-through GPUs and NICs may talk peer to peer (GPUDirect RDMA)."""
    _check(devices, memory)
    topo = plan["topology"]
    nvcpus = len(plan["vcpus"])
    config = {
        "payload": dict((k, v) for k, v in (("kernel", kernel), ("cmdline", cmdline), ("initramfs", initramfs)) if v),
        "cpus": {"boot_vcpus": nvcpus, "max_vcpus": nvcpus,
                 "topology": {"threads_per_core": topo["threads_per_core"], "cores_per_die": topo["cores_per_package"],
                              "dies_per_package": 1, "packages": topo["packages"]},
                 "affinity": [{"vcpu": v["vcpu"], "host_cpus": [v["host_cpu"]]} for v in plan["vcpus"]]},
        "memory": {"size": 0, "zones": [_zone(z, memory) for z in plan["memory_zones"]]},
        "numa": [_numa(node, plan) for node in plan["guest"]["numa"]],
        "platform": {"num_pci_segments": 1 + len(_segments(plan))},
    }
    if devices == "vfio":
        config["devices"] = [_device(d, gpudirect_clique) for d in plan["devices"]]
    elif plan["devices"]:
        config["net"] = [{"id": "%s%d" % (d["kind"], d["pair"]), "pci_segment": d["segment"],
                          "pci_device_id": d["segment_device"]} for d in plan["devices"]]
    return config


def _zone(zone, memory):
    out = {"id": zone["id"], "size": zone["size_mib"] * MIB}
    if memory == "hugepages":
        out.update({"host_numa_node": zone["host_node"], "hugepages": True,
                    "hugepage_size": zone["hugepage_size_kb"] * 1024})
    return out


def _segments(plan, guest_node=None):
    return sorted(set(d["segment"] for d in plan["devices"] if guest_node is None or d["guest_node"] == guest_node))


def _numa(node, plan):
    out = {"guest_numa_id": node["id"], "cpus": node["cpus"], "memory_zones": ["mem%d" % node["id"]]}
    if node["distances"]:
        out["distances"] = [{"destination": other, "distance": value}
                            for other, value in enumerate(node["distances"]) if other != node["id"]]
    segments = _segments(plan, node["id"])
    if segments:
        out["pci_segments"] = segments
    return out


def _device(dev, clique):
    out = {"id": "%s%d" % (dev["kind"], dev["pair"]), "path": "/sys/bus/pci/devices/%s/" % dev["host_pci"],
           "pci_segment": dev["segment"], "pci_device_id": dev["segment_device"]}
    if clique is not None:
        out["x_nv_gpudirect_clique"] = clique
    return out


def cli_args(plan, devices="vfio", memory="hugepages", kernel=None, cmdline=None, initramfs=None, gpudirect_clique=0):
    """The same VM as ``cloud-hypervisor`` arguments (built from vm_config, so they cannot differ)."""
    config = vm_config(plan, devices, memory, kernel, cmdline, initramfs, gpudirect_clique)
    cpus = config["cpus"]
    topo = cpus["topology"]
    args = ["--cpus", "boot=%d,topology=%d:%d:%d:%d,affinity=[%s]" % (
        cpus["boot_vcpus"], topo["threads_per_core"], topo["cores_per_die"], topo["dies_per_package"], topo["packages"],
        ",".join("%d@[%s]" % (a["vcpu"], topology.cpulist(a["host_cpus"])) for a in cpus["affinity"]))]
    args += ["--memory", "size=0"]
    for zone in config["memory"]["zones"]:
        args += ["--memory-zone", _options(zone, ("id", "size", "host_numa_node", "hugepages", "hugepage_size"))]
    for node in config["numa"]:
        args += ["--numa", _numa_option(node)]
    args += ["--platform", "num_pci_segments=%d" % config["platform"]["num_pci_segments"]]
    for dev in config.get("devices", []):
        args += ["--device", _options(dev, ("path", "id", "pci_segment", "pci_device_id", "x_nv_gpudirect_clique"))]
    for net in config.get("net", []):
        args += ["--net", _options(net, ("id", "pci_segment", "pci_device_id"))]
    for key in ("kernel", "cmdline", "initramfs"):
        if key in config["payload"]:
            args += ["--" + key, config["payload"][key]]
    return args


def _options(entry, keys):
    parts = []
    for key in keys:
        if key not in entry:
            continue
        value = entry[key]
        if isinstance(value, bool):
            value = "on" if value else "off"
        elif key in ("size", "hugepage_size"):
            value = "%dM" % (value // MIB)
        parts.append("%s=%s" % (key, value))
    return ",".join(parts)


def _numa_option(node):
    parts = ["guest_numa_id=%d" % node["guest_numa_id"], "cpus=[%s]" % topology.cpulist(node["cpus"])]
    if node.get("distances"):
        parts.append("distances=[%s]" % ",".join("%d@%d" % (d["destination"], d["distance"]) for d in node["distances"]))
    parts.append("memory_zones=[%s]" % ",".join(node["memory_zones"]))
    if node.get("pci_segments"):
        parts.append("pci_segments=[%s]" % ",".join(str(s) for s in node["pci_segments"]))
    return ",".join(parts)
