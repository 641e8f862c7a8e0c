# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The firmware role's decision from facts already collected (docs in firmware_due.yml)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.provision.plugins.module_utils._devices import firmware as _fw


def firmware_due(facts, nic_minimums, nvme_minimums, allow_downgrade=False, images=None):
    """ansible_facts.gpufleet | firmware_due(nic, nvme, allow_downgrade, images) -> {nic, nvme, reasons, at_minimum}."""
    if not isinstance(facts, dict):
        raise AnsibleFilterError("firmware_due: expected the node facts (ansible_facts.gpufleet), got %r" % type(facts).__name__)
    return _fw.due_from_facts(facts, nic_minimums or {}, nvme_minimums or {}, bool(allow_downgrade), images or [])


class FilterModule(object):
    def filters(self):
        return {"firmware_due": firmware_due}
