# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A role's reboot reasons into the shared gpufleet_reboot_requests, replacing its own records
(docs/roles.md section 3; docs in reboot_requests_merge.yml)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError


def _fail(role, what, value):
    raise AnsibleFilterError("reboot_requests_merge(%r): %s, got %r" % (role, what, value))


def _checked_requests(requests, role):
    """The records as plain dicts; every one must be {role: str, reason: str}."""
    if requests is None:  # `gpufleet_reboot_requests:` left empty in an inventory
        return []
    if isinstance(requests, (str, Mapping)) or not isinstance(requests, (list, tuple)):
        _fail(role, "the requests (gpufleet_reboot_requests) must be a list of {role, reason}", requests)
    out = []
    for record in requests:
        if not isinstance(record, Mapping) or not isinstance(record.get("role"), str) \
                or not isinstance(record.get("reason"), str):
            _fail(role, "every request in gpufleet_reboot_requests must be {role: text, reason: text}", record)
        out.append({"role": record["role"], "reason": record["reason"]})
    return out


def reboot_requests_merge(requests, role, reasons):
    """gpufleet_reboot_requests | reboot_requests_merge('kernel', ['GRUB will boot ...']) -> the other
    roles' records unchanged, then one {role, reason} per distinct reason of this role. The role's
    earlier records are replaced, never added to: a role run twice asks once, and a role whose reasons
    are gone (the pending change landed) asks no more."""
    if not isinstance(role, str) or not role.strip():
        _fail(role, "the role must be a non-empty name", role)
    if isinstance(reasons, (str, Mapping)) or not isinstance(reasons, (list, tuple)):
        _fail(role, "the reasons must be a list of texts", reasons)
    mine = []
    for reason in reasons:
        if not isinstance(reason, str) or not reason.strip():
            _fail(role, "every reason must be a non-empty text", reason)
        if reason not in mine:
            mine.append(reason)
    others = [r for r in _checked_requests(requests, role) if r["role"] != role]
    return others + [{"role": role, "reason": reason} for reason in mine]


class FilterModule(object):
    def filters(self):
        return {"reboot_requests_merge": reboot_requests_merge}
