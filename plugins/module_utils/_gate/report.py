# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Render a validation report (module_utils._gate.gate.evaluate) for CI/AWX and for Prometheus.

- JUnit XML: one testsuite per node, one testcase per check id (failure / error / skipped elements).
- Prometheus textfile collector: ``gpufleet_check{node,check}`` 1 (pass) / 0 (fail or error);
  skipped checks are not 0 (that would page for every check a profile does not ask for) but
  ``gpufleet_check_skipped{node,check} 1``; plus ``gpufleet_node_ready`` and the time the report was written.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import xml.etree.ElementTree as ET


def _text(value):
    return json.dumps(value, sort_keys=True, default=str)


def junit(report):
    """The report as a JUnit XML document (str)."""
    node = str(report.get("node") or "unknown")
    checks = report.get("checks") or []
    counts = dict((s, sum(1 for c in checks if c["status"] == s)) for s in ("fail", "error", "skip"))
    attrs = {"name": "gpufleet.validate", "tests": str(len(checks)), "failures": str(counts["fail"]),
             "errors": str(counts["error"]), "skipped": str(counts["skip"])}
    suites = ET.Element("testsuites", attrs)
    suite_attrs = dict(attrs, name=node)
    suite = ET.SubElement(suites, "testsuite", suite_attrs)
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", {"name": "profile", "value": str(report.get("profile"))})
    ET.SubElement(props, "property", {"name": "status", "value": str(report.get("status"))})
    for chk in checks:
        case = ET.SubElement(suite, "testcase", {"classname": "gpufleet.%s" % node, "name": chk["id"]})
        detail = "observed: %s\nexpected: %s\nprevents: %s\nremedy: %s" % (
            _text(chk.get("observed")), _text(chk.get("expected")), chk.get("prevents"), chk.get("remedy"))
        if chk["status"] == "fail":
            ET.SubElement(case, "failure", {"message": chk.get("reason") or "", "type": "fail"}).text = detail
        elif chk["status"] == "error":
            ET.SubElement(case, "error", {"message": chk.get("reason") or "", "type": "error"}).text = detail
        elif chk["status"] == "skip":
            ET.SubElement(case, "skipped", {"message": chk.get("reason") or ""})
        else:
            ET.SubElement(case, "system-out").text = "observed: %s" % _text(chk.get("observed"))
    body = ET.tostring(suites, encoding="unicode")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n"


def _label(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def prometheus(report, timestamp):
    """The report in the Prometheus text exposition format (node_exporter textfile collector)."""
    node = _label(report.get("node") or "unknown")
    profile = _label(report.get("profile"))
    lines = [
        "# HELP gpufleet_check 1 when the validation check passed, 0 when it failed or errored.",
        "# TYPE gpufleet_check gauge",
    ]
    skipped = []
    for chk in report.get("checks") or []:
        labels = 'node="%s",check="%s"' % (node, _label(chk["id"]))
        if chk["status"] == "skip":
            skipped.append("gpufleet_check_skipped{%s} 1" % labels)
        else:
            lines.append("gpufleet_check{%s} %d" % (labels, 1 if chk["status"] == "pass" else 0))
    lines += [
        "# HELP gpufleet_check_skipped 1 for a check that was skipped (not in the profile, or no data).",
        "# TYPE gpufleet_check_skipped gauge",
    ] + skipped + [
        "# HELP gpufleet_node_ready 1 when every check of the node profile is green.",
        "# TYPE gpufleet_node_ready gauge",
        'gpufleet_node_ready{node="%s",profile="%s"} %d' % (node, profile, 1 if report.get("status") == "pass" else 0),
        "# HELP gpufleet_validate_report_timestamp_seconds Unix time the verdicts last changed (the report files were written).",
        "# TYPE gpufleet_validate_report_timestamp_seconds gauge",
        'gpufleet_validate_report_timestamp_seconds{node="%s"} %d' % (node, int(timestamp)),
        "# HELP gpufleet_validate_last_run_timestamp_seconds Unix time the gate last evaluated the node (every run: alert when it stops moving).",
        "# TYPE gpufleet_validate_last_run_timestamp_seconds gauge",
        'gpufleet_validate_last_run_timestamp_seconds{node="%s"} %d' % (node, int(timestamp)),
    ]
    return "\n".join(lines) + "\n"


def summary(report):
    """One line per node for the play output: ``node001 FAIL (profile hgx-h100): kernel.cmdline, pcie.acs``."""
    node = report.get("node") or "unknown"
    counts = report.get("counts") or {}
    tail = "%(pass)d pass, %(fail)d fail, %(error)d error, %(skip)d skip" % dict(
        (k, counts.get(k, 0)) for k in ("pass", "fail", "error", "skip"))
    if report.get("status") == "pass":
        return "%s READY (profile %s): %s" % (node, report.get("profile"), tail)
    return "%s QUARANTINE (profile %s): %s [%s]" % (node, report.get("profile"), ", ".join(report.get("failed") or []), tail)


def details(report):
    """What an operator reads for a red node: one line per failing/erroring check with the reason
    and the remedy (``kernel.cmdline FAIL: intel_iommu=on missing -> fix: role ...``)."""
    out = []
    for chk in report.get("checks") or []:
        if chk["status"] in ("fail", "error"):
            out.append("%s %s: %s -> fix: %s" % (chk["id"], chk["status"].upper(), chk.get("reason"), chk.get("remedy")))
    return out


def compact(report):
    """What a job event carries for a node: the verdict, counts, each check's status, and the red
    checks with reason and remedy; the observed and expected values stay in the report files."""
    checks = report.get("checks") or []
    red = [dict((k, c.get(k)) for k in ("id", "status", "reason", "remedy")) for c in checks
           if c["status"] in ("fail", "error")]
    return {
        "status": report.get("status"),
        "node": report.get("node"),
        "profile": report.get("profile"),
        "failed_checks": list(report.get("failed") or []),
        "counts": report.get("counts"),
        "checks": dict((c["id"], c["status"]) for c in checks),
        "red": red,
        "summary": summary(report),
    }
