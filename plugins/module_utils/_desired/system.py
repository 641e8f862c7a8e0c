# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Desired state of BIOS, kernel, kernel command line and tuning (see _desired/registry.py).

Every function takes the validated (normalised) profile. The gate's checks call the same ones:

- ``kernel_cmdline_rules`` -> ``kernel.cmdline`` and ``kernel.grub_sources``
- ``hugepages`` -> ``memory.hugepages``; ``thp`` -> ``memory.thp``; ``numa_balancing`` -> ``memory.numa_balancing``
- ``governor`` -> ``cpu.governor``; ``kernel_release`` -> ``kernel.version``
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.provision.plugins.module_utils._os import cmdline as _cmdline
from ansible_collections.gpufleet.provision.plugins.module_utils._desired.registry import AREAS, DesiredError, area
from ansible_collections.gpufleet.provision.plugins.module_utils._desired.profile import section, size_kb

HUGEPAGE_KEYS = _cmdline.HUGEPAGE_KEYS
# Areas named "kernel_cmdline.<part>" add parameters of another part (e.g. devices.py for
# pci=config_acs=): f(profile) -> {"required": [...], "forbidden": [...]}.
CMDLINE_CONTRIBUTION = "kernel_cmdline."


def _kb_text(kb):
    """1048576 -> "1G", 2048 -> "2M", other -> "<n>K" (the kernel's own spelling)."""
    kb = int(kb)
    if kb % (1024 * 1024) == 0:
        return "%dG" % (kb // (1024 * 1024))
    if kb % 1024 == 0:
        return "%dM" % (kb // 1024)
    return "%dK" % kb


@area("bios_settings")
def bios_settings(profile):
    """Portable BIOS settings that are set in the profile (unset ones left out): {} = nothing to do."""
    settings = section(profile, "bios", "settings") or {}
    return dict((k, v) for k, v in settings.items() if v is not None)


@area("bios_attributes")
def bios_attributes(profile):
    return dict(section(profile, "bios", "attributes") or {})


@area("kernel_release")
def kernel_release(profile):
    """The release that must run (``6.8.0-45-generic``), None when the profile does not pin one."""
    return section(profile, "kernel", "release")


@area("kernel_packages")
def kernel_packages(profile, os_family="Debian"):
    """[{name, version}] the kernel role pins (docs/roles.md section 5); [] when no kernel is pinned.

    Names: ``kernel.packages``, else derived from ``kernel.release``: Debian/Ubuntu
    ``linux-image-<release>`` + ``linux-headers-<release>`` (headers: OFED/DKMS builds for the kernel
    that will boot), RHEL family ``kernel-<release>`` + ``kernel-devel-<release>``. Version:
    ``kernel.version`` (exact or upstream), else None (the repository's candidate).
    """
    release = kernel_release(profile)
    names = section(profile, "kernel", "packages")
    version = section(profile, "kernel", "version")
    if not names:
        if release is None:
            if version is not None:
                raise DesiredError("kernel.version %s: set kernel.release (or kernel.packages) too" % version)
            return []
        if os_family == "Debian":
            names = ["linux-image-" + release, "linux-headers-" + release]
        elif os_family == "RedHat":
            names = ["kernel-" + release, "kernel-devel-" + release]
        else:
            raise DesiredError("kernel packages: no naming rule for OS family %r (Debian, RedHat); "
                               "set kernel.packages" % (os_family,))
    return [{"name": name, "version": version} for name in names]


@area("hugepages")
def hugepages(profile):
    """{size_kb: count} of memory.hugepages (sizes as the profile validator normalised them), {} when unset."""
    return dict((str(k), v) for k, v in (section(profile, "memory", "hugepages") or {}).items())


@area("thp")
def thp(profile):
    return section(profile, "memory", "thp")


@area("numa_balancing")
def numa_balancing(profile):
    """0 or 1 (``kernel.numa_balancing``), None when unset."""
    value = section(profile, "memory", "numa_balancing")
    return None if value is None else int(bool(value))


@area("governor")
def governor(profile):
    return section(profile, "cpu", "governor")


_split = _cmdline.split


def _hugepage_block(profile, required):
    """The hugepage parameters in kernel order: [default_hugepagesz=S] then hugepagesz=S hugepages=N
    per pool (ascending size). Hugepage parameters listed in kernel.cmdline.required must agree."""
    pools = hugepages(profile)
    default = None
    for param in required:
        key, value = _split(param)
        if key == "default_hugepagesz":
            default = size_kb(value or "")
        elif key == "hugepagesz":
            if size_kb(value or "") not in pools:
                raise DesiredError("kernel.cmdline.required has %s but memory.hugepages has no %s pool "
                                   "(set the pool's count there)" % (param, value))
        elif key == "hugepages":
            raise DesiredError("kernel.cmdline.required has %s: set hugepage counts in memory.hugepages "
                               "(the cmdline gets hugepagesz=<size> hugepages=<count> per pool)" % param)
    block = ["default_hugepagesz=" + _kb_text(default)] if default else []
    for kb in sorted(pools, key=int):
        block += ["hugepagesz=" + _kb_text(kb), "hugepages=%d" % pools[kb]]
    return block


def _derived(profile):
    """Parameters that follow from other profile keys: THP and NUMA balancing at boot."""
    out = []
    if thp(profile) is not None:
        out.append("transparent_hugepage=" + thp(profile))
    balancing = numa_balancing(profile)
    if balancing is not None:
        out.append("numa_balancing=" + ("enable" if balancing else "disable"))
    return out


@area("kernel_cmdline_rules")
def kernel_cmdline_rules(profile):
    """What the command line must be, for the kernel_cmdline role and the gate's cmdline checks::

        {"params": [...],           # every parameter the role writes, in the order it writes them
         "required": [...],         # params without the hugepage ones (checked key by key)
         "hugepage_block": [...],   # [default_hugepagesz=S] hugepagesz=S hugepages=N ..., exactly this order
         "hugepages": {kb: count},  # the pools that block gives (analyse_cmdline's "pools")
         "forbidden": [...], "allow_repeated": [...],
         "owned_keys": [...]}       # keys the role removes wherever they are, except in "params"

    ``kernel.cmdline.required`` in its order, the THP / NUMA balancing parameters derived from
    ``memory.thp`` / ``memory.numa_balancing`` (a conflicting value listed in required is an error),
    then parameters of other parts (``kernel_cmdline.*`` areas), then the hugepage block.
    """
    want = section(profile, "kernel", "cmdline") or {}
    required_in = list(want.get("required") or [])
    forbidden = list(want.get("forbidden") or [])
    allow_repeated = list(want.get("allow_repeated") or [])
    block = _hugepage_block(profile, required_in)
    plain = [p for p in required_in if _split(p)[0] not in HUGEPAGE_KEYS]
    contributions = [_derived(profile)]
    for name in sorted(AREAS):
        if name.startswith(CMDLINE_CONTRIBUTION):
            extra = AREAS[name](profile) or {}
            contributions.append(list(extra.get("required") or []))
            forbidden += [p for p in extra.get("forbidden") or [] if p not in forbidden]
    for params in contributions:
        for param in params:
            key = _split(param)[0]
            listed = [p for p in plain if _split(p)[0] == key]
            if key not in allow_repeated and listed and listed[-1] != param:
                raise DesiredError("kernel.cmdline.required has %s but the profile also asks for %s" % (listed[-1], param))
            if param not in plain:
                plain.append(param)
    try:
        out = _cmdline.rules(plain + block, forbidden, allow_repeated)
    except _cmdline.CmdlineError as exc:
        raise DesiredError("kernel.cmdline: %s" % exc)
    out["hugepages"] = hugepages(profile) if block else {}
    return out


@area("kernel_cmdline")
def kernel_cmdline(profile):
    """The ordered parameter list the kernel_cmdline role writes (and kernel.cmdline expects)."""
    return kernel_cmdline_rules(profile)["params"]


@area("kernel_cmdline_forbidden")
def kernel_cmdline_forbidden(profile):
    return kernel_cmdline_rules(profile)["forbidden"]


@area("kernel_cmdline_allow_repeated")
def kernel_cmdline_allow_repeated(profile):
    return kernel_cmdline_rules(profile)["allow_repeated"]
