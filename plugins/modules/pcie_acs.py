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
  tools:
    description:
      - Programs to look for on the node in the same call (the role passes setpci, and mlxconfig when it
        manages ATS); the ones not found are returned as RV(tools_missing), so their packages are installed
        only when one is missing. Reading only.
    type: list
    elements: str
    default: []
    version_added: 0.3.0
  set_now:
    description:
      - Set ACS on the bridges now. V(false) installs the boot unit (O(boot)) only and reads no hardware,
        as an image build does (the node's own run and its boot set ACS).
    type: bool
    default: true
    version_added: 0.3.0
  boot:
    description:
      - The boot unit that sets ACS again at every boot - its script, the collection code it runs, its
        configuration and the unit file - compared by content in this same call; only files that
        differ (content or mode) are written, the O(boot.absent) ones removed, and the unit enabled
        (C(systemctl daemon-reload) first when its file was written). One round trip for the whole
        boot unit, where a task per file costs one each.
    type: dict
    version_added: 0.3.0
    suboptions:
      files:
        description:
          - The files, each C({path, content, mode, diff}); folders are created (0755).
          - Every file is checked before the first write - an absolute path whose folders can be made,
            an octal mode, nothing but a regular file in its place - and written whole through a
            temporary file beside it.
        type: list
        elements: dict
        required: true
        suboptions:
          path: {description: Where the file goes., type: path, required: true}
          content: {description: Its whole content., type: str, required: true}
          mode: {description: Its mode., type: str, default: "0644"}
          diff:
            description: Show the content in C(--diff) (V(false) - the collection's own code - shows its hash).
            type: bool
            default: true
      absent:
        description: Files that must not exist (the boot code of earlier releases).
        type: list
        elements: path
        default: []
      unit:
        description: The systemd unit to enable (its file among O(boot.files)), a unit name such as C(x.service); empty enables nothing.
        type: str
        default: ""
extends_documentation_fragment:
  - gpufleet.provision.hardware_root
attributes:
  check_mode:
    support: full
    description: Reads the bridges and the boot files and returns the writes it would make; writes nothing.
  diff_mode:
    support: full
    description: The ACS control of each changed bridge, before and after; each boot file that differs.
  idempotent:
    support: full
    description: Bridges and boot files already right are not written; a second run is C(changed=false).
notes:
  - Reading the config space beyond 256 bytes needs root.
"""

EXAMPLES = r"""
- name: ACS off on the GPU-NIC paths of a bare-metal node
  gpufleet.provision.pcie_acs:
    host_mode: bare_metal

- name: The same, and the boot unit that sets it at every boot, in one call
  gpufleet.provision.pcie_acs:
    host_mode: bare_metal
    boot:
      files:
        - {path: /usr/lib/gpufleet-pcie/gpufleet-pcie-acs, content: "{{ lookup('file', 'gpufleet-pcie-acs', rstrip=false) }}"}
        - {path: /etc/gpufleet/pcie-acs.json, content: '{"host_mode": "bare_metal", "root": "/", "setpci": "setpci"}'}
        - {path: /etc/systemd/system/gpufleet-pcie-acs.service, content: "{{ lookup('template', 'gpufleet-pcie-acs.service.j2') }}"}
      unit: gpufleet-pcie-acs.service
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
boot_changes:
  description: The boot files written (or that would be), C({path, action}) - action create, update, mode or remove.
  returned: always
  type: list
  elements: dict
  sample: [{path: /etc/gpufleet/pcie-acs.json, action: update}]
tools_missing:
  description: The programs of O(tools) not found on the node.
  returned: always
  type: list
  elements: str
boot_unit_enabled:
  description: The boot unit was enabled by this run (check mode - would be).
  returned: always
  type: bool
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
import re

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.provision.plugins.module_utils._devices import acs
from ansible_collections.gpufleet.provision.plugins.module_utils._devices import acs_boot

# A unit name as systemctl takes it: never an option (a leading "-") nor a path.
_UNIT = re.compile(r"^[A-Za-z0-9_@:.\\][A-Za-z0-9_@:.\\-]*\.(service|timer|target|path|socket)$")


def _enable(module, unit, reload_first):
    """Enable ``unit`` (daemon-reload first when its file was written): True when it was not enabled."""
    systemctl = module.get_bin_path("systemctl", required=True)
    rc, out, _err = module.run_command([systemctl, "is-enabled", unit])
    if rc == 0 and out.strip() in ("enabled", "enabled-runtime", "static", "alias"):
        return False
    if module.check_mode:
        return True
    for argv in ([[systemctl, "daemon-reload"]] if reload_first else []) + [[systemctl, "enable", unit]]:
        rc, out, err = module.run_command(argv)
        if rc != 0:
            raise acs_boot.BootError("%s: %s failed (exit %d): %s" % (unit, " ".join(argv), rc, (err or out).strip()))
    return True


def plan_boot(module, boot):
    """The boot unit's file changes, validated (paths, modes, unit name) before anything is written."""
    unit = boot["unit"]
    if unit and not _UNIT.match(unit):
        raise acs_boot.BootError("boot.unit %r: not a systemd unit name (a name such as gpufleet-pcie-acs.service)" % unit)
    return acs_boot.plan(boot["files"], boot["absent"])


def boot_unit(module, boot, changes):
    """(changes, enabled) of the boot unit's planned files and its enablement; nothing written in check mode."""
    if not module.check_mode:
        acs_boot.apply(changes)
    enabled = False
    if boot["unit"]:
        written = any(c["path"].endswith("/" + boot["unit"]) and c["action"] != "remove" for c in changes)
        enabled = _enable(module, boot["unit"], written)
    return [{"path": c["path"], "action": c["action"]} for c in changes], enabled


def set_acs(module):
    """The bridges' plan, written unless check mode (or set_now is false: no hardware read)."""
    if not module.params["set_now"]:
        return []
    root = module.params["root"]
    if not os.path.isdir(root):
        raise acs.AcsError("root %s: not a folder (gpufleet_hardware_root points nowhere?)" % root)
    setpci = module.get_bin_path(module.params["setpci"], required=False) or module.params["setpci"]

    def runner(argv):
        return module.run_command(argv)

    return acs.converge(root, acs.HOST_MODES[module.params["host_mode"]], runner, check=module.check_mode, setpci=setpci)


def _diff(module, changed, file_changes):
    out = acs_boot.diff(file_changes)
    if changed:
        out.append({
            "before": "".join("%s ACSCtl: %s\n" % (i["bdf"], i["current"]) for i in changed),
            "after": "".join("%s ACSCtl: %s\n" % (i["bdf"], i["expected"]) for i in changed),
            "before_header": "ACS on the GPU-NIC bridges", "after_header": "host_mode %s" % module.params["host_mode"],
        })
    return out


def main():
    file_spec = dict(path=dict(type="path", required=True), content=dict(type="str", required=True),
                     mode=dict(type="str", default="0644"), diff=dict(type="bool", default=True))
    module = AnsibleModule(
        argument_spec=dict(
            root=dict(type="path", default="/"),
            host_mode=dict(type="str", required=True, choices=sorted(acs.HOST_MODES)),
            setpci=dict(type="str", default="setpci"),
            tools=dict(type="list", elements="str", default=[]),
            set_now=dict(type="bool", default=True),
            boot=dict(type="dict", options=dict(
                files=dict(type="list", elements="dict", required=True, options=file_spec),
                absent=dict(type="list", elements="path", default=[]),
                unit=dict(type="str", default=""))),
        ),
        supports_check_mode=True,
    )
    boot = module.params["boot"]
    try:
        # the boot files are checked (paths, modes, what is there) before any bridge or file is written
        file_changes = plan_boot(module, boot) if boot else []
        items = set_acs(module)
        changes, enabled = boot_unit(module, boot, file_changes) if boot else ([], False)
    except (acs.AcsError, acs_boot.BootError) as exc:
        module.fail_json(msg="pcie_acs (%s): %s" % (module.params["host_mode"], exc))
    changed = [i for i in items if i["change"]]
    result = dict(changed=bool(changed or changes or enabled), bridges=items, boot_changes=changes,
                  boot_unit_enabled=enabled, reboot_required=False, reboot_reasons=[],
                  tools_missing=[t for t in module.params["tools"] if not module.get_bin_path(t, required=False)])
    if module._diff and (changed or file_changes):
        result["diff"] = _diff(module, changed, file_changes)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
