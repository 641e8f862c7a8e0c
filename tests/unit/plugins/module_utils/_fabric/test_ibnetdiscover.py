"""ibnetdiscover parser: the real SuperPOD capture line by line, and broken input.

Expected figures were counted by hand on the capture with grep/awk, e.g.
  grep -c '^Switch' -> 40, grep -c '^Ca' -> 582, grep -c '^\\[' -> 2228, grep -c '^$' -> 623,
  grep -c '^#' -> 4, wc -l -> 5965; header lines: vendid/devid/sysimgguid 622 each, switchguid 40,
  caguid 582; switch-to-switch port lines 1064 (each link written from both ends: 532 links).
"""
import os

from hypothesis import given, settings, strategies as st

from ansible_collections.gpufleet.provision.plugins.module_utils._fabric.ibnetdiscover import parse, parse_file

SUPERPOD = os.path.join("ibnetdiscover", "superpod-h100-example.out")
GB200 = os.path.join("ibnetdiscover", "gb200-unset-descriptions.out")


def test_real_capture_every_line_accounted(realdata):
    cap = parse_file(os.path.join(realdata, SUPERPOD))
    lines = cap["lines"]
    assert lines == {"total": 5965, "blank": 623, "comment": 4, "header": 622 * 3 + 40 + 582,
                     "node": 622, "port": 2228, "unparsed": 0}
    assert sum(v for k, v in lines.items() if k != "total") == lines["total"]
    assert cap["warnings"] == []


def test_real_capture_nodes_and_links(realdata):
    cap = parse_file(os.path.join(realdata, SUPERPOD))
    kinds = [n["kind"] for n in cap["nodes"].values()]
    assert kinds.count("switch") == 40
    assert kinds.count("ca") == 582
    # 582 adapter links + 1064 / 2 switch links, every one seen from both ends.
    assert len(cap["links"]) == 582 + 532
    assert all(link["confirmed"] for link in cap["links"])
    assert set((link["width"], link["speed"]) for link in cap["links"]) == {(4, "NDR")}
    leaf = cap["nodes"]["2c5eab0300b87b40"]
    assert leaf["desc"] == "MF0;A09-P1-IBLEAF-04-04:MQM9701/U1"
    assert (leaf["kind"], leaf["nports"], leaf["lid"], leaf["line"]) == ("switch", 65, 73, 10)
    ufm = cap["nodes"]["5c25730300d765c8"]
    assert (ufm["kind"], ufm["desc"]) == ("ca", "B11-P1-CUFM-02 mlx5_1")
    unnamed = [n for n in cap["nodes"].values() if n["desc"] == "MT4129 ConnectX7   Mellanox Technologies"]
    assert len(unnamed) == 69
    sharp = [n for n in cap["nodes"].values() if n["desc"] == "Mellanox Technologies Aggregation Node"]
    assert len(sharp) == 40


def test_gb200_adapter_without_link_is_reported(realdata):
    cap = parse_file(os.path.join(realdata, GB200))
    assert cap["lines"]["node"] == 1 and cap["lines"]["port"] == 0 and cap["lines"]["unparsed"] == 0
    node = cap["nodes"]["b8e92403009ca838"]
    assert node["desc"] == "dgx-gb200-n01-c1 HCA-1"
    assert len(cap["warnings"]) == 1
    assert ":10: Ca b8e92403009ca838" in cap["warnings"][0] and "no connected port" in cap["warnings"][0]


GOOD = """\
vendid=0x2c9
devid=0xd2f2
sysimgguid=0x1000
switchguid=0x1000(1000)
Switch\t65 "S-0000000000001000"\t\t# "MF0;leaf1:MQM9701/U1" enhanced port 0 lid 1 lmc 0
[1]\t"H-0000000000002000"[1](0000000000002000) \t\t# "node01 mlx5_0" lid 2 4xNDR
[2]\t"H-0000000000003000"[1](0000000000003000) \t\t# "node02 mlx5_0" lid 3 4xNDR

vendid=0x2c9
devid=0x1021
sysimgguid=0x2000
caguid=0x2000
Ca\t1 "H-0000000000002000"\t\t# "node01 mlx5_0"
[1](0000000000002000) \t"S-0000000000001000"[1]\t\t# lid 2 lmc 0 "MF0;leaf1:MQM9701/U1" lid 1 4xNDR

vendid=0x2c9
devid=0x1021
sysimgguid=0x3000
caguid=0x3000
Ca\t1 "H-0000000000003000"\t\t# "node02 mlx5_0"
[1](0000000000003000) \t"S-0000000000001000"[2]\t\t# lid 3 lmc 0 "MF0;leaf1:MQM9701/U1" lid 1 4xNDR
"""


def test_small_capture_parses_clean():
    cap = parse(GOOD, "good.out")
    assert cap["warnings"] == []
    assert len(cap["links"]) == 2 and all(l["confirmed"] for l in cap["links"])


def test_garbled_lines_give_numbered_warnings():
    lines = GOOD.splitlines()
    lines[5] = '[1]\t"H-00000000000020'           # truncated in the middle of a port line (line 6)
    lines[12] = "Ca\tbroken line"                   # garbled node line (line 13)
    lines.insert(14, "\x00\x01 binary noise")      # noise (line 15)
    cap = parse("\n".join(lines) + "\n", "bad.out")
    text = "\n".join(cap["warnings"])
    assert "bad.out:6: garbled port line" in text
    assert "bad.out:13: unrecognised line" in text
    assert "bad.out:14: port line outside a Switch/Ca block" in text   # its Ca line was lost
    assert "bad.out:15: unrecognised line" in text
    assert cap["lines"]["unparsed"] == 4
    assert sum(v for k, v in cap["lines"].items() if k != "total") == cap["lines"]["total"]


def test_truncated_capture_reports_dangling_links():
    cut = GOOD[:GOOD.index("vendid=0x2c9\ndevid=0x1021\nsysimgguid=0x3000")]
    cap = parse(cut, "cut.out")
    assert any("cut.out:7: link to 0000000000003000 which has no block of its own" in w for w in cap["warnings"])


def test_duplicate_node_and_port_are_warned():
    dup = GOOD + "\n" + GOOD.split("\n\n")[1] + "\n"
    cap = parse(dup, "dup.out")
    assert any("appears twice (first at line 13)" in w for w in cap["warnings"])


def test_degraded_and_unknown_speed_are_kept():
    # node02's link, written from both ends, at 2xHDR instead of 4xNDR
    text = GOOD.replace('"node02 mlx5_0" lid 3 4xNDR', '"node02 mlx5_0" lid 3 2xHDR')
    text = text.replace('[2]\t\t# lid 3 lmc 0 "MF0;leaf1:MQM9701/U1" lid 1 4xNDR', '[2]\t\t# lid 3 lmc 0 "MF0;leaf1:MQM9701/U1" lid 1 2xHDR')
    cap = parse(text, "slow.out")
    link = [l for l in cap["links"] if "0000000000003000" in (l["a"], l["b"])][0]
    assert (link["width"], link["speed"]) == (2, "HDR")
    assert cap["warnings"] == []
    cap = parse(text.replace("2xHDR", "4xZZR"), "odd.out")
    assert any("unknown link speed 'ZZR'" in w for w in cap["warnings"])


def test_ends_disagreeing_on_rate_are_warned():
    text = GOOD.replace('"node02 mlx5_0" lid 3 4xNDR', '"node02 mlx5_0" lid 3 2xHDR')
    cap = parse(text, "half.out")
    assert any("half.out:21: the two ends of" in w and "disagree" in w for w in cap["warnings"])


def test_not_text_is_a_clear_error():
    import pytest
    from ansible_collections.gpufleet.provision.plugins.module_utils._fabric.ibnetdiscover import IbnetdiscoverParseError
    with pytest.raises(IbnetdiscoverParseError, match="x.out: expected text"):
        parse(b"bytes", "x.out")


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(GOOD.splitlines() + ["", "#", "[", "Switch", "Ca 1 \"H-", "vendid=", "\t", "[9](1) \"S-1\"[1]"]),
                max_size=60))
def test_any_shuffle_of_lines_never_raises_and_accounts_every_line(lines):
    cap = parse("\n".join(lines), "fuzz.out")
    counts = cap["lines"]
    assert sum(v for k, v in counts.items() if k != "total") == counts["total"]
    assert counts["unparsed"] <= len(cap["warnings"])


# The common port line is read by a fast pattern, any other form by the general one: both must
# give what the format says (expected rates written by hand).
ODD_FORMS = [
    ('[1]\t"H-0000000000002000"[1](0000000000002000) \t\t# "node01 mlx5_0" lid 2 4xNDR', (4, "NDR")),
    ('[1]\t"H-0000000000002000"[1](0000000000002000) \t\t# "node01 mlx5_0" lid 2 4xNDR  \r', (4, "NDR")),
    ('   [1]\t"H-0000000000002000"[1] # "node01 mlx5_0" lid 2 2xHDR', (2, "HDR")),
    ('[1]\t"H-0000000000002000"[1] # "node01 mlx5_0"lid 2 4xNDR', (4, "NDR")),               # rate glued to the quote
    ('[1]\t"H-0000000000002000"[1] # "node01 mlx5_0" up lid 2 1xSDR', (1, "SDR")),          # a word before the rate
    ('[1]\t"H-0000000000002000"[1] # "node01 mlx5_0" lid 2 4xNDR (Active)', (None, None)),  # text after the rate
    ('[1]\t"H-0000000000002000"[1] # "node01 mlx5_0" lid 2', (None, None)),
    ('[1]\t"H-0000000000002000"[1]', (None, None)),
    ('[1]\t"H-00000000000020AB"[1] # "node01 mlx5_0" lid 2 4xNDR', (4, "NDR")),
]


def test_port_line_forms_give_the_rate_the_format_says():
    head = GOOD.split("\n[1]", maxsplit=1)[0]
    for line, rate in ODD_FORMS:
        cap = parse(head + "\n" + line + "\n", "odd.out")
        assert cap["lines"]["port"] == 1 and cap["lines"]["unparsed"] == 0, line
        (link,) = cap["links"]
        assert (link["width"], link["speed"]) == rate, line
        assert link["b"] in ("0000000000002000", "00000000000020ab"), line
        assert any("no width/speed" in w for w in cap["warnings"]) == (rate == (None, None)), line


def test_lines_starting_blank_are_all_stripped_first():
    # the parser reads a line as it comes unless it starts with one of these: every character
    # str.strip() would remove must be in the set, or a line starting with it would be misread
    from ansible_collections.gpufleet.provision.plugins.module_utils._fabric.ibnetdiscover import _STRIP_FIRST
    assert set(_STRIP_FIRST) == set(chr(c) for c in range(0x110000) if chr(c).isspace()) | {""}
    cap = parse(GOOD.replace("[1]\t\"H-", "\u3000[1]\t\"H-"), "wide.out")
    assert cap["warnings"] == [] and cap["lines"]["port"] == 4


# The block reader (regular blocks by one match) against the line reader (every line on its own,
# the parser as it was): the same nodes, links, warnings and counts on captures broken at random
# (seeded: the same cases every run), read whole and through files in small pieces.
MUTATION_BITS = ["\x00", '"', "\n", "\r", "\t", " ", "\u3000", "\x85", "#", "[", "]", "(", "=", "x", "0", "F", "Z",
                 "lid ", "lmc 0 ", "vendid=0x2c9\n", "\n\n", "Ca\t1 ", "Switch\t65 ", "\x0b"]


def _mutate(rng, text):
    lines = text.split("\n")
    for edit in range(rng.randint(1, 5)):
        op, i = rng.randrange(7), rng.randrange(len(lines))
        line = lines[i]
        j = rng.randrange(len(line) + 1)
        if op == 0:
            del lines[i]
        elif op == 1:
            lines.insert(i, lines[rng.randrange(len(lines))])              # a line repeated elsewhere
        elif op == 2:
            lines[i] = line[:j]                                              # cut short
        elif op == 3:
            lines[i] = line[:j] + rng.choice(MUTATION_BITS) + line[j:]       # a stray character or line
        elif op == 4:
            lines[i] = line[:j] + line[j + 1:]
        elif op == 5:
            lines[i] = line.replace("\t", " ")
        else:
            lines[i] = line.upper()
    out = "\n".join(lines)
    return out[:rng.randrange(len(out) + 1)] if rng.random() < 0.15 else out


def _both_readers_agree(text, tmp_path, size):
    import io as _io
    from ansible_collections.gpufleet.provision.plugins.module_utils._fabric import ibnetdiscover as ib
    expected = ib.parse_lines(_io.StringIO(text, newline="\n"), "m.out")
    assert ib.parse(text, "m.out") == expected
    path = tmp_path / "m.out"
    path.write_text(text, encoding="utf-8", newline="\n")
    expected = ib.parse_lines(_io.open(str(path), encoding="utf-8", errors="replace", newline="\n"), str(path))
    with _io.open(str(path), encoding="utf-8", errors="replace", newline="\n") as handle:
        assert ib._paused(ib._read_chunks, ib._chunks(handle, size), str(path)) == expected
    return expected


def test_block_reader_equals_line_reader_on_broken_captures(tmp_path):
    import random
    rng = random.Random(15)
    warned = 0
    for case in range(400):
        cap = _both_readers_agree(_mutate(rng, GOOD), tmp_path, rng.choice([40, 97, 300, 4096]))
        warned += bool(cap["warnings"])
    assert warned > 200      # the cases do break the capture


# Each branch of the block reader, by one edit of the small capture: (what, replaced, replacement)
EDITS = [
    ("adapter port above its count", '[1](0000000000002000) \t"S', '[3](0000000000002000) \t"S'),
    ("adapter port at an unknown speed", 'lid 1 4xNDR\n\nvendid=0x2c9\ndevid=0x1021\nsysimgguid=0x3000',
     'lid 1 4xNDRX\n\nvendid=0x2c9\ndevid=0x1021\nsysimgguid=0x3000'),
    ("switch port above its count", '[2]\t"H-0000000000003000"', '[66]\t"H-0000000000003000"'),
    ("switch port listed twice", '[2]\t"H-0000000000003000"', '[1]\t"H-0000000000003000"'),
    ("switch port at an unknown speed", '"node02 mlx5_0" lid 3 4xNDR', '"node02 mlx5_0" lid 3 4xQQR'),
    ("ends disagree on the rate", '"node02 mlx5_0" lid 3 4xNDR', '"node02 mlx5_0" lid 3 2xHDR'),
    ("link listed twice from one end", '[2]\t"H-0000000000003000"[1](0000000000003000)', '[2]\t"H-0000000000002000"[1](0000000000002000)'),
    ("adapter listed twice", 'caguid=0x3000\nCa\t1 "H-0000000000003000"', 'caguid=0x3000\nCa\t1 "H-0000000000002000"'),
    ("description over a newline", '# "node01 mlx5_0"\n', '# "node01\nmlx5_0"\n'),
    ("port description over a newline", '# "node01 mlx5_0" lid 2', '# "node01\n mlx5_0" lid 2'),
    ("no blank line between blocks", '4xNDR\n\nvendid=0x2c9\ndevid=0x1021\nsysimgguid=0x2000', '4xNDR\nvendid=0x2c9\ndevid=0x1021\nsysimgguid=0x2000'),
    ("a switch without ports", '[1]\t"H-0000000000002000"[1](0000000000002000) \t\t# "node01 mlx5_0" lid 2 4xNDR\n'
     '[2]\t"H-0000000000003000"[1](0000000000003000) \t\t# "node02 mlx5_0" lid 3 4xNDR\n', ''),
    ("an adapter without its port", '[1](0000000000003000) \t"S-0000000000001000"[2]\t\t# lid 3 lmc 0 "MF0;leaf1:MQM9701/U1" lid 1 4xNDR\n', ''),
    ("an adapter with two ports", 'lid 1 4xNDR\n\nvendid=0x2c9\ndevid=0x1021\nsysimgguid=0x3000',
     'lid 1 4xNDR\n[2](0000000000002001) \t"S-0000000000001000"[9]\t\t# lid 2 lmc 0 "MF0;leaf1:MQM9701/U1" lid 1 4xNDR\n'
     '\nvendid=0x2c9\ndevid=0x1021\nsysimgguid=0x3000'),
    ("a system GUID in capitals", 'sysimgguid=0x2000\ncaguid=0x2000', 'sysimgguid=0xABC\ncaguid=0x2000'),
    ("a router", 'caguid=0x3000\nCa\t1 "H-', 'rtguid=0x3000\nRt\t1 "R-'),
]


def test_block_reader_equals_line_reader_on_each_edit(tmp_path):
    good = GOOD + "\n" + GOOD.replace("1000", "1001").replace("2000", "2001").replace("3000", "3001")
    for what, old, new in EDITS:
        assert old in good, what
        for size in (60, 4096):
            cap = _both_readers_agree(good.replace(old, new, 1), tmp_path, size)
        assert cap != _both_readers_agree(good, tmp_path, 4096), what


def test_a_capture_of_another_form_is_read_by_lines_the_same(tmp_path):
    # CRLF line ends: no block is regular; after many in a row the rest of a piece goes to the line
    # reader at once, and the regular blocks after it are read the same
    text = (GOOD + "\n").replace("\n", "\r\n") * 12 + GOOD
    cap = _both_readers_agree(text, tmp_path, 1 << 22)
    assert cap["lines"]["node"] == 39 and len(cap["links"]) == 2
    assert _both_readers_agree(text, tmp_path, 500) == cap


def test_block_reader_equals_line_reader_on_the_real_capture_broken(realdata, tmp_path):
    import random
    rng = random.Random(16)
    with open(os.path.join(realdata, SUPERPOD)) as handle:
        text = handle.read()
    for case in range(60):
        _both_readers_agree(_mutate(rng, text), tmp_path, rng.choice([1000, 20000, 1 << 22]))


def test_regular_blocks_do_not_go_through_the_line_reader(realdata, monkeypatch):
    # the real capture: only its 4 comment lines and the blank line after them are read line by line
    from ansible_collections.gpufleet.provision.plugins.module_utils._fabric import ibnetdiscover as ib
    feed = ib._LineReader.feed
    fed = []

    def counting(self, lines):
        lines = list(lines)
        fed.extend(lines)
        return feed(self, lines)
    monkeypatch.setattr(ib._LineReader, "feed", counting)
    cap = parse_file(os.path.join(realdata, SUPERPOD))
    assert len(fed) == 5 and all(line.startswith("#") for line in fed[:4]) and fed[4] == "\n"
    assert cap["lines"]["node"] == 622 and cap["warnings"] == []


def test_pieces_are_whole_lines_ending_after_a_blank_line_when_they_hold_one():
    import io as _io
    from ansible_collections.gpufleet.provision.plugins.module_utils._fabric.ibnetdiscover import _chunks
    text = GOOD + "\n" + GOOD
    for size in (50, 200, 1000):
        pieces = list(_chunks(_io.StringIO(text, newline="\n"), size))
        assert "".join(pieces) == text
        assert all(piece.endswith("\n") and ("\n\n" not in piece or piece.endswith("\n\n")) for piece in pieces)
    # 1000 characters hold the first three blocks (the first GOOD and the blank line after it)
    assert list(_chunks(_io.StringIO(text, newline="\n"), 1000))[0] == GOOD + "\n"


# --- a capture that holds no whole fabric (sniff, capture_problem) ---------------------------------

def _problem(path):
    from ansible_collections.gpufleet.provision.plugins.module_utils._fabric.ibnetdiscover import capture_problem, sniff
    return sniff(str(path)) or capture_problem(str(path), parse_file(str(path)))


def test_the_real_captures_hold_a_whole_fabric(realdata):
    # the SuperPOD segment, and the GB200 node's own view: one adapter, its port listing no peer
    assert _problem(os.path.join(realdata, SUPERPOD)) is None
    assert _problem(os.path.join(realdata, GB200)) is None


def test_empty_binary_and_html_captures_hold_no_fabric(tmp_path):
    cases = {
        "empty.out": (b"", "empty (0 bytes)"),
        "blank.out": (b"\n\n  \n", "empty (only blank lines)"),
        "binary.out": (b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)), "not text (NUL bytes at offset 7"),
        "latin1.out": (b"vendid=0x2c9\n\xe9\xe8\xff garbage " * 3, "not text (9 of the first 75 characters are not UTF-8"),
        "gzip.out": (b"\x1f\x8b\x08\x08\xc3\x9a\x8ff\x02\x03superpod.out\x01\xed\xbd\xdb\x92", "not text"),
        "error.html": (b"<!DOCTYPE html>\n<html><body><h1>502 Bad Gateway</h1></body></html>\n",
                       "no switch or HCA records (2 lines, none of them a Switch or Ca line: not ibnetdiscover "
                       "output; it starts with '<!DOCTYPE html>')"),
        "comments.out": (b"#\n# Topology file: generated on Wed Aug  6 16:11:23 2025\n#\n", "no switch or HCA records"),
    }
    for name, (data, why) in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        assert _problem(path).startswith(why), name


def test_one_byte_that_is_not_utf8_is_a_garbled_line_not_a_binary(realdata, tmp_path):
    with open(os.path.join(realdata, SUPERPOD), "rb") as handle:
        data = handle.read()
    path = tmp_path / "latin1-description.out"
    path.write_bytes(data.replace(b"a08-p1-dgx-04-c01 mlx5_5", b"a08-p1-dgx-04-c\xe9 mlx5_5", 1))
    assert _problem(path) is None


def test_a_capture_cut_anywhere_is_a_truncated_record(realdata, tmp_path):
    """The SuperPOD capture cut at hand-picked places (line numbers from `grep -n`): each is refused
    with the reason that applies; cut after its last port line it is whole again."""
    with open(os.path.join(realdata, SUPERPOD), "rb") as handle:
        data = handle.read()
    lines = data.split(b"\n")          # lines[i] is line i + 1 of the file
    path = tmp_path / "cut.out"

    def cut(n_lines, extra=b""):
        path.write_bytes(b"\n".join(lines[:n_lines]) + b"\n" + extra)
        return _problem(path)

    # mid-line: line 11 (the first switch's port 1) cut after 20 characters
    path.write_bytes(b"\n".join(lines[:10]) + b"\n" + lines[10][:20])
    assert _problem(path).startswith("truncated record: the last line is cut (no newline at the end of the file")
    # after the first Switch line (line 10): a switch that lists no port
    assert cut(10).startswith("truncated record: the last record, switch 2c5eab0300b87b40 at line 10, lists no port")
    # after port 3 of the first switch: the adapters it links to have no record of their own
    assert "which has no record of its own" in cut(13)
    # after the header lines of the last record (lines 5958-5961), before its Ca line
    assert cut(5961).startswith("truncated record: the file ends with the header of a record")
    # after the last Ca line (5963), before its one port line: the leaf lists that port, it does not
    assert cut(5963).startswith("truncated record: the last record, ca e09d730300156ff6 at line 5963, does not list "
                                "its port 1")
    # whole: up to the last port line, with or without the blank line after it
    assert cut(5964) is None and cut(5965) is None
