#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: validate_node
short_description: Evaluate every validation check of a node profile in one call
version_added: 0.1.0
description:
  - Reads the node's hardware and kernel state through O(root) (the same collector as
    M(gpufleet.provision.node_facts)), evaluates every check of the gate against O(profile) and the
    inputs a role collected with standard modules, and returns one report.
  - All checks run in this one process; nothing on the node is changed.
  - A check without data is V(skip) with a reason starting with C(no data), never V(pass). A check
    listed in the profile's C(require) (and every enabled active probe) turns a skip into V(fail).
  - Check ids (C(kernel.cmdline), C(pcie.acs), ...) are a stable interface; see docs/checks.md.
author:
  - gpufleet maintainers (@gpufleet)
options:
  profile:
    description:
      - The node profile (golden manifest) as a mapping; see docs/profile.md and
        C(inventories/profiles/*.yml).
      - Validated strictly, an unknown key or a value of the wrong type fails the task naming the key.
    type: dict
    required: true
  packages:
    description:
      - Installed packages as C(ansible.builtin.package_facts) returns them in C(ansible_facts.packages).
      - Omitted, the checks that need them report no data.
    type: dict
  services:
    description:
      - Services as C(ansible.builtin.service_facts) returns them in C(ansible_facts.services).
    type: dict
  outputs:
    description:
      - Captured command output by name, as text or as a registered C(ansible.builtin.command)
        result (rc 0 gives its stdout; otherwise its stderr or msg becomes the cause in the reason
        of the checks that need it), for example C(nvidia_smi_q) (C(nvidia-smi -q)), C(ofed_info)
        (C(ofed_info -s)), C(modinfo_mlx5_core) (C(modinfo -F vermagic mlx5_core)),
        C(apt_mark_showhold), C(mlxconfig_<pci>) (C(mlxconfig -e -d <pci> q ATS_ENABLED)),
        C(kernel_log) (C(journalctl -k -b 0)), C(nvidia_smi_nvlink) (C(nvidia-smi nvlink -s)),
        C(nvme_smart_<nvmeN>) (C(nvme smart-log -o json /dev/<nvmeN>)), and the active probes'
        C(nccl_debug), C(h2d_bandwidth), C(p2p_bandwidth), C(gdr_bandwidth) and C(dcgm_diag).
    type: dict
    default: {}
  output_errors:
    description:
      - Why an output could not be collected, by output name (for example C(command not found)).
        Used in the reason of the checks that then have no data.
    type: dict
    default: {}
  node:
    description:
      - Node name in the report, the JUnit suite and the Prometheus labels (the role passes
        C(inventory_hostname)).
      - Defaults to the host name under O(root) (C(etc/hostname)), else the local host name.
    type: str
extends_documentation_fragment:
  - gpufleet.provision.hardware_root
  - gpufleet.provision.hardware_root.READ_ONLY
notes:
  - Runtime of the non-probe checks on the reference HGX tree is well under 100 ms (benchmarks/validate_bench.py).
seealso:
  - module: gpufleet.provision.node_facts
"""

EXAMPLES = r"""
- name: Validate a node against the HGX H100 profile
  gpufleet.provision.validate_node:
    profile: "{{ lookup('ansible.builtin.file', 'inventories/profiles/hgx-h100.yml') | from_yaml }}"
    packages: "{{ ansible_facts.packages }}"
    services: "{{ ansible_facts.services }}"
    outputs:
      nvidia_smi_q: "{{ nvidia_smi_q.stdout }}"
    node: "{{ inventory_hostname }}"
  register: validation

- name: Evaluate a captured tree (no host state read)
  gpufleet.provision.validate_node:
    root: /srv/captures/node001
    profile:
      name: smoke
      kernel:
        release: 6.8.0-45-generic
"""

RETURN = r"""
report:
  description: The validation report.
  returned: success
  type: dict
  contains:
    status:
      description: V(pass) when no check failed or errored, else V(fail).
      type: str
      sample: fail
    node:
      description: Node name.
      type: str
      sample: node001
    profile:
      description: The profile's C(name).
      type: str
      sample: hgx-h100
    failed:
      description: Ids of the checks that failed or errored.
      type: list
      elements: str
      sample: [kernel.cmdline]
    counts:
      description: Number of checks per status.
      type: dict
      sample: {pass: 27, fail: 1, skip: 2, error: 0}
    checks:
      description: One entry per check id, in a stable order.
      type: list
      elements: dict
      sample:
        - id: kernel.cmdline
          status: fail
          observed: {raw: "... hugepagesz=1G hugepages=16 hugepages=16"}
          expected: {required: [intel_iommu=on]}
          reason: "hugepages=16 (proc/cmdline) follows hugepages=128 (proc/cmdline) with no hugepagesz= between them: ..."
          prevents: "hugepages= twice (the kernel ignores the second ...)"
          remedy: "set the parameters once in GRUB_CMDLINE_LINUX (/etc/default/grub), update-grub (...), reboot"
facts:
  description: The facts the checks were evaluated on (schema of C(ansible_facts.gpufleet), docs/facts.md).
  returned: success
  type: dict
junit:
  description: The report as a JUnit XML document, one testcase per check.
  returned: success
  type: str
prometheus:
  description: The report in the Prometheus textfile-collector format (C(gpufleet_check{node,check})).
  returned: success
  type: str
summary:
  description: One line for the play output, naming the failing check ids.
  returned: success
  type: str
  sample: "node001 QUARANTINE (profile hgx-h100): kernel.cmdline [29 pass, 1 fail, 0 error, 2 skip]"
details:
  description: One line per failing or erroring check with its reason and remedy (empty for a green node).
  returned: success
  type: list
  elements: str
  sample: ["memory.thp FAIL: enabled is [always] -> fix: transparent_hugepage=never on the kernel command line (...)"]
"""

import os
import socket
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.provision.plugins.module_utils._gate import gate
from ansible_collections.gpufleet.provision.plugins.module_utils import _profile
from ansible_collections.gpufleet.provision.plugins.module_utils import _report
from ansible_collections.gpufleet.provision.plugins.module_utils._facts import collect
from ansible_collections.gpufleet.provision.plugins.module_utils._fs import Root


def _node_name(fs, given):
    if given:
        return given
    name = fs.read("etc/hostname", optional=True)
    return name.split()[0] if name else socket.gethostname()


def split_outputs(outputs, errors):
    """Outputs by name -> (texts, errors). A value is the text, or a registered
    ``ansible.builtin.command`` result: rc 0 gives its stdout; otherwise the cause (an absent
    command: "[Errno 2] No such file or directory: b'nvidia-smi'") goes to the check's reason."""
    texts, causes = {}, dict((k, str(v)) for k, v in (errors or {}).items())
    for name, value in (outputs or {}).items():
        if isinstance(value, str):
            texts[name] = value
        elif isinstance(value, dict):
            if value.get("skipped"):
                causes.setdefault(name, "not run (%s)" % (value.get("skip_reason") or "skipped"))
            elif value.get("rc") == 0 and not value.get("failed"):
                texts[name] = value.get("stdout") or ""
            else:
                detail = (value.get("stderr") or value.get("msg") or "").strip().splitlines()
                cmd = value.get("cmd") or name
                cmd = " ".join(str(c) for c in cmd) if isinstance(cmd, list) else str(cmd)
                cause = "%s: rc=%s, %s" % (cmd, value.get("rc"), detail[0][:200] if detail else "no message")
                # ansible.builtin.command reports a missing executable as rc 2 "Error executing command."
                # with no output at all (the OSError text is not returned).
                if value.get("rc") == 2 and not value.get("stdout") and not value.get("stderr"):
                    cause += " (command absent or not executable?)"
                causes[name] = cause
        elif value is not None:
            raise _profile.ProfileError("outputs.%s: expected text or a registered command result, got %s"
                                        % (name, type(value).__name__))
    return texts, causes


def run(params):
    """Validate the profile, collect facts, evaluate. Returns the module result (raises ProfileError)."""
    profile = _profile.validate(params["profile"], gate.CHECK_IDS)
    root = params["root"] or "/"
    if not os.path.isdir(root):
        raise _profile.ProfileError("root %s: not a directory" % root)
    facts, warnings = collect(root)
    fs = Root(root)
    outputs, causes = split_outputs(params.get("outputs"), params.get("output_errors"))
    inputs = gate.Inputs(facts, profile, packages=params.get("packages"), services=params.get("services"),
                         outputs=outputs, output_errors=causes,
                         grub=gate.read_grub_sources(fs))
    report = gate.evaluate(inputs, node=_node_name(fs, params.get("node")))
    return {
        "changed": False,
        "report": report,
        "facts": facts,
        "junit": _report.junit(report),
        "prometheus": _report.prometheus(report, time.time()),
        "summary": _report.summary(report),
        "details": _report.details(report),
        "warnings": warnings,
    }


def main():
    module = AnsibleModule(
        argument_spec=dict(
            root=dict(type="path", default="/"),
            profile=dict(type="dict", required=True),
            packages=dict(type="dict"),
            services=dict(type="dict"),
            outputs=dict(type="dict", default={}),
            output_errors=dict(type="dict", default={}),
            node=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    try:
        result = run(module.params)
    except _profile.ProfileError as exc:
        module.fail_json(msg=str(exc))
    warnings = result.pop("warnings")
    for line in warnings:
        module.warn(line)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
