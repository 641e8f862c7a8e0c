"""fabric_inventory module: run as Ansible runs it (a child Python with the JSON arguments file)."""
import json
import os
import subprocess
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
BUILD = os.path.join(REPO, ".build")
MODULE = os.path.join(REPO, "plugins", "modules", "fabric_inventory.py")
sys.path.insert(0, os.path.join(REPO, "lab", "fabric"))
import ibnetgen  # noqa: E402


def run(tmp_path, check=False, diff=False, **args):
    path = tmp_path / ("args-%d.json" % len(list(tmp_path.glob("args-*.json"))))
    params = dict(args)
    params["_ansible_check_mode"] = check
    params["_ansible_diff"] = diff
    path.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": params}))
    env = dict(os.environ, PYTHONPATH=BUILD)
    proc = subprocess.run([sys.executable, MODULE, str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, env=env, timeout=120, check=False)
    assert proc.stdout, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture
def capture(tmp_path):
    fab, info = ibnetgen.rail_fabric(sus=2, nodes_per_su=3, rails=2)
    fab.move(info["nic"][("gpu00002", 0)], info["leaf"][(1, 1)], 2)
    fab.move(info["nic"][("gpu00002", 1)], info["leaf"][(1, 0)], 2)
    path = tmp_path / "seg1.out"
    path.write_text(fab.text())
    return str(path)


def test_check_then_write_then_idempotent(tmp_path, capture):
    dest = str(tmp_path / "out")
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "gpu00001.json").write_text(json.dumps({"report": {"status": "pass", "checks": []}, "facts": {}}))
    (reports / "gpu00002.json").write_text(json.dumps({"report": {"status": "fail", "checks": []}, "facts": {}}))
    args = dict(ibnetdiscover=[capture], dest=dest, reports_dir=str(reports))
    first = run(tmp_path, check=True, diff=True, **args)
    assert first["changed"] is True and not os.path.exists(dest)
    assert "fabric.json" in first["changed_files"] and "topology.conf" in first["changed_files"]
    topo = [d for d in first["diff"] if d["after_header"].endswith("/topology.conf")][0]
    assert "SwitchName=su1-b1 Nodes=gpu00001" in topo["after"]
    second = run(tmp_path, **args)
    assert second["changed"] is True and sorted(second["changed_files"]) == sorted(first["changed_files"])
    with open(os.path.join(dest, "fabric.json")) as handle:
        doc = json.load(handle)
    assert doc["nodes"]["gpu00002"]["status"] == "quarantined"
    assert [a["host"] for a in doc["anomalies"] if a["kind"] == "miscabled_rail"] == ["gpu00002", "gpu00002"]
    assert second["summary"]["status"] == {"green": 1, "quarantined": 1, "unknown": 4}
    third = run(tmp_path, check=True, **args)
    assert third["changed"] is False and third["changed_files"] == []
    fourth = run(tmp_path, **args)
    assert fourth["changed"] is False


def test_bad_inputs_fail_clearly_and_change_nothing(tmp_path, capture):
    dest = str(tmp_path / "out")
    res = run(tmp_path, ibnetdiscover=[str(tmp_path / "nope.out")], dest=dest)
    assert res["failed"] and "ibnetdiscover file %s: cannot read it" % (tmp_path / "nope.out") in res["msg"]
    bad = tmp_path / "bad-reports"
    bad.mkdir()
    (bad / "gpu00001.json").write_text("{not json")
    res = run(tmp_path, ibnetdiscover=[capture], dest=dest, reports_dir=str(bad))
    assert res["failed"] and "gate report %s: not JSON" % (bad / "gpu00001.json") in res["msg"]
    plan = tmp_path / "plan.yml"
    plan.write_text("sus: [1, 2]\n")
    res = run(tmp_path, ibnetdiscover=[capture], dest=dest, cabling_plan=str(plan))
    assert res["failed"] and "cabling_plan: expected a mapping with a `sus` mapping" in res["msg"]
    res = run(tmp_path, dest=dest)
    assert res["failed"] and "no fabric data" in res["msg"]
    assert not os.path.exists(dest)
    assert "Traceback" not in json.dumps(res)


def test_garbled_capture_warns_with_line_numbers(tmp_path, capture):
    with open(capture) as handle:
        lines = handle.read().splitlines()
    lines[9] = "[3]\tgarbage"
    path = tmp_path / "garbled.out"
    path.write_text("\n".join(lines) + "\n")
    res = run(tmp_path, ibnetdiscover=[str(path)], dest=str(tmp_path / "out"))
    assert not res.get("failed"), res
    # ansible-core 2.19 returns warnings as structured objects; older ones as strings
    assert any("garbled.out:10: garbled port line" in json.dumps(w) for w in res["warnings"])
    # the same capture cut short holds no whole fabric: refused, naming the file, nothing written
    path.write_text("\n".join(lines[:-5]) + "\n")
    res = run(tmp_path, ibnetdiscover=[str(path)], dest=str(tmp_path / "cut"))
    assert res["failed"] and res["msg"].startswith("ibnetdiscover file %s: holds no fabric: truncated record" % path)
    assert not os.path.exists(str(tmp_path / "cut"))


def test_result_carries_counts_and_samples_not_every_anomaly(tmp_path):
    # 6 SUs x 3 nodes x 6 rails with one fault of each kind planted: 18 hosts, 3 in su6 miss rail 5.
    fab, info = ibnetgen.rail_fabric(sus=6, nodes_per_su=3, rails=6, spines=2, shape="plane")
    planted = ibnetgen.plant_anomalies(fab, info)
    path = tmp_path / "planted.out"
    path.write_text(fab.text())
    dest = tmp_path / "out"
    res = run(tmp_path, ibnetdiscover=[str(path)], dest=str(dest), samples=1)
    assert not res.get("failed"), res
    with open(str(dest / "fabric.json")) as handle:
        text = handle.read()
    assert "\n" not in text.rstrip("\n") and ": " not in text[:200]          # compact
    doc = json.loads(text)
    assert sorted(a["id"] for a in doc["anomalies"]) == planted
    kinds = sorted(set(a["kind"] for a in doc["anomalies"]))
    assert sorted(a["kind"] for a in res["anomaly_samples"]) == kinds       # one per kind
    assert "anomalies" not in res
    assert sum(res["summary"]["anomalies"].values()) == len(planted)
    assert sorted(res["quarantined"][info["hosts"][1][0]]) == sorted(
        i for i in planted if i.startswith("miscabled_rail:"))
    assert sorted(res["changed_files"]) == ["fabric.json", "labels.json", "nccl.json", "summary.txt",
                                            "topology-block.conf", "topology.conf"]
    assert res["changed_count"] == 6 and res["notes_total"] == 0
    assert sorted(os.listdir(str(dest))) == sorted(res["changed_files"])     # nothing staged left behind


def test_accept_and_per_node_files(tmp_path, capture):
    dest = tmp_path / "out"
    res = run(tmp_path, ibnetdiscover=[capture], dest=str(dest), per_node_files=True,
              accept=["miscabled_rail:gpu00002/*"])
    assert not res.get("failed"), res
    assert res["quarantined"] == {} and res["summary"]["accepted"] == 2
    assert sorted(os.listdir(str(dest / "labels"))) == ["gpu%05d.json" % i for i in range(1, 7)]
    again = run(tmp_path, check=True, ibnetdiscover=[capture], dest=str(dest))
    # without per-node files the old ones would go; check mode says so and touches nothing
    assert again["changed"] is True and again["changed_count"] == 12 + 5
    assert len(os.listdir(str(dest / "labels"))) == 6 and not [f for f in os.listdir(str(dest)) if f.endswith(".tmp")]
    res = run(tmp_path, ibnetdiscover=[capture], dest=str(dest), samples=-1)
    assert res["failed"] and "samples: must be 0 or more" in res["msg"]
