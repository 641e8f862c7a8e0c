"""fabric_place: the reference placement, on the real SuperPOD capture and on a hand-made fabric.

Block sizes of the real capture were counted by hand (tests/unit/plugins/module_utils/_fabric/test_model.py):
SU k = rack prefix k; su2-b1 11 hosts, su3-b1 18, su4-b1 17, su5-b1 18, su6-b1 15, su7-b1 16, su8-b1 13.
su1's 10 hosts miss rail 2 and b08-p1-dgx-08-c01 has a swapped pair: the fabric quarantines them.
"""
import os
import sys

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.provision.plugins.filter.placement import FilterModule, fabric_place
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric import model as _fabric
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric.ibnetdiscover import parse, parse_file

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "lab", "fabric"))
import ibnetgen  # noqa: E402

ANY = ["green", "unknown"]   # the capture comes without gate reports


_CACHE = {}


@pytest.fixture
def real(realdata):
    if "doc" not in _CACHE:
        _CACHE["doc"] = _fabric.analyze([parse_file(os.path.join(realdata, "ibnetdiscover", "superpod-h100-example.out"))])
    return _CACHE["doc"]


def test_registered_as_a_filter():
    assert FilterModule().filters()["fabric_place"] is fabric_place


def test_real_smallest_block_that_fits(real):
    p = fabric_place(real, 12, statuses=ANY)
    assert (p["tier"], p["unit"], p["blocks"]) == ("block", "su8-b1", ["su8-b1"])   # 13 is the smallest >= 12
    assert len(p["hosts"]) == 12 and all(h.startswith("b08-p1-dgx-08-") for h in p["hosts"])
    assert "b08-p1-dgx-08-c01" not in p["hosts"]                                     # quarantined
    assert fabric_place(real, 16, statuses=ANY)["unit"] == "su7-b1"                  # exactly 16
    assert fabric_place(real, 17, statuses=ANY)["unit"] == "su4-b1"                  # 17, not one of the 18s
    assert fabric_place(real, 1, statuses=ANY)["unit"] == "su2-b1"                   # the smallest of all


def test_real_busy_nodes_move_the_job(real):
    busy = ["b08-p1-dgx-08-c%02d" % i for i in range(2, 20)]   # su8-b1 taken
    p = fabric_place(real, 12, busy=busy, statuses=ANY)
    assert p["unit"] == "su6-b1" and not set(p["hosts"]) & set(busy)


def test_real_no_block_fits_then_segment(real):
    # 19: no block, no SU has 19 free hosts; the segment takes the smallest SU whole (su2, 11)
    # and the rest (8) from the smallest block that fits it (su8-b1, 13), never splitting an 18.
    p = fabric_place(real, 19, statuses=ANY)
    assert p["tier"] == "segment" and p["blocks"] == ["su2-b1", "su8-b1"]
    assert len(p["hosts"]) == 19 == len(set(p["hosts"]))
    assert sum(h.startswith("a06-p1-dgx-02-") for h in p["hosts"]) == 11
    with pytest.raises(AnsibleFilterError, match="no fabric segment has 500 free node"):
        fabric_place(real, 500, statuses=ANY)


def test_only_green_by_default(real):
    with pytest.raises(AnsibleFilterError, match="no fabric segment has 1 free node.*most free in one segment: 0"):
        fabric_place(real, 1)


def test_su_tier_splits_one_block_at_most():
    # SU1 blocks of 3 (hosts 1-3 share every leaf) and 1 (host 4: rail 1 moved to another port
    # of the same leaf is still the same block; moved to SU2's leaf it is its own block).
    fab, info = ibnetgen.rail_fabric(sus=2, nodes_per_su=4, rails=2)
    nodes = dict(("gpu%05d" % i, {"report": {"status": "pass"}}) for i in range(1, 9))
    doc = _fabric.analyze([parse(fab.text(), "s.out")], nodes=nodes)
    assert fabric_place(doc, 4)["unit"] == "su1-b1"
    p = fabric_place(doc, 6, busy=["gpu00001"])
    # su1 has 3 free, su2 4: no block, no SU fits 6 -> segment: su1 whole (3), then 3 of su2's 4
    assert p["tier"] == "segment" and p["hosts"] == ["gpu00002", "gpu00003", "gpu00004", "gpu00005", "gpu00006", "gpu00007"]


def test_bad_arguments_are_clear():
    with pytest.raises(AnsibleFilterError, match="expected the fabric.json document"):
        fabric_place({"schema": 1}, 2)
    with pytest.raises(AnsibleFilterError, match="node count must be a whole number, got"):
        fabric_place({}, "many")
    with pytest.raises(AnsibleFilterError, match="node count must be a whole number of 1 or more"):
        fabric_place({"nodes": {}, "blocks": []}, 0)
    with pytest.raises(AnsibleFilterError, match="busy must be a list"):
        fabric_place({"nodes": {}, "blocks": []}, 1, busy="gpu001")
