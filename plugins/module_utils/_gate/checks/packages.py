# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Checks of the package manager: pinned packages held; the golden image the node booted from."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch

from ansible_collections.gpufleet.provision.plugins.module_utils._desired import drivers
from ansible_collections.gpufleet.provision.plugins.module_utils._desired.registry import DesiredError
from ansible_collections.gpufleet.provision.plugins.module_utils._gate.framework import CheckError, outcome, registrar
from ansible_collections.gpufleet.provision.plugins.module_utils._gate.parsers.packages import parse_versionlock
from ansible_collections.gpufleet.provision.plugins.module_utils._os import image as _image_os


CHECKS = []
check = registrar(CHECKS)


@check("packages.held", "driver/fabric manager/kernel drifting apart on apt upgrade (not held)",
       "apt-mark hold the pinned packages (driver, fabric manager, kernel) so an upgrade cannot split them "
       "(RHEL family: dnf versionlock add)")
def _held(ctx):
    # what the roles hold: the profile's packages.held plus every pin of the kernel, driver and OFED
    # roles (_desired.held_packages), so a pinned package that drifts is caught even when unlisted
    try:
        want = drivers.held_expected(ctx.profile, (ctx.facts.get("os") or {}).get("ID"),
                                     (ctx.facts.get("nvidia") or {}).get("nvswitch_present"))
    except DesiredError as exc:
        raise CheckError("profile: %s" % exc)   # as ctx.desired says it: the profile contradicts itself
    if not want:
        ctx.want("packages", "held")
    if ctx.outputs.get("apt_mark_showhold") is None and ctx.outputs.get("dnf_versionlock") is not None:
        held = parse_versionlock(ctx.output("dnf_versionlock", "dnf versionlock list"))
    else:
        held = set(ctx.output("apt_mark_showhold", "apt-mark showhold").split())
    installed = sorted((ctx.packages or {}).keys()) if ctx.packages is not None else None
    failures, observed = [], {"held": sorted(held)}
    for pattern in want:
        names = [n for n in installed if fnmatch.fnmatchcase(n, pattern)] if installed is not None else []
        if installed is not None and not names:
            failures.append("%s: not installed" % pattern)
        for name in names:
            if name not in held:
                failures.append("%s: installed, not held" % name)
        if installed is None and not any(fnmatch.fnmatchcase(h, pattern) for h in held):
            failures.append("%s: not held" % pattern)
    return outcome(failures, [], observed, want)


@check("image.profile", "a node booted from a golden image built for another profile, or for an older state of its "
       "profile (an old driver, kernel or command line baked in)",
       "re-image the node from an image built from its profile (playbooks/image.yml), or run provision.yml: it "
       "re-washes the node to the profile and records that in the manifest")
def _image(ctx):
    # What the image holds is compared as a whole (its desired-state hash); its packages and boot state
    # are the other checks' (kernel.*, nvidia.*, ofed.*, packages.held), so one fault stays one red check.
    manifest = ctx.need(ctx.facts.get("image"), ["etc/gpufleet/image.json"],
                        "no image manifest (etc/gpufleet/image.json): not booted from a golden image")
    desired = ctx.desired("image", "image")
    failures = _image_os.differences(manifest, desired, verify=False)
    observed = dict((k, manifest.get(k)) for k in ("profile", "desired_hash", "content_hash", "built", "rewashed"))
    return outcome(failures, [], observed, {"profile": desired["profile"], "desired_hash": desired["hash"]})
