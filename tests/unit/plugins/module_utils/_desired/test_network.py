"""_desired.network: what the roce role makes and the gate's Ethernet rail checks must expect."""
import os

import pytest
import yaml

from ansible_collections.gpufleet.provision.plugins.module_utils._desired import profile as _profile
from ansible_collections.gpufleet.provision.plugins.module_utils._desired import registry as _desired

ROUTED = {"supernet": "10.64.0.0/14", "rail_prefix": 26, "per_su": True, "su_size": 32}


def roce(**section):
    return _profile.validate({"nic": {"rails": 8}, "ib": {"link_layer": "Ethernet"}, "roce": section})


def test_enabled_only_with_a_roce_section():
    assert _desired.derive("roce_enabled", roce()) == {"enabled": True, "reason": "profile section roce"}
    off = _desired.derive("roce_enabled", _profile.validate({"ib": {"link_layer": "InfiniBand"}}))
    assert off == {"enabled": False, "reason": "no roce section in the profile (InfiniBand rails)"}
    eth = _desired.derive("roce_enabled", _profile.validate({"ib": {"link_layer": "Ethernet"}}))
    assert eth["enabled"] is False and "ib.link_layer is Ethernet but the profile has no roce section" in eth["reason"]


def test_interfaces_rail_nics_or_named():
    assert _desired.derive("roce_interfaces", roce()) == {"count": 8, "names": None}
    hybrid = _profile.validate({"nic": {"rails": 8}, "ib": {"link_layer": "InfiniBand"},
                                "roce": {"interfaces": ["ens7f0np0", "ens7f1np1"]}})
    assert _desired.derive("roce_interfaces", hybrid) == {"count": 2, "names": ["ens7f0np0", "ens7f1np1"]}


@pytest.mark.parametrize("profile,message", [
    ({"nic": {"rails": 8}, "ib": {"link_layer": "InfiniBand"}, "roce": {}},
     "roce: the rail NICs are InfiniBand (ib.link_layer); name the Ethernet netdevs in roce.interfaces"),
    ({"roce": {}}, "roce: how many RoCE interfaces? set nic.rails (the rail NICs) or roce.interfaces"),
    ({"roce": {"interfaces": ["a", "b", "a"]}}, "roce.interfaces: a listed twice"),
])
def test_interfaces_refused(profile, message):
    with pytest.raises(_desired.DesiredError) as exc:
        _desired.derive("roce_interfaces", _profile.validate(profile))
    assert message in str(exc.value)


def test_qos_defaults_are_nvidia_lossless_roce():
    assert _desired.derive("roce_qos", roce()) is None
    assert _desired.derive("roce_qos", roce(qos={})) == {
        "trust": "dscp", "dscp": 26, "pfc_priority": 3, "ecn": True, "tos": 106, "pfc": "0,0,0,1,0,0,0,0"}
    # DSCP 24 without ECN: TOS 96; PFC on priority 4
    assert _desired.derive("roce_qos", roce(qos={"dscp": 24, "ecn": False, "pfc_priority": 4})) == {
        "trust": "dscp", "dscp": 24, "pfc_priority": 4, "ecn": False, "tos": 96, "pfc": "0,0,0,0,1,0,0,0"}


def test_qos_tos_must_carry_the_dscp():
    assert _desired.derive("roce_qos", roce(qos={"tos": 104}))["tos"] == 104     # 26 << 2, ECN bits 00
    with pytest.raises(_desired.DesiredError) as exc:
        _desired.derive("roce_qos", roce(qos={"tos": 96}))
    assert "roce.qos.tos: 96 carries DSCP 24, roce.qos.dscp is 26 (tos = dscp << 2 | ECN bits: 106)" in str(exc.value)


@pytest.mark.parametrize("section,message", [
    ({"mtu": 9500}, "profile key roce.mtu: 9500 is not an Ethernet MTU (1280 to 9216)"),
    ({"qos": {"dscp": 64}}, "profile key roce.qos.dscp: 64 is not a 6-bit DSCP value (0 to 63)"),
    ({"qos": {"pfc_priority": 8}}, "profile key roce.qos.pfc_priority: 8 is not an 802.1p priority (0 to 7)"),
    ({"qos": {"trust": "dcsp"}}, "profile key roce.qos.trust: 'dcsp' is not one of dscp, pcp"),
    ({"gid": {"type": "RoCEv2"}}, "profile key roce.gid.type: 'RoCEv2' is not one of RoCE v2, IB/RoCE v1"),
    ({"addressing": {"rail_prefix": 33}}, "profile key roce.addressing.rail_prefix: 33 is not an IPv4 prefix length"),
    ({"addressing": {"rails": [{"rail": -1, "subnet": "10.0.0.0/24"}]}}, "roce.addressing.rails[0].rail: -1 is negative"),
    ({"addressing": {"rails": [{"subnet": "10.0.0.0/24"}]}}, "profile key roce.addressing.rails[0].rail: required"),
    ({"adressing": {}}, "profile key roce.adressing: unknown (known: addressing, gid, interfaces, mtu, qos)"),
])
def test_profile_refuses_bad_roce_keys(section, message):
    with pytest.raises(_profile.ProfileError) as exc:
        roce(**section)
    assert message in str(exc.value)


def test_gid_defaults():
    assert _desired.derive("roce_gid", _profile.validate({})) is None
    assert _desired.derive("roce_gid", roce()) == {"type": "RoCE v2", "family": "ipv4"}
    assert _desired.derive("roce_gid", roce(gid={"family": "ipv6"})) == {"type": "RoCE v2", "family": "ipv6"}


def test_addressing_and_one_hosts_plan():
    assert _desired.derive("roce_addressing", roce()) is None
    profile = roce(addressing=ROUTED, mtu=9000)
    assert _desired.derive("roce_addressing", profile) == {
        "key": "host_index", "rails": 8, "per_su": True, "su_size": 32, "host_offset": 2, "routed": True}
    plan = _desired.derive("roce_host", profile, host="gpu037", index=37)
    assert plan["index"] == 37 and plan["su"] == 1
    assert plan["rails"][0] == {"rail": 0, "interface": None, "address": "10.64.0.71", "prefix": 26,
                                "cidr": "10.64.0.71/26", "subnet": "10.64.0.64/26", "gateway": "10.64.0.65",
                                "routes": [{"to": "10.64.0.0/17", "via": "10.64.0.65"}], "mtu": 9000}
    # rail 7: the 8th /17 block of the /14 (10.67.128.0/17), SU 1's /26 in it
    assert plan["rails"][7]["cidr"] == "10.67.128.71/26"


def test_addressing_errors_are_desired_errors():
    with pytest.raises(_desired.DesiredError) as exc:
        _desired.derive("roce_addressing", roce(addressing={"supernet": "10.64.0.0/14"}))
    assert "roce.addressing.rail_prefix: required with supernet" in str(exc.value)
    with pytest.raises(_desired.DesiredError) as exc:
        _desired.derive("roce_host", roce(addressing=ROUTED), host="gpu001", index=None)
    assert "host gpu001: host variable host_index is not set" in str(exc.value)


FACTS = {"nics": [  # the node facts' shape (docs/facts.md): rail NICs in PCI order, a storage NIC
    {"name": "mlx5_1", "role": "rail", "rail": 1, "netdevs": ["ens2f0np0"]},
    {"name": "mlx5_0", "role": "rail", "rail": 0, "netdevs": ["ens1f0np0"]},
    {"name": "mlx5_2", "role": "non-rail", "rail": None, "netdevs": ["ens9f0np0"]},
]}


def test_host_plan_without_addressing_carries_interface_and_mtu():
    profile = _profile.validate({"nic": {"rails": 2}, "ib": {"link_layer": "Ethernet"}, "roce": {"mtu": 4200}})
    plan = _desired.derive("roce_host", profile, host="gpu001", index=None, facts=FACTS)
    assert plan == {"index": None, "su": None, "rails": [
        {"rail": 0, "interface": "ens1f0np0", "address": None, "prefix": None, "cidr": None, "subnet": None,
         "gateway": None, "routes": [], "mtu": 4200},
        {"rail": 1, "interface": "ens2f0np0", "address": None, "prefix": None, "cidr": None, "subnet": None,
         "gateway": None, "routes": [], "mtu": 4200}]}


def test_interfaces_given_win_over_profile_and_facts():
    profile = _profile.validate({"nic": {"rails": 2}, "roce": {"interfaces": ["a0", "a1"],
                                 "addressing": {"supernet": "10.64.0.0/16", "rail_prefix": 24}}})
    plan = _desired.derive("roce_host", profile, host="h", index=3, facts=FACTS)
    assert [r["interface"] for r in plan["rails"]] == ["a0", "a1"]
    assert [r["cidr"] for r in plan["rails"]] == ["10.64.0.5/24", "10.64.1.5/24"]
    plan = _desired.derive("roce_host", profile, host="h", index=3, interfaces=["b0", "b1"])
    assert [r["interface"] for r in plan["rails"]] == ["b0", "b1"]


def test_fleet_area():
    profile = roce(addressing={"supernet": "10.64.0.0/16", "rail_prefix": 19})
    assert _desired.derive("roce_fleet", profile, hosts=[{"host": "a", "index": 0}, {"host": "b", "index": 1}]) == {
        "hosts": 2, "rails": 8, "addresses": 16, "subnets": 8,
        "fullest": {"subnet": "10.64.0.0/19", "used": 2, "capacity": 8189}}
    with pytest.raises(_desired.DesiredError) as exc:
        _desired.derive("roce_fleet", profile, hosts=[{"host": "a", "index": 0}, {"host": "b", "index": 0}])
    assert "hosts a and b have the same host_index 0" in str(exc.value)
    assert _desired.derive("roce_fleet", roce(), hosts=[]) is None


def test_shipped_roce_profile():
    path = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "..", "inventories", "profiles", "hgx-h100-roce.yml")
    with open(path) as handle:
        profile = _profile.validate(yaml.safe_load(handle))
    assert profile["name"] == "hgx-h100-roce" and profile["ib"]["link_layer"] == "Ethernet"
    assert _desired.derive("roce_qos", profile)["tos"] == 106
    plan = _desired.derive("roce_host", profile, host="gpu0100", index=100)     # SU 3, place 4
    assert plan["su"] == 3 and plan["rails"][0]["cidr"] == "10.64.0.198/26"    # 3 * 64 + 2 + 4
    assert plan["rails"][0]["mtu"] == 9000
