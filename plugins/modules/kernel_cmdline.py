#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: kernel_cmdline
short_description: Own the kernel command line across every GRUB source
version_added: 0.2.0
description:
  - Edits C(/etc/default/grub) and every C(/etc/default/grub.d/*.cfg) (where cloud images put
    settings) so the command line they give has each O(required) parameter exactly once, in order
    (C(hugepagesz=) before its C(hugepages=)), no O(forbidden) parameter and no duplicate, wherever
    they were. Other parameters stay as and where they are; sources that are already right are left
    byte for byte, whatever order the parameters are in.
  - Runs O(regenerate) (C(update-grub)) only when a source changed or when the default entry of
    O(grub_cfg) does not give what the sources give (a run interrupted before regenerating).
  - Edits nothing, and fails naming the file and line, when a source is not one update-grub could
    source as read here (binary or not UTF-8, a quote never closed, a C(GRUB_CMDLINE_*) line that is
    not C(NAME=value)), when a parameter is not one word GRUB can carry (blanks, quotes, C($),
    backticks, backslashes, control characters), or when O(regenerate) is needed and its program is
    not there. Check mode fails the same. Sources are written all or none.
  - Says whether the node needs a reboot from state, not from C(changed) - the command line the next
    boot gets against C(proc/cmdline) under O(hardware_root), restricted to the parameters it owns -
    and why (O(ignore:reboot_reasons)).
author:
  - gpufleet maintainers (@gpufleet)
options:
  required:
    description:
      - Parameters (C(key) or C(key=value)) in the order to write them. The hugepage ones are one
        block, written and checked in exactly this order.
      - The role passes C(gpufleet.provision.desired('kernel_cmdline')) of the node profile.
    type: list
    elements: str
    required: true
  forbidden:
    description: Parameters removed wherever they are; a bare C(key) removes every value of it.
    type: list
    elements: str
    default: []
  allow_repeated:
    description: Keys that may appear several times (C(console)); never removed as duplicates.
    type: list
    elements: str
    default: []
  root:
    description: Root of the node's OS files (C(etc/default/grub), O(grub_cfg)).
    type: path
    default: /
  hardware_root:
    description: Root under which C(proc/cmdline) is read (a lab twin's rendered view).
    type: path
    default: /
  grub_cfg:
    description:
      - The generated GRUB configuration relative to O(root), read for the default entry. Empty for
        systems without one (BLS entries); then the sources alone are the next boot.
    type: str
    default: boot/grub/grub.cfg
  regenerate:
    description: Command (argv) that regenerates the GRUB configuration; C([]) never regenerates.
    type: list
    elements: str
    default: [update-grub]
attributes:
  check_mode:
    support: full
    description: Predicts the edits, the regeneration and the reboot; writes and runs nothing.
  diff_mode:
    support: full
    description: One diff per edited source, and the command line before and after.
  idempotent:
    support: full
    description: Right sources and a current grub.cfg give C(changed=false).
notes:
  - On the RHEL family with BLS entries, set O(grub_cfg) to C("") and O(regenerate) to
    C([grub2-mkconfig, -o, /boot/grub2/grub.cfg, --update-bls-cmdline]) (RHEL 9.3+); C(grubby) per
    entry is not done by this module.
"""

EXAMPLES = r"""
- name: The profile's command line in every GRUB source
  gpufleet.provision.kernel_cmdline:
    required: "{{ lookup('gpufleet.provision.profile', 'hgx-h100') | gpufleet.provision.desired('kernel_cmdline') }}"
    forbidden: [pci=noats, intel_iommu=off]
    allow_repeated: [console]
  register: cmdline

- name: Show why a reboot is needed
  ansible.builtin.debug:
    msg: "{{ cmdline.reboot_reasons }}"
"""

RETURN = r"""
files:
  description: Sources edited (or that would be, in check mode), relative to O(root).
  returned: always
  type: list
  elements: str
  sample: [etc/default/grub, etc/default/grub.d/50-cloudimg-settings.cfg]
cmdline_before:
  description: The command line the sources gave before (GRUB_CMDLINE_LINUX then _DEFAULT).
  returned: always
  type: str
cmdline_after:
  description: The command line the sources give now.
  returned: always
  type: str
  sample: intel_iommu=on iommu=pt hugepagesz=1G hugepages=128 quiet
problems:
  description: What was wrong with the sources before (empty when nothing was).
  returned: always
  type: list
  elements: str
regenerated:
  description: Whether O(regenerate) ran (would run, in check mode).
  returned: always
  type: bool
reboot_required:
  description: Whether the next boot's command line differs from the running one on the owned parameters.
  returned: always
  type: bool
reboot_reasons:
  description: Why, naming the parameters.
  returned: always
  type: list
  elements: str
  sample: ["GRUB will boot intel_iommu=on hugepagesz=1G hugepages=128, running has intel_iommu=on hugepagesz=1G hugepages=64 hugepages=32"]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.provision.plugins.module_utils._os import cmdline as _cmdline
from ansible_collections.gpufleet.provision.plugins.module_utils._os import nextboot as _nextboot
from ansible_collections.gpufleet.provision.plugins.module_utils._os import state as os_state
from ansible_collections.gpufleet.provision.plugins.module_utils._node.fs import Root


def run(module):
    params = module.params
    problem = os_state.path_problem(params, ("root", "hardware_root", "grub_cfg"))
    if problem:
        raise os_state.OsLayerError(problem)
    try:
        rule = _cmdline.rules(params["required"], params["forbidden"], params["allow_repeated"])
    except _cmdline.CmdlineError as exc:
        raise os_state.OsLayerError(str(exc))
    state = os_state.cmdline_state(params["root"], params["hardware_root"], rule, params["grub_cfg"])
    plan = state["plan"]
    regenerate = bool(params["regenerate"]) and os_state.needs_regeneration(state, rule)
    result = {
        "changed": bool(plan["changed"]) or regenerate,
        "files": sorted(plan["changed"]),
        "cmdline_before": " ".join(plan["before"]),
        "cmdline_after": " ".join(plan["after"]),
        "problems": plan["problems"],
        "regenerated": regenerate,
    }
    if module._diff:
        sources = dict(state["sources"])
        result["diff"] = [{"before_header": rel, "after_header": rel, "before": sources[rel], "after": text}
                          for rel, text in sorted(plan["changed"].items())]
        result["diff"].append({"before_header": "kernel command line (GRUB sources)", "after_header": "kernel command line (GRUB sources)",
                               "before": result["cmdline_before"] + "\n", "after": result["cmdline_after"] + "\n"})
    entry = None if regenerate else state["entry"]
    if regenerate:
        # before any source is edited (and in check mode: it predicts this failure)
        os_state.check_program(params["regenerate"], lambda name: module.get_bin_path(name, opt_dirs=["/usr/sbin", "/sbin"]))
    if not module.check_mode:
        os_state.write_sources(Root(params["root"]), plan["changed"], state["sources"])
        if regenerate:
            rc, out, err = module.run_command(params["regenerate"])
            if rc != 0:
                raise os_state.OsLayerError("%s failed (exit %d): %s" % (" ".join(params["regenerate"]), rc, (err or out).strip()[-2000:]))
            entry = os_state.read_entry(Root(params["root"]), params["grub_cfg"])
            if entry is not None and _cmdline.owned_view(entry["args"], rule) != _cmdline.owned_view(plan["after"], rule):
                raise os_state.OsLayerError(
                    "%s ran, but the default entry of %s (%s) boots %s, not what the sources give (%s): does GRUB_DEFAULT "
                    "point to a custom entry?" % (
                        " ".join(params["regenerate"]), params["grub_cfg"], entry["title"], " ".join(entry["args"]),
                        result["cmdline_after"]))
    # The next boot: grub.cfg's default entry when it is current, else what the sources will give.
    next_words = entry["args"] if entry is not None else plan["after"]
    reasons = _nextboot.cmdline_reasons(next_words, state["running"], rule)
    result["reboot_reasons"] = reasons
    result["reboot_required"] = bool(reasons)
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            required=dict(type="list", elements="str", required=True),
            forbidden=dict(type="list", elements="str", default=[]),
            allow_repeated=dict(type="list", elements="str", default=[]),
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
        module.fail_json(msg="kernel_cmdline: %s" % exc)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
