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
import io
import re
from operator import itemgetter

# Node line: Switch/Ca/Rt, port count, quoted id, then an optional comment with the description.
_NODE_RE = re.compile(r'^(Switch|Ca|Rt)\s+(\d+)\s+"([SHR])-([0-9a-fA-F]+)"\s*(?:#\s*"([^"]*)"(.*))?$')
# Port lines end with the peer's description, and "lid N <width>x<speed>" when the port is up:
#   in a Switch block: [p] "X-guid"[pp](portguid)  # "desc" lid N 4xNDR
#   in a Ca block:     [p](portguid)  "S-guid"[pp]  # lid N lmc N "desc" lid N 4xNDR
_PORT_HEAD = r'^\[(\d+)\](?:\([0-9a-fA-F]+\))?\s+"([SHR])-([0-9a-fA-F]+)"\[(\d+)\](?:\([0-9a-fA-F]+\))?'
_PORT_TAIL = r'"([^"]*)"\s*(.*?)(?:\blid\s+\d+\s+(\d+)x([A-Z0-9]+))?\s*)?$'
_SW_PORT_RE = re.compile(_PORT_HEAD + r'\s*(?:#\s*' + _PORT_TAIL)
_CA_PORT_RE = re.compile(_PORT_HEAD + r'\s*(?:#\s*(?:lid\s+\d+\s+lmc\s+\d+\s+)?' + _PORT_TAIL)
# The common form, the description followed by the rate and nothing else: a quarter of the cost of
# the general patterns above (whose lazy tail tries every position), and the same groups where it
# matches ("lid" occurs once in "lid N WxS"). Any other line is read by the general pattern.
_RATE_END = r'"[^"]*"\s*lid\s+\d+\s+(\d+)x([A-Z0-9]+)\s*$'
_SW_PORT_FAST = re.compile(_PORT_HEAD + r'\s*#\s*' + _RATE_END)
_CA_PORT_FAST = re.compile(_PORT_HEAD + r'\s*#\s*(?:lid\s+\d+\s+lmc\s+\d+\s+)?' + _RATE_END)
_NODE_TAIL_LID_RE = re.compile(r'\blid\s+(\d+)')
_HEX16 = frozenset("0123456789abcdef")
_HEADER_KEYS = frozenset(("vendid", "devid", "sysimgguid", "switchguid", "caguid", "rtguid"))
_REPEATED_KEYS = frozenset(("vendid", "devid"))
_NODE_FIRST = frozenset("SCR")
# A line starting with one of these (or empty) is stripped before it is read; any other line is
# read as it comes (the patterns allow the trailing blanks and newline that strip() would remove).
_STRIP_FIRST = frozenset([""] + [chr(c) for c in range(0x3001) if chr(c).isspace()])   # none above U+3000

# The regular blocks are read by the patterns below (``_read_blocks``), narrower than the line
# reader's: blanks are spaces and tabs, node GUIDs 16 lower-case hex digits, the rate right after
# the description. Optional parts are written "(?:X|)" (the regex engine's "?" on a group costs
# more). A description is "[^"]*", which can run over a newline: a match is kept only when it holds
# as many lines as it reads (the count of its newlines), so that each part stays on its line.
_RATE = r'"[^"]*"[ \t]*lid[ \t]+[0-9]+[ \t]+([0-9]+)x([A-Z0-9]+)[ \t]*\n'
_PEER = r'[ \t]+"[SHR]-([0-9a-f]{16})"\[([0-9]+)\](?:\([0-9a-fA-F]+\)|)[ \t]*#[ \t]*'
# port lines -> (port, peer, peer port, width, speed): a switch's port has no port GUID of its own;
# an adapter's has one, and may have "lid N lmc N" before the peer's description
_SW_LINE_RE = re.compile(r'^\[([0-9]+)\]' + _PEER + _RATE, re.MULTILINE)
_CA_LINE_RE = re.compile(r'^\[([0-9]+)\](?:\([0-9a-fA-F]+\)|)' + _PEER + r'(?:lid[ \t]+[0-9]+[ \t]+lmc[ \t]+[0-9]+[ \t]+|)' + _RATE,
                         re.MULTILINE)
# A block: the four header lines ibnetdiscover writes, the node line (port count, GUID, description,
# the rest of the line), in an adapter's block its first port line as ibnetdiscover writes it (most
# adapters have one port), then the blank line that ends the block, if it follows. The port lines
# of a switch (or an adapter's other ports) are the lines up to the next blank line, each one match
# of the port pattern: the block is regular when every one of them matched.
_NODE = r'[ \t]+([0-9]+)[ \t]+"%s-([0-9a-f]{16})"[ \t]*#[ \t]*"([^"]*)"([^\n]*)\n'
_BLOCK_RE = re.compile(
    r'vendid=(0x[0-9a-f]+)\ndevid=(0x[0-9a-f]+)\nsysimgguid=0x([0-9a-f]+)\n'
    r'(?:switchguid=0x[0-9a-f]+(?:\([0-9a-f]+\)|)\nSwitch' + _NODE % "S"
    + r'|caguid=0x[0-9a-f]+\nCa' + _NODE % "H"
    + r'(?:\[([0-9]+)\]\([0-9a-fA-F]+\)[ \t]+"[SHR]-([0-9a-f]{16})"\[([0-9]+)\][ \t]*#[ \t]*'
    r'lid[ \t]+[0-9]+[ \t]+lmc[ \t]+[0-9]+[ \t]+' + _RATE + r'|))(\n|)')
CHUNK = 1 << 20     # characters read at a time (1 MiB of an ASCII capture)

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
    """Parse one capture given as text (see ``_LineReader.result`` for what it returns)."""
    if not isinstance(text, str):
        raise IbnetdiscoverParseError("%s: expected text, got %s" % (source, type(text).__name__))
    return _paused(_read_chunks, (text,), source)


def parse_lines(lines, source="<text>"):
    """Parse one capture from an iterable of lines, every line by the line reader alone (the
    reference the block reader is compared with: same result, slower)."""
    return _paused(_read_lines, lines, source)


def parse_file(path):
    """Read and parse one file in chunks of whole blocks (the text is never held whole); undecodable
    bytes are replaced (and then reported as garbled lines)."""
    with io.open(path, "r", encoding="utf-8", errors="replace", newline="\n") as handle:
        return _paused(_read_chunks, _chunks(handle), path)


SNIFF_BYTES = 64 * 1024     # how much of a file's head tells text from binary
TAIL_BYTES = 4096           # how much of its end tells a whole last record from a cut one
NOT_TEXT_SHARE = 0.05       # more characters than this share of the head undecodable or control: not text


def sniff(path):
    """Why the file at ``path`` can hold no capture (empty, not text), before it is parsed; None
    when it may. A failed capture (a 0-byte file, a binary, a download that got an error page) must
    never read as a fabric of no nodes, which would wipe the scheduler's topology."""
    with io.open(path, "rb") as handle:
        head = handle.read(SNIFF_BYTES)
    if not head:
        return "empty (0 bytes): the capture failed or was never written"
    if not head.strip():
        return "empty (only blank lines): the capture failed or was never written"
    if b"\0" in head:
        return "not text (NUL bytes at offset %d: a binary file, not ibnetdiscover output)" % head.index(b"\0")
    # a byte that is not UTF-8 in a node description is a garbled line (a warning with its number);
    # a file of them is a binary (gzip, an image, UTF-16 without its NULs in the sample...)
    text = head.decode("utf-8", "replace")
    bad = sum(1 for c in text if c == "\ufffd" or (c < " " and c not in "\t\n\r\f\v"))
    if bad > NOT_TEXT_SHARE * len(text):
        return "not text (%d of the first %d characters are not UTF-8 text: not ibnetdiscover output)" % (bad, len(text))
    return None


def capture_problem(path, capture):
    """Why a parsed capture holds no whole fabric, or None. Warnings alone never refuse a capture
    (a garbled line is reported with its number); these do:

    - no switch and no adapter record (an HTML error page, another command's output);
    - a truncated record: the file does not end with a newline (cut inside a line), its last lines are
      the header of a record whose node line never came, a link goes to a node that has no record of
      its own (every node ibnetdiscover finds has one: the records after the cut are missing), or the
      last record lists fewer of its ports than its peers do (cut among its port lines), or it is a
      switch listing no port at all.
    A one-adapter capture whose port lists no peer (a GB200 node's own view) is whole.
    """
    if not capture["nodes"]:
        return "no switch or HCA records (%d lines, none of them a Switch or Ca line: not ibnetdiscover output%s)" % (
            capture["lines"]["total"], _first_line(path))
    tail = _tail(path)
    if not tail.endswith(b"\n"):
        return "truncated record: the last line is cut (no newline at the end of the file: %r)" % _last_line(tail)
    lines = [line for line in tail.split(b"\n") if line.strip()]
    if lines and lines[-1].split(b"=", 1)[0] in _HEADER_BYTES:
        return "truncated record: the file ends with the header of a record without its Switch or Ca line (%r)" % _last_line(tail)
    nodes, links = capture["nodes"], capture["links"]
    last = max(nodes.values(), key=itemgetter("line"))
    ends = set(map(itemgetter("a"), links))       # sets, not a loop: 10^5 links at 8k nodes
    ends.update(map(itemgetter("b"), links))
    if last["kind"] == "switch" and last["guid"] not in ends:
        return ("truncated record: the last record, switch %s at line %d, lists no port (a switch is found through "
                "its links: cut after its Switch line)" % (last["guid"], last["line"]))
    if not ends.issubset(nodes):
        link = next(link for link in links if link["a"] not in nodes or link["b"] not in nodes)
        return ("truncated record: line %d links to %s, which has no record of its own (the records after the cut "
                "are missing)" % (link["line"], link["a"] if link["a"] not in nodes else link["b"]))
    for link in links if not all(map(itemgetter("confirmed"), links)) else ():
        if not link["confirmed"] and link["b"] == last["guid"] and link["a"] != last["guid"]:
            return ("truncated record: the last record, %s %s at line %d, does not list its port %d that line %d "
                    "links to (cut among its port lines)" % (last["kind"], last["guid"], last["line"],
                                                             link["b_port"], link["line"]))
    return None


_HEADER_BYTES = frozenset(key.encode("ascii") for key in _HEADER_KEYS)


def _tail(path):
    with io.open(path, "rb") as handle:
        handle.seek(0, io.SEEK_END)
        size = handle.tell()
        handle.seek(max(size - TAIL_BYTES, 0))
        return handle.read()


def _last_line(tail):
    return tail.rstrip(b"\n").rsplit(b"\n", 1)[-1][-80:].decode("utf-8", "replace")


def _first_line(path):
    with io.open(path, "rb") as handle:
        for line in handle.read(SNIFF_BYTES).split(b"\n"):
            if line.strip():
                return "; it starts with %r" % line.strip()[:80].decode("utf-8", "replace")
    return ""


def _paused(func, data, source):
    """func(data, source) with the cyclic garbage collector paused: no cycles are made, and
    rescanning the growing node table would make the cost grow faster than the capture."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return func(data, source)
    finally:
        if enabled:
            gc.enable()


def _chunks(handle, size=CHUNK):
    """The text of a file in pieces of about ``size`` characters, each ending after a blank line
    (so that blocks are whole) or, without one, after a newline; the last piece is what remains."""
    rest = ""
    while True:
        data = handle.read(size)
        if not data:
            break
        if rest:
            data = rest + data
        cut = data.rfind("\n\n") + 2
        if cut < 2:
            cut = data.rfind("\n") + 1
        if cut < 1:
            rest = data         # one line longer than size: read on until it ends
            continue
        yield data[:cut]
        rest = data[cut:]
    if rest:
        yield rest


def _read_lines(lines, source):
    reader = _LineReader(source)
    reader.feed(lines)
    return reader.result()


def _read_chunks(chunks, source):
    reader = _LineReader(source)
    for text in chunks:
        _read_blocks(text, reader)
    return reader.result()


def _guid(text):
    """A GUID as captured -> 16 lower-case hex digits (the common case needs no work)."""
    if len(text) == 16 and _HEX16.issuperset(text):
        return text
    return normalize_guid(text)


def _node(nm, lineno, header, source, warn):
    """A matched node line -> its record (``_seen_ports`` is the set its port lines fill)."""
    word, nports, prefix, guid, desc, tail = nm.groups()
    kind = KIND_BY_WORD[word]
    guid = _guid(guid)
    if KIND_BY_PREFIX[prefix] != kind:
        warn(lineno, "%s line with a %s- id %s" % (word, prefix, guid))
    if desc is None:
        warn(lineno, "%s %s has no description" % (word, guid))
        desc = ""
    lm = _NODE_TAIL_LID_RE.search(tail) if tail else None
    sysimg = header.get("sysimgguid", "")
    return {
        "guid": guid, "kind": kind, "nports": int(nports), "desc": desc, "lid": int(lm.group(1)) if lm else None,
        "line": lineno, "source": source, "vendid": header.get("vendid"), "devid": header.get("devid"),
        "sysimgguid": _guid(sysimg[2:]) if sysimg.startswith("0x") else None,
        "_seen_ports": set(),
    }


def _number(numbers, text):
    """int(text), remembered in ``numbers`` (a capture has a few thousand distinct port numbers)."""
    value = numbers[text] = int(text)
    return value


def _odd_port_line(line, port_match, warn, line_no, guid, nports, seen_ports):
    """(port, peer, peer_port, width, speed) of a port line the fast pattern did not take (a missing
    width, a name with odd characters), or None after a warning when it is no port line of a block
    (``port_match`` is None outside a Switch/Ca block)."""
    m = port_match(line) if port_match is not None else None
    if m is None:
        warn(line_no, ("garbled port line in block of %s: %r" % (guid, line.strip()[:120]))
             if port_match is not None else "port line outside a Switch/Ca block: %r" % line.strip()[:120])
        return None
    port, peer, peer_port, width, speed = m.group(1, 3, 4, 7, 8)
    port, peer_port = int(port), int(peer_port)
    width = int(width) if width is not None else None
    if width is None or speed not in SPEED_GBPS or port in seen_ports or (nports and port > nports):
        _port_warnings(warn, line_no, guid, nports, port, seen_ports, width, speed)
    return port, peer, peer_port, width, speed


def _port_warnings(warn, lineno, cur_guid, cur_nports, port, seen_ports, width, speed):
    """The warnings a port line can give about itself (called only when one applies)."""
    if width is None:
        warn(lineno, "no width/speed on port %d of %s" % (port, cur_guid))
    elif speed not in SPEED_GBPS:
        warn(lineno, "unknown link speed %r on port %d of %s" % (speed, port, cur_guid))
    if cur_nports and port > cur_nports:
        warn(lineno, "port %d above the %d ports declared by %s" % (port, cur_nports, cur_guid))
    if port in seen_ports:
        warn(lineno, "port %d of %s listed twice" % (port, cur_guid))


def _second_end(warn, lineno, existing, cur_guid, port, peer, peer_port, width, speed):
    """A link listed again: from its other end (it is confirmed), or again from the same end."""
    if existing["a"] == cur_guid and existing["a_port"] == port:
        warn(lineno, "link %s[%d] <-> %s[%d] listed twice from the same end" % (cur_guid, port, peer, peer_port))
        return
    existing["confirmed"] = True
    if width != existing["width"] or speed != existing["speed"]:
        warn(lineno, "the two ends of %s[%d] <-> %s[%d] disagree on width/speed (%sx%s vs %sx%s)"
             % (cur_guid, port, peer, peer_port, width, speed, existing["width"], existing["speed"]))


class _LineReader:
    """The capture's tables, and the reader of any line one at a time (exact on every form: each line
    is accounted for or warned about with its number). ``_read_blocks`` reads the regular blocks
    into the same tables and hands every other line to ``feed``."""

    def __init__(self, source):
        self.source = source
        self.nodes = {}
        self.links = {}
        self.warnings = []
        self.numbers = {}           # port numbers and widths repeat on every switch: their ints are looked up
        self.seen_headers = {}
        self.n_total = self.n_blank = self.n_comment = self.n_header = self.n_node = self.n_unparsed = 0
        self.header = {}
        self.current = None         # the node whose block we are in
        self.cur_guid = self.port_match = self.port_fast = None
        self.cur_nports = 0
        self.seen_ports = set()

    def warn(self, lineno, msg):
        self.warnings.append("%s:%d: %s" % (self.source, lineno, msg))

    def reset(self):
        """Between blocks (after a blank line)."""
        self.current = None
        self.header = {}

    def feed(self, lines):
        """Read lines (each with its newline, or the last without) continuing from the state left by
        the lines before them. The loop is the whole parser for irregular captures: the common lines
        are read inline, the rare cases (warnings, odd forms) in the helpers above."""
        nodes, links, warn, source = self.nodes, self.links, self.warn, self.source
        n_total, n_blank, n_comment, n_header, n_node, n_unparsed = (
            self.n_total, self.n_blank, self.n_comment, self.n_header, self.n_node, self.n_unparsed)
        header, current, cur_guid, cur_nports, seen_ports = (
            self.header, self.current, self.cur_guid, self.cur_nports, self.seen_ports)
        port_match, port_fast = self.port_match, self.port_fast
        sw_match = _SW_PORT_RE.match
        ca_match = _CA_PORT_RE.match
        sw_fast = _SW_PORT_FAST.match
        ca_fast = _CA_PORT_FAST.match
        node_match = _NODE_RE.match
        speeds = SPEED_GBPS
        strip_first = _STRIP_FIRST
        seen_headers = self.seen_headers
        numbers = self.numbers
        node_first = _NODE_FIRST
        header_keys = _HEADER_KEYS
        repeated_keys = _REPEATED_KEYS

        for line in lines:
            n_total += 1
            first = line[:1]
            if first in strip_first:
                line = line.strip()
                if not line:
                    n_blank += 1
                    current = None
                    header = {}
                    continue
                first = line[0]
            if first == "[":
                m = port_fast(line) if current is not None else None
                if m is not None:
                    port, peer, peer_port, width, speed = m.group(1, 3, 4, 5, 6)
                    port = numbers.get(port) or _number(numbers, port)
                    peer_port = numbers.get(peer_port) or _number(numbers, peer_port)
                    width = numbers.get(width) or _number(numbers, width)
                    if speed not in speeds or port in seen_ports or (cur_nports and port > cur_nports):
                        _port_warnings(warn, n_total, cur_guid, cur_nports, port, seen_ports, width, speed)
                else:
                    fields = _odd_port_line(line, port_match if current is not None else None, warn, n_total,
                                            cur_guid, cur_nports, seen_ports)
                    if fields is None:
                        n_unparsed += 1
                        continue
                    port, peer, peer_port, width, speed = fields
                if len(peer) != 16 or not peer.islower():
                    peer = normalize_guid(peer)     # upper case, short, or all digits (normalize_guid keeps those)
                seen_ports.add(port)
                _add_link(links, warn, n_total, source, cur_guid, port, peer, peer_port, width, speed)
                continue
            if first == "#":
                n_comment += 1
                continue
            # header keys are lower case: a line starting with a capital is no header (Switch, Ca, Rt)
            kv = seen_headers.get(line) if first not in node_first else False
            if kv is None:
                # vendid=0x2c9 (a known key, a value without blanks): no regex for the header lines of every block
                key, eq, value = line.partition("=")
                kv = False
                if eq and key in header_keys:
                    value = value.rstrip()
                    if value and " " not in value and value.isprintable():
                        kv = (key, value)
                        if key in repeated_keys:
                            seen_headers[line] = kv    # the same few lines in every block
            if kv:
                n_header += 1
                if current is not None:
                    # A header line after a node line: the blank separator line is missing.
                    current = None
                    header = {}
                header[kv[0]] = kv[1]
                continue
            nm = node_match(line)
            if nm is None:
                n_unparsed += 1
                warn(n_total, "unrecognised line: %r" % line.strip()[:120])
                continue
            n_node += 1
            current = _node(nm, n_total, header, source, warn)
            guid = current["guid"]
            cur_guid, cur_nports, seen_ports = guid, current["nports"], current["_seen_ports"]
            port_match, port_fast = (sw_match, sw_fast) if current["kind"] == "switch" else (ca_match, ca_fast)
            if guid in nodes:
                warn(n_total, "%s %s appears twice (first at line %d); keeping the first"
                     % (nm.group(1), guid, nodes[guid]["line"]))
                continue
            nodes[guid] = current

        self.n_total, self.n_blank, self.n_comment, self.n_header, self.n_node, self.n_unparsed = (
            n_total, n_blank, n_comment, n_header, n_node, n_unparsed)
        self.header, self.current, self.cur_guid, self.cur_nports, self.seen_ports = (
            header, current, cur_guid, cur_nports, seen_ports)
        self.port_match, self.port_fast = port_match, port_fast

    def result(self):
        """The parsed capture::

            {"source": str, "nodes": {guid: node}, "links": [link], "warnings": [str],
             "lines": {"total": n, "blank": n, "comment": n, "header": n, "node": n, "port": n, "unparsed": n}}

        node: {"guid", "kind": switch|ca|router, "nports", "desc", "lid", "line", "vendid", "devid", "sysimgguid"}
        link: {"a": guid, "a_port": int, "b": guid, "b_port": int, "width": int|None, "speed": str|None,
               "line": int, "confirmed": bool}  (a is the end whose block listed it first)
        """
        nodes, warnings, source = self.nodes, self.warnings, self.source
        for node in nodes.values():
            if not node.pop("_seen_ports"):
                warnings.append("%s:%d: %s %s (%r) lists no connected port (truncated capture?)"
                                % (source, node["line"], "Switch" if node["kind"] == "switch" else "Ca",
                                   node["guid"], node["desc"]))
        links = list(self.links.values())
        for link in links:
            if link["a"] not in nodes:
                warnings.append("%s:%d: link to %s which has no block of its own (truncated capture?)"
                                % (source, link["line"], link["a"]))
            if link["b"] not in nodes:
                warnings.append("%s:%d: link to %s which has no block of its own (truncated capture?)"
                                % (source, link["line"], link["b"]))
        n_total = self.n_total
        other = self.n_blank + self.n_comment + self.n_header + self.n_node + self.n_unparsed
        counts = {"total": n_total, "blank": self.n_blank, "comment": self.n_comment, "header": self.n_header,
                  "node": self.n_node, "port": n_total - other, "unparsed": self.n_unparsed}
        return {"source": source, "nodes": nodes, "links": links, "warnings": warnings, "lines": counts}


def _add_link(links, warn, lineno, source, guid, port, peer, peer_port, width, speed):
    """One port line's link: new, or the second listing (from its other end: confirmed)."""
    if guid < peer or (guid == peer and port <= peer_port):
        key = (guid, port, peer, peer_port)
    else:
        key = (peer, peer_port, guid, port)
    existing = links.get(key)
    if existing is None:
        links[key] = {"a": guid, "a_port": port, "b": peer, "b_port": peer_port, "width": width, "speed": speed,
                      "line": lineno, "confirmed": False, "source": source}
    elif existing["a"] == guid or width != existing["width"] or speed != existing["speed"]:
        _second_end(warn, lineno, existing, guid, port, peer, peer_port, width, speed)
    else:
        existing["confirmed"] = True


def _read_blocks(text, reader):
    """Read a piece of capture (whole lines): each regular block by ``_BLOCK_RE`` and the port
    patterns, any other line by ``reader.feed`` (the lines from there to the next ``vendid=`` line),
    so that every other form is read exactly as the line reader reads it, with its line number. A
    block is read the same whatever came before it (its header lines set all the node takes from
    them, and the first one ends an unterminated block), and leaves the reader between blocks.

    The hot path of the fabric module: the same steps as the line reader's for these lines."""
    nodes, links, warn, source, numbers = reader.nodes, reader.links, reader.warn, reader.source, reader.numbers
    speeds = SPEED_GBPS
    block_match = _BLOCK_RE.match
    lid_search = _NODE_TAIL_LID_RE.search
    count = text.count
    lineno = reader.n_total     # the number of the last line read
    blocks = 0
    pos = 0
    end = len(text)
    between = False             # the reader's state is stale: a block was read since it last read a line
    misses = 0                  # blocks in a row that were not regular
    while pos < end:
        m = block_match(text, pos)
        ports = seen = ()
        if m is not None:
            (vendid, devid, sysimg, nports, guid, desc, tail, ca_nports, ca_guid, ca_desc, ca_tail,
             port, peer, peer_port, width, speed, blank) = m.groups()
            after = m.end()
            if guid is not None:
                kind, word, lines = "switch", "Switch", 5
            else:
                kind, word, lines = "ca", "Ca", 5 if port is None else 6
                nports, guid, desc, tail = ca_nports, ca_guid, ca_desc, ca_tail
            nports = numbers.get(nports) or _number(numbers, nports)
            if count("\n", pos, after) != lines + (blank != ""):
                m = None            # a description ran over a newline
            elif not blank:
                run = _port_run(text, after, kind, nports, port, peer, peer_port, width, speed)
                if run is None:
                    m = None
                else:
                    ports, seen, after = run
            elif port is not None:
                # an adapter's one port, checked as the line reader checks it
                port = numbers.get(port) or _number(numbers, port)
                peer_port = numbers.get(peer_port) or _number(numbers, peer_port)
                width = numbers.get(width) or _number(numbers, width)
                if speed not in speeds or (nports and port > nports):
                    _port_warnings(warn, lineno + 6, guid, nports, port, (), width, speed)
                ports = ((port, peer, peer_port, width, speed),)
                seen = {port}
            else:
                ports, seen = (), set()
        if m is None:
            # not a regular block: the line reader reads up to the next line that may start one, or
            # the rest of the piece after many in a row (a capture of another form: CRLF line ends...)
            misses += 1
            nxt = (text.find("\nvendid=", pos) + 1 or end) if misses < 32 else end
            if between:
                reader.reset()
                between = False
            reader.n_total = lineno
            reader.feed(io.StringIO(text[pos:nxt], newline="\n"))
            lineno = reader.n_total
            pos = nxt
            continue
        pos = after
        between = True
        misses = 0
        blocks += 1
        lineno += 5
        lm = lid_search(tail) if tail else None
        if len(sysimg) != 16:
            sysimg = normalize_guid(sysimg)
        node = {"guid": guid, "kind": kind, "nports": nports, "desc": desc, "lid": int(lm.group(1)) if lm else None,
                "line": lineno, "source": source, "vendid": vendid, "devid": devid, "sysimgguid": sysimg,
                "_seen_ports": seen}
        if guid in nodes:
            warn(lineno, "%s %s appears twice (first at line %d); keeping the first" % (word, guid, nodes[guid]["line"]))
        else:
            nodes[guid] = node
        for port, peer, peer_port, width, speed in ports:
            lineno += 1
            _add_link(links, warn, lineno, source, guid, port, peer, peer_port, width, speed)
        lineno += 1     # the blank line
    reader.n_header += 4 * blocks
    reader.n_node += blocks
    reader.n_blank += blocks
    if between:
        reader.reset()
    reader.n_total = lineno


def _port_run(text, start, kind, nports, port, peer, peer_port, width, speed):
    """The port lines of a block from ``start`` to its blank line (after an adapter's first port
    line, if ``port`` is given), when every one is of the common form and none would warn (port
    numbers once each, within the declared count, known speeds): -> (ports, the set of port
    numbers, the end of the block), else None (the block is read by lines)."""
    last = text.find("\n\n", start - 1) + 1
    if not last:
        return None
    ports = (_SW_LINE_RE if kind == "switch" else _CA_LINE_RE).findall(text, start, last)
    if len(ports) != text.count("\n", start, last):
        return None
    if port is not None:
        ports.insert(0, (port, peer, peer_port, width, speed))
    numbers, peers, peer_ports, widths, speeds = zip(*ports)
    numbers = list(map(int, numbers))
    seen = set(numbers)
    if len(seen) != len(numbers) or (nports and max(numbers) > nports) or not all(map(SPEED_GBPS.__contains__, speeds)):
        return None
    return zip(numbers, peers, map(int, peer_ports), map(int, widths), speeds), seen, last + 1
