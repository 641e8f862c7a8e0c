"""Writers: Slurm hostlists and topology files, Kubernetes labels, NCCL settings, summary, file plans."""
import json
import os
import re
import sys

from ansible_collections.gpufleet.provision.plugins.module_utils._fabric import outputs as out
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric import model as _fabric
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric.ibnetdiscover import parse

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "..", "lab", "fabric"))
import ibnetgen  # noqa: E402

LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def expand(expr):
    """Independent hostlist expander (the inverse of out.hostlist), for round trips."""
    names = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?", expr):
        m = re.match(r"^(.*)\[(.*)\]$", part)
        if not m:
            names.append(part)
            continue
        for rng in m.group(2).split(","):
            lo, hi = (rng.split("-") + [""])[:2]
            for n in range(int(lo), int(hi or lo) + 1):
                names.append("%s%0*d" % (m.group(1), len(lo), n))
    return names


def test_hostlist():
    assert out.hostlist(["gpu001", "gpu002", "gpu003", "gpu007", "x", "gpu010"]) == "gpu[001-003,007,010],x"
    assert out.hostlist(["a05-c01", "a05-c03", "a05-c04", "localhost"]) == "a05-c[01,03-04],localhost"
    assert out.hostlist(["n9", "n10", "n11"]) == "n9,n[10-11]"   # widths differ: not one range
    names = ["su%d-b%d" % (s, b) for s in range(1, 4) for b in range(1, 12)] + ["odd", "gpu0099"]
    assert sorted(expand(out.hostlist(names))) == sorted(names)


def doc_with_status(**kw):
    """gpu00002 fails the gate; gpu00008 passes it but its rail-0 cable sits on the rail-1 leaf."""
    fab, info = ibnetgen.rail_fabric(sus=2, nodes_per_su=4, rails=2)
    fab.move(info["nic"][("gpu00008", 0)], info["leaf"][(2, 1)], 30)
    nodes = {"gpu00001": {"report": {"status": "pass"}}, "gpu00002": {"report": {"status": "fail"}},
             "gpu00005": {"report": {"status": "pass"}}, "gpu00008": {"report": {"status": "pass"}}}
    return _fabric.analyze([parse(fab.text(), "/x/seg1.out")], nodes=nodes, **kw)


GPU8_IDS = ["miscabled_rail:gpu00008/mlx5_0", "missing_rail:gpu00008/rail0"]


def slurm_lines(text):
    return [l for l in text.splitlines() if l and not l.startswith("#")]


def test_topology_tree_only_green_and_consistent():
    doc = doc_with_status()
    text = out.topology_tree(doc)
    lines = slurm_lines(text)
    switches = dict(re.match(r"SwitchName=(\S+) (\w+)=(\S+)", l).group(1, 3) for l in lines)
    node_parent = {}
    for name, children in switches.items():
        if "Nodes=" in [l for l in lines if l.startswith("SwitchName=%s " % name)][0]:
            for host in expand(children):
                assert host not in node_parent
                node_parent[host] = name
    # gpu00008 passed the gate, but the fabric quarantines it, and says why.
    assert sorted(node_parent) == ["gpu00001", "gpu00005"]
    assert "# quarantined by the fabric: gpu00008 (%s)" % ", ".join(GPU8_IDS) in text.splitlines()
    for host, block in node_parent.items():
        assert doc["nodes"][host]["block"] == block
    assert expand(switches["su2"]) == [node_parent["gpu00005"]]
    assert expand(switches["fabric"]) == ["su1", "su2"]
    # The operator accepts the miscabling: gpu00008 is green again, in a block of its own.
    accepted = doc_with_status(accept=["*:gpu00008/*"])
    assert accepted["nodes"]["gpu00008"]["status"] == "green"
    assert sorted(accepted["nodes"]["gpu00008"]["accepted"]) == GPU8_IDS
    lines = slurm_lines(out.topology_tree(accepted))
    parents = dict((h, l.split()[0][len("SwitchName="):]) for l in lines if " Nodes=" in l for h in expand(l.split("Nodes=")[1]))
    assert sorted(parents) == ["gpu00001", "gpu00005", "gpu00008"] and parents["gpu00005"] != parents["gpu00008"]
    every = slurm_lines(out.topology_tree(doc, ("green", "quarantined", "unknown")))
    listed = [h for l in every if " Nodes=" in l for h in expand(l.split("Nodes=")[1])]
    assert sorted(listed) == ["gpu%05d" % i for i in range(1, 9)]


def test_topology_block():
    doc = doc_with_status()
    lines = slurm_lines(out.topology_block(doc, ("green",), [2, 4]))
    blocks = [re.match(r"BlockName=(\S+) Nodes=(\S+)", l).groups() for l in lines if l.startswith("BlockName")]
    assert sorted(h for block in blocks for h in expand(block[1])) == ["gpu00001", "gpu00005"]
    assert lines[-1] == "BlockSizes=2,4"
    quarantined = out.topology_block(doc, ("quarantined",))
    assert "BlockName=su1-b1 Nodes=gpu00002" in quarantined
    assert "# quarantined by the fabric, included as asked: gpu00008 (%s)" % ", ".join(GPU8_IDS) in quarantined
    none = _fabric.analyze([parse(ibnetgen.rail_fabric()[0].text(), "s.out")])
    assert slurm_lines(out.topology_tree(none)) == [] and "nothing to schedule" in out.topology_tree(none)


def test_labels_are_valid_kubernetes_labels():
    doc = doc_with_status()
    doc["nodes"]["gpu00001"]["su"] = "SU 1/with spaces and a very long name that goes past sixty-three characters!!"
    for host in doc["nodes"]:
        labels = out.labels(doc, host)
        for key, value in labels.items():
            assert LABEL_KEY.match(key) and len(key.split("/")[-1]) <= 63, key
            assert LABEL_VALUE.match(value) and len(value) <= 63, (key, value)
    lab = out.labels(doc, "gpu00005")
    assert lab["fabric.gpufleet.io/status"] == "green"
    assert lab["fabric.gpufleet.io/rail0-leaf"] == "leaf-r0-su2"
    assert lab["fabric.gpufleet.io/block"] == doc["nodes"]["gpu00005"]["block"]


def test_nccl_rail_order_and_exact_names():
    fab, info = ibnetgen.rail_fabric(sus=1, nodes_per_su=2, rails=3, hca="mlx5_%d")
    storage = fab.ca("gpu00001 mlx5_10")
    fab.link(info["leaf"][(1, 0)], 30, storage, 1)
    facts = {"nics": [{"name": "mlx5_2", "node_desc": "gpu00001 mlx5_0", "role": "rail", "rail": 2},
                      {"name": "mlx5_1", "node_desc": "gpu00001 mlx5_1", "role": "rail", "rail": 0},
                      {"name": "mlx5_0", "node_desc": "gpu00001 mlx5_2", "role": "rail", "rail": 1},
                      {"name": "mlx5_10", "node_desc": "gpu00001 mlx5_10", "role": "non-rail", "rail": None}]}
    doc = _fabric.analyze([parse(fab.text(), "s.out")], nodes={"gpu00001": {"facts": facts}})
    text, why = out.nccl_env(doc, "gpu00001")
    assert why is None
    assert "NCCL_IB_HCA==mlx5_1:1,mlx5_0:1,mlx5_2:1\n" in text
    text, why = out.nccl_env(doc, "gpu00002")
    assert "NCCL_IB_HCA==mlx5_0:1,mlx5_1:1,mlx5_2:1\n" in text
    fab2 = ibnetgen.rail_fabric(sus=1, nodes_per_su=1, rails=2, hca="HCA-%d")[0]
    doc2 = _fabric.analyze([parse(fab2.text(), "s.out")])
    text, why = out.nccl_env(doc2, "gpu00001")
    assert text is None and "adapter HCA-0 has no RDMA device name" in why


def test_render_plan_apply_idempotent(tmp_path):
    doc = doc_with_status()
    files, notes = out.render(doc, per_node_files=True)
    assert notes == []
    assert json.loads(files["fabric.json"].text()) == json.loads(json.dumps(doc))   # the stream is the document
    dest = str(tmp_path / "out")
    changes, stale = out.plan_files(dest, files)
    assert len(changes) == len(files) and stale == []
    out.apply_files(dest, changes, stale, files)
    assert out.plan_files(dest, files) == ([], [])
    # Kept: a changed stream is encoded once and its bytes kept for apply_files; nothing is written
    # by the plan, and apply_files writes only the changed files, each by fs.atomic_write.
    other = doc_with_status()
    other["nodes"]["gpu00001"]["status"] = "unknown"
    other_files = out.render(other, per_node_files=True)[0]
    before = sorted(os.listdir(dest))
    changes, stale = out.plan_files(dest, other_files, keep=True)
    streamed = [c for c in changes if isinstance(c[2], tuple)]
    assert [c[0] for c in streamed] == ["fabric.json"] and streamed[0][2][1] == other_files["fabric.json"].text().encode()
    assert sorted(os.listdir(dest)) == before
    assert "labels/gpu00002.json" not in [c[0] for c in changes]
    untouched = os.stat(os.path.join(dest, "labels", "gpu00002.json")).st_mtime_ns
    out.apply_files(dest, changes, stale, other_files)
    assert out.plan_files(dest, other_files) == ([], []) and sorted(os.listdir(dest)) == before
    assert os.stat(os.path.join(dest, "labels", "gpu00002.json")).st_mtime_ns == untouched   # not rewritten
    out.apply_files(dest, *out.plan_files(dest, files), files=files)
    with open(os.path.join(dest, "nccl", "old-host.env"), "w") as handle:
        handle.write("x")
    with open(os.path.join(dest, "nccl", "README"), "w") as handle:
        handle.write("not ours")
    changes, stale = out.plan_files(dest, files)
    assert changes == [] and stale == ["nccl/old-host.env"]
    out.apply_files(dest, changes, stale)
    assert sorted(os.listdir(os.path.join(dest, "nccl"))) == ["README"] + sorted("%s.env" % h for h in doc["nodes"])
    # Same input, same bytes: nothing in the output depends on time or dict order.
    again = out.render(doc_with_status(), per_node_files=True)[0]
    assert again["fabric.json"].text() == files["fabric.json"].text()
    assert dict((k, v) for k, v in again.items() if k != "fabric.json") == dict((k, v) for k, v in files.items() if k != "fabric.json")
    # Without per-node files, the earlier ones are stale (labels.json and nccl.json replace them).
    changes, stale = out.plan_files(dest, out.render(doc)[0])
    assert changes == [] and sorted(stale) == sorted(["labels/%s.json" % h for h in doc["nodes"]] + ["nccl/%s.env" % h for h in doc["nodes"]])


def test_one_file_per_fabric_for_labels_and_nccl():
    doc = doc_with_status()
    files = out.render(doc)[0]
    assert not [f for f in files if "/" in f]
    listing = json.loads(files["labels.json"])
    assert listing["kind"] == "List" and [i["kind"] for i in listing["items"]] == ["Node"] * 8
    by_name = dict((i["metadata"]["name"], i["metadata"]) for i in listing["items"])
    assert by_name["gpu00008"]["labels"]["fabric.gpufleet.io/status"] == "quarantined"
    assert by_name["gpu00008"]["labels"]["fabric.gpufleet.io/quarantined-by"] == "fabric"
    assert by_name["gpu00002"]["labels"]["fabric.gpufleet.io/quarantined-by"] == "gate"
    assert by_name["gpu00008"]["annotations"] == {"fabric.gpufleet.io/quarantine": ",".join(GPU8_IDS)}
    assert "annotations" not in by_name["gpu00001"]
    assert json.loads(files["nccl.json"])["gpu00001"] == {"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1"}


def test_default_host_names_never_reach_a_scheduler_file():
    # Node facts map adapters to an inventory host called "localhost": still no Slurm or Kubernetes entry.
    fab, info = ibnetgen.rail_fabric(sus=1, nodes_per_su=2, rails=2)
    fab.set_desc(info["nic"][("gpu00002", 0)], "ubuntu mlx5_0")
    fab.set_desc(info["nic"][("gpu00002", 1)], "ubuntu mlx5_1")
    facts = {"nics": [{"name": "mlx5_%d" % r, "node_guid": info["nic"][("gpu00002", r)], "rail": r} for r in range(2)]}
    doc = _fabric.analyze([parse(fab.text(), "s.out")], nodes={"localhost": {"report": {"status": "pass"}, "facts": facts}})
    assert "localhost" in doc["nodes"] and doc["nodes"]["localhost"]["status"] == "green"
    files = out.render(doc, ("green", "quarantined", "unknown"), per_node_files=True)[0]
    for name in ("topology.conf", "topology-block.conf", "labels.json", "nccl.json"):
        assert "localhost" not in files[name] and "ubuntu" not in files[name], name
        assert "gpu00001" in files[name]
    assert not [f for f in files if "localhost" in f]


def test_summary_mentions_every_kind_and_block():
    doc = doc_with_status()
    text = out.summary_text(doc)
    assert "Status: green 2, quarantined 2, unknown 4 (1 quarantined by the fabric)" in text
    assert "miscabled_rail" in text and "gpu00008" in text
    for block in doc["blocks"]:
        assert "%s=%d" % (block["name"], block["size"]) in text
    assert len(text.splitlines()) < 40


def test_fabric_json_matches_the_published_schema(realdata):
    import jsonschema  # requirements-test.txt
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "..", "docs", "fabric.schema.json")) as handle:
        schema = json.load(handle)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    real = _fabric.analyze([parse(open(os.path.join(realdata, "ibnetdiscover", "superpod-h100-example.out")).read(), "real.out")])
    for doc in (doc_with_status(), real):
        files = out.render(doc)[0]
        loaded = json.loads(files["fabric.json"].text())
        errors = sorted(validator.iter_errors(loaded), key=lambda e: list(e.path))
        assert errors == [], errors[0].message
    broken = json.loads(out.render(doc_with_status())[0]["fabric.json"].text())
    broken["anomalies"][0]["kind"] = "made_up"
    assert not validator.is_valid(broken)


def test_block_sizes_follow_slurms_rules():
    for good in ([], [4], [4, 8, 16], [18, 36, 144], [1, 32768]):
        out.check_block_sizes(good)
    cases = {(-4, 0): "block_sizes: -4 is not a positive whole number of nodes",
             (0,): "block_sizes: 0 is not a positive whole number",
             (4, True): "block_sizes: True is not a positive whole number",
             (4, 12): "block_sizes: 12 is not the planning base block size 4 (the first one) times a power of two",
             (8, 4): "block_sizes: 4 is not the planning base block size 8",
             (1, 65536): "block_sizes: 65536 is not the planning base block size 1 (the first one) times a power of two up to 2^15",
             (4, 8, 8): "block_sizes: a size is given twice"}
    for sizes, message in cases.items():
        try:
            out.check_block_sizes(list(sizes))
        except _fabric.FabricError as exc:
            assert str(exc).startswith(message), (sizes, str(exc))
        else:
            raise AssertionError("accepted %r" % (sizes,))
    doc = doc_with_status()
    try:
        out.topology_block(doc, block_sizes=[-4, 0])
    except _fabric.FabricError as exc:
        assert "block_sizes: -4" in str(exc)
    else:
        raise AssertionError("BlockSizes=-4,0 written")


def test_a_new_inventory_that_lost_most_hosts_is_refused(tmp_path):
    dest = str(tmp_path)
    seen = {"segments": ["s1"]}
    assert out.previous_hosts(dest) == (None, None)                   # no inventory in place: nothing to compare
    # e is known to the gate only (not_in_fabric): no host of the fabric, not counted
    (tmp_path / "fabric.json").write_text(json.dumps({"schema": 1, "nodes": dict(
        [(h, seen) for h in "abcd"] + [("e", {"segments": []})])}))
    previous, warning = out.previous_hosts(dest)
    assert previous == {"a", "b", "c", "d"} and warning is None
    out.check_shrink(dest, previous, {"nodes": {"a": seen, "b": seen}})               # half gone: written
    for nodes in ({"a": seen}, dict((h, {"segments": []}) for h in "abcd") | {"a": seen}):
        # 3 of 4 gone; also when the gate still knows them (reports) but no capture shows them
        try:
            out.check_shrink(dest, previous, {"nodes": nodes})
        except _fabric.FabricError as exc:
            assert str(exc) == ("%s: the new inventory has 1 host(s) in the fabric, 1 of the 4 of the one in place (3 gone: "
                                "b, c, d); a failed or partial capture? Nothing written. Set allow_shrink: true if the "
                                "fabric really shrank" % os.path.join(dest, "fabric.json"))
        else:
            raise AssertionError("a shrink to a quarter was accepted")
    out.check_shrink(dest, previous, {"nodes": {"a": seen}}, allow=True)
    out.check_shrink(dest, previous, {"nodes": dict((h, seen) for h in "abcdefgh")})    # grown: fine
    for text, why in (("{not json", "not readable as an earlier fabric.json"), ("[1, 2]", "no `nodes` object"),
                      ("\xff\xfe", "not readable as an earlier fabric.json")):
        (tmp_path / "fabric.json").write_bytes(text.encode("latin-1"))
        previous, warning = out.previous_hosts(dest)
        assert previous is None and why in warning


def test_a_file_in_place_that_is_not_utf8_is_rewritten(tmp_path):
    doc = doc_with_status()
    files = out.render(doc)[0]
    dest = str(tmp_path)
    out.apply_files(dest, *out.plan_files(dest, files), files=files)
    (tmp_path / "topology.conf").write_bytes(b"\xff\xfe broken")
    changes, stale = out.plan_files(dest, files)
    assert [c[0] for c in changes] == ["topology.conf"] and changes[0][1] == "\ufffd\ufffd broken"
    out.apply_files(dest, changes, stale, files)
    assert (tmp_path / "topology.conf").read_text() == files["topology.conf"]
    assert not [n for n in os.listdir(dest) if n.endswith((".tmp", ".gpufleet-new"))]
