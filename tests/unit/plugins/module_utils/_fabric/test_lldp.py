"""The RoCE fabric inventory from LLDP (lldpcli -f json show neighbors per node): parsing real and
bad tables, the rail/leaf/SU model, its anomalies (rail on the wrong leaf, a missing link, a slow
port), hybrid nodes, and the NCCL settings of RoCE hosts. Fleets from lab/fabric/lldpgen.py;
expectations written by hand."""
import copy
import json
import os
import sys

import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._fabric import model as _fabric
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric import outputs
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric.adapters import parse_lldp
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric.common import FabricError
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric.ibnetdiscover import parse

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "..", "lab", "fabric"))
import ibnetgen  # noqa: E402
import lldpgen  # noqa: E402

# `lldpcli -f json show neighbors details` as lldpd writes it: the expectation of lldpd's own
# integration test (lldpd/lldpd tests/integration/test_lldpcli.py, test_json_output "neighbors"),
# with the age it deletes before comparing and the Router/Station capabilities put back.
LLDPD_JSON = {"lldp": {"interface": {"eth0": {
    "via": "LLDP", "rid": "1", "age": "0 day, 00:00:01",
    "chassis": {"ns-2.example.com": {"id": {"type": "mac", "value": "00:00:00:00:00:02"},
                                     "descr": "Spectacular GNU/Linux 2016 Linux 4.19.0 #1 SMP x86_64",
                                     "mgmt-ip": "fe80::200:ff:fe00:2",
                                     "capability": [{"type": "Bridge", "enabled": False}, {"type": "Router", "enabled": False},
                                                    {"type": "Wlan", "enabled": False}, {"type": "Station", "enabled": True}]}},
    "port": {"id": {"type": "mac", "value": "00:00:00:00:00:02"}, "descr": "eth1", "ttl": "120"}}}}}


def test_real_lldpd_table():
    # a port id of type mac names no port: its description does
    assert parse_lldp(LLDPD_JSON, "ns-1") == [{"netdev": "eth0", "switch": "ns-2.example.com", "port": "eth1"}]


def test_an_empty_table_has_no_neighbour():
    assert parse_lldp({"lldp": {}}, "gpu1") == []


def _bad(mutate):
    data = copy.deepcopy(LLDPD_JSON)
    mutate(data)
    return data


@pytest.mark.parametrize("data,message", [
    ([], "lldp data of gpu1: expected the JSON object of `lldpcli -f json show neighbors` with an `lldp` object, got list"),
    ({"lldp": [{"interface": []}]}, "with an `lldp` object, got an object with lldp"),
    ({"neighbors": {}}, "got an object with neighbors"),
    (_bad(lambda d: d["lldp"].update(chassis={})), "lldp data of gpu1: unknown field(s) chassis"),
    (_bad(lambda d: d["lldp"]["interface"]["eth0"].pop("chassis")), "lldp data of gpu1: interface eth0: no `chassis` object"),
    (_bad(lambda d: d["lldp"]["interface"]["eth0"].update(port="swp1")), "lldp data of gpu1: interface eth0: no `port` object"),
    (_bad(lambda d: d["lldp"]["interface"]["eth0"].update(neighbor="leaf1")),
     "lldp data of gpu1: interface eth0: unknown field(s) neighbor (not lldpcli's neighbour entry)"),
    (_bad(lambda d: d["lldp"].update(interface="eth0")), "`interface` is neither an object nor a list"),
])
def test_bad_tables_are_errors_naming_the_field(data, message):
    with pytest.raises(FabricError) as err:
        parse_lldp(data, "gpu1")
    assert message in str(err.value)


def test_a_bad_table_stops_the_inventory_naming_the_host():
    lldp, nodes = lldpgen.roce_fleet(sus=1, nodes_per_su=2)
    del lldp["gpu00002"]["lldp"]["interface"]["ens3np0"]["port"]
    with pytest.raises(FabricError) as err:
        _fabric.analyze([], nodes=nodes, lldp=lldp)
    assert str(err.value) == "lldp data of gpu00002: interface ens3np0: no `port` object (every neighbour has a chassis and a port)"


def kinds(doc):
    return sorted(a["id"] for a in doc["anomalies"])


def test_clean_roce_fleet():
    lldp, nodes = lldpgen.roce_fleet(sus=2, nodes_per_su=4, rails=8)
    doc = _fabric.analyze([], nodes=nodes, lldp=lldp, roce_tc=106)
    assert kinds(doc) == []
    assert len(doc["nodes"]) == 8
    node = doc["nodes"]["gpu00006"]
    assert node["su"] == "su2" and node["status"] == "green"
    assert [(r["rail"], r["device"], r["leaf"], r["port"], r["speed"]) for r in node["rails"]] == [
        (k, "mlx5_%d" % k, "leaf-r%d-su2" % k, "swp2", "400GbE") for k in range(8)]
    # the storage NIC is another NIC, not a rail, on its own switch
    assert node["other_nics"] == [{"hca": "mlx5_8", "device": "mlx5_8", "guid": None, "switch": "storage-leaf-su2", "port": "swp2"}]
    assert node["roce"] == {"gid_index": 3, "tc": 106, "addresses": None}      # no rail plan given
    files, notes = outputs.render(doc, ["green"])
    nccl = json.loads(files["nccl.json"])
    assert nccl["gpu00006"] == {"NCCL_IB_HCA": "=" + ",".join("mlx5_%d:1" % k for k in range(8)),
                                "NCCL_IB_GID_INDEX": "3", "NCCL_IB_TC": "106"}
    assert notes == []


def test_rail_plans_go_into_fabric_json_per_roce_host():
    """The rail_plans filter's output (two rails of a routed plan; gpu00002 names no interfaces: the
    facts' netdevs fill them in); a host without a plan has none."""
    lldp, nodes = lldpgen.roce_fleet(sus=1, nodes_per_su=2, rails=2, storage=False)
    routes0, routes1 = [{"to": "10.64.0.0/17", "via": "10.64.0.1"}], [{"to": "10.64.128.0/17", "via": "10.64.128.1"}]
    plan = {"index": 1, "su": 0, "rails": [
        {"rail": 1, "interface": None, "address": "10.64.128.3", "prefix": 26, "cidr": "10.64.128.3/26",
         "subnet": "10.64.128.0/26", "gateway": "10.64.128.1", "routes": routes1, "mtu": 9000},
        {"rail": 0, "interface": None, "address": "10.64.0.3", "prefix": 26, "cidr": "10.64.0.3/26",
         "subnet": "10.64.0.0/26", "gateway": "10.64.0.1", "routes": routes0, "mtu": 9000}]}
    doc = _fabric.analyze([], nodes=nodes, lldp=lldp, roce_tc=106, rail_plans={"gpu00002": plan, "elsewhere": plan})
    assert doc["nodes"]["gpu00002"]["roce"]["addresses"] == [
        {"rail": 0, "interface": "ens0np0", "cidr": "10.64.0.3/26", "gateway": "10.64.0.1", "routes": routes0},
        {"rail": 1, "interface": "ens1np0", "cidr": "10.64.128.3/26", "gateway": "10.64.128.1", "routes": routes1}]
    assert doc["nodes"]["gpu00001"]["roce"]["addresses"] is None
    assert "elsewhere" not in doc["nodes"]
    back = json.loads(outputs.render(doc, ["green"])[0]["fabric.json"].text())
    assert back["nodes"]["gpu00002"]["roce"]["addresses"][1]["cidr"] == "10.64.128.3/26"
    import jsonschema  # requirements-test.txt
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "..", "docs", "fabric.schema.json")) as handle:
        validator = jsonschema.Draft202012Validator(json.load(handle))
    assert [e.message for e in validator.iter_errors(back)] == []
    with pytest.raises(FabricError, match="rail_plans"):
        _fabric.analyze([], lldp=lldp, rail_plans=["gpu00002"])


def test_roce_anomalies_rail_on_wrong_leaf_missing_link_slow_port():
    lldp, nodes = lldpgen.roce_fleet(sus=2, nodes_per_su=4, rails=8)
    lldpgen.swap_rails(lldp, "gpu00003", 2, 3)
    lldpgen.drop_link(lldp, "gpu00005", 6)
    lldpgen.slow_port(nodes, "gpu00007", 1)
    doc = _fabric.analyze([], nodes=nodes, lldp=lldp)
    assert kinds(doc) == ["link_degraded:gpu00007/mlx5_1", "miscabled_rail:gpu00003/mlx5_2", "miscabled_rail:gpu00003/mlx5_3",
                          "missing_rail:gpu00005/rail6"]
    assert [h for h, n in sorted(doc["nodes"].items()) if n["status"] == "quarantined"] == ["gpu00003", "gpu00005", "gpu00007"]
    slow = [a for a in doc["anomalies"] if a["kind"] == "link_degraded"][0]
    assert slow["switch"] == "leaf-r1-su2" and "200 Gb/s" in slow["message"] and "400 Gb/s" in slow["message"]


def test_gid_index_differs_between_rails_gives_no_nccl_gid_index():
    lldp, nodes = lldpgen.roce_fleet(sus=1, nodes_per_su=2, rails=2, storage=False)
    nodes["gpu00001"]["facts"]["nics"][1]["ports"][0]["gids"][3]["index"] = 5
    doc = _fabric.analyze([], nodes=nodes, lldp=lldp)
    assert doc["nodes"]["gpu00001"]["roce"] == {"gid_index": None, "tc": None, "addresses": None}
    assert doc["nodes"]["gpu00002"]["roce"] == {"gid_index": 3, "tc": None, "addresses": None}
    nccl = json.loads(outputs.render(doc, ["green"])[0]["nccl.json"])
    assert nccl["gpu00001"] == {"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1"}


def test_hybrid_nodes_ib_rails_and_ethernet_storage():
    # InfiniBand rails from ibnetdiscover; the storage NIC's LLDP neighbour is another NIC: no rail,
    # no RoCE settings, no missing rail anywhere.
    fab, info = ibnetgen.rail_fabric(sus=1, nodes_per_su=4, rails=4, spines=2, host="gpu%05d")
    nodes, lldp = {}, {}
    for n in range(1, 5):
        name = "gpu%05d" % n
        facts = lldpgen.host_facts(4)
        for nic in facts["nics"][:4]:
            nic["link_layer"] = "InfiniBand"
            nic["ports"] = [{"port": 1, "link_layer": "InfiniBand"}]
        nodes[name] = {"facts": facts, "report": {"status": "pass"}}
        lldp[name] = {"lldp": {"interface": {"enp90s0f0np0": lldpgen.neighbour("storage-leaf-1", "swp%d" % n, "1c:34:da:00:c8:00")}}}
    doc = _fabric.analyze([parse(fab.text(), "ib.out")], nodes=nodes, lldp=lldp, roce_tc=106)
    assert kinds(doc) == []
    node = doc["nodes"]["gpu00002"]
    assert [r["device"] for r in node["rails"]] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    assert node["other_nics"] == [{"hca": "mlx5_4", "device": "mlx5_4", "guid": None, "switch": "storage-leaf-1", "port": "swp2"}]
    assert "roce" not in node
    nccl = json.loads(outputs.render(doc, ["green"])[0]["nccl.json"])
    assert nccl["gpu00002"] == {"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1"}


def test_roce_tc_must_be_a_tos_byte():
    with pytest.raises(FabricError) as err:
        _fabric.analyze([], lldp={}, roce_tc=400)
    assert "roce_tc" in str(err.value) and "0-255" in str(err.value)


def _nameless(entry, mgmt_iface="2"):
    """An lldpd neighbour entry as lldpd writes it when the switch sends no SysName: the chassis'
    fields alone (no name key around them), mgmt-iface beside mgmt-ip."""
    (fields,) = entry["chassis"].values()
    entry["chassis"] = dict(fields, **{"mgmt-iface": mgmt_iface})
    return entry


def test_leaves_without_a_system_name_are_named_by_their_chassis_id():
    """Issue 32: two leaves sending no SysName became one switch named `mgmt-iface` (a field of
    their chassis), and every host's two rails sat on it: all quarantined. Each is its chassis id."""
    lldp, nodes = lldpgen.roce_fleet(sus=1, nodes_per_su=4, rails=2, storage=False)
    for host in lldp:
        for entry in lldp[host]["lldp"]["interface"].values():
            _nameless(entry)
    assert parse_lldp(lldp["gpu00001"], "gpu00001") == [
        {"netdev": "ens0np0", "switch": "chassis:1c:34:da:00:00:00", "port": "swp1"},
        {"netdev": "ens1np0", "switch": "chassis:1c:34:da:00:01:00", "port": "swp1"}]
    doc = _fabric.analyze([], nodes=nodes, lldp=lldp)
    assert kinds(doc) == []
    assert sorted(doc["switches"]) == ["chassis:1c:34:da:00:00:00", "chassis:1c:34:da:00:01:00"]
    assert [n["status"] for n in doc["nodes"].values()] == ["green"] * 4
    assert [(r["rail"], r["leaf"]) for r in doc["nodes"]["gpu00003"]["rails"]] == [
        (0, "chassis:1c:34:da:00:00:00"), (1, "chassis:1c:34:da:00:01:00")]
    # a named switch keeps its name; one with neither name nor id is no neighbour (a warning)
    named = lldpgen.neighbour("leaf-a", "swp9", "1c:34:da:00:09:00")
    anonymous = _nameless(lldpgen.neighbour("x", "swp9", "1c:34:da:00:09:00"))
    del anonymous["chassis"]["id"]
    table = {"lldp": {"interface": {"eth0": named, "eth1": anonymous}}}
    assert [nb["switch"] for nb in parse_lldp(table, "gpu1")] == ["leaf-a", None]
