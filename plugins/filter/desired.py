# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the washing machine's contract (docs/roles.md): desired state from the profile, and
reboot requests (docs in the sidecar *.yml files)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.provision.plugins.module_utils._desired import registry as _desired


def desired(profile, area, **context):
    """The desired state of one area of a (validated) profile: the same function the gate's checks call."""
    if not isinstance(profile, dict):
        raise AnsibleFilterError("desired(%s): expected the profile mapping (lookup gpufleet.provision.profile), got %r"
                                 % (area, type(profile).__name__))
    try:
        return _desired.derive(area, profile, **context)
    except _desired.DesiredError as exc:
        raise AnsibleFilterError("desired(%s): %s" % (area, exc))


def reboot_requests(reasons, role):
    """['GRUB will boot ...'] | reboot_requests('kernel_cmdline') -> [{'role': 'kernel_cmdline', 'reason': ...}]."""
    if isinstance(reasons, str) or not isinstance(reasons, (list, tuple)):
        raise AnsibleFilterError("reboot_requests(%s): expected a list of reasons, got %r" % (role, reasons))
    return [{"role": str(role), "reason": str(reason)} for reason in reasons]


class FilterModule(object):
    def filters(self):
        return {"desired": desired, "reboot_requests": reboot_requests}
