"""Fabric model: what the real SuperPOD capture shows, and one small hand-made fabric per anomaly kind.

Expectations on the real capture were counted by hand with grep/awk (see the comments), not taken
from the model's output. Switch names there read <rack>-P1-IBLEAF-<rail>-<su>: IBLEAF-01-05 carries
HCA-1 of the b05-...-dgx-05 hosts. A09-P1-IBLEAF-03-01 (rail 3 of SU 1) is absent.
"""
import os
import sys

import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._fabric import model as _fabric
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric.ibnetdiscover import parse, parse_file

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "..", "lab", "fabric"))
import ibnetgen  # noqa: E402

SUPERPOD = os.path.join("ibnetdiscover", "superpod-h100-example.out")


@pytest.fixture(scope="module")
def real_doc():
    # tests/fixtures/realdata (the conftest's realdata fixture is per test; this one is per module)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "fixtures", "realdata", SUPERPOD)
    return _fabric.analyze([parse_file(path)])


def kinds(doc, kind):
    return [a for a in doc["anomalies"] if a["kind"] == kind]


# ---------------------------------------------------------------- the real capture

def test_real_tiers(real_doc):
    # grep '^Switch' | sed name: 31 IBLEAF + 9 IBSPINE names.
    tiers = dict((n, s["tier"]) for n, s in real_doc["switches"].items())
    assert sorted(n for n, t in tiers.items() if t == "spine") == [
        "A10-P1-IBSPINE-0%d" % i for i in range(1, 5)] + ["B10-P1-IBSPINE-0%d" % i for i in range(5, 10)]
    leaves = sorted(n for n, t in tiers.items() if t == "leaf")
    expected = sorted("%s-P1-IBLEAF-%02d-%02d" % ("A09" if su <= 4 else "B09", rail, su)
                      for su in range(1, 9) for rail in range(1, 5) if (rail, su) != (3, 1))
    assert leaves == expected


def test_real_rails_from_hca_names(real_doc):
    # awk over switch blocks: IBLEAF-01-* carry HCA-1 (mlx5_0 in the a08 rack), -02 HCA-2/mlx5_1,
    # -03 HCA-5/mlx5_4, -04 HCA-6/mlx5_5.
    rails = dict((r["rail"], r["names"]) for r in real_doc["rails"])
    assert rails == {0: ["HCA-1", "mlx5_0"], 1: ["HCA-2", "mlx5_1"], 2: ["HCA-5", "mlx5_4"], 3: ["HCA-6", "mlx5_5"]}
    for r in real_doc["rails"]:
        assert all("IBLEAF-%02d-" % (r["rail"] + 1) in leaf for leaf in r["leaves"])
    assert len([l for r in real_doc["rails"] for l in r["leaves"]]) == 31


def test_real_scalable_units(real_doc):
    # One SU per rack prefix a05..a08, b05..b08; SU k owns the IBLEAF-*-0k leaves.
    racks = ["a05-p1-dgx-01", "a06-p1-dgx-02", "a07-p1-dgx-03", "a08-p1-dgx-04",
             "b05-p1-dgx-05", "b06-p1-dgx-06", "b07-p1-dgx-07", "b08-p1-dgx-08"]
    # host counts per rack: HCA lines per rack / HCAs per host (a05: 30/3, a06 44/4, a07 72/4, ...)
    counts = [10, 11, 18, 17, 18, 15, 16, 14]
    assert [s["name"] for s in real_doc["sus"]] == ["su%d" % i for i in range(1, 9)]
    for i, su in enumerate(real_doc["sus"]):
        dgx = [h for h in su["hosts"] if h.startswith(racks[i])]
        assert len(dgx) == counts[i]
        assert all(leaf.endswith("-%02d" % (i + 1)) for leaf in su["leaves"].values())
        assert len(su["spines"]) == 9
    assert sorted(real_doc["sus"][0]["leaves"]) == ["0", "1", "3"]
    # Adapters named "localhost ..." / "ubuntu ..." name no host: they are anomalies, never hosts.
    assert all(len(su["hosts"]) == counts[i] for i, su in enumerate(real_doc["sus"]))


def test_real_nodes(real_doc):
    # 119 DGX hosts; "localhost" and "ubuntu" are default names, not hosts; the UFM server
    # B11-P1-CUFM-02 is not a compute node.
    nodes = real_doc["nodes"]
    assert len(nodes) == 119
    assert not set(nodes) & {"B11-P1-CUFM-02", "localhost", "ubuntu"}
    # no gate report: unknown, except the 10 a05 hosts without rail 2 and the swapped-pair host,
    # which the fabric quarantines.
    quarantined = sorted(h for h, n in nodes.items() if n["status"] == "quarantined")
    assert quarantined == sorted(["a05-p1-dgx-01-c%02d" % i for i in (1, 3, 4, 9, 12, 13, 14, 15, 17, 18)]
                                 + ["b08-p1-dgx-08-c01"])
    assert all(n["status"] == "unknown" for h, n in nodes.items() if h not in quarantined)
    assert sorted(nodes["b08-p1-dgx-08-c01"]["quarantine"]) == [
        "miscabled_rail:b08-p1-dgx-08-c01/HCA-5", "miscabled_rail:b08-p1-dgx-08-c01/HCA-6"]
    assert nodes["a05-p1-dgx-01-c01"]["quarantine"] == ["missing_rail:a05-p1-dgx-01-c01/rail2"]
    assert nodes["a05-p1-dgx-01-c01"]["quarantined_by"] == ["fabric"]
    c01 = nodes["a08-p1-dgx-04-c01"]
    assert [(r["rail"], r["hca"], r["leaf"], r["port"]) for r in c01["rails"]] == [
        (0, "mlx5_0", "A09-P1-IBLEAF-01-04", 1), (1, "mlx5_1", "A09-P1-IBLEAF-02-04", 1),
        (2, "mlx5_4", "A09-P1-IBLEAF-03-04", 1), (3, "mlx5_5", "A09-P1-IBLEAF-04-04", 1)]


def test_real_unnamed_hcas(real_doc):
    # 69 adapters read "MT4129 ConnectX7   Mellanox Technologies"; per leaf (awk): 7 on each SU1 leaf,
    # 5 on each SU2 leaf, 3 on SU6 and SU8 leaves, 1 on SU7 leaves, none in SU3-5.
    items = kinds(real_doc, "unnamed_hca")
    assert len(items) == 69
    per_su = {}
    for a in items:
        su = int(a["switch"][-2:])
        per_su[su] = per_su.get(su, 0) + 1
    assert per_su == {1: 21, 2: 20, 6: 12, 7: 4, 8: 12}
    assert all(a["host"] is None and isinstance(a["port"], int) for a in items)


def test_real_non_compute(real_doc):
    # 40 SHARP aggregation nodes on port 65 of every switch; the UFM server's two HCAs on
    # B09-P1-IBLEAF-03-08 and -04-08 port 22.
    items = kinds(real_doc, "non_compute")
    sharp = [a for a in items if a["role"] == "sharp"]
    ufm = [a for a in items if a["role"] == "ufm"]
    assert len(sharp) == 40 and all(a["port"] == 65 for a in sharp)
    assert sorted((a["host"], a["hca"], a["switch"], a["port"]) for a in ufm) == [
        ("B11-P1-CUFM-02", "mlx5_0", "B09-P1-IBLEAF-03-08", 22),
        ("B11-P1-CUFM-02", "mlx5_1", "B09-P1-IBLEAF-04-08", 22)]


def test_real_suspicious_hostnames(real_doc):
    # grep '"localhost\|"ubuntu': localhost HCA-1/2/6 on port 10 of SU1 leaves, ubuntu mlx5_0/1 on port 21.
    # They name no host: keyed by GUID, with the description and where they sit.
    got = sorted((a["host"], a["desc"], a["switch"], a["port"], a["su"], a["rail"])
                 for a in kinds(real_doc, "suspicious_hostname"))
    assert got == [
        (None, "localhost HCA-1", "A09-P1-IBLEAF-01-01", 10, "su1", 0), (None, "localhost HCA-2", "A09-P1-IBLEAF-02-01", 10, "su1", 1),
        (None, "localhost HCA-6", "A09-P1-IBLEAF-04-01", 10, "su1", 3),
        (None, "ubuntu mlx5_0", "B09-P1-IBLEAF-03-08", 21, "su8", 2), (None, "ubuntu mlx5_1", "B09-P1-IBLEAF-04-08", 21, "su8", 3)]
    assert sorted(a["id"] for a in kinds(real_doc, "suspicious_hostname")) == [
        "suspicious_hostname:" + g for g in ("c470bd0300a49432", "c470bd0300a4943e", "e09d73030033dc5c",
                                             "e09d73030033dc60", "e09d73030037317c")]


def test_real_miscabled_rails(real_doc):
    # b08-p1-dgx-08-c01: HCA-5 on the rail-4 leaf IBLEAF-04-08 port 1 and HCA-6 on IBLEAF-03-08 port 1
    # (swapped pair). The "ubuntu" adapters name no host, so no rail of theirs is judged.
    got = sorted((a["host"], a["hca"], a["switch"], a["port"]) for a in kinds(real_doc, "miscabled_rail"))
    assert got == [
        ("b08-p1-dgx-08-c01", "HCA-5", "B09-P1-IBLEAF-04-08", 1), ("b08-p1-dgx-08-c01", "HCA-6", "B09-P1-IBLEAF-03-08", 1)]


def test_real_missing_rails(real_doc):
    # The SU1 leaf for rail 2 is absent: su1 itself and its 10 a05 hosts lack rail 2.
    items = kinds(real_doc, "missing_rail")
    su_level = [a for a in items if a["host"] is None]
    assert [(a["su"], a["rail"]) for a in su_level] == [("su1", 2)]
    per_host = sorted((a["host"], a["rail"]) for a in items if a["host"])
    a05 = ["a05-p1-dgx-01-c%02d" % i for i in (1, 3, 4, 9, 12, 13, 14, 15, 17, 18)]
    assert per_host == sorted((h, 2) for h in a05)


def test_real_missing_uplinks(real_doc):
    # awk: leaf-spine pairs with fewer than the usual 2 cables (0 = no cable at all).
    expected = {
        ("A09-P1-IBLEAF-01-01", "A10-P1-IBSPINE-04", 1), ("A09-P1-IBLEAF-01-02", "A10-P1-IBSPINE-01", 0),
        ("A09-P1-IBLEAF-01-02", "A10-P1-IBSPINE-04", 0), ("A09-P1-IBLEAF-01-03", "A10-P1-IBSPINE-04", 0),
        ("A09-P1-IBLEAF-02-03", "A10-P1-IBSPINE-01", 1), ("A09-P1-IBLEAF-02-03", "B10-P1-IBSPINE-06", 0),
        ("A09-P1-IBLEAF-02-04", "A10-P1-IBSPINE-04", 0), ("A09-P1-IBLEAF-04-02", "A10-P1-IBSPINE-01", 0),
        ("A09-P1-IBLEAF-04-04", "A10-P1-IBSPINE-01", 0), ("B09-P1-IBLEAF-01-05", "A10-P1-IBSPINE-04", 1),
        ("B09-P1-IBLEAF-01-05", "B10-P1-IBSPINE-08", 1), ("B09-P1-IBLEAF-01-07", "A10-P1-IBSPINE-04", 0),
        ("B09-P1-IBLEAF-01-08", "B10-P1-IBSPINE-06", 1), ("B09-P1-IBLEAF-02-06", "B10-P1-IBSPINE-07", 0),
        ("B09-P1-IBLEAF-03-07", "B10-P1-IBSPINE-05", 0), ("B09-P1-IBLEAF-03-07", "B10-P1-IBSPINE-06", 1),
    }
    got = set((a["switch"], a["peer"], a["links"]) for a in kinds(real_doc, "link_missing"))
    assert got == expected


def test_real_nothing_else(real_doc):
    # Every link reads 4xNDR; no (host, HCA) description appears twice (sort | uniq -d).
    assert kinds(real_doc, "link_degraded") == []
    assert kinds(real_doc, "duplicate_hostname") == []
    assert set(a["kind"] for a in real_doc["anomalies"]) == {
        "miscabled_rail", "missing_rail", "unnamed_hca", "suspicious_hostname", "non_compute", "link_missing"}
    assert real_doc["warnings"] == []
    for a in real_doc["anomalies"]:
        assert set(["kind", "host", "hca", "switch", "port", "message"]) <= set(a)
        assert a["message"]


def test_real_blocks(real_doc):
    blocks = dict((b["name"], b) for b in real_doc["blocks"])
    assert sorted(b["size"] for b in blocks.values()) == sorted([10, 11, 18, 17, 18, 15, 16, 13, 1])
    assert blocks["su8-b2"]["nodes"] == ["b08-p1-dgx-08-c01"]
    assert sum(b["size"] for b in blocks.values()) == 119


# ---------------------------------------------------------------- small fabrics, one per kind

def analyze(fab, **kw):
    return _fabric.analyze([parse(fab.text(), "small.out")], **kw)


def test_clean_fabric_has_no_anomaly():
    fab, info = ibnetgen.rail_fabric(sus=2, nodes_per_su=4, rails=4, spines=2)
    doc = analyze(fab)
    assert doc["anomalies"] == [] and doc["warnings"] == []
    assert [(b["name"], b["size"]) for b in doc["blocks"]] == [("su1-b1", 4), ("su2-b1", 4)]
    assert doc["nodes"]["gpu00005"]["su"] == "su2"
    assert dict(doc["sus"][1]["leaves"]) == dict((str(r), "leaf-r%d-su2" % r) for r in range(4))


def test_swapped_rail_pair():
    fab, info = ibnetgen.rail_fabric()
    fab.move(info["nic"][("gpu00002", 0)], info["leaf"][(1, 1)], 2)
    fab.move(info["nic"][("gpu00002", 1)], info["leaf"][(1, 0)], 2)
    doc = analyze(fab)
    got = sorted((a["host"], a["hca"], a["switch"], a["port"]) for a in kinds(doc, "miscabled_rail"))
    assert got == [("gpu00002", "mlx5_0", "leaf-r1-su1", 2), ("gpu00002", "mlx5_1", "leaf-r0-su1", 2)]
    assert kinds(doc, "missing_rail") == []
    assert doc["nodes"]["gpu00002"]["block"] != doc["nodes"]["gpu00001"]["block"]


def test_nic_on_another_su():
    fab, info = ibnetgen.rail_fabric()
    fab.move(info["nic"][("gpu00003", 2)], info["leaf"][(2, 2)], 30)
    doc = analyze(fab)
    (a,) = kinds(doc, "miscabled_rail")
    assert (a["host"], a["switch"], a["port"]) == ("gpu00003", "leaf-r2-su2", 30)
    assert "a leaf of su2, while the host is in su1" in a["message"]


def test_missing_nic_and_missing_leaf():
    fab, info = ibnetgen.rail_fabric(sus=3)
    fab.unlink(info["nic"][("gpu00001", 3)], 1)          # one cable out
    fab.remove(info["leaf"][(3, 1)])                     # a whole leaf down in SU3
    doc = analyze(fab)
    items = kinds(doc, "missing_rail")
    assert ("su3", 1) in [(a["su"], a["rail"]) for a in items if a["host"] is None]
    hosts = sorted((a["host"], a["rail"]) for a in items if a["host"])
    assert hosts == [("gpu00001", 3)] + [("gpu%05d" % i, 1) for i in range(9, 13)]
    assert any(a["kind"] == "isolated_hca" and a["host"] == "gpu00001" for a in doc["anomalies"])


def test_unnamed_hca_and_facts_map_it_back():
    fab, info = ibnetgen.rail_fabric()
    guid = info["nic"][("gpu00004", 0)]
    fab.set_desc(guid, "MT4129 ConnectX7   Mellanox Technologies")
    doc = analyze(fab)
    (a,) = kinds(doc, "unnamed_hca")
    assert (a["host"], a["switch"], a["port"]) == (None, "leaf-r0-su1", 4)
    (m,) = kinds(doc, "missing_rail")
    assert m["host"] == "gpu00004" and "no node description" in m["message"]
    assert doc["nodes"]["gpu00004"]["status"] == "quarantined"
    facts = {"nics": [{"name": "mlx5_0", "node_guid": ":".join([guid[i:i + 4] for i in range(0, 16, 4)]),
                       "role": "rail", "rail": 0, "node_desc": "MT4129 ConnectX7   Mellanox Technologies"}]}
    doc = analyze(fab, nodes={"gpu00004": {"report": {"status": "pass"}, "facts": facts}})
    (a,) = kinds(doc, "unnamed_hca")
    assert a["host"] == "gpu00004" and "node facts map it to gpu00004 mlx5_0" in a["message"]
    assert kinds(doc, "missing_rail") == []
    assert doc["nodes"]["gpu00004"]["status"] == "green"


def test_suspicious_and_duplicate_hostnames():
    fab, info = ibnetgen.rail_fabric()
    for r in range(4):
        fab.set_desc(info["nic"][("gpu00002", r)], "ubuntu mlx5_%d" % r)
        fab.set_desc(info["nic"][("gpu00006", r)], "gpu00005 mlx5_%d" % r)
    doc = analyze(fab)
    sus = kinds(doc, "suspicious_hostname")
    assert sorted(a["desc"] for a in sus) == ["ubuntu mlx5_%d" % r for r in range(4)]
    assert sorted(a["id"] for a in sus) == sorted("suspicious_hostname:" + info["nic"][("gpu00002", r)] for r in range(4))
    assert "ubuntu" not in doc["nodes"] and "gpu00002" not in doc["nodes"]
    dup = kinds(doc, "duplicate_hostname")
    assert len(dup) == 4 and all(a["host"] == "gpu00005" and a["switch"].endswith("su2") for a in dup)


def test_non_compute_ufm_and_sharp():
    fab, info = ibnetgen.rail_fabric()
    ufm = fab.ca("ufm-01 mlx5_0")
    fab.link(info["leaf"][(1, 0)], 20, ufm, 1)
    sharp = fab.ca("Mellanox Technologies Aggregation Node")
    fab.link(info["leaf"][(1, 1)], 65, sharp, 1)
    doc = analyze(fab)
    got = sorted((a["role"], a["switch"], a["port"]) for a in kinds(doc, "non_compute"))
    assert got == [("sharp", "leaf-r1-su1", 65), ("ufm", "leaf-r0-su1", 20)]
    assert "ufm-01" not in doc["nodes"]
    doc = analyze(fab, non_compute_patterns=[])
    assert "ufm-01" in doc["nodes"]


def test_degraded_links():
    fab, info = ibnetgen.rail_fabric()
    fab.set_rate(info["leaf"][(2, 3)], 1, 2, "NDR")
    fab.set_rate(info["leaf"][(1, 0)], 5, 4, "HDR")   # first uplink of leaf-r0-su1
    doc = analyze(fab)
    got = sorted((a["host"] or "", a["switch"], a["port"]) for a in kinds(doc, "link_degraded"))
    assert got == [("", "leaf-r0-su1", 5), ("gpu00005", "leaf-r3-su2", 1)]


def test_missing_uplink():
    fab, info = ibnetgen.rail_fabric(links_per_spine=2)
    fab.unlink(info["leaf"][(1, 2)], 5)      # one of the two cables to spine01
    fab.unlink(info["leaf"][(2, 0)], 7)      # both cables to spine02
    fab.unlink(info["leaf"][(2, 0)], 8)
    doc = analyze(fab)
    got = sorted((a["switch"], a["peer"], a["links"]) for a in kinds(doc, "link_missing"))
    assert got == [("leaf-r0-su2", "spine02", 0), ("leaf-r2-su1", "spine01", 1)]


def test_gate_status_and_nodes_not_in_fabric():
    fab, info = ibnetgen.rail_fabric()
    nodes = {"gpu00001": {"report": {"status": "pass"}}, "gpu00002": {"report": {"status": "fail"}},
             "gpu00099": {"report": {"status": "pass"}}}
    doc = analyze(fab, nodes=nodes)
    status = dict((h, n["status"]) for h, n in doc["nodes"].items())
    assert (status["gpu00001"], status["gpu00002"], status["gpu00003"]) == ("green", "quarantined", "unknown")
    (a,) = kinds(doc, "not_in_fabric")
    assert a["host"] == "gpu00099" and doc["nodes"]["gpu00099"]["rails"] == []


def test_facts_rails_and_storage_nic():
    fab, info = ibnetgen.rail_fabric(sus=1, rails=2)
    storage = fab.ca("gpu00001 mlx5_9")
    fab.link(info["leaf"][(1, 0)], 30, storage, 1)
    facts = {"nics": [{"name": "mlx5_0", "node_desc": "gpu00001 mlx5_0", "role": "rail", "rail": 0},
                      {"name": "mlx5_1", "node_desc": "gpu00001 mlx5_1", "role": "rail", "rail": 1},
                      {"name": "mlx5_9", "node_desc": "gpu00001 mlx5_9", "role": "non-rail", "rail": None}],
             "numa": {"nodes": [{"id": 0, "cpus": [0, 1]}]}, "cpu": {"siblings": [[0, 1]]},
             "pairs": [{"gpu": "0000:18:00.0", "nic": "mlx5_0", "affinity": "PIX", "rail": 0}]}
    doc = analyze(fab, nodes={"gpu00001": {"report": {"status": "pass"}, "facts": facts}})
    node = doc["nodes"]["gpu00001"]
    assert [(r["rail"], r["device"], r["rail_from"]) for r in node["rails"]] == [(0, "mlx5_0", "facts"), (1, "mlx5_1", "facts")]
    assert [n["hca"] for n in node["other_nics"]] == ["mlx5_9"]
    assert node["numa"] == [{"id": 0, "cpus": [0, 1]}] and node["siblings"] == [[0, 1]] and node["pairs"][0]["nic"] == "mlx5_0"
    assert doc["anomalies"] == []


def test_cabling_plan():
    fab, info = ibnetgen.rail_fabric(rails=2)
    plan = {"sus": {"pod-a": {"leaves": {0: "leaf-r0-su1", 1: "leaf-r1-su1"},
                              "nodes": {"gpu00001": 1, "gpu00002": 3, "gpu00003": 3, "gpu00004": 4}},
                    "pod-b": {"leaves": {0: "leaf-r0-su2", 1: "leaf-r1-su2", 2: "leaf-r2-su2"},
                              "nodes": ["gpu00005", "gpu00006", "gpu00007", "gpu00008", "gpu00042"]}}}
    doc = analyze(fab, plan=plan)
    assert [s["name"] for s in doc["sus"]] == ["pod-a", "pod-b"]
    assert doc["nodes"]["gpu00006"]["su"] == "pod-b"
    missing = [a for a in kinds(doc, "missing_rail") if a["host"] is None and a["switch"]]
    assert [(a["switch"], a["su"]) for a in missing] == [("leaf-r2-su2", "pod-b")]
    mism = sorted((a["host"], a["hca"], a["port"]) for a in kinds(doc, "plan_mismatch") if a["hca"])
    assert mism == [("gpu00002", "mlx5_0", 2), ("gpu00002", "mlx5_1", 2)]
    assert [a["host"] for a in kinds(doc, "plan_mismatch") if not a["hca"]] == ["gpu00042"]


def test_bad_plan_and_inputs_are_named():
    fab, info = ibnetgen.rail_fabric()
    with pytest.raises(_fabric.FabricError, match="cabling_plan: expected a mapping with a `sus`"):
        analyze(fab, plan={"leaves": []})
    with pytest.raises(_fabric.FabricError, match="cabling_plan: SU a: rail 'x' is not a number"):
        analyze(fab, plan={"sus": {"a": {"leaves": {"x": "leaf"}}}})
    with pytest.raises(_fabric.FabricError, match="non_compute_patterns: invalid regular expression"):
        analyze(fab, non_compute_patterns=["("])
    with pytest.raises(_fabric.FabricError, match="lldp data of h1: expected the JSON object"):
        analyze(fab, lldp={"h1": []})


def test_roce_from_lldp():
    # lldpd 1.0 form (interface object) and the older list form.
    def lldp(pairs, as_list=False):
        ifaces = dict((nd, {"chassis": {sw: {"id": {"type": "mac", "value": "00:11"}}},
                            "port": {"id": {"type": "ifname", "value": port}}}) for nd, sw, port in pairs)
        if as_list:
            return {"lldp": {"interface": [{k: v} for k, v in ifaces.items()]}}
        return {"lldp": {"interface": ifaces}}

    facts = {"nics": [{"name": "mlx5_0", "netdevs": ["eth0"], "role": "rail", "rail": 0},
                      {"name": "mlx5_1", "netdevs": ["eth1"], "role": "rail", "rail": 1}]}
    data = {
        "r1": lldp([("eth0", "tor-r0-a", "Ethernet1"), ("eth1", "tor-r1-a", "Ethernet1")]),
        "r2": lldp([("eth0", "tor-r0-a", "Ethernet2"), ("eth1", "tor-r1-a", "Ethernet2")], as_list=True),
        "r3": lldp([("eth0", "tor-r1-a", "Ethernet3"), ("eth1", "tor-r0-a", "Ethernet3")]),
    }
    nodes = dict((h, {"facts": facts}) for h in data)
    doc = _fabric.analyze([], nodes=nodes, lldp=data)
    assert doc["nodes"]["r1"]["rails"][0]["leaf"] == "tor-r0-a"
    assert doc["nodes"]["r2"]["rails"][1]["port"] == "Ethernet2"
    got = sorted((a["host"], a["hca"], a["switch"]) for a in kinds(doc, "miscabled_rail"))
    assert got == [("r3", "mlx5_0", "tor-r1-a"), ("r3", "mlx5_1", "tor-r0-a")]
    assert doc["blocks"][0]["nodes"] == ["r1", "r2"]


def test_two_segments_carry_different_rails_of_the_same_hosts():
    # A SuperPOD-like split: rails 0-1 on segment A, rails 2-3 (mlx5_10, mlx5_11) on segment B.
    a = ibnetgen.rail_fabric(sus=2, rails=2, hca="mlx5_%d", leaf="a-leaf-r%d-su%d", spine="a-spine%02d")[0]
    b, info_b = ibnetgen.rail_fabric(sus=2, rails=2, hca="mlx5_1%d", leaf="b-leaf-r%d-su%d", spine="b-spine%02d")
    b.unlink(info_b["leaf"][(2, 1)], 5)     # one uplink of segment B missing
    doc = _fabric.analyze([parse(a.text(), "/x/segA.out"), parse(b.text(), "/x/segB.out")])
    assert doc["segments"] == ["segA", "segB"]
    assert [(r["rail"], r["names"]) for r in doc["rails"]] == [(0, ["mlx5_0"]), (1, ["mlx5_1"]), (2, ["mlx5_10"]), (3, ["mlx5_11"])]
    assert doc["sus"][0]["leaves"] == {"0": "a-leaf-r0-su1", "1": "a-leaf-r1-su1", "2": "b-leaf-r0-su1", "3": "b-leaf-r1-su1"}
    assert [(b["name"], b["size"]) for b in doc["blocks"]] == [("su1-b1", 4), ("su2-b1", 4)]
    assert doc["nodes"]["gpu00001"]["segments"] == ["segA", "segB"]
    assert [(a["kind"], a["switch"], a["peer"]) for a in doc["anomalies"]] == [("link_missing", "b-leaf-r1-su2", "b-spine01")]


def test_real_unnamed_hcas_know_their_rail_and_su(real_doc):
    # e.g. port 6 of A09-P1-IBLEAF-04-02 (rail 4 = index 3, SU 2) reads "MT4129 ConnectX7 ..."
    item = [a for a in kinds(real_doc, "unnamed_hca") if (a["switch"], a["port"]) == ("A09-P1-IBLEAF-04-02", 6)][0]
    assert (item["su"], item["rail"]) == ("su2", 3)
    assert item["message"].endswith("it sits on the rail 3 leaf of su2")
