"""A RoCE twin washed, gated and inventoried like an IB twin (issue 25), on real software: the twin's
rails are real Linux interfaces (veth pairs, lab/twin/rails.py) changed by the real ``ip``, its QoS
is the lab's stateful ``mlnx_qos``, its leaves are real lldpd instances, the node's ``lldpcli`` output
feeds the fabric inventory.

roce1 (conftest.py): host_index 3 of the RoCE profile (supernet 10.64.0.0/14, 8 rails of a /17 block
each, /26 per SU of 32, gateway .1, host addresses from .2): SU 0, place 3 -> .5 on each rail's first
/26, a route to the rail's /17 via .1. Tests in file order: the first needs the fresh dirty twin.
"""
import json
import os
import re

RAILS = ["ens21np0", "ens38np0", "ens55np0", "ens72np0", "ens151np0", "ens168np0", "ens185np0", "ens202np0"]
# rail k: 10.64.0.0/14 + k * /17, SU 0's /26, address .5, gateway .1 (by hand: 2 ** 15 addresses per rail)
FIRST = ["10.64.0", "10.64.128", "10.65.0", "10.65.128", "10.66.0", "10.66.128", "10.67.0", "10.67.128"]
ADDRESSES = dict((nd, "%s.5/26" % net) for nd, net in zip(RAILS, FIRST))
ROCE_CHECKS = ("roce.link", "roce.mtu", "roce.address", "roce.gid", "roce.qos")
GATE_PLAY = "PLAY [Validation gate]"


def _provisioning(proc):
    return proc.stdout.split(GATE_PLAY)[0]


def _links(lab):
    """{ifname: (mtu, operstate, [cidr])} of the twin's real rail interfaces."""
    out = json.loads(lab.ssh("roce1", "ip -j addr show").stdout)
    return dict((link["ifname"], (link["mtu"], link["operstate"],
                                  ["%s/%d" % (a["local"], a["prefixlen"]) for a in link.get("addr_info", []) if a["family"] == "inet"]))
                for link in out if link["ifname"] in RAILS)


def _snapshot(lab):
    return {"links": _links(lab),
            "routes": lab.ssh("roce1", "ip -4 route show").stdout,
            "qos": lab.ssh("roce1", "for i in %s; do mlnx_qos -i $i; done" % " ".join(RAILS)).stdout,
            "files": lab.ssh("roce1", "ls -la /etc/network/interfaces.d /etc/systemd/system /usr/local/sbin; "
                                      "cat /etc/network/interfaces").stdout,
            "view": lab.ssh("roce1", "cd /run/twin && cat sys/class/net/*/mtu proc/net/route "
                                     "sys/class/infiniband/*/ports/1/gids/* | md5sum").stdout,
            "boot_id": lab.boot_id("roce1")}


def _report(out):
    with open(os.path.join(out, "gate", "roce1.json")) as handle:
        return dict((c["id"], c) for c in json.load(handle)["report"]["checks"])


def test_the_dirty_twin_has_real_rails_and_real_lldp_neighbours(lab):
    assert _links(lab) == dict((nd, (1500, "UP", [])) for nd in RAILS)
    assert "Priority trust state: pcp" in lab.ssh("roce1", "mlnx_qos -i ens21np0").stdout
    # the view the gate reads follows the real interfaces
    assert lab.ssh("roce1", "cat /run/twin/sys/class/net/ens21np0/mtu /run/twin/sys/class/net/ens21np0/operstate").stdout.split() == ["1500", "up"]
    table = json.loads(lab.ssh("roce1", "lldpcli -f json show neighbors").stdout)
    found = dict((nd, (list(entry["chassis"])[0], entry["port"]["id"]["value"]))
                 for item in _interfaces(table) for nd, entry in item.items())
    assert found == {"ens21np0": ("su1-leaf-r0", "swp1"), "ens38np0": ("su1-leaf-r1", "swp1"), "ens55np0": ("su1-leaf-r2", "swp1"),
                     "ens72np0": ("su1-leaf-r2", "swp2"), "ens151np0": ("su1-leaf-r4", "swp1"),
                     "ens168np0": ("su1-leaf-r5", "swp1"), "ens185np0": ("su1-leaf-r6", "swp1"), "ens202np0": ("su1-leaf-r7", "swp1")}


def _interfaces(table):
    """lldpcli's interface list: a list of one-key objects, or one object when several (lldpd 1.0 json)."""
    found = (table.get("lldp") or {}).get("interface") or []
    return found if isinstance(found, list) else [dict([item]) for item in found.items()]


def test_check_mode_first_predicts_and_changes_nothing(lab):
    before = _snapshot(lab)
    proc = lab.provision("--check", "--diff", extra={"gpufleet_lab_output": os.path.join(lab.base, "check-out")})
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]
    text = _provisioning(proc)
    assert "ens21np0 mtu: 1500 -> 9000" in text and "ens21np0 address: unset -> 10.64.0.5/26" in text, text[-4000:]
    assert "ens72np0 trust: pcp -> dscp" in text and "ens72np0 pfc: 0,0,0,0,0,0,0,0 -> 0,0,0,1,0,0,0,0" in text
    assert "+    address 10.65.128.5/26" in text                                  # the --diff of the ifupdown file
    assert "reboot: roce1 needs no reboot" in text
    assert _snapshot(lab) == before
    print("\nprovision.yml --check on roce1: %.1f s" % proc.seconds)


def test_wash_gate_and_second_run(lab):
    boot = lab.boot_id("roce1")
    out = os.path.join(lab.base, "out")
    first = lab.provision(extra={"gpufleet_lab_output": out})
    assert first.returncode == 0, first.stdout[-6000:] + first.stderr[-2000:]
    assert "reboot: roce1 needs no reboot" in _provisioning(first)
    assert _links(lab) == dict((nd, (9000, "UP", [ADDRESSES[nd]])) for nd in RAILS)
    assert "10.64.0.0/17 via 10.64.0.1 dev ens21np0" in lab.ssh("roce1", "ip -4 route show").stdout
    qos = lab.ssh("roce1", "mlnx_qos -i ens202np0").stdout
    assert "Priority trust state: dscp" in qos and re.search(r"enabled\s+0\s+0\s+0\s+1\s+0\s+0\s+0\s+0", qos), qos
    checks = _report(out)
    for check_id in ROCE_CHECKS:
        assert checks[check_id]["status"] == "pass", (check_id, checks[check_id])
    # the GID the gate found: index 3, the IPv4 RoCE v2 entry of the one address (0/1 link-local, 2 v1)
    assert checks["roce.gid"]["observed"]["ens21np0"] == ["3 RoCE v2 10.64.0.5"], checks["roce.gid"]
    assert not [c for c in checks.values() if c["status"] == "fail"], [(c["id"], c["reason"]) for c in checks.values()
                                                                     if c["status"] == "fail"]
    second = lab.provision(extra={"gpufleet_lab_output": out})
    assert second.returncode == 0, second.stdout[-4000:]
    again = _provisioning(second)
    assert "changed: [" not in again, [line for line in again.splitlines() if "changed: [" in line]
    # green and stamped by the first run: the second is its gate alone (docs/roles.md section 6)
    assert "converged: roce1 (1): green and unchanged since the last green run" in again, again[:3000]
    assert lab.boot_id("roce1") == boot
    print("\nprovision.yml on roce1: wash %.1f s, second run (converged) %.1f s, no reboot" % (first.seconds, second.seconds))
    _fabric_outputs(os.path.join(out, "fabric"))


def _fabric_outputs(dest):
    """The fabric step of the same run: LLDP from the twin -> rails, leaves, the wrong-leaf anomaly."""
    with open(os.path.join(dest, "fabric.json")) as handle:
        doc = json.load(handle)
    node = doc["nodes"]["roce1"]
    assert [(r["rail"], r["device"], r["leaf"], r["port"]) for r in node["rails"]] == [
        (0, "mlx5_0", "su1-leaf-r0", "swp1"), (1, "mlx5_1", "su1-leaf-r1", "swp1"), (2, "mlx5_2", "su1-leaf-r2", "swp1"),
        (3, "mlx5_3", "su1-leaf-r2", "swp2"), (4, "mlx5_6", "su1-leaf-r4", "swp1"), (5, "mlx5_7", "su1-leaf-r5", "swp1"),
        (6, "mlx5_8", "su1-leaf-r6", "swp1"), (7, "mlx5_9", "su1-leaf-r7", "swp1")]
    # the same anomaly an IB rail on the wrong leaf gives: the leaf's rail is 2 (mlx5_2 alone on it by rail)
    assert [a["id"] for a in doc["anomalies"]] == ["miscabled_rail:roce1/mlx5_3"]
    assert node["status"] == "quarantined" and node["su"] == "su1"
    assert sorted(doc["switches"]) == ["su1-leaf-r%d" % k for k in (0, 1, 2, 4, 5, 6, 7)]
    # the address plan per rail, as the roce role configured it (fabric_roce_profile)
    assert node["roce"]["gid_index"] == 3 and node["roce"]["tc"] == 106
    assert node["roce"]["addresses"][0] == {"rail": 0, "interface": "ens21np0", "cidr": "10.64.0.5/26", "gateway": "10.64.0.1",
                                            "routes": [{"to": "10.64.0.0/17", "via": "10.64.0.1"}]}
    assert [(r["interface"], r["cidr"]) for r in node["roce"]["addresses"]] == [(nd, ADDRESSES[nd]) for nd in RAILS]
    with open(os.path.join(dest, "nccl.json")) as handle:
        assert json.load(handle) == {"roce1": {
            "NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_6:1,mlx5_7:1,mlx5_8:1,mlx5_9:1",
            "NCCL_IB_GID_INDEX": "3", "NCCL_IB_TC": "106"}}
