# -*- coding: utf-8 -*-
# Copyright: contributors to gpufleet.provision
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every stage of the fabric model shares: constants, the error type, the state of one run."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from collections import defaultdict

from ansible_collections.gpufleet.provision.plugins.module_utils._fabric.ibnetdiscover import SPEED_GBPS
from ansible_collections.gpufleet.provision.plugins.module_utils._node.parsers import natural_key

SCHEMA_VERSION = 1

ANOMALY_KINDS = (
    "miscabled_rail", "missing_rail", "unnamed_hca", "suspicious_hostname", "non_compute",
    "link_degraded", "link_missing", "uplink_miscabled", "duplicate_hostname", "isolated_hca",
    "not_in_fabric", "plan_mismatch",
)
# A host with one of these (about its own NICs) is quarantined by the fabric unless the operator accepts it.
QUARANTINE_KINDS = ("miscabled_rail", "missing_rail", "link_degraded")

DEFAULT_SUSPICIOUS_HOSTNAMES = (
    "localhost", "localhost.localdomain", "ubuntu", "debian", "centos", "rocky", "almalinux",
    "rhel", "redhat", "fedora", "sles", "linux", "none", "(none)", "default", "hostname", "dgx",
)
DEFAULT_NON_COMPUTE_PATTERNS = (r"(?i)ufm",)

# "MT4129 ConnectX7   Mellanox Technologies": the firmware default, node_desc never set.
UNNAMED_RE = re.compile(r"^(MT\d+\b.*|.*Mellanox Technologies\s*)$|^\s*$")
SHARP_RE = re.compile(r"(?i)aggregation node")
# "MF0;A09-P1-IBLEAF-04-04:MQM9701/U1": a managed switch names itself MF0;<name>:<model>/U<n>.
_MANAGED_SWITCH_RE = re.compile(r"^MF0;([^:]+):([^/]*)(?:/.*)?$")
NAME_NUM_RE = re.compile(r"^(.*?)(\d+)$")

STATUS_BY_GATE = {"pass": "green", "fail": "quarantined"}
TIER_ORDER = {"leaf": 0, "spine": 1, "core": 2}


class FabricError(Exception):
    """Bad input to the fabric model (wrong types in the plan, the nodes or the LLDP data)."""


class Model(object):
    """The state one run of the model builds, stage after stage (see ``analyze``).

    Each stage reads what the ones before it set and adds its own attributes, so a test can run
    the stages up to the one it checks and look at the state.
    """

    def __init__(self, nodes=None, lldp=None, plan=None, suspicious_hostnames=DEFAULT_SUSPICIOUS_HOSTNAMES,
                 non_compute_patterns=DEFAULT_NON_COMPUTE_PATTERNS, accept=(), roce_tc=None, rail_plans=None):
        nodes = nodes or {}
        lldp = lldp or {}
        if not isinstance(nodes, dict):
            raise FabricError("nodes: expected a mapping of host name to {report, facts}, got %s" % type(nodes).__name__)
        if not isinstance(lldp, dict):
            raise FabricError("lldp: expected a mapping of host name to lldpctl JSON, got %s" % type(lldp).__name__)
        try:
            self.non_compute_res = [re.compile(p) for p in non_compute_patterns]
        except re.error as exc:
            raise FabricError("non_compute_patterns: invalid regular expression: %s" % exc)
        self.nodes = nodes
        self.lldp = lldp
        self.plan = plan
        self.suspicious_hostnames = list(suspicious_hostnames)
        self.suspicious = set(h.lower() for h in suspicious_hostnames)
        self.accept = [str(a) for a in (accept or ())]
        if roce_tc is not None and (not isinstance(roce_tc, int) or isinstance(roce_tc, bool) or not 0 <= roce_tc <= 255):
            raise FabricError("roce_tc: the RDMA traffic class (NCCL_IB_TC, the TOS byte) is an integer 0-255, got %r" % (roce_tc,))
        self.roce_tc = roce_tc
        if not isinstance(rail_plans or {}, dict):
            raise FabricError("rail_plans: expected a mapping of host name to its rail plan (rail_plans filter), got %s"
                              % type(rail_plans).__name__)
        self.rail_plans = rail_plans or {}
        self.anomalies = []
        self.warnings = []
        self.sources = []
        self.switches = {}              # name -> switch record
        self.sw_by_guid = {}            # guid -> switch name
        self.cas = []                   # every CA port attached to a switch
        self.isl = defaultdict(int)     # (switch, switch) -> link count, both orders
        self.isl_links = []             # (segment, sa, pa, sb, pb, width, speed)
        self.hosts = {}                 # host -> {"nics": [...], "other": [...], "segments": set()}
        self.leaf_su = {}
        self.leaf_rail = {}
        self.sus = {}
        self.plan_leaf = {}
        self.plan_nodes = {}
        self.all_rails = []
        self.rails_by_segment = defaultdict(set)
        self.nodes_out = {}
        self.spine_groups = []
        self.blocks = []


def link_gbps(width, speed):
    """Gb/s of a link: IB ``width`` lanes x ``speed`` (``NDR``...), or an Ethernet port's ``<n>GbE``
    (LLDP neighbours: the netdev's speed from node facts, width 1)."""
    if width is None:
        return None
    if speed not in SPEED_GBPS:
        if isinstance(speed, str) and speed.endswith("GbE"):
            try:
                return width * float(speed[:-3])
            except ValueError:
                return None
        return None
    return width * SPEED_GBPS[speed]


def switch_name(node):
    m = _MANAGED_SWITCH_RE.match(node["desc"] or "")
    if m:
        return m.group(1), m.group(2)
    desc = (node["desc"] or "").strip()
    if desc and " " not in desc and not UNNAMED_RE.match(desc):
        return desc, None
    return "sw-" + node["guid"], None


def anomaly(kind, message, host=None, hca=None, switch=None, port=None, severity="warning", **extra):
    item = {"kind": kind, "host": host, "hca": hca, "switch": switch, "port": port,
            "severity": severity, "message": message}
    item.update(extra)
    return item


def mode(counts):
    """The most common value a Counter counted (None ignored; ties: the smallest as text), or None."""
    seen = [(v, c) for v, c in counts.items() if v is not None]
    if not seen:
        return None
    best = max(c for v, c in seen)
    return sorted((v for v, c in seen if c == best), key=str)[0]


def vote(counter, key=natural_key):
    """The winner of a Counter (ties: the first by ``key``), or None when empty."""
    if not counter:
        return None
    best = max(counter.values())
    return min((v for v, c in counter.items() if c == best), key=key)


class UnionFind(object):
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
            if natural_key(str(ra)) < natural_key(str(rb)):
                self.parent[rb] = ra
            else:
                self.parent[ra] = rb


# --- what the model reads of the nodes' gate reports and facts (the edge checks it, the model trusts it)

_NUMBER = (int, float)
_GID = {"index": int, "type": str, "ndev": str}
_NIC = {"name": str, "role": str, "rail": int, "node_guid": (str, int), "node_desc": str, "netdevs": [str],
        "ports": [{"gids": [_GID]}]}
# a mapping: the keys the model reads and the form of each (None is always allowed: absent);
# [spec]: a list of spec; ("each", spec): a mapping whose every value is spec; a type: that type
NODE_ENTRY = {
    "report": {"status": str},
    "facts": {"nics": [_NIC], "numa": {"nodes": [{"id": int}]}, "cpu": {"siblings": list}, "pairs": list,
              "netdevs": ("each", {"speed_mbps": _NUMBER})},
}
_FORMS = {dict: "a mapping", list: "a list", str: "a string", int: "an integer", _NUMBER: "a number",
          (str, int): "a string or an integer"}


def check_form(value, spec, where, optional=True):
    """FabricError naming ``where`` (host and key) when ``value`` is not of the form ``spec`` (None:
    absent, except as an item of a list)."""
    if value is None and optional:
        return
    if isinstance(spec, dict) or isinstance(spec, tuple) and spec[:1] == ("each",):
        kind = dict
    else:
        kind = list if isinstance(spec, list) else spec
    if isinstance(value, bool) or not isinstance(value, kind):   # no key of these is a boolean
        raise FabricError("%s must be %s, got %s %r" % (where, _FORMS.get(kind, kind), type(value).__name__, value))
    if isinstance(spec, list):
        for index, item in enumerate(value):
            check_form(item, spec[0], "%s[%d]" % (where, index), optional=False)
    elif isinstance(spec, tuple) and spec[:1] == ("each",):
        for key, item in value.items():
            check_form(item, spec[1], "%s.%s" % (where, key), optional=False)
    elif isinstance(spec, dict):
        for key, form in spec.items():
            check_form(value.get(key), form, "%s.%s" % (where, key))


def check_nodes(nodes, option="nodes"):
    """The gate reports and facts by host, as the model reads them: FabricError naming the option,
    the host and the key of the first value of a wrong type (a list where the facts have a mapping)."""
    if not isinstance(nodes, dict):
        raise FabricError("%s: expected a mapping of host name to {report, facts}, got %s" % (option, type(nodes).__name__))
    for host, entry in nodes.items():
        if not isinstance(entry, dict):
            raise FabricError("%s: host %s: expected an object {report, facts}, got %s %r"
                              % (option, host, type(entry).__name__, entry))
        for key, spec in NODE_ENTRY.items():
            check_form(entry.get(key), spec, "%s: host %s: %s" % (option, host, key))


RAIL_PLAN = {"rails": [{"rail": int, "cidr": str, "interface": str, "gateway": str, "routes": list}]}


def check_rail_plans(plans, option="rail_plans"):
    """Plans by host as the rail_plans filter makes them: FabricError naming the host and the key."""
    if not isinstance(plans, dict):
        raise FabricError("%s: expected a mapping of host name to its rail plan, got %s" % (option, type(plans).__name__))
    for host, plan in plans.items():
        where = "%s: host %s: plan" % (option, host)
        check_form(plan, RAIL_PLAN, where, optional=False)
        for index, rail in enumerate(plan.get("rails") or []):
            for key in ("rail", "cidr"):
                if rail.get(key) is None:
                    raise FabricError("%s.rails[%d].%s: missing (the rail_plans filter gives it)" % (where, index, key))
