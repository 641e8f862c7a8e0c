#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: roce_rails
short_description: RoCE v2 rail interfaces (addresses, MTU, routes) and their RDMA QoS, persistent and at run time
version_added: 0.3.0
description:
  - "Persistent: the rails' netplan file (C(/etc/netplan/60-gpufleet-roce.yaml)) or ifupdown file
    (C(/etc/network/interfaces.d/gpufleet-roce)), whichever the OS layer uses, and a boot script + oneshot
    unit (C(gpufleet-roce-qos.service), not enabled by this module) that sets the RDMA QoS at every boot."
  - "Run time (O(runtime)): C(ip) commands for what differs (MTU, link up, the planned address with other
    IPv4 addresses removed, routes), C(mlnx_qos) for trust, PFC and the DSCP's priority, sysfs for ECN on
    the RDMA priority, configfs C(rdma_cm) for RDMA-CM's RoCE TOS and GID type. No C(netplan apply) or
    C(ifup): other interfaces are never touched. Nothing needs a reboot."
  - The plan comes from the controller (filter C(gpufleet.provision.rail_addresses)); the node needs no netaddr.
author:
  - gpufleet maintainers (@gpufleet)
options:
  rails:
    description:
      - One item per RoCE interface, as the host plan gives them; C(cidr) and C(routes) unset when the
        profile plans no addresses (MTU and QoS only).
    type: list
    elements: dict
    default: []
    suboptions:
      interface:
        description: The netdev.
        type: str
        required: true
      cidr:
        description: The planned address with its prefix length (C(10.64.0.2/20)).
        type: str
      mtu:
        description: The MTU.
        type: int
      routes:
        description: Routes through the rail's gateway (C(to), C(via)).
        type: list
        elements: dict
      rail:
        description: The rail index (for messages).
        type: int
      address:
        description: The plan's address without prefix (informational; O(rails[].cidr) is what is set).
        type: str
      prefix:
        description: The plan's prefix length (informational).
        type: int
      subnet:
        description: The rail's subnet (informational).
        type: str
      gateway:
        description: The rail's gateway (informational; routes name it).
        type: str
  interfaces:
    description: Netdevs whose QoS is set when O(rails) is empty (no addresses or MTU planned).
    type: list
    elements: str
    default: []
  style:
    description: C(netplan), C(ifupdown), or C(auto) (netplan where C(/etc/netplan) exists, else ifupdown).
    type: str
    choices: [auto, netplan, ifupdown]
    default: auto
  qos:
    description:
      - The RDMA traffic class (desired area C(roce_qos) - trust, dscp, pfc_priority, pfc, ecn, tos); unset leaves QoS alone.
    type: dict
  gid_type:
    description: RDMA-CM's default GID type (C(default_roce_mode)); unset leaves it alone.
    type: str
    choices: ["RoCE v2", "IB/RoCE v1"]
  runtime:
    description: Also make the state true now, not only at the next boot.
    type: bool
    default: true
  root:
    description: Root of the node's OS files.
    type: path
    default: /
  hardware_root:
    description: Root of sysfs and configfs (a lab twin's rendered view).
    type: path
    default: /
  ip:
    description: The iproute2 C(ip) program.
    type: str
    default: ip
  mlnx_qos:
    description: The C(mlnx_qos) program (MLNX_OFED / DOCA C(mlnx-tools)).
    type: str
    default: mlnx_qos
attributes:
  check_mode:
    support: full
    description: Reads everything and predicts every file and command; runs nothing that changes the node.
  diff_mode:
    support: full
    description: Files before and after, and one line per run-time setting.
  idempotent:
    support: full
    description: A configured node gives C(changed=false).
"""

EXAMPLES = r"""
- name: Rail 0 at 10.64.0.2/20, MTU 9000, lossless RDMA on priority 3
  gpufleet.provision.roce_rails:
    rails:
      - {interface: ens1f0np0, cidr: 10.64.0.2/20, mtu: 9000, routes: []}
    qos: {trust: dscp, dscp: 26, pfc_priority: 3, pfc: "0,0,0,1,0,0,0,0", ecn: true, tos: 106}
    gid_type: RoCE v2
"""

RETURN = r"""
files:
  description: Files written or removed (relative to O(root)).
  returned: always
  type: list
  elements: str
runtime_changes:
  description: Run-time settings changed (or that would be), one line each.
  returned: always
  type: list
  elements: str
  sample: ["ens1f0np0 mtu: 1500 -> 9000", "ens1f0np0 trust: pcp -> dscp", "ens1f0np0 pfc: 0,0,0,0,0,0,0,0 -> 0,0,0,1,0,0,0,0"]
unit:
  description: The QoS boot unit to enable, null when no QoS is managed.
  returned: always
  type: str
reboot_required:
  description: Always false.
  returned: always
  type: bool
reboot_reasons:
  description: Always empty.
  returned: always
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.provision.plugins.module_utils._roce import rails as _rails


def main():
    module = AnsibleModule(
        argument_spec=dict(
            rails=dict(type="list", elements="dict", default=[], options=dict(
                interface=dict(type="str", required=True), cidr=dict(type="str"), mtu=dict(type="int"),
                routes=dict(type="list", elements="dict"), rail=dict(type="int"), address=dict(type="str"),
                prefix=dict(type="int"), subnet=dict(type="str"), gateway=dict(type="str"))),
            interfaces=dict(type="list", elements="str", default=[]),
            style=dict(type="str", default="auto", choices=["auto", "netplan", "ifupdown"]),
            qos=dict(type="dict"),
            gid_type=dict(type="str", choices=["RoCE v2", "IB/RoCE v1"]),
            runtime=dict(type="bool", default=True),
            root=dict(type="path", default="/"),
            hardware_root=dict(type="path", default="/"),
            ip=dict(type="str", default="ip"),
            mlnx_qos=dict(type="str", default="mlnx_qos"),
        ),
        supports_check_mode=True,
    )
    params = dict(module.params)
    params["ip"] = module.get_bin_path(params["ip"], required=False) or params["ip"]
    params["mlnx_qos"] = module.get_bin_path(params["mlnx_qos"], required=False, opt_dirs=["/usr/sbin"]) or params["mlnx_qos"]

    def write(path, text, mode):
        folder = os.path.dirname(path)
        if not os.path.isdir(folder):
            os.makedirs(folder, 0o755)
        tmp = path + ".gpufleet-new"
        with open(tmp, "w") as handle:
            handle.write(text)
        module.atomic_move(tmp, path)
        os.chmod(path, mode)   # atomic_move keeps an existing file's mode

    try:
        result = _rails.converge(params, module.run_command, write, check=module.check_mode)
    except _rails.RailsError as exc:
        module.fail_json(msg="roce_rails: %s" % exc)
    diff = result.pop("diff")
    for warning in result.pop("warnings"):
        module.warn(warning)
    if module._diff:
        result["diff"] = diff
    module.exit_json(reboot_required=False, reboot_reasons=[], **result)


if __name__ == "__main__":
    main()
