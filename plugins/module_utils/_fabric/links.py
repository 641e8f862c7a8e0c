# -*- coding: utf-8 -*-
# Copyright: contributors to gpufleet.provision
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stage 7 of the fabric model: spine groups, then degraded, missing and miscabled links.

A leaf's uplinks are judged against its own spine group, never against the spines some other leaf
of its SU reaches. Two shapes are common and both must read clean:

- shared spines: every leaf of the segment is cabled to every spine (one group, all rails);
- rail planes: rail k of every SU goes to the spines of plane k only (one group per rail).

Spines whose sets of leaves overlap by at least half (of the smaller set) are one group: a missing
cable removes one leaf from one spine's set and a stray cable adds one, so neither splits or merges
a group. A leaf belongs to the group most of its uplink cables go to.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections import Counter, defaultdict
from operator import itemgetter

from ansible_collections.gpufleet.provision.plugins.module_utils._node.parsers import natural_key
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric.common import (
    TIER_ORDER, UnionFind, anomaly, link_gbps, mode, vote)


def spine_groups(m):
    """Group the spines by the leaves they serve, assign each leaf its group."""
    leaves = [sw for sw in m.switches.values() if sw["tier"] == "leaf" and sw["segment"] != "roce"]
    spine_leaves = defaultdict(set)
    for sw in leaves:
        for spine in sw["uplinks"]:
            spine_leaves[spine].add(sw["name"])
    by_set = defaultdict(list)
    for spine, members in spine_leaves.items():
        by_set[frozenset(members)].append(spine)
    keys = sorted(by_set, key=lambda k: natural_key(min(by_set[k], key=natural_key)))
    uf = UnionFind()
    for i in range(len(keys)):
        uf.find(i)
        for j in range(i + 1, len(keys)):
            if len(keys[i] & keys[j]) * 2 >= min(len(keys[i]), len(keys[j])):
                uf.union(i, j)
    grouped = defaultdict(list)
    for i, key in enumerate(keys):
        grouped[uf.find(i)].extend(by_set[key])
    ordered = sorted((sorted(s, key=natural_key) for s in grouped.values()), key=lambda s: natural_key(s[0]))
    group_of_spine = {}
    groups = []
    for i, spines in enumerate(ordered, 1):
        name = "sg%d" % i
        for spine in spines:
            group_of_spine[spine] = name
        groups.append({"name": name, "segment": m.switches[spines[0]]["segment"], "spines": spines, "leaves": []})
    by_name = dict((g["name"], g) for g in groups)
    # A leaf's group: where most of its cables go. A tie (one cable moved when a plane has two spines)
    # or a leaf with no uplink at all takes the group most leaves of its rail (and segment) have, so
    # that every cable it misses is named.
    undecided = []
    rail_votes = defaultdict(Counter)
    for sw in leaves:
        votes = Counter()
        for spine, count in sw["uplinks"].items():
            votes[group_of_spine[spine]] += count
        best = max(votes.values()) if votes else 0
        tied = [g for g, c in votes.items() if c == best]
        if len(tied) == 1:
            sw["spine_group"] = tied[0]
            rail_votes[(sw["segment"], sw["rail"])][tied[0]] += 1
        else:
            undecided.append((sw, tied))
    for sw, tied in undecided:
        votes = rail_votes.get((sw["segment"], sw["rail"])) or Counter()
        if tied:
            votes = Counter(dict((g, votes.get(g, 0)) for g in tied))
        sw["spine_group"] = vote(votes)
    for sw in leaves:
        if sw["spine_group"] is not None:
            by_name[sw["spine_group"]]["leaves"].append(sw["name"])
    for g in groups:
        g["leaves"].sort(key=natural_key)
        rails = sorted(set(m.switches[l]["rail"] for l in g["leaves"] if m.switches[l]["rail"] is not None))
        g["rails"] = rails
        g["kind"] = "rail-plane" if len(rails) == 1 else "shared"
        counts = [c for l in g["leaves"] for s, c in m.switches[l]["uplinks"].items() if group_of_spine[s] == g["name"]]
        g["links_per_spine"] = mode(Counter(counts))
    m.spine_groups = groups
    return group_of_spine


def link_anomalies(m, group_of_spine):
    """Host links and switch links below their segment's norm; uplinks missing in a leaf's spine
    group, or going to a spine of another group."""
    _degraded_host_links(m)
    _degraded_switch_links(m)
    groups = dict((g["name"], g) for g in m.spine_groups)
    for sw in sorted((s for s in m.switches.values() if s["tier"] == "leaf" and s["segment"] != "roce"),
                     key=lambda s: natural_key(s["name"])):
        group = groups.get(sw["spine_group"])
        if group is None:
            continue
        uplinks = sw["uplinks"]
        norm = group["links_per_spine"]
        spines = group["spines"]
        # the common leaf has its links to every spine of its group and to no other: one look each, in C
        if norm is not None and spines and min(map(uplinks.get, spines, [0] * len(spines))) < norm:
            _missing_uplinks(m, sw, group, norm)
        if set(map(group_of_spine.get, uplinks)) - {group["name"]}:
            _foreign_uplinks(m, sw, group, group_of_spine)


def _missing_uplinks(m, sw, group, norm):
    for spine in group["spines"]:
        have = sw["uplinks"].get(spine, 0)
        if have < norm:
            what = "no link" if have == 0 else "%d of %d links" % (have, norm)
            m.anomalies.append(anomaly(
                "link_missing", "leaf %s has %s to spine %s (the leaves of its spine group %s have %d): less "
                "bandwidth up, and a congested path for its hosts" % (sw["name"], what, spine, group["name"], norm),
                switch=sw["name"], peer=spine, segment=sw["segment"], links=have, expected_links=norm,
                spine_group=group["name"]))


def _foreign_uplinks(m, sw, group, group_of_spine):
    for spine in sorted(sw["uplinks"], key=natural_key):
        other = group_of_spine.get(spine)
        if other != group["name"]:
            m.anomalies.append(anomaly(
                "uplink_miscabled", "leaf %s (spine group %s) has %d link(s) to spine %s of spine group %s: "
                "traffic of its rail lands on another plane" % (sw["name"], group["name"], sw["uplinks"][spine], spine, other),
                switch=sw["name"], peer=spine, segment=sw["segment"], links=sw["uplinks"][spine],
                spine_group=group["name"], peer_group=other))


def _slow(items):
    """items: one (segment, width, speed) per link, in order -> ([(index, Gb/s)] of the links slower
    than their segment's norm, {segment: norm}); a segment's norm is its most common rate. A fabric
    has few distinct items: each is priced once, and the links are counted and picked out in C."""
    counts = Counter(items)
    rate_of = {}
    per_segment = defaultdict(Counter)
    for item, count in counts.items():
        rate = rate_of[item] = link_gbps(item[1], item[2])
        per_segment[item[0]][rate] += count
    norms = dict((seg, mode(rates)) for seg, rates in per_segment.items())
    slow = set(item for item, rate in rate_of.items()
               if rate is not None and norms[item[0]] is not None and rate < norms[item[0]])
    if not slow:
        return [], norms
    return [(i, rate_of[item]) for i, item in enumerate(items) if item in slow], norms


_SEGMENT_RATE = itemgetter("segment", "width", "speed")


def _degraded_host_links(m):
    # Norm per segment: the most common rate among host links.
    owners = [(host, n) for host, h in m.hosts.items() for n in h["nics"] + h["other"]]
    slow, host_norm = _slow(list(map(_SEGMENT_RATE, map(itemgetter(1), owners))))
    for i, rate in slow:
        host, n = owners[i]
        norm = host_norm[n["segment"]]
        m.anomalies.append(anomaly(
            "link_degraded", "%s %s on %s port %s runs at %sx%s (%g Gb/s), below the fabric's %g Gb/s"
            % (host, n["hca"], n["leaf"], n["port"], n["width"], n["speed"], rate, norm),
            host=host, hca=n["hca"], switch=n["leaf"], port=n["port"], segment=n["segment"], severity="error"))


def _degraded_switch_links(m):
    slow, isl_norm = _slow(list(map(itemgetter(0, 5, 6), m.isl_links)))
    for i, rate in slow:
        seg, sa, pa, sb, pb, width, speed = m.isl_links[i]
        norm = isl_norm[seg]
        if TIER_ORDER.get(m.switches[sa]["tier"], 9) > TIER_ORDER.get(m.switches[sb]["tier"], 9):
            sa, pa, sb, pb = sb, pb, sa, pa  # name the lower switch first: leaf port -> spine port
        m.anomalies.append(anomaly(
            "link_degraded", "link %s port %s <-> %s port %s runs at %sx%s (%g Gb/s), below the fabric's %g Gb/s"
            % (sa, pa, sb, pb, width, speed, rate, norm), switch=sa, port=pa, peer=sb, peer_port=pb, segment=seg))
