# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The end-of-run summary of provision.yml and validate.yml (docs in run_summary.yml).

One screen an operator reads in ten seconds: per node READY, QUARANTINED (failing check ids, and
one remedy per check id for all the nodes that share it) or FAILED (task and message), the reboots
done, where the run folder is, the fabric's anomaly counts. Input is what the roles leave per host,
read defensively (a role that did not run leaves nothing):
  __validate_result         the gate's result (validate_node: status pass/fail, profile, red checks with reason, remedy)
  gpufleet_failure          {task, msg} of the last failure of a host (callback gpufleet.provision.failures)
  gpufleet_reboot_requests  [{role, reason}] raised by the roles that need the one reboot
  gpufleet_rebooted         set by the reboot role when it rebooted the node
  gpufleet_reboot_required  still true at the end: a reboot is pending and was not allowed
and on the controller the fabric role's __fabric_result (summary.anomalies: counts by kind).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


from collections.abc import Mapping

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_text
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.gpufleet.provision.plugins.module_utils._node.parsers import hostlist as _hostlist

# Per status, how many nodes are named one per line before the rest is counted (a fleet run).
MAX_LINES = 20
MSG_WIDTH = 160


def _get(hostvars, host, name, default=None):
    try:
        value = hostvars[host].get(name, default) if host in hostvars else default
    except Exception:  # an undefined or failing template in a host's variables: treat as absent
        return default
    return default if value is None else value


def _text(hostvars, host, name):
    """A host's path or URL variable ('' when unset); AnsibleFilterError naming it when it is no text."""
    value = _get(hostvars, host, name, "") or ""
    if not isinstance(value, str):
        raise AnsibleFilterError("run_summary: host %s: %s must be a path or URL, got %s %r"
                                 % (host, name, type(value).__name__, value))
    return to_text(value)


def _short(text, width=MSG_WIDTH):
    text = " ".join(to_text(text).split())
    return text if len(text) <= width else text[:width - 3] + "..."


VERDICTS = ("pass", "fail")


def _check_red(where, red):
    """validate_node's red checks: a list of {id, status, reason, remedy}; AnsibleFilterError naming ``where``."""
    if not isinstance(red, (list, tuple)):
        raise AnsibleFilterError("%s: red must be the list of red checks, got %s %r" % (where, type(red).__name__, red))
    for index, check in enumerate(red):
        if not isinstance(check, dict) or not isinstance(check.get("id"), str) or not isinstance(check.get("status"), str):
            raise AnsibleFilterError("%s: red[%d] is not a red check {id, status, reason, remedy}: %r" % (where, index, check))


def _verdict(where, result):
    """A validate_node result with its verdict (status pass or fail) and red checks, checked; None
    for a task result without one (skipped, failed before the gate); AnsibleFilterError naming
    ``where`` for anything else."""
    if not isinstance(result, dict):
        raise AnsibleFilterError("%s: not a validate_node result: %s %r" % (where, type(result).__name__, result))
    if not any(key in result for key in ("status", "summary", "red")):
        if result.get("failed") or result.get("skipped") or result.get("unreachable"):
            return None
        raise AnsibleFilterError("%s: not a validate_node result (no status, summary or red checks; keys: %s)"
                                 % (where, ", ".join(sorted(to_text(k) for k in result)) or "none"))
    if result.get("status") not in VERDICTS:
        raise AnsibleFilterError("%s: status %r is no verdict of the gate (pass or fail)" % (where, result.get("status")))
    _check_red(where, result.get("red") or [])
    return result


def node_state(hostvars, host, active):
    """One node's summary entry from its variables."""
    failure = _get(hostvars, host, "gpufleet_failure")
    result = _get(hostvars, host, "__validate_result")
    # validate_node's result: the verdict and the red checks (the whole report only with return_report)
    report = _verdict("run_summary: host %s: __validate_result" % host, result) if result is not None else None
    entry = dict(node=host)
    if host not in active:
        failure = failure if isinstance(failure, dict) else {}
        entry["status"] = "FAILED"
        entry["task"] = to_text(failure.get("task") or "unknown task")
        entry["msg"] = to_text(failure.get("msg") or "see the failed task above (callback gpufleet.provision.failures "
                               "records task and message)")
    elif isinstance(report, dict) and report.get("status") in ("pass", "fail"):
        entry["status"] = "READY" if report["status"] == "pass" else "QUARANTINED"
        entry["converged"] = bool(report.get("converged"))   # provision.yml: nothing washed, its gate the first call
        entry["profile"] = report.get("profile")
        entry["checks"] = [dict(id=c.get("id"), status=c.get("status"), remedy=_short(c.get("remedy") or "", 400),
                                reason=_short(c.get("reason") or "", 400))
                           for c in report.get("red") or [] if c.get("status") in ("fail", "error")]
    else:
        entry["status"] = "NOT GATED"
    requests = _get(hostvars, host, "gpufleet_reboot_requests") or []
    if not isinstance(requests, (list, tuple)):
        raise AnsibleFilterError("run_summary: host %s: gpufleet_reboot_requests must be a list of {role, reason}, got %s %r"
                                 % (host, type(requests).__name__, requests))
    entry["reboot_requests"] = [dict(role=to_text(r.get("role", "?")), reason=to_text(r.get("reason", "")))
                                for r in requests if isinstance(r, dict)]
    rebooted = _get(hostvars, host, "gpufleet_rebooted")
    if rebooted is None:  # reboot role without the shared fact: its registered result
        reboot = _get(hostvars, host, "__reboot_result") or {}
        rebooted = isinstance(reboot, dict) and boolean(reboot.get("rebooted", False), strict=False)
    entry["rebooted"] = boolean(rebooted, strict=False)
    entry["reboot_pending"] = boolean(_get(hostvars, host, "gpufleet_reboot_required", False), strict=False) and not entry["rebooted"]
    return entry


def anomaly_counts(fabric_result):
    if not isinstance(fabric_result, dict):
        return None
    counts = (fabric_result.get("summary") or {}).get("anomalies") if isinstance(fabric_result.get("summary"), dict) else None
    if isinstance(counts, dict):
        for kind, count in counts.items():
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise AnsibleFilterError("run_summary: __fabric_result summary.anomalies.%s: %r is not a count"
                                         % (to_text(kind), count))
        return dict(sorted((to_text(k), v) for k, v in counts.items()))
    if isinstance(fabric_result.get("anomalies"), list):
        out = dict()
        for anomaly in fabric_result["anomalies"]:
            kind = to_text(anomaly.get("kind", "?")) if isinstance(anomaly, dict) else "?"
            out[kind] = out.get(kind, 0) + 1
        return dict(sorted(out.items()))
    return None


def _safe_url(url):
    """A URL without its user:password part."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    host, slash, path = rest.partition("/")
    return scheme + sep + host.rpartition("@")[2] + slash + path


def _names(nodes):
    return _hostlist([n["node"] for n in nodes]) if nodes else "-"


def render(nodes, run):
    """Lines of the summary (pure: entries in, text out)."""
    by = dict((s, [n for n in nodes if n["status"] == s]) for s in ("READY", "QUARANTINED", "FAILED", "NOT GATED"))
    rebooted = [n for n in nodes if n["rebooted"]]
    pending = [n for n in nodes if n["reboot_pending"]]
    head = ", ".join("%s %d" % (s, len(v)) for s, v in by.items() if v or s != "NOT GATED")
    converged = [n for n in nodes if n.get("converged")]
    lines = ["gpufleet summary: %d node(s): %s; rebooted %d%s" % (
        len(nodes), head, len(rebooted), "; converged %d (nothing washed)" % len(converged) if converged else "")]
    lines.append("READY        %s" % _names(by["READY"]))
    for status, width in (("QUARANTINED", 13), ("FAILED", 13), ("NOT GATED", 13)):
        group = by[status]
        if not group and status == "NOT GATED":
            continue
        if not group:
            lines.append(status.ljust(width) + "-")
            continue
        for i, node in enumerate(group[:MAX_LINES]):
            label = status.ljust(width) if i == 0 else " " * width
            if status == "QUARANTINED":
                lines.append("%s%s: %s" % (label, node["node"], ", ".join(c["id"] for c in node["checks"]) or "?"))
            elif status == "FAILED":
                lines.append("%s%s: task %r: %s" % (label, node["node"], node["task"], _short(node["msg"])))
            else:
                lines.append("%s%s: no gate result (the gate did not run on it)" % (label, node["node"]))
        if len(group) > MAX_LINES:
            lines.append(" " * width + "and %d more: %s" % (len(group) - MAX_LINES, _names(group[MAX_LINES:])))
    remedies = dict()
    for node in by["QUARANTINED"]:
        for check in node["checks"]:
            remedies.setdefault(check["id"], [check["remedy"], []])[1].append(node)
    if remedies:
        lines.append("Remedies (check: nodes -> fix):")
        for check_id, (remedy, group) in remedies.items():
            lines.append("  %s: %s -> %s" % (check_id, _names(group), _short(remedy or "see the report", 200)))
    reboot_line = "Reboots      %s" % (_names(rebooted) if rebooted else "none")
    reasons = sorted(set("%s: %s" % (r["role"], r["reason"]) if r["reason"] else r["role"]
                         for n in rebooted for r in n["reboot_requests"]))
    if reasons:
        reboot_line += " (%s)" % "; ".join(reasons)
    if pending:
        reboot_line += "; pending, not allowed: %s" % _names(pending)
    lines.append(reboot_line)
    where = []
    if run.get("report_dir"):
        where.append("gate reports %s/<node>.json|.xml|.prom" % run["report_dir"].rstrip("/"))
    if run.get("report_url"):
        where.append("gate reports uploaded to %s" % run["report_url"])
    if run.get("fabric_dest"):
        # labels/<node>.json and nccl/<node>.env exist only with fabric_per_node_files
        per_node = ", labels/, nccl/" if run.get("per_node_files") else ""
        where.append("fabric %s/ (fabric.json, topology.conf, topology-block.conf, labels.json, nccl.json%s, summary.txt)"
                     % (run["fabric_dest"].rstrip("/"), per_node))
    lines.append("Run folder   %s" % ("; ".join(where) if where else "none given (no report sink)"))
    anomalies = run.get("anomalies")
    if anomalies is None:
        lines.append("Fabric       not built in this run")
    else:
        total = sum(anomalies.values())
        kinds = (": " + ", ".join("%s %d" % kv for kv in anomalies.items())) if total else ""
        lines.append("Fabric       %d anomal%s%s" % (total, "y" if total == 1 else "ies", kinds))
    return lines


def run_summary(hostvars, nodes, active=None, controller="localhost"):
    """hostvars | run_summary(ansible_play_hosts_all, ansible_play_hosts) -> {lines, stats}."""
    if not isinstance(hostvars, Mapping):
        raise AnsibleFilterError("run_summary: expected hostvars (a mapping of host to its variables), got %s"
                                 % type(hostvars).__name__)
    for name, value in (("nodes", nodes), ("active", [] if active is None else active)):
        if not isinstance(value, (list, tuple)) or not all(isinstance(n, str) for n in value):
            raise AnsibleFilterError("run_summary: %s must be a list of host names, got %r" % (name, value))
    active = set(nodes if active is None else active)
    names = [to_text(n) for n in nodes
             if not (n == controller and _get(hostvars, n, "__validate_result") is None and _get(hostvars, n, "gpufleet_failure") is None)]
    entries = [node_state(hostvars, n, active) for n in names]
    first = names[0] if names else controller
    run = {"report_dir": _text(hostvars, first, "validate_report_dir"),
           "report_url": _safe_url(_text(hostvars, first, "validate_report_url")),
           "fabric_dest": _text(hostvars, controller, "fabric_dest")
           if _get(hostvars, controller, "__fabric_result") is not None else "",
           "per_node_files": bool(_get(hostvars, controller, "fabric_per_node_files", False)),
           "anomalies": anomaly_counts(_get(hostvars, controller, "__fabric_result"))}
    lines = render(entries, run)
    counts = dict((s, sum(1 for e in entries if e["status"] == s)) for s in ("READY", "QUARANTINED", "FAILED", "NOT GATED"))
    stats = dict(
        counts=counts,
        ready=[e["node"] for e in entries if e["status"] == "READY"],
        quarantined=dict((e["node"], [c["id"] for c in e["checks"]]) for e in entries if e["status"] == "QUARANTINED"),
        failed=dict((e["node"], {"task": e["task"], "msg": _short(e["msg"], 400)}) for e in entries if e["status"] == "FAILED"),
        rebooted=[e["node"] for e in entries if e["rebooted"]],
        converged=[e["node"] for e in entries if e.get("converged")],
        reboot_pending=[e["node"] for e in entries if e["reboot_pending"]],
        report_dir=run["report_dir"], report_url=run["report_url"], fabric_dest=run["fabric_dest"],
        anomalies=run["anomalies"], text=lines)
    return {"lines": lines, "stats": stats}


def gate_summary(results, details=True):
    """The validate role's summary of a play: a count, the green nodes as one hostlist, then each
    red node's line and (``details``) one line per red check with its reason and remedy. ``results``:
    validate_node's results (the compact form); anything else in the list is left out."""
    try:
        details = boolean(details, strict=True)
    except TypeError:
        raise AnsibleFilterError("gate_summary: details must be true or false, got %r" % (details,))
    if isinstance(results, dict):
        results = [results[k] for k in sorted(results, key=to_text)]     # by host: the results
    if not isinstance(results, (list, tuple)):
        raise AnsibleFilterError("gate_summary: expected a list of validate_node results, got %s" % type(results).__name__)
    reported = []
    for index, result in enumerate(results):
        node = result.get("node") if isinstance(result, dict) else None
        result = _verdict("gate_summary: item %d%s" % (index, " (node %s)" % node if node else ""), result)
        if result is not None:
            if not isinstance(result.get("summary"), str) or not isinstance(node, str):
                raise AnsibleFilterError("gate_summary: item %d: a verdict without its node and summary line: %r"
                                         % (index, result))
            reported.append(result)
    green = [r for r in reported if r.get("status") == "pass"]
    red = [r for r in reported if r.get("status") != "pass"]
    lines = ["%d node(s) evaluated: %d green, %d red" % (len(reported), len(green), len(red))]
    if green:
        lines.append("green: " + _hostlist([to_text(r.get("node")) for r in green]))
    for result in red:
        lines.append(to_text(result["summary"]))
        if details:
            # imported here: this file loads in every worker that resolves one of our filters
            from ansible_collections.gpufleet.provision.plugins.module_utils._gate.report import details as red_lines
            lines.extend(red_lines({"checks": result.get("red") or []}))
    return lines


class FilterModule(object):
    def filters(self):
        return {"run_summary": run_summary, "gate_summary": gate_summary}
