# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Firmware minimums: version order, which minimum applies to a device, the NVMe tools' outputs,
and the flash plan (flash, refuse, or leave alone) shared by the NIC and NVMe modules."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re


class FirmwareError(ValueError):
    """A firmware plan cannot be made or must be refused; the message names the device and image."""


# A firmware version we can order: letters, digits and separators, at least one digit
# (ConnectX ``28.39.1002``, NVMe ``MPK7525Q``, ``GDC5602Q``, ``1.2.3-rc1``). Anything else (``garbage``,
# an empty file, NUL bytes) cannot be compared: letters alone would sort above every number and pass.
_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+~ ()-]*$")


def valid_version(text):
    """Whether ``text`` is a firmware version that can be ordered (see _VERSION)."""
    return isinstance(text, str) and bool(_VERSION.match(text.strip())) and any(c.isdigit() for c in text)


def version_key(text):
    """``28.39.1002`` -> [(0, 28), (0, 39), (0, 1002)]; letters sort after numbers (``MPK7525Q``).

    The one order of firmware versions (the gate's firmware checks use it too). It orders anything;
    ``valid_version`` says whether the order means something.
    """
    return [(0, int(t)) if t.isdigit() else (1, t) for t in re.findall(r"\d+|[A-Za-z]+", text or "")]


def checked_key(version, what):
    """version_key of a version that must be comparable, else FirmwareError naming ``what`` and the value."""
    if not valid_version(version):
        raise FirmwareError("%s: firmware version %r does not parse: cannot compare it with the minimum" % (what, version))
    return version_key(version)


def minimum_for(minimums, keys):
    """(profile key, minimum) of the first profile key that prefixes one of the device's ``keys``
    (NIC: hca_type or PSID/board_id; NVMe: model), or (None, None)."""
    for key in sorted(minimums or {}):
        if any(k and str(k).strip().startswith(key) for k in keys):
            return key, minimums[key]
    return None, None


def below(version, minimum, device="firmware"):
    """Whether ``version`` is below ``minimum``; FirmwareError naming ``device`` when either does not parse."""
    return checked_key(version, device) < checked_key(minimum, "%s minimum" % device)


def plan(device, current, pending, minimum, image, allow_downgrade=False):
    """Decide for one device.

    device: name for messages; current: running version; pending: the version active after the next
    boot (None or == current when nothing is pending); minimum: the profile's; image: the operator's
    image for this device ({version, path}) or None.

    - below the minimum: flash the image (it must reach the minimum; no image is an error);
    - at or above it: nothing, except with allow_downgrade and an older image (a fleet rolling back
      a bad release to the image it supplies): flash it. Without allow_downgrade nothing is ever
      flashed over newer firmware.

    Returns {"action": "none"|"flash", "reason", "reboot_reason"} (reboot_reason: firmware that is
    burnt but not running, after this plan); raises FirmwareError naming the device and image.
    """
    effective = pending or current
    if not effective:
        raise FirmwareError("%s: firmware version unknown (the query printed none)" % device)
    checked_key(effective, device)
    checked_key(minimum, "%s: the profile minimum" % device)
    if image is not None and below(image["version"], minimum, "%s image %s" % (device, image["path"])):
        raise FirmwareError("%s: image %s is version %s, below the profile minimum %s"
                            % (device, image["path"], image["version"], minimum))
    out = {"action": "none", "reason": "%s at %s (minimum %s)" % (device, effective, minimum), "reboot_reason": None}
    if below(effective, minimum, device):
        if image is None:
            raise FirmwareError("%s: firmware %s is below the profile minimum %s and firmware_images has no image for it"
                                % (device, effective, minimum))
        out["action"] = "flash"
    elif image is not None and allow_downgrade and below(image["version"], effective, device):
        out["action"] = "flash"
    if out["action"] == "flash":
        out["reason"] = "%s %s -> %s" % (device, effective, image["version"])
        effective = image["version"]
    if effective != current:
        out["reboot_reason"] = "%s firmware %s burnt, %s running: active at the next boot" % (device, effective, current)
    return out


def check_options(minimums, images):
    """firmware_flash's minimums and images as the module takes them, or FirmwareError naming the
    key or the image: a minimum is a version string that parses, an image a mapping with a path."""
    for key, minimum in sorted((minimums or {}).items(), key=lambda kv: str(kv[0])):
        if not isinstance(minimum, str) or not valid_version(minimum):
            raise FirmwareError("minimums.%s: %r is not a firmware version (a quoted string such as \"28.39.1002\")"
                                % (key, minimum))
    for index, image in enumerate(images or []):
        if not isinstance(image, dict):
            raise FirmwareError("images[%d]: must be a mapping with path, got %r" % (index, image))
        if not isinstance(image.get("path"), str) or not image["path"].strip():
            raise FirmwareError("images[%d]: no path (%r)" % (index, image))
        for key in ("version", "psid", "model"):
            if image.get(key) is not None and not isinstance(image[key], str):
                raise FirmwareError("images[%d].%s: must be a string, got %r" % (index, key, image[key]))
        if image.get("version") is not None and not valid_version(image["version"]):
            raise FirmwareError("images[%d].version: %r is not a firmware version" % (index, image["version"]))


def parse_nvme_id_ctrl(text):
    """``nvme id-ctrl /dev/nvme0`` -> {"model", "serial", "firmware", "frmw"}.

    Sample::

        NVME Identify Controller:
        vid       : 0x144d
        sn        : S64FNE0R800123
        mn        : SAMSUNG MZWLR3T8HBLS-00007
        fr        : MPK7525Q
        frmw      : 0x16
    """
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    if "mn" not in fields or "fr" not in fields:
        raise ValueError("nvme id-ctrl: no mn/fr lines (%r)" % text.strip()[:80])
    frmw = fields.get("frmw")
    return {"model": fields["mn"], "serial": fields.get("sn"), "firmware": fields["fr"],
            "frmw": int(frmw, 0) if frmw else None}


def parse_nvme_fw_log(text):
    """``nvme fw-log /dev/nvme0`` -> {"active_slot", "next_slot", "slots": {n: version}, "active", "next"}.

    Sample (nvme-cli 1.x/2.x; afi bits 2:0 the running slot, bits 6:4 the slot activated at the next
    reset, 0 = none)::

        Firmware Log for device:nvme0
        afi  : 0x21
        frs1 : 0x5135323537504b4d (MPK7525Q)
        frs2 : 0x5136323537504b4d (MPK7526Q)

    next = the version the drive runs after the next reset.
    """
    afi, slots = None, {}
    for line in text.splitlines():
        match = re.match(r"^\s*afi\s*:\s*(0x[0-9a-fA-F]+|\d+)", line)
        if match:
            afi = int(match.group(1), 0)
            continue
        match = re.match(r"^\s*frs(\d)\s*:\s*(0x[0-9a-fA-F]+|\d+)\s*(?:\((.*)\))?", line)
        if match:
            version = (match.group(3) or "").strip()
            if not version:
                raw = int(match.group(2), 0)
                version = raw.to_bytes(8, "little").decode("ascii", "replace").strip("\x00 ")
            if version:
                slots[int(match.group(1))] = version
    if afi is None:
        raise ValueError("nvme fw-log: no afi line (%r)" % text.strip()[:80])
    active, nxt = afi & 0x7, (afi >> 4) & 0x7
    return {"active_slot": active, "next_slot": nxt or None, "slots": slots,
            "active": slots.get(active), "next": slots.get(nxt or active)}


def _due(name, keys, version, minimums, downgrade_images):
    """(minimum, why) of one device: minimum None when the profile has none for it; why None when it is
    at its minimum by the version the kernel reports, else why the tools must read it."""
    key, minimum = minimum_for(minimums, keys)
    if key is None:
        return None, None
    if not version:
        return minimum, "%s: no firmware version in the facts" % name
    if not valid_version(minimum):
        return minimum, "%s: the profile minimum %r does not parse" % (name, minimum)
    if not valid_version(version):
        # cannot be compared: the tools read it (and firmware_flash refuses what they cannot compare either)
        return minimum, "%s: firmware version %r in the facts does not parse" % (name, version)
    if below(version, minimum, name):
        return minimum, "%s %s below the minimum %s" % (name, version, minimum)
    if downgrade_images:
        return minimum, "%s %s: allow_downgrade with images of its kind (read with the tools)" % (name, version)
    return minimum, None


def due_from_facts(facts, nic_minimums, nvme_minimums, allow_downgrade=False, images=()):
    """Which devices need the firmware tools, from the node facts alone (the gate's own reading).

    The running version the kernel reports (``fw_ver`` of an InfiniBand device, ``firmware_rev`` of an
    NVMe controller) at or above the profile minimum means nothing to flash and no reboot to ask: the
    tools (flint, nvme) run only for a device below it, without a version, or, with allow_downgrade and
    images of its kind, where an older image may be wanted. A burnt image pending the next boot shows
    as the running version below the minimum: the tools then read it and ask for the reboot.

    Returns {"nic": [nic facts], "nvme": [nvme facts], "reasons": [why each is due], "at_minimum": [lines]}.
    """
    kinds = set(i.get("type") for i in images or [])
    out = {"nic": [], "nvme": [], "reasons": [], "at_minimum": []}
    nics = [n for n in (facts.get("nics") or []) if not n.get("virtual_function")]
    for kind, devices, minimums, keys, field in (
            ("nic", nics, nic_minimums, ("hca_type", "board_id"), "fw_ver"),
            ("nvme", facts.get("nvme") or [], nvme_minimums, ("model",), "firmware")):
        for dev in devices if minimums else []:
            minimum, why = _due(dev.get("name"), [dev.get(k) for k in keys], dev.get(field), minimums,
                                allow_downgrade and kind in kinds)
            if why:
                out[kind].append(dev)
                out["reasons"].append(why)
            elif minimum is not None:
                out["at_minimum"].append("%s at %s (minimum %s)" % (dev.get("name"), dev.get(field), minimum))
    return out
