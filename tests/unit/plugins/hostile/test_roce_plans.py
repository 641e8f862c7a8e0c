"""Hostile input to the RoCE rail addressing filters: a profile built by hand, hostvars and host
lists of the wrong shape, pinned addresses given as a list, digits of other scripts, a site plan
whose SU subnets do not merge. Each case ends in an AnsibleFilterError naming the input (host,
variable, key, value) or in the documented right result (expectations worked out by hand)."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.provision.plugins.filter import roce as flt
from ansible_collections.gpufleet.provision.plugins.module_utils._desired import profile as _profile

COVERS = ["filter:rail_addresses", "filter:rail_fleet_check", "filter:rail_plans"]

FILTERS = flt.FilterModule().filters()
RAW = {"nic": {"rails": 2}, "ib": {"link_layer": "Ethernet"},
       "roce": {"addressing": {"supernet": "10.64.0.0/16", "rail_prefix": 24}}}
PROFILE = _profile.validate(RAW)
# A site's routed plan whose SU subnets of rail 0 do not merge into one block
SITE = _profile.validate({"nic": {"rails": 1}, "ib": {"link_layer": "Ethernet"}, "roce": {"addressing": {
    "su_size": 32, "rails": [{"rail": 0, "su": 0, "subnet": "10.100.0.0/25"},
                             {"rail": 0, "su": 1, "subnet": "10.100.0.128/25"},
                             {"rail": 0, "su": 2, "subnet": "10.100.1.0/25"}]}}})


def error(name, *args, **kwargs):
    """The AnsibleFilterError text of FILTERS[name](*args); any other exception fails the test."""
    with pytest.raises(AnsibleFilterError) as exc:
        FILTERS[name](*args, **kwargs)
    return str(exc.value)


def test_a_route_is_never_to_the_interfaces_own_subnet():
    # index 70: SU 2 (70 // 32), place 6: 10.100.1.0 + 2 + 6; SU 2's /25 merges with nothing
    rail = FILTERS["rail_addresses"](SITE, "gpu070", 70)["rails"][0]
    assert rail["cidr"] == "10.100.1.8/25"
    assert rail["routes"] == [{"to": "10.100.0.0/24", "via": "10.100.1.1"}]
    plans = FILTERS["rail_plans"](SITE, {"gpu070": {"host_index": 70}, "gpu001": {"host_index": 1}}, ["gpu001", "gpu070"])
    for plan in plans.values():
        for rail in plan["rails"]:
            assert rail["subnet"] not in [r["to"] for r in rail["routes"]]


@pytest.mark.parametrize("name", ["rail_fleet_check", "rail_plans"])
def test_pinned_addresses_as_a_list_name_the_host(name):
    hostvars = {"gpu001": {"host_index": 1}, "gpu002": {"host_index": 2, "roce_rail_addresses": ["10.64.0.9"]}}
    text = error(name, PROFILE, hostvars, ["gpu001", "gpu002"])
    assert "gpu002" in text and "mapping" in text and "gpu001" not in text


@pytest.mark.parametrize("value, char", [("10.0.0.\u0661/24", "\u0661"), ("10.64.0.0/\u0661\u0666", "\u0661"),
                                         ("10.64.0.0/\u00b216", "\u00b2")])
def test_a_supernet_with_a_non_ascii_digit_is_named(value, char):
    raw = {"nic": {"rails": 2}, "ib": {"link_layer": "Ethernet"},
           "roce": {"addressing": {"supernet": value, "rail_prefix": 24}}}
    for name, args in (("rail_addresses", ("h", 0)), ("rail_fleet_check", ({}, [])), ("rail_plans", ({}, []))):
        text = error(name, raw, *args)
        assert value in text and "%r is not an ASCII digit" % char in text and "roce.addressing.supernet" in text


def test_a_pinned_address_with_a_non_ascii_digit_is_named():
    text = error("rail_addresses", PROFILE, "gpu003", 3, pinned={1: "10.64.1.\u0669"})
    assert text.startswith("rail_addresses(gpu003): host gpu003 rail 1 pinned address: '10.64.1.\u0669'")


@pytest.mark.parametrize("hostvars, hosts, named", [
    (None, ["a"], "hostvars"), ([1], ["a"], "hostvars"), ("x", ["a"], "hostvars"),
    ({"a": "text"}, ["a"], "host a"), ({"a": ["x"]}, ["a"], "host a"),
    ({}, "gpu001", "hosts"), ({}, {"a": 1}, "hosts"), ({}, [["a"]], "hosts"), ({}, [None], "hosts"),
])
@pytest.mark.parametrize("name", ["rail_fleet_check", "rail_plans"])
def test_hostvars_and_hosts_of_the_wrong_shape(name, hostvars, hosts, named):
    assert named in error(name, PROFILE, hostvars, hosts)


@pytest.mark.parametrize("index", [[1], {"a": 1}, True, -1, 1.5, "\u0661", "one", None, ""])
def test_bad_indexes_name_the_host(index):
    text = error("rail_fleet_check", PROFILE, {"gpu009": {"host_index": index}}, ["gpu009"])
    assert "host gpu009: host variable host_index" in text
    if index not in (None, ""):     # rail_plans leaves hosts without an index out (the preflight names them)
        assert "gpu009" in error("rail_plans", PROFILE, {"gpu009": {"host_index": index}}, ["gpu009"])


@pytest.mark.parametrize("kwargs, named", [
    ({"interfaces": "ens1f0np0"}, "interfaces"), ({"interfaces": {"0": "x"}}, "interfaces"),
    ({"interfaces": ["ens1f0np0", None]}, "interfaces must be netdev names"), ({"interfaces": [""]}, "interfaces"),
    ({"pinned": ["10.64.0.9"]}, "pinned"), ({"pinned": "10.64.0.9"}, "pinned"),
    ({"facts": [1]}, "facts"), ({"facts": "x"}, "facts"),
    ({"pinned": {7: "10.64.0.9"}}, "rail 7"), ({"pinned": {True: "10.64.0.9"}}, "rail True"),
    ({"pinned": {0: None}}, "None"), ({"pinned": {0: "10.65.0.9"}}, "outside"),
])
def test_rail_addresses_arguments_of_the_wrong_shape(kwargs, named):
    text = error("rail_addresses", PROFILE, "gpu004", 4, **kwargs)
    assert text.startswith("rail_addresses(gpu004): ") and named in text


@pytest.mark.parametrize("raw, key", [
    ("roce-h100", "profile mapping"), ([], "profile mapping"),
    ({"roce": "x"}, "roce"),
    ({"nic": {"rails": 1}, "roce": {"addressing": ["x"]}}, "roce.addressing"),
    ({"nic": {"rails": 1}, "roce": {"addressing": {"rails": "x"}}}, "roce.addressing.rails"),
    ({"nic": {"rails": 1}, "roce": {"addressing": {"rails": [{"rail": "x", "subnet": "10.0.0.0/24"}]}}},
     "roce.addressing.rails[0].rail"),
    ({"nic": {"rails": 1}, "roce": {"addressing": {"supernet": "10.0.0.0/8", "rail_prefix": "x"}}},
     "roce.addressing.rail_prefix"),
    ({"nic": {"rails": 1}, "roce": {"addressing": {"supernet": "10.0.0.0/8", "rail_prefix": 16, "host_offset": "x"}}},
     "roce.addressing.host_offset"),
    ({"nic": {"rails": "two"}, "roce": {"addressing": {"supernet": "10.0.0.0/8", "rail_prefix": 16}}}, "nic.rails"),
    ({"nic": {"rails": 1}, "roce": {"addressing": {"supernet": "fe80::/64", "rail_prefix": 24}}}, "IPv6"),
    ({"nic": {"rails": 1}, "roce": {"addressing": {"supernet": "10.0.0.1/8", "rail_prefix": 16}}}, "host bits"),
])
@pytest.mark.parametrize("name", ["rail_fleet_check", "rail_plans"])
def test_a_profile_built_by_hand_is_validated(name, raw, key):
    assert key in error(name, raw, {"a": {"host_index": 1}}, ["a"])
