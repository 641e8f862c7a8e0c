#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: guest_plan
short_description: Plan GPU guests that match the host's silicon, for cloud-hypervisor, libvirt and QEMU
version_added: 0.3.0
description:
  - From the node's facts (C(ansible_facts.gpufleet), given in O(facts) or read through O(root)) and
    guest requests, returns one guest plan per request and its renderings for QEMU, libvirt and
    cloud-hypervisor. The plan schema is in C(docs/guest-plan.md) of the collection.
  - Guest NUMA nodes are the host's NUMA nodes the guest is given (SNC/NPS nodes never merged); vCPUs
    are pinned so that the guest's hyper-thread siblings are one host core's threads; one memory
    zone per host node, bound to it and sized from its free hugepages; each GPU passed through with its
    rail NIC under one emulated PCIe switch (one PCI segment on cloud-hypervisor) on the guest node of
    their host node; host CPUs kept for the host are named.
  - Several requests are placed together, largest first, each in the smallest group (a NUMA node, a
    package, the host) with enough free GPU-NIC pairs; guests never share a core, a memory zone or a
    pair. A request that cannot be placed fails the module with a message naming what is short, and
    no plan is returned.
  - Changes nothing.
author:
  - gpufleet maintainers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.provision.hardware_root
  - gpufleet.provision.hardware_root.READ_ONLY
options:
  facts:
    description:
      - The node's C(ansible_facts.gpufleet) (for example from M(gpufleet.provision.node_facts) or a gate
        report). When not given, the facts are read through O(root) on the host the module runs on.
    type: dict
  requests:
    description:
      - The guests to place, in the order their plans are returned.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: Guest name (unique; letters, digits, C(.), C(_) and C(-), at most 64 - it names the QEMU process, the pin script and the libvirt domain).
        type: str
        required: true
      gpus:
        description:
          - GPU-NIC pairs to pass through. V(0) is a guest without GPUs, on a free NUMA node without GPUs
            (the cores of GPU nodes stay with their pairs); there is no "all GPUs" shorthand, ask for the count.
        type: int
        default: 0
      memory_gib:
        description: Memory cap in GiB, spread over the guest's zones; default all free hugepages of its slots.
        type: int
      vcpus:
        description:
          - vCPUs (a multiple of the threads per core). Fewer than the guest's cores give caps it; more add
            whole NUMA nodes without GPUs.
        type: int
  reserve_host_cpus:
    description:
      - Host CPUs kept for the host (emulator and I/O threads, the host's daemons) on every NUMA node, named
        in each plan. A count of cores per node (the last cores of each node), or a list of host CPUs
        (their whole cores are kept); a CPU the host does not have fails the module, naming it.
    type: raw
    default: 1
  hugepage_size_kb:
    description: Page size of the memory zones, in kB, whose free pages per node size them.
    type: int
    default: 1048576
  affinities:
    description: Affinities (as C(nvidia-smi topo -m) names them) that count as a NIC on the GPU's PCIe switch.
    type: list
    elements: str
    choices: [PIX, PXB, PHB, NODE, SYS]
    default: [PIX, PXB]
  format:
    description: Renderings returned per guest besides the plan.
    type: list
    elements: str
    choices: [qemu, libvirt, cloud_hypervisor]
    default: [qemu, libvirt, cloud_hypervisor]
  devices:
    description:
      - C(vfio) passes the host's GPUs and NICs through; C(stand-in) puts an emulated device at the same guest
        place (to boot a plan on a machine without the hardware).
    type: str
    choices: [vfio, stand-in]
    default: vfio
  memory:
    description: C(hugepages) backs each zone with the host node's hugepages; C(ram) with ordinary memory (tests).
    type: str
    choices: [hugepages, ram]
    default: hugepages
  cpu_model:
    description: Guest CPU model for QEMU and libvirt; C(host) passes the host CPU through.
    type: str
    default: host
  kernel:
    description: Guest kernel for the libvirt and cloud-hypervisor renderings (QEMU's C(-kernel) is left to the caller).
    type: path
  initramfs:
    description: Guest initramfs, as O(kernel).
    type: path
  cmdline:
    description: Guest kernel command line, as O(kernel).
    type: str
notes:
  - Planning the reference node's 8-GPU guest takes about a millisecond in process (benchmarks/guest_plan_bench.py).
  - QEMU has no option that pins vCPU threads; C(qemu_pin_script) pins them by thread name once QEMU runs.
seealso:
  - module: gpufleet.provision.node_facts
"""

EXAMPLES = r"""
- name: Read the node
  gpufleet.provision.node_facts:

- name: Plan one 8-GPU guest and two 2-GPU guests
  gpufleet.provision.guest_plan:
    facts: "{{ ansible_facts.gpufleet }}"
    requests:
      - {name: train0, gpus: 4}
      - {name: dev0, gpus: 2, memory_gib: 64}
      - {name: dev1, gpus: 2}
    format: [libvirt]
  register: guests

- name: Define the first guest in libvirt
  community.libvirt.virt:
    command: define
    xml: "{{ guests.guests[0].libvirt_xml }}"
"""

RETURN = r"""
plans:
  description: One plan per request, in request order (schema in C(docs/guest-plan.md)).
  returned: success
  type: list
  elements: dict
  sample:
    - schema: 1
      name: train0
      host: {numa_nodes: [0, 1, 2, 3], reserved_cpus: [12, 25, 38, 51, 116, 129, 142, 155],
             emulator_cpus: [12, 25, 38, 51, 116, 129, 142, 155]}
      topology: {packages: 1, cores_per_package: 48, threads_per_core: 2}
      vcpus: [{vcpu: 0, host_cpu: 0, guest_node: 0}, {vcpu: 1, host_cpu: 104, guest_node: 0}]
guests:
  description: Per request (same order as RV(plans)), its name and the renderings asked in O(format).
  returned: success
  type: list
  elements: dict
  contains:
    name:
      description: The guest's name.
      type: str
    qemu_args:
      description: QEMU arguments (no binary, kernel or disks).
      type: list
      elements: str
    qemu_pin_script:
      description: POSIX shell script pinning a running QEMU's vCPU threads (argument - its pid).
      type: str
    libvirt_xml:
      description: The libvirt domain XML.
      type: str
    vm_config:
      description: cloud-hypervisor's C(VmConfig) (the body of C(PUT /api/v1/vm.create)).
      type: dict
    cloud_hypervisor_args:
      description: The same VM as C(cloud-hypervisor) arguments.
      type: list
      elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.gpufleet.provision.plugins.module_utils._node.facts import collect
from ansible_collections.gpufleet.provision.plugins.module_utils._guest.outputs import render
from ansible_collections.gpufleet.provision.plugins.module_utils._guest.plan import GuestPlanError, plan_guests

REQUEST_SPEC = dict(
    name=dict(type="str", required=True),
    gpus=dict(type="int", default=0),
    memory_gib=dict(type="int"),
    vcpus=dict(type="int"),
)


def _number(value):
    """A whole number: an int or a string of digits (from -a key=value); ValueError otherwise
    (2.7 is not CPU 2, true is not 1, -1 is no CPU)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and value.strip().isdecimal():
        return int(value.strip())
    raise ValueError(value)


def _reserve(value):
    """1, "1" (from -a key=value) -> 1; [12, "116"] or "12,116" -> [12, 116]."""
    if isinstance(value, str) and "," in value:
        value = [v for v in value.split(",") if v.strip()]
    if isinstance(value, list):
        return [_number(v) for v in value]
    return _number(value)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            root=dict(type="path", default="/"),
            facts=dict(type="dict"),
            requests=dict(type="list", elements="dict", required=True, options=REQUEST_SPEC),
            reserve_host_cpus=dict(type="raw", default=1),
            hugepage_size_kb=dict(type="int", default=1048576),
            affinities=dict(type="list", elements="str", choices=["PIX", "PXB", "PHB", "NODE", "SYS"], default=["PIX", "PXB"]),
            format=dict(type="list", elements="str", choices=["qemu", "libvirt", "cloud_hypervisor"],
                        default=["qemu", "libvirt", "cloud_hypervisor"]),
            devices=dict(type="str", choices=["vfio", "stand-in"], default="vfio"),
            memory=dict(type="str", choices=["hugepages", "ram"], default="hugepages"),
            cpu_model=dict(type="str", default="host"),
            kernel=dict(type="path"),
            initramfs=dict(type="path"),
            cmdline=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    facts = p["facts"]
    if facts is None:
        if not os.path.isdir(p["root"]):
            module.fail_json(msg="root %s: not a folder (gpufleet_hardware_root points nowhere?)" % p["root"])
        facts, warnings = collect(p["root"])
        for warning in warnings:
            module.warn(warning)
    try:
        reserve = _reserve(p["reserve_host_cpus"])
    except ValueError:
        module.fail_json(msg="reserve_host_cpus: a count of cores per NUMA node or a list of host CPUs, got %r"
                         % (p["reserve_host_cpus"],))
    options = {"reserve_host_cpus": reserve, "hugepage_size_kb": p["hugepage_size_kb"], "affinities": p["affinities"]}
    requests = [dict((k, v) for k, v in r.items() if v is not None) for r in p["requests"]]
    try:
        plans = plan_guests(facts, requests, options)
        guests = [render(plan, p["format"], p["devices"], p["memory"], p["cpu_model"], p["kernel"], p["initramfs"],
                         p["cmdline"]) for plan in plans]
        for guest in guests:
            del guest["plan"]  # already in plans: returned once
    except (GuestPlanError, ValueError) as exc:
        module.fail_json(msg=to_native(exc))
    module.exit_json(changed=False, plans=plans, guests=guests)


if __name__ == "__main__":
    main()
