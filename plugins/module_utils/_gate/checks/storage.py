# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Checks of storage: mounts, their file system, size and free space."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.provision.plugins.module_utils._gate.framework import outcome, registrar


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
