# -*- coding: utf-8 -*-
# Copyright: contributors to gpufleet.provision
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stage 10 of the fabric model: anomaly ids, quarantine by the fabric, placement blocks, the document."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch
from collections import Counter, defaultdict

from ansible_collections.gpufleet.provision.plugins.module_utils._node.parsers import natural_key
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric.common import (
    ANOMALY_KINDS, DEFAULT_SUSPICIOUS_HOSTNAMES, QUARANTINE_KINDS, SCHEMA_VERSION, FabricError, check_form)


def _kind_rank(kind):
    return ANOMALY_KINDS.index(kind) if kind in ANOMALY_KINDS else 99


def sort_anomalies(anomalies):
    anomalies.sort(key=lambda a: (_kind_rank(a["kind"]), natural_key(a["host"] or ""), natural_key(a["switch"] or ""),
                                  a["port"] if isinstance(a["port"], int) else -1, natural_key(str(a["hca"] or ""))))


def _subject(a):
    """What an anomaly is about, as the id's second part: host/adapter, GUID, host/rail, switch/peer."""
    if a["host"] and a["hca"]:
        return "%s/%s" % (a["host"], a["hca"])
    if a.get("guid") and a["kind"] != "missing_rail":
        return a["guid"]
    if a["host"]:
        return "%s/rail%s" % (a["host"], a["rail"]) if a.get("rail") is not None else a["host"]
    if a.get("su") and a.get("rail") is not None and not a["switch"]:
        return "%s/rail%s" % (a["su"], a["rail"])
    if a["switch"]:
        if a.get("peer"):
            return "%s/%s" % (a["switch"], a["peer"])
        return "%s/%s" % (a["switch"], a["port"]) if a["port"] is not None else a["switch"]
    return "fabric"


def assign_ids(anomalies):
    """A stable id per anomaly (``kind:subject``: the same fault keeps its id from one run to the
    next, so an operator can accept it by id); the rare repeat gets ``~2``, ``~3``."""
    seen = Counter()
    for a in anomalies:
        base = "%s:%s" % (a["kind"], _subject(a))
        seen[base] += 1
        a["id"] = base if seen[base] == 1 else "%s~%d" % (base, seen[base])


def quarantine(m):
    """A host with a miscabled or missing rail or a degraded link of its own is quarantined by the
    fabric, whatever the gate said, unless every such anomaly is accepted (``accept``: ids or
    shell-style patterns of ids)."""
    by_host = defaultdict(list)
    for a in m.anomalies:
        a["accepted"] = any(fnmatch.fnmatchcase(a["id"], p) for p in m.accept)
        if a["host"] in m.nodes_out:
            by_host[a["host"]].append(a)
    for host, out in m.nodes_out.items():
        mine = by_host.get(host, [])
        out["anomalies"] = [a["id"] for a in mine]
        out["quarantine"] = [a["id"] for a in mine if a["kind"] in QUARANTINE_KINDS and not a["accepted"]]
        out["accepted"] = [a["id"] for a in mine if a["accepted"]]
        by = []
        if out["status"] == "quarantined":
            by.append("gate")
        if out["quarantine"]:
            by.append("fabric")
            out["status"] = "quarantined"
        out["quarantined_by"] = by


def blocks(m):
    """Blocks: hosts with the same leaf on every rail (one hop apart on all rails), per SU."""
    groups = defaultdict(list)
    for host, out in m.nodes_out.items():
        if not out["rails"]:
            continue
        key = (out["su"], tuple(sorted((str(r["rail"]), r["leaf"]) for r in out["rails"])))
        groups[key].append(host)
    per_su = defaultdict(list)
    for (su, key), members in groups.items():
        per_su[su].append((key, sorted(members, key=natural_key)))
    out = []
    for su in sorted(per_su, key=lambda s: natural_key(s or "")):
        items = sorted(per_su[su], key=lambda kv: (-len(kv[1]), natural_key(kv[1][0])))
        for i, (key, members) in enumerate(items, 1):
            name = "%s-b%d" % (su or "nosu", i)
            for host in members:
                m.nodes_out[host]["block"] = name
            out.append({"name": name, "su": su, "size": len(members), "nodes": members, "leaves": dict(key)})
    m.blocks = out


def _natural_rank(names):
    """{name: its rank in natural order}, names with the same natural key sharing one: a sort by
    ``rank.__getitem__`` (called in C) gives the order of a sort by ``natural_key``."""
    keys = dict((name, natural_key(name)) for name in names)
    order = dict((key, i) for i, key in enumerate(sorted(set(keys.values()))))
    return dict((name, order[key]) for name, key in keys.items())


def _in_natural_order(by_name, rank):
    """A dict keyed by switch names, in the natural order of its keys."""
    names = sorted(by_name, key=rank.__getitem__)
    return dict(zip(names, map(by_name.__getitem__, names)))


def document(m):
    rank = _natural_rank(m.switches)    # the uplinks and downlinks of every switch name switches
    for sw in m.switches.values():
        sw["uplinks"] = _in_natural_order(sw["uplinks"], rank)
        sw["downlinks"] = _in_natural_order(sw["downlinks"], rank)
    names_by_rail = defaultdict(set)
    for h in m.hosts.values():
        for n in h["nics"]:
            if n["hca"]:
                names_by_rail[n["rail"]].add(n["hca"])
    leaves_by_rail = defaultdict(list)
    for leaf, r in m.leaf_rail.items():
        leaves_by_rail[r].append(leaf)
    rails_out = [{"rail": r, "names": sorted(names_by_rail[r], key=natural_key),
                  "leaves": sorted(leaves_by_rail[r], key=natural_key)} for r in m.all_rails]
    doc = {
        "schema": SCHEMA_VERSION,
        "sources": m.sources,
        "segments": sorted(set(s["segment"] for s in m.sources)),
        "policy": {"suspicious_hostnames": sorted(m.suspicious), "accept": m.accept,
                   "quarantine_kinds": list(QUARANTINE_KINDS)},
        "rails": rails_out,
        "sus": [{"name": s["name"], "segments": sorted(s["segments"]),
                 "leaves": dict((str(r), l) for r, l in sorted(s["leaves"].items())),
                 "spines": s["spines"], "hosts": sorted(s["hosts"], key=natural_key)}
                for s in (m.sus[k] for k in sorted(m.sus, key=natural_key))],
        "spine_groups": m.spine_groups,
        "nodes": dict((h, m.nodes_out[h]) for h in sorted(m.nodes_out, key=natural_key)),
        "switches": _in_natural_order(m.switches, rank),
        "blocks": m.blocks,
        "anomalies": m.anomalies,
        "warnings": m.warnings,
    }
    doc["summary"] = summarize(doc)
    return doc


def summarize(doc):
    status = Counter(n["status"] for n in doc["nodes"].values())
    kinds = Counter(a["kind"] for a in doc["anomalies"])
    tiers = Counter(s["tier"] for s in doc["switches"].values())
    groups = doc.get("spine_groups") or []
    return {
        "nodes": len(doc["nodes"]),
        "status": dict(sorted(status.items())),
        "quarantined_by_fabric": sum(1 for n in doc["nodes"].values() if "fabric" in (n.get("quarantined_by") or [])),
        "switches": dict(sorted(tiers.items())),
        "rails": len(doc["rails"]),
        "sus": len(doc["sus"]),
        "spine_groups": dict(sorted(Counter(g["kind"] for g in groups).items())),
        "blocks": len(doc["blocks"]),
        "block_sizes": sorted((b["size"] for b in doc["blocks"]), reverse=True),
        "anomalies": dict((k, kinds[k]) for k in sorted(kinds, key=_kind_rank)),
        "accepted": sum(1 for a in doc["anomalies"] if a.get("accepted")),
        "warnings": len(doc["warnings"]),
    }


def default_names(doc):
    """The default host names of a fabric document (its policy, and the built-in list)."""
    names = set(h.lower() for h in DEFAULT_SUSPICIOUS_HOSTNAMES)
    names.update(h.lower() for h in (doc.get("policy") or {}).get("suspicious_hostnames") or [])
    return names


def schedulable(doc):
    """Hosts that may appear in a scheduler file or a placement at all (no default host names)."""
    bad = default_names(doc)
    return [h for h in doc["nodes"] if h.lower() not in bad and h.split(".")[0].lower() not in bad]


# What readers of fabric.json (the fabric inventory plugin, placement) take from it: a file written
# by hand, cut short or of another schema is an error naming the key, never a TypeError in a reader.
DOCUMENT = {
    "nodes": ("each", {"status": str, "su": str, "block": str, "segments": [str], "quarantine": [str],
                       "quarantined_by": [str], "rails": [{"rail": int, "leaf": str}]}),
    "blocks": [{"name": str, "su": str, "nodes": [str]}],
    "sus": [{"name": str, "segments": [str]}],
    "policy": {"suspicious_hostnames": [str]},
    "anomalies": [{"kind": str, "host": str, "guid": (str, int)}],
}


def check_document(doc, required=("nodes",)):
    """A fabric.json document of this schema, as far as its readers read it; FabricError naming the
    key (``required``: the top-level keys the caller cannot do without)."""
    if not isinstance(doc, dict):
        raise FabricError("expected the fabric.json document (an object), got %s" % type(doc).__name__)
    if doc.get("schema") != SCHEMA_VERSION:
        raise FabricError("expected fabric.json schema %d, got schema %r" % (SCHEMA_VERSION, doc.get("schema")))
    for key in required:
        if doc.get(key) is None:
            raise FabricError("fabric.json has no `%s`" % key)
    for key, spec in DOCUMENT.items():
        check_form(doc.get(key), spec, key)
    for index, block in enumerate(doc.get("blocks") or []):
        if block.get("name") is None or block.get("nodes") is None:
            raise FabricError("blocks[%d]: a block has a name and nodes, got %r" % (index, block))
