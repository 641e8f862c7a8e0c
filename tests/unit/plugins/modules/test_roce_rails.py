"""roce_rails through Ansible on a temporary OS root and hardware root, with stateful stand-ins for
ip and mlnx_qos: check mode predicts exactly, the run does it, the second run changes nothing."""
import importlib.util
import json
import os

FAKES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "roce_fakes.py")


def _fakes():
    spec = importlib.util.spec_from_file_location("roce_fakes", FAKES)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


QOS = {"trust": "dscp", "dscp": 26, "pfc_priority": 3, "ecn": True, "tos": 106, "pfc": "0,0,0,1,0,0,0,0"}
RAIL = {"rail": 0, "interface": "ens1f0np0", "cidr": "10.64.0.66/26", "mtu": 9000,
        "routes": [{"to": "10.64.0.0/17", "via": "10.64.0.65"}], "address": "10.64.0.66", "prefix": 26,
        "subnet": "10.64.0.64/26", "gateway": "10.64.0.65"}


def _node(tmp_path, configfs_made=True):
    """A Debian root (ifupdown reading interfaces.d), a ConnectX netdev at its defaults, the fakes."""
    root, hw, bin_ = tmp_path / "root", tmp_path / "hw", tmp_path / "bin"
    (root / "etc/network/interfaces.d").mkdir(parents=True)
    (root / "etc/network/interfaces").write_text("auto lo\niface lo inet loopback\nsource /etc/network/interfaces.d/*\n")
    (hw / "sys/class/net/ens1f0np0/device/infiniband/mlx5_0").mkdir(parents=True)
    (hw / "sys/class/infiniband/mlx5_0/ports/1/gid_attrs/ndevs").mkdir(parents=True)
    (hw / "sys/class/infiniband/mlx5_0/ports/1/gid_attrs/ndevs/0").write_text("ens1f0np0\n")
    for part in ("roce_np", "roce_rp"):
        (hw / ("sys/class/net/ens1f0np0/ecn/%s/enable" % part)).mkdir(parents=True)
        (hw / ("sys/class/net/ens1f0np0/ecn/%s/enable/3" % part)).write_text("0\n")
    (hw / "sys/kernel/config/rdma_cm").mkdir(parents=True)
    if configfs_made:  # the rdma_cm/<dev> folder as the kernel fills it once made
        ports = hw / "sys/kernel/config/rdma_cm/mlx5_0/ports/1"
        ports.mkdir(parents=True)
        (ports / "default_roce_tos").write_text("0\n")
        (ports / "default_roce_mode").write_text("IB/RoCE v1\n")
    bin_.mkdir()
    _fakes().install(bin_)
    state = {"links": {"ens1f0np0": {"mtu": 1500, "up": False, "addrs": ["192.168.7.20/24"], "routes": {}}},
             "qos": {"ens1f0np0": {"trust": "pcp", "pfc": [0] * 8, "dscp2prio": {}}}}
    (tmp_path / "state.json").write_text(json.dumps(state))
    os.environ["ROCE_FAKE_STATE"] = str(tmp_path / "state.json")
    return root, hw, bin_


def _args(root, hw, bin_, **kw):
    args = {"rails": [RAIL], "qos": QOS, "gid_type": "RoCE v2", "root": str(root), "hardware_root": str(hw),
            "ip": str(bin_ / "ip"), "mlnx_qos": str(bin_ / "mlnx_qos")}
    args.update(kw)
    return args


EXPECTED = [
    "ens1f0np0 mtu: 1500 -> 9000",
    "ens1f0np0 link: down -> up",
    "ens1f0np0 address 192.168.7.20/24: 192.168.7.20/24 -> removed",
    "ens1f0np0 address: unset -> 10.64.0.66/26",
    "ens1f0np0 route 10.64.0.0/17: unset -> via 10.64.0.65",
    "ens1f0np0 trust: pcp -> dscp",
    "ens1f0np0 pfc: 0,0,0,0,0,0,0,0 -> 0,0,0,1,0,0,0,0",
    "ens1f0np0 dscp 26 priority: unset -> 3",
    "ens1f0np0 roce_np/enable/3: 0 -> 1",
    "ens1f0np0 roce_rp/enable/3: 0 -> 1",
    "ens1f0np0 default_roce_mode: IB/RoCE v1 -> RoCE v2",
    "ens1f0np0 default_roce_tos: 0 -> 106",
]
FILES = ["etc/network/interfaces.d/gpufleet-roce", "etc/systemd/system/gpufleet-roce-qos.service",
         "usr/local/sbin/gpufleet-roce-qos"]


def test_check_then_run_then_nothing_left(adhoc, tmp_path):
    root, hw, bin_ = _node(tmp_path)
    before = (tmp_path / "state.json").read_text()
    rc, checked = adhoc("roce_rails", _args(root, hw, bin_), check=True)
    assert rc == 0, checked
    assert checked["changed"] is True and checked["runtime_changes"] == EXPECTED and checked["files"] == FILES
    assert checked["unit"] == "gpufleet-roce-qos.service" and checked["reboot_required"] is False
    # check mode: nothing written, no command that changes anything
    assert (tmp_path / "state.json").read_text() == before and not (tmp_path / "state.json.log").exists()
    assert os.listdir(root / "etc/network/interfaces.d") == []

    rc, done = adhoc("roce_rails", _args(root, hw, bin_))
    assert rc == 0 and done["changed"] is True and done["runtime_changes"] == EXPECTED and done["files"] == FILES
    state = json.loads((tmp_path / "state.json").read_text())
    assert state["links"]["ens1f0np0"] == {"mtu": 9000, "up": True, "addrs": ["10.64.0.66/26"],
                                           "routes": {"10.64.0.0/17": "10.64.0.65"}}
    assert state["qos"]["ens1f0np0"] == {"trust": "dscp", "pfc": [0, 0, 0, 1, 0, 0, 0, 0], "dscp2prio": {"26": 3}}
    assert (hw / "sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos").read_text() == "106\n"
    assert (hw / "sys/class/net/ens1f0np0/ecn/roce_rp/enable/3").read_text() == "1\n"
    text = (root / "etc/network/interfaces.d/gpufleet-roce").read_text()
    assert "iface ens1f0np0 inet static\n    address 10.64.0.66/26\n    mtu 9000\n" in text
    assert os.access(root / "usr/local/sbin/gpufleet-roce-qos", os.X_OK)

    rc, again = adhoc("roce_rails", _args(root, hw, bin_))
    assert rc == 0 and again["changed"] is False and again["runtime_changes"] == [] and again["files"] == []


def test_netplan_where_the_node_has_it_and_the_other_style_file_goes(adhoc, tmp_path):
    root, hw, bin_ = _node(tmp_path)
    (root / "etc/netplan").mkdir()
    (root / "etc/network/interfaces.d/gpufleet-roce").write_text("old\n")
    args = _args(root, hw, bin_)
    del args["qos"], args["gid_type"]          # QoS not managed
    rc, done = adhoc("roce_rails", args)
    assert rc == 0 and done["files"] == ["etc/netplan/60-gpufleet-roce.yaml", "etc/network/interfaces.d/gpufleet-roce"]
    assert not (root / "etc/network/interfaces.d/gpufleet-roce").exists()
    assert oct(os.stat(root / "etc/netplan/60-gpufleet-roce.yaml").st_mode & 0o777) == "0o600"   # netplan warns otherwise
    assert done["unit"] is None


def test_rdma_cm_folder_predicted_in_check_mode(adhoc, tmp_path):
    root, hw, bin_ = _node(tmp_path, configfs_made=False)
    rc, checked = adhoc("roce_rails", _args(root, hw, bin_, rails=[], interfaces=["ens1f0np0"]), check=True)
    assert rc == 0
    assert "mlx5_0 rdma_cm folder: unset -> present" in checked["runtime_changes"]
    assert "ens1f0np0 default_roce_tos: unset -> 106" in checked["runtime_changes"]
    assert checked["files"] == ["etc/systemd/system/gpufleet-roce-qos.service", "usr/local/sbin/gpufleet-roce-qos"]


def test_bad_input_fails_naming_it(adhoc, tmp_path):
    root, hw, bin_ = _node(tmp_path)
    rc, res = adhoc("roce_rails", _args(root, hw, bin_, rails=[dict(RAIL, interface="ens9f0np0")]), check=True)
    assert rc != 0 and res["msg"].startswith("roce_rails: interface ens9f0np0: ")
    assert res["msg"].endswith("/ip -j addr show dev ens9f0np0 exited 1: Device \"ens9f0np0\" does not exist.")
    (root / "etc/network/interfaces").write_text("auto lo\niface lo inet loopback\n")
    rc, res = adhoc("roce_rails", _args(root, hw, bin_), check=True)
    assert rc != 0 and "does not read /etc/network/interfaces.d (add 'source /etc/network/interfaces.d/*')" in res["msg"]
    os.remove(root / "etc/network/interfaces")
    rc, res = adhoc("roce_rails", _args(root, hw, bin_), check=True)
    assert rc != 0 and "no netplan" in res["msg"] and "set roce_network_style" in res["msg"]


def test_missing_tool_fails_naming_it(adhoc, tmp_path):
    root, hw, bin_ = _node(tmp_path)
    rc, res = adhoc("roce_rails", _args(root, hw, bin_, mlnx_qos=str(tmp_path / "nowhere/mlnx_qos")), check=True)
    assert rc != 0 and res["msg"] == ("roce_rails: %s not found (MLNX_OFED / DOCA mlnx-tools): it sets the RoCE "
                                      "interfaces at run time" % (tmp_path / "nowhere/mlnx_qos"))
