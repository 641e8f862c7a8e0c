# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run-time tuning of the node profile (hugepage pools, THP, NUMA balancing, CPU governor).

Two halves, both computed here and acted on by the tuning module:

- persistent: ``/etc/sysctl.d/90-gpufleet-tuning.conf`` (``kernel.numa_balancing``, applied by
  systemd-sysctl at every boot) and a oneshot unit + script that set THP and the governor at boot,
  writing only what differs. Hugepage pools persist through the kernel command line (kernel_cmdline
  role): 1 GiB pages are reliably allocated only at boot.
- run time: the same settings written now through the hardware root, where the kernel allows it,
  read back; what did not take is a reboot reason naming the setting.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufleet.provision.plugins.module_utils._node import parsers as P

THP = "sys/kernel/mm/transparent_hugepage/enabled"
NUMA_BALANCING = "proc/sys/kernel/numa_balancing"
CPU = "sys/devices/system/cpu"
HUGEPAGES = "sys/kernel/mm/hugepages/hugepages-%skB/nr_hugepages"
SYSCTL_FILE = "etc/sysctl.d/90-gpufleet-tuning.conf"
SCRIPT = "usr/local/sbin/gpufleet-tuning"
UNIT = "etc/systemd/system/gpufleet-tuning.service"


class TuningError(Exception):
    """A setting that cannot be made; the message names the path and the cause."""


# A cpufreq governor as the kernel names them (performance, powersave, schedutil, ondemand, ...):
# it goes into a sysfs file and the boot script, so nothing else is taken.
_GOVERNOR = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")


def validate(hugepages=None, governor=None):
    """The options the planners take, checked: {size kB (str): count (int)}; TuningError naming the
    option and the value for a page size or count that is not a whole number (count 0 or more), or
    a governor that is not a governor's name."""
    pools = {}
    if not isinstance(hugepages or {}, dict):
        raise TuningError("hugepages: must be a mapping of page size in kB to page count, got %r" % (hugepages,))
    for size, count in (hugepages or {}).items():
        key = str(size).strip()
        if isinstance(size, bool) or not re.match(r"^[1-9][0-9]{0,9}$", key):
            raise TuningError("hugepages: %r is not a page size in kB (for example 2048 or 1048576)" % (size,))
        text = str(count).strip()
        if isinstance(count, bool) or not re.match(r"^[0-9]{1,10}(\.0)?$", text):
            raise TuningError("hugepages.%s: %r is not a page count (a whole number, 0 or more)" % (key, count))
        if key in pools:
            raise TuningError("hugepages: page size %s kB given twice" % key)
        pools[key] = int(float(text))
    if governor is not None and not _GOVERNOR.match(governor):
        raise TuningError("governor: %r is not a cpufreq governor name (for example performance)" % (governor,))
    return pools


def _sh_quote(text):
    return "'" + text.replace("'", "'\\''") + "'"


def persistent_files(hardware_root, thp=None, numa_balancing=None, governor=None):
    """{rel: text} of the files that make the settings survive a reboot (None: remove the file)."""
    files = {}
    if numa_balancing is not None:
        files[SYSCTL_FILE] = ("# Managed by gpufleet.provision (tuning role): node profile memory.numa_balancing\n"
                              "kernel.numa_balancing = %d\n" % numa_balancing)
    else:
        files[SYSCTL_FILE] = None
    if thp is None and governor is None:
        files[SCRIPT] = files[UNIT] = None
        return files
    files[SCRIPT] = "\n".join([
        "#!/bin/sh",
        "# Managed by gpufleet.provision (tuning role): the node profile's THP mode and CPU governor at",
        "# every boot. Writes a setting only when it differs, so a node that boots right is left alone.",
        "set -u",
        "root=%s" % _sh_quote(hardware_root.rstrip("/") or ""),
        "thp=%s" % _sh_quote(thp or ""),
        "governor=%s" % _sh_quote(governor or ""),
        'f="$root/%s"' % THP,
        'if [ -n "$thp" ] && [ -w "$f" ] && ! grep -q "\\[$thp\\]" "$f"; then echo "$thp" > "$f"; fi',
        'if [ -n "$governor" ]; then',
        '  for g in "$root"/%s/cpu[0-9]*/cpufreq/scaling_governor; do' % CPU,
        '    [ -w "$g" ] || continue',
        '    [ "$(cat "$g")" = "$governor" ] || echo "$governor" > "$g"',
        "  done",
        "fi",
        "",
    ])
    files[UNIT] = "\n".join([
        "# Managed by gpufleet.provision (tuning role)",
        "[Unit]",
        "Description=gpufleet: THP mode and CPU governor of the node profile",
        "After=sysinit.target",
        "",
        "[Service]",
        "Type=oneshot",
        "RemainAfterExit=yes",
        "ExecStart=/%s" % SCRIPT,
        "",
        "[Install]",
        "WantedBy=multi-user.target",
        "",
    ])
    return files


def runtime_plan(fs, hugepages=None, thp=None, numa_balancing=None, governor=None):
    """[{path, name, current, wanted, write}] of the run-time settings that differ, read through ``fs``.

    Raises TuningError naming the path when a setting cannot be read, or the governor is not one
    the CPU offers (``scaling_available_governors``).
    """
    out = []

    def need(value, rel):
        if value is None:
            problem = next((p for p in fs.problems if p["path"] == rel), None)
            raise TuningError("%s: %s" % (fs.join(rel), problem["detail"] if problem else "cannot read"))
        return value

    if numa_balancing is not None:
        current = need(fs.parse(NUMA_BALANCING, P.parse_int), NUMA_BALANCING)
        if current != numa_balancing:
            out.append({"path": NUMA_BALANCING, "name": "kernel.numa_balancing", "current": current,
                        "wanted": numa_balancing, "write": str(numa_balancing)})
    if thp is not None:
        current = need(fs.parse(THP, P.parse_bracketed), THP)
        if current != thp:
            out.append({"path": THP, "name": "transparent_hugepage", "current": current, "wanted": thp, "write": thp})
    for size, count in sorted((hugepages or {}).items(), key=lambda kv: int(kv[0])):
        rel = HUGEPAGES % size
        current = need(fs.parse(rel, P.parse_int), rel)
        if current != count:
            out.append({"path": rel, "name": "hugepages %s kB" % size, "current": current, "wanted": count, "write": str(count)})
    if governor is not None:
        cpus = [n for n in fs.listdir(CPU) if re.match(r"^cpu\d+$", n)]
        with_freq = [n for n in cpus if fs.isdir("%s/%s/cpufreq" % (CPU, n))]
        if not with_freq:
            raise TuningError("%s: no CPU has cpufreq (no scaling driver loaded, or the BIOS keeps P-states)" % fs.join(CPU))
        for name in sorted(with_freq, key=lambda n: int(n[3:])):
            rel = "%s/%s/cpufreq/scaling_governor" % (CPU, name)
            current = need(fs.read(rel), rel)
            if current == governor:
                continue
            offered = fs.read("%s/%s/cpufreq/scaling_available_governors" % (CPU, name), optional=True)
            if offered is not None and governor not in offered.split():
                raise TuningError("%s: governor %s not offered (available: %s)" % (fs.join(rel), governor, offered))
            out.append({"path": rel, "name": "%s governor" % name, "current": current, "wanted": governor, "write": governor})
    return out


def read_back(fs, item):
    """The value of ``item``'s setting now, as runtime_plan reads it (None when unreadable)."""
    if item["path"] == THP:
        return fs.parse(THP, P.parse_bracketed)
    if item["path"].endswith("scaling_governor"):
        return fs.read(item["path"])
    return fs.parse(item["path"], P.parse_int)


def summary(items):
    """Readable lines for the diff: one per setting, CPUs of one governor change folded into one."""
    lines = []
    cpus = [i for i in items if i["name"].endswith(" governor")]
    for item in items:
        if item in cpus:
            continue
        lines.append("%s: %s -> %s" % (item["name"], item["current"], item["wanted"]))
    if cpus:
        lines.append("governor of %d CPUs (%s): %s -> %s" % (
            len(cpus), ",".join(i["name"][3:].split()[0] for i in cpus),
            "/".join(sorted(set(str(i["current"]) for i in cpus))), cpus[0]["wanted"]))
    return lines
