#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: validate_node
short_description: The validation gate of a node in one round trip, reports written on the controller
version_added: 0.1.0
description:
  - On the node, reads the hardware and kernel state through O(root) (the same collector as
    M(gpufleet.provision.node_facts)) and what the checks need besides (installed packages from the
    package database, unit states from systemd, the read-only commands of O(commands), each with a
    timeout), evaluates the checks of the gate against O(profile), and returns one report. A
    command runs only when an evaluated check reads its output, once.
  - On the controller (action plugin), writes the JSON, JUnit and Prometheus reports into
    O(report_dir) (only the files whose content changed) and/or PUTs them to O(report_url), and
    returns a compact result (verdict, counts, the red checks with reason and remedy). Job events
    carry that, never the report or the fact tree.
  - Nothing on the node is changed.
  - A check without data is V(skip) with a reason starting with C(no data), never V(pass). A check
    listed in the profile's C(require) or in O(require) (and every enabled active probe) turns a skip
    into V(fail). A command that times out leaves its checks without data, the timeout as the cause.
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
  checks:
    description:
      - Evaluate only these check ids (a role's C(verify) asks for its own area). Empty, every check.
      - An unknown id fails the task naming it.
    type: list
    elements: str
    default: []
  require:
    description:
      - Check ids whose skip (no data) is a failure, in addition to the profile's C(require).
    type: list
    elements: str
    default: []
  commands:
    description:
      - The read-only commands whose output the checks read, by output name (argv lists), namely
        C(nvidia_smi_q), C(ofed_info), C(modinfo_mlx5_core), C(apt_mark_showhold), C(dnf_versionlock),
        C(kernel_log), C(nvidia_smi_nvlink), and one output per device for names with C({dev}),
        C(mlxconfig_{dev}) (C(mlxconfig -e -d {dev} q ATS_ENABLED), per rail NIC),
        C(mlnx_qos_{dev}) (C(mlnx_qos -i {dev}), per RoCE rail netdev) and
        C(nvme_smart_{dev}) (C(nvme smart-log -o json /dev/{dev}), per NVMe drive).
      - Omitted, the gate's own table (the validate role's C(validate_commands) default). A name
        absent from the table, or an empty list, runs nothing for it (its checks then have no data).
    type: dict
  command_timeout:
    description:
      - Seconds one command may run (coreutils C(timeout)); a command that takes longer is stopped
        and its checks report no data with the timeout as the cause.
    type: int
    default: 60
  probes:
    description:
      - The active probes' commands, probe name (C(nccl), C(h2d), C(p2p), C(gdr), C(dcgm)) to argv
        list. A probe runs only when the profile enables it (C(probes.<name>.enabled)) and its
        output is not in O(outputs), the first time a check reads its output, under O(probe_timeout).
      - A probe without a command here (or with an empty list) runs the shipped probe script
        (C(roles/validate/files/gpufleet_probe.py), see O(probe_script)) with O(probe_python); the
        gdr probe passes it the node's GPU-NIC pairs from the fact tree.
      - A probe that fails, cannot find its tool (the script exits 3, C(no data ...)) or times out
        leaves its checks without data, the cause in their reason; an enabled probe's checks then fail.
    type: dict
    default: {}
  probe_script:
    description:
      - The text of the probe script that probes without a command run, written to the module's
        temporary folder on the node for the run and removed with it.
      - The action plugin sets it from the collection's C(roles/validate/files/gpufleet_probe.py)
        when an enabled probe needs it; give it only to run another script.
    type: str
  probe_python:
    description: The Python on the node that runs the probe script (standard library only, 3.6 or later).
    type: str
    default: python3
  probe_dcgm_level:
    description: DCGM diagnostics level of the dcgm probe (1 takes seconds, 2 about 2 minutes, 3 about 15).
    type: int
    default: 1
    choices: [1, 2, 3, 4]
  probe_timeout:
    description:
      - Seconds one probe may run (coreutils C(timeout)) before it is stopped; its checks then
        report no data with the timeout as the cause.
    type: int
    default: 1800
  packages:
    description:
      - Recorded installed packages as C(ansible.builtin.package_facts) returns them, instead of
        reading the node's package database (offline evaluation of captures).
    type: dict
  services:
    description:
      - Recorded services as C(ansible.builtin.service_facts) returns them, instead of asking systemd.
    type: dict
  outputs:
    description:
      - Recorded command output by name, instead of running the command, as text or as a registered
        C(ansible.builtin.command) result (rc 0 gives its stdout; otherwise its stderr or msg becomes
        the cause in the reason of the checks that need it). The names of O(commands), the
        per-device names, and the active probes' C(nccl_debug), C(h2d_bandwidth), C(p2p_bandwidth),
        C(gdr_bandwidth) and C(dcgm_diag) (a recorded probe output is not probed again, see O(probes)).
    type: dict
    default: {}
  output_errors:
    description:
      - Why an output could not be collected, by output name (for example C(command not found)).
        Used in the reason of the checks that then have no data; the command is not run.
    type: dict
    default: {}
  node:
    description:
      - Node name in the report, the JUnit suite, the Prometheus labels and the report file names
        (the role passes C(inventory_hostname)).
      - Defaults to the host name under O(root) (C(etc/hostname)), else the local host name.
    type: str
  report_dir:
    description:
      - A folder on the controller for C(<node>.json) (report and facts), C(<node>.xml) (JUnit) and
        C(<node>.prom) (textfile collector). Created when absent. A file is written only when its
        content changed (the Prometheus timestamp aside), so a second run with the same verdicts
        writes nothing and reports C(changed=false). In check mode nothing is written.
    type: path
  report_url:
    description:
      - An HTTP(S) base URL each report file is PUT to (C(<url>/<node>.<ext>)), every run (the sink
        cannot be compared without fetching it). Not in check mode.
    type: str
  report_url_username:
    description: User name for basic authentication at O(report_url).
    type: str
  report_url_password:
    description: Password for basic authentication at O(report_url).
    type: str
  report_url_headers:
    description: Extra HTTP headers for the PUT requests (for example a token).
    type: dict
    default: {}
  report_url_validate_certs:
    description: Verify the TLS certificate of O(report_url).
    type: bool
    default: true
  fail_on_red:
    description:
      - Fail the task when a check fails or errors (a role's C(verify)); the message names every red
        check with its reason. Default, a red node is a successful task with V(fail) status.
    type: bool
    default: false
  return_report:
    description:
      - Also return the whole report (every check with observed and expected values) in RV(report).
        Off by default, the report goes to the report files and job events stay small.
    type: bool
    default: false
  ready_group:
    description:
      - Add a green node to this inventory group, as M(ansible.builtin.group_by) would (the result
        carries RV(add_group), which Ansible's strategy applies). Saves the gate a task per node.
      - Not applied when the task fails (O(fail_on_red) on a red node), as a failed node leaves the play.
      - Ansible then reports the task C(changed) when the group gains the node, in every fresh run (as
        for M(ansible.builtin.group_by)); add C(changed_when) on RV(reports_changed) to keep the
        meaning "a report file was written".
    type: str
  quarantine_group:
    description:
      - Add a red node to this inventory group (see O(ready_group)).
    type: str
  converged_stamp:
    description:
      - The path on the node of its converged stamp, what the node looked like at the end of its last
        green provisioning run (provision.yml uses C(/var/lib/gpufleet/converged.json)).
      - Without O(write_stamp), asks whether the node is converged. The node compares the stamp with
        O(desired_digest), the stat lines of every file provisioning manages, its boot id and kernel;
        any difference returns RV(converged=false) with the reasons at once, without evaluating a
        check, writing a report or joining a group. When they match, the gate runs as always and the
        node is converged when it is green and every check that passed at the stamp still passes;
        then the reports are written and the node joins O(converged_group) (a child of O(ready_group)).
        Otherwise RV(converged=false), no report, no group (the washing machine and its gate follow).
      - With O(write_stamp), the gate runs as always and a green node's stamp is written there.
    type: path
  converged_paths:
    description:
      - Paths on the node the converged stamp watches besides the files the roles write at their
        default places, absolute or relative to the OS root (a folder counts with everything under
        it). provision.yml gives the values of the role variables that move a file the roles write
        (C(pcie_lib_dir), C(pcie_config_file), C(firmware_node_dir), C(storage_fstab), C(kernel_grub_cfg))
        where they are set; the question and the stamp's writing must be given the same list.
      - Empty, the root itself or a path with a C(..) component fails naming it.
    type: list
    elements: str
    default: []
  desired_digest:
    description:
      - The digest of the desired state the stamp is compared with or written with (filter
        C(gpufleet.provision.desired_digest) of the profile, the role variables and the collection's files).
        Required with O(converged_stamp).
    type: str
  write_stamp:
    description:
      - Write the converged stamp at O(converged_stamp) when the node is green (never in check mode).
        provision.yml's gate sets it after a run that needs no pending reboot.
    type: bool
    default: false
  converged_group:
    description:
      - The group a converged node joins (RV(add_group)), made a child of O(ready_group) so the node
        is also in that group. provision.yml's gate play leaves the nodes of this group out.
    type: str
extends_documentation_fragment:
  - gpufleet.provision.hardware_root
attributes:
  check_mode:
    support: full
    description: The node is only read; in check mode the report files are not written (changed tells whether they would be).
  diff_mode:
    support: none
    description: Nothing on the node changes; the report files are the record of a run.
notes:
  - The in-process evaluation of the non-probe checks on the reference HGX tree takes well under
    100 ms (benchmarks/validate_bench.py); the whole gate cost per node is in benchmarks/fleet_bench.py.
seealso:
  - module: gpufleet.provision.node_facts
"""

EXAMPLES = r"""
- name: Validate a node against the HGX H100 profile, reports on the controller
  gpufleet.provision.validate_node:
    profile: "{{ lookup('gpufleet.provision.profile', 'hgx-h100') }}"
    node: "{{ inventory_hostname }}"
    report_dir: /srv/gpufleet/reports
  register: validation

- name: A role's verify step, the kernel command line only
  gpufleet.provision.validate_node:
    profile: "{{ lookup('gpufleet.provision.profile', 'hgx-h100') }}"
    checks: [kernel.cmdline, kernel.grub_sources]
    require: [kernel.cmdline]
    fail_on_red: true

- name: The gate of a fleet run, green and red nodes grouped in the same task
  gpufleet.provision.validate_node:
    profile: "{{ lookup('gpufleet.provision.profile', 'hgx-h100') }}"
    report_dir: /srv/gpufleet/reports
    ready_group: gpufleet_ready
    quarantine_group: gpufleet_quarantine
  register: gate
  changed_when: gate.reports_changed

- name: Evaluate a captured tree with recorded inputs (no host state read)
  gpufleet.provision.validate_node:
    root: /srv/captures/node001
    profile:
      name: smoke
      kernel:
        release: 6.8.0-45-generic
    packages: {}
    services: {}
    commands: {}
    return_report: true
"""

RETURN = r"""
status:
  description: V(pass) when no evaluated check failed or errored, else V(fail).
  returned: success
  type: str
  sample: fail
node:
  description: Node name.
  returned: success
  type: str
  sample: node001
profile:
  description: The profile's C(name).
  returned: success
  type: str
  sample: hgx-h100
failed_checks:
  description: Ids of the checks that failed or errored.
  returned: success
  type: list
  elements: str
  sample: [kernel.cmdline]
counts:
  description: Number of checks per status.
  returned: success
  type: dict
  sample: {pass: 27, fail: 1, skip: 2, error: 0}
checks:
  description: The status of every evaluated check, by id.
  returned: success
  type: dict
  sample: {kernel.cmdline: fail, pcie.acs: pass}
red:
  description: The failing or erroring checks with their reason and remedy.
  returned: success
  type: list
  elements: dict
  sample:
    - id: kernel.cmdline
      status: fail
      reason: "hugepages=16 (proc/cmdline) follows hugepages=128 (proc/cmdline) with no hugepagesz= between them"
      remedy: "set the parameters once in GRUB_CMDLINE_LINUX (/etc/default/grub), update-grub (...), reboot"
summary:
  description: One line for the play output, naming the failing check ids.
  returned: success
  type: str
  sample: "node001 QUARANTINE (profile hgx-h100): kernel.cmdline [29 pass, 1 fail, 0 error, 2 skip]"
collected:
  description: The commands the evaluated checks made the node run, by output name, V(ok) or the cause.
  returned: success
  type: dict
  sample: {nvidia_smi_q: ok, ofed_info: "ofed_info -s: command absent or not executable (...)"}
report_files:
  description:
    - The report files by format and whether each was written this run (V(written), V(unchanged), V(would write) in
      check mode, V(uploaded)).
    - V(refreshed) is a C(.prom) file whose verdicts are unchanged, rewritten only to move its
      C(gpufleet_validate_last_run_timestamp_seconds) (no change of the report, not counted in RV(reports_changed)).
  returned: when O(report_dir) or O(report_url) is set
  type: dict
  sample: {/srv/reports/node001.json: written, /srv/reports/node001.prom: unchanged}
reports_changed:
  description: Whether a report file was written (V(would write) in check mode); C(changed) unless a group option is set.
  returned: success
  type: bool
  sample: false
add_group:
  description: The group the node joins (O(ready_group) or O(quarantine_group)), applied by Ansible as for M(ansible.builtin.group_by).
  returned: when the group option for the node's verdict is set
  type: str
  sample: gpufleet_quarantine
converged:
  description: Whether the node is converged since its last green run (see O(converged_stamp)).
  returned: when O(converged_stamp) is set without O(write_stamp)
  type: bool
  sample: false
converged_reasons:
  description: Why the node is not converged (the first differences found), empty when it is.
  returned: when O(converged_stamp) is set without O(write_stamp)
  type: list
  elements: str
  sample: ["booted since the last green run"]
stamp:
  description: What became of the stamp, V(written), V(would write) in check mode, or why it was not written.
  returned: when O(write_stamp=true)
  type: str
  sample: written
report:
  description: The whole report (every check with observed, expected, reason, prevents, remedy).
  returned: when O(return_report=true)
  type: dict
facts:
  description: The facts the checks were evaluated on (schema of C(ansible_facts.gpufleet), docs/facts.md).
  returned: when O(return_report=true)
  type: dict
"""

import os
import socket

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.provision.plugins.module_utils._gate import collect as _collect
from ansible_collections.gpufleet.provision.plugins.module_utils._gate import gate
from ansible_collections.gpufleet.provision.plugins.module_utils._gate import probe_runs
from ansible_collections.gpufleet.provision.plugins.module_utils._gate.options import ARGUMENT_SPEC, CONTROLLER_OPTIONS
from ansible_collections.gpufleet.provision.plugins.module_utils._desired import profile as _profile
from ansible_collections.gpufleet.provision.plugins.module_utils._node.facts import collect
from ansible_collections.gpufleet.provision.plugins.module_utils._node.fs import Root
from ansible_collections.gpufleet.provision.plugins.module_utils._os import stamp as _stamp


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
            cause = _registered_cause(name, value)
            if cause is None:
                texts[name] = value.get("stdout") or ""
            else:
                causes.setdefault(name, cause)
        elif value is not None:
            raise _profile.ProfileError("outputs.%s: expected text or a registered command result, got %s"
                                        % (name, type(value).__name__))
    return texts, causes


def _registered_cause(name, value):
    """Why a registered command result gives no output, or None when it does (rc 0)."""
    if value.get("skipped"):
        return "not run (%s)" % (value.get("skip_reason") or "skipped")
    if value.get("rc") == 0 and not value.get("failed"):
        return None
    detail = (value.get("stderr") or value.get("msg") or "").strip().splitlines()
    cmd = value.get("cmd") or name
    cmd = " ".join(str(c) for c in cmd) if isinstance(cmd, list) else str(cmd)
    cause = "%s: rc=%s, %s" % (cmd, value.get("rc"), detail[0][:200] if detail else "no message")
    # ansible.builtin.command reports a missing executable as rc 2 "Error executing command."
    # with no output at all (the OSError text is not returned).
    if value.get("rc") == 2 and not value.get("stdout") and not value.get("stderr"):
        cause += " (command absent or not executable?)"
    return cause


def command_runner(module, timeout):
    """run(argv) -> (rc, stdout, stderr) under coreutils timeout, in the C locale; an absent
    command is rc 127 (collect.NOT_RUN), never a module failure."""
    wrapper = module.get_bin_path("timeout")

    def run(argv, timeout=timeout):
        if module.get_bin_path(argv[0]) is None and not os.path.isfile(argv[0]):
            return 127, "", "%s: command not found" % argv[0]
        cmd = [wrapper, "-k", "5", str(timeout)] + list(argv) if wrapper else list(argv)
        return module.run_command(cmd, environ_update={"LC_ALL": "C", "LANG": "C"})
    return run


def node_inputs(params, run, have, systemd, facts=None, script_path=None):
    """The inputs the checks read: recorded ones from ``params``, the rest collected lazily on the
    node through ``run`` (collect.py), the enabled active probes among them (probe_runs.py)."""
    outputs, causes = split_outputs(params.get("outputs"), params.get("output_errors"))
    database = _collect.PackageDB(run, have)
    probes = probe_runs.plan(params["profile"], params.get("probes"), facts, script_path,
                             params.get("probe_python") or "python3", params.get("probe_dcgm_level") or 1,
                             params.get("probe_timeout") or 1800, recorded=outputs)
    lazy = _collect.Outputs(run, params.get("commands"), given=outputs, errors=causes,
                            timeout=params.get("command_timeout") or 60, probes=probes,
                            builtin={"apt_mark_showhold": (["apt-mark", "showhold"], database.holds)})
    packages = params.get("packages")
    if packages is None:
        packages = database.packages   # read when a check first needs them
    services = params.get("services")
    if services is None:
        services = _collect.Services(run, systemd) if systemd else None
        if services is None:
            causes["services"] = "systemd is not running on the node (/run/systemd/system absent)"
    return lazy, packages, services


def run(params, runner=None, have=None, systemd=None, tmpdir=None, check_mode=False, os_root="/"):
    """The gate, or with ``converged_stamp`` the converged question or the stamp's writing (module
    docs). Returns the module result (raises ProfileError)."""
    path = params.get("converged_stamp")
    if not path:
        return evaluate(params, runner, have, systemd, tmpdir)
    if not params.get("desired_digest"):
        raise _profile.ProfileError("desired_digest: required with converged_stamp (%s)" % path)
    try:
        managed = _stamp.managed_paths(params.get("converged_paths") or [])
    except ValueError as exc:
        raise _profile.ProfileError(str(exc))
    now = _stamp.state(params["desired_digest"], params.get("root") or "/", os_root, path, managed)
    if params.get("write_stamp"):
        result = evaluate(params, runner, have, systemd, tmpdir)
        result["stamp"] = _write_stamp(path, now, result["report"], check_mode)
        return result
    old = _stamp.read(path)
    reasons = _stamp.differences(old, now)
    if reasons:
        return {"changed": False, "converged": False, "converged_reasons": reasons, "warnings": []}
    result = evaluate(params, runner, have, systemd, tmpdir)
    red = [c["id"] for c in result["report"]["checks"] if c["status"] in ("fail", "error")]
    reasons = (["the gate is red: %s" % ", ".join(red)] if red else []) + _stamp.passing_lost(old, result["report"])
    result.update(converged=not reasons, converged_reasons=reasons)
    return result


def _write_stamp(path, now, report, check_mode):
    if report.get("status") != "pass":
        return "not written: the node is red"
    if check_mode:
        return "would write"
    try:
        _stamp.write(path, _stamp.with_gate(now, report))
    except _stamp.StampError as exc:
        raise _profile.ProfileError(str(exc))
    return "written"


def evaluate(params, runner=None, have=None, systemd=None, tmpdir=None):
    """Validate the profile, collect, evaluate. Returns the module result (raises ProfileError).
    ``tmpdir``: where the probe script the action sent is written."""
    profile = _profile.validate(params["profile"], gate.CHECK_IDS)
    root = params.get("root") or "/"
    if not os.path.isdir(root):
        raise _profile.ProfileError("root %s: not a directory" % root)
    facts, warnings = collect(root)
    fs = Root(root)
    script = _collect.write_probe_script(params.get("probe_script"), tmpdir)
    outputs, packages, services = node_inputs(params, runner, have, systemd, facts, script)
    inputs = gate.Inputs(facts, profile, packages=packages, services=services, outputs=outputs,
                         output_errors=outputs.errors, grub=gate.read_grub_sources(fs), pci=_collect.PciDevices(root))
    try:
        report = gate.evaluate(inputs, node=_node_name(fs, params.get("node")), checks=params.get("checks"),
                               require=params.get("require") or ())
    except gate.CheckError as exc:
        raise _profile.ProfileError(str(exc))
    return {"changed": False, "report": report, "facts": facts, "collected": outputs.ran, "warnings": warnings}


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = dict((k, v) for k, v in module.params.items() if k not in CONTROLLER_OPTIONS)
    try:
        result = run(params, runner=command_runner(module, params["command_timeout"]),
                     have=module.get_bin_path, systemd=os.path.isdir("/run/systemd/system"),
                     tmpdir=module.tmpdir if params.get("probe_script") else None, check_mode=module.check_mode)
    except _profile.ProfileError as exc:
        module.fail_json(msg=str(exc))
    for line in result.pop("warnings"):
        module.warn(line)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
