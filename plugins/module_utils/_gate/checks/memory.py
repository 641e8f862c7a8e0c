# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Checks of memory: hugepage pools, transparent hugepages, automatic NUMA balancing."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.provision.plugins.module_utils._desired import profile as _profile
from ansible_collections.gpufleet.provision.plugins.module_utils._gate.framework import Skip, outcome, registrar


CHECKS = []
check = registrar(CHECKS)


@check("memory.hugepages", "a hugepage pool smaller or larger than planned (VMs or jobs fail to start, or memory is stranded)",
       "hugepagesz=<size> hugepages=<count> per pool on the kernel command line (profile memory.hugepages), update-grub, reboot")
def _hugepages(ctx):
    total = ctx.desired("hugepages", "memory.hugepages") if _profile.section(ctx.profile, "memory", "hugepages") else None
    per_node = _profile.section(ctx.profile, "memory", "hugepages_per_node")
    if total is None and per_node is None:
        raise Skip("not in profile (memory.hugepages)")
    failures, observed, expected = [], {}, {}
    if total is not None:
        pools = ctx.need((ctx.facts.get("kernel") or {}).get("hugepages"), ["sys/kernel/mm/hugepages*"])
        observed["total"] = dict((s, pools.get(s)) for s in total)
        expected["total"] = total
        for size, count in sorted(total.items()):
            if pools.get(size) is None:
                raise ctx.no_data(["sys/kernel/mm/hugepages/hugepages-%skB*" % size], "no %s kB pool in sysfs" % size)
            if pools[size] != count:
                failures.append("%s kB pages: %s, expected %s" % (size, pools[size], count))
    if per_node is not None:
        nodes = ctx.need((ctx.facts.get("numa") or {}).get("nodes"), ["sys/devices/system/node*"])
        expected["per_node"] = per_node
        observed["per_node"] = {}
        for node in nodes:
            pools = node.get("hugepages")
            if pools is None:
                raise ctx.no_data(["sys/devices/system/node/node%s/hugepages*" % node.get("id")])
            observed["per_node"][str(node.get("id"))] = dict((s, pools.get(s)) for s in per_node)
            for size, count in sorted(per_node.items()):
                if pools.get(size) != count:
                    failures.append("node%s %s kB pages: %s, expected %s" % (node.get("id"), size, pools.get(size), count))
    return outcome(failures, [], observed, expected)


@check("memory.thp", "transparent hugepages on: latency jitter and memory bloat",
       "transparent_hugepage=never on the kernel command line (now: echo never > /sys/kernel/mm/transparent_hugepage/enabled)")
def _thp(ctx):
    want = ctx.desired("thp", "memory.thp")
    mode = ctx.need(((ctx.facts.get("kernel") or {}).get("thp") or {}).get("enabled"),
                    ["sys/kernel/mm/transparent_hugepage/enabled"])
    return outcome([] if mode == want else ["enabled is [%s]" % mode], [], mode, want)


@check("memory.numa_balancing", "automatic NUMA balancing migrating pages under a pinned workload",
       "numa_balancing=disable on the kernel command line (now: sysctl kernel.numa_balancing=0)")
def _numa_balancing(ctx):
    want = ctx.desired("numa_balancing", "memory.numa_balancing")
    value = ctx.need((ctx.facts.get("kernel") or {}).get("numa_balancing"), ["proc/sys/kernel/numa_balancing"])
    ok = (value != 0) if want else (value == 0)
    return outcome([] if ok else ["kernel.numa_balancing = %s" % value], [], value, want)
