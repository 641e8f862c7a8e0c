# -*- coding: utf-8 -*-
# Copyright: contributors to gpufleet.provision
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fabric model and analysis: rails, scalable units, tiers, placement blocks, anomalies.

Pure Python over the output of ``_ibnetdiscover.parse`` (and LLDP neighbours for RoCE), usable
without Ansible. ``analyze()`` returns the document that ``fabric.json`` serialises (schema 1,
docs/fabric.schema.json); it never raises on bad data: everything odd is an anomaly or a warning.

How rails and SUs are found when no cabling plan is given (DOMAIN.md section 6):
- a leaf is a switch with host adapters on it; a spine a switch above leaves; a core above spines;
- leaves that share most of their hosts form one scalable unit (rail k of every host of an SU
  plugs into the SU's leaf k);
- the rail of a NIC comes from node_facts (the GPU it pairs with) when the host's facts are given,
  else from its HCA name: names are grouped in families (``HCA-1, HCA-2, HCA-5, HCA-6`` and
  ``mlx5_0, mlx5_1, mlx5_4, mlx5_5``) and ranked by number inside each family;
- the rail of a leaf is the rail most of its NICs have; a NIC on a leaf of another rail or another
  SU is miscabled.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import gc
import re
from collections import Counter, defaultdict

from ansible_collections.gpufleet.provision.plugins.module_utils._ibnetdiscover import SPEED_GBPS, normalize_guid
from ansible_collections.gpufleet.provision.plugins.module_utils._parsers import natural_key

SCHEMA_VERSION = 1

ANOMALY_KINDS = (
    "miscabled_rail", "missing_rail", "unnamed_hca", "suspicious_hostname", "non_compute",
    "link_degraded", "link_missing", "duplicate_hostname", "isolated_hca", "not_in_fabric",
    "plan_mismatch",
)

DEFAULT_SUSPICIOUS_HOSTNAMES = (
    "localhost", "localhost.localdomain", "ubuntu", "debian", "centos", "rocky", "almalinux",
    "rhel", "redhat", "fedora", "sles", "linux", "none", "(none)", "default", "hostname", "dgx",
)
DEFAULT_NON_COMPUTE_PATTERNS = (r"(?i)ufm",)

# "MT4129 ConnectX7   Mellanox Technologies": the firmware default, node_desc never set.
_UNNAMED_RE = re.compile(r"^(MT\d+\b.*|.*Mellanox Technologies\s*)$|^\s*$")
_SHARP_RE = re.compile(r"(?i)aggregation node")
# "MF0;A09-P1-IBLEAF-04-04:MQM9701/U1": a managed switch names itself MF0;<name>:<model>/U<n>.
_MANAGED_SWITCH_RE = re.compile(r"^MF0;([^:]+):([^/]*)(?:/.*)?$")
_NAME_NUM_RE = re.compile(r"^(.*?)(\d+)$")

STATUS_BY_GATE = {"pass": "green", "fail": "quarantined"}


class FabricError(Exception):
    """Bad input to the fabric model (wrong types in the plan, the nodes or the LLDP data)."""


def link_gbps(width, speed):
    if width is None or speed not in SPEED_GBPS:
        return None
    return width * SPEED_GBPS[speed]


def switch_name(node):
    m = _MANAGED_SWITCH_RE.match(node["desc"] or "")
    if m:
        return m.group(1), m.group(2)
    desc = (node["desc"] or "").strip()
    if desc and " " not in desc and not _UNNAMED_RE.match(desc):
        return desc, None
    return "sw-" + node["guid"], None


class _UnionFind(object):
    def __init__(self):
        self.parent = {}

    def find(self, x):
        parent = self.parent
        parent.setdefault(x, x)
        root = x
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:
            parent[x], x = root, parent[x]
        return root

    def union(self, a, b):
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            if natural_key(ra) < natural_key(rb):
                self.parent[rb] = ra
            else:
                self.parent[ra] = rb


def _anomaly(kind, message, host=None, hca=None, switch=None, port=None, severity="warning", **extra):
    item = {"kind": kind, "host": host, "hca": hca, "switch": switch, "port": port,
            "severity": severity, "message": message}
    item.update(extra)
    return item


def _facts_index(nodes):
    """guid -> (host, nic facts) and (host, nic name) -> nic facts, from node_facts per host."""
    by_guid = {}
    by_name = {}
    by_desc = {}
    for host, entry in nodes.items():
        if not isinstance(entry, dict):
            raise FabricError("nodes: entry of %s must be an object {report, facts}, got %s" % (host, type(entry).__name__))
        facts = entry.get("facts") or {}
        for nic in facts.get("nics") or [] if isinstance(facts, dict) else []:
            if not isinstance(nic, dict):
                continue
            guid = normalize_guid(nic.get("node_guid"))
            if guid:
                by_guid[guid] = (host, nic)
            if nic.get("name"):
                by_name[(host, nic["name"])] = nic
            desc = (nic.get("node_desc") or "").split()
            if len(desc) == 2:
                # The node description is what the fabric shows ("gpu01 HCA-1"): it wins over the device name.
                by_desc[(desc[0], desc[1])] = nic
    by_name.update(by_desc)
    return by_guid, by_name


def _status_of(entry):
    report = (entry or {}).get("report")
    if not isinstance(report, dict):
        return "unknown", None
    gate = report.get("status")
    return STATUS_BY_GATE.get(gate, "unknown"), gate


def parse_lldp(data, host):
    """``lldpctl -f json`` of one host -> [{"netdev", "switch", "port"}].

    Sample (lldpd 1.0; older versions make ``interface`` a list of one-key dicts)::

        {"lldp": {"interface": {"eth2": {"chassis": {"leaf-r0-su1": {"id": {...}}},
                                          "port": {"id": {"type": "ifname", "value": "Ethernet12"}}}}}}
    """
    if not isinstance(data, dict) or not isinstance(data.get("lldp"), dict):
        raise FabricError("lldp data of %s: expected the JSON object of `lldpctl -f json` with an `lldp` key" % host)
    interfaces = data["lldp"].get("interface") or {}
    if isinstance(interfaces, list):
        merged = []
        for item in interfaces:
            if isinstance(item, dict):
                merged.extend(item.items())
        items = merged
    elif isinstance(interfaces, dict):
        items = list(interfaces.items())
    else:
        raise FabricError("lldp data of %s: `interface` is neither an object nor a list" % host)
    out = []
    for netdev, entry in items:
        if not isinstance(entry, dict):
            continue
        chassis = entry.get("chassis") or {}
        name = None
        if isinstance(chassis, dict):
            keys = [k for k in chassis if k not in ("id", "descr", "mgmt-ip", "capability", "name")]
            if keys:
                name = keys[0]
            elif isinstance(chassis.get("name"), (str, dict)):
                name = chassis["name"] if isinstance(chassis["name"], str) else chassis["name"].get("value")
        port = entry.get("port") or {}
        port_id = None
        if isinstance(port, dict):
            pid = port.get("id")
            if isinstance(pid, dict):
                port_id = pid.get("value")
            elif isinstance(pid, str):
                port_id = pid
            if port.get("descr") and (port_id is None or ":" in str(port_id)):
                port_id = port["descr"]
        out.append({"netdev": netdev, "switch": name, "port": port_id})
    return out


def _segment_name(source, index, used):
    base = str(source).rsplit("/", 1)[-1]
    for ext in (".out", ".txt", ".ibnet", ".log"):
        if base.endswith(ext):
            base = base[: -len(ext)]
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", base).strip("-") or "segment%d" % (index + 1)
    candidate = name
    n = 2
    while candidate in used:
        candidate = "%s-%d" % (name, n)
        n += 1
    used.add(candidate)
    return candidate


def analyze(captures, nodes=None, lldp=None, plan=None, suspicious_hostnames=DEFAULT_SUSPICIOUS_HOSTNAMES,
            non_compute_patterns=DEFAULT_NON_COMPUTE_PATTERNS):
    """Build the fabric document (see ``_analyze``).

    The model allocates hundreds of thousands of small dicts and no reference cycles; Python's
    cyclic collector would rescan them all again and again (cost growing faster than the fabric),
    so it is paused while the model is built.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _analyze(captures, nodes, lldp, plan, suspicious_hostnames, non_compute_patterns)
    finally:
        if enabled:
            gc.enable()


def _analyze(captures, nodes, lldp, plan, suspicious_hostnames, non_compute_patterns):
    """Build the fabric document.

    captures: list of ``_ibnetdiscover.parse`` results (one per fabric segment).
    nodes: {inventory_hostname: {"report": {...}, "facts": <ansible_facts.gpufleet>}} or None.
    lldp: {inventory_hostname: <lldpctl -f json object>} or None.
    plan: cabling plan dict (see docs/fabric.md) or None.
    """
    nodes = nodes or {}
    lldp = lldp or {}
    if not isinstance(nodes, dict):
        raise FabricError("nodes: expected a mapping of host name to {report, facts}, got %s" % type(nodes).__name__)
    if not isinstance(lldp, dict):
        raise FabricError("lldp: expected a mapping of host name to lldpctl JSON, got %s" % type(lldp).__name__)
    suspicious = set(h.lower() for h in suspicious_hostnames)
    try:
        non_compute_res = [re.compile(p) for p in non_compute_patterns]
    except re.error as exc:
        raise FabricError("non_compute_patterns: invalid regular expression: %s" % exc)
    facts_by_guid, facts_by_name = _facts_index(nodes)
    short_to_host = {}
    for host in nodes:
        short_to_host.setdefault(host.split(".")[0], host)

    anomalies = []
    warnings = []
    switches = {}      # name -> switch record
    sw_by_guid = {}    # guid -> name
    cas = []           # every CA port attached somewhere
    isl = defaultdict(int)  # (switch name, switch name) -> link count (both orders)
    isl_links = []
    ca_links = []
    sources = []
    used_segments = set()

    # ---- 1. switches and raw CA attachments, per segment
    for index, cap in enumerate(captures):
        segment = _segment_name(cap.get("source", "segment"), index, used_segments)
        sources.append({"path": cap.get("source"), "segment": segment, "lines": dict(cap["lines"]),
                        "warnings": len(cap["warnings"])})
        warnings.extend(cap["warnings"])
        cap_nodes = cap["nodes"]
        for guid, node in cap_nodes.items():
            if node["kind"] != "switch":
                continue
            name, model = switch_name(node)
            if name in switches and switches[name]["guid"] != guid:
                warnings.append("%s:%d: switch name %s used by %s and %s; using the GUID for the second"
                                % (node["source"], node["line"], name, switches[name]["guid"], guid))
                name = "sw-" + guid
            switches[name] = {"name": name, "guid": guid, "model": model, "lid": node["lid"], "segment": segment,
                              "ports": node["nports"], "tier": None, "su": None, "rail": None,
                              "hosts": 0, "uplinks": {}, "downlinks": {}}
            sw_by_guid[guid] = name
        for link in cap["links"]:
            a, b = cap_nodes.get(link["a"]), cap_nodes.get(link["b"])
            if a is None or b is None:
                continue
            if a["kind"] == "switch" and b["kind"] == "switch":
                sa, sb = sw_by_guid[a["guid"]], sw_by_guid[b["guid"]]
                isl[(sa, sb)] += 1
                isl[(sb, sa)] += 1
                isl_links.append((segment, sa, link["a_port"], sb, link["b_port"], link["width"], link["speed"]))
                continue
            if a["kind"] == "switch":
                sw, sw_port, ca = a, link["a_port"], b
            elif b["kind"] == "switch":
                sw, sw_port, ca = b, link["b_port"], a
            else:
                warnings.append("%s:%d: link between two adapters %s and %s ignored (back-to-back cable)"
                                % (link["source"], link["line"], a["guid"], b["guid"]))
                continue
            if ca["kind"] != "ca":
                warnings.append("%s:%d: %s %s on switch port %d is not a host adapter; ignored"
                                % (link["source"], link["line"], ca["kind"], ca["guid"], sw_port))
                continue
            cas.append({"guid": ca["guid"], "desc": ca["desc"], "switch": sw_by_guid[sw["guid"]], "port": sw_port,
                        "width": link["width"], "speed": link["speed"], "segment": segment, "lid": ca["lid"]})
            ca_links.append((segment, link["width"], link["speed"]))
        linked = set()
        for link in cap["links"]:
            linked.add(link["a"])
            linked.add(link["b"])
        for guid, node in cap_nodes.items():
            if node["kind"] == "ca" and guid not in linked:
                desc = node["desc"]
                parts = desc.split()
                anomalies.append(_anomaly(
                    "isolated_hca", "%s: adapter %s (%r) has no connected port in the capture: cable, port or "
                    "subnet manager problem, or a truncated capture" % (segment, guid, desc),
                    host=parts[0] if len(parts) == 2 else None, hca=parts[1] if len(parts) == 2 else None,
                    guid=guid, segment=segment))

    # ---- 2. classify adapters
    hosts = {}           # host -> {"nics": [...], "segments": set()}
    desc_seen = {}       # (host, hca) -> guid
    for ca in cas:
        desc = ca["desc"] or ""
        where = "%s port %d" % (ca["switch"], ca["port"])
        if _SHARP_RE.search(desc):
            anomalies.append(_anomaly(
                "non_compute", "SHARP aggregation node %s on %s: not a compute node, left out of the inventory"
                % (ca["guid"], where), switch=ca["switch"], port=ca["port"], severity="info", guid=ca["guid"],
                segment=ca["segment"], role="sharp"))
            continue
        fact = facts_by_guid.get(ca["guid"])
        unnamed = bool(_UNNAMED_RE.match(desc))
        parts = desc.split()
        if fact is not None:
            host, nic = fact[0], fact[1]
            hca = nic.get("name")
        elif unnamed:
            anomalies.append(_anomaly(
                "unnamed_hca", "adapter %s on %s reports the default description %r: its node description was "
                "never set, so it cannot be mapped to a host (set it, or give this host's node facts)"
                % (ca["guid"], where, desc.strip()), switch=ca["switch"], port=ca["port"], guid=ca["guid"],
                segment=ca["segment"]))
            continue
        else:
            host = parts[0]
            hca = parts[-1] if len(parts) > 1 else None
            if len(parts) > 2:
                warnings.append("adapter %s on %s: description %r has more than two words; host %s, adapter %s"
                                % (ca["guid"], where, desc, host, hca))
            host = short_to_host.get(host, host) if host not in nodes else host
            nic = facts_by_name.get((host, hca))
        if unnamed and fact is not None:
            anomalies.append(_anomaly(
                "unnamed_hca", "adapter %s on %s reports the default description %r; node facts map it to %s %s"
                % (ca["guid"], where, desc.strip(), host, hca), host=host, hca=hca, switch=ca["switch"],
                port=ca["port"], guid=ca["guid"], segment=ca["segment"]))
        desc_host = parts[0] if parts and not unnamed else None
        if desc_host and desc_host.lower() in suspicious:
            anomalies.append(_anomaly(
                "suspicious_hostname", "adapter %s on %s is named %r: a default host name, the node description "
                "was set before the host got its name%s" % (
                    ca["guid"], where, desc, (" (node facts say it is %s)" % host) if host != desc_host else ""),
                host=host, hca=hca, switch=ca["switch"], port=ca["port"], guid=ca["guid"], segment=ca["segment"]))
        if any(r.search(host) for r in non_compute_res):
            anomalies.append(_anomaly(
                "non_compute", "%s %s on %s is a management/UFM server, not a compute node; left out of the "
                "inventory" % (host, hca, where), host=host, hca=hca, switch=ca["switch"], port=ca["port"],
                severity="info", guid=ca["guid"], segment=ca["segment"], role="ufm"))
            continue
        key = (host, hca)
        if key in desc_seen and desc_seen[key] != ca["guid"]:
            anomalies.append(_anomaly(
                "duplicate_hostname", "%s %s appears on two adapters: %s and %s (on %s); two machines share a name"
                % (host, hca, desc_seen[key], ca["guid"], where), host=host, hca=hca, switch=ca["switch"],
                port=ca["port"], guid=ca["guid"], segment=ca["segment"]))
            continue
        desc_seen[key] = ca["guid"]
        role = nic.get("role") if isinstance(nic, dict) else None
        rec = {"hca": hca, "device": nic.get("name") if isinstance(nic, dict) else None, "guid": ca["guid"],
               "leaf": ca["switch"], "port": ca["port"], "width": ca["width"], "speed": ca["speed"],
               "segment": ca["segment"], "facts_rail": nic.get("rail") if isinstance(nic, dict) else None,
               "facts_role": role}
        h = hosts.setdefault(host, {"nics": [], "segments": set()})
        h["nics"].append(rec)
        h["segments"].add(ca["segment"])

    # ---- 2b. RoCE: LLDP neighbours become NICs on leaf switches named by LLDP
    for host in sorted(lldp):
        neighbours = parse_lldp(lldp[host], host)
        facts = (nodes.get(host) or {}).get("facts") or {}
        by_netdev = {}
        for nic in facts.get("nics") or []:
            for nd in nic.get("netdevs") or []:
                by_netdev[nd] = nic
        for nb in neighbours:
            if not nb["switch"]:
                warnings.append("lldp of %s: interface %s has no neighbour chassis name; ignored" % (host, nb["netdev"]))
                continue
            nic = by_netdev.get(nb["netdev"]) or {}
            if nb["switch"] not in switches:
                switches[nb["switch"]] = {"name": nb["switch"], "guid": None, "model": None, "lid": None,
                                          "segment": "roce", "ports": None, "tier": None, "su": None,
                                          "rail": None, "hosts": 0, "uplinks": {}, "downlinks": {}}
            rec = {"hca": nic.get("name") or nb["netdev"], "device": nic.get("name"), "guid": normalize_guid(nic.get("node_guid")),
                   "leaf": nb["switch"], "port": nb["port"], "width": None, "speed": None, "segment": "roce",
                   "facts_rail": nic.get("rail"), "facts_role": nic.get("role"), "netdev": nb["netdev"]}
            h = hosts.setdefault(host, {"nics": [], "segments": set()})
            h["nics"].append(rec)
            h["segments"].add("roce")
        if neighbours and not any(s["segment"] == "roce" for s in sources):
            sources.append({"path": "lldp", "segment": "roce", "lines": None, "warnings": 0})

    # Storage / front-end NICs (node_facts role non-rail) are kept per host but take no rail.
    for h in hosts.values():
        h["other"] = [n for n in h["nics"] if n["facts_role"] == "non-rail"]
        h["nics"] = [n for n in h["nics"] if n["facts_role"] != "non-rail"]

    # ---- 3. tiers: leaf = switch with adapters; spine above leaves; core above spines
    for h in hosts.values():
        for n in h["nics"] + h["other"]:
            switches[n["leaf"]]["hosts"] += 1
    leaf_names = set(a["switch"] for a in anomalies if a["kind"] == "unnamed_hca" and a["switch"])
    leaf_names.update(n["leaf"] for h in hosts.values() for n in h["nics"] + h["other"])
    neighbours = defaultdict(set)
    for (sa, sb) in isl:
        neighbours[sa].add(sb)
    for name in leaf_names:
        switches[name]["tier"] = "leaf"
    frontier = set(leaf_names)
    tier_names = ["spine", "core"]
    depth = 0
    while frontier:
        nxt = set()
        for name in frontier:
            for peer in neighbours[name]:
                if switches[peer]["tier"] is None:
                    nxt.add(peer)
        label = tier_names[depth] if depth < len(tier_names) else "tier%d" % (depth + 2)
        for name in nxt:
            switches[name]["tier"] = label
        frontier = nxt
        depth += 1
    for sw in switches.values():
        if sw["tier"] is None:
            sw["tier"] = "isolated"
            warnings.append("switch %s reaches no leaf in the capture" % sw["name"])
    order = {"leaf": 0, "spine": 1, "core": 2}
    for (sa, sb), count in isl.items():
        ta, tb = switches[sa]["tier"], switches[sb]["tier"]
        if order.get(tb, 9) > order.get(ta, 9):
            switches[sa]["uplinks"][sb] = count
        elif order.get(tb, 9) < order.get(ta, 9):
            switches[sa]["downlinks"][sb] = count

    # ---- 4. rails: from node facts, else ranked HCA names inside name families
    families = defaultdict(set)
    for h in hosts.values():
        for n in h["nics"]:
            m = _NAME_NUM_RE.match(n["hca"] or "")
            if m:
                families[m.group(1)].add(int(m.group(2)))
    rank = {}
    for prefix, numbers in families.items():
        for i, num in enumerate(sorted(numbers)):
            rank[prefix + str(num)] = i
    for h in hosts.values():
        for n in h["nics"]:
            if isinstance(n["facts_rail"], int):
                n["rail"] = n["facts_rail"]
                n["rail_from"] = "facts"
            else:
                m = _NAME_NUM_RE.match(n["hca"] or "")
                n["rail"] = rank.get(m.group(1) + str(int(m.group(2)))) if m else None
                n["rail_from"] = "name" if n["rail"] is not None else None

    # ---- 5. scalable units: leaves sharing most of their hosts
    leaf_hosts = defaultdict(set)
    for host, h in hosts.items():
        for n in h["nics"]:
            leaf_hosts[n["leaf"]].add(host)
    pair_count = Counter()
    for host, h in hosts.items():
        leaves = sorted(set(n["leaf"] for n in h["nics"]))
        for i in range(len(leaves)):
            for j in range(i + 1, len(leaves)):
                pair_count[(leaves[i], leaves[j])] += 1
    uf = _UnionFind()
    for leaf in leaf_hosts:
        uf.find(leaf)
    for (la, lb), count in pair_count.items():
        if count * 2 >= min(len(leaf_hosts[la]), len(leaf_hosts[lb])):
            uf.union(la, lb)
    su_leaves = defaultdict(list)
    for leaf in leaf_hosts:
        su_leaves[uf.find(leaf)].append(leaf)
    su_order = sorted(su_leaves.values(), key=lambda ls: natural_key(min((h for l in ls for h in leaf_hosts[l]), key=natural_key)))
    leaf_su = {}
    sus = {}
    for i, leaves in enumerate(su_order, 1):
        name = "su%d" % i
        for leaf in leaves:
            leaf_su[leaf] = name
        sus[name] = {"name": name, "leaves": {}, "spines": [], "hosts": [], "segments": set()}

    # ---- 5b. rail of each leaf: the rail most of its NICs carry
    leaf_rail_votes = defaultdict(Counter)
    for h in hosts.values():
        for n in h["nics"]:
            if n["rail"] is not None:
                leaf_rail_votes[n["leaf"]][n["rail"]] += 1
    leaf_rail = {}
    for leaf, votes in leaf_rail_votes.items():
        best = max(votes.values())
        leaf_rail[leaf] = min(r for r, c in votes.items() if c == best)

    # ---- 5c. a cabling plan, when given, names the SUs and the leaf of each rail
    plan_leaf = {}
    plan_nodes = {}
    if plan:
        plan_leaf, plan_nodes = _read_plan(plan)
        for leaf, (su, rail) in plan_leaf.items():
            if leaf in switches:
                leaf_su[leaf] = su
                leaf_rail[leaf] = rail
            sus.setdefault(su, {"name": su, "leaves": {}, "spines": [], "hosts": [], "segments": set()})
        for su in list(sus):
            if not any(s == su for s in leaf_su.values()) and su not in set(v[0] for v in plan_leaf.values()):
                del sus[su]

    for leaf, su in leaf_su.items():
        sw = switches[leaf]
        sw["su"] = su
        sw["rail"] = leaf_rail.get(leaf)
        if leaf_rail.get(leaf) is not None:
            if leaf_rail[leaf] in sus[su]["leaves"]:
                warnings.append("SU %s has two leaves for rail %s: %s and %s" % (
                    su, leaf_rail[leaf], sus[su]["leaves"][leaf_rail[leaf]], leaf))
            else:
                sus[su]["leaves"][leaf_rail[leaf]] = leaf
        sus[su]["segments"].add(sw["segment"])
    all_rails = sorted(set(r for r in leaf_rail.values() if r is not None))
    rails_by_segment = defaultdict(set)
    for leaf, r in leaf_rail.items():
        if r is not None:
            rails_by_segment[switches[leaf]["segment"]].add(r)

    # ---- 6. per-host rails, SU, miscabling, missing rails
    unnamed_on = Counter(a["switch"] for a in anomalies if a["kind"] == "unnamed_hca" and a["host"] is None)
    nodes_out = {}
    for host in sorted(hosts, key=natural_key):
        h = hosts[host]
        su_votes = Counter(leaf_su.get(n["leaf"]) for n in h["nics"] if leaf_su.get(n["leaf"]))
        host_su = None
        if su_votes:
            best = max(su_votes.values())
            host_su = min((s for s, c in su_votes.items() if c == best), key=natural_key)
        if host in plan_nodes:
            host_su = plan_nodes[host]["su"]
        rails = []
        taken = set()
        reached = set()  # rails whose leaf this host physically reaches (a swapped pair still reaches both)
        for n in sorted(h["nics"], key=lambda x: (x["rail"] if x["rail"] is not None else 999, natural_key(x["hca"] or ""))):
            lr = leaf_rail.get(n["leaf"])
            lsu = leaf_su.get(n["leaf"])
            if n["rail"] is None:
                n["rail"] = lr
                n["rail_from"] = "leaf"
            problem = None
            if n["rail"] is not None and lr is not None and lr != n["rail"]:
                problem = "on %s, the leaf of rail %s, instead of rail %s" % (n["leaf"], lr, n["rail"])
            elif host_su and lsu and lsu != host_su:
                problem = "on %s, a leaf of %s, while the host is in %s" % (n["leaf"], lsu, host_su)
            if host in plan_nodes and n["rail"] is not None:
                expected = sus.get(host_su, {}).get("leaves", {}).get(n["rail"])
                if expected and expected != n["leaf"] and problem is None:
                    problem = "on %s, but the cabling plan puts rail %s of %s on %s" % (n["leaf"], n["rail"], host_su, expected)
                want_port = plan_nodes[host].get("port")
                if problem is None and want_port is not None and n["port"] != want_port:
                    anomalies.append(_anomaly(
                        "plan_mismatch", "%s %s is on %s port %s, the cabling plan says port %s"
                        % (host, n["hca"], n["leaf"], n["port"], want_port), host=host, hca=n["hca"],
                        switch=n["leaf"], port=n["port"], segment=n["segment"]))
            n["miscabled"] = problem is not None
            if problem:
                anomalies.append(_anomaly(
                    "miscabled_rail", "%s %s (rail %s) is %s: cross-rail traffic goes through the spine"
                    % (host, n["hca"], n["rail"], problem), host=host, hca=n["hca"], switch=n["leaf"],
                    port=n["port"], severity="error", rail=n["rail"], segment=n["segment"]))
            if n["rail"] is not None and n["rail"] in taken:
                warnings.append("%s has two NICs on rail %s (%s)" % (host, n["rail"], n["hca"]))
            taken.add(n["rail"])
            reached.add(lr if lr is not None else n["rail"])
            rails.append({"rail": n["rail"], "hca": n["hca"], "device": n["device"], "guid": n["guid"],
                          "leaf": n["leaf"], "port": n["port"], "width": n["width"], "speed": n["speed"],
                          "segment": n["segment"], "rail_from": n["rail_from"], "miscabled": n["miscabled"]})
        expected_rails = set()
        for seg in h["segments"]:
            expected_rails |= rails_by_segment.get(seg, set())
        su_rails = set(sus[host_su]["leaves"]) if host_su in sus else set()
        for r in sorted(expected_rails - reached):
            if r in su_rails:
                leaf = sus[host_su]["leaves"][r]
                why = "its SU %s has leaf %s for it, but no NIC of this host reaches the fabric on it" % (host_su, leaf)
                if unnamed_on.get(leaf):
                    why += " (%d adapter(s) with no node description sit on that leaf: one may be it)" % unnamed_on[leaf]
            else:
                why = "its SU %s has no leaf for rail %s at all (leaf absent from the capture)" % (host_su, r)
            anomalies.append(_anomaly("missing_rail", "%s has no NIC on rail %s: %s" % (host, r, why),
                                      host=host, switch=sus[host_su]["leaves"].get(r) if host_su in sus else None,
                                      severity="error", rail=r, su=host_su))
        status, gate = _status_of(nodes.get(host))
        if host_su in sus:
            sus[host_su]["hosts"].append(host)
        nodes_out[host] = {"status": status, "gate": gate, "segments": sorted(h["segments"]), "su": host_su,
                           "block": None, "rails": rails,
                           "other_nics": [{"hca": n["hca"], "device": n["device"], "guid": n["guid"], "switch": n["leaf"],
                                           "port": n["port"]} for n in h["other"]]}

    for su_name in sorted(sus, key=natural_key):
        su = sus[su_name]
        present = set(su["leaves"])
        seg_rails = set()
        for seg in su["segments"]:
            seg_rails |= rails_by_segment.get(seg, set())
        for r in sorted(seg_rails - present):
            anomalies.append(_anomaly(
                "missing_rail", "%s has no leaf for rail %s: the other SUs of its segment have one; the leaf is "
                "absent from the capture (down, unpowered or not cabled to the spines)" % (su_name, r),
                severity="error", rail=r, su=su_name))
        spines = set()
        for leaf in su["leaves"].values():
            spines.update(switches[leaf]["uplinks"])
        su["spines"] = sorted(spines, key=natural_key)
    for leaf, (su, rail) in plan_leaf.items():
        if leaf not in switches:
            anomalies.append(_anomaly("missing_rail", "leaf %s (rail %s of %s in the cabling plan) is absent from the fabric"
                                      % (leaf, rail, su), switch=leaf, severity="error", rail=rail, su=su))
    for host, entry in sorted(plan_nodes.items()):
        if host not in nodes_out:
            anomalies.append(_anomaly("plan_mismatch", "%s is in the cabling plan (%s) but has no NIC in the fabric"
                                      % (host, entry["su"]), host=host, severity="error", su=entry["su"]))

    # An adapter without a name still tells where it sits: the rail and SU of its leaf.
    for a in anomalies:
        if a["kind"] == "unnamed_hca" and a["host"] is None and a["switch"] in leaf_su:
            a["su"] = leaf_su[a["switch"]]
            a["rail"] = leaf_rail.get(a["switch"])
            a["message"] += "; it sits on the rail %s leaf of %s" % (a["rail"], a["su"])

    # ---- 7. links: degraded width/speed, missing uplinks
    _link_anomalies(switches, hosts, isl_links, sus, leaf_su, anomalies)

    # ---- 8. nodes known to the gate but absent from the fabric
    for host in sorted(nodes, key=natural_key):
        if host in nodes_out:
            continue
        status, gate = _status_of(nodes[host])
        anomalies.append(_anomaly(
            "not_in_fabric", "%s has node facts/a gate report but none of its adapters is in the capture" % host,
            host=host, severity="error"))
        nodes_out[host] = {"status": status, "gate": gate, "segments": [], "su": None, "block": None,
                           "rails": [], "other_nics": []}

    # ---- 9. node facts: NUMA layout, GPU<->NIC pairs, HT siblings
    for host, out in nodes_out.items():
        facts = (nodes.get(host) or {}).get("facts") or {}
        numa = facts.get("numa") or {}
        out["numa"] = [{"id": n.get("id"), "cpus": n.get("cpus")} for n in (numa.get("nodes") or []) if isinstance(n, dict)] or None
        out["pairs"] = facts.get("pairs") or None
        out["siblings"] = (facts.get("cpu") or {}).get("siblings") or None

    blocks = _blocks(nodes_out, sus)
    for sw in switches.values():
        sw["uplinks"] = dict(sorted(sw["uplinks"].items(), key=lambda kv: natural_key(kv[0])))
        sw["downlinks"] = dict(sorted(sw["downlinks"].items(), key=lambda kv: natural_key(kv[0])))
    rails_out = []
    names_by_rail = defaultdict(set)
    for h in hosts.values():
        for n in h["nics"]:
            if n["hca"]:
                names_by_rail[n["rail"]].add(n["hca"])
    for r in all_rails:
        rails_out.append({"rail": r, "names": sorted(names_by_rail[r], key=natural_key),
                          "leaves": sorted((l for l, lr in leaf_rail.items() if lr == r), key=natural_key)})
    anomalies.sort(key=lambda a: (ANOMALY_KINDS.index(a["kind"]) if a["kind"] in ANOMALY_KINDS else 99,
                                  natural_key(a["host"] or ""), natural_key(a["switch"] or ""), a["port"] if isinstance(a["port"], int) else -1,
                                  natural_key(str(a["hca"] or ""))))
    doc = {
        "schema": SCHEMA_VERSION,
        "sources": sources,
        "segments": sorted(set(s["segment"] for s in sources)),
        "rails": rails_out,
        "sus": [{"name": s["name"], "segments": sorted(s["segments"]),
                 "leaves": dict((str(r), l) for r, l in sorted(s["leaves"].items())),
                 "spines": s["spines"], "hosts": sorted(s["hosts"], key=natural_key)}
                for s in (sus[k] for k in sorted(sus, key=natural_key))],
        "nodes": nodes_out,
        "switches": dict((k, switches[k]) for k in sorted(switches, key=natural_key)),
        "blocks": blocks,
        "anomalies": anomalies,
        "warnings": warnings,
    }
    doc["summary"] = summarize(doc)
    return doc


def _read_plan(plan):
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
            try:
                rail = int(rail)
            except (TypeError, ValueError):
                raise FabricError("cabling_plan: SU %s: rail %r is not a number" % (su, rail))
            plan_leaf[str(leaf)] = (str(su), rail)
        members = entry.get("nodes") or {}
        if isinstance(members, list):
            members = dict((m, None) for m in members)
        if not isinstance(members, dict):
            raise FabricError("cabling_plan: SU %s: `nodes` must be a list of hosts or a mapping host -> port" % su)
        for host, port in members.items():
            if port is not None and not isinstance(port, int):
                raise FabricError("cabling_plan: SU %s: port of %s must be a number, got %r" % (su, host, port))
            plan_nodes[str(host)] = {"su": str(su), "port": port}
    return plan_leaf, plan_nodes


def _mode(values):
    counts = Counter(v for v in values if v is not None)
    if not counts:
        return None
    best = max(counts.values())
    return sorted((v for v, c in counts.items() if c == best), key=str)[0]


def _link_anomalies(switches, hosts, isl_links, sus, leaf_su, anomalies):
    # Norm per segment: the most common rate among host links and among switch links.
    host_rates = defaultdict(list)
    for h in hosts.values():
        for n in h["nics"] + h["other"]:
            host_rates[n["segment"]].append(link_gbps(n["width"], n["speed"]))
    host_norm = dict((seg, _mode(rates)) for seg, rates in host_rates.items())
    for host, h in hosts.items():
        for n in h["nics"] + h["other"]:
            norm = host_norm.get(n["segment"])
            rate = link_gbps(n["width"], n["speed"])
            if norm is not None and rate is not None and rate < norm:
                anomalies.append(_anomaly(
                    "link_degraded", "%s %s on %s port %s runs at %sx%s (%g Gb/s), below the fabric's %g Gb/s"
                    % (host, n["hca"], n["leaf"], n["port"], n["width"], n["speed"], rate, norm),
                    host=host, hca=n["hca"], switch=n["leaf"], port=n["port"], segment=n["segment"]))
    isl_rates = defaultdict(list)
    for (seg, sa, pa, sb, pb, width, speed) in isl_links:
        isl_rates[seg].append(link_gbps(width, speed))
    isl_norm = dict((seg, _mode(rates)) for seg, rates in isl_rates.items())
    order = {"leaf": 0, "spine": 1, "core": 2}
    for (seg, sa, pa, sb, pb, width, speed) in isl_links:
        norm = isl_norm[seg]
        rate = link_gbps(width, speed)
        if norm is not None and rate is not None and rate < norm:
            if order.get(switches[sa]["tier"], 9) > order.get(switches[sb]["tier"], 9):
                sa, pa, sb, pb = sb, pb, sa, pa  # name the lower switch first: leaf port -> spine port
            anomalies.append(_anomaly(
                "link_degraded", "link %s port %s <-> %s port %s runs at %sx%s (%g Gb/s), below the fabric's %g Gb/s"
                % (sa, pa, sb, pb, width, speed, rate, norm), switch=sa, port=pa, peer=sb, peer_port=pb, segment=seg))
    # Missing uplinks: every leaf of an SU should reach the same spines with the same number of cables.
    per_pair = defaultdict(list)
    for sw in switches.values():
        if sw["tier"] == "leaf":
            for up, count in sw["uplinks"].items():
                per_pair[sw["segment"]].append(count)
    pair_norm = dict((seg, _mode(counts)) for seg, counts in per_pair.items())
    for sw in sorted(switches.values(), key=lambda s: natural_key(s["name"])):
        if sw["tier"] != "leaf" or sw["segment"] == "roce":
            continue
        norm = pair_norm.get(sw["segment"])
        su = leaf_su.get(sw["name"])
        # Peers: the other leaves of its SU in the same segment (another segment has its own spines).
        peers = [l for l in (sus[su]["leaves"].values() if su in sus else [])
                 if l != sw["name"] and switches[l]["segment"] == sw["segment"]]
        expected = set()
        for leaf in peers:
            expected.update(switches[leaf]["uplinks"])
        expected.update(sw["uplinks"])
        for spine in sorted(expected, key=natural_key):
            have = sw["uplinks"].get(spine, 0)
            if norm is not None and have < norm:
                what = "no link" if have == 0 else "%d of %d links" % (have, norm)
                anomalies.append(_anomaly(
                    "link_missing", "leaf %s has %s to spine %s (its peers have %d): less bandwidth up, "
                    "and a congested path for its hosts" % (sw["name"], what, spine, norm),
                    switch=sw["name"], peer=spine, segment=sw["segment"], links=have, expected_links=norm))


def _blocks(nodes_out, sus):
    """Blocks: hosts with the same leaf on every rail (one hop apart on all rails), per SU."""
    groups = defaultdict(list)
    for host, out in nodes_out.items():
        if not out["rails"]:
            continue
        key = (out["su"], tuple(sorted((str(r["rail"]), r["leaf"]) for r in out["rails"])))
        groups[key].append(host)
    per_su = defaultdict(list)
    for (su, key), members in groups.items():
        per_su[su].append((key, sorted(members, key=natural_key)))
    blocks = []
    for su in sorted(per_su, key=lambda s: natural_key(s or "")):
        items = sorted(per_su[su], key=lambda kv: (-len(kv[1]), natural_key(kv[1][0])))
        for i, (key, members) in enumerate(items, 1):
            name = "%s-b%d" % (su or "nosu", i)
            for host in members:
                nodes_out[host]["block"] = name
            blocks.append({"name": name, "su": su, "size": len(members), "nodes": members,
                           "leaves": dict(key)})
    return blocks


def summarize(doc):
    status = Counter(n["status"] for n in doc["nodes"].values())
    kinds = Counter(a["kind"] for a in doc["anomalies"])
    tiers = Counter(s["tier"] for s in doc["switches"].values())
    return {
        "nodes": len(doc["nodes"]),
        "status": dict(sorted(status.items())),
        "switches": dict(sorted(tiers.items())),
        "rails": len(doc["rails"]),
        "sus": len(doc["sus"]),
        "blocks": len(doc["blocks"]),
        "block_sizes": sorted((b["size"] for b in doc["blocks"]), reverse=True),
        "anomalies": dict((k, kinds[k]) for k in sorted(kinds, key=lambda k: ANOMALY_KINDS.index(k) if k in ANOMALY_KINDS else 99)),
        "warnings": len(doc["warnings"]),
    }
