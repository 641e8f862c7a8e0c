# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The converged question's results as the play's lines (docs/roles.md section 6; docs in converged_lines.yml)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.provision.plugins.module_utils._node.parsers import hostlist


def _reasons(host, result):
    """The reasons a node is washed, checked: strings, from the question's result or its skip."""
    if result is None:
        result = {}
    if not isinstance(result, dict):
        raise AnsibleFilterError("converged_lines: the result of %s must be a mapping (a validate_node result), got %r"
                                 % (host, result))
    reasons = result.get("converged_reasons")
    if reasons is not None and (isinstance(reasons, str) or not isinstance(reasons, (list, tuple))
                                or not all(isinstance(r, str) for r in reasons)):
        raise AnsibleFilterError("converged_lines: converged_reasons of %s must be a list of strings, got %r" % (host, reasons))
    skip = result.get("skip_reason")
    if skip is not None and not isinstance(skip, str):
        raise AnsibleFilterError("converged_lines: skip_reason of %s must be a string, got %r" % (host, skip))
    return list(reasons or []) or [skip or "not asked"]


def converged_lines(results, hosts):
    """The converged question's results (one per host, in ``hosts`` order) -> the play's lines: the
    converged nodes as one hostlist, then each node to wash with its first reasons."""
    if not isinstance(results, (list, tuple)) or not isinstance(hosts, (list, tuple)) or len(results) != len(hosts):
        raise AnsibleFilterError("converged_lines: expected one result per host, got %r for %r" % (results, hosts))
    bad = [h for h in hosts if not isinstance(h, str) or not h]
    if bad:
        raise AnsibleFilterError("converged_lines: host names must be strings, got %r" % (bad[0],))
    reasons = [_reasons(h, r) for h, r in zip(hosts, results)]
    done = [h for h, r in zip(hosts, results) if isinstance(r, dict) and r.get("converged") is True]
    lines = []
    if done:
        lines.append("converged: %s (%d): green and unchanged since the last green run; nothing to wash, no reboot,"
                     " this was their gate" % (hostlist(done), len(done)))
    for host, why in zip(hosts, reasons):
        if host not in done:
            lines.append("wash: %s: %s" % (host, "; ".join(why[:3])))
    return lines


class FilterModule(object):
    def filters(self):
        return {"converged_lines": converged_lines}
