#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: firmware_flash
short_description: Bring a NIC's or NVMe drive's firmware up to the fleet minimum from a supplied image
version_added: 0.3.0
description:
  - NIC (ConnectX, O(kind=nic)) - reads the device with C(flint -d <pci> q) (PSID, burnt and running
    version) and every candidate image with C(flint -i <image> q) (its own PSID and version), and
    burns with C(flint -d <pci> -i <image> -y burn).
  - NVMe (O(kind=nvme)) - reads C(nvme id-ctrl) (model, running firmware) and C(nvme fw-log) (the slot
    activated at the next reset), downloads with C(nvme fw-download) and commits with
    C(nvme fw-commit --slot=0 --action=1) (replace, activate at the next reset).
  - Flashes only when the version that will run after the next boot is below the minimum, never an
    image below the minimum, never over newer firmware unless O(allow_downgrade).
  - Refused, changing nothing, - a NIC image whose PSID (read from the image itself) is not the
    device's, an image declared for this device whose version is not what the image says, a device below
    the minimum without an image for its PSID or model, a running, pending, image or minimum version
    that does not parse (letters, digits and separators with at least one digit, such as C(28.39.1002)
    or C(MPK7525Q)) - it cannot be compared, so it is neither passed nor flashed.
  - Activation is at the next boot - burnt but not running firmware is a reboot reason, also when an
    earlier run burnt it.
author:
  - gpufleet maintainers (@gpufleet)
options:
  kind:
    description: Which tools to use.
    type: str
    choices: [nic, nvme]
    required: true
  device:
    description: NIC - its PCI address (C(0000:19:00.0)); NVMe - the controller (C(/dev/nvme0)).
    type: str
    required: true
  name:
    description: Name in messages (C(mlx5_0), C(nvme0)); defaults to O(device).
    type: str
  match:
    description:
      - What the profile's minimum keys are matched against, by prefix, besides what the tool reads
        (the PSID of a NIC, the model of a drive) - for example the NIC's C(hca_type) (C(MT4129)).
    type: list
    elements: str
    default: []
  minimums:
    description: The profile's minimums for this kind (C(firmware.nic) or C(firmware.nvme)), key prefix -> version.
    type: dict
    required: true
  images:
    description:
      - Candidate images on the node - C(path) (required), C(version) (required for NVMe; for a NIC
        checked against the image), C(psid) (NIC), C(model) (NVMe, prefix of the drive's model, required).
    type: list
    elements: dict
    default: []
  allow_downgrade:
    description: Flash an older image over newer firmware (the profile's C(firmware.allow_downgrade)).
    type: bool
    default: false
  flint:
    description: The flint program (MFT; C(mstflint) works the same).
    type: str
    default: flint
  nvme:
    description: The nvme program (nvme-cli).
    type: str
    default: nvme
attributes:
  check_mode:
    support: full
    description: Reads devices and images, refuses what it would refuse; flashes nothing.
  diff_mode:
    support: full
    description: The version after the next boot, before and after.
  idempotent:
    support: full
    description: A device at or above the minimum (or with the image already burnt) is not flashed.
"""

EXAMPLES = r"""
- name: ConnectX-7 firmware at the fleet minimum
  gpufleet.provision.firmware_flash:
    kind: nic
    device: "0000:19:00.0"
    name: mlx5_0
    match: [MT4129]
    minimums: {MT4129: "28.39.1002"}
    images: [{path: /var/lib/gpufleet/firmware/fw-ConnectX7-28.40.1000.bin, psid: MT_0000000838}]
"""

RETURN = r"""
action:
  description: C(flash) or C(none).
  returned: success
  type: str
current:
  description: Running firmware.
  returned: success
  type: str
next_boot:
  description: Firmware that runs after the next boot (after the flash when one was made).
  returned: success
  type: str
minimum:
  description: The minimum that applied (C(null) when no profile key matches the device).
  returned: success
  type: str
image:
  description: The image chosen (C(null) when none was needed).
  returned: success
  type: dict
reboot_required:
  description: Firmware is burnt but not running.
  returned: success
  type: bool
reboot_reasons:
  description: Why.
  returned: success
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.provision.plugins.module_utils._devices import firmware as fw
from ansible_collections.gpufleet.provision.plugins.module_utils._devices import nic


def _run(module, argv, what):
    rc, out, err = module.run_command(argv)
    if rc != 0:
        raise fw.FirmwareError("%s: %s failed (exit %d): %s" % (what, " ".join(argv), rc, (err or out).strip()[:400]))
    return out


def _tool(module, name):
    path = module.get_bin_path(module.params[name], required=False)
    if path is None:
        raise fw.FirmwareError("%s not found on the node" % module.params[name])
    return path


def _parse(parser, text, what):
    try:
        return parser(text)
    except ValueError as exc:
        raise fw.FirmwareError("%s: %s" % (what, exc))


def nic_state(module, name):
    flint = _tool(module, "flint")
    dev = module.params["device"]
    q = _parse(nic.parse_flint_query, _run(module, [flint, "-d", dev, "q"], name), name)
    chosen = []
    for image in module.params["images"]:
        path = image.get("path")
        declared = image.get("psid")
        if declared and declared != q["psid"]:
            continue   # declared for other NICs
        if not path or not os.path.isfile(path):
            if not (module.check_mode and path):
                raise fw.FirmwareError("%s: image %s not found on the node" % (name, path))
            # check mode stages nothing: an image not copied yet cannot be read, only predicted
            module.warn("%s: image %s is not on the node yet (check mode): its PSID and version are read in a real run" % (name, path))
            chosen.append({"path": path, "version": image.get("version"), "psid": declared, "unread": True})
            continue
        iq = _parse(nic.parse_flint_query, _run(module, [flint, "-i", path, "q"], path), "image %s" % path)
        if iq["psid"] != q["psid"]:
            if declared:
                raise fw.FirmwareError("%s: image %s is for PSID %s, the device is PSID %s: refused"
                                       % (name, path, iq["psid"], q["psid"]))
            continue
        if image.get("version") and image["version"] != iq["fw"]:
            raise fw.FirmwareError("%s: image %s says version %s, firmware_images says %s: refused"
                                   % (name, path, iq["fw"], image["version"]))
        chosen.append({"path": path, "version": iq["fw"], "psid": iq["psid"]})
    return {"current": q["fw_running"], "next_boot": q["fw"], "keys": [q["psid"]], "images": chosen,
            "identity": "PSID %s" % q["psid"]}


def nvme_state(module, name):
    tool = _tool(module, "nvme")
    dev = module.params["device"]
    ident = _parse(fw.parse_nvme_id_ctrl, _run(module, [tool, "id-ctrl", dev], name), name)
    log = _parse(fw.parse_nvme_fw_log, _run(module, [tool, "fw-log", dev], name), name)
    chosen = []
    for image in module.params["images"]:
        path = image.get("path")
        if not image.get("model") or not image.get("version"):
            raise fw.FirmwareError("%s: NVMe image %s needs model and version in firmware_images (a drive image does "
                                   "not describe itself)" % (name, path))
        if not ident["model"].startswith(image["model"]):
            continue
        if not path or not os.path.isfile(path):
            if not (module.check_mode and path):
                raise fw.FirmwareError("%s: image %s not found on the node" % (name, path))
            module.warn("%s: image %s is not on the node yet (check mode)" % (name, path))
        chosen.append({"path": path, "version": image["version"], "model": image["model"]})
    return {"current": ident["firmware"], "next_boot": log["next"] or ident["firmware"], "keys": [ident["model"]],
            "images": chosen, "identity": "model %s" % ident["model"]}


def flash(module, kind, image, name):
    dev = module.params["device"]
    if kind == "nic":
        _run(module, [_tool(module, "flint"), "-d", dev, "-i", image["path"], "-y", "burn"], name)
    else:
        tool = _tool(module, "nvme")
        _run(module, [tool, "fw-download", dev, "--fw=%s" % image["path"]], name)
        _run(module, [tool, "fw-commit", dev, "--slot=0", "--action=1"], name)


def run(module):
    p = module.params
    kind, name = p["kind"], p["name"] or p["device"]
    fw.check_options(p["minimums"], p["images"])
    state = nic_state(module, name) if kind == "nic" else nvme_state(module, name)
    key, minimum = fw.minimum_for(p["minimums"], list(p["match"]) + state["keys"])
    result = {"changed": False, "action": "none", "current": state["current"], "next_boot": state["next_boot"],
              "minimum": minimum, "image": None, "reboot_required": False, "reboot_reasons": []}
    if key is None:
        result["reason"] = "%s (%s): no profile minimum for it" % (name, state["identity"])
        return result
    unread = [i for i in state["images"] if i.get("unread") and not i.get("version")]
    # a running or pending version that does not parse cannot be compared: refused, nothing flashed
    fw.checked_key(state["next_boot"], "%s (%s)" % (name, state["identity"]))
    if unread and fw.below(state["next_boot"], minimum, name):
        # check mode, image not staged and not described: it would be read, checked, and flashed
        result.update(changed=True, action="flash", image=unread[0], reboot_required=True,
                      reason="%s %s below the minimum %s: would flash %s (read in a real run)"
                      % (name, state["next_boot"], minimum, unread[0]["path"]),
                      reboot_reasons=["%s firmware from %s burnt, %s running: active at the next boot"
                                      % (name, unread[0]["path"], state["current"])])
        return result
    images = sorted((i for i in state["images"] if i.get("version")), key=lambda i: fw.version_key(i["version"]))
    image = None
    if images:
        # below the minimum: the newest; a downgrade: the oldest the operator supplies for this device
        image = images[0] if p["allow_downgrade"] and fw.below(images[0]["version"], state["next_boot"], name) else images[-1]
    elif p["images"] and fw.below(state["next_boot"], minimum, name):
        kinds = sorted(set(str(i.get("psid") or i.get("model") or i.get("path")) for i in p["images"]))
        raise fw.FirmwareError("%s (%s): firmware %s below the minimum %s and no image for it (firmware_images has: %s)"
                               % (name, state["identity"], state["next_boot"], minimum, ", ".join(kinds)))
    decision = fw.plan(name, state["current"], state["next_boot"], minimum, image, p["allow_downgrade"])
    result["reason"] = decision["reason"]
    if decision["action"] == "flash":
        result.update(changed=True, action="flash", image=image)
        if module._diff:
            result["diff"] = {"before": "%s next boot: %s\n" % (name, state["next_boot"]),
                              "after": "%s next boot: %s\n" % (name, image["version"])}
        if not module.check_mode:
            flash(module, kind, image, name)
            again = nic_state(module, name) if kind == "nic" else nvme_state(module, name)
            if again["next_boot"] != image["version"]:
                raise fw.FirmwareError("%s: after flashing %s the device reports %s for the next boot"
                                       % (name, image["version"], again["next_boot"]))
            result.update(current=again["current"], next_boot=again["next_boot"])
        else:
            result["next_boot"] = image["version"]
    if result["next_boot"] != result["current"]:
        result["reboot_required"] = True
        result["reboot_reasons"] = ["%s firmware %s burnt, %s running: active at the next boot"
                                    % (name, result["next_boot"], result["current"])]
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            kind=dict(type="str", required=True, choices=["nic", "nvme"]),
            device=dict(type="str", required=True),
            name=dict(type="str"),
            match=dict(type="list", elements="str", default=[]),
            minimums=dict(type="dict", required=True),
            images=dict(type="list", elements="dict", default=[]),
            allow_downgrade=dict(type="bool", default=False),
            flint=dict(type="str", default="flint"),
            nvme=dict(type="str", default="nvme"),
        ),
        supports_check_mode=True,
    )
    try:
        result = run(module)
    except fw.FirmwareError as exc:
        module.fail_json(msg="firmware_flash: %s" % exc)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
