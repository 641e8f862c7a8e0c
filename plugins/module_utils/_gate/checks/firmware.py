# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Checks of firmware versions against the fleet minimums (NIC, NVMe)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.provision.plugins.module_utils._devices import firmware as _fw
from ansible_collections.gpufleet.provision.plugins.module_utils._gate.framework import CheckError, Skip, outcome, registrar


CHECKS = []
check = registrar(CHECKS)


def _firmware(ctx, items, minimums, label, where):
    """``where``: the sysfs path of a device's version, by name (an unparsable version is an error naming it)."""
    failures, observed, matched = [], {}, 0
    for name, keys, version in items:
        key = next((k for k in minimums if any(x and x.startswith(k) for x in keys)), None)
        observed[name] = version
        if key is None:
            continue
        matched += 1
        if version is None:
            raise ctx.no_data(["*%s*" % name], "%s firmware version" % name)
        try:
            low = _fw.below(version, minimums[key], "%s (%s)" % (name, where % name))
        except _fw.FirmwareError as exc:
            # unreadable is not a measured value: letters alone would sort above every number and pass
            raise CheckError(str(exc))
        if low:
            failures.append("%s (%s) firmware %s < %s" % (name, key, version, minimums[key]))
    if not matched:
        raise Skip("no data: no %s matches the profile's models (%s)" % (label, ", ".join(sorted(minimums))))
    return outcome(failures, [], observed, minimums)


@check("firmware.nic", "NIC firmware below the fleet minimum: known link/RDMA bugs come back",
       "flash the NIC firmware (mlxfwmanager / mstflint) to at least the profile minimum")
def _fw_nic(ctx):
    want = ctx.want("firmware", "nic")
    nics = ctx.need(ctx.facts.get("nics"), ["sys/class/infiniband*"])
    items = [(n.get("name"), (n.get("hca_type"), n.get("board_id")), n.get("fw_ver")) for n in nics if n.get("role") != "vf"]
    return _firmware(ctx, items, want, "NIC", "sys/class/infiniband/%s/fw_ver")


@check("firmware.nvme", "NVMe firmware below the fleet minimum: known data-loss/timeout bugs come back",
       "update the drive firmware (nvme fw-download / fw-commit or the vendor tool)")
def _fw_nvme(ctx):
    want = ctx.want("firmware", "nvme")
    drives = ctx.need(ctx.facts.get("nvme"), ["sys/class/nvme*"])
    items = [(d.get("name"), (d.get("model"),), d.get("firmware")) for d in drives]
    return _firmware(ctx, items, want, "NVMe drive", "sys/class/nvme/%s/firmware_rev")
