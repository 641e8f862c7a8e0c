"""ACS planning on hand-written topologies and config bytes; lspci/setpci parsers on real and hand-written text."""
import os
import struct

import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._devices import acs


def config(ctl=0, cap=0x5F, ext=True):
    """A 4 KiB config space with the ACS capability at 0x100 (ext=False: 256 bytes, no extended space)."""
    data = bytearray(4096 if ext else 256)
    if ext:
        struct.pack_into("<I", data, 0x100, 0x000D | (1 << 16))
        struct.pack_into("<HH", data, 0x104, cap, ctl)
    return bytes(data)


def chained_config(ctl, cap):
    """ACS as the second extended capability (AER at 0x100 -> ACS at 0x148), as real switches have it."""
    data = bytearray(4096)
    struct.pack_into("<I", data, 0x100, 0x0001 | (1 << 16) | (0x148 << 20))
    struct.pack_into("<I", data, 0x148, 0x000D | (1 << 16))
    struct.pack_into("<HH", data, 0x14C, cap, ctl)
    return bytes(data)


GPU = {"pci": "0000:18:00.0", "host_bridge": "pci0000:15", "pcie_path": ["0000:15:01.0", "0000:16:00.0", "0000:17:00.0"]}
NIC = {"name": "mlx5_0", "pci": "0000:19:00.0", "host_bridge": "pci0000:15",
       "pcie_path": ["0000:15:01.0", "0000:16:00.0", "0000:17:01.0"], "virtual_function": False}
FACTS = {"gpus": [GPU], "nics": [NIC], "pairs": [{"gpu": GPU["pci"], "nic": "mlx5_0", "rail": 0}]}


def test_bits_and_register_values():
    assert acs.ctl_value({"ReqRedir": True, "CmpltRedir": True}) == 0x0C
    assert acs.ctl_bits(0x5D) == {"SrcValid": True, "TransBlk": False, "ReqRedir": True, "CmpltRedir": True,
                                  "UpstreamFwd": True, "EgressCtrl": False, "DirectTrans": True}
    assert acs.ctl_value(acs.HOST_MODES["virtualization"]) == 0x5D
    assert acs.ctl_value(acs.HOST_MODES["bare_metal"]) == 0
    assert acs.format_ctl(acs.ctl_bits(0x0C)) == "SrcValid- TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd- EgressCtrl- DirectTrans-"


def test_read_acs_walks_the_chain_and_reads_cap():
    got = acs.read_acs(chained_config(ctl=0x0C, cap=0x1F))
    assert got["present"] and got["offset"] == 0x148
    assert got["ctl"]["ReqRedir"] and not got["ctl"]["DirectTrans"]
    assert got["cap"]["UpstreamFwd"] and not got["cap"]["DirectTrans"]
    assert acs.read_acs(bytes(4096)) == {"present": False}
    with pytest.raises(ValueError, match="256 bytes"):
        acs.read_acs(config(ext=False))


def test_expected_is_limited_to_implemented_bits():
    # a root port without DirectTrans/ReqRedir capability (the real Dell's 15:01.0: cap SrcValid+ TransBlk+ UpstreamFwd+)
    cap = acs.ctl_bits(0x13)
    assert acs.expected(acs.HOST_MODES["virtualization"], cap) == {
        "SrcValid": True, "TransBlk": False, "ReqRedir": False, "CmpltRedir": False,
        "UpstreamFwd": True, "EgressCtrl": False, "DirectTrans": False}


def test_path_bridges_follow_the_gate_walk():
    # below the common bridge 16:00.0 on each side, plus 16:00.0 itself; not the root port
    assert acs.path_bridges(FACTS) == [("0000:16:00.0", [("0000:18:00.0", "mlx5_0")]),
                                       ("0000:17:00.0", [("0000:18:00.0", "mlx5_0")]),
                                       ("0000:17:01.0", [("0000:18:00.0", "mlx5_0")])]
    assert acs.path_bridges({"gpus": [], "nics": [NIC], "pairs": []}) == []


def test_empty_lists_fail_naming_the_devices():
    with pytest.raises(acs.AcsError, match=r"no GPU-NIC pair .*0000:18:00.0.*mlx5_0"):
        acs.path_bridges(dict(FACTS, pairs=[]))
    flat_gpu = dict(GPU, pcie_path=[])
    flat_nic = dict(NIC, pcie_path=[], host_bridge="pci0000:15")
    with pytest.raises(acs.AcsError, match=r"no bridge between any GPU and its rail NIC \(0000:18:00.0-mlx5_0\)"):
        acs.path_bridges({"gpus": [flat_gpu], "nics": [flat_nic], "pairs": FACTS["pairs"]})


def test_plan_bare_metal_and_virtualization():
    configs = {"0000:16:00.0": config(0), "0000:17:00.0": config(0x0C), "0000:17:01.0": bytes(4096)}
    bare = acs.plan(FACTS, configs, acs.HOST_MODES["bare_metal"])
    assert [(i["bdf"], i["change"], i["value"]) for i in bare] == [
        ("0000:16:00.0", False, "0000"), ("0000:17:00.0", True, "0000"), ("0000:17:01.0", False, None)]
    assert bare[1]["current"].startswith("SrcValid- TransBlk- ReqRedir+ CmpltRedir+")
    assert bare[2]["present"] is False
    virt = acs.plan(FACTS, configs, acs.HOST_MODES["virtualization"])
    assert [(i["bdf"], i["change"], i["value"]) for i in virt][:2] == [("0000:16:00.0", True, "005d"), ("0000:17:00.0", True, "005d")]
    with pytest.raises(acs.AcsError, match=r"0000:17:00.0 \(on the path of GPU 0000:18:00.0 - mlx5_0\): config space not readable"):
        acs.plan(FACTS, dict(configs, **{"0000:17:00.0": None}), acs.HOST_MODES["bare_metal"])
    with pytest.raises(acs.AcsError, match="0000:16:00.0 .*256 bytes"):
        acs.plan(FACTS, dict(configs, **{"0000:16:00.0": config(ext=False)}), acs.HOST_MODES["bare_metal"])


def test_setpci_args_and_read():
    assert acs.setpci_args("0000:17:00.0", "005d") == ["-s", "0000:17:00.0", "ECAP_ACS+0x6.w=005d:007f"]
    assert acs.parse_setpci_word("005d\n") == 0x5D
    assert acs.parse_setpci_word("0000:17:00.0 @148 = 000c") == 0x0C
    with pytest.raises(ValueError, match="expected a 16-bit hex value"):
        acs.parse_setpci_word("setpci: Capability ECAP_ACS not found")


def test_parse_lspci_hand_written():
    text = ("17:00.0 PCI bridge: PLX Technology, Inc. Device c030\n"
            "\tCapabilities: [178 v1] Access Control Services\n"
            "\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans+\n"
            "\t\tACSCtl:\tSrcValid- TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd- EgressCtrl- DirectTrans-\n"
            "0001:18:00.0 3D controller: NVIDIA Corporation GH100 [H100 SXM5 80GB]\n")
    got = acs.parse_lspci_acs(text)
    assert list(got) == ["0000:17:00.0"]
    assert acs.ctl_value(got["0000:17:00.0"]["ctl"]) == 0x0C and acs.ctl_value(got["0000:17:00.0"]["cap"]) == 0x5F
    with pytest.raises(ValueError, match="bits missing"):
        acs.parse_lspci_acs("17:00.0 PCI bridge\n\t\tACSCtl:\tSrcValid- TransBlk-\n")


def test_parse_lspci_real_hgx_h100(realdata):
    with open(os.path.join(realdata, "gpu-node", "hgx-h100", "lspci-vvv.txt")) as handle:
        got = acs.parse_lspci_acs(handle.read())
    assert len(got) == 55   # grep -c ACSCtl
    # the PEX890xx downstream port above GPU0: capable of DirectTrans, everything off
    assert acs.ctl_value(got["0000:17:00.0"]["ctl"]) == 0
    assert got["0000:17:00.0"]["cap"]["DirectTrans"] and not got["0000:17:00.0"]["cap"]["EgressCtrl"]
    # the PMC-Sierra switch at 82: ACS on: SrcValid+ ReqRedir+ CmpltRedir+ UpstreamFwd+ (= 0x1d)
    assert acs.ctl_value(got["0000:82:00.0"]["ctl"]) == 0x1D
    on = sorted(bdf for bdf, v in got.items() if acs.ctl_value(v["ctl"]))
    assert on == ["0000:00:0c.0", "0000:00:0e.0", "0000:82:00.0", "0000:82:01.0", "0000:82:02.0", "0000:82:03.0"]
