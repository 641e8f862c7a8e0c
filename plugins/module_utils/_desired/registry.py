# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Desired state derived from the node profile: pure functions, no I/O (docs/roles.md section 1).

The roles (through the ``gpufleet.provision.desired`` filter) and the gate's checks call the same
function for an area, so "applied" and "green" cannot disagree. Each area lives in the submodule of
its part of the washing machine and registers itself with ``@area("name")``:

- ``_desired.system``: BIOS, kernel, kernel command line, tuning (hugepages, THP, NUMA balancing, governor)
- ``_desired.drivers``: NVIDIA driver, fabric manager, OFED, held packages
- ``_desired.devices``: PCIe ACS/ATS, storage, firmware
- ``_desired.network``: RoCE v2 rails (enabled, interfaces, MTU, QoS, GID, addressing, a host's plan)
- ``_desired.image``: what a golden image of the profile holds (and its hash)
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

AREAS = {}


class DesiredError(ValueError):
    """The profile cannot give the desired state of an area; the message names the key and cause."""


def area(name):
    """Register ``func(profile, **context) -> desired state`` under ``name``."""
    def register(func):
        if name in AREAS:
            raise ValueError("desired-state area %s registered twice" % name)
        AREAS[name] = func
        return func
    return register


def derive(name, profile, **context):
    """The desired state of area ``name`` for a validated (normalised) profile."""
    _load()
    if name not in AREAS:
        raise DesiredError("unknown desired-state area %r (known: %s)" % (name, ", ".join(sorted(AREAS))))
    return AREAS[name](profile, **context)


def _load():
    # Imported here, not at the top: each submodule imports this one for @area.
    from ansible_collections.gpufleet.provision.plugins.module_utils._desired import system, drivers, devices, network, image  # noqa: F401  pylint: disable=unused-import
