"""rail_addresses / rail_fleet_check: what playbooks call, errors as AnsibleFilterError naming the host."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.provision.plugins.filter import roce as flt
from ansible_collections.gpufleet.provision.plugins.module_utils._desired import profile as _profile

PROFILE = _profile.validate({"nic": {"rails": 2}, "ib": {"link_layer": "Ethernet"},
                             "roce": {"addressing": {"supernet": "10.64.0.0/16", "rail_prefix": 24, "key": "rank"},
                                      "mtu": 9000}})
FACTS = {"nics": [{"name": "mlx5_0", "role": "rail", "rail": 0, "netdevs": ["ens1f0np0"]},
                  {"name": "mlx5_1", "role": "rail", "rail": 1, "netdevs": ["ens2f0np0"]}]}


def test_rail_addresses_one_host():
    plan = flt.rail_addresses(PROFILE, "gpu010", "10", facts=FACTS)
    # rail r = 10.64.r.0/24; index 10: .2 + 10 = .12
    assert [(r["interface"], r["cidr"], r["mtu"]) for r in plan["rails"]] == [
        ("ens1f0np0", "10.64.0.12/24", 9000), ("ens2f0np0", "10.64.1.12/24", 9000)]
    # empty role defaults ([] and {}) mean "not given"
    assert flt.rail_addresses(PROFILE, "gpu010", 10, interfaces=[], pinned={}, facts=FACTS) == plan


def test_rail_addresses_errors_name_the_host():
    with pytest.raises(AnsibleFilterError) as exc:
        flt.rail_addresses(PROFILE, "gpu999", 999)
    assert str(exc.value).startswith("rail_addresses(gpu999): host gpu999 (rank 999) rail 0: subnet 10.64.0.0/24 is exhausted")
    with pytest.raises(AnsibleFilterError, match="expected the profile mapping"):
        flt.rail_addresses("roce-h100", "gpu001", 1)


def test_rail_fleet_check_reads_the_key_and_pins_from_hostvars():
    hostvars = {"a": {"rank": 0}, "b": {"rank": "1"}, "c": {"rank": 2, "roce_rail_addresses": {1: "10.64.1.9"}}}
    assert flt.rail_fleet_check(PROFILE, hostvars, ["a", "b", "c"]) == {
        "hosts": 3, "rails": 2, "addresses": 6, "subnets": 2,
        "fullest": {"subnet": "10.64.0.0/24", "used": 3, "capacity": 253}}
    hostvars["d"] = {"rank": 3, "roce_rail_addresses": {0: "10.64.0.2"}}      # a's address
    hostvars["e"] = {}
    with pytest.raises(AnsibleFilterError) as exc:
        flt.rail_fleet_check(PROFILE, hostvars, ["a", "b", "c", "d", "e", "absent"])
    text = str(exc.value)
    assert text.startswith("rail_fleet_check: roce.addressing: 3 problem(s): ")
    assert "host a rail 0 and host d rail 0 have the same address 10.64.0.2" in text
    assert "host e: host variable rank is not set" in text and "host absent: host variable rank is not set" in text


def test_rail_fleet_check_without_addressing_is_none():
    assert flt.rail_fleet_check(_profile.validate({"roce": {"mtu": 9000}, "nic": {"rails": 8}}), {}, ["a"]) is None
    assert flt.rail_fleet_check(_profile.validate({}), {}, ["a"]) is None


def test_rail_plans_of_the_hosts_with_an_index():
    hostvars = {"a": {"rank": 0}, "b": {"rank": "1", "roce_rail_addresses": {1: "10.64.1.9"}}, "c": {}}
    plans = flt.rail_plans(PROFILE, hostvars, ["a", "b", "c", "absent"])
    assert sorted(plans) == ["a", "b"]                     # c has no index, absent is not in hostvars
    assert [r["cidr"] for r in plans["a"]["rails"]] == ["10.64.0.2/24", "10.64.1.2/24"]
    assert [r["cidr"] for r in plans["b"]["rails"]] == ["10.64.0.3/24", "10.64.1.9/24"]   # the pin kept
    assert flt.rail_plans(_profile.validate({"nic": {"rails": 2}}), hostvars, ["a"]) == {}
    with pytest.raises(AnsibleFilterError, match="gpu999"):
        flt.rail_plans(PROFILE, {"gpu999": {"rank": 999}}, ["gpu999"])
