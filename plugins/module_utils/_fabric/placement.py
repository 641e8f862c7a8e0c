# -*- coding: utf-8 -*-
# Copyright: contributors to gpufleet.provision
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reference placement over fabric.json: which free hosts a job of N nodes should get.

Tiers, best first: a placement block (hosts with the same leaf on every rail: one hop apart on all
rails), then an SU (one spine group hop), then a fabric segment. At each tier the smallest unit
that fits wins, so big blocks stay free for the jobs that need them. When no unit of a tier fits,
the next tier's smallest fitting unit is filled from its parts: the smallest part that fits the rest
takes it, else the smallest part is taken whole and the rest looked at again. So at most one
block is split, and never one when a smaller one would do.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.provision.plugins.module_utils._fabric.common import STATUS_BY_GATE, FabricError
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric.verdicts import check_document, schedulable
from ansible_collections.gpufleet.provision.plugins.module_utils._node.parsers import natural_key


class _Unit(object):
    """A block (hosts) or a group of units (an SU of blocks, a segment of SUs)."""

    def __init__(self, name, hosts=None, parts=None):
        self.name = name
        self.hosts = hosts
        self.parts = parts
        self.size = len(hosts) if hosts is not None else sum(p.size for p in parts)

    def key(self):
        return (self.size, natural_key(self.name))

    def take(self, count, used):
        """count hosts of this unit (count <= size); the names of the blocks used go to ``used``."""
        if self.hosts is not None:
            used.append(self.name)
            return self.hosts[:count]
        parts = sorted((p for p in self.parts if p.size), key=_Unit.key)
        out = []
        while count:
            fit = [p for p in parts if p.size >= count]
            if fit:
                return out + fit[0].take(count, used)
            whole = parts.pop(0)
            out += whole.take(whole.size, used)
            count -= whole.size
        return out


def _units(doc, busy, statuses):
    """Blocks, SUs and segments with their free hosts (status in statuses, not busy, schedulable)."""
    try:
        check_document(doc, required=("nodes", "blocks"))
    except FabricError as exc:
        raise FabricError("placement: expected the fabric.json document (an object with `nodes` and `blocks`): %s" % exc)
    nodes = doc["nodes"]
    allowed = set(schedulable(doc))
    free = set(h for h in allowed if nodes[h].get("status") in statuses and h not in busy)
    blocks = []
    by_su = {}
    for b in doc["blocks"]:
        hosts = sorted((h for h in b["nodes"] if h in free), key=natural_key)
        unit = _Unit(b["name"], hosts=hosts)
        blocks.append(unit)
        by_su.setdefault(b.get("su") or "nosu", []).append(unit)
    su_segment = {}
    for su in doc.get("sus") or []:
        su_segment[su["name"]] = (su.get("segments") or ["fabric"])[0]
    sus = [_Unit(name, parts=parts) for name, parts in by_su.items()]
    by_segment = {}
    for su in sus:
        by_segment.setdefault(su_segment.get(su.name, "fabric"), []).append(su)
    segments = [_Unit(name, parts=parts) for name, parts in by_segment.items()]
    return blocks, sus, segments


def place(doc, count, busy=(), statuses=("green",)):
    """-> {"hosts": [...], "tier": "block"|"su"|"segment", "unit": name, "blocks": [names]}.

    Raises FabricError when no segment has ``count`` free hosts (a job cannot span segments).
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise FabricError("placement: the node count must be a whole number of 1 or more, got %r" % (count,))
    for what, names in (("busy", busy or ()), ("statuses", statuses)):
        bad = [n for n in names if not isinstance(n, str)]
        if bad:
            raise FabricError("placement: %s must be host names or statuses (text), got %r" % (what, bad[0]))
    unknown = sorted(set(statuses) - set(STATUS_BY_GATE.values()) - {"unknown"})
    if unknown:
        raise FabricError("placement: statuses %s: not a node status (green, quarantined, unknown)" % ", ".join(unknown))
    busy = set(busy or ())
    blocks, sus, segments = _units(doc, busy, set(statuses))
    for tier, units in (("block", blocks), ("su", sus), ("segment", segments)):
        fit = sorted((u for u in units if u.size >= count), key=_Unit.key)
        if fit:
            used = []
            hosts = fit[0].take(count, used)
            return {"hosts": hosts, "tier": tier, "unit": fit[0].name, "blocks": used}
    largest = max([s.size for s in segments] or [0])
    raise FabricError("placement: no fabric segment has %d free node(s) with status %s (the most free in one "
                      "segment: %d)" % (count, "/".join(sorted(statuses)), largest))
