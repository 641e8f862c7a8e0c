# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Checks of storage: mounts, their file system, size and free space."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.provision.plugins.module_utils._gate.framework import CheckError, Skip, outcome, registrar
from ansible_collections.gpufleet.provision.plugins.module_utils._gate.parsers.nvme import parse_smart_log


CHECKS = []
check = registrar(CHECKS)


@check("storage.mounts", "scratch/VM image storage not mounted, too small or too full: provisioning or checkpoints fail later",
       "create and mount the file system (fstab), or free space on it")
def _mounts(ctx):
    want = ctx.want("storage", "mounts")
    mounts = ctx.need(ctx.facts.get("mounts"), ["proc/self/mounts"])
    failures, unknown, observed = [], [], {}
    for spec in want:
        found = [m for m in mounts if m.get("mountpoint") == spec["path"]]
        if not found:
            failures.append("%s not mounted" % spec["path"])
            observed[spec["path"]] = None
            continue
        mount = found[-1]  # the last one mounted there is what the path shows
        observed[spec["path"]] = {"device": mount.get("device"), "fstype": mount.get("fstype"),
                                  "size_bytes": mount.get("size_bytes"), "free_bytes": mount.get("free_bytes")}
        if spec.get("fstype") and mount.get("fstype") != spec["fstype"]:
            failures.append("%s is %s" % (spec["path"], mount.get("fstype")))
        for key, field in (("min_size_gb", "size_bytes"), ("min_free_gb", "free_bytes")):
            if spec.get(key) is None:
                continue
            if mount.get(field) is None:
                unknown.append("%s %s unknown (statvfs only on the live root)" % (spec["path"], field))
            elif mount[field] < spec[key] * 1e9:
                failures.append("%s %s %.1f GB < %s GB" % (spec["path"], field, mount[field] / 1e9, spec[key]))
    return outcome(failures, unknown, observed, want)


@check("nvme.health", "a missing or failing NVMe drive (critical warning, spare below threshold, media errors): "
       "scratch and checkpoints fail or corrupt mid-job",
       "reseat the drive (a missing one: check the BMC and the backplane); a critical warning, low spare or media "
       "errors: replace the drive")
def _nvme_health(ctx):
    want = ctx.want("health", "nvme")
    drives = ctx.need(ctx.facts.get("nvme"), ["sys/class/nvme*"])
    failures, unknown, observed = [], [], {"count": len(drives)}
    if want.get("count") is not None and len(drives) != want["count"]:
        failures.append("%d NVMe controllers, expected %d" % (len(drives), want["count"]))
    health_keys = ("max_media_errors", "min_spare_percent", "max_percent_used")
    if any(want.get(k) is not None for k in health_keys) or want.get("critical_warning", True):
        for drive in drives:
            name = "nvme_smart_%s" % drive.get("name")
            text = ctx.outputs.get(name)
            if text is None:
                cause = ctx.output_errors.get(name)
                unknown.append("%s not collected%s" % (name, " (%s)" % cause if cause else ""))
                continue
            try:
                smart = parse_smart_log(str(text))
            except ValueError as exc:
                raise CheckError("outputs.%s (nvme smart-log -o json): %s" % (name, exc))
            observed[drive.get("name")] = smart
            where = drive.get("name")
            if smart["critical_warning"]:
                failures.append("%s critical warning 0x%02x" % (where, int(smart["critical_warning"])))
            if smart["avail_spare"] < smart["spare_thresh"]:
                failures.append("%s spare %d%% below its threshold %d%%" % (where, smart["avail_spare"], smart["spare_thresh"]))
            elif want.get("min_spare_percent") is not None and smart["avail_spare"] < want["min_spare_percent"]:
                failures.append("%s spare %d%% < %d%%" % (where, smart["avail_spare"], want["min_spare_percent"]))
            if want.get("max_media_errors") is not None and smart["media_errors"] > want["max_media_errors"]:
                failures.append("%s %d media errors > %d" % (where, smart["media_errors"], want["max_media_errors"]))
            if want.get("max_percent_used") is not None and smart["percent_used"] > want["max_percent_used"]:
                failures.append("%s %d%% of its rated endurance used > %d%%" % (where, smart["percent_used"], want["max_percent_used"]))
    if not drives and want.get("count") is None:
        raise Skip("no data: no NVMe controller in sys/class/nvme")
    return outcome(failures, unknown, observed, want)
