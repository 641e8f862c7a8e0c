# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The converged question's results as the play's lines (docs/roles.md section 6; docs in converged_lines.yml)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.provision.plugins.module_utils._node.parsers import hostlist


def converged_lines(results, hosts):
    """The converged question's results (one per host, in ``hosts`` order) -> the play's lines: the
    converged nodes as one hostlist, then each node to wash with its first reasons."""
    if not isinstance(results, (list, tuple)) or not isinstance(hosts, (list, tuple)) or len(results) != len(hosts):
        raise AnsibleFilterError("converged_lines: expected one result per host, got %r for %r" % (results, hosts))
    done = [h for h, r in zip(hosts, results) if isinstance(r, dict) and r.get("converged")]
    lines = []
    if done:
        lines.append("converged: %s (%d): green and unchanged since the last green run; nothing to wash, no reboot,"
                     " this was their gate" % (hostlist(done), len(done)))
    for host, result in zip(hosts, results):
        if host in done:
            continue
        result = result if isinstance(result, dict) else {}
        reasons = result.get("converged_reasons") or [result.get("skip_reason") or "not asked"]
        lines.append("wash: %s: %s" % (host, "; ".join(reasons[:3])))
    return lines


class FilterModule(object):
    def filters(self):
        return {"converged_lines": converged_lines}
