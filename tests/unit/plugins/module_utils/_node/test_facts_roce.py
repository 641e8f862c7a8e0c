"""Facts of a RoCE node: GID tables per Ethernet port, netdev MTU/speed/state and IPv4 addresses
(tests/fixtures/trees/hgx-h100-roce, rendered from lab/hw/models/hgx-h100-roce.yml). Expectations
written by hand from the fixture's state (rail k: 10.64.<16k>.2/20, MTU 9000, 400GbE)."""
import os

import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._node import parsers as P
from ansible_collections.gpufleet.provision.plugins.module_utils._node.facts import collect

RAILS = {"mlx5_0": "ens21np0", "mlx5_1": "ens38np0", "mlx5_2": "ens55np0", "mlx5_3": "ens72np0",
         "mlx5_6": "ens151np0", "mlx5_7": "ens168np0", "mlx5_8": "ens185np0", "mlx5_9": "ens202np0"}


def _write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.lexists(path):
        os.chmod(path, 0o644)
    with open(path, "w") as handle:
        handle.write(text + "\n")


def test_rail_ports_have_their_gid_table_and_netdevs(unpacked_tree):
    facts, warnings = collect(unpacked_tree("hgx-h100-roce"))
    assert warnings == []
    nics = dict((n["name"], n) for n in facts["nics"])
    assert [n for n in nics if nics[n]["role"] == "rail"] == list(RAILS)
    mlx5_2 = nics["mlx5_2"]
    assert mlx5_2["link_layer"] == "Ethernet" and mlx5_2["netdevs"] == ["ens55np0"]
    gids = mlx5_2["ports"][0]["gids"]
    assert [(g["index"], g["type"], g["ndev"], g["ipv4"]) for g in gids] == [
        (0, "IB/RoCE v1", "ens55np0", None), (1, "RoCE v2", "ens55np0", None),
        (2, "IB/RoCE v1", "ens55np0", "10.64.32.2"), (3, "RoCE v2", "ens55np0", "10.64.32.2")]
    assert gids[3]["gid"] == "0000:0000:0000:0000:0000:ffff:0a40:2002"
    assert gids[0]["gid"].startswith("fe80:0000:0000:0000:")
    assert facts["netdevs"]["ens55np0"] == {"nic": "mlx5_2", "mtu": 9000, "speed_mbps": 400000, "operstate": "up",
                                            "address": facts["netdevs"]["ens55np0"]["address"], "ipv4": ["10.64.32.2/20"]}
    assert facts["netdevs"]["ens202np0"]["ipv4"] == ["10.64.112.2/20"]
    # the storage NICs: the front-end address; the second port is down (no speed: EINVAL on a live host)
    assert facts["netdevs"]["enp90s0f0np0"]["ipv4"] == ["192.168.50.11/24"]
    assert facts["netdevs"]["enp90s0f1np1"]["speed_mbps"] is None
    assert facts["netdevs"]["enp90s0f1np1"]["operstate"] == "down"


def test_infiniband_ports_have_no_gid_key_and_no_netdevs(unpacked_tree):
    facts = collect(unpacked_tree("hgx-h100-ref"))[0]
    assert all("gids" not in p for n in facts["nics"] if n["link_layer"] == "InfiniBand" for p in n["ports"])
    assert facts["netdevs"] == {}


# show_gids of a RoCE pod (NVIDIA/nccl issue #1538, https://github.com/NVIDIA/nccl/issues/1538):
# show_gids prints these very sysfs files; the GIDs below are its mlx5_0 rows (indices 4-7 on net1,
# 0-3 unused in that container). Written into the tree as the kernel shows them.
SHOW_GIDS_MLX5_0 = [
    (4, "fe80:0000:0000:0000:c025:a1ff:fe31:2e81", "v1"),
    (5, "fe80:0000:0000:0000:c025:a1ff:fe31:2e81", "v2"),
    (6, "0000:0000:0000:0000:0000:ffff:0a9c:8184", "v1"),   # 10.156.129.132
    (7, "0000:0000:0000:0000:0000:ffff:0a9c:8184", "v2"),
]


def test_gid_table_of_a_real_show_gids(unpacked_tree):
    root = unpacked_tree("hgx-h100-roce")
    port = "sys/class/infiniband/mlx5_0/ports/1/"
    for index in range(16):
        _write(root, port + "gids/%d" % index, P.ZERO_GID)
        for attr in ("types", "ndevs"):
            if os.path.lexists(os.path.join(root, port, "gid_attrs", attr, str(index))):
                os.remove(os.path.join(root, port, "gid_attrs", attr, str(index)))
    for index, gid, ver in SHOW_GIDS_MLX5_0:
        _write(root, port + "gids/%d" % index, gid)
        _write(root, port + "gid_attrs/types/%d" % index, "RoCE v2" if ver == "v2" else "IB/RoCE v1")
        _write(root, port + "gid_attrs/ndevs/%d" % index, "net1")
    facts, warnings = collect(root)
    assert warnings == []
    gids = [n for n in facts["nics"] if n["name"] == "mlx5_0"][0]["ports"][0]["gids"]
    assert [(g["index"], g["type"], g["ipv4"]) for g in gids] == [
        (4, "IB/RoCE v1", None), (5, "RoCE v2", None), (6, "IB/RoCE v1", "10.156.129.132"), (7, "RoCE v2", "10.156.129.132")]


def test_garbage_gid_is_a_warning_naming_the_path(unpacked_tree):
    root = unpacked_tree("hgx-h100-roce")
    rel = "sys/class/infiniband/mlx5_1/ports/1/gids/3"
    _write(root, rel, "fe80::1")
    facts, warnings = collect(root)
    assert any(w.startswith(rel + ":") for w in warnings), warnings
    assert [g["index"] for g in [n for n in facts["nics"] if n["name"] == "mlx5_1"][0]["ports"][0]["gids"]] == [0, 1, 2]


def test_without_proc_net_the_addresses_are_unknown_not_empty(unpacked_tree):
    root = unpacked_tree("hgx-h100-roce")
    os.remove(os.path.join(root, "proc/net/route"))
    facts, warnings = collect(root)
    assert facts["netdevs"]["ens21np0"]["ipv4"] is None
    assert any(w.startswith("proc/net/route:") for w in warnings)


# /proc/net/route and /proc/net/fib_trie as a Debian 12 host prints them (kernel 6.1; the layout of
# net/ipv4/route.c and fib_trie.c): eth0 with 192.168.2.15/24 and a default route, a rail
# netdev with 10.64.0.5/20, a /32 address without a connected route on eth0, and loopback.
ROUTE = """Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
eth0\t00000000\t0102A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0
eth0\t0002A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0
ens21np0\t0000400A\t00000000\t0001\t0\t0\t0\t00F0FFFF\t0\t0\t0
"""
FIB_TRIE = """Main:
  +-- 0.0.0.0/0 3 0 5
     |-- 0.0.0.0
        /0 universe UNICAST
     +-- 10.64.0.0/20 2 0 2
        |-- 10.64.0.0
           /20 link UNICAST
        |-- 10.64.0.5
           /32 host LOCAL
        |-- 10.64.15.255
           /32 link BROADCAST
     +-- 127.0.0.0/8 2 0 2
        +-- 127.0.0.0/31 1 0 0
           |-- 127.0.0.0
              /8 host LOCAL
           |-- 127.0.0.1
              /32 host LOCAL
        |-- 127.255.255.255
           /32 link BROADCAST
     +-- 192.168.2.0/24 2 0 2
        |-- 192.168.2.0
           /24 link UNICAST
        |-- 192.168.2.15
           /32 host LOCAL
        |-- 192.168.2.99
           /32 host LOCAL
Local:
  +-- 0.0.0.0/0 3 0 5
     |-- 10.64.0.5
        /32 host LOCAL
"""


def test_ipv4_addresses_from_route_and_fib_trie():
    routes = P.parse_proc_net_route(ROUTE)
    assert routes == [("eth0", 0xC0A80200, 24), ("ens21np0", 0x0A400000, 20)]
    local = P.parse_fib_trie_local(FIB_TRIE)
    assert local == {"10.64.0.5", "127.0.0.1", "192.168.2.15", "192.168.2.99"}
    assert P.ipv4_by_interface(routes, local) == {
        "ens21np0": ["10.64.0.5/20"], "eth0": ["192.168.2.15/24", "192.168.2.99/24"], None: ["127.0.0.1/32"]}


@pytest.mark.parametrize("text", ["", "garbage\n", "Destination Gateway\n"])
def test_route_without_its_header_is_refused(text):
    with pytest.raises(ValueError):
        P.parse_proc_net_route(text)


def test_gid_parser():
    assert P.parse_gid("0000:0000:0000:0000:0000:ffff:0a9c:8184\n") == ("0000:0000:0000:0000:0000:ffff:0a9c:8184", "10.156.129.132")
    assert P.parse_gid("FE80:0000:0000:0000:C025:A1FF:FE31:2E81")[1] is None
    for bad in ("fe80::1", "0000:0000", "zzzz:0000:0000:0000:0000:ffff:0a9c:8184"):
        with pytest.raises(ValueError):
            P.parse_gid(bad)
