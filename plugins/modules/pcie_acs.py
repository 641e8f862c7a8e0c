#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: pcie_acs
short_description: Set the PCIe ACS control on every bridge between each GPU and its rail NIC
version_added: 0.3.0
description:
  - Finds the bridges from the node's own PCIe paths (the node facts collector, as the gate's
    C(pcie.acs) check walks them - below the deepest common bridge of each GPU and its rail NIC, plus
    that bridge), never from a list of addresses.
  - Writes the ACS control the host mode needs with C(setpci ... ECAP_ACS+0x6.w=value:007f) on the
    bridges that differ, then reads the config space again. Bits a bridge does not implement
    (its ACS capability register) are not asked for.
  - C(bare_metal) turns every ACS bit off. C(virtualization) turns on SrcValid, ReqRedir, CmpltRedir,
    UpstreamFwd and DirectTrans (isolation with direct translated peer-to-peer), TransBlk and EgressCtrl off.
  - The setting is lost at a reset; the C(gpufleet.provision.pcie) role installs a boot unit that runs
    the same code at every boot. ACS needs no reboot, so this module never asks for one.
  - A node with GPUs and NICs where no GPU-NIC pair or no bridge between them is found fails, naming
    the devices. A node without GPUs or NICs has nothing to do.
author:
  - gpufleet maintainers (@gpufleet)
options:
  host_mode:
    description: The ACS state to make, as the profile's C(host_mode) names it.
    type: str
    choices: [bare_metal, virtualization]
    required: true
  setpci:
    description: The setpci program (pciutils).
    type: str
    default: setpci
extends_documentation_fragment:
  - gpufleet.provision.hardware_root
attributes:
  check_mode:
    support: full
    description: Reads the bridges and returns the writes it would make; writes nothing.
  diff_mode:
    support: full
    description: The ACS control of each changed bridge, before and after.
  idempotent:
    support: full
    description: Bridges already right are not written; a second run is C(changed=false).
notes:
  - Reading the config space beyond 256 bytes needs root.
"""

EXAMPLES = r"""
- name: ACS off on the GPU-NIC paths of a bare-metal node
  gpufleet.provision.pcie_acs:
    host_mode: bare_metal
"""

RETURN = r"""
bridges:
  description: One item per bridge on a GPU-NIC path.
  returned: always
  type: list
  elements: dict
  sample:
    - {bdf: "0000:17:00.0", pairs: [["0000:18:00.0", mlx5_0]], present: true, change: true, written: true,
       current: "SrcValid- TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd- EgressCtrl- DirectTrans-",
       expected: "SrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-", value: "0000"}
reboot_required:
  description: Always false (ACS takes effect when written).
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

from ansible_collections.gpufleet.provision.plugins.module_utils._devices import acs


def main():
    module = AnsibleModule(
        argument_spec=dict(
            root=dict(type="path", default="/"),
            host_mode=dict(type="str", required=True, choices=sorted(acs.HOST_MODES)),
            setpci=dict(type="str", default="setpci"),
        ),
        supports_check_mode=True,
    )
    root = module.params["root"]
    if not os.path.isdir(root):
        module.fail_json(msg="root %s: not a folder (gpufleet_hardware_root points nowhere?)" % root)
    setpci = module.get_bin_path(module.params["setpci"], required=False) or module.params["setpci"]

    def runner(argv):
        return module.run_command(argv)

    try:
        items = acs.converge(root, acs.HOST_MODES[module.params["host_mode"]], runner, check=module.check_mode, setpci=setpci)
    except acs.AcsError as exc:
        module.fail_json(msg="pcie_acs (%s): %s" % (module.params["host_mode"], exc))
    changed = [i for i in items if i["change"]]
    result = dict(changed=bool(changed), bridges=items, reboot_required=False, reboot_reasons=[])
    if module._diff and changed:
        result["diff"] = {
            "before": "".join("%s ACSCtl: %s\n" % (i["bdf"], i["current"]) for i in changed),
            "after": "".join("%s ACSCtl: %s\n" % (i["bdf"], i["expected"]) for i in changed),
            "before_header": "ACS on the GPU-NIC bridges", "after_header": "host_mode %s" % module.params["host_mode"],
        }
    module.exit_json(**result)


if __name__ == "__main__":
    main()
