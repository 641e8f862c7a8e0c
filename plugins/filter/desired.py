# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the washing machine's contract (docs/roles.md): desired state from the profile, and
reboot requests (docs in the sidecar *.yml files)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.provision.plugins.module_utils._desired import profile as _profile
from ansible_collections.gpufleet.provision.plugins.module_utils._desired import registry as _desired


def desired(profile, area, **context):
    """The desired state of one area of a profile: the same function the gate's checks call. The
    profile is validated first (the lookup's result passes as it is), so a hand-made or broken one
    fails naming its key, never deep inside an area."""
    if not isinstance(area, str):
        raise AnsibleFilterError("desired: the area must be a name such as 'kernel_cmdline', got %r" % (area,))
    if not isinstance(profile, dict):
        raise AnsibleFilterError("desired(%s): expected the profile mapping (lookup gpufleet.provision.profile), got %r"
                                 % (area, type(profile).__name__))
    try:
        profile = _profile.validate(profile)
    except _profile.ProfileError as exc:
        raise AnsibleFilterError("desired(%s): %s" % (area, exc))
    return _derive(area, profile, context)


def _derive(area, profile, context):
    try:
        return _desired.derive(area, profile, **context)
    except _desired.DesiredError as exc:
        raise AnsibleFilterError("desired(%s): %s" % (area, exc))
    except (TypeError, ValueError, KeyError, AttributeError, IndexError) as exc:
        # the context (keyword arguments) is the one input not validated above
        raise AnsibleFilterError("desired(%s): cannot be derived with the arguments given (%s): %s: %s" % (
            area, ", ".join("%s=%r" % (k, v) for k, v in sorted(context.items()))[:300] or "none", type(exc).__name__, exc))


def reboot_requests(reasons, role):
    """['GRUB will boot ...'] | reboot_requests('kernel_cmdline') -> [{'role': 'kernel_cmdline', 'reason': ...}].

    The reasons are the strings a module returned as ``reboot_reasons``; the role a role's name.
    Anything else fails naming it: a request that says nothing would reboot a node for no reason."""
    if not isinstance(role, str) or not role.strip():
        raise AnsibleFilterError("reboot_requests: the role must be a role's name, got %r" % (role,))
    if isinstance(reasons, str) or not isinstance(reasons, (list, tuple)):
        raise AnsibleFilterError("reboot_requests(%s): expected a list of reasons, got %r" % (role, reasons))
    for index, reason in enumerate(reasons):
        if not isinstance(reason, str) or not reason.strip():
            raise AnsibleFilterError("reboot_requests(%s): reason [%d] must be a non-empty string, got %r" % (role, index, reason))
    return [{"role": str(role), "reason": str(reason)} for reason in reasons]


class FilterModule(object):
    def filters(self):
        return {"desired": desired, "reboot_requests": reboot_requests}
