"""PCIe paths, affinity, pairing and the ACS capability, on hand-written inputs."""
import struct

import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._node import pcie as _pcie


def dev(host, path, numa=0, name=None, rate=400.0):
    return {"host_bridge": host, "pcie_path": path, "numa_node": numa, "name": name, "pci": name,
            "ports": [{"rate_gbps": rate}]}


def test_split_device_path_host_and_guest():
    assert _pcie.split_device_path("sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0") == (
        "pci0000:15", ["0000:15:01.0", "0000:16:00.0", "0000:17:00.0"], "0000:18:00.0")
    guest = "sys/devices/LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00/VMBUS:00/00000001-0000-4000-8000-00155d3a8c00/pci0001:00/0001:00:00.0"
    assert _pcie.split_device_path(guest) == ("pci0001:00", [], "0001:00:00.0")
    with pytest.raises(ValueError):
        _pcie.split_device_path("sys/devices/virtual/net/lo")


@pytest.mark.parametrize("first,second,expected", [
    # same PCIe switch (shared upstream port), each one downstream port below: PIX
    (dev("pci0000:15", ["0000:15:01.0", "0000:16:00.0", "0000:17:00.0"]), dev("pci0000:15", ["0000:15:01.0", "0000:16:00.0", "0000:17:01.0"]), "PIX"),
    # NIC on the first switch, GPU one switch further down: PXB
    (dev("pci0000:80", ["0000:80:03.1", "0000:82:00.0", "0000:83:00.0", "0000:84:00.0", "0000:85:00.0"]),
     dev("pci0000:80", ["0000:80:03.1", "0000:82:00.0", "0000:83:01.0"]), "PXB"),
    # same host bridge, different root ports: PHB
    (dev("pci0000:59", ["0000:59:01.0"]), dev("pci0000:59", ["0000:59:03.0"]), "PHB"),
    # different host bridges, same NUMA node: NODE; different node: SYS; unknown: SYS
    (dev("pci0000:15", ["0000:15:01.0"], numa=0), dev("pci0000:26", ["0000:26:01.0"], numa=0), "NODE"),
    (dev("pci0000:15", ["0000:15:01.0"], numa=0), dev("pci0000:97", ["0000:97:01.0"], numa=4), "SYS"),
    (dev("pci0000:15", [], numa=None), dev("pci0000:26", [], numa=None), "SYS"),
])
def test_affinity(first, second, expected):
    assert _pcie.affinity(first, second) == expected
    assert _pcie.affinity(second, first) == expected  # symmetric


def test_pairing_prefers_affinity_then_untaken_then_speed():
    gpus = [{**dev("pci0000:26", ["0000:26:01.0", "0000:27:00.0", "0000:28:00.0"], numa=1), "pci": "0000:29:00.0"},
            {**dev("pci0000:15", ["0000:15:01.0", "0000:16:00.0", "0000:17:00.0"], numa=0), "pci": "0000:18:00.0"},
            {**dev("pci0000:37", ["0000:37:01.0"], numa=0), "pci": "0000:3a:00.0"}]
    nics = [dev("pci0000:15", ["0000:15:01.0", "0000:16:00.0", "0000:17:01.0"], 0, "mlx5_0"),
            dev("pci0000:26", ["0000:26:01.0", "0000:27:00.0", "0000:28:01.0"], 1, "mlx5_1"),
            dev("pci0000:59", ["0000:59:01.0"], 0, "mlx5_2", rate=100.0),
            dev("pci0000:5a", ["0000:5a:01.0"], 0, "mlx5_10", rate=400.0)]
    pairs, rails = _pcie.pair_gpus(gpus, nics)
    # GPUs in PCI order; rail = that index
    assert [p["gpu"] for p in pairs] == ["0000:18:00.0", "0000:29:00.0", "0000:3a:00.0"]
    assert [(p["nic"], p["affinity"], p["rail"]) for p in pairs] == [
        ("mlx5_0", "PIX", 0), ("mlx5_1", "PIX", 1),
        # both remaining NICs are NODE and untaken: the 400G one wins over the 100G one
        ("mlx5_10", "NODE", 2)]
    assert rails == {"mlx5_0": 0, "mlx5_1": 1, "mlx5_10": 2}


def test_pairing_shared_nic_keeps_pix():
    # two GPUs under one switch with one NIC: both pair PIX with it rather than a worse free NIC
    gpus = [{**dev("h", ["r", "u", "d1"]), "pci": "0000:18:00.0"}, {**dev("h", ["r", "u", "d2"]), "pci": "0000:19:00.0"}]
    nics = [dev("h", ["r", "u", "d3"], 0, "mlx5_0"), dev("h", ["r2"], 0, "mlx5_1")]
    pairs, rails = _pcie.pair_gpus(gpus, nics)
    assert [(p["nic"], p["affinity"]) for p in pairs] == [("mlx5_0", "PIX"), ("mlx5_0", "PIX")]
    assert rails == {"mlx5_0": 0}


def config_with_caps(caps):
    """4 KiB config space; caps = [(offset, cap_id, next, payload_bytes)] written by hand."""
    data = bytearray(4096)
    for offset, cap_id, nxt, payload in caps:
        struct.pack_into("<I", data, offset, cap_id | (1 << 16) | (nxt << 20))
        data[offset + 4:offset + 4 + len(payload)] = payload
    return bytes(data)


def test_acs_found_after_other_capabilities():
    # AER (0x0001) at 0x100 -> ACS at 0x148 with ctl 0x001d = SrcValid ReqRedir CmpltRedir UpstreamFwd
    config = config_with_caps([(0x100, 0x0001, 0x148, b""), (0x148, 0x000D, 0x000, b"\x5f\x00\x1d\x00")])
    acs = _pcie.parse_acs(config)
    assert acs["present"] is True
    assert acs["ctl"] == {"SrcValid": True, "TransBlk": False, "ReqRedir": True, "CmpltRedir": True,
                          "UpstreamFwd": True, "EgressCtrl": False, "DirectTrans": False}


def test_acs_direct_trans_only():
    config = config_with_caps([(0x100, 0x000D, 0, b"\x5f\x00\x40\x00")])
    assert [k for k, v in _pcie.parse_acs(config)["ctl"].items() if v] == ["DirectTrans"]


def test_acs_absent_and_loops_and_short_config():
    assert _pcie.parse_acs(config_with_caps([(0x100, 0x0001, 0, b"")])) == {"present": False, "ctl": None}
    # A chain that comes back on itself is corrupt config space: an error, never "no ACS"
    # (which passes on bare metal).
    with pytest.raises(ValueError, match="loops at 0x100"):
        _pcie.parse_acs(config_with_caps([(0x100, 0x0001, 0x100, b"")]))
    with pytest.raises(ValueError, match="loops at 0x100"):
        _pcie.parse_acs(config_with_caps([(0x100, 0x0001, 0x148, b""), (0x148, 0x0019, 0x100, b"")]))
    with pytest.raises(ValueError, match="needs root"):
        _pcie.parse_acs(bytes(256))


def test_path_between_is_the_switch_and_its_ports():
    gpu = dev("pci0000:15", ["0000:15:01.0", "0000:16:00.0", "0000:17:00.0"])
    nic = dev("pci0000:15", ["0000:15:01.0", "0000:16:00.0", "0000:17:01.0"])
    # the switch's upstream port routes the peer traffic, each downstream port carries one side
    assert _pcie.path_between(gpu, nic) == ["0000:16:00.0", "0000:17:00.0", "0000:17:01.0"]
    other = dev("pci0000:26", ["0000:26:01.0", "0000:27:00.0"])
    assert _pcie.path_between(gpu, other) == ["0000:15:01.0", "0000:16:00.0", "0000:17:00.0", "0000:26:01.0", "0000:27:00.0"]
