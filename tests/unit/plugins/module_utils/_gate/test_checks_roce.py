"""The Ethernet rail checks (roce.*) and the RoCE part of transport.nccl: parsers over real tool
outputs (cited), and the checks' skip / error paths on the RoCE twin's tree (hgx-h100-roce).
The one-fault-one-red catalog is tests/unit/fault_catalog. mlnx_qos is read by the roce role's parser
(_roce/qos.py, tested there on real outputs), through the check's wrapper that refuses what is no
mlnx_qos output; the catalog's mlnx_qos outputs have the layout of a real MLNX_OFED 5 run."""
import copy
import os

import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._desired import profile as _profile
from ansible_collections.gpufleet.provision.plugins.module_utils._gate import gate
from ansible_collections.gpufleet.provision.plugins.module_utils._gate.checks.roce import parse_qos as parse_mlnx_qos
from ansible_collections.gpufleet.provision.plugins.module_utils._gate.parsers.nccl import parse_nccl_debug
from ansible_collections.gpufleet.provision.plugins.module_utils._node.facts import collect

# NCCL 2.27.3 over eight RoCE HCAs (vllm-project/vllm#27521, https://github.com/vllm-project/vllm/pull/27521)
# and the environment lines of an NCCL RoCE run with NCCL_IB_GID_INDEX=3 NCCL_IB_TC=106 (a public
# sglang disaggregation log; the same lines as in NVIDIA/nccl#1131).
NCCL_ROCE = "".join(line + "\n" for line in [
    'os-node-created-f8h54:5020:5020 [5] NCCL INFO NCCL version 2.27.3+cuda12.9',
    'os-node-created-f8h54:5020:5020 [5] NCCL INFO NCCL_SOCKET_IFNAME set by environment to =ens2f5',
    'os-node-created-f8h54:5020:5020 [5] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [2]mlx5_2:1/RoCE [3]mlx5_3:1/RoCE'
    ' [4]mlx5_4:1/RoCE [5]mlx5_5:1/RoCE [6]mlx5_6:1/RoCE [7]mlx5_7:1/RoCE [RO]; OOB ens2f5:192.168.42.210<0>',
    'os-node-created-f8h54:5020:5020 [5] NCCL INFO Initialized NET plugin IB',
    'os-node-created-f8h54:5020:5020 [5] NCCL INFO Using network IB',
    'tpgds-aihub0003:3828982:3830470 [6] NCCL INFO NCCL_IB_GID_INDEX set by environment to 3.',
    'tpgds-aihub0003:3828982:3830470 [6] NCCL INFO NCCL_IB_TC set by environment to 106.',
    '',
])


@pytest.mark.parametrize("text", ["", "Cannot get QoS settings: Operation not supported\n",
                                  "PFC configuration:\n priority 0 1 2 3 4 5 6 7\n enabled 0 0 0 1\n"])
def test_mlnx_qos_refuses_what_it_is_not(text):
    with pytest.raises(ValueError):
        parse_mlnx_qos(text)


def test_nccl_roce_lines():
    parsed = parse_nccl_debug(NCCL_ROCE)
    assert parsed["transports"] == {"IB"}
    assert parsed["links"] == dict(("mlx5_%d" % i, "RoCE") for i in range(8))
    assert parsed["env"] == {"NCCL_SOCKET_IFNAME": "=ens2f5", "NCCL_IB_GID_INDEX": "3", "NCCL_IB_TC": "106"}
    assert parsed["version"] == "2.27.3"


# ------------------------------------------------------------------ checks on the RoCE twin's tree

def roce_profile():
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "..", "inventories", "profiles", "hgx-h100.yml")) as handle:
        import yaml
        profile = yaml.safe_load(handle)
    profile["ib"] = {"link_layer": "Ethernet", "min_rate_gbps": 400, "scope": "rail"}
    profile["roce"] = {"addressing": {"rails": [{"rail": k, "subnet": "10.64.%d.0/20" % (16 * k)} for k in range(8)]},
                       "mtu": 9000, "qos": {"trust": "dscp", "dscp": 26, "pfc_priority": 3}}
    return profile


def run(root, profile=None, outputs=None, checks=None):
    facts = collect(root)[0]
    prof = _profile.validate(copy.deepcopy(profile or roce_profile()), gate.CHECK_IDS)
    report = gate.evaluate(gate.Inputs(facts, prof, outputs=outputs or {}), checks=checks)
    return dict((c["id"], (c["status"], c["reason"])) for c in report["checks"])


ROCE = ["roce.link", "roce.mtu", "roce.address", "roce.gid", "roce.qos"]


def test_without_mlnx_qos_output_qos_is_no_data_never_pass(unpacked_tree):
    got = run(unpacked_tree("hgx-h100-roce"), checks=ROCE)
    assert [got[c][0] for c in ROCE] == ["pass", "pass", "pass", "pass", "skip"]
    assert got["roce.qos"][1].startswith("no data: mlnx_qos_ens21np0 not collected")


def test_garbage_mlnx_qos_is_an_error_naming_the_output(unpacked_tree):
    outputs = {"mlnx_qos_ens21np0": "mlnx_qos: command not found\n"}
    got = run(unpacked_tree("hgx-h100-roce"), outputs=outputs, checks=["roce.qos"])
    assert got["roce.qos"][0] == "error" and "outputs.mlnx_qos_ens21np0" in got["roce.qos"][1]


def test_without_proc_net_the_address_check_has_no_data(unpacked_tree):
    root = unpacked_tree("hgx-h100-roce")
    os.remove(os.path.join(root, "proc/net/fib_trie"))
    got = run(root, checks=["roce.address"])
    assert got["roce.address"] == ("skip", "no data: proc/net/fib_trie missing")


def test_without_the_netdev_folder_the_link_checks_have_no_data(unpacked_tree):
    root = unpacked_tree("hgx-h100-roce")
    os.remove(os.path.join(root, "sys/class/net/ens38np0"))
    got = run(root, checks=["roce.link", "roce.mtu"])
    assert got["roce.link"] == ("skip", "no data: sys/class/net/ens38np0") == got["roce.mtu"]


def test_an_ib_profile_is_not_asked(unpacked_tree):
    profile = roce_profile()
    del profile["roce"]
    profile["ib"]["link_layer"] = "InfiniBand"
    got = run(unpacked_tree("hgx-h100-roce"), profile=profile, checks=ROCE)
    assert set(s for s, _r in got.values() if s) == {"skip"}


def test_hybrid_node_checks_the_named_netdevs(unpacked_tree):
    # InfiniBand rails elsewhere, RoCE on the two storage ports: roce.interfaces names them; the
    # second port is down and on no planned subnet.
    profile = roce_profile()
    profile["ib"] = {"link_layer": "InfiniBand", "min_rate_gbps": 200}
    profile["roce"]["interfaces"] = ["enp90s0f0np0", "enp90s0f1np1"]
    profile["roce"]["addressing"] = {"rails": [{"rail": 0, "subnet": "192.168.50.0/24"}, {"rail": 1, "subnet": "192.168.51.0/24"}]}
    profile["roce"]["mtu"] = 1500
    got = run(unpacked_tree("hgx-h100-roce"), profile=profile, checks=["roce.link", "roce.mtu", "roce.address"])
    assert got["roce.link"] == ("fail", "enp90s0f1np1 down (RDMA port ACTIVE)")
    assert got["roce.mtu"] == ("pass", "ok")
    assert got["roce.address"] == ("fail", "enp90s0f1np1 (rail 1) has no IPv4 address")


def test_routed_rails_in_two_sus_fail(unpacked_tree):
    profile = roce_profile()
    profile["roce"]["addressing"] = {"su_size": 32, "rails": [{"rail": k, "su": su, "subnet": "10.64.%d.0/21" % (16 * k + 8 * su)}
                                                              for k in range(8) for su in (0, 1)]}
    root = unpacked_tree("hgx-h100-roce")
    # rail 7 in SU 1's subnet (10.64.120.0/21), the others in SU 0's: a host split between two leaves
    for rel, old, new in (("proc/net/route", "ens202np0\t0070400A\t00000000\t0001\t0\t0\t0\t00F0FFFF",
                           "ens202np0\t0078400A\t00000000\t0001\t0\t0\t0\t00F8FFFF"),
                          ("proc/net/fib_trie", "|-- 10.64.112.2\n", "|-- 10.64.120.2\n")):
        path = os.path.join(root, rel)
        with open(path) as handle:
            text = handle.read()
        assert old in text
        os.chmod(path, 0o644)
        with open(path, "w") as handle:
            handle.write(text.replace(old, new))
    for k in range(7):
        path = os.path.join(root, "proc/net/route")
        with open(path) as handle:
            text = handle.read()
        with open(path, "w") as handle:
            handle.write(text.replace("0\t00F0FFFF", "0\t00F8FFFF"))
    got = run(root, profile=profile, checks=["roce.address"])
    assert got["roce.address"] == ("fail", "rails in different SUs: 0, 1")
