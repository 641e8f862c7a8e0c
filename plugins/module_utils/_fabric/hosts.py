# -*- coding: utf-8 -*-
# Copyright: contributors to gpufleet.provision
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stages 6, 8 and 9 of the fabric model: each host's rails, SU, miscabling and missing rails;
hosts known to the gate but absent from the fabric; what node facts add to a node."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections import Counter

from ansible_collections.gpufleet.provision.plugins.module_utils._node.parsers import natural_key
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric.common import (
    STATUS_BY_GATE, anomaly, vote)

# Adapters that name no host but still sit on a leaf: they may be the NIC a host misses there.
NAMELESS_KINDS = ("unnamed_hca", "suspicious_hostname")


def gate_status(entry):
    report = (entry or {}).get("report")
    if not isinstance(report, dict):
        return "unknown", None
    gate = report.get("status")
    return STATUS_BY_GATE.get(gate, "unknown"), gate


def _node_record(m, host, segments, su, rails, other):
    status, gate = gate_status(m.nodes.get(host))
    return {"status": status, "gate": gate, "segments": segments, "su": su, "block": None, "rails": rails,
            "other_nics": other}


def host_rails(m):
    """Stage 6: per host, its SU (the SU most of its NICs reach), each NIC's rail and whether it is
    miscabled, and the rails its segment has that it does not reach."""
    nameless_on = Counter(a["switch"] for a in m.anomalies if a["kind"] in NAMELESS_KINDS and a["host"] is None)
    leaf_su, leaf_rail, plan_nodes = m.leaf_su, m.leaf_rail, m.plan_nodes
    for host in sorted(m.hosts, key=natural_key):
        h = m.hosts[host]
        sus = [leaf_su[n["leaf"]] for n in h["nics"] if leaf_su.get(n["leaf"])]
        # the common host has every NIC in one SU: no vote to hold
        host_su = sus[0] if sus and sus.count(sus[0]) == len(sus) else vote(Counter(sus))
        if host in plan_nodes:
            host_su = plan_nodes[host]["su"]
        rails = []
        taken = set()
        reached = set()  # rails whose leaf this host physically reaches (a swapped pair still reaches both)
        for n in sorted(h["nics"], key=_nic_order):
            lr = leaf_rail.get(n["leaf"])
            if n["rail"] is None:
                n["rail"] = lr
                n["rail_from"] = "leaf"
            problem = _nic_problem(m, host, host_su, n, lr)
            n["miscabled"] = problem is not None
            if problem:
                m.anomalies.append(anomaly(
                    "miscabled_rail", "%s %s (rail %s) is %s: cross-rail traffic goes through the spine"
                    % (host, n["hca"], n["rail"], problem), host=host, hca=n["hca"], switch=n["leaf"],
                    port=n["port"], severity="error", rail=n["rail"], segment=n["segment"]))
            if n["rail"] is not None and n["rail"] in taken:
                m.warnings.append("%s has two NICs on rail %s (%s)" % (host, n["rail"], n["hca"]))
            taken.add(n["rail"])
            reached.add(lr if lr is not None else n["rail"])
            rails.append(_rail_entry(n))
        _missing_host_rails(m, host, h, host_su, reached, nameless_on)
        if host_su in m.sus:
            m.sus[host_su]["hosts"].append(host)
        m.nodes_out[host] = _node_record(m, host, sorted(h["segments"]), host_su, rails, [
            {"hca": n["hca"], "device": n["device"], "guid": n["guid"], "switch": n["leaf"], "port": n["port"]}
            for n in h["other"]])


_WORK_KEYS = ("facts_rail", "facts_role", "netdev")


def _rail_entry(n):
    """A rail NIC's record made its entry in the node's ``rails`` (one dict per NIC, not a copy): the
    keys the model worked with are dropped, the rest are the entry's, in its order."""
    for key in _WORK_KEYS:
        n.pop(key, None)
    return n


def _nic_order(n):
    return (n["rail"] if n["rail"] is not None else 999, natural_key(n["hca"] or ""))


def _nic_problem(m, host, host_su, n, lr):
    """Why a NIC is miscabled (text), or None."""
    lsu = m.leaf_su.get(n["leaf"])
    problem = None
    if n["rail"] is not None and lr is not None and lr != n["rail"]:
        problem = "on %s, the leaf of rail %s, instead of rail %s" % (n["leaf"], lr, n["rail"])
    elif host_su and lsu and lsu != host_su:
        problem = "on %s, a leaf of %s, while the host is in %s" % (n["leaf"], lsu, host_su)
    if host in m.plan_nodes and n["rail"] is not None:
        expected = m.sus.get(host_su, {}).get("leaves", {}).get(n["rail"])
        if expected and expected != n["leaf"] and problem is None:
            problem = "on %s, but the cabling plan puts rail %s of %s on %s" % (n["leaf"], n["rail"], host_su, expected)
        want_port = m.plan_nodes[host].get("port")
        if problem is None and want_port is not None and n["port"] != want_port:
            m.anomalies.append(anomaly(
                "plan_mismatch", "%s %s is on %s port %s, the cabling plan says port %s"
                % (host, n["hca"], n["leaf"], n["port"], want_port), host=host, hca=n["hca"],
                switch=n["leaf"], port=n["port"], segment=n["segment"]))
    return problem


def _missing_host_rails(m, host, h, host_su, reached, nameless_on):
    expected_rails = set()
    for seg in h["segments"]:
        expected_rails |= m.rails_by_segment.get(seg, set())
    su = m.sus.get(host_su)
    su_leaves = su["leaves"] if su else {}
    for r in sorted(expected_rails - reached):
        if r in su_leaves:
            leaf = su_leaves[r]
            why = "its SU %s has leaf %s for it, but no NIC of this host reaches the fabric on it" % (host_su, leaf)
            if nameless_on.get(leaf):
                why += (" (%d adapter(s) with no node description, or a default host name, sit on that leaf: one may be it)"
                        % nameless_on[leaf])
        else:
            why = "its SU %s has no leaf for rail %s at all (leaf absent from the capture)" % (host_su, r)
        m.anomalies.append(anomaly("missing_rail", "%s has no NIC on rail %s: %s" % (host, r, why),
                                   host=host, switch=su_leaves.get(r), severity="error", rail=r, su=host_su))


def su_checks(m):
    """SUs without a leaf for a rail of their segment; planned leaves and hosts absent; where the
    nameless adapters sit (the rail and SU of their leaf); the spines each SU reaches."""
    for su_name in sorted(m.sus, key=natural_key):
        su = m.sus[su_name]
        seg_rails = set()
        for seg in su["segments"]:
            seg_rails |= m.rails_by_segment.get(seg, set())
        for r in sorted(seg_rails - set(su["leaves"])):
            m.anomalies.append(anomaly(
                "missing_rail", "%s has no leaf for rail %s: the other SUs of its segment have one; the leaf is "
                "absent from the capture (down, unpowered or not cabled to the spines)" % (su_name, r),
                severity="error", rail=r, su=su_name))
        spines = set()
        for leaf in su["leaves"].values():
            spines.update(m.switches[leaf]["uplinks"])
        su["spines"] = sorted(spines, key=natural_key)
    for leaf, (su, rail) in m.plan_leaf.items():
        if leaf not in m.switches:
            m.anomalies.append(anomaly("missing_rail", "leaf %s (rail %s of %s in the cabling plan) is absent from the fabric"
                                       % (leaf, rail, su), switch=leaf, severity="error", rail=rail, su=su))
    for host, entry in sorted(m.plan_nodes.items()):
        if host not in m.nodes_out:
            m.anomalies.append(anomaly("plan_mismatch", "%s is in the cabling plan (%s) but has no NIC in the fabric"
                                       % (host, entry["su"]), host=host, severity="error", su=entry["su"]))
    for a in m.anomalies:
        if a["kind"] in NAMELESS_KINDS and a["host"] is None and a["switch"] in m.leaf_su:
            a["su"] = m.leaf_su[a["switch"]]
            a["rail"] = m.leaf_rail.get(a["switch"])
            a["message"] += "; it sits on the rail %s leaf of %s" % (a["rail"], a["su"])


def not_in_fabric(m):
    """Stage 8: nodes known to the gate (facts or a report) but with no adapter in the capture."""
    for host in sorted(m.nodes, key=natural_key):
        if host in m.nodes_out:
            continue
        m.anomalies.append(anomaly(
            "not_in_fabric", "%s has node facts/a gate report but none of its adapters is in the capture" % host,
            host=host, severity="error"))
        m.nodes_out[host] = _node_record(m, host, [], None, [], [])


def node_facts(m):
    """Stage 9: NUMA layout, GPU<->NIC pairs and HT siblings from node facts, for placement."""
    for host, out in m.nodes_out.items():
        facts = (m.nodes.get(host) or {}).get("facts") or {}
        numa = facts.get("numa") or {}
        out["numa"] = [{"id": n.get("id"), "cpus": n.get("cpus")} for n in (numa.get("nodes") or []) if isinstance(n, dict)] or None
        out["pairs"] = facts.get("pairs") or None
        out["siblings"] = (facts.get("cpu") or {}).get("siblings") or None
        if "roce" in out["segments"]:
            out["roce"] = {"gid_index": roce_gid_index(facts, out["rails"]), "tc": m.roce_tc,
                           "addresses": planned_addresses(m.rail_plans.get(host), facts)}


def planned_addresses(plan, facts):
    """The host's rail plan as fabric.json lists it: [{rail, interface, cidr, gateway, routes}] in rail
    order (the interface from the plan, else the netdev of the rail's NIC in the facts); None: no plan."""
    if not isinstance(plan, dict):
        return None
    netdevs = dict((n.get("rail"), (n.get("netdevs") or [None])[0]) for n in facts.get("nics") or []
                   if isinstance(n, dict) and n.get("role") == "rail")
    return [{"rail": r["rail"], "interface": r.get("interface") or netdevs.get(r["rail"]), "cidr": r["cidr"],
             "gateway": r.get("gateway"), "routes": list(r.get("routes") or [])}
            for r in sorted(plan.get("rails") or [], key=lambda r: r["rail"])]


def roce_gid_index(facts, rails):
    """The index of the RoCE v2 IPv4 GID on the host's RoCE rail NICs (node facts), when it is one
    and the same on every rail (``NCCL_IB_GID_INDEX`` is one value per process); else None."""
    devices = set(r["device"] for r in rails if r["segment"] == "roce" and r["device"])
    found, seen = set(), set()
    for nic in facts.get("nics") or []:
        if not isinstance(nic, dict) or nic.get("name") not in devices:
            continue
        seen.add(nic["name"])
        for port in (nic.get("ports") or [])[:1]:
            found.update(g.get("index") for g in port.get("gids") or []
                         if g.get("type") == "RoCE v2" and g.get("ipv4") and g.get("ndev") in (nic.get("netdevs") or []))
    return found.pop() if len(found) == 1 and seen == devices and devices else None
