# -*- coding: utf-8 -*-
# Copyright: contributors to gpufleet.provision
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stages 3-5 of the fabric model: switch tiers, the rail of each NIC, scalable units and the rail
of each leaf (from the data, or from a cabling plan)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections import Counter, defaultdict
from itertools import chain
from operator import itemgetter

from ansible_collections.gpufleet.provision.plugins.module_utils._node.parsers import natural_key
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric.common import (
    FabricError, NAME_NUM_RE, TIER_ORDER, UnionFind)

_LEAF = itemgetter("leaf")
_LEAF_RAIL = itemgetter("leaf", "rail")


def tiers(m):
    """Stage 3: leaf = switch with adapters; spine = above leaves; core = above spines."""
    leaf_names = set(a["switch"] for a in m.anomalies
                     if a["kind"] in ("unnamed_hca", "suspicious_hostname") and a["switch"] in m.switches)
    per_leaf = Counter(map(_LEAF, chain.from_iterable(nics for h in m.hosts.values() for nics in (h["nics"], h["other"]))))
    for leaf, count in per_leaf.items():
        m.switches[leaf]["hosts"] += count
    leaf_names.update(per_leaf)
    neighbours = defaultdict(set)
    for (sa, sb) in m.isl:
        neighbours[sa].add(sb)
    for name in leaf_names:
        m.switches[name]["tier"] = "leaf"
    frontier = set(leaf_names)
    tier_names = ["spine", "core"]
    depth = 0
    while frontier:
        nxt = set()
        for name in frontier:
            for peer in neighbours[name]:
                if m.switches[peer]["tier"] is None:
                    nxt.add(peer)
        label = tier_names[depth] if depth < len(tier_names) else "tier%d" % (depth + 2)
        for name in nxt:
            m.switches[name]["tier"] = label
        frontier = nxt
        depth += 1
    for sw in m.switches.values():
        if sw["tier"] is None:
            sw["tier"] = "isolated"
            m.warnings.append("switch %s reaches no leaf in the capture" % sw["name"])
    rank = dict((name, TIER_ORDER.get(sw["tier"], 9)) for name, sw in m.switches.items())
    for (sa, sb), count in m.isl.items():
        ta, tb = rank[sa], rank[sb]
        if tb > ta:
            m.switches[sa]["uplinks"][sb] = count
        elif tb < ta:
            m.switches[sa]["downlinks"][sb] = count


def nic_rails(m):
    """Stage 4: the rail of each NIC, from node facts, else ranked HCA names inside name families."""
    names = set()
    for h in m.hosts.values():
        for n in h["nics"]:
            names.add(n["hca"] or "")
    families = defaultdict(set)
    split = {}
    for name in names:
        mm = NAME_NUM_RE.match(name)
        if mm:
            split[name] = (mm.group(1), int(mm.group(2)))
            families[mm.group(1)].add(int(mm.group(2)))
    rank = {}
    for prefix, numbers in families.items():
        for i, num in enumerate(sorted(numbers)):
            rank[(prefix, num)] = i
    by_name = dict((name, rank.get(key)) for name, key in split.items())
    for h in m.hosts.values():
        for n in h["nics"]:
            if isinstance(n["facts_rail"], int):
                n["rail"] = n["facts_rail"]
                n["rail_from"] = "facts"
            else:
                n["rail"] = by_name.get(n["hca"] or "")
                n["rail_from"] = "name" if n["rail"] is not None else None


def scalable_units(m):
    """Stage 5: leaves that share at least half of their hosts form one SU (union of such pairs)."""
    leaf_hosts = defaultdict(set)
    leaf_sets = Counter()   # the hosts of an SU mostly share one set of leaves: count pairs once per set
    for host, h in m.hosts.items():
        leaves = tuple(sorted(set(map(_LEAF, h["nics"]))))
        leaf_sets[leaves] += 1
        for leaf in leaves:
            leaf_hosts[leaf].add(host)
    pair_count = Counter()
    for leaves, hosts in leaf_sets.items():
        for i in range(len(leaves)):
            for j in range(i + 1, len(leaves)):
                pair_count[(leaves[i], leaves[j])] += hosts
    uf = UnionFind()
    for leaf in leaf_hosts:
        uf.find(leaf)
    for (la, lb), count in pair_count.items():
        if count * 2 >= min(len(leaf_hosts[la]), len(leaf_hosts[lb])):
            uf.union(la, lb)
    su_leaves = defaultdict(list)
    for leaf in leaf_hosts:
        su_leaves[uf.find(leaf)].append(leaf)
    # the SUs are numbered in the natural order of their first hosts (hosts with equal natural keys
    # are alike for that order, so the one min() returns does not matter)
    first_host = dict((root, min(set().union(*(leaf_hosts[leaf] for leaf in ls)), key=natural_key))
                      for root, ls in su_leaves.items())
    for i, root in enumerate(sorted(su_leaves, key=lambda r: natural_key(first_host[r])), 1):
        name = "su%d" % i
        for leaf in su_leaves[root]:
            m.leaf_su[leaf] = name
        m.sus[name] = _su(name)


def _su(name):
    return {"name": name, "leaves": {}, "spines": [], "hosts": [], "segments": set()}


def leaf_rails(m):
    """Stage 5b: the rail of a leaf is the rail most of its NICs carry (ties: the lowest)."""
    votes = defaultdict(Counter)
    pairs = Counter(map(_LEAF_RAIL, chain.from_iterable(h["nics"] for h in m.hosts.values())))
    for (leaf, rail), count in pairs.items():
        if rail is not None:
            votes[leaf][rail] += count
    for leaf, counter in votes.items():
        best = max(counter.values())
        m.leaf_rail[leaf] = min(r for r, c in counter.items() if c == best)


def read_plan(plan):
    """Cabling plan -> ({leaf: (su, rail)}, {host: {"su", "port"}}).

    Format (YAML/JSON)::

        sus:
          su1:
            leaves: {0: leaf-r0-su1, 1: leaf-r1-su1}
            nodes: {gpu001: 1, gpu002: 2}     # host -> leaf port (same on every rail), or a list of hosts
    """
    if not isinstance(plan, dict) or not isinstance(plan.get("sus"), dict):
        raise FabricError("cabling_plan: expected a mapping with a `sus` mapping (su name -> {leaves, nodes})")
    plan_leaf = {}
    plan_nodes = {}
    for su, entry in plan["sus"].items():
        if not isinstance(entry, dict) or not isinstance(entry.get("leaves"), dict):
            raise FabricError("cabling_plan: SU %s needs a `leaves` mapping of rail number -> leaf name" % su)
        for rail, leaf in entry["leaves"].items():
            text = str(rail)
            # a rail is a number 0 or more (YAML keys may be text): never 1.5, true, or another script's digits
            if isinstance(rail, (bool, float)) or not (text.isdigit() and text.isascii()):
                raise FabricError("cabling_plan: SU %s: rail %r is not a number (0, 1, ...)" % (su, rail))
            if not isinstance(leaf, str) or not leaf.strip():
                raise FabricError("cabling_plan: SU %s: the leaf of rail %s must be a switch name, got %r" % (su, rail, leaf))
            plan_leaf[leaf] = (str(su), int(text))
        members = entry.get("nodes") or {}
        if isinstance(members, list):
            bad = [h for h in members if not isinstance(h, str)]
            if bad:
                raise FabricError("cabling_plan: SU %s: `nodes` lists %r, not a host name" % (su, bad[0]))
            members = dict((h, None) for h in members)
        if not isinstance(members, dict):
            raise FabricError("cabling_plan: SU %s: `nodes` must be a list of hosts or a mapping host -> port" % su)
        for host, port in members.items():
            if port is not None and (isinstance(port, bool) or not isinstance(port, int) or port < 0):
                raise FabricError("cabling_plan: SU %s: port of %s must be a number, got %r" % (su, host, port))
            plan_nodes[str(host)] = {"su": str(su), "port": port}
    return plan_leaf, plan_nodes


def apply_plan(m):
    """Stage 5c: a cabling plan, when given, names the SUs and the leaf of each rail."""
    if not m.plan:
        return
    m.plan_leaf, m.plan_nodes = read_plan(m.plan)
    planned_sus = set(v[0] for v in m.plan_leaf.values())
    for leaf, (su, rail) in m.plan_leaf.items():
        if leaf in m.switches:
            m.leaf_su[leaf] = su
            m.leaf_rail[leaf] = rail
        m.sus.setdefault(su, _su(su))
    used = set(m.leaf_su.values())
    for su in list(m.sus):
        if su not in used and su not in planned_sus:
            del m.sus[su]


def index_sus(m):
    """Each SU's leaf per rail and segments; the rails every segment carries."""
    for leaf, su in m.leaf_su.items():
        sw = m.switches[leaf]
        sw["su"] = su
        rail = m.leaf_rail.get(leaf)
        sw["rail"] = rail
        if rail is not None:
            if rail in m.sus[su]["leaves"]:
                m.warnings.append("SU %s has two leaves for rail %s: %s and %s" % (su, rail, m.sus[su]["leaves"][rail], leaf))
            else:
                m.sus[su]["leaves"][rail] = leaf
        m.sus[su]["segments"].add(sw["segment"])
    m.all_rails = sorted(set(r for r in m.leaf_rail.values() if r is not None))
    for leaf, r in m.leaf_rail.items():
        if r is not None:
            m.rails_by_segment[m.switches[leaf]["segment"]].add(r)
