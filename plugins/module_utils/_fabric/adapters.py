# -*- coding: utf-8 -*-
# Copyright: contributors to gpufleet.provision
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stages 1-2 of the fabric model: switches and adapter attachments from the captures, adapters
classified into host NICs or anomalies, RoCE NICs from LLDP."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import sys

from ansible_collections.gpufleet.provision.plugins.module_utils._fabric.ibnetdiscover import normalize_guid
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric.common import (
    FabricError, SHARP_RE, UNNAMED_RE, anomaly, switch_name)


def segment_name(source, index, used):
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


def _switch_record(name, guid, model, lid, segment, ports):
    return {"name": name, "guid": guid, "model": model, "lid": lid, "segment": segment, "ports": ports,
            "tier": None, "su": None, "rail": None, "spine_group": None, "hosts": 0, "uplinks": {}, "downlinks": {}}


def read_captures(m, captures):
    """Stage 1: switches, switch-to-switch links and raw adapter attachments, per segment.

    ``captures`` may be a generator: each capture is dropped once read, so a fleet's captures are
    never all in memory with the model."""
    used_segments = set()
    for index, cap in enumerate(captures):
        segment = segment_name(cap.get("source", "segment"), index, used_segments)
        m.sources.append({"path": cap.get("source"), "segment": segment, "lines": dict(cap["lines"]),
                          "warnings": len(cap["warnings"])})
        m.warnings.extend(cap["warnings"])
        cap_nodes = cap["nodes"]
        for guid, node in cap_nodes.items():
            if node["kind"] != "switch":
                continue
            name, model = switch_name(node)
            if name in m.switches and m.switches[name]["guid"] != guid:
                m.warnings.append("%s:%d: switch name %s used by %s and %s; using the GUID for the second"
                                  % (node["source"], node["line"], name, m.switches[name]["guid"], guid))
                name = "sw-" + guid
            m.switches[name] = _switch_record(name, guid, model, node["lid"], segment, node["nports"])
            m.sw_by_guid[guid] = name
        linked = set()     # the adapters with a link (switches need not be counted)
        # the hot loop of the model (a link per host NIC and per cable): its lookups in locals
        sw_by_guid, isl, linked_add, node_of = m.sw_by_guid, m.isl, linked.add, cap_nodes.get
        cas_append, isl_append = m.cas.append, m.isl_links.append
        for link in cap["links"]:
            a, b = node_of(link["a"]), node_of(link["b"])
            if a is None or b is None:
                linked_add(link["a"])
                linked_add(link["b"])
                continue
            # the two common cases inline: a host adapter on a switch port, a switch-to-switch cable
            kind_b = b["kind"]
            if a["kind"] != "switch" or kind_b not in ("ca", "switch"):
                linked_add(link["a"])
                linked_add(link["b"])
                _attach(m, a, b, link, segment)
            elif kind_b == "ca":
                linked_add(link["b"])
                cas_append({"guid": b["guid"], "desc": b["desc"], "switch": sw_by_guid[a["guid"]],
                            "port": link["a_port"], "width": link["width"], "speed": link["speed"],
                            "segment": segment, "lid": b["lid"]})
            else:
                sa, sb = sw_by_guid[a["guid"]], sw_by_guid[b["guid"]]
                isl[(sa, sb)] += 1
                isl[(sb, sa)] += 1
                isl_append((segment, sa, link["a_port"], sb, link["b_port"], link["width"], link["speed"]))
        for guid, node in cap_nodes.items():
            if node["kind"] == "ca" and guid not in linked:
                desc = node["desc"]
                parts = desc.split()
                named = len(parts) == 2 and not UNNAMED_RE.match(desc) and parts[0].lower() not in m.suspicious
                m.anomalies.append(anomaly(
                    "isolated_hca", "%s: adapter %s (%r) has no connected port in the capture: cable, port or "
                    "subnet manager problem, or a truncated capture" % (segment, guid, desc),
                    host=parts[0] if named else None, hca=parts[1] if named else None,
                    guid=guid, segment=segment))
        cap = cap_nodes = None  # a capture given by a generator is freed here, before the next is parsed


def _attach(m, a, b, link, segment):
    """A link that ``read_captures`` does not read inline (a switch on its b end, a router, two
    adapters): an adapter attachment, or a warning."""
    if a["kind"] == "switch":
        sw, sw_port, ca = a, link["a_port"], b
    elif b["kind"] == "switch":
        sw, sw_port, ca = b, link["b_port"], a
    else:
        m.warnings.append("%s:%d: link between two adapters %s and %s ignored (back-to-back cable)"
                          % (link["source"], link["line"], a["guid"], b["guid"]))
        return
    if ca["kind"] != "ca":
        m.warnings.append("%s:%d: %s %s on switch port %d is not a host adapter; ignored"
                          % (link["source"], link["line"], ca["kind"], ca["guid"], sw_port))
        return
    m.cas.append({"guid": ca["guid"], "desc": ca["desc"], "switch": m.sw_by_guid[sw["guid"]], "port": sw_port,
                  "width": link["width"], "speed": link["speed"], "segment": segment, "lid": ca["lid"]})


def facts_index(nodes):
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


def classify_adapters(m):
    """Stage 2: each attached adapter becomes a host NIC, or an anomaly when no host can be trusted.

    An adapter whose description is the firmware default (``unnamed_hca``) or a default host name
    (``suspicious_hostname``: ``localhost HCA-1``) names no host: unless node facts map its GUID to
    one, it stays an anomaly keyed by its GUID and never becomes a host (three machines called
    ``localhost`` are not one node, and a host named ``localhost`` breaks every ``delegate_to``).
    """
    facts_by_guid, facts_by_name = facts_index(m.nodes)
    short_to_host = {}
    for host in m.nodes:
        short_to_host.setdefault(host.split(".")[0], host)
    desc_seen = {}
    non_compute = {}    # host name -> matches a non-compute pattern (8 NICs per host: ask once)
    hosts, known, suspicious_names = m.hosts, m.nodes, m.suspicious
    for ca in m.cas:
        desc = ca["desc"] or ""
        if "aggregation node" in desc.lower() and SHARP_RE.search(desc):
            where, at = _where(ca)
            m.anomalies.append(anomaly(
                "non_compute", "SHARP aggregation node %s on %s: not a compute node, left out of the inventory"
                % (ca["guid"], where), severity="info", role="sharp", **at))
            continue
        fact = facts_by_guid.get(ca["guid"])
        unnamed = (desc[:2] == "MT" or "Mellanox Technologies" in desc or not desc.strip()) and bool(UNNAMED_RE.match(desc))
        parts = desc.split()
        desc_host = parts[0] if parts and not unnamed else None
        suspicious = bool(desc_host) and desc_host.lower() in suspicious_names
        if unnamed or suspicious:
            where, at = _where(ca)
        if fact is not None:
            host, nic = fact[0], fact[1]
            hca = nic.get("name")
            if unnamed:
                m.anomalies.append(anomaly(
                    "unnamed_hca", "adapter %s on %s reports the default description %r; node facts map it to %s %s"
                    % (ca["guid"], where, desc.strip(), host, hca), host=host, hca=hca, **at))
            elif suspicious:
                m.anomalies.append(anomaly(
                    "suspicious_hostname", "adapter %s on %s is named %r: a default host name, the node description "
                    "was set before the host got its name (node facts say it is %s)" % (ca["guid"], where, desc, host),
                    host=host, hca=hca, desc=desc, **at))
        elif unnamed:
            m.anomalies.append(anomaly(
                "unnamed_hca", "adapter %s on %s reports the default description %r: its node description was "
                "never set, so it cannot be mapped to a host (set it, or give this host's node facts)"
                % (ca["guid"], where, desc.strip()), **at))
            continue
        elif suspicious:
            m.anomalies.append(anomaly(
                "suspicious_hostname", "adapter %s on %s is named %r: a default host name, the node description was "
                "set before the host got its name; not taken as a host (set the description, or give node facts)"
                % (ca["guid"], where, desc), desc=desc, **at))
            continue
        else:
            host = parts[0]
            hca = parts[-1] if len(parts) > 1 else None
            if len(parts) > 2:
                m.warnings.append("adapter %s on %s: description %r has more than two words; host %s, adapter %s"
                                  % (ca["guid"], _where(ca)[0], desc, host, hca))
            host = short_to_host.get(host, host) if host not in known else host
            nic = facts_by_name.get((host, hca)) if facts_by_name else None
        if host not in non_compute:
            non_compute[host] = any(r.search(host) for r in m.non_compute_res)
        if non_compute[host]:
            where, at = _where(ca)
            m.anomalies.append(anomaly(
                "non_compute", "%s %s on %s is a management/UFM server, not a compute node; left out of the "
                "inventory" % (host, hca, where), host=host, hca=hca, severity="info", role="ufm", **at))
            continue
        key = (host, hca)
        if key in desc_seen and desc_seen[key] != ca["guid"]:
            where, at = _where(ca)
            m.anomalies.append(anomaly(
                "duplicate_hostname", "%s %s appears on two adapters: %s and %s (on %s); two machines share a name"
                % (host, hca, desc_seen[key], ca["guid"], where), host=host, hca=hca, **at))
            continue
        desc_seen[key] = ca["guid"]
        device = rail = role = None
        if isinstance(nic, dict):
            device, rail, role = nic.get("name"), nic.get("rail"), nic.get("role")
        rec = {"rail": None, "hca": hca, "device": device, "guid": ca["guid"], "leaf": ca["switch"], "port": ca["port"],
               "width": ca["width"], "speed": ca["speed"], "segment": ca["segment"], "rail_from": None,
               "facts_rail": rail, "facts_role": role}
        h = hosts.get(host)
        if h is None:
            h = hosts[host] = _host_record()
        _add_nic(h, rec)
    m.cas = []   # every attachment is a NIC or an anomaly now


def _host_record():
    return {"nics": [], "other": [], "segments": set()}


def _add_nic(h, rec):
    """A NIC of a host: a rail NIC, or a storage / front-end NIC (node_facts role non-rail), which is
    kept per host but takes no rail. A rail NIC's record has the keys of its entry in fabric.json,
    in their order (``hosts.host_rails`` makes it that entry), then the ones the model works with."""
    h["other" if rec["facts_role"] == "non-rail" else "nics"].append(rec)
    h["segments"].add(rec["segment"])


def _where(ca):
    """Where an adapter sits, for a message, and the fields of an anomaly about it."""
    return ("%s port %d" % (ca["switch"], ca["port"]),
            {"switch": ca["switch"], "port": ca["port"], "guid": ca["guid"], "segment": ca["segment"]})


# The keys lldpd (0.9 - 1.0.x) writes in a neighbour entry of ``lldpcli -f json show neighbors [details]``;
# anything else is not that command's output (another tool's JSON, a hand-edited file).
LLDP_ENTRY_KEYS = frozenset(("via", "rid", "age", "chassis", "port", "vlan", "ppvid", "pi", "lldp-med",
                             "unknown-tlvs", "ttl", "name"))


def parse_lldp(data, host):
    """``lldpcli -f json show neighbors`` of one host -> [{"netdev", "switch", "port"}].

    Sample (lldpd 1.0, its own integration test tests/integration/test_lldpcli.py; older versions
    make ``interface`` a list of one-key dicts when an interface has several neighbours)::

        {"lldp": {"interface": {"eth0": {"via": "LLDP", "rid": "1", "age": "0 day, 00:00:01",
                                          "chassis": {"ns-2.example.com": {"id": {"type": "mac", ...}, ...}},
                                          "port": {"id": {"type": "mac", "value": "00:00:00:00:00:02"},
                                                   "descr": "eth1", "ttl": "120"}}}}}

    A table that is not this shape (no ``lldp`` object, an entry without ``chassis`` or ``port``, a
    field lldpd never writes) is a FabricError naming the host, the interface and the field.
    """
    if not isinstance(data, dict) or not isinstance(data.get("lldp"), dict):
        raise FabricError("lldp data of %s: expected the JSON object of `lldpcli -f json show neighbors` with an `lldp` "
                          "object, got %s" % (host, _lldp_shape(data)))
    foreign = sorted(k for k in data["lldp"] if k != "interface") + sorted(k for k in data if k != "lldp")
    if foreign:
        raise FabricError("lldp data of %s: unknown field(s) %s (`lldpcli -f json show neighbors` writes lldp.interface only)"
                          % (host, ", ".join(foreign)))
    out = []
    for netdev, entry in _lldp_items(data["lldp"].get("interface") or {}, host):
        _check_lldp_entry(host, netdev, entry)
        out.append({"netdev": netdev, "switch": _lldp_chassis(entry.get("chassis")), "port": _lldp_port(entry.get("port"))})
    return out


class Neighbours(list):
    """``parse_lldp``'s list for one host, made as its file is read (``lldp_neighbours``): the model
    takes it as it is, and the host's lldpcli JSON (8 KB a NIC in memory) is let go at once."""


def lldp_neighbours(data, host):
    """``parse_lldp`` of one host's table when it is read, its names interned (the same few switch
    names and netdevs on every host); a table it rejects is returned as it is, for the model to
    judge in its turn (an entry of the ``lldp`` option may replace it: an error only if used)."""
    try:
        found = parse_lldp(data, host)
    except FabricError:
        return data
    for nb in found:
        for key in ("netdev", "switch", "port"):
            if isinstance(nb[key], str):
                nb[key] = sys.intern(nb[key])
    return Neighbours(found)


def _lldp_shape(data):
    if isinstance(data, dict):
        return "an object with %s" % (", ".join(sorted(map(str, data))) or "no key")
    return type(data).__name__


def _lldp_items(interfaces, host):
    if isinstance(interfaces, list):
        items = []
        for item in interfaces:
            if not isinstance(item, dict):
                raise FabricError("lldp data of %s: an item of lldp.interface is %s, not an object" % (host, type(item).__name__))
            items.extend(item.items())
        return items
    if isinstance(interfaces, dict):
        return list(interfaces.items())
    raise FabricError("lldp data of %s: `interface` is neither an object nor a list" % host)


def _check_lldp_entry(host, netdev, entry):
    where = "lldp data of %s: interface %s" % (host, netdev)
    if not isinstance(entry, dict):
        raise FabricError("%s: expected an object, got %s" % (where, type(entry).__name__))
    missing = [k for k in ("chassis", "port") if not isinstance(entry.get(k), dict)]
    if missing:
        raise FabricError("%s: no `%s` object (every neighbour has a chassis and a port)" % (where, "` or `".join(missing)))
    foreign = sorted(k for k in entry if k not in LLDP_ENTRY_KEYS)
    if foreign:
        raise FabricError("%s: unknown field(s) %s (not lldpcli's neighbour entry)" % (where, ", ".join(foreign)))


# The fields lldpd writes in a chassis (0.9 - 1.0.x; ``ttl`` in 0.9). A neighbour that sends its
# SysName is written as {<name>: {these fields}}; one that sends none as these fields alone:
#     "chassis": {"id": {"type": "mac", "value": "1c:34:da:00:00:01"}, "descr": "...",
#                 "mgmt-ip": "192.168.200.2", "mgmt-iface": "2", "capability": [...]}
CHASSIS_FIELDS = frozenset(("id", "name", "descr", "mgmt-ip", "mgmt-iface", "capability", "ttl"))


def _lldp_chassis(chassis):
    """The switch's name: its SysName, else ``chassis:<chassis id>`` (never another field's key:
    two nameless leaves named after a field they both have would be one switch); None: neither."""
    if not isinstance(chassis, dict):
        return None
    keys = [k for k in chassis if k not in CHASSIS_FIELDS]
    if keys:
        return keys[0]
    name = chassis.get("name")
    if isinstance(name, dict):
        name = name.get("value")
    if isinstance(name, str) and name:
        return name
    cid = chassis.get("id")
    if isinstance(cid, dict):
        cid = cid.get("value")
    return "chassis:%s" % cid if isinstance(cid, str) and cid else None


def _lldp_port(port):
    if not isinstance(port, dict):
        return None
    pid = port.get("id")
    port_id = pid.get("value") if isinstance(pid, dict) else pid if isinstance(pid, str) else None
    if port.get("descr") and (port_id is None or ":" in str(port_id)):
        port_id = port["descr"]
    return port_id


def add_lldp(m):
    """Stage 2b: RoCE, LLDP neighbours become NICs on leaf switches named by LLDP.

    With node facts, an LLDP interface is placed by its netdev: a rail NIC's netdev is a rail NIC
    (with the netdev's speed: a port trained below the fabric's is ``link_degraded``), a storage /
    front-end NIC's (facts role non-rail) or a netdev of no RDMA NIC (a management port) is kept as
    another NIC and takes no rail (hybrid nodes: IB rails, Ethernet storage NICs). Without facts
    every LLDP interface is taken as a rail NIC."""
    for host in sorted(m.lldp):
        data = m.lldp[host]
        neighbours = data if isinstance(data, Neighbours) else parse_lldp(data, host)
        facts = (m.nodes.get(host) or {}).get("facts") or {}
        by_netdev = _facts_netdevs(facts)
        for nb in neighbours:
            if not nb["switch"]:
                m.warnings.append("lldp of %s: interface %s has no neighbour chassis name; ignored" % (host, nb["netdev"]))
                continue
            nic = by_netdev.get(nb["netdev"])
            if nb["switch"] not in m.switches:
                m.switches[nb["switch"]] = _switch_record(nb["switch"], None, None, None, "roce", None)
            rec = _lldp_nic(nb, nic or {}, facts)
            h = m.hosts.get(host)
            if h is None:
                h = m.hosts[host] = _host_record()
            if rec["facts_role"] == "rail" or not facts:
                _add_nic(h, rec)
            else:   # storage, front-end, management: kept, no rail; their speeds are compared among themselves
                rec["segment"] = "lldp-other"
                h["other"].append(rec)
        if neighbours and not any(s["segment"] == "roce" for s in m.sources):
            m.sources.append({"path": "lldp", "segment": "roce", "lines": None, "warnings": 0})


def _facts_netdevs(facts):
    by_netdev = {}
    for nic in facts.get("nics") or []:
        for nd in nic.get("netdevs") or []:
            by_netdev[nd] = nic
    return by_netdev


def _lldp_nic(nb, nic, facts):
    speed = ((facts.get("netdevs") or {}).get(nb["netdev"]) or {}).get("speed_mbps")
    role = nic.get("role") if nic else ("other" if facts else None)
    return {"rail": None, "hca": nic.get("name") or nb["netdev"], "device": nic.get("name"),
            "guid": normalize_guid(nic.get("node_guid")), "leaf": nb["switch"], "port": nb["port"],
            "width": 1 if speed else None, "speed": "%gGbE" % (speed / 1000.0) if speed else None, "segment": "roce",
            "rail_from": None, "facts_rail": nic.get("rail"), "facts_role": role, "netdev": nb["netdev"]}
