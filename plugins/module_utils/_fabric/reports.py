# -*- coding: utf-8 -*-
# Copyright: contributors to gpufleet.provision
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gate's reports as the fabric reads them: per host the few fields the model uses, the rest
let go as each file is read.

A report file (the validate role's ``<host>.json``, ``{"report", "facts"}``) is about 125 KB, 95% of
it checks, PCIe paths, counters and CPU flags; 16k of them whole are 3.6 GB in memory. The model
reads the gate's status and, of the facts: per NIC its name, GUID, description, rail, role, netdevs
and first port's GIDs; the netdevs' speeds; the NUMA nodes' CPUs; the GPU-NIC pairs; the HT
siblings. ``fabric_view`` keeps exactly those of a loaded report. ``read_view`` gets the same view
from the file's bytes, reading only those members when the file has the layout the gate writes
(``json.dumps(indent=4, sort_keys=True)``: a member of an object at depth d is a line indented 4d,
its value closes on a line of the same indent, and no string holds a newline), and whole otherwise
(a report of another writer, an older gate's, a hand-made one): the same view either way.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import sys

_NIC_KEYS = ("name", "node_guid", "node_desc", "rail", "role", "netdevs", "ports")
_GID_KEYS = ("index", "type", "ipv4", "ndev")


def fabric_view(entry):
    """The part of a host's ``{"report", "facts"}`` the model reads, as new objects (the entry can be
    freed). A part of another shape than the gate writes is kept whole, so every judgement of the
    model on it is unchanged; facts with none of the keys read stay whole (the model asks whether a
    host has facts at all)."""
    if not isinstance(entry, dict):
        return entry
    out = {}
    if "report" in entry:
        report = entry["report"]
        out["report"] = _pick(report, ("status",)) if isinstance(report, dict) else report
    if "facts" in entry:
        facts = entry["facts"]
        if isinstance(facts, dict):
            view = dict((k, _FACT_VIEWS[k](facts[k])) for k in _FACT_KEYS if k in facts)
            facts = view if view or not facts else facts
        out["facts"] = facts
    return out


def _nics_view(nics):
    return [_nic_view(n) for n in nics] if isinstance(nics, list) else nics


def _nic_view(nic):
    if not isinstance(nic, dict):
        return nic
    view = _pick(nic, _NIC_KEYS)
    for key in ("name", "role"):    # the same few on every host: one string each
        if isinstance(view.get(key), str):
            view[key] = sys.intern(view[key])
    if isinstance(view.get("netdevs"), list):
        view["netdevs"] = [sys.intern(n) if isinstance(n, str) else n for n in view["netdevs"]]
    ports = view.get("ports")
    if isinstance(ports, list) and ports:
        first = ports[0]        # the model reads the first port's GIDs only
        if isinstance(first, dict):
            first = _pick(first, ("gids",))
            gids = first.get("gids")
            if isinstance(gids, list):
                # of which only RoCE v2 GIDs with an IPv4 address count (hosts.roce_gid_index)
                first["gids"] = [_gid_view(g) if isinstance(g, dict) else g for g in gids
                                 if not isinstance(g, dict) or (g.get("type") == "RoCE v2" and g.get("ipv4"))]
        view["ports"] = [first]
    return view


def _gid_view(gid):
    view = _pick(gid, _GID_KEYS)
    for key in ("type", "ndev"):
        if isinstance(view.get(key), str):
            view[key] = sys.intern(view[key])
    return view


def _netdevs_view(netdevs):
    if not isinstance(netdevs, dict):
        return netdevs
    return dict((k, _speed(v)) for k, v in netdevs.items())


_SPEEDS = {}


def _speed(netdev):
    """{"speed_mbps": n} (one object per speed: the model only reads it), or the value as it is."""
    if not isinstance(netdev, dict):
        return netdev
    if "speed_mbps" not in netdev:
        return {}
    speed = netdev["speed_mbps"]
    if not isinstance(speed, int) or isinstance(speed, bool):
        return {"speed_mbps": speed}
    if len(_SPEEDS) > 256:
        return {"speed_mbps": speed}
    return _SPEEDS.setdefault(speed, {"speed_mbps": speed})


def _numa_view(numa):
    if not isinstance(numa, dict):
        return numa
    view = _pick(numa, ("nodes",))
    nodes = view.get("nodes")
    if isinstance(nodes, list):
        view["nodes"] = [_pick(n, ("id", "cpus")) if isinstance(n, dict) else n for n in nodes]
    return view


def _cpu_view(cpu):
    return _pick(cpu, ("siblings",)) if isinstance(cpu, dict) else cpu


def _same(value):
    return value        # the GPU-NIC pairs: fabric.json carries them as they are


def _pick(mapping, keys):
    return dict((k, mapping[k]) for k in keys if k in mapping)


# the facts' keys the model reads, in the order of the file (sorted): their views
_FACT_KEYS = ("cpu", "netdevs", "nics", "numa", "pairs")
_FACT_VIEWS = {"cpu": _cpu_view, "netdevs": _netdevs_view, "nics": _nics_view, "numa": _numa_view, "pairs": _same}
# of these, the members read from inside (the rest of cpu and numa: flags, distances, is large)
_INNER = {"cpu": "siblings", "numa": "nodes"}
# of these, the values alike on every node of a model of server: one object for all of them
_SHARED = ("cpu", "numa", "pairs")

_OPEN = b'{\n    "facts": {'
_SPLIT = b'\n    },\n    "report": {\n'
_STATUS = b'\n        "status": '
_CLOSE = b"\n    }\n}\n"


class NotAReport(Exception):
    """JSON, but not a gate report (no ``report`` object)."""


def read_view(raw, shared):
    """``fabric_view`` of a report file's bytes; ValueError: not JSON (nor UTF-8), NotAReport.

    ``shared`` is one dict for all the files of a run: values alike on many hosts (NUMA nodes,
    siblings, pairs of the same board) are one object (parsed once, kept once)."""
    view = _layout_view(raw, shared)
    if view is not None:
        return view
    data = json.loads(raw.decode("utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("report"), dict):
        raise NotAReport("expected an object with a `report` object (and `facts`)")
    view = fabric_view(data)
    facts = view.get("facts")
    if isinstance(facts, dict):
        for key in _SHARED:
            if key in facts:    # its repr tells values apart as fabric.json would (types, key order)
                facts[key] = shared.setdefault((key, repr(facts[key])), facts[key])
    return view


def _layout_view(raw, shared):
    """The view read member by member from a file in the gate's layout; None: not that layout (or
    not JSON where it was read), read it whole."""
    if not (raw.startswith(_OPEN) and raw.endswith(_CLOSE)):
        return None
    spans, pos = {}, len(_OPEN)
    for key in _FACT_KEYS:      # sorted like the file: one pass
        span = _member(raw, key, 8, pos, len(raw))
        if span is False:
            return None
        if span:
            spans[key], pos = span, span[1]
    split = raw.find(_SPLIT, pos)
    status = raw.rfind(_STATUS)
    end = len(raw) - len(_CLOSE)
    # the members found are the facts' (before the report); the status is the report's last member
    if not spans or split < 0 or status < split or raw.find(b"\n", status + len(_STATUS)) != end:
        return None
    try:
        facts = dict((key, _fact_view(raw, key, spans[key], shared)) for key in _FACT_KEYS if key in spans)
        return {"report": {"status": json.loads(raw[status + len(_STATUS):end])}, "facts": facts}
    except (ValueError, _NotLayout):
        return None


class _NotLayout(Exception):
    pass


def _fact_view(raw, key, span, shared):
    start, end = span
    inner = _INNER.get(key)
    if inner and raw[start:start + 2] == b"{\n":
        sub = _member(raw, inner, 12, start, end)
        if sub is False:
            raise _NotLayout()
        text = raw[sub[0]:sub[1]] if sub else b""
        nest = inner if sub else False     # False: the member is absent, the view of {}
    else:
        text = raw[start:end]
        nest = None                        # the whole value

    def make():
        if nest is False:
            return _FACT_VIEWS[key]({})
        value = json.loads(text)
        return _FACT_VIEWS[key]({nest: value} if nest else value)
    if key not in _SHARED:
        return make()
    value = shared.get((key, text))
    if value is None:
        value = shared[(key, text)] = make()
    return value


def _member(raw, key, indent, start, end):
    """(start, end) of the value of member ``key`` among the lines indented ``indent`` in
    raw[start:end]; None: no such member; False: its value does not close as the layout says."""
    pad = b"\n" + b" " * indent
    at = raw.find(b'%s"%s": ' % (pad, key.encode("ascii")), start, end)
    if at < 0:
        return None
    begin = at + indent + len(key) + 5
    opener = raw[begin:begin + 2]
    if opener in (b"[\n", b"{\n"):
        close = pad + (b"]" if opener == b"[\n" else b"}")
        stop = raw.find(close, begin, end)
        return (begin, stop + len(close)) if stop >= 0 else False
    stop = raw.find(b"\n", begin, end)
    if stop < 0:
        return False
    return begin, stop - 1 if raw[stop - 1:stop] == b"," else stop
