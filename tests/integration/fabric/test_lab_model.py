"""The fabric inventory on the lab's twins: facts from the real collector, cabling from the lab's model.

Until the lab writes its own ibnetdiscover capture, lab/fabric/lab_capture.py builds one
from the same sources the twins are built from (see its docstring).
"""
import os
import sys

import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._fabric import outputs as _fabric_outputs
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric import model as _fabric
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric.ibnetdiscover import parse

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "lab", "fabric"))

import lab_capture  # noqa: E402


@pytest.fixture(scope="module")
def lab_fabric():
    text, nodes, twins = lab_capture.build()
    assert twins, "inventories/lab/hosts.yml lists no twins"
    doc = _fabric.analyze([parse(text, "lab.out")], nodes=nodes)
    return twins, nodes, doc


def test_lab_twins_rails_come_from_facts(lab_fabric):
    twins, nodes, doc = lab_fabric
    assert sorted(doc["nodes"]) == sorted(twins)
    for name, node in doc["nodes"].items():
        assert all(r["rail_from"] == "facts" for r in node["rails"])
        assert node["numa"] and node["siblings"] and node["pairs"]
        # twin3's faults (a rail on the wrong leaf, a port down, a slow port) quarantine it by the fabric
        assert node["status"] == ("quarantined" if name == "twin3" else "green"), name
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
