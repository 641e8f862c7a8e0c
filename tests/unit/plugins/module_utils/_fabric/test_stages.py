"""The fabric model's stages, each run alone on a Model prepared by hand or by the stages before it.

Expectations are written from the hand-made fabrics (lab/fabric/ibnetgen.py draws them as described
in each test), not from the model's output.
"""
import os
import sys

import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._fabric import model as _fabric
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric import adapters, hosts, links, structure, verdicts
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric.ibnetdiscover import parse

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "..", "lab", "fabric"))
import ibnetgen  # noqa: E402


def model_until(fab, stage, **kw):
    """Run the stages in order up to and including ``stage`` (a function name)."""
    m = _fabric.Model(**kw)
    steps = [("read_captures", lambda: adapters.read_captures(m, [parse(fab.text(), "seg.out")])),
             ("classify_adapters", lambda: adapters.classify_adapters(m)), ("add_lldp", lambda: adapters.add_lldp(m)),
             ("tiers", lambda: structure.tiers(m)), ("nic_rails", lambda: structure.nic_rails(m)),
             ("scalable_units", lambda: structure.scalable_units(m)), ("leaf_rails", lambda: structure.leaf_rails(m)),
             ("apply_plan", lambda: structure.apply_plan(m)), ("index_sus", lambda: structure.index_sus(m)),
             ("host_rails", lambda: hosts.host_rails(m)), ("su_checks", lambda: hosts.su_checks(m))]
    for name, step in steps:
        step()
        if name == stage:
            return m
    raise AssertionError("no stage %s" % stage)


def test_read_captures_alone():
    fab, info = ibnetgen.rail_fabric(sus=1, nodes_per_su=2, rails=2, spines=1)
    m = model_until(fab, "read_captures")
    assert sorted(m.switches) == ["leaf-r0-su1", "leaf-r1-su1", "spine01"]
    assert len(m.cas) == 4 and sorted(set(c["switch"] for c in m.cas)) == ["leaf-r0-su1", "leaf-r1-su1"]
    assert m.isl[("leaf-r0-su1", "spine01")] == 1 and m.isl[("spine01", "leaf-r0-su1")] == 1


def test_classify_adapters_alone_keeps_default_names_out_of_hosts():
    fab, info = ibnetgen.rail_fabric(sus=1, nodes_per_su=2, rails=2, spines=1)
    fab.set_desc(info["nic"][("gpu00002", 1)], "localhost mlx5_1")
    m = model_until(fab, "classify_adapters")
    assert sorted(m.hosts) == ["gpu00001", "gpu00002"]
    assert [n["hca"] for n in m.hosts["gpu00002"]["nics"]] == ["mlx5_0"]
    (a,) = m.anomalies
    assert (a["kind"], a["host"], a["guid"], a["desc"]) == ("suspicious_hostname", None, info["nic"][("gpu00002", 1)],
                                                            "localhost mlx5_1")


def test_tiers_alone_on_a_three_tier_fabric():
    fab, info = ibnetgen.rail_fabric(sus=1, nodes_per_su=1, rails=1, spines=2)
    core = fab.switch("core01")
    fab.link(info["spine"][0], 60, core, 1)
    fab.link(info["spine"][1], 60, core, 2)
    m = model_until(fab, "tiers")
    assert dict((n, s["tier"]) for n, s in m.switches.items()) == {
        "leaf-r0-su1": "leaf", "spine01": "spine", "spine02": "spine", "core01": "core"}
    assert m.switches["spine01"]["uplinks"] == {"core01": 1} and m.switches["spine01"]["downlinks"] == {"leaf-r0-su1": 1}


def test_nic_rails_alone_ranks_names_inside_families():
    m = _fabric.Model()
    m.hosts = {"h": {"nics": [dict(hca=n, facts_rail=None) for n in ("HCA-5", "HCA-1", "mlx5_4", "mlx5_0")], "other": []}}
    structure.nic_rails(m)
    assert [(n["hca"], n["rail"], n["rail_from"]) for n in m.hosts["h"]["nics"]] == [
        ("HCA-5", 1, "name"), ("HCA-1", 0, "name"), ("mlx5_4", 1, "name"), ("mlx5_0", 0, "name")]


@pytest.mark.parametrize("shape,groups,kind", [("shared", 1, "shared"), ("plane", 4, "rail-plane")])
def test_spine_groups_alone(shape, groups, kind):
    fab, info = ibnetgen.rail_fabric(sus=3, nodes_per_su=2, rails=4, spines=2, shape=shape)
    m = model_until(fab, "su_checks")
    links.spine_groups(m)
    assert len(m.spine_groups) == groups and set(g["kind"] for g in m.spine_groups) == {kind}
    assert all(g["links_per_spine"] == 1 for g in m.spine_groups)
    if shape == "plane":
        g = [g for g in m.spine_groups if g["rails"] == [2]][0]
        assert g["spines"] == ["spine-p2-01", "spine-p2-02"]
        assert g["leaves"] == ["leaf-r2-su1", "leaf-r2-su2", "leaf-r2-su3"]
        assert m.switches["leaf-r2-su3"]["spine_group"] == g["name"]


def test_link_anomalies_alone_judge_a_leaf_by_its_own_group():
    # plane shape: leaf-r1-su2 loses its cable to spine-p1-02; leaf-r3-su1's cable to spine-p3-01 goes to spine-p0-01
    fab, info = ibnetgen.rail_fabric(sus=3, nodes_per_su=2, rails=4, spines=2, shape="plane")
    port, spine = info["uplinks"][(2, 1)][1]
    fab.unlink(info["leaf"][(2, 1)], port)
    port, spine = info["uplinks"][(1, 3)][0]
    fab.unlink(info["leaf"][(1, 3)], port)
    fab.link(info["leaf"][(1, 3)], port, info["spine"][(0, 0)], fab.free_port(info["spine"][(0, 0)]))
    m = model_until(fab, "su_checks")
    links.link_anomalies(m, links.spine_groups(m))
    got = sorted((a["kind"], a["switch"], a["peer"]) for a in m.anomalies)
    assert got == [("link_missing", "leaf-r1-su2", "spine-p1-02"), ("link_missing", "leaf-r3-su1", "spine-p3-01"),
                   ("uplink_miscabled", "leaf-r3-su1", "spine-p0-01")]


def test_orphan_leaf_takes_the_group_of_its_rail():
    fab, info = ibnetgen.rail_fabric(sus=3, nodes_per_su=2, rails=2, spines=2, shape="plane")
    for port, spine in info["uplinks"][(3, 1)]:
        fab.unlink(info["leaf"][(3, 1)], port)
    m = model_until(fab, "su_checks")
    links.link_anomalies(m, links.spine_groups(m))
    assert sorted((a["switch"], a["peer"], a["links"]) for a in m.anomalies if a["kind"] == "link_missing") == [
        ("leaf-r1-su3", "spine-p1-01", 0), ("leaf-r1-su3", "spine-p1-02", 0)]


def test_ids_and_quarantine_alone():
    m = _fabric.Model(accept=["link_degraded:*"])
    m.nodes_out = {"h1": {"status": "green"}, "h2": {"status": "quarantined"}, "h3": {"status": "unknown"}}
    m.anomalies = [
        {"kind": "miscabled_rail", "host": "h1", "hca": "mlx5_2", "switch": "l", "port": 3},
        {"kind": "missing_rail", "host": "h3", "hca": None, "switch": None, "port": None, "rail": 5},
        {"kind": "link_degraded", "host": "h3", "hca": "mlx5_0", "switch": "l", "port": 1},
        {"kind": "link_missing", "host": None, "hca": None, "switch": "leaf1", "port": None, "peer": "spine2"},
        {"kind": "unnamed_hca", "host": None, "hca": None, "switch": "l", "port": 9, "guid": "e09d"},
        {"kind": "missing_rail", "host": None, "hca": None, "switch": None, "port": None, "rail": 1, "su": "su4"},
    ]
    verdicts.assign_ids(m.anomalies)
    assert [a["id"] for a in m.anomalies] == [
        "miscabled_rail:h1/mlx5_2", "missing_rail:h3/rail5", "link_degraded:h3/mlx5_0", "link_missing:leaf1/spine2",
        "unnamed_hca:e09d", "missing_rail:su4/rail1"]
    verdicts.quarantine(m)
    assert (m.nodes_out["h1"]["status"], m.nodes_out["h1"]["quarantined_by"]) == ("quarantined", ["fabric"])
    assert (m.nodes_out["h2"]["status"], m.nodes_out["h2"]["quarantined_by"]) == ("quarantined", ["gate"])
    assert m.nodes_out["h3"]["quarantine"] == ["missing_rail:h3/rail5"]         # the slow link is accepted
    assert m.nodes_out["h3"]["accepted"] == ["link_degraded:h3/mlx5_0"]


def test_planted_anomalies_exactly_on_both_shapes():
    for shape in ("shared", "plane"):
        fab, info = ibnetgen.rail_fabric(sus=6, nodes_per_su=3, rails=6, spines=2, shape=shape)
        clean = _fabric.analyze([parse(fab.text(), "clean.out")])
        assert clean["anomalies"] == [] and clean["warnings"] == [], shape
        planted = ibnetgen.plant_anomalies(fab, info)
        doc = _fabric.analyze([parse(fab.text(), "planted.out")])
        assert sorted(a["id"] for a in doc["anomalies"]) == planted, shape
        assert doc["warnings"] == []


def test_isolated_adapter_with_a_default_name_names_no_host():
    fab, info = ibnetgen.rail_fabric(sus=1, nodes_per_su=2, rails=2, spines=1)
    lone = fab.ca("localhost mlx5_0")
    named = fab.ca("gpu00009 mlx5_0")
    m = model_until(fab, "read_captures")
    got = sorted((a["guid"], a["host"], a["hca"]) for a in m.anomalies if a["kind"] == "isolated_hca")
    assert got == sorted([(lone, None, None), (named, "gpu00009", "mlx5_0")])


def test_slow_links_are_judged_per_segment_against_the_most_common_rate():
    # segment a: three 4xNDR links, one 4xHDR (slow), one with no rate (not judged); segment b: one
    # 1xNDR and one 4xNDR, a tie broken by the smaller rate as text ("100.0" < "400.0"), so the 4xNDR
    # link is not slow; segment c: only links without a rate (no norm)
    items = [("a", 4, "NDR"), ("a", 4, "HDR"), ("b", 4, "NDR"), ("a", 4, "NDR"), ("a", None, None), ("b", 1, "NDR"),
             ("a", 4, "NDR"), ("c", 4, "XYZ")]
    slow, norms = links._slow(items)
    assert slow == [(1, 200.0)]
    assert norms == {"a": 400.0, "b": 100.0, "c": None}
    assert links._slow([]) == ([], {})


# An adapter whose block comes before its leaf's (the link's a end is the adapter), a router on a
# leaf port, and two adapters cabled to each other: the links read_captures leaves to _attach.
ODD_LINKS = """\
vendid=0x2c9
devid=0x101b
sysimgguid=0x1111111111111111
caguid=0x1111111111111111
Ca\t1 "H-1111111111111111"\t\t# "gpu01 mlx5_0"
[1](1111111111111111) \t"S-aaaaaaaaaaaaaaaa"[3]\t\t# lid 5 lmc 0 "leaf-1" lid 2 4xNDR

vendid=0x2c9
devid=0xd2f0
sysimgguid=0xaaaaaaaaaaaaaaaa
switchguid=0xaaaaaaaaaaaaaaaa(aaaaaaaaaaaaaaaa)
Switch\t40 "S-aaaaaaaaaaaaaaaa"\t\t# "leaf-1" enhanced port 0 lid 2 lmc 0
[3]\t"H-1111111111111111"[1](1111111111111111) \t\t# "gpu01 mlx5_0" lid 5 4xNDR
[4]\t"R-3333333333333333"[1]\t\t# "router-1" lid 7 4xNDR

vendid=0x2c9
devid=0x1
sysimgguid=0x3333333333333333
rtguid=0x3333333333333333
Rt\t1 "R-3333333333333333"\t\t# "router-1"
[1](3333333333333333) \t"S-aaaaaaaaaaaaaaaa"[4]\t\t# lid 7 lmc 0 "leaf-1" lid 2 4xNDR

vendid=0x2c9
devid=0x101b
sysimgguid=0x2222222222222222
caguid=0x2222222222222222
Ca\t1 "H-2222222222222222"\t\t# "gpu02 mlx5_0"
[1](2222222222222222) \t"H-4444444444444444"[1]\t\t# lid 8 lmc 0 "gpu03 mlx5_0" lid 9 4xNDR

vendid=0x2c9
devid=0x101b
sysimgguid=0x4444444444444444
caguid=0x4444444444444444
Ca\t1 "H-4444444444444444"\t\t# "gpu03 mlx5_0"
[1](4444444444444444) \t"H-2222222222222222"[1]\t\t# lid 9 lmc 0 "gpu02 mlx5_0" lid 8 4xNDR
"""


def test_read_captures_alone_on_links_not_read_inline():
    m = _fabric.Model()
    adapters.read_captures(m, [parse(ODD_LINKS, "seg.out")])
    assert m.cas == [{"guid": "1111111111111111", "desc": "gpu01 mlx5_0", "switch": "leaf-1", "port": 3,
                      "width": 4, "speed": "NDR", "segment": "seg", "lid": None}]
    assert m.warnings == [
        "seg.out:14: router 3333333333333333 on switch port 4 is not a host adapter; ignored",
        "seg.out:28: link between two adapters 2222222222222222 and 4444444444444444 ignored (back-to-back cable)"]
    assert m.anomalies == [] and not m.isl
