# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Desired state of PCIe ACS/ATS, storage and firmware (see _desired/registry.py).

Areas (``profile | gpufleet.provision.desired('<area>')``) and the gate check that must expect the same:

- ``acs``: {host_mode, ctl: {bit: bool}} on every bridge of a GPU-NIC path (check ``pcie.acs``; per
  bridge limited to the bits it implements: ``_devices.acs.expected(ctl, cap)``);
- ``acs_kernel_param``: [] or ["pci=config_acs=<flags>@pci:0:0"], read by the kernel_cmdline role;
- ``ats``: True/False/None (None: not wanted either way, nothing checked) (check ``nic.ats``);
- ``storage_mounts``: the mounts with device/options/fstype normalised (check ``storage.mounts``);
- ``firmware``: {nic: {prefix: min}, nvme: {prefix: min}, allow_downgrade} (checks ``firmware.nic``,
  ``firmware.nvme``; which minimum applies to a device: ``_devices.firmware.minimum_for``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufleet.provision.plugins.module_utils._desired.registry import area, DesiredError
from ansible_collections.gpufleet.provision.plugins.module_utils._devices import acs as _acs

# pci=config_acs= exists from Linux 6.11 (drivers/pci/pci.c, Documentation/admin-guide/kernel-parameters.txt).
CONFIG_ACS_SINCE = (6, 11)


def _section(profile, *keys):
    node = profile
    for key in keys:
        node = node.get(key) if isinstance(node, dict) else None
    return node


@area("acs")
def acs(profile, **_context):
    """ACS control wanted on the GPU-NIC bridges, None when the profile names no host mode."""
    mode = profile.get("host_mode")
    if mode is None:
        return None
    if mode not in _acs.HOST_MODES:
        raise DesiredError("host_mode: %r is not one of %s" % (mode, ", ".join(sorted(_acs.HOST_MODES))))
    return {"host_mode": mode, "ctl": dict(_acs.HOST_MODES[mode])}


def config_acs_flags(ctl):
    """{bit: bool} -> the kernel's flag string, bit 0 last: bare metal ``0000000``, virtualization ``1011101``."""
    return "".join("1" if ctl.get(bit) else "0" for bit in reversed(_acs.BITS))


@area("kernel_cmdline.pcie")
def kernel_cmdline_pcie(profile, **_context):
    """The pcie part's contribution to the command line the kernel_cmdline role writes (and
    kernel.cmdline expects): the ``pci=config_acs=`` form when the profile asks for it."""
    return {"required": acs_kernel_param(profile)}


@area("acs_kernel_param")
def acs_kernel_param(profile, **_context):
    """The kernel parameter form of the ACS state (pcie.acs_kernel_param), for the kernel_cmdline role.

    ``pci:0:0`` matches every ACS-capable device (vendor and device 0 are wildcards): the kernel
    applies the flags at enumeration, before any driver binds, and only to bits a device implements.
    The setpci unit of the pcie role still runs: it is what makes the GPU-NIC bridges right on kernels
    without the parameter and after a hot reset.
    """
    if not _section(profile, "pcie", "acs_kernel_param"):
        return []
    want = acs(profile)
    if want is None:
        raise DesiredError("pcie.acs_kernel_param: needs host_mode (which ACS state to write)")
    release = _section(profile, "kernel", "release")
    match = re.match(r"^(\d+)\.(\d+)", release or "")
    if match and (int(match.group(1)), int(match.group(2))) < CONFIG_ACS_SINCE:
        raise DesiredError("pcie.acs_kernel_param: pci=config_acs= needs Linux %d.%d or later, kernel.release is %s"
                           % (CONFIG_ACS_SINCE + (release,)))
    return ["pci=config_acs=%s@pci:0:0" % config_acs_flags(want["ctl"])]


@area("ats")
def ats(profile, **_context):
    """ATS_ENABLED wanted on the rail NICs: nic.ats, else True on a virtualization host, else None."""
    value = _section(profile, "nic", "ats")
    if value is not None:
        return bool(value)
    return True if profile.get("host_mode") == "virtualization" else None


@area("storage_mounts")
def storage_mounts(profile, **_context):
    """[{path, device, fstype, options, min_size_gb, min_free_gb}]; a mount with a device must say its fstype."""
    out = []
    for index, mount in enumerate(_section(profile, "storage", "mounts") or []):
        item = {"path": mount["path"], "device": mount.get("device"), "fstype": mount.get("fstype"),
                "options": mount.get("options") or "defaults", "min_size_gb": mount.get("min_size_gb"),
                "min_free_gb": mount.get("min_free_gb")}
        if not item["path"].startswith("/"):
            raise DesiredError("storage.mounts[%d].path: %r is not an absolute path" % (index, item["path"]))
        if item["device"] is not None:
            if not item["device"].startswith("/dev/"):
                raise DesiredError("storage.mounts[%d].device: %r is not a /dev path (use /dev/disk/by-id/...)"
                                   % (index, item["device"]))
            if not item["fstype"]:
                raise DesiredError("storage.mounts[%d].fstype: required with device (the file system to create)" % index)
        out.append(item)
    paths = [m["path"] for m in out]
    for path in set(p for p in paths if paths.count(p) > 1):
        raise DesiredError("storage.mounts: %s listed twice" % path)
    return out


@area("firmware")
def firmware(profile, **_context):
    """{nic: {prefix: minimum}, nvme: {...}, allow_downgrade: bool} (empty mappings when unset)."""
    section = _section(profile, "firmware") or {}
    return {"nic": dict(section.get("nic") or {}), "nvme": dict(section.get("nvme") or {}),
            "allow_downgrade": bool(section.get("allow_downgrade"))}
