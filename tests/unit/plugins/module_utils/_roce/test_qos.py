"""_roce.qos: mlnx_qos output parsing (real outputs), what differs, the boot script."""
import shutil
import subprocess

import pytest
from ansible_collections.gpufleet.provision.plugins.module_utils._roce import qos as Q

# Both captures below print the default dscp2prio table (DSCP d on priority d // 8, highest first);
# it is written once here, as they print it, and put back in each with its own indentation.
DEFAULT_TABLE = ["prio:%d dscp:%s" % (p, "".join("%02d," % d for d in range(8 * p + 7, 8 * p - 1, -1))) for p in range(8)]

# `mlnx_qos -i eth2`, MLNX_OFED 4.2 (NVIDIA/Mellanox community, "mlnx_qos", community.mellanox.com/docs/DOC-2792)
OFED_42 = "DCBX mode: OS controlled\nPriority trust state: dscp\ndscp2prio mapping:\n" + "\n".join(DEFAULT_TABLE) + """
Cable len: 10
PFC configuration:
priority 0 1 2 3 4 5 6 7
enabled 1 0 1 0 0 0 1 1

tc: 0 ratelimit: unlimited, tsa: ets, bw: 10%

priority: 1
"""

# `mlnx_qos -i mce0` on a ConnectX (firmware DCBX from the switch), from a public RoCE v2 / NFS over
# RDMA setup note found with the search tool (pages corpus); the trailing blanks it prints after the
# enabled/buffer rows are left out here (the parser splits on whitespace)
FIRMWARE_DCBX = "DCBX mode: Firmware controlled\nPriority trust state: dscp\ndscp2prio mapping:\n" + "".join(
    "        %s\n" % line for line in DEFAULT_TABLE) + """Receive buffer size (bytes): 130944,130944,0,0,0,0,0,0,max_buffer_size=262016
Cable len: 7
PFC configuration:
        priority    0   1   2   3   4   5   6   7
        enabled     0   0   0   1   0   0   0   0
        buffer      0   0   0   1   0   0   0   0
tc: 0 ratelimit: unlimited, tsa: ets, bw: 50%
         priority:  0
tc: 3 ratelimit: unlimited, tsa: ets, bw: 50%
         priority:  3
"""

# a NIC left at its defaults: trust pcp (no dscp2prio table printed), PFC off
PCP_DEFAULT = """DCBX mode: OS controlled
Priority trust state: pcp
Cable len: 7
PFC configuration:
        priority    0   1   2   3   4   5   6   7
        enabled     0   0   0   0   0   0   0   0
        buffer      0   0   0   0   0   0   0   0
"""

QOS = {"trust": "dscp", "dscp": 26, "pfc_priority": 3, "ecn": True, "tos": 106, "pfc": "0,0,0,1,0,0,0,0"}


def test_parse_real_outputs():
    assert DEFAULT_TABLE[0] == "prio:0 dscp:07,06,05,04,03,02,01,00," and DEFAULT_TABLE[7] == "prio:7 dscp:63,62,61,60,59,58,57,56,"
    ofed = Q.parse_mlnx_qos(OFED_42)
    assert ofed["dcbx"] == "OS controlled" and ofed["trust"] == "dscp"
    assert ofed["pfc"] == [1, 0, 1, 0, 0, 0, 1, 1]
    assert ofed["dscp2prio"][26] == 3 and ofed["dscp2prio"][0] == 0 and ofed["dscp2prio"][63] == 7
    assert len(ofed["dscp2prio"]) == 64
    fw = Q.parse_mlnx_qos(FIRMWARE_DCBX)
    assert (fw["dcbx"], fw["trust"], fw["pfc"]) == ("Firmware controlled", "dscp", [0, 0, 0, 1, 0, 0, 0, 0])
    assert Q.parse_mlnx_qos("") == {"dcbx": None, "trust": None, "pfc": None, "dscp2prio": {}}


def test_plan_from_the_defaults():
    steps = Q.mlnx_qos_plan("ens1f0np0", Q.parse_mlnx_qos(PCP_DEFAULT), QOS)
    assert [(s["name"], s["current"], s["wanted"], " ".join(s["argv"])) for s in steps] == [
        ("ens1f0np0 trust", "pcp", "dscp", "mlnx_qos -i ens1f0np0 --trust dscp"),
        ("ens1f0np0 pfc", "0,0,0,0,0,0,0,0", "0,0,0,1,0,0,0,0", "mlnx_qos -i ens1f0np0 --pfc 0,0,0,1,0,0,0,0"),
        ("ens1f0np0 dscp 26 priority", None, 3, "mlnx_qos -i ens1f0np0 --dscp2prio set,26,3"),
    ]


def test_plan_nothing_when_right_and_pfc_on_other_priorities_is_wrong():
    assert Q.mlnx_qos_plan("mce0", Q.parse_mlnx_qos(FIRMWARE_DCBX), QOS) == []
    steps = Q.mlnx_qos_plan("eth2", Q.parse_mlnx_qos(OFED_42), QOS)
    assert [(s["current"], s["wanted"]) for s in steps] == [("1,0,1,0,0,0,1,1", "0,0,0,1,0,0,0,0")]


def test_sysfs_wanted():
    assert Q.sysfs_wanted("ens1f0np0", ("mlx5_0", "1"), QOS, "RoCE v2") == {
        "sys/class/net/ens1f0np0/ecn/roce_np/enable/3": "1",
        "sys/class/net/ens1f0np0/ecn/roce_rp/enable/3": "1",
        "sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos": "106",
        "sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_mode": "RoCE v2",
    }
    assert Q.sysfs_wanted("x", None, dict(QOS, ecn=False), None) == {
        "sys/class/net/x/ecn/roce_np/enable/3": "0", "sys/class/net/x/ecn/roce_rp/enable/3": "0"}


def test_boot_files():
    files = Q.boot_files(["ens2f0np0", "ens1f0np0"], QOS, "RoCE v2", "/run/twin/")
    script = files["usr/local/sbin/gpufleet-roce-qos"]
    assert script.startswith("#!/bin/sh\n")
    assert "root='/run/twin'\n" in script
    assert '  mlnx_qos -i "$if" --trust dscp >/dev/null || status=1\n' in script
    assert '  mlnx_qos -i "$if" --pfc 0,0,0,1,0,0,0,0 >/dev/null || status=1\n' in script
    assert '  mlnx_qos -i "$if" --dscp2prio set,26,3 >/dev/null || status=1\n' in script
    assert 'put "$root/sys/class/net/$if/ecn/$f/enable/3" 1; done\n' in script
    assert '      put "$d/ports/$p/default_roce_tos" 106\n' in script
    assert "      put \"$d/ports/$p/default_roce_mode\" 'RoCE v2'\n" in script
    assert script.endswith("qos 'ens1f0np0'\nqos 'ens2f0np0'\nexit $status\n")
    unit = files["etc/systemd/system/gpufleet-roce-qos.service"]
    assert "ExecStart=/usr/local/sbin/gpufleet-roce-qos\n" in unit and "Before=network-pre.target\n" in unit
    assert Q.boot_files([], QOS, None) == {"usr/local/sbin/gpufleet-roce-qos": None,
                                           "etc/systemd/system/gpufleet-roce-qos.service": None}
    assert Q.boot_files(["a"], None, None)["usr/local/sbin/gpufleet-roce-qos"] is None
    assert "--dscp2prio" not in Q.boot_files(["a"], dict(QOS, trust="pcp"), None)["usr/local/sbin/gpufleet-roce-qos"]


def test_boot_script_is_valid_sh():
    if not shutil.which("sh"):
        pytest.skip("no sh")
    script = Q.boot_files(["ens1f0np0"], QOS, "RoCE v2")["usr/local/sbin/gpufleet-roce-qos"]
    proc = subprocess.run(["sh", "-n"], input=script, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


# ---------------------------------------------------------------- checked before anything (issue 32)

GOOD = {"trust": "dscp", "dscp": 26, "pfc_priority": 3, "pfc": "0,0,0,1,0,0,0,0", "ecn": True, "tos": 106}


def test_check_qos_keeps_good_qos():
    assert Q.check_qos(GOOD) == GOOD
    assert Q.check_qos(dict(GOOD, dscp="26"))["dscp"] == 26
    assert Q.check_qos(None) is None


@pytest.mark.parametrize("qos, message", [
    ({k: v for k, v in GOOD.items() if k != "pfc"}, "qos: key pfc missing (the desired area roce_qos gives dscp, ecn, pfc, "
                                                    "pfc_priority, tos, trust)"),
    (dict(GOOD, extra=1), "qos: unknown key extra (known: dscp, ecn, pfc, pfc_priority, tos, trust)"),
    (dict(GOOD, trust="dscp\n"), "qos.trust 'dscp\\n': not 'dscp' or 'pcp'"),
    (dict(GOOD, ecn=1), "qos.ecn 1: not True or False"),
    (dict(GOOD, dscp=True), "qos.dscp True: not a whole number from 0 to 63"),
    (dict(GOOD, tos="\u00b2"), "qos.tos '\u00b2': not a whole number from 0 to 255"),
    (dict(GOOD, pfc="0,0,0,1,0,0,0,0\n"), "qos.pfc '0,0,0,1,0,0,0,0\\n': not 8 flags 0/1 apart by commas"),
    ("dscp", "qos 'dscp': not a mapping"),
])
def test_check_qos_names_the_key(qos, message):
    with pytest.raises(Q.QosError) as err:
        Q.check_qos(qos)
    assert str(err.value).startswith(message)
