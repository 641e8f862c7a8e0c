# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Loaded vs next-boot kernel modules of the driver area (docs/roles.md section 3): pure rules.

The reboot request of the nvidia_driver and ofed roles comes from state, never from ``changed``:
the driver loaded now (``<root>/sys/module/nvidia/version``) against the version pinned, and the
modules on disk for the kernel that WILL boot (``modinfo -k <release>``) against the pinned
versions. A module missing or wrong for that kernel is a problem (the role fails before the reboot,
naming both versions): rebooting into it would leave the node without its driver.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re


def parse_ofed_release(text):
    """``ofed_info -s``: ``MLNX_OFED_LINUX-23.10-1.1.9.0:`` (DOCA: ``OFED-internal-24.10-1.1.4:``) ->
    ``23.10-1.1.9.0``; None when the first line names no release (the gate's parser does the same)."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    match = re.search(r"(\d+\.\d+-[0-9.]+[0-9])", first)
    return match.group(1) if match else None


def parse_modinfo(text):
    """``modinfo -k K -F filename -F version -F vermagic -F srcversion NAME`` prints ``field: value``
    lines when several fields are asked; returns {field: value} (vermagic's first word is the kernel).

    Sample::

        filename:       /lib/modules/6.8.0-45-generic/updates/dkms/mlx5_core.ko
        version:        23.10
        srcversion:     00000000000000000000001
        vermagic:       6.8.0-45-generic SMP preempt mod_unload modversions
    """
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() and " " not in key.strip():
            out.setdefault(key.strip(), value.strip())
    if "vermagic" in out:
        out["kernel"] = out["vermagic"].split()[0] if out["vermagic"].split() else None
    return out


def nvidia_state(want, loaded, module, peermem_module, kernel, peermem_wanted=True, peermem_loaded=None):
    """(problems, reboot_reasons) of the NVIDIA driver.

    ``loaded``: the running driver version or None; ``module``: parse_modinfo of ``nvidia`` for
    ``kernel`` (None: no module for that kernel); ``peermem_module``: the same for nvidia-peermem;
    ``peermem_loaded``: whether it runs now (None: unknown). The pinned driver running without
    nvidia-peermem (it could not be loaded in place) needs the boot that loads it.
    """
    problems, reasons = [], []
    if module is None:
        problems.append("no nvidia kernel module for kernel %s (the precompiled package or the DKMS build "
                        "for that kernel is missing: are its headers installed?)" % kernel)
    elif module.get("version") != want:
        problems.append("the nvidia module for kernel %s is %s, the driver pinned is %s"
                        % (kernel, module.get("version"), want))
    elif module.get("kernel") and module["kernel"] != kernel:
        problems.append("the nvidia module found for kernel %s is built for %s" % (kernel, module["kernel"]))
    if peermem_wanted and module is not None and peermem_module is None:
        problems.append("no nvidia-peermem module for kernel %s (GPUDirect RDMA would be off)" % kernel)
    if loaded != want:
        reasons.append("NVIDIA driver %s installed, %s" % (want, "%s loaded" % loaded if loaded else "none loaded"))
    elif peermem_wanted and peermem_loaded is False:
        reasons.append("nvidia-peermem not loaded (loaded at boot from /etc/modules-load.d/nvidia-peermem.conf)")
    return problems, reasons


def ofed_state(want_release, installed_release, module, kernel, loaded_version=None, running_kernel=None):
    """(problems, reboot_reasons) of OFED: mlx5_core for the kernel that will boot must exist and carry
    that kernel's vermagic; a loaded mlx5_core of another version than the one on disk needs the reboot."""
    problems, reasons = [], []
    if installed_release is not None and want_release is not None and installed_release != want_release:
        problems.append("OFED %s installed (ofed_info -s), the profile pins %s" % (installed_release, want_release))
    if module is None:
        problems.append("no mlx5_core module for kernel %s: OFED %s could not be built for it"
                        % (kernel, want_release or installed_release))
    elif module.get("kernel") != kernel:
        problems.append("mlx5_core for kernel %s is built for %s (OFED %s)"
                        % (kernel, module.get("kernel"), want_release or installed_release))
    elif loaded_version is not None and running_kernel == kernel and loaded_version != module.get("version"):
        reasons.append("OFED mlx5_core %s loaded, %s built for kernel %s" % (loaded_version, module.get("version"), kernel))
    return problems, reasons
