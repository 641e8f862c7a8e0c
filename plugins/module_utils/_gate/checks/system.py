# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Checks of the OS and the kernel: release, running kernel, command line and its GRUB sources."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.provision.plugins.module_utils._os import cmdline as _cmdline
from ansible_collections.gpufleet.provision.plugins.module_utils._desired import profile as _profile
from ansible_collections.gpufleet.provision.plugins.module_utils._gate.framework import CheckError, Skip, outcome, registrar
from ansible_collections.gpufleet.provision.plugins.module_utils._gate.cmdline import analyse_cmdline, grub_tokens, param_text


CHECKS = []
check = registrar(CHECKS)


@check("os.release", "an OS release the fleet was not qualified on (driver, OFED and kernel packages differ)",
       "reinstall the node from the fleet image for its profile")
def _os_release(ctx):
    want = ctx.want("os")
    osr = ctx.need(ctx.facts.get("os"), ["etc/os-release"])
    expected = dict((k, v) for k, v in (("ID", want.get("id")), ("VERSION_ID", want.get("version_id"))) if v is not None)
    observed = dict((k, osr.get(k)) for k in expected)
    bad = ["%s=%s, expected %s" % (k, observed[k], v) for k, v in expected.items() if observed[k] != v]
    return outcome(bad, [], observed, expected)


@check("kernel.version", "modules (nvidia, OFED) built for another kernel; a fleet running mixed kernels",
       "install the profile's linux-image (and headers), apt-mark hold it, make it the GRUB default, reboot")
def _kernel_version(ctx):
    want = ctx.desired("kernel_release", "kernel.release")
    release = ctx.need((ctx.facts.get("kernel") or {}).get("release"), ["proc/sys/kernel/osrelease"])
    return outcome([] if release == want else ["running %s" % release], [], release, want)


@check("kernel.cmdline", "hugepages= twice (the kernel ignores the second: the pool is not what was planned), "
       "missing iommu/THP/NUMA-balancing parameters",
       "set the parameters once in GRUB_CMDLINE_LINUX (/etc/default/grub), update-grub (RHEL: grubby --update-kernel=ALL), reboot")
def _kernel_cmdline(ctx):
    rules = _cmdline_rules(ctx)
    params = ctx.need(((ctx.facts.get("kernel") or {}).get("cmdline") or {}).get("params"), ["proc/cmdline"])
    tokens = [(p["key"], p.get("value"), "proc/cmdline") for p in params]
    problems, pools = _cmdline_problems(tokens, rules)
    observed = {"raw": ctx.facts["kernel"]["cmdline"].get("raw"), "hugepage_pools_kb": pools}
    return outcome(problems, [], observed, _expected(rules))


def _cmdline_rules(ctx):
    """The rules the kernel_cmdline role writes by (``_desired`` kernel_cmdline_rules)."""
    ctx.want("kernel", "cmdline")
    return ctx.desired("kernel_cmdline_rules", "kernel.cmdline")


def _expected(rules):
    return {"params": rules["params"], "forbidden": rules["forbidden"], "allow_repeated": rules["allow_repeated"]}


def _cmdline_problems(tokens, rules):
    """The kernel's own rules (what it ignores, with the origin of each word: analyse_cmdline) plus
    the role's rules (_cmdline.problems: what the kernel_cmdline role would change), each said once."""
    problems, pools = analyse_cmdline(tokens, rules["allow_repeated"])
    said = set(p.split(":", 1)[0] for p in problems if " given " in p)
    words = [param_text(key, value) for key, value, _origin in tokens]
    problems += [p for p in _cmdline.problems(words, rules) if p not in said]
    return problems, pools


@check("kernel.grub_sources", "a GRUB source (/etc/default/grub or grub.d/*.cfg) that will give a duplicate or "
       "missing parameter at the next reboot",
       "keep the parameters in one GRUB source and remove them from the others (cloud images: /etc/default/grub.d/*.cfg), update-grub")
def _grub_sources(ctx):
    rules = _cmdline_rules(ctx)
    if _profile.section(ctx.profile, "kernel", "grub_sources") is False:
        raise Skip("not in profile (kernel.grub_sources: false)")
    grub = ctx.grub
    if grub is None:
        raise Skip("no data: GRUB sources not read")
    bad = [p for p in grub.get("problems") or [] if p.get("kind") in ("unreadable", "invalid")]
    if bad:
        raise CheckError("; ".join("%s: %s (%s)" % (p["path"], p.get("detail"), p.get("kind")) for p in bad))
    if not grub.get("sources"):
        raise Skip("no data: etc/default/grub missing")
    try:
        tokens = grub_tokens(grub["sources"])
    except ValueError as exc:
        raise CheckError(str(exc))
    problems, pools = _cmdline_problems(tokens, rules)
    observed = {
        "files": [rel for rel, _text in grub["sources"]],
        "cmdline": " ".join(param_text(k, v) for k, v, _o in tokens),
        "hugepage_pools_kb": pools,
    }
    return outcome(problems, [], observed, _expected(rules))
