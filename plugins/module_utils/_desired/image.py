# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Desired state of a golden image (see _desired/registry.py): what an image of a node profile holds.

The image carries what the package and boot-file roles make true (kernel, its command line in
GRUB, tuning's persistent files, driver + fabric manager, OFED, held packages); per-node state
(BIOS, ACS at boot, NIC firmware, storage) is not in it. Its hash names that state: an image built
from a profile and a node whose profile gives the same hash agree on everything the image holds,
and any change of those parts of the profile gives another hash (the gate's ``image.profile``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json

from ansible_collections.gpufleet.provision.plugins.module_utils._desired.registry import area, derive

# The areas an image holds, each derived by the same function the roles apply.
IMAGE_AREAS = ("kernel_release", "kernel_packages", "kernel_cmdline", "hugepages", "thp", "numa_balancing",
               "governor", "nvidia_driver", "ofed", "held_packages")


def canonical_hash(data):
    """``sha256:<hex>`` of ``data`` as canonical JSON (sorted keys, no spaces): equal data, equal hash."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


@area("image")
def image(profile, os_family="Debian", **_context):
    """{profile: name, desired: {area: desired state}, hash: canonical_hash(desired)}."""
    desired = {}
    for name in IMAGE_AREAS:
        desired[name] = derive(name, profile, os_family=os_family) if name == "kernel_packages" else derive(name, profile)
    return {"profile": (profile or {}).get("name"), "desired": desired, "hash": canonical_hash(desired)}
