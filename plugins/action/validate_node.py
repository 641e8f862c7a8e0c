# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""validate_node on the controller: one module round trip to the node, then the report files
written (or uploaded) here, and a compact result for the job events (docs in the module)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import time

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.provision.plugins.module_utils._gate import report as _report
from ansible_collections.gpufleet.provision.plugins.module_utils._gate import probe_runs
from ansible_collections.gpufleet.provision.plugins.module_utils._gate.options import ARGUMENT_SPEC, CONTROLLER_OPTIONS
from ansible_collections.gpufleet.provision.plugins.plugin_utils import gate_reports

MODULE = "gpufleet.provision.validate_node"
# The shipped probe script, sent to the node in the module's arguments when an enabled probe runs it
# (the collection's roles/validate/files, two folders above this plugin's).
PROBE_SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                            "roles", "validate", "files", probe_runs.SCRIPT_NAME)


def _read(path):
    with open(path) as handle:
        return handle.read()


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        args = dict(self._task.args)
        own = dict((k, args.pop(k)) for k in CONTROLLER_OPTIONS if k in args)
        checked = ArgumentSpecValidator(dict((k, ARGUMENT_SPEC[k]) for k in CONTROLLER_OPTIONS)).validate(own)
        if checked.error_messages:
            return dict(result, failed=True, msg="validate_node: %s" % "; ".join(checked.error_messages))
        own = checked.validated_parameters
        if not args.get("probe_script") and probe_runs.wants_script(args.get("profile"), args.get("probes"), args.get("outputs")):
            try:
                args["probe_script"] = _read(PROBE_SCRIPT)
            except OSError as exc:
                return dict(result, failed=True, msg="validate_node: the probe script %s cannot be read: %s" % (PROBE_SCRIPT, exc))
        node_result = self._execute_module(module_name=MODULE, module_args=args, task_vars=task_vars)
        asking = bool(args.get("converged_stamp")) and not args.get("write_stamp")
        if asking and not node_result.get("failed") and not node_result.get("converged"):
            # not converged: the washing machine and its own gate follow; no report, no group yet
            return dict(result, changed=False, converged=False,
                        converged_reasons=node_result.get("converged_reasons") or [])
        if node_result.get("failed") or "report" not in node_result:
            keep = ("failed", "msg", "unreachable", "rc", "stdout", "stderr", "module_stdout", "module_stderr", "exception")
            return dict(result, **dict((k, node_result[k]) for k in keep if k in node_result))
        report = node_result["report"]
        result.update(_report.compact(report))
        result["collected"] = node_result.get("collected") or {}
        for key in ("converged", "converged_reasons", "stamp"):
            if key in node_result:
                result[key] = node_result[key]
        if node_result.get("warnings"):
            result["warnings"] = node_result["warnings"]
        try:
            result["report_files"] = self._sink(report, node_result.get("facts"), own)
        except (OSError, RuntimeError) as exc:
            return dict(result, failed=True, msg="validate_node on %s: reports not stored: %s" % (report.get("node"), exc))
        result["reports_changed"] = any(v in ("written", "would write") for v in result["report_files"].values())
        result["changed"] = result["reports_changed"]
        if own["return_report"]:
            result["report"], result["facts"] = report, node_result.get("facts")
        group = own["ready_group"] if result["status"] == "pass" else own["quarantine_group"]
        if asking and own["converged_group"]:
            # a child of the ready group: the node is in both, and the gate play can leave it out
            result["add_group"], result["parent_groups"] = own["converged_group"], [own["ready_group"] or "all"]
        elif group:
            # the key ansible.builtin.group_by returns: the strategy adds the node to the group when
            # it reads an ok result, which saves the gate a task (a forked worker) per node. It also
            # sets changed to "the group gained the node" (true in every fresh run), so a task that
            # wants changed to mean "a report was written" says changed_when: <result>.reports_changed
            result["add_group"], result["parent_groups"] = group.replace(" ", "-"), ["all"]
        if own["fail_on_red"] and result["red"]:
            result["failed"] = True
            result["msg"] = "%s: %s" % (report.get("node"), "; ".join(
                "%s %s: %s" % (c["id"], c["status"], c["reason"]) for c in result["red"]))
        return result

    def _sink(self, report, facts, own):
        if not (own["report_dir"] or own["report_url"]):
            return {}
        node = report.get("node") or "unknown"
        files = gate_reports.render(report, facts, time.time())
        status = {}
        if own["report_dir"]:
            paths = gate_reports.plan(own["report_dir"], node, files)
            if self._task.check_mode:
                status.update((p, "unchanged" if t is None or isinstance(t, gate_reports.Refresh) else "would write")
                              for p, t in paths.items())
            else:
                status.update(gate_reports.write(paths))
        if own["report_url"] and not self._task.check_mode:
            # imported here: a report folder is the common sink, and urls costs every worker 60 ms
            from ansible.module_utils.urls import open_url
            status.update(gate_reports.upload(
                own["report_url"], node, files, open_url, headers=own["report_url_headers"],
                url_username=own["report_url_username"], url_password=own["report_url_password"],
                force_basic_auth=bool(own["report_url_username"]), validate_certs=own["report_url_validate_certs"]))
        return status
