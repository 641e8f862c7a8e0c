"""The gate reports as the fabric reads them (_fabric/reports.py): the view of a real report, read
member by member from the gate's layout or whole from any other JSON, and the proof that the module,
which keeps only the views, writes the same files byte for byte as the model given every report
whole (the way fabric_inventory read them before): InfiniBand and LLDP fleets whose reports are the
validate_node module's real report on the reference trees."""
import copy
import json
import os
import subprocess
import sys
import time

import pytest
import yaml

from ansible_collections.gpufleet.provision.plugins.module_utils._fabric import model as _fabric
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric import outputs
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric import reports
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric.ibnetdiscover import parse
from ansible_collections.gpufleet.provision.plugins.modules import validate_node
from ansible_collections.gpufleet.provision.plugins.plugin_utils import gate_reports

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
MODULE = os.path.join(REPO, "plugins", "modules", "fabric_inventory.py")
sys.path.insert(0, os.path.join(REPO, "lab", "fabric"))
import ibnetgen  # noqa: E402
import lldpgen  # noqa: E402

STATUSES = ["green", "unknown"]


def real_report(unpacked_tree, tree, profile):
    """{"report", "facts"} of validate_node on a reference tree, as gpu001."""
    with open(os.path.join(REPO, "inventories", "profiles", profile + ".yml")) as handle:
        prof = yaml.safe_load(handle)
    res = validate_node.run({"root": unpacked_tree(tree), "profile": prof, "packages": None, "services": None,
                             "outputs": {}, "output_errors": {}, "node": "gpu001"})
    return {"report": res["report"], "facts": res["facts"]}


def host_report(report, host, guids=None, status="pass"):
    """The real report made host's: its name, its rail NICs' GUIDs (rail -> GUID of the capture)."""
    entry = copy.deepcopy(report)
    entry["report"]["node"], entry["report"]["status"] = host, status
    for nic in entry["facts"]["nics"]:
        nic["node_desc"] = "%s %s" % (host, nic["name"])
        if guids and nic.get("role") == "rail":
            g = guids[nic["rail"]]
            nic["node_guid"] = ":".join(g[i:i + 4] for i in range(0, 16, 4))
    return entry


def gate_text(entry):
    """The report file as the validate role writes it."""
    return gate_reports.render(entry["report"], entry["facts"], time.time())["json"]


def run_module(tmp_path, **args):
    path = tmp_path / "args.json"
    path.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    proc = subprocess.run([sys.executable, MODULE, str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, env=dict(os.environ, PYTHONPATH=os.path.join(REPO, ".build")),
                          timeout=300, check=False)
    result = json.loads(proc.stdout)
    assert not result.get("failed"), result.get("msg")
    return result


def written(dest):
    out = {}
    for folder, dummy, files in os.walk(dest):
        for name in files:
            with open(os.path.join(folder, name)) as handle:
                out[os.path.relpath(os.path.join(folder, name), dest)] = handle.read()
    return out


def old_path(captures, folder, lldp=None, **kw):
    """What fabric_inventory wrote when it kept every report whole: json.load of each, the model, the outputs."""
    nodes = {}
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name)) as handle:
            nodes[name[:-len(".json")]] = json.load(handle)
    doc = _fabric.analyze(captures, nodes=nodes, lldp=lldp, **kw)
    files = outputs.render(doc, STATUSES)[0]
    return dict((rel, text if isinstance(text, str) else text.text()) for rel, text in files.items())


def test_ib_fleet_with_real_reports_writes_the_same_files_as_whole_reports(tmp_path, unpacked_tree):
    report = real_report(unpacked_tree, "hgx-h100-ref", "hgx-h100")
    fab, info = ibnetgen.rail_fabric(sus=2, nodes_per_su=4, rails=8, spines=2)
    fab.swap(info["nic"][("gpu00002", 0)], info["nic"][("gpu00002", 1)])
    capture = tmp_path / "seg1.out"
    capture.write_text(fab.text())
    hosts = [h for su in sorted(info["hosts"]) for h in info["hosts"][su]]
    for layout in ("gate", "compact"):
        folder = tmp_path / layout
        folder.mkdir()
        for i, host in enumerate(hosts + ["gpu00099"]):     # gpu00099: a report, no adapter in the fabric
            entry = host_report(report, host, dict((r, info["nic"].get((host, r), "%016x" % i)) for r in range(8)),
                                "fail" if host == "gpu00005" else "pass")
            (folder / (host + ".json")).write_text(gate_text(entry) if layout == "gate" else json.dumps(entry))
        run_module(tmp_path, ibnetdiscover=[str(capture)], reports_dir=str(folder), dest=str(tmp_path / ("out-" + layout)),
                   topology_statuses=STATUSES)
    want = old_path([parse(fab.text(), str(capture))], str(tmp_path / "gate"))
    doc = json.loads(want["fabric.json"])
    # the reports were used: device names, rails from facts, NUMA and pairs, the gate's verdicts
    assert doc["nodes"]["gpu00003"]["rails"][4]["device"] == "mlx5_6" and doc["nodes"]["gpu00003"]["pairs"]
    assert doc["nodes"]["gpu00005"]["status"] == "quarantined" and doc["nodes"]["gpu00099"]["segments"] == []
    assert sorted(a["id"] for a in doc["anomalies"]) == [
        "miscabled_rail:gpu00002/mlx5_0", "miscabled_rail:gpu00002/mlx5_1", "not_in_fabric:gpu00099"]
    assert written(str(tmp_path / "out-gate")) == want
    # a compact file (another writer): read whole, the same files as the old path on it (the pairs'
    # keys keep the file's order in fabric.json, so the files differ from the gate layout's)
    assert written(str(tmp_path / "out-compact")) == old_path([parse(fab.text(), str(capture))], str(tmp_path / "compact"))


def test_lldp_fleet_with_real_reports_writes_the_same_files_as_whole_reports(tmp_path, unpacked_tree):
    report = real_report(unpacked_tree, "hgx-h100-roce", "hgx-h100-roce")
    netdev = dict((n["rail"], n["netdevs"][0]) for n in report["facts"]["nics"] if n.get("role") == "rail")
    lldp_dir, folder = tmp_path / "lldp", tmp_path / "reports"
    lldp_dir.mkdir()
    folder.mkdir()
    lldp = {}
    for i in range(8):
        host = "gpu%05d" % (i + 1)
        interfaces = dict((netdev[k], lldpgen.neighbour("leaf-r%d-su1" % k, "swp%d" % (i + 1), "1c:34:da:00:%02x:00" % k))
                          for k in netdev)
        if host == "gpu00004":
            interfaces[netdev[2]], interfaces[netdev[3]] = interfaces[netdev[3]], interfaces[netdev[2]]
        lldp[host] = {"lldp": {"interface": interfaces}}
        (lldp_dir / (host + ".json")).write_text(json.dumps(lldp[host], indent=4, sort_keys=True))
        (folder / (host + ".json")).write_text(gate_text(host_report(report, host)))
    run_module(tmp_path, lldp_dir=str(lldp_dir), reports_dir=str(folder), dest=str(tmp_path / "out"),
               topology_statuses=STATUSES, nccl_ib_tc=106)
    want = old_path([], str(folder), lldp=lldp, roce_tc=106)
    doc = json.loads(want["fabric.json"])
    assert doc["nodes"]["gpu00001"]["roce"]["gid_index"] == 3 and doc["nodes"]["gpu00001"]["rails"][0]["speed"] == "400GbE"
    assert sorted(a["id"] for a in doc["anomalies"]) == ["miscabled_rail:gpu00004/mlx5_2", "miscabled_rail:gpu00004/mlx5_3"]
    assert written(str(tmp_path / "out")) == want


def test_the_view_keeps_what_the_model_reads_and_nothing_else(unpacked_tree):
    entry = real_report(unpacked_tree, "hgx-h100-roce", "hgx-h100-roce")
    view = reports.fabric_view(entry)
    assert view["report"] == {"status": entry["report"]["status"]}
    assert sorted(view["facts"]) == ["cpu", "netdevs", "nics", "numa", "pairs"]
    nic = view["facts"]["nics"][0]
    assert sorted(nic) == ["name", "netdevs", "node_desc", "node_guid", "ports", "rail", "role"]
    # of the GID table, the RoCE v2 GIDs with an IPv4 address: the only ones the model counts
    assert nic["ports"] == [{"gids": [{"index": 3, "type": "RoCE v2", "ipv4": "10.64.0.2", "ndev": "ens21np0"}]}]
    assert view["facts"]["netdevs"]["ens21np0"] == {"speed_mbps": 400000}
    assert view["facts"]["cpu"] == {"siblings": entry["facts"]["cpu"]["siblings"]}
    assert view["facts"]["numa"]["nodes"][0] == {"id": 0, "cpus": entry["facts"]["numa"]["nodes"][0]["cpus"]}
    # read from the gate's file member by member, or whole from any other JSON: the same view;
    # NUMA, siblings and pairs alike on two hosts are one object
    shared = {}
    text = gate_text(entry).encode()
    assert reports._layout_view(text, {}) is not None
    first, second = reports.read_view(text, shared), reports.read_view(text, shared)
    assert first == view == reports.read_view(json.dumps(entry).encode(), {})
    assert first["facts"]["numa"] is second["facts"]["numa"] and first["facts"]["nics"] is not second["facts"]["nics"]
    # so are they when read whole, unless they differ as fabric.json would show it (key order, types)
    compact, other = json.dumps(entry).encode(), copy.deepcopy(entry)
    other["facts"]["pairs"][0] = dict(reversed(list(other["facts"]["pairs"][0].items())))
    other["facts"]["cpu"]["siblings"][0][0] = float(other["facts"]["cpu"]["siblings"][0][0])
    views = [reports.read_view(text, shared) for text in (compact, compact, json.dumps(other).encode())]
    assert views[0]["facts"]["pairs"] is views[1]["facts"]["pairs"] and views[0]["facts"]["cpu"] is views[1]["facts"]["cpu"]
    assert views[2]["facts"]["pairs"] is not views[0]["facts"]["pairs"] and views[2]["facts"]["cpu"] is not views[0]["facts"]["cpu"]
    assert views[2]["facts"]["numa"] is views[0]["facts"]["numa"]


@pytest.mark.parametrize("facts,view", [
    (None, None), ([], []), ("", ""),
    ({"hostname": "x"}, {"hostname": "x"}),                                 # none of the keys read: whole
    ({"nics": {"mlx5_0": {}}}, {"nics": {"mlx5_0": {}}}),                   # not a list: as it is
    ({"nics": [3, {"name": "mlx5_0", "fw_ver": "28"}], "os": {}}, {"nics": [3, {"name": "mlx5_0"}]}),
    ({"numa": [1], "cpu": "64", "netdevs": [], "pairs": {"x": 1}}, {"numa": [1], "cpu": "64", "netdevs": [], "pairs": {"x": 1}}),
    ({"nics": [{"ports": "p1"}], "numa": {"nodes": "0-3", "distances": {}}}, {"nics": [{"ports": "p1"}], "numa": {"nodes": "0-3"}}),
    ({"nics": [{"ports": [{"gids": [{"index": 1, "gid": "fe80::1", "type": "RoCE v2", "ipv4": "10.0.0.1"},
                                    {"index": 0, "type": "RoCE v2", "ipv4": None}, "g"], "lid": 3}, {"port": 2}]}]},
     {"nics": [{"ports": [{"gids": [{"index": 1, "type": "RoCE v2", "ipv4": "10.0.0.1"}, "g"]}]}]}),
    ({"netdevs": {"eth0": {"mtu": 9000}, "eth1": None}}, {"netdevs": {"eth0": {}, "eth1": None}}),
])
def test_odd_facts_give_the_model_what_it_would_have_seen(facts, view):
    """Facts of another shape than the gate writes are kept as they are (the model judges them as
    before); facts with none of the keys read stay whole (the model asks whether there are facts).
    The same view whether the file is in the gate's layout or not."""
    entry = {"report": {"status": "pass", "checks": [1]}, "facts": facts}
    assert reports.fabric_view(entry) == {"report": {"status": "pass"}, "facts": view}
    for text in (json.dumps(entry, indent=4, sort_keys=True) + "\n", json.dumps(entry)):
        assert reports.read_view(text.encode(), {}) == {"report": {"status": "pass"}, "facts": view}


def test_a_broken_file_in_the_gate_layout_is_read_whole_and_named_not_json(unpacked_tree):
    entry = real_report(unpacked_tree, "hgx-h100-ref", "hgx-h100")
    text = gate_text(entry)
    broken = text.replace('"rail": 2,', '"rail": 2,,', 1)
    assert broken != text
    with pytest.raises(ValueError):
        reports.read_view(broken.encode(), {})
    with pytest.raises(reports.NotAReport):
        reports.read_view(b'{"facts": {}}', {})
    # a status that is not the report's last member (a newer gate's key after it): read whole, same view
    later = text.replace('\n        "status": "fail"\n    }\n}\n', '\n        "status": "fail",\n        "zz": 1\n    }\n}\n')
    assert later != text and reports._layout_view(later.encode(), {}) is None
    assert reports.read_view(later.encode(), {}) == reports.fabric_view(entry)


def test_a_fifo_among_the_reports_is_an_error_naming_it_and_nothing_is_written(tmp_path):
    """open() of a FIFO waits for a writer forever: the report is read without waiting, and refused."""
    fab, dummy = ibnetgen.rail_fabric(sus=1, nodes_per_su=2, rails=2)
    capture = tmp_path / "seg1.out"
    capture.write_text(fab.text())
    folder = tmp_path / "reports"
    folder.mkdir()
    (folder / "gpu00001.json").write_text(json.dumps({"report": {"status": "pass"}, "facts": {}}))
    os.mkfifo(str(folder / "gpu00002.json"))
    path = tmp_path / "args.json"
    path.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {"ibnetdiscover": [str(capture)], "reports_dir": str(folder),
                                                        "dest": str(tmp_path / "out")}}))
    proc = subprocess.run([sys.executable, MODULE, str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, env=dict(os.environ, PYTHONPATH=os.path.join(REPO, ".build")),
                          timeout=120, check=False)
    result = json.loads(proc.stdout)
    assert result["failed"] and "_traceback" not in result and "exception" not in result
    assert result["msg"] == "gate report %s: cannot read it: not a regular file (a FIFO)" % (folder / "gpu00002.json")
    assert not (tmp_path / "out").exists()
