# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over node facts for pinning plans and scheduler files (docs in the sidecar *.yml files)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.provision.plugins.module_utils._node import parsers as _parsers
from ansible_collections.gpufleet.provision.plugins.module_utils._node.parsers import hostlist as _hostlist


MAX_NAME = 255
_NAME_RE = re.compile(r"^[A-Za-z0-9_.:@-]{1,%d}\Z" % MAX_NAME)


def _ints(value, what):
    try:
        return [int(v) for v in value]
    except (TypeError, ValueError):
        raise AnsibleFilterError("%s: expected a list of CPU numbers, got %r" % (what, value))


def cpulist(value):
    """[0, 1, 2, 104] -> '0-2,104' (the kernel's CPU list format)."""
    return _parsers.format_cpulist(_ints(value, "cpulist"))


def cpus(value):
    """'0-12,104-116' -> [0, ..., 12, 104, ..., 116]."""
    try:
        return _parsers.parse_cpulist(str(value))
    except ValueError as exc:
        raise AnsibleFilterError("cpus: %r is not a CPU list: %s" % (value, exc))


def sibling_order(siblings, only=None):
    """Host CPUs ordered so that vCPUs 2k and 2k+1 land on the two threads of one core.

    ``siblings`` is ansible_facts.gpufleet.cpu.siblings ([[0, 104], [1, 105], ...]). A hypervisor that
    numbers a guest's siblings as pairs must pin vCPU 2k to host CPU c and 2k+1 to c+104 on the
    reference node (cores-first numbering): [0, 104, 1, 105, ...]. ``only`` keeps the cores whose
    threads are all in that list (for example one NUMA node's cpus).
    """
    if not isinstance(siblings, (list, tuple)):
        raise AnsibleFilterError("sibling_order: expected cpu.siblings (a list of lists), got %r" % (siblings,))
    keep = None if only is None else set(_ints(only, "sibling_order only"))
    order = []
    for core in sorted((_ints(c, "sibling_order") for c in siblings), key=lambda c: c[0] if c else -1):
        if not core or (keep is not None and not set(core) <= keep):
            continue
        order.extend(sorted(core))
    return order


def hostlist(value):
    """['gpu001', 'gpu002', 'gpu004'] -> 'gpu[001-002,004]' (Slurm hostlist expression)."""
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise AnsibleFilterError("hostlist: expected a list of host names, got %r" % (value,))
    for name in value:
        # Slurm reads ASCII host names; a digit of another script would be folded into a range of
        # ASCII numbers (gpu\u0661 -> gpu[1]), naming another host
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise AnsibleFilterError("hostlist: %r is not a host name (1-%d ASCII letters, digits and -_.:@ characters; "
                                     "commas and brackets belong to the hostlist syntax)"
                                     % (name[:80] if isinstance(name, str) else name, MAX_NAME))
    return _hostlist(list(value))


class FilterModule(object):
    def filters(self):
        return {"cpulist": cpulist, "cpus": cpus, "sibling_order": sibling_order, "hostlist": hostlist}
