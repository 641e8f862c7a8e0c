# -*- coding: utf-8 -*-
# Copyright: contributors to gpufleet.provision
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The reference placement over fabric.json (docs in fabric_place.yml; logic in module_utils/_fabric/placement.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError


def _count(count):
    """The node count: a whole number (an int, ASCII digits, or a float without a fraction, as Jinja's
    arithmetic makes them); the planner then wants it 1 or more."""
    if isinstance(count, str) and count.strip().isdigit() and count.strip().isascii():
        return int(count.strip())
    if isinstance(count, float) and count.is_integer():
        return int(count)
    if isinstance(count, bool) or not isinstance(count, int):
        raise AnsibleFilterError("fabric_place: the node count must be a whole number, got %r" % (count,))
    return count


def fabric_place(doc, count, busy=None, statuses=None):
    """fabric.json, N -> the hosts a topology-aware scheduler should give a job of N nodes."""
    # imported on use: Ansible loads every filter file of the collection in each forked worker that
    # looks up a filter whose name is not a file name (hostlist, cpulist...), and the fabric model
    # cost each of those workers 50 ms
    from ansible_collections.gpufleet.provision.plugins.module_utils._fabric.model import FabricError
    from ansible_collections.gpufleet.provision.plugins.module_utils._fabric.placement import place
    if busy is not None and (isinstance(busy, str) or not isinstance(busy, (list, tuple, set))):
        raise AnsibleFilterError("fabric_place: busy must be a list of host names, got %r" % (busy,))
    if statuses is not None and (isinstance(statuses, str) or not isinstance(statuses, (list, tuple))):
        raise AnsibleFilterError("fabric_place: statuses must be a list (green, quarantined, unknown), got %r" % (statuses,))
    count = _count(count)
    try:
        return place(doc, count, busy or (), tuple(statuses or ("green",)))
    except FabricError as exc:
        raise AnsibleFilterError("fabric_place: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"fabric_place": fabric_place}
