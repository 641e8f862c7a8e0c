#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: node_facts
short_description: Read a GPU server's hardware and OS state into C(ansible_facts.gpufleet)
version_added: 0.1.0
description:
  - Reads CPU topology (sockets, cores, hyper-threading siblings), NUMA layout and hugepage pools,
    NVIDIA GPUs and NVSwitches with their PCIe links and paths, RDMA NICs and their ports, the
    GPU-to-NIC pairing with its affinity (PIX/PXB/PHB/NODE/SYS) and rail index, the ACS control of
    every bridge on those paths, kernel release and command line, THP, NUMA balancing, CPU governors,
    IOMMU, the NVIDIA driver version, NVMe firmware, C(/etc/os-release) and the mount table.
  - Everything is read through O(root), so the same module reads a live host, a captured tree and a
    lab twin's rendered hardware view.
  - A file that is missing, unreadable or malformed gives C(null) for that value and one warning
    naming the path; the module never fails on content.
  - The schema is documented in C(docs/facts.md) of the collection.
author:
  - gpufleet maintainers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.provision.hardware_root
  - gpufleet.provision.hardware_root.READ_ONLY
notes:
  - Reading PCIe extended capabilities (ACS) from C(config) needs root; without it the bridges' C(acs)
    is C(null) with a warning.
"""

EXAMPLES = r"""
- name: Read the node
  gpufleet.provision.node_facts:

- name: Read a lab twin's simulated hardware
  gpufleet.provision.node_facts:
    root: "{{ gpufleet_hardware_root | default('/') }}"

- name: Show GPU-NIC pairs
  ansible.builtin.debug:
    msg: "{{ ansible_facts.gpufleet.pairs | map(attribute='affinity') | list }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts set on the host.
  returned: always
  type: dict
  contains:
    gpufleet:
      description:
        - The node's state. Keys C(cpu), C(numa), C(gpus), C(nvswitches), C(nics), C(netdevs), C(pairs), C(pcie),
          C(kernel), C(nvidia), C(nvme), C(os), C(mounts), C(problems), C(warnings), C(schema), C(root).
        - Ethernet (RoCE) ports of C(nics) carry their GID table (C(gids)); C(netdevs) holds the MTU, speed, state
          and IPv4 addresses of the RDMA NICs' netdevs (docs/facts.md).
      returned: always
      type: dict
      sample:
        schema: 1
        cpu: {sockets: 2, cores: 104, threads_per_core: 2, smt_active: true, siblings: [[0, 104], [1, 105]]}
        pairs: [{gpu: "0000:18:00.0", nic: mlx5_0, affinity: PIX, rail: 0}]
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.provision.plugins.module_utils._node.facts import collect


def main():
    module = AnsibleModule(
        argument_spec=dict(root=dict(type="path", default="/")),
        supports_check_mode=True,
    )
    root = module.params["root"]
    if not os.path.isdir(root):
        module.fail_json(msg="root %s: not a folder (gpufleet_hardware_root points nowhere?)" % root)
    facts, warnings = collect(root)
    for warning in warnings:
        module.warn(warning)
    module.exit_json(changed=False, ansible_facts={"gpufleet": facts})


if __name__ == "__main__":
    main()
