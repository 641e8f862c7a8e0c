#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: nic_config
short_description: Set ConnectX firmware configuration (mlxconfig) and report what waits for the reboot
version_added: 0.3.0
description:
  - Queries each device with C(mlxconfig -e -d <pci> q NAME...) (Default, Current and Next Boot
    columns), sets the parameters whose Next Boot value differs (C(mlxconfig -y -d <pci> set NAME=value)),
    and queries again.
  - Every device is queried and every wanted row parsed before the first set. A row whose values are
    not numbers (or a query without the Configurations table) fails naming the device and the row,
    and nothing is set on any device.
  - These settings take effect at the next boot. The reboot is asked for from state, never from
    C(changed) - every parameter whose Current value differs from the wanted one is a reboot reason,
    also when an earlier, interrupted run already set Next Boot.
author:
  - gpufleet maintainers (@gpufleet)
options:
  devices:
    description: PCI addresses of the NICs (C(0000:19:00.0)), for example the rail NICs of the node facts. No blanks, no leading dash.
    type: list
    elements: str
    required: true
  settings:
    description:
      - Parameter name -> wanted value as mlxconfig numbers it, for example C(ATS_ENABLED) 1; booleans are 1/0.
      - Names as mlxconfig prints them (capitals, digits, underscores); values whole numbers, 0 or more.
    type: dict
    required: true
  mlxconfig:
    description: The mlxconfig program (MFT), or C(mstconfig) (mstflint).
    type: str
    default: mlxconfig
attributes:
  check_mode:
    support: full
    description: Queries only; returns the sets it would make and the reboot they would need.
  diff_mode:
    support: full
    description: Next Boot values before and after, per device.
  idempotent:
    support: full
    description: A value already set for the next boot is not set again.
"""

EXAMPLES = r"""
- name: ATS on the rail NICs (virtualization hosts)
  gpufleet.provision.nic_config:
    devices: "{{ ansible_facts.gpufleet.nics | selectattr('role', 'eq', 'rail') | map(attribute='pci') | list }}"
    settings: {ATS_ENABLED: 1}
"""

RETURN = r"""
devices:
  description: Per device, the parameters after the run (default, current, next_boot) and what was set (check mode - would be).
  returned: always
  type: dict
  sample: {"0000:19:00.0": {set: {ATS_ENABLED: 1}, params: {ATS_ENABLED: {default: 0, current: 0, next_boot: 1}}}}
reboot_required:
  description: Whether a wanted value is set for the next boot but not current.
  returned: always
  type: bool
reboot_reasons:
  description: One per device and parameter still waiting for the boot.
  returned: always
  type: list
  elements: str
"""

import re

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.provision.plugins.module_utils._devices import nic


class NicConfigError(Exception):
    pass


# An mlxconfig parameter name (ATS_ENABLED, LINK_TYPE_P1, an array item such as MODULE_SPLIT_M0[1]).
_NAME = re.compile(r"^[A-Z][A-Z0-9_]*(\[[0-9]+\])?$")


def _value(name, value):
    """A wanted value as mlxconfig numbers it (0 or more; true/false are 1/0), or NicConfigError."""
    if isinstance(value, bool):
        return int(value)
    text = str(value).strip()
    if isinstance(value, float) and value == int(value):
        text = str(int(value))
    if not re.match(r"^[0-9]{1,10}$", text):
        raise NicConfigError("settings.%s: %r is not a number mlxconfig takes (a whole number, 0 or more; True is 1)"
                             % (name, value))
    return int(text)


def validate(params):
    """(devices, settings) checked before any tool runs: NicConfigError naming the option and the value."""
    settings = {}
    for name, value in (params["settings"] or {}).items():
        if not _NAME.match(str(name)):
            raise NicConfigError("settings: %r is not an mlxconfig parameter name (for example ATS_ENABLED)" % (name,))
        settings[str(name)] = _value(name, value)
    devices = []
    for pci in params["devices"]:
        if not pci or pci.startswith("-") or re.search(r"[\s\x00-\x1f]", pci):
            raise NicConfigError("devices: %r is not a device (a PCI address such as 0000:19:00.0)" % (pci,))
        devices.append(pci)
    return devices, settings


def _query(module, tool, pci, names):
    """The device's parameters, every wanted row parsed: NicConfigError naming the device and the row."""
    argv = [tool, "-e", "-d", pci, "q"] + names
    rc, out, err = module.run_command(argv)
    if rc != 0:
        raise NicConfigError("%s: %s failed (exit %d): %s" % (pci, " ".join(argv), rc, (err or out).strip()[:300]))
    try:
        query = nic.parse_mlxconfig_query(out)
        nic.check_query(query, names, pci)
    except ValueError as exc:
        raise NicConfigError("%s: %s" % (pci, exc) if not str(exc).startswith(pci) else str(exc))
    return query


def _predict(module, devices, settings):
    # check mode before the role installed MFT: nothing can be read, so predict the set and the reboot
    module.warn("%s is not installed yet (check mode): every setting is predicted as a change" % module.params["mlxconfig"])
    reasons = ["NIC %s %s: would be set to %s (mlxconfig not installed yet: Current unknown)" % (pci, n, settings[n])
               for pci in devices for n in sorted(settings)]
    return dict(changed=True, reboot_required=True, reboot_reasons=reasons,
                devices=dict((pci, {"set": settings, "params": {}}) for pci in devices))


def _set(module, tool, pci, names, settings, values):
    argv = [tool, "-y", "-d", pci, "set"] + ["%s=%s" % (n, v) for n, v in sorted(values.items())]
    rc, out, err = module.run_command(argv)
    if rc != 0:
        raise NicConfigError("%s: %s failed (exit %d): %s" % (pci, " ".join(argv), rc, (err or out).strip()[:300]))
    query = _query(module, tool, pci, names)
    wrong = [n for n in names if query["params"][n].get("next_boot") != settings[n]]
    if wrong:
        raise NicConfigError("%s: after set, Next Boot of %s is still not the wanted value" % (pci, ", ".join(wrong)))
    return query


def run(module):
    devices, settings = validate(module.params)
    tool = module.get_bin_path(module.params["mlxconfig"], required=False)
    names = sorted(settings)
    if tool is None and module.check_mode:
        return _predict(module, devices, settings)
    if tool is None:
        raise NicConfigError("mlxconfig %r not found on the node (install MFT or mstflint)" % module.params["mlxconfig"])
    # every device queried and every row parsed before the first set: a misread never becomes a write
    queries, plans = {}, {}
    for pci in devices:
        queries[pci] = _query(module, tool, pci, names)
        try:
            plans[pci] = nic.config_plan(queries[pci], settings)
        except ValueError as exc:
            raise NicConfigError(str(exc))
    out, reasons, before, after = {}, [], [], []
    for pci in devices:
        query, planned = queries[pci], plans[pci]
        if planned["set"]:
            before.extend("%s %s=%s\n" % (pci, n, query["params"][n]["next_boot"]) for n in sorted(planned["set"]))
            after.extend("%s %s=%s\n" % (pci, n, v) for n, v in sorted(planned["set"].items()))
            if not module.check_mode:
                query = _set(module, tool, pci, names, settings, planned["set"])
                planned = dict(nic.config_plan(query, settings), set=planned["set"])
        reasons.extend(planned["reasons"])
        out[pci] = {"set": planned["set"], "params": dict((n, query["params"][n]) for n in names)}
    changed = any(plans[pci]["set"] for pci in devices)
    result = dict(changed=changed, devices=out, reboot_required=bool(reasons), reboot_reasons=reasons)
    if module._diff and changed:
        result["diff"] = {"before": "".join(before), "after": "".join(after),
                          "before_header": "mlxconfig Next Boot", "after_header": "mlxconfig Next Boot"}
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            devices=dict(type="list", elements="str", required=True),
            settings=dict(type="dict", required=True),
            mlxconfig=dict(type="str", default="mlxconfig"),
        ),
        supports_check_mode=True,
    )
    try:
        result = run(module)
    except NicConfigError as exc:
        module.fail_json(msg="nic_config: %s" % exc)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
