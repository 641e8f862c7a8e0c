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

import os
import re

from ansible_collections.gpufleet.provision.plugins.module_utils._node.fs import Root


class DriverStateError(ValueError):
    """An argument or a file driver_state cannot work with; the message names it and the cause."""


# What reaches modinfo's argv, systemctl's argv and the messages: one word each, never an option.
_ARGUMENTS = {
    "driver_version": (re.compile(r"^[0-9]+\.[0-9]+(?:\.[0-9]+)?\Z"), "an NVIDIA driver version (550.90.07)"),
    "ofed_release": (re.compile(r"^[0-9][0-9A-Za-z._-]{0,63}\Z"), "an OFED release as ofed_info -s prints it (23.10-1.1.9.0)"),
    "kernel_release": (re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+~-]{0,63}\Z"), "a kernel release (6.8.0-45-generic)"),
}
_UNIT = re.compile(r"^[A-Za-z0-9_@][A-Za-z0-9:_.@\\-]{0,255}\Z")


def check_arguments(p):
    """Every argument checked before anything is read, run or written (a modules-load.d file is
    never written for a call refused later). Raises DriverStateError naming the option and value."""
    for name, (pattern, what) in sorted(_ARGUMENTS.items()):
        value = p.get(name)
        if value in (None, "") and not (name == "driver_version" and p.get("area") == "nvidia"):
            continue
        if not isinstance(value, str) or not pattern.match(value):
            raise DriverStateError("%s %r: not %s" % (name, value, what))
    for unit in p.get("services") or []:
        if not isinstance(unit, str) or not _UNIT.match(unit):
            raise DriverStateError("services: %r is not a systemd unit name" % (unit,))
    if isinstance(p.get("root"), str) and "\x00" in p["root"]:
        raise DriverStateError("root %r: a NUL byte cannot be in a path" % p["root"])
    path = p.get("peermem_at_boot") or ""
    if path and ("\x00" in path or not path.startswith("/") or path.endswith("/")):
        raise DriverStateError("peermem_at_boot %r: not an absolute file path (/etc/modules-load.d/nvidia-peermem.conf)" % path)


def read_text_file(path):
    """Text of the file at ``path``, None when it is absent. DriverStateError naming the path when it
    is there but is not a regular UTF-8 text file (a folder, a FIFO, a symlink loop, binary content):
    a modules-load.d file that is not text is never overwritten."""
    folder, name = os.path.split(path)
    root = Root(folder or "/")
    data = root.read_bytes(name, optional=True)
    if root.problems:
        raise DriverStateError("%s: %s" % (path, root.problems[0]["detail"]))
    if data is None:
        return None
    if b"\x00" in data:
        raise DriverStateError("%s: binary content (a NUL byte), not a modules-load.d file: left alone" % path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise DriverStateError("%s: not UTF-8 text, not a modules-load.d file: left alone" % path)


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


def nvidia_state(want, loaded, module, peermem_module, kernel, peermem_wanted=True):
    """(problems, reboot_reasons) of the NVIDIA driver.

    ``loaded``: the running driver version or None; ``module``: parse_modinfo of ``nvidia`` for
    ``kernel`` (None: no module for that kernel); ``peermem_module``: the same for nvidia-peermem.
    Whether nvidia-peermem runs now is peermem_plan's: it is loaded live where it can be.
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
    return problems, reasons


PEERMEM_AT_BOOT = "/etc/modules-load.d/nvidia-peermem.conf"
PEERMEM_AT_BOOT_TEXT = "# gpufleet.provision nvidia_driver: GPUDirect RDMA\nnvidia-peermem\n"


def peermem_at_boot_plan(current, wanted):
    """``write``, ``remove`` or None: PEERMEM_AT_BOOT (its text, None when absent) against the wish to load
    nvidia-peermem at every boot."""
    if wanted:
        return None if current == PEERMEM_AT_BOOT_TEXT else "write"
    return "remove" if current is not None else None


def _at_boot(why):
    return "%s: loaded at boot from %s" % (why, PEERMEM_AT_BOOT)


def _not_loadable(want, module, running_kernel):
    """Why nvidia-peermem on disk cannot join the running driver ``want`` (None: modprobe can load it)."""
    if module is None:
        return "nvidia-peermem is not installed for the running kernel %s" % running_kernel
    if module.get("version") != want:
        return ("nvidia-peermem for the running kernel %s is %s, the loaded driver is %s"
                % (running_kernel, module.get("version"), want))
    if module.get("kernel") and module["kernel"] != running_kernel:
        return "nvidia-peermem found for the running kernel %s is built for kernel %s" % (running_kernel, module["kernel"])
    return None


def peermem_plan(want, driver_loaded, loaded, running_module, running_kernel):
    """How nvidia-peermem comes to run beside the pinned driver ``want``: (action, reason).

    ``driver_loaded``: the running nvidia version (None: none); ``loaded``: nvidia-peermem's version
    when it runs now ("" when the kernel shows no version), None when it does not;
    ``running_module``: parse_modinfo of nvidia-peermem for the RUNNING kernel (None: not installed
    for it). Actions:

    - ``loaded``: it runs beside the pinned driver; reason None;
    - ``with_driver``: the pinned driver does not run: the driver's own reboot loads it (reason None,
      the driver's reason names that boot);
    - ``load``: installed for the running kernel at the running driver's version: ``modprobe`` loads it
      now. The reason is the one that stands when it is not loaded (a read-only call, or check mode
      cannot know: load_outcome replaces it after the load);
    - ``reboot``: it cannot be loaded into the running kernel; the reason says why.
    """
    if driver_loaded != want:
        return "with_driver", None
    if loaded is not None:
        if loaded and loaded != want:
            return "reboot", _at_boot("nvidia-peermem %s is loaded (in use) beside driver %s" % (loaded, want))
        return "loaded", None
    why = _not_loadable(want, running_module, running_kernel)
    if why:
        return "reboot", _at_boot(why)
    return "load", "nvidia-peermem not loaded (modprobe nvidia-peermem loads it now; %s at boot)" % PEERMEM_AT_BOOT


def peermem_on_disk(found, want, kernel, running_kernel, packages_pending=False):
    """nvidia-peermem for the running kernel as the run leaves it on disk. ``found``: parse_modinfo of
    it now; with the pinned packages still to be installed (``packages_pending``: check mode predicted
    the transaction), the modules they bring for ``kernel`` at version ``want`` (so check mode predicts
    the live load a real run does), when ``kernel`` is the running one."""
    if packages_pending and kernel == running_kernel:
        return {"version": want, "kernel": kernel}
    return found


def load_outcome(rc, stderr, loaded_after):
    """The reboot reason a live ``modprobe nvidia-peermem`` leaves; None when it runs now (read back)."""
    if loaded_after:
        return None
    if rc != 0:
        lines = [line.strip() for line in (stderr or "").splitlines() if line.strip()]
        return _at_boot("modprobe nvidia-peermem failed (exit %d: %s)" % (rc, lines[-1] if lines else "no message"))
    return _at_boot("modprobe nvidia-peermem exited 0 but the module is not loaded (no sys/module/nvidia_peermem)")


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


# systemctl is-enabled exits 0 for these unit file states: nothing for `systemctl enable` to do.
ENABLED_STATES = ("enabled", "enabled-runtime", "static", "alias", "indirect", "generated", "transient", "linked")


def parse_systemctl_show(text):
    """``systemctl show --property=Id,UnitFileState,ActiveState,SubState A B`` -> {unit: {enabled, active, sub,
    file_state}}; one block per unit, blocks apart by an empty line, a unit without a name ``.service``.

    Sample (a unit that is not installed shows an empty UnitFileState)::

        Id=nvidia-fabricmanager.service
        ActiveState=active
        SubState=running
        UnitFileState=enabled

        Id=nvidia-persistenced.service
        ActiveState=inactive
        SubState=dead
        UnitFileState=
    """
    out = {}
    for block in re.split(r"\n\s*\n", text.strip()):
        fields = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
        if not fields.get("Id"):
            continue
        name = re.sub(r"\.service$", "", fields["Id"])
        out[name] = {"file_state": fields.get("UnitFileState") or None,
                     "enabled": fields.get("UnitFileState") in ENABLED_STATES,
                     "active": fields.get("ActiveState") == "active",
                     "sub": fields.get("SubState") or None}
    return out
