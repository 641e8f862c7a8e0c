"""The fabric inventory on the lab's twins: facts from the real collector, cabling from the lab's model.

Until the lab writes its own ibnetdiscover capture, this test builds one from the same sources the
twins are built from: each twin's hardware view is rendered by lab/hw/render.py from the lab
inventory (inventories/lab/hosts.yml), node_facts' collector reads it, and the capture cables every
InfiniBand rail NIC to the leaf its model says (``cable: {leaf, port}``, twin overrides in
``state.cabling``), down ports left out and slow ports at their rate. Assumption of this test: the
model gives every twin port 1, so twin number n takes port n unless its state names a port.
"""
import os
import sys
import tempfile

import pytest
import yaml

from ansible_collections.gpufleet.provision.plugins.module_utils import _fabric, _fabric_outputs
from ansible_collections.gpufleet.provision.plugins.module_utils._ibnetdiscover import parse

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "fixtures", "fabric"))
import ibnetgen  # noqa: E402

lab = pytest.importorskip("lab.lab", reason="the lab harness (lab/lab.py) is not in this checkout")
render = pytest.importorskip("lab.hw.render", reason="the lab renderer (lab/hw/render.py) is not in this checkout")
facts_mod = pytest.importorskip("ansible_collections.gpufleet.provision.plugins.module_utils._facts",
                                reason="node_facts collector absent")


def model_cables(model):
    """{nic name: {leaf, port}} from the hardware model's PCI tree."""
    out = {}

    def walk(node):
        if isinstance(node, dict):
            if node.get("nic") and node.get("cable"):
                out[node["name"]] = dict(node["cable"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
    walk(model)
    return out


def rate(text):
    # "200 Gb/sec (4X HDR)" -> (4, "HDR")
    inner = text.split("(")[1].rstrip(")").split("X ")
    return int(inner[0]), inner[1]


@pytest.fixture(scope="module")
def lab_fabric():
    twins = lab.load_twins()
    if not twins:
        pytest.skip("inventories/lab/hosts.yml lists no twins")
    fab = ibnetgen.Fabric()
    leaves = {}
    spines = [fab.switch("lab-spine%02d" % i) for i in (1, 2)]
    nodes = {}
    tmp = tempfile.mkdtemp(prefix="fabric-lab-")
    for index, name in enumerate(sorted(twins), 1):
        spec = twins[name]
        state = lab.twin_yml(spec)["state"]
        with open(os.path.join(REPO, "lab", "hw", "models", "%s.yml" % spec.get("model", "hgx-h100"))) as handle:
            model = yaml.safe_load(handle)
        root = os.path.join(tmp, name)
        render.render(model, state, root)
        facts, _warnings = facts_mod.collect(root)
        nodes[name] = {"report": {"status": "pass"}, "facts": facts}
        cables = model_cables(model)
        for nic_name, override in (state.get("cabling") or {}).items():
            cables[nic_name] = dict(dict(cables.get(nic_name) or {}, port=None), **override)
        for nic in facts["nics"]:
            if nic["link_layer"] != "InfiniBand" or nic["name"] not in cables:
                continue
            port = nic["ports"][0]
            if port["state"] != "ACTIVE":
                continue
            cable = cables[nic["name"]]
            if cable["leaf"] not in leaves:
                leaves[cable["leaf"]] = fab.switch(cable["leaf"])
                for s, spine in enumerate(spines):
                    fab.link(leaves[cable["leaf"]], 40 + s, spine, len(leaves))
            ca = fab.ca(nic["node_desc"], guid=_fabric.normalize_guid(nic["node_guid"]))
            width, speed = rate(port["rate"])
            fab.link(leaves[cable["leaf"]], cable.get("port") or index, ca, 1, width, speed)
    text = fab.text()
    doc = _fabric.analyze([parse(text, "lab.out")], nodes=nodes)
    return twins, nodes, doc


def test_lab_twins_rails_come_from_facts(lab_fabric):
    twins, nodes, doc = lab_fabric
    assert sorted(doc["nodes"]) == sorted(twins)
    for name, node in doc["nodes"].items():
        assert all(r["rail_from"] == "facts" for r in node["rails"])
        assert node["numa"] and node["siblings"] and node["pairs"]
        assert node["status"] == "green"
    # The reference model: rail NICs mlx5_0-3 and mlx5_6-9 (rails 0-7); mlx5_4/5 are Ethernet storage NICs.
    twin4 = doc["nodes"]["twin4"]
    assert [(r["rail"], r["device"]) for r in twin4["rails"]] == [
        (0, "mlx5_0"), (1, "mlx5_1"), (2, "mlx5_2"), (3, "mlx5_3"), (4, "mlx5_6"), (5, "mlx5_7"), (6, "mlx5_8"), (7, "mlx5_9")]
    text, why = _fabric_outputs.nccl_env(doc, "twin4")
    assert "NCCL_IB_HCA==mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_6:1,mlx5_7:1,mlx5_8:1,mlx5_9:1" in text


def test_lab_faults_are_named(lab_fabric):
    twins, nodes, doc = lab_fabric
    faults = twins["twin3"].get("faults") or []
    assert "rail cable on the wrong leaf" in faults and "IB port down" in faults and "IB port at a lower rate" in faults
    got = sorted((a["kind"], a["host"], a["hca"] or "", a["switch"] or "") for a in doc["anomalies"])
    assert ("miscabled_rail", "twin3", "mlx5_3", "su1-leaf-r2") in got          # state.cabling mlx5_3 -> su1-leaf-r2
    assert ("link_degraded", "twin3", "mlx5_1", "su1-leaf-r1") in got           # 200 Gb/sec (4X HDR)
    # mlx5_0 DOWN: no rail 0; mlx5_3 moved to the rail-2 leaf: nothing reaches the rail-3 leaf either
    assert [(a["host"], a["rail"]) for a in doc["anomalies"] if a["kind"] == "missing_rail"] == [("twin3", 0), ("twin3", 3)]
    assert set(a["host"] for a in doc["anomalies"]) == {"twin3"}
