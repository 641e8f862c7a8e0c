#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: driver_state
short_description: Compare the loaded NVIDIA driver and OFED modules with the ones the next boot will load, load nvidia-peermem live
version_added: 0.2.0
description:
  - Reads the running driver version under O(root) (C(sys/module/nvidia/version)), the OFED release
    (C(ofed_info -s)) and, with C(modinfo -k), the C(nvidia), C(nvidia-peermem) and C(mlx5_core)
    modules on disk for O(kernel_release), the kernel that will boot (not necessarily the running one).
  - Returns C(reboot_required) and C(reboot_reasons) computed from that state (docs/roles.md section 3)
    and C(problems), a module missing or of another version for that kernel. With O(fail_on_problems)
    the task fails naming both versions, before any reboot.
  - With O(load_now), nvidia-peermem that is wanted but not loaded is loaded into the running kernel with
    C(modprobe nvidia-peermem) when it can be, then read back under O(root) (C(sys/module/nvidia_peermem)).
    It can be when the pinned driver runs and the module is installed for the running kernel
    (C(modinfo -k <running release>)), built for it and of the running driver's version.
  - Only when it cannot be (another version of it loaded, not installed or built for the running kernel,
    C(modprobe) fails) is it a reboot reason, naming why; with the pinned driver not running, the driver's
    own reboot loads it. Check mode predicts the load (C(changed)) and loads nothing.
  - Without O(load_now) and O(peermem_at_boot) nothing is changed.
  - Every argument is checked first (O(driver_version) an NVIDIA version such as C(550.90.07), not
    C(latest)); a O(peermem_at_boot) file that is not a regular text file is an error naming it, and
    the file is changed last, never when the call fails.
author:
  - gpufleet maintainers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.provision.hardware_root
options:
  area:
    description: V(nvidia) (driver, nvidia-peermem) or V(ofed) (mlx5_core, ofed_info).
    type: str
    choices: [nvidia, ofed]
    required: true
  kernel_release:
    description: The kernel that will boot; empty means the running kernel (C(proc/sys/kernel/osrelease) under O(root)).
    type: str
    default: ""
  driver_version:
    description: The pinned NVIDIA driver version (area V(nvidia)).
    type: str
  peermem:
    description: Require the nvidia-peermem module for that kernel (area V(nvidia)).
    type: bool
    default: true
  load_now:
    description:
      - Load nvidia-peermem into the running kernel when it is wanted (O(peermem)), not loaded, and can be
        (area V(nvidia)); see the description. False reads only.
    type: bool
    default: false
  packages_pending:
    description:
      - The pinned packages are still to be installed (check mode predicted their transaction, nothing is on
        disk yet); nvidia-peermem for the running kernel is then taken as the pinned version when
        O(kernel_release) is the running kernel, so check mode predicts the live load a real run makes.
    type: bool
    default: false
  ofed_release:
    description: The pinned OFED release as C(ofed_info -s) prints it (area V(ofed)).
    type: str
  peermem_at_boot:
    description:
      - A C(modules-load.d) file (the role passes C(/etc/modules-load.d/nvidia-peermem.conf)) made what O(peermem)
        asks (area V(nvidia)) in this same call - naming C(nvidia-peermem) when true, absent when false - with
        RV(peermem_at_boot) saying what was done. Check mode predicts it; C(--diff) shows it. Empty leaves it alone.
    type: path
    default: ""
    version_added: 0.3.0
  services:
    description:
      - Units to read in the same call (area V(nvidia) - fabric manager, the persistence daemon), with one
        C(systemctl show); returned as RV(services), so the role enables and starts only what is not, and
        reads no C(service_facts). Reading only.
    type: list
    elements: str
    default: []
    version_added: 0.3.0
  fail_on_problems:
    description: Fail when a problem is found.
    type: bool
    default: true
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying the target.
    support: full
    details: Predicts the live load of nvidia-peermem (C(changed), C(loaded_now)) without loading it.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: partial
    details: The C(/etc/modules-load.d/nvidia-peermem.conf) change of O(peermem_at_boot), before and after.
  idempotent:
    description: When run twice in a row with the same arguments, the second run reports no change.
    support: full
"""

EXAMPLES = r"""
- name: Driver modules for the kernel that will boot, and the reboot they need
  gpufleet.provision.driver_state:
    root: "{{ gpufleet_hardware_root | default('/') }}"
    area: nvidia
    kernel_release: 6.8.0-45-generic
    driver_version: "550.90.07"
  register: state

- name: The same, loading nvidia-peermem now where it can be (no reboot for it)
  gpufleet.provision.driver_state:
    area: nvidia
    driver_version: "550.90.07"
    load_now: true
  register: state
"""

RETURN = r"""
kernel_release: {description: The kernel the modules were looked up for., returned: always, type: str}
loaded: {description: "Running driver version (area nvidia) or mlx5_core version (area ofed), or null.", returned: always, type: str}
modules:
  description: C(modinfo) fields per module name (C(filename), C(version), C(vermagic), C(kernel)), null when absent.
  returned: always
  type: dict
ofed_release: {description: "ofed_info -s of the node (area ofed), or null.", returned: always, type: str}
peermem_loaded: {description: "nvidia-peermem runs now, after a live load (null: no driver loaded).", returned: area nvidia, type: bool}
loaded_now:
  description: Modules loaded live by this run (check mode - that it would load).
  returned: area nvidia
  type: list
  elements: str
  sample: [nvidia-peermem]
peermem_at_boot:
  description: What this run did (check mode - would do) to C(/etc/modules-load.d/nvidia-peermem.conf) - V(write), V(remove) or null.
  returned: area nvidia
  type: str
services:
  description: Per unit of O(services) - C(enabled) (its unit file state lets C(systemctl enable) do nothing),
    C(active), C(sub) (C(running) for a daemon that runs) and C(file_state); empty without O(services).
  returned: always
  type: dict
  sample: {nvidia-fabricmanager: {enabled: true, active: true, sub: running, file_state: enabled}}
problems: {description: What would leave the next boot without a working module., returned: always, type: list, elements: str}
reboot_required: {description: The loaded modules differ from the ones the next boot loads., returned: always, type: bool}
reboot_reasons: {description: One line per reason., returned: always, type: list, elements: str}
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.provision.plugins.module_utils._node.fs import Root, WriteError, atomic_write, unwritable
from ansible_collections.gpufleet.provision.plugins.module_utils._os import driver_state as S

PEERMEM_SYS = "sys/module/nvidia_peermem"


def _read(root, rel):
    """Text of a kernel attribute under ``root``, None when absent or not a readable regular file
    (a FIFO or a folder never blocks the module: fs.Root)."""
    return Root(root).read(rel, optional=True) or None


def _modinfo(module, release, name):
    rc, out, _err = module.run_command(["modinfo", "-k", release, name], environ_update={"LC_ALL": "C"})
    return S.parse_modinfo(out) if rc == 0 and out.strip() else None


def _peermem_loaded(root):
    """nvidia-peermem's version when it runs ("" without a version file), None when it does not."""
    if not os.path.isdir(os.path.join(root, PEERMEM_SYS)):
        return None
    return _read(root, PEERMEM_SYS + "/version") or ""


def _modprobe(module, root):
    """Load nvidia-peermem now and read it back: the reboot reason it leaves, or None."""
    modprobe = module.get_bin_path("modprobe")
    if modprobe is None:
        return S.load_outcome(127, "modprobe (kmod) not found on the node", False)
    rc, _out, err = module.run_command([modprobe, "nvidia-peermem"], environ_update={"LC_ALL": "C"})
    return S.load_outcome(rc, err, _peermem_loaded(root) is not None)


def _running_peermem(module, p, running, kernel, next_boot):
    """nvidia-peermem on disk for the RUNNING kernel (``next_boot``'s modinfo when it is the same kernel)."""
    if running == kernel:
        found = next_boot
    else:
        found = _modinfo(module, running, "nvidia-peermem") if running else None
    return S.peermem_on_disk(found, p["driver_version"], kernel, running, p["packages_pending"])


def _peermem(module, p, loaded, running, kernel, next_boot):
    """(reasons, loaded_now, runs) of nvidia-peermem: loaded live where it can be (check mode: predicted)."""
    current = _peermem_loaded(p["root"])
    if not (p["peermem"] and loaded):
        return [], [], current is not None
    on_disk = _running_peermem(module, p, running, kernel, next_boot)
    action, reason = S.peermem_plan(p["driver_version"], loaded, current, on_disk, running or "unknown")
    if action != "load" or not p["load_now"]:
        return ([reason] if reason else []), [], current is not None
    reason = None if module.check_mode else _modprobe(module, p["root"])
    if reason:
        return [reason], [], False
    return [], ["nvidia-peermem"], True


def _nvidia(module, p, kernel, running):
    loaded = _read(p["root"], "sys/module/nvidia/version")
    mods = {"nvidia": _modinfo(module, kernel, "nvidia"),
            "nvidia-peermem": _modinfo(module, kernel, "nvidia-peermem") if p["peermem"] else None}
    problems, reasons = S.nvidia_state(p["driver_version"], loaded, mods["nvidia"], mods["nvidia-peermem"],
                                       kernel, peermem_wanted=p["peermem"])
    peermem_reasons, loaded_now, runs = _peermem(module, p, loaded, running, kernel, mods["nvidia-peermem"])
    return dict(loaded=loaded, modules=mods, problems=problems, reboot_reasons=reasons + peermem_reasons,
                peermem_loaded=runs if loaded else None, loaded_now=loaded_now, changed=bool(loaded_now))


def _ofed(module, p, kernel, running):
    loaded = _read(p["root"], "sys/module/mlx5_core/version")
    mods = {"mlx5_core": _modinfo(module, kernel, "mlx5_core")}
    installed = None
    if module.get_bin_path("ofed_info"):
        rc, out, _err = module.run_command(["ofed_info", "-s"])
        if rc == 0:
            installed = S.parse_ofed_release(out)
    problems, reasons = S.ofed_state(p["ofed_release"], installed, mods["mlx5_core"], kernel, loaded, running)
    return dict(loaded=loaded, modules=mods, problems=problems, reboot_reasons=reasons, ofed_release=installed,
                changed=False)


def _peermem_at_boot_plan(path, wanted):
    """(action or None, diff or None) of the modules-load.d file ``path`` against ``wanted``; in check
    mode too, the file that is not text or cannot be made is an error naming it."""
    current = S.read_text_file(path)
    action = S.peermem_at_boot_plan(current, wanted)
    problem = unwritable(path) if action == "write" else None
    if problem:
        raise S.DriverStateError("%s: cannot be written: %s" % (path, problem))
    diff = {"before": current or "", "after": S.PEERMEM_AT_BOOT_TEXT if wanted else "", "before_header": path,
            "after_header": path} if action else None
    return action, diff


def _peermem_at_boot(path, action):
    """Make the file what ``action`` says (fs.atomic_write: all or nothing)."""
    try:
        if action == "remove":
            os.unlink(path)
        elif action == "write":
            os.makedirs(os.path.dirname(path), exist_ok=True)
            atomic_write(path, S.PEERMEM_AT_BOOT_TEXT, mode=0o644)
    except WriteError as exc:
        raise S.DriverStateError(str(exc))
    except (IOError, OSError) as exc:
        raise S.DriverStateError("%s: cannot %s it (%s)" % (path, action, exc.strerror or exc))


def _services(module, names):
    """{unit: {enabled, active, sub, file_state}} of ``names`` in one systemctl call ({} without names)."""
    if not names:
        return {}
    systemctl = module.get_bin_path("systemctl", required=True)
    units = [n if "." in n else n + ".service" for n in names]
    rc, out, err = module.run_command([systemctl, "show", "--property=Id,UnitFileState,ActiveState,SubState"] + units,
                                      environ_update={"LC_ALL": "C"})
    if rc != 0:
        module.fail_json(msg="driver_state: systemctl show %s failed (exit %d): %s" % (" ".join(units), rc, (err or out).strip()))
    found = S.parse_systemctl_show(out)
    return dict((n, found.get(n, {"enabled": False, "active": False, "sub": None, "file_state": None})) for n in names)


def run(module):
    """The result; the file of O(peermem_at_boot) changed last, only when the call does not fail."""
    p = module.params
    S.check_arguments(p)
    root = p["root"]
    if not os.path.isdir(root):
        raise S.DriverStateError("root %s is not a folder" % root)
    running = _read(root, "proc/sys/kernel/osrelease")
    kernel = p["kernel_release"] or running
    if not kernel:
        raise S.DriverStateError("no kernel_release given and %s unreadable" % os.path.join(root, "proc/sys/kernel/osrelease"))
    if not p["kernel_release"]:
        S.check_arguments({"kernel_release": kernel})
    if module.get_bin_path("modinfo") is None:
        raise S.DriverStateError("modinfo (kmod) not found on the node")
    action = diff = None
    if p["area"] == "nvidia" and p["peermem_at_boot"]:
        action, diff = _peermem_at_boot_plan(p["peermem_at_boot"], p["peermem"])
    result = {"kernel_release": kernel, "ofed_release": None, "services": _services(module, p["services"])}
    result.update((_nvidia if p["area"] == "nvidia" else _ofed)(module, p, kernel, running))
    result["reboot_required"] = bool(result["reboot_reasons"])
    if p["area"] == "nvidia":
        result["peermem_at_boot"] = action
        result["changed"] = result["changed"] or bool(diff)
        if diff and module._diff:
            result["diff"] = diff
    if result["problems"] and p["fail_on_problems"]:
        # failing: the modules-load.d file is left as it is (nothing changed before a failure)
        if p["area"] == "nvidia":
            result.update(peermem_at_boot=None, changed=bool(result["loaded_now"]))
            result.pop("diff", None)
        result["failed_msg"] = "driver_state (%s, kernel %s): %s" % (p["area"], kernel, "; ".join(result["problems"]))
        return result
    if action and not module.check_mode:
        _peermem_at_boot(p["peermem_at_boot"], action)
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            root=dict(type="path", default="/"),
            area=dict(type="str", choices=["nvidia", "ofed"], required=True),
            kernel_release=dict(type="str", default=""),
            driver_version=dict(type="str"),
            peermem=dict(type="bool", default=True),
            load_now=dict(type="bool", default=False),
            packages_pending=dict(type="bool", default=False),
            ofed_release=dict(type="str"),
            services=dict(type="list", elements="str", default=[]),
            peermem_at_boot=dict(type="path", default=""),
            fail_on_problems=dict(type="bool", default=True),
        ),
        required_if=[("area", "nvidia", ["driver_version"])],
        supports_check_mode=True,
    )
    try:
        result = run(module)
    except S.DriverStateError as exc:
        module.fail_json(msg="driver_state: %s" % exc)
    if result.get("failed_msg"):
        msg = result.pop("failed_msg")
        module.fail_json(msg=msg, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
