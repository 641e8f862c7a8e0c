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
  - Every rail (interface name of at most 15 bytes, IPv4 address with prefix, MTU, routes) and the QoS
    (every key of the desired area C(roce_qos), in range) is checked before anything is read, written
    or run, and an error names the rail, interface, key and value (check mode too). The netplan file is
    read back as YAML before it replaces the old one; a file the module owns that is no regular file is refused.
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
        description: The MTU, a whole number from 68 to 9978.
        type: raw
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
    description: Reads the node (C(ip -j), C(mlnx_qos -i), sysfs, configfs) and lists what it would write or run, running nothing that changes it.
    support: full
  diff_mode:
    description: The netplan or ifupdown file and the QoS boot files as they are and as they would be, plus the list of run-time changes.
    support: full
  idempotent:
    description: On rails already as planned nothing is written or run - C(changed=false).
    support: full
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
  description: False - addresses, MTU, routes and QoS all take effect when set (docs/roles.md, the reboot contract).
  type: bool
  returned: always
reboot_reasons:
  description: Empty, for the same reason.
  type: list
  elements: str
  returned: always
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.provision.plugins.module_utils._node.fs import WriteError, atomic_write, unwritable
from ansible_collections.gpufleet.provision.plugins.module_utils._os.state import path_problem
from ansible_collections.gpufleet.provision.plugins.module_utils._roce import netconf as _netconf
from ansible_collections.gpufleet.provision.plugins.module_utils._roce import qos as _qos
from ansible_collections.gpufleet.provision.plugins.module_utils._roce import rails as _rails


def main():
    module = AnsibleModule(
        argument_spec=dict(
            rails=dict(type="list", elements="dict", default=[], options=dict(
                interface=dict(type="str", required=True), cidr=dict(type="str"), mtu=dict(type="raw"),
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
    problem = path_problem(params, ("root", "hardware_root", "ip", "mlnx_qos"))
    if problem:
        module.fail_json(msg="roce_rails: %s" % problem)
    try:   # everything that reaches a file, a path or a command, before anything is read or run
        params["rails"] = _netconf.check_rails(params["rails"])
        params["interfaces"] = [_netconf.check_interface(n, "interfaces: interface") for n in params["interfaces"]]
        params["qos"] = _qos.check_qos(params["qos"])
    except (_netconf.NetconfError, _qos.QosError) as exc:
        module.fail_json(msg="roce_rails: %s" % exc)
    needed = [("ip", "iproute2", params["rails"] and params["runtime"]),
              ("mlnx_qos", "MLNX_OFED / DOCA mlnx-tools", params["qos"] is not None and params["runtime"])]
    for name, source, used in needed:
        found = module.get_bin_path(params[name], required=False, opt_dirs=["/usr/sbin", "/sbin"])
        if used and not found:
            module.fail_json(msg="roce_rails: %s not found (%s): it sets the RoCE interfaces at run time" % (params[name], source))
        params[name] = found or params[name]
    for rel in (_netconf.NETPLAN_FILE, _netconf.IFUPDOWN_FILE, _qos.SCRIPT, _qos.UNIT):
        # the files this module owns: in check mode too, one that is no regular file (a folder, a
        # FIFO, a symlink loop) or whose folder cannot be made is refused before anything changes
        path = os.path.join(params["root"], rel)
        problem = unwritable(path)
        if problem is None and os.path.lexists(path) and not os.path.isfile(path):
            problem = "not a regular file (a folder, a FIFO, a broken or looping symlink?)"
        if problem:
            module.fail_json(msg="roce_rails: %s: %s" % (path, problem))
    validators = {_netconf.NETPLAN_FILE: _netconf.netplan_validator(params["rails"]),
                  _netconf.IFUPDOWN_FILE: _netconf.ifupdown_validator(params["rails"])}

    def write(path, text, mode):
        """The mode is the one the file must have (netplan: 0600; the boot script: 0755)."""
        try:
            if not os.path.isdir(os.path.dirname(path)):
                os.makedirs(os.path.dirname(path), 0o755)
        except OSError as exc:
            raise WriteError("%s: cannot make its folder (%s)" % (path, exc.strerror or exc))
        rel = next((r for r in validators if path.endswith("/" + r)), None)
        atomic_write(path, text, mode=mode, validate=validators.get(rel))

    try:
        result = _rails.converge(params, module.run_command, write, check=module.check_mode)
    except (_rails.RailsError, WriteError) as exc:
        module.fail_json(msg="roce_rails: %s" % exc)
    diff = result.pop("diff")
    for warning in result.pop("warnings"):
        module.warn(warning)
    if module._diff:
        result["diff"] = diff
    module.exit_json(reboot_required=False, reboot_reasons=[], **result)


if __name__ == "__main__":
    main()
