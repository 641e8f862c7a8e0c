#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: grub_default
short_description: Make a kernel release the entry GRUB boots next
version_added: 0.2.0
description:
  - Reads the default entry of O(grub_cfg) as GRUB resolves it (C(GRUB_DEFAULT) index, title, id,
    C(submenu>entry), C(saved) with C(grubenv)). When it does not boot O(release), regenerates the
    configuration (a freshly installed kernel has no entry yet); when C(GRUB_DEFAULT) then still
    boots another kernel (an older release is wanted, or C(GRUB_DEFAULT) names another entry), sets
    C(GRUB_DEFAULT) to the release's own menu entry, by ids, in the GRUB source that decides it, and
    regenerates again. Other kernels stay installed and in the menu.
  - Edits and runs nothing, and fails naming the file and line, when a GRUB source is binary, has a
    quote never closed or sets C(GRUB_DEFAULT) other than as C(NAME=value); so it does when O(release)
    is not a kernel release or the program of O(regenerate) is not there (check mode too).
  - Says whether the node needs a reboot from state (next boot's release against C(osrelease) under
    O(hardware_root)), and why.
author:
  - gpufleet maintainers (@gpufleet)
options:
  release:
    description: Kernel release (C(6.8.0-45-generic)); C(boot/vmlinuz-<release>) must be installed.
    type: str
    required: true
  root:
    description: Root of the node's OS files.
    type: path
    default: /
  hardware_root:
    description: Root under which C(proc/sys/kernel/osrelease) is read (a lab twin's rendered view).
    type: path
    default: /
  grub_cfg:
    description: The generated GRUB configuration, relative to O(root).
    type: str
    default: boot/grub/grub.cfg
  regenerate:
    description: Command (argv) that regenerates the GRUB configuration.
    type: list
    elements: str
    default: [update-grub]
attributes:
  check_mode:
    support: full
    description: Predicts regeneration and C(GRUB_DEFAULT) from the sources and the installed kernels
      (a release that is not installed yet is predicted as installed, as the kernel role's check mode needs).
  diff_mode:
    support: full
    description: The next boot's kernel before and after, and the edited source.
  idempotent:
    support: full
    description: A default entry that boots the release gives C(changed=false).
notes:
  - Debian and Ubuntu. RHEL family (BLS) uses C(grubby --set-default); not done by this module.
"""

EXAMPLES = r"""
- name: Boot the profile's kernel next
  gpufleet.provision.grub_default:
    release: 6.8.0-45-generic
  register: default
"""

RETURN = r"""
next_release:
  description: The release the next boot runs.
  returned: always
  type: str
previous_release:
  description: The release the default entry booted before (null without grub.cfg).
  returned: always
  type: str
grub_default:
  description: The C(GRUB_DEFAULT) written, null when it was left alone.
  returned: always
  type: str
regenerated:
  description: Whether the configuration was (would be) regenerated.
  returned: always
  type: bool
reboot_required:
  description: The next boot's release differs from the running one.
  returned: always
  type: bool
reboot_reasons:
  description: Why.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.provision.plugins.module_utils._os import grub as _grub
from ansible_collections.gpufleet.provision.plugins.module_utils._os import nextboot as _nextboot
from ansible_collections.gpufleet.provision.plugins.module_utils._os import state as os_state
from ansible_collections.gpufleet.provision.plugins.module_utils._node.fs import Root


def _regenerate(module):
    argv = module.params["regenerate"]
    rc, out, err = module.run_command(argv)
    if rc != 0:
        raise os_state.OsLayerError("%s failed (exit %d): %s" % (" ".join(argv), rc, (err or out).strip()[-2000:]))
    return os_state.read_cfg(Root(module.params["root"]), module.params["grub_cfg"])


def run(module):
    p = module.params
    os_state.check_release(p["release"])
    problem = os_state.path_problem(p, ("root", "hardware_root", "grub_cfg"))
    if problem:
        raise os_state.OsLayerError(problem)
    state = os_state.default_state(p["root"], p["hardware_root"], p["release"], p["grub_cfg"])
    state["predict"] = module.check_mode
    plan = os_state.default_plan(state)
    if plan["regenerate"] or plan["set_default"]:
        # before anything is run or edited (and in check mode: it predicts this failure)
        os_state.check_program(p["regenerate"], lambda name: module.get_bin_path(name, opt_dirs=["/usr/sbin", "/sbin"]))
    before = state["entry"]["release"] if state["entry"] else None
    result = {"changed": plan["regenerate"] or bool(plan["set_default"]), "previous_release": before,
              "next_release": plan["next"], "grub_default": None, "regenerated": plan["regenerate"]}
    if not module.check_mode and result["changed"]:
        cfg = _regenerate(module) if plan["regenerate"] else state["cfg"]
        entry = _grub.default_entry(cfg) if cfg else None
        if entry is None or entry["release"] != p["release"]:
            value = _grub.entry_for_release(cfg or "", p["release"])
            if value is None:
                raise os_state.OsLayerError("%s has no menu entry for kernel %s after %s" % (
                    p["grub_cfg"], p["release"], " ".join(p["regenerate"])))
            try:
                edits = _grub.set_default(state["sources"], value)
            except _grub.GrubError as exc:
                raise os_state.OsLayerError("%s (from %s)" % (exc, p["grub_cfg"]))
            os_state.write_sources(Root(p["root"]), edits, state["sources"])
            result["grub_default"] = value
            cfg = _regenerate(module)
            result["regenerated"] = True
            entry = _grub.default_entry(cfg) if cfg else None
            if entry is None or entry["release"] != p["release"]:
                raise os_state.OsLayerError("GRUB_DEFAULT=%s written, but the default entry of %s boots %s, not %s" % (
                    value, p["grub_cfg"], entry["release"] if entry else "nothing", p["release"]))
    elif module.check_mode and plan["set_default"]:
        result["grub_default"] = "(the menu entry of %s)" % p["release"]
    if module._diff:
        result["diff"] = {"before_header": "next boot's kernel", "after_header": "next boot's kernel",
                          "before": "%s\n" % before, "after": "%s\n" % plan["next"]}
    reasons = _nextboot.kernel_reasons(plan["next"], state["running"])
    result.update(reboot_required=bool(reasons), reboot_reasons=reasons)
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            release=dict(type="str", required=True),
            root=dict(type="path", default="/"),
            hardware_root=dict(type="path", default="/"),
            grub_cfg=dict(type="str", default="boot/grub/grub.cfg"),
            regenerate=dict(type="list", elements="str", default=["update-grub"]),
        ),
        supports_check_mode=True,
    )
    try:
        result = run(module)
    except os_state.OsLayerError as exc:
        module.fail_json(msg="grub_default: %s" % exc)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
