# -*- coding: utf-8 -*-
# Copyright: contributors to gpufleet.provision
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure parser of ``ibnetdiscover`` text output (no Ansible, no I/O).

A capture is a sequence of blocks separated by blank lines. A block starts with ``key=value``
header lines and one node line, then one line per connected port::

    vendid=0x2c9
    devid=0xd2f2
    sysimgguid=0x2c5eab0300b87b40
    switchguid=0x2c5eab0300b87b40(2c5eab0300b87b40)
    Switch  65 "S-2c5eab0300b87b40"   # "MF0;A09-P1-IBLEAF-04-04:MQM9701/U1" enhanced port 0 lid 73 lmc 0
    [1]     "H-e09d7303007a4bd8"[1](e09d7303007a4bd8)   # "a08-p1-dgx-04-c01 mlx5_5" lid 647 4xNDR
    [35]    "S-2c5eab0300c26280"[32]    # "MF0;A10-P1-IBSPINE-02:MQM9701/U1" lid 236 4xNDR

    caguid=0xe09d7303007a4bd8
    Ca      1 "H-e09d7303007a4bd8"      # "a08-p1-dgx-04-c01 mlx5_5"
    [1](e09d7303007a4bd8)   "S-2c5eab0300b87b40"[1]   # lid 647 lmc 0 "MF0;A09-P1-IBLEAF-04-04:MQM9701/U1" lid 73 4xNDR

Every link is written twice (once from each end); the parser keeps one link per pair of ports and
remembers whether both ends confirmed it. Every input line is either accounted for (blank, comment,
header, node, port) or produces one warning naming the file and line number: truncated and garbled
captures give warnings, never an exception.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import gc
import re

# Node line: Switch/Ca/Rt, port count, quoted id, then an optional comment with the description.
_NODE_RE = re.compile(r'^(Switch|Ca|Rt)\s+(\d+)\s+"([SHR])-([0-9a-fA-F]+)"\s*(?:#\s*"([^"]*)"(.*))?$')
# Port line inside a Switch block: [p] "X-guid"[pp](portguid)  # "desc" lid N 4xNDR
_SW_PORT_RE = re.compile(
    r'^\[(\d+)\](?:\(([0-9a-fA-F]+)\))?\s+"([SHR])-([0-9a-fA-F]+)"\[(\d+)\](?:\(([0-9a-fA-F]+)\))?'
    r'\s*(?:#\s*"([^"]*)"\s*(.*))?$')
# Port line inside a Ca block: [p](portguid)  "S-guid"[pp]  # lid N lmc N "desc" lid N 4xNDR
_CA_PORT_RE = re.compile(
    r'^\[(\d+)\](?:\(([0-9a-fA-F]+)\))?\s+"([SHR])-([0-9a-fA-F]+)"\[(\d+)\](?:\(([0-9a-fA-F]+)\))?'
    r'\s*(?:#\s*(?:lid\s+(\d+)\s+lmc\s+\d+\s+)?"([^"]*)"\s*(.*))?$')
_TAIL_RE = re.compile(r'lid\s+(\d+)\s+(\d+)x([A-Z0-9]+)\s*$')
_NODE_TAIL_LID_RE = re.compile(r'\blid\s+(\d+)')
_HEADER_RE = re.compile(r'^(vendid|devid|sysimgguid|switchguid|caguid|rtguid)=(\S+)$')

KIND_BY_PREFIX = {"S": "switch", "H": "ca", "R": "router"}
KIND_BY_WORD = {"Switch": "switch", "Ca": "ca", "Rt": "router"}

# Data rate per lane in Gb/s, to compare links (width x speed).
SPEED_GBPS = {
    "SDR": 2.5, "DDR": 5.0, "QDR": 10.0, "FDR10": 10.0, "FDR": 14.0, "EDR": 25.0,
    "HDR": 50.0, "NDR": 100.0, "XDR": 200.0,
}


class IbnetdiscoverParseError(Exception):
    """Raised only for input that is not text at all (the caller gives a path or a str)."""


def normalize_guid(value):
    """'a088:c203:0012:3456' (sysfs node_guid) / '0xa088c20300123456' / 'A088C2030012345' -> 16 hex digits.

    The one form in which capture GUIDs and node-facts GUIDs are compared.
    """
    if value is None:
        return None
    text = str(value).lower().replace(":", "")
    if text.startswith("0x"):
        text = text[2:]
    return text.rjust(16, "0")


def parse(text, source="<text>"):
    """Parse one capture (the cyclic garbage collector is paused meanwhile: no cycles are made, and
    rescanning the growing node table would make the cost grow faster than the capture)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _parse(text, source)
    finally:
        if enabled:
            gc.enable()


def _parse(text, source):
    """Parse one capture.

    Returns a dict::

        {"source": str, "nodes": {guid: node}, "links": [link], "warnings": [str],
         "lines": {"total": n, "blank": n, "comment": n, "header": n, "node": n, "port": n, "unparsed": n}}

    node: {"guid", "kind": switch|ca|router, "nports", "desc", "lid", "line", "vendid", "devid", "sysimgguid"}
    link: {"a": guid, "a_port": int, "b": guid, "b_port": int, "width": int|None, "speed": str|None,
           "line": int, "confirmed": bool}  (a is the end whose block listed it first)
    """
    if not isinstance(text, str):
        raise IbnetdiscoverParseError("%s: expected text, got %s" % (source, type(text).__name__))
    nodes = {}
    links = {}
    warnings = []
    counts = {"total": 0, "blank": 0, "comment": 0, "header": 0, "node": 0, "port": 0, "unparsed": 0}
    header = {}
    current = None  # the node whose block we are in

    def warn(lineno, msg):
        warnings.append("%s:%d: %s" % (source, lineno, msg))

    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for lineno, raw in enumerate(lines, 1):
        counts["total"] += 1
        line = raw.strip()
        if not line:
            counts["blank"] += 1
            current = None
            header = {}
            continue
        first = line[0]
        if first == "[":
            if current is None:
                counts["unparsed"] += 1
                warn(lineno, "port line outside a Switch/Ca block: %r" % line[:120])
                continue
            if current["kind"] == "switch":
                m = _SW_PORT_RE.match(line)
            else:
                m = _CA_PORT_RE.match(line)
            if not m:
                counts["unparsed"] += 1
                warn(lineno, "garbled port line in block of %s: %r" % (current["guid"], line[:120]))
                continue
            counts["port"] += 1
            port = int(m.group(1))
            peer = normalize_guid(m.group(4))
            peer_port = int(m.group(5))
            if current["kind"] == "switch":
                tail = m.group(8) or ""
            else:
                tail = m.group(9) or ""
            width = speed = None
            tm = _TAIL_RE.search(tail)
            if tm:
                width = int(tm.group(2))
                speed = tm.group(3)
                if speed not in SPEED_GBPS:
                    warn(lineno, "unknown link speed %r on port %d of %s" % (speed, port, current["guid"]))
            else:
                warn(lineno, "no width/speed on port %d of %s" % (port, current["guid"]))
            if current["nports"] and port > current["nports"]:
                warn(lineno, "port %d above the %d ports declared by %s" % (port, current["nports"], current["guid"]))
            if port in current["_seen_ports"]:
                warn(lineno, "port %d of %s listed twice" % (port, current["guid"]))
            current["_seen_ports"].add(port)
            me = (current["guid"], port)
            other = (peer, peer_port)
            key = (me, other) if me <= other else (other, me)
            existing = links.get(key)
            if existing is None:
                links[key] = {"a": current["guid"], "a_port": port, "b": peer, "b_port": peer_port,
                              "width": width, "speed": speed, "line": lineno, "confirmed": False,
                              "source": source}
            elif (existing["a"], existing["a_port"]) == me:
                warn(lineno, "link %s[%d] <-> %s[%d] listed twice from the same end" % (me + other))
            else:
                existing["confirmed"] = True
                if (width, speed) != (existing["width"], existing["speed"]):
                    warn(lineno, "the two ends of %s[%d] <-> %s[%d] disagree on width/speed (%sx%s vs %sx%s)"
                         % (me + other + (width, speed, existing["width"], existing["speed"])))
            continue
        if first == "#":
            counts["comment"] += 1
            continue
        hm = _HEADER_RE.match(line)
        if hm:
            counts["header"] += 1
            if current is not None:
                # A header line after a node line: the blank separator line is missing.
                current = None
                header = {}
            header[hm.group(1)] = hm.group(2)
            continue
        nm = _NODE_RE.match(line)
        if nm:
            counts["node"] += 1
            kind = KIND_BY_WORD[nm.group(1)]
            guid = normalize_guid(nm.group(4))
            if KIND_BY_PREFIX[nm.group(3)] != kind:
                warn(lineno, "%s line with a %s- id %s" % (nm.group(1), nm.group(3), guid))
            desc = nm.group(5)
            if desc is None:
                warn(lineno, "%s %s has no description" % (nm.group(1), guid))
                desc = ""
            lid = None
            lm = _NODE_TAIL_LID_RE.search(nm.group(6) or "")
            if lm:
                lid = int(lm.group(1))
            if guid in nodes:
                warn(lineno, "%s %s appears twice (first at line %d); keeping the first"
                     % (nm.group(1), guid, nodes[guid]["line"]))
                current = {"guid": guid, "kind": kind, "nports": int(nm.group(2)), "_seen_ports": set(),
                           "_dup": True}
                continue
            current = {
                "guid": guid, "kind": kind, "nports": int(nm.group(2)), "desc": desc, "lid": lid,
                "line": lineno, "source": source,
                "vendid": header.get("vendid"), "devid": header.get("devid"),
                "sysimgguid": normalize_guid(header["sysimgguid"]) if header.get("sysimgguid", "").startswith("0x") else None,
                "_seen_ports": set(),
            }
            nodes[guid] = current
            continue
        counts["unparsed"] += 1
        warn(lineno, "unrecognised line: %r" % line[:120])

    for node in nodes.values():
        if not node.pop("_seen_ports"):
            warnings.append("%s:%d: %s %s (%r) lists no connected port (truncated capture?)"
                            % (source, node["line"], "Switch" if node["kind"] == "switch" else "Ca",
                               node["guid"], node["desc"]))
    known = set(nodes)
    for link in links.values():
        for end in ("a", "b"):
            if link[end] not in known:
                warnings.append("%s:%d: link to %s which has no block of its own (truncated capture?)"
                                % (source, link["line"], link[end]))
    return {"source": source, "nodes": nodes, "links": list(links.values()), "warnings": warnings,
            "lines": counts}


def parse_file(path):
    """Read and parse one file; undecodable bytes are replaced (and then reported as garbled lines)."""
    with open(path, "rb") as handle:
        data = handle.read()
    return parse(data.decode("utf-8", errors="replace"), source=path)
