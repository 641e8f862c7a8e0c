"""The roce role with a local connection on a temporary OS root and hardware root, ip and mlnx_qos
replaced by the stateful stand-ins of tests/unit/plugins/modules/roce_fakes.py: check mode predicts
and changes nothing, the run configures the rail, the second run is changed=0; an InfiniBand profile
skips with its reason. (The QoS boot unit is enabled through systemd, which this machine's root is
not ours to touch: QoS runs in check mode here, and in full in test_roce_rails.py.)"""
import importlib.util
import json
import os
import subprocess
import sys

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
FAKES = os.path.join(REPO, "tests", "unit", "plugins", "modules", "roce_fakes.py")

# GPUFLEET_ANSIBLE_PLAYBOOK: another ansible-core (the lowest supported: .venv-2.16/bin/ansible-playbook)
PLAYBOOK_BIN = os.environ.get("GPUFLEET_ANSIBLE_PLAYBOOK") or os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
PROFILE = {"name": "roce-test", "nic": {"rails": 1}, "ib": {"link_layer": "Ethernet"},
           "roce": {"addressing": {"supernet": "10.64.0.0/16", "rail_prefix": 24}, "mtu": 9000}}

pytestmark = pytest.mark.skipif(not os.path.exists(PLAYBOOK_BIN), reason="ansible-playbook not in this virtualenv")


def _fakes():
    spec = importlib.util.spec_from_file_location("roce_fakes", FAKES)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def node(tmp_path):
    root, hw, bin_ = tmp_path / "root", tmp_path / "hw", tmp_path / "bin"
    (root / "etc/network/interfaces.d").mkdir(parents=True)
    (root / "etc/network/interfaces").write_text("source /etc/network/interfaces.d/*\n")
    (hw / "sys/class/net/ens1f0np0").mkdir(parents=True)
    bin_.mkdir()
    _fakes().install(bin_)
    state = {"links": {"ens1f0np0": {"mtu": 1500, "up": True, "addrs": [], "routes": {}}},
             "qos": {"ens1f0np0": {"trust": "pcp", "pfc": [0] * 8, "dscp2prio": {}}}}
    (tmp_path / "state.json").write_text(json.dumps(state))
    return tmp_path


def run_role(tmp_path, profile, check=False, host_index=5):
    (tmp_path / "profile.yml").write_text(yaml.safe_dump(profile))
    play = [{"hosts": "localhost", "connection": "local", "gather_facts": False,
             "module_defaults": {"gpufleet.provision.roce_rails": {"root": str(tmp_path / "root")}},
             "vars": {"gpufleet_profile": str(tmp_path / "profile.yml"),
                      "roce_interfaces": ["ens1f0np0"], "roce_hardware_root": str(tmp_path / "hw"),
                      "roce_ip": str(tmp_path / "bin/ip"), "roce_mlnx_qos": str(tmp_path / "bin/mlnx_qos")},
             "roles": ["gpufleet.provision.roce"]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    # the index is an inventory variable (INI: a string), as the fleet check reads it from hostvars
    (tmp_path / "hosts.ini").write_text("localhost host_index=%s\n" % host_index)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".build"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
               ANSIBLE_PYTHON_INTERPRETER=sys.executable, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default",
               ROCE_FAKE_STATE=str(tmp_path / "state.json"))
    cmd = [PLAYBOOK_BIN, "-i", str(tmp_path / "hosts.ini"), str(tmp_path / "play.yml"), "--diff"] + (["--check"] if check else [])
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False)


def recap(proc):
    line = [text for text in proc.stdout.splitlines() if text.startswith("localhost") and "ok=" in text][-1]
    return dict(part.split("=") for part in line.split()[2:])


def test_check_run_and_second_run(node):
    state = (node / "state.json").read_text()
    proc = run_role(node, PROFILE, check=True)
    assert proc.returncode == 0, proc.stdout[-4000:]
    # host_index 5: 10.64.0.0/24 + 2 + 5
    assert "ens1f0np0 mtu: 1500 -> 9000" in proc.stdout and "ens1f0np0 address: unset -> 10.64.0.7/24" in proc.stdout
    assert "+    address 10.64.0.7/24" in proc.stdout                      # the --diff of the ifupdown file
    assert (node / "state.json").read_text() == state and os.listdir(node / "root/etc/network/interfaces.d") == []

    proc = run_role(node, PROFILE)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert json.loads((node / "state.json").read_text())["links"]["ens1f0np0"]["addrs"] == ["10.64.0.7/24"]
    assert "address 10.64.0.7/24" in (node / "root/etc/network/interfaces.d/gpufleet-roce").read_text()

    proc = run_role(node, PROFILE)
    assert proc.returncode == 0 and recap(proc)["changed"] == "0", proc.stdout[-4000:]
    assert "run time as planned" in proc.stdout
    assert "roce: 1 rails (ens1f0np0), index 5;" in proc.stdout


def test_qos_predicted_in_check_mode(node):
    profile = dict(PROFILE, roce=dict(PROFILE["roce"], qos={}))
    proc = run_role(node, profile, check=True)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "ens1f0np0 trust: pcp -> dscp" in proc.stdout and "ens1f0np0 pfc: 0,0,0,0,0,0,0,0 -> 0,0,0,1,0,0,0,0" in proc.stdout
    assert "roce: would enable gpufleet-roce-qos.service (new unit file)" in proc.stdout


def test_infiniband_profile_skips_with_its_reason(node):
    proc = run_role(node, {"name": "ib", "nic": {"rails": 8}, "ib": {"link_layer": "InfiniBand"}})
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "roce: skipped on localhost: no roce section in the profile (InfiniBand rails)" in proc.stdout
    assert recap(proc)["changed"] == "0"


def test_bad_plan_fails_in_preflight_naming_it(node):
    proc = run_role(node, PROFILE, host_index=300)   # a /24 holds 253 hosts from offset 2
    assert proc.returncode != 0
    assert ("host localhost (host_index 300) rail 0: subnet 10.64.0.0/24 is exhausted: it holds 253 hosts from "
            "host_offset 2, this host is place 300") in proc.stdout, proc.stdout[-4000:]
    assert os.listdir(node / "root/etc/network/interfaces.d") == []


def test_rail_without_netdev_fails_naming_it(node):
    profile = dict(PROFILE, nic={"rails": 2})
    (node / "profile.yml").write_text(yaml.safe_dump(profile))
    proc = run_role(node, profile)
    assert proc.returncode != 0
    assert "roce on localhost: no netdev for rail(s) 1" in proc.stdout, proc.stdout[-4000:]
