"""playbooks/fabric.yml end to end with ansible-playbook on the real capture, then the inventory plugin
through `ansible-inventory --graph`/`--list`, as an operator runs them."""
import json
import os
import re
import shutil
import subprocess

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
BIN = os.path.join(REPO, ".venv", "bin")


def tool(name):
    path = os.path.join(BIN, name)
    return path if os.path.exists(path) else shutil.which(name)


def run(args, tmp_path, check=True):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".build"),
               ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false", ANSIBLE_NOCOLOR="1", ANSIBLE_LOCAL_TEMP=str(tmp_path / "atmp"),
               ANSIBLE_HOME=str(tmp_path / "ahome"), ANSIBLE_STDOUT_CALLBACK="default")
    proc = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          env=env, cwd=str(tmp_path), timeout=300)
    if check:
        assert proc.returncode == 0, proc.stdout[-4000:]
    return proc


def recap(output):
    m = re.search(r"localhost\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", output)
    assert m, output[-2000:]
    return dict(zip(("ok", "changed", "unreachable", "failed"), map(int, m.groups())))


@pytest.fixture
def setup(tmp_path, realdata):
    if not tool("ansible-playbook"):
        pytest.skip("ansible-playbook absent (make venv)")
    reports = tmp_path / "reports"
    reports.mkdir()
    facts = {"nics": [{"name": "mlx5_%d" % i, "node_desc": "a08-p1-dgx-04-c01 mlx5_%d" % i, "role": "rail",
                       "rail": r} for r, i in enumerate((0, 1, 4, 5))],
             "numa": {"nodes": [{"id": 0, "cpus": [0, 104]}]}, "cpu": {"siblings": [[0, 104]]}, "pairs": []}
    for host, status in (("a08-p1-dgx-04-c01", "pass"), ("a08-p1-dgx-04-c02", "pass"), ("a08-p1-dgx-04-c03", "fail")):
        (reports / ("%s.json" % host)).write_text(json.dumps(
            {"report": {"status": status, "node": host, "profile": "hgx-h100", "checks": []},
             "facts": facts if host.endswith("c01") else {}}))
    extra = {"fabric_dest": str(tmp_path / "out"), "fabric_reports_dir": str(reports),
             "fabric_ibnetdiscover": [os.path.join(realdata, "ibnetdiscover", "superpod-h100-example.out")]}
    (tmp_path / "extra.json").write_text(json.dumps(extra))
    return tmp_path


def playbook(tmp_path, *more):
    return run([tool("ansible-playbook"), os.path.join(REPO, "playbooks", "fabric.yml"), "-e", "@extra.json"] + list(more),
               tmp_path)


def test_playbook_writes_then_is_idempotent(setup):
    tmp_path = setup
    out = tmp_path / "out"
    check = playbook(tmp_path, "--check")
    assert recap(check.stdout)["changed"] == 1 and not out.exists()
    first = playbook(tmp_path)
    assert recap(first.stdout)["changed"] == 1
    assert "Fabric inventory: 119 nodes, 4 rails, 8 SUs" in first.stdout
    doc = json.loads((out / "fabric.json").read_text())
    assert doc["nodes"]["a08-p1-dgx-04-c01"]["status"] == "green"
    assert doc["nodes"]["a08-p1-dgx-04-c03"]["status"] == "quarantined"
    assert doc["nodes"]["a08-p1-dgx-04-c01"]["numa"] == [{"id": 0, "cpus": [0, 104]}]
    topo = (out / "topology.conf").read_text()
    assert "SwitchName=su4-b1 Nodes=a08-p1-dgx-04-c[01-02]" in topo
    assert json.loads((out / "nccl.json").read_text())["a08-p1-dgx-04-c01"] == {"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1,mlx5_4:1,mlx5_5:1"}
    items = dict((i["metadata"]["name"], i["metadata"]) for i in json.loads((out / "labels.json").read_text())["items"])
    assert items["a08-p1-dgx-04-c03"]["labels"]["fabric.gpufleet.io/status"] == "quarantined"
    assert items["a05-p1-dgx-01-c01"]["annotations"] == {"fabric.gpufleet.io/quarantine": "missing_rail:a05-p1-dgx-01-c01/rail2"}
    assert not (out / "labels").exists() and not (out / "nccl").exists()   # one file per fabric by default
    for name in ("topology.conf", "topology-block.conf", "labels.json", "nccl.json"):
        text = (out / name).read_text()
        assert "localhost" not in text and "ubuntu" not in text, name
    second = playbook(tmp_path)
    assert recap(second.stdout)["changed"] == 0
    diff = playbook(tmp_path, "--check", "--diff")
    assert recap(diff.stdout)["changed"] == 0
    # The operator accepts the missing rail-2 leaf of su1: its hosts are no longer quarantined.
    accept = playbook(tmp_path, "-e", '{"fabric_accept": ["missing_rail:*/rail2"], "fabric_per_node_files": true}')
    assert recap(accept.stdout)["changed"] == 1
    doc = json.loads((out / "fabric.json").read_text())
    assert doc["nodes"]["a05-p1-dgx-01-c01"]["status"] == "unknown" and doc["nodes"]["a05-p1-dgx-01-c01"]["accepted"]
    assert (out / "nccl" / "a08-p1-dgx-04-c01.env").read_text().splitlines()[-1] == "NCCL_IB_HCA==mlx5_0:1,mlx5_1:1,mlx5_4:1,mlx5_5:1"
    assert not [p for p in os.listdir(str(out / "labels")) if "localhost" in p or "ubuntu" in p]


def test_inventory_graph(setup):
    tmp_path = setup
    playbook(tmp_path)
    (tmp_path / "site.fabric.yml").write_text("plugin: gpufleet.provision.fabric\npath: out/fabric.json\n"
                                              "keyed_groups:\n  - key: fabric.block\n    prefix: blk\n")
    graph = run([tool("ansible-inventory"), "-i", "site.fabric.yml", "--graph", "status_green"], tmp_path).stdout
    assert re.findall(r"\|--(\S+)", graph) == ["a08-p1-dgx-04-c01", "a08-p1-dgx-04-c02"]
    graph = run([tool("ansible-inventory"), "-i", "site.fabric.yml", "--graph", "leaf_B09_P1_IBLEAF_03_08"], tmp_path).stdout
    hosts = re.findall(r"\|--(\S+)", graph)
    # grep: 13 b08 hosts' HCA-5 and b08-...-c01's HCA-6 (swapped) sit on that leaf; "ubuntu mlx5_0" too, but
    # a default host name is no host: combined with the node inventory it would turn delegate_to localhost into SSH.
    assert len(hosts) == 14 and "b08-p1-dgx-08-c01" in hosts and "ubuntu" not in hosts
    listing = json.loads(run([tool("ansible-inventory"), "-i", "site.fabric.yml", "--list"], tmp_path).stdout)
    assert not {"localhost", "ubuntu"} & set(listing["_meta"]["hostvars"])
    adapters = listing["unmapped_adapters"]["children"]
    assert len(adapters) == 69 + 5 and "adapter_c470bd0300a49432" in adapters      # unnamed + default names
    assert listing["blk_su8_b2"]["hosts"] == ["b08-p1-dgx-08-c01"]
    # 119 hosts: 3 with a gate report, 11 quarantined by the fabric (su1 lacks rail 2, one swapped pair)
    assert len(listing["status_unknown"]["hosts"]) == 119 - 3 - 11
    assert len(listing["quarantined_by_fabric"]["hosts"]) == 11
    su = listing["_meta"]["hostvars"]["a08-p1-dgx-04-c01"]["fabric"]["su"]
    # ansible-core 2.19 marks inventory strings as unsafe in --list: {"__ansible_unsafe": "su4"}
    assert (su.get("__ansible_unsafe") if isinstance(su, dict) else su) == "su4"


def test_role_refuses_missing_inputs(setup):
    tmp_path = setup
    proc = run([tool("ansible-playbook"), os.path.join(REPO, "playbooks", "fabric.yml"), "-e", "fabric_dest=/nonexistent-never"],
               tmp_path, check=False)
    assert proc.returncode != 0
    assert "at least one of fabric_ibnetdiscover" in proc.stdout
    assert not os.path.exists("/nonexistent-never")


def test_collect_then_build(setup):
    """The collect entry point on a host (localhost here), with the capture commands replaced by `cat`
    of the real capture and of an lldpctl JSON file (no InfiniBand HCA or lldpd on this machine)."""
    tmp_path = setup
    real = os.path.join(os.path.dirname(json.loads((tmp_path / "extra.json").read_text())["fabric_ibnetdiscover"][0]),
                        "superpod-h100-example.out")
    lldp = {"lldp": {"interface": {"eth0": {"chassis": {"tor-r0": {"id": {"type": "mac", "value": "0"}}},
                                            "port": {"id": {"type": "ifname", "value": "Ethernet7"}}}}}}
    (tmp_path / "lldp.json").write_text(json.dumps(lldp))
    (tmp_path / "hosts.yml").write_text(
        "all:\n  children:\n    fabric_capture:\n      hosts:\n        gpu-roce-01:\n"
        "          ansible_connection: local\n          ansible_python_interpreter: %s\n" % os.path.join(BIN, "python"))
    extra = {"fabric_dest": str(tmp_path / "out2"), "fabric_capture_dir": str(tmp_path / "captures"),
             "fabric_collect_ibnetdiscover": True, "fabric_collect_lldp": True, "fabric_segment": "seg-a",
             "fabric_ibnetdiscover_command": ["cat", real], "fabric_lldp_command": ["cat", str(tmp_path / "lldp.json")],
             "fabric_topology_statuses": ["green", "unknown"]}
    (tmp_path / "extra2.json").write_text(json.dumps(extra))
    proc = run([tool("ansible-playbook"), "-i", "hosts.yml", os.path.join(REPO, "playbooks", "fabric.yml"), "-e", "@extra2.json"],
               tmp_path)
    with open(real) as handle:
        # command output loses trailing blank lines; everything else is kept byte for byte
        assert (tmp_path / "captures" / "ibnetdiscover" / "seg-a.out").read_text() == handle.read().rstrip("\n") + "\n"
    assert json.loads((tmp_path / "captures" / "lldp" / "gpu-roce-01.json").read_text()) == lldp
    doc = json.loads((tmp_path / "out2" / "fabric.json").read_text())
    assert doc["segments"] == ["roce", "seg-a"]
    assert doc["nodes"]["gpu-roce-01"]["rails"][0]["leaf"] == "tor-r0"
    assert len(doc["nodes"]) == 120
    assert "Fabric inventory: 120 nodes" in proc.stdout


def test_delegate_to_localhost_stays_local_with_the_fabric_inventory(setup):
    """Issue 14: the capture names adapters `localhost ...`; were they hosts, `delegate_to: localhost`
    would go over SSH to a machine called localhost and fail UNREACHABLE."""
    tmp_path = setup
    playbook(tmp_path)
    (tmp_path / "site.fabric.yml").write_text("plugin: gpufleet.provision.fabric\npath: out/fabric.json\n")
    (tmp_path / "delegate.yml").write_text(
        "- hosts: status_unknown\n  gather_facts: false\n  tasks:\n"
        "    - name: Runs on the controller\n      ansible.builtin.command: /bin/true\n"
        "      delegate_to: localhost\n      run_once: true\n      changed_when: false\n")
    proc = run([tool("ansible-playbook"), "-i", "site.fabric.yml", "delegate.yml",
                "-e", "ansible_python_interpreter=%s" % os.path.join(BIN, "python")], tmp_path, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "UNREACHABLE" not in proc.stdout and "ok: [" in proc.stdout
