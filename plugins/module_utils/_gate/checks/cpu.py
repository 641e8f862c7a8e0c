# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Checks of CPUs and the platform around them: SMT, governor, VT-x, IOMMU, NUMA layout."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.provision.plugins.module_utils._gate.framework import Skip, outcome, registrar


CHECKS = []
check = registrar(CHECKS)


@check("cpu.smt", "hyper-threading off: half the CPUs, pinning plans wrong",
       "BIOS: logical processors / hyper-threading on (role gpufleet.provision.bios), reboot")
def _smt(ctx):
    want = ctx.want("cpu", "smt")
    cpu = ctx.facts.get("cpu") or {}
    active = cpu.get("smt_active")
    if active is None and cpu.get("threads_per_core") is not None:
        active = cpu["threads_per_core"] > 1
    active = ctx.need(active, ["sys/devices/system/cpu/smt/*", "sys/devices/system/cpu/cpu*/topology/*"])
    return outcome([] if active == want else ["SMT active: %s" % active], [], active, want)


@check("cpu.governor", "a CPU running downclocked (governor not performance) mid-job",
       "cpufreq governor performance on every CPU (cpupower frequency-set -g performance, persisted); BIOS: OS-controlled P-states")
def _governor(ctx):
    want = ctx.desired("governor", "cpu.governor")
    gov = ctx.need((ctx.facts.get("kernel") or {}).get("governor"),
                   ["sys/devices/system/cpu/cpu*/cpufreq/*", "sys/devices/system/cpu", "sys/devices/system/cpu/online"])
    counts = gov.get("counts") or {}
    without = gov.get("without_cpufreq") or []
    if not counts:
        raise ctx.no_data(["sys/devices/system/cpu/cpu*/cpufreq/scaling_governor"], "no CPU has a cpufreq governor")
    failures = []
    other = dict((g, n) for g, n in counts.items() if g != want)
    if other:
        failures.append("CPUs with another governor: %s" % ", ".join("%s x%d" % kv for kv in sorted(other.items())))
    if without:
        failures.append("%d online CPUs without cpufreq (first: %s)" % (len(without), without[:8]))
    return outcome(failures, [], {"counts": counts, "without_cpufreq": len(without)}, want)


@check("cpu.vtx", "VT-x/AMD-V off in BIOS: no KVM, no VFIO passthrough",
       "BIOS: processor virtualization (VMX/SVM) on (role gpufleet.provision.bios), reboot")
def _vtx(ctx):
    want = ctx.want("cpu", "vtx")
    flags = ctx.need((ctx.facts.get("cpu") or {}).get("flags"), ["proc/cpuinfo"])
    has = bool(flags.get("vmx") or flags.get("svm"))
    observed = {"vmx": flags.get("vmx"), "svm": flags.get("svm"), "kvm": (ctx.facts.get("kernel") or {}).get("kvm")}
    return outcome([] if has == want else ["vmx/svm flag %s" % ("present" if has else "absent")], [], observed, want)


@check("iommu.enabled", "IOMMU off: VFIO passthrough impossible, or on where the profile wants it off",
       "BIOS: VT-d/AMD-Vi on (role gpufleet.provision.bios); intel_iommu=on iommu=pt on the kernel command line; reboot")
def _iommu(ctx):
    want = ctx.want("iommu", "enabled")
    iommu = ctx.need((ctx.facts.get("kernel") or {}).get("iommu"), ["sys/class/iommu*", "sys/kernel/iommu_groups*"])
    active = bool(iommu.get("active"))
    observed = {"active": active, "units": len(iommu.get("units") or []), "groups": iommu.get("groups")}
    return outcome([] if active == want else ["IOMMU active: %s" % active], [], observed, want)


@check("numa.layout", "sub-NUMA clustering not applied (BIOS update reset it): memory on the wrong node, uneven H2D bandwidth",
       "BIOS: sub-NUMA clustering per profile (e.g. SNC4) and hyper-threading (role gpufleet.provision.bios), reboot")
def _numa_layout(ctx):
    want = ctx.want("numa")
    if want.get("nodes") is None and want.get("cpus_per_node") is None:
        raise Skip("not in profile (numa.nodes, numa.cpus_per_node)")
    numa = ctx.facts.get("numa") or {}
    nodes = ctx.need(numa.get("nodes"), ["sys/devices/system/node*"])
    if not nodes:
        raise ctx.no_data(["sys/devices/system/node*"], "no NUMA node in sysfs")
    for node in nodes:
        if node.get("cpus") is None:
            # An unreadable cpulist is not a node without CPUs.
            raise ctx.no_data(["sys/devices/system/node/node%s/cpulist" % node.get("id")], "node%s CPU list" % node.get("id"))
    observed = {"nodes": len(nodes), "cpus_per_node": dict((str(n.get("id")), len(n.get("cpus"))) for n in nodes)}
    failures = []
    if want.get("nodes") is not None and len(nodes) != want["nodes"]:
        failures.append("%d NUMA nodes, expected %d" % (len(nodes), want["nodes"]))
    if want.get("cpus_per_node") is not None:
        odd = ["node%s %d" % (k, v) for k, v in observed["cpus_per_node"].items() if v != want["cpus_per_node"]]
        if odd:
            failures.append("CPUs per node: %s, expected %d each" % (", ".join(odd), want["cpus_per_node"]))
    return outcome(failures, [], observed, want)
