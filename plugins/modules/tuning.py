#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: tuning
short_description: Hugepage pools, THP, NUMA balancing and CPU governor, persistent and at run time
version_added: 0.2.0
description:
  - "Persistent: writes C(/etc/sysctl.d/90-gpufleet-tuning.conf) (C(kernel.numa_balancing)) and a
    boot script + oneshot unit (C(gpufleet-tuning.service), not enabled by this module) that set THP
    and the governor at boot, writing only what differs. Hugepage pools persist through the kernel
    command line (M(gpufleet.provision.kernel_cmdline))."
  - "Run time (O(runtime)): writes each differing setting through O(hardware_root) and reads it back;
    a setting that did not take (1 GiB pages the kernel could not find, a THP file that does not
    accept the mode) is a reboot reason naming it."
  - "Every option, file and setting is read and checked before the first write (files read without
    blocking; a FIFO or a folder where a file goes fails naming it); files are replaced whole through a
    temporary file beside them, and a write that fails names the path and leaves nothing behind."
author:
  - gpufleet maintainers (@gpufleet)
options:
  hugepages:
    description: Pool size in kB -> page count (the profile's C(memory.hugepages)); both whole numbers, the count 0 or more.
    type: dict
    default: {}
  thp:
    description: Transparent hugepages mode; unset leaves it alone.
    type: str
    choices: [always, madvise, never]
  numa_balancing:
    description: C(kernel.numa_balancing) value; unset leaves it alone.
    type: int
    choices: [0, 1]
  governor:
    description: cpufreq governor of every CPU (a governor's name such as C(performance)); unset leaves it alone.
    type: str
  runtime:
    description: Also apply the settings now, where the kernel allows it.
    type: bool
    default: true
  root:
    description: Root of the node's OS files (where the persistent files go).
    type: path
    default: /
  hardware_root:
    description: Root of sysfs/procfs for the run-time settings (a lab twin's rendered view).
    type: path
    default: /
attributes:
  check_mode:
    support: full
    description: Predicts every file and run-time write; a write that would not take cannot be known before it is tried.
  diff_mode:
    support: full
    description: Files before and after, and one line per run-time setting.
  idempotent:
    support: full
    description: A tuned node gives C(changed=false).
"""

EXAMPLES = r"""
- name: Tune the node as its profile says
  gpufleet.provision.tuning:
    hugepages: {"1048576": 128}
    thp: never
    numa_balancing: 0
    governor: performance
  register: tuned
"""

RETURN = r"""
files:
  description: Persistent files written or removed (relative to O(root)).
  returned: always
  type: list
  elements: str
runtime_changes:
  description: Run-time settings changed (or that would be), as C(name -> wanted) lines.
  returned: always
  type: list
  elements: str
  sample: ["kernel.numa_balancing: 1 -> 0", "governor of 2 CPUs (3,4): powersave -> performance"]
unit:
  description: Name of the boot unit (enable it), null when no boot-time setting is asked for.
  returned: always
  type: str
reboot_required:
  description: Whether a setting could not be made at run time.
  returned: always
  type: bool
reboot_reasons:
  description: Which, and what it read back.
  returned: always
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.provision.plugins.module_utils._os import nextboot as _nextboot
from ansible_collections.gpufleet.provision.plugins.module_utils._os import tuning as _tuning
from ansible_collections.gpufleet.provision.plugins.module_utils._node import fs as _fs


def _current(os_root, rel):
    """Text of a persistent file now, None when absent; TuningError naming it when it is not a
    regular file or cannot be read (read without blocking: a FIFO there never hangs the run)."""
    data = os_root.read_bytes(rel, optional=True)
    if data is None:
        problem = next((p for p in os_root.problems if p["path"] == rel), None)
        if problem:
            raise _tuning.TuningError("%s: %s" % (os_root.join(rel), problem["detail"]))
        return None
    return data.decode("utf-8", "replace")   # a binary file differs from the text wanted: it is rewritten


def _write(path, text, mode):
    try:
        folder = os.path.dirname(path)
        if not os.path.isdir(folder):
            os.makedirs(folder, 0o755)
        _fs.atomic_write(path, text, mode=mode)
    except (IOError, OSError) as exc:
        raise _tuning.TuningError("%s: cannot write (%s)" % (path, exc.strerror or exc))
    except _fs.WriteError as exc:
        raise _tuning.TuningError(str(exc))


def plan(module):
    """(edits {rel: (old, new)}, run-time items) with every option and file checked: nothing is
    written before both are known (check mode raises the same errors)."""
    p = module.params
    hugepages = _tuning.validate(p["hugepages"], p["governor"])
    os_root = _fs.Root(p["root"])
    wanted = _tuning.persistent_files(p["hardware_root"], p["thp"], p["numa_balancing"], p["governor"])
    edits = {}
    for rel, text in sorted(wanted.items()):
        current = _current(os_root, rel)
        if current != text and not (text is None and current is None):
            why = _fs.unwritable(os_root.join(rel)) if text is not None else None
            if why:
                raise _tuning.TuningError("%s: cannot write, %s" % (os_root.join(rel), why))
            edits[rel] = (current, text)
    items = _tuning.runtime_plan(_fs.Root(p["hardware_root"]), hugepages, p["thp"], p["numa_balancing"], p["governor"]) \
        if p["runtime"] else []
    return edits, items, wanted


def apply_runtime(hardware_root, item):
    """Write one run-time setting in place (a sysfs attribute is written, never replaced), read it
    back; the reboot reasons when it did not take."""
    hw = _fs.Root(hardware_root)
    path = hw.join(item["path"])
    original = hw.read_bytes(item["path"])
    try:
        with open(path, "w") as handle:
            handle.write(item["write"] + "\n")
    except (IOError, OSError) as exc:
        return ["%s: cannot write %s at run time (%s)" % (item["name"], path, exc.strerror or exc)]
    after = _tuning.read_back(_fs.Root(hardware_root), item)
    if after is None:
        # Not the kernel's file (it reads back as no setting at all): put back what was there,
        # so a run that stops before the reboot leaves the node as readable as it found it.
        now = _fs.Root(hardware_root).read_bytes(item["path"]) or b""
        after = repr(now.decode("utf-8", "replace").strip())
        try:
            with open(path, "wb") as handle:
                handle.write(original or b"")
            after += " (restored)"
        except (IOError, OSError) as exc:
            after += " (not restored: %s)" % (exc.strerror or exc)
    return _nextboot.runtime_reasons(item["name"], item["wanted"], after)


def run(module):
    p = module.params
    edits, items, wanted = plan(module)
    os_root = _fs.Root(p["root"])
    result = {
        "changed": bool(edits or items),
        "files": sorted(edits),
        "runtime_changes": _tuning.summary(items),
        "unit": os.path.basename(_tuning.UNIT) if wanted.get(_tuning.UNIT) else None,
        "reboot_reasons": [],
    }
    if module._diff:
        result["diff"] = [{"before_header": rel, "after_header": rel, "before": old or "", "after": new or ""}
                          for rel, (old, new) in sorted(edits.items())]
        if items:
            result["diff"].append({"before_header": "run time", "after_header": "run time", "before": "",
                                   "after": "\n".join(result["runtime_changes"]) + "\n"})
    if not module.check_mode:
        for rel, (_old, new) in sorted(edits.items()):
            path = os_root.join(rel)
            if new is None:
                try:
                    os.remove(path)
                except (IOError, OSError) as exc:
                    raise _tuning.TuningError("%s: cannot remove (%s)" % (path, exc.strerror or exc))
            else:
                _write(path, new, 0o755 if rel == _tuning.SCRIPT else 0o644)
        for item in items:
            result["reboot_reasons"] += apply_runtime(p["hardware_root"], item)
    result["reboot_required"] = bool(result["reboot_reasons"])
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            hugepages=dict(type="dict", default={}),
            thp=dict(type="str", choices=["always", "madvise", "never"]),
            numa_balancing=dict(type="int", choices=[0, 1]),
            governor=dict(type="str"),
            runtime=dict(type="bool", default=True),
            root=dict(type="path", default="/"),
            hardware_root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )
    try:
        result = run(module)
    except _tuning.TuningError as exc:
        module.fail_json(msg="tuning: %s" % exc)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
