"""_roce.addressing: the rail address planner. Every expected address is worked out by hand in the
comment beside it (subnet start + host_offset + place)."""
import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._roce import addressing as A

FLAT = {"supernet": "10.64.0.0/16", "rail_prefix": 19}          # 8 x /19: rail r = 10.64.(32 r).0/19
ROUTED = {"supernet": "10.64.0.0/14", "rail_prefix": 26, "per_su": True, "su_size": 32}


def cidrs(plan, host, index, **kw):
    return [r["cidr"] for r in A.host_plan(plan, host, index, **kw)["rails"]]


def test_flat_8_rails():
    plan = A.plan(FLAT, 8)
    # index 0: each rail's subnet + 2 (.1 is the gateway)
    assert cidrs(plan, "gpu000", 0) == ["10.64.0.2/19", "10.64.32.2/19", "10.64.64.2/19", "10.64.96.2/19",
                                        "10.64.128.2/19", "10.64.160.2/19", "10.64.192.2/19", "10.64.224.2/19"]
    rail3 = A.host_plan(plan, "gpu300", 300)["rails"][3]
    # 10.64.96.0 + 2 + 300 = 10.64.96.302 = 10.64.97.46
    assert rail3 == {"rail": 3, "interface": None, "address": "10.64.97.46", "prefix": 19, "cidr": "10.64.97.46/19",
                     "subnet": "10.64.96.0/19", "gateway": "10.64.96.1", "routes": [], "mtu": None}


def test_flat_last_host_then_exhausted():
    plan = A.plan(FLAT, 8)
    # a /19 has 8192 addresses: .0 network, .1 gateway, last broadcast: 8189 hosts, places 0-8188
    assert cidrs(plan, "last", 8188)[0] == "10.64.31.254/19"
    with pytest.raises(A.AddressingError) as exc:
        A.host_plan(plan, "gpu8189", 8189)
    assert str(exc.value) == ("host gpu8189 (host_index 8189) rail 0: subnet 10.64.0.0/19 is exhausted: it holds 8189 "
                              "hosts from host_offset 2, this host is place 8189")


def test_stable_and_independent_of_other_hosts():
    first = A.host_plan(A.plan(FLAT, 8), "gpu042", 42)
    A.host_plan(A.plan(FLAT, 8), "gpu041", 41)
    again = A.host_plan(A.plan(dict(FLAT), 8), "gpu042", "42")      # INI inventories give strings
    assert first == again
    assert first["rails"][0]["address"] == "10.64.0.44"              # 2 + 42


def test_routed_per_su():
    plan = A.plan(ROUTED, 8)
    # /14 for 8 rails: /17 blocks (10.64.0.0, 10.64.128.0, 10.65.0.0, ... 10.67.128.0); /26 SU subnets
    one = A.host_plan(plan, "gpu031", 31)            # SU 0, place 31: .0 + 2 + 31 = .33
    assert one["su"] == 0 and one["rails"][0]["cidr"] == "10.64.0.33/26"
    two = A.host_plan(plan, "gpu032", 32)            # SU 1 starts at .64: .64 + 2 + 0 = .66
    assert two["su"] == 1
    assert two["rails"][2] == {"rail": 2, "interface": None, "address": "10.65.0.66", "prefix": 26, "cidr": "10.65.0.66/26",
                               "subnet": "10.65.0.64/26", "gateway": "10.65.0.65",
                               "routes": [{"to": "10.65.0.0/17", "via": "10.65.0.65"}], "mtu": None}
    # SU 511 is the last /26 of a /17 (512 of them): 10.64.0.0 + 511 * 64 = 10.64.127.192
    last = A.host_plan(plan, "gpu16383", 511 * 32 + 31)
    assert last["rails"][0]["subnet"] == "10.64.127.192/26" and last["rails"][0]["address"] == "10.64.127.225"
    with pytest.raises(A.AddressingError) as exc:
        A.host_plan(plan, "gpu16384", 512 * 32)
    assert ("host gpu16384: SU 512 does not fit: roce.addressing.supernet gives each rail a /17, 512 SU subnets of "
            "/26 (SUs 0-511)") in str(exc.value)


def test_rails_rounded_up_to_a_power_of_two():
    # 6 rails take 8 blocks of a /16: /19 each; rail 5 = 10.64.160.0/19, SU 0's /24 in it
    plan = A.plan({"supernet": "10.64.0.0/16", "rail_prefix": 24, "per_su": True, "su_size": 100}, 6)
    assert cidrs(plan, "h", 0)[5] == "10.64.160.2/24"
    assert A.host_plan(plan, "h", 0)["rails"][5]["routes"] == [{"to": "10.64.160.0/19", "via": "10.64.160.1"}]


def test_explicit_rails_flat_with_gateway_at_the_end():
    plan = A.plan({"rails": [{"rail": 1, "subnet": "192.168.11.0/24", "gateway": "192.168.11.254"},
                             {"rail": 0, "subnet": "192.168.10.0/24"}], "gateway": "none"}, 2)
    # no gateway at .1: hosts from .1 (host_offset 1); rail 1's gateway .254 ends its range: .1-.253 = 253 hosts
    assert plan.host_offset == 1
    assert cidrs(plan, "a", 0) == ["192.168.10.1/24", "192.168.11.1/24"]
    assert A.host_plan(plan, "a", 0)["rails"][1]["gateway"] == "192.168.11.254"
    assert A.host_plan(plan, "a", 0)["rails"][0]["gateway"] is None
    assert cidrs(plan, "b", 252)[1] == "192.168.11.253/24"
    with pytest.raises(A.AddressingError) as exc:
        A.host_plan(plan, "c", 253)
    assert "rail 1: subnet 192.168.11.0/24 is exhausted: it holds 253 hosts from host_offset 1" in str(exc.value)


def test_explicit_rails_per_su_routes_are_the_rails_subnets_merged():
    rails = []
    for su in range(2):
        for rail in range(2):   # rail r, SU s: 10.(100 + r).s.0/24
            rails.append({"rail": rail, "su": su, "subnet": "10.%d.%d.0/24" % (100 + rail, su)})
    plan = A.plan({"rails": rails, "su_size": 16}, 2)
    host = A.host_plan(plan, "gpu017", 17)           # SU 1, place 1: .0 + 2 + 1
    assert host["su"] == 1
    assert host["rails"][1] == {"rail": 1, "interface": None, "address": "10.101.1.3", "prefix": 24,
                                "cidr": "10.101.1.3/24", "subnet": "10.101.1.0/24", "gateway": "10.101.1.1",
                                "routes": [{"to": "10.101.0.0/23", "via": "10.101.1.1"}], "mtu": None}
    with pytest.raises(A.AddressingError) as exc:
        A.host_plan(plan, "gpu032", 32)                  # SU 2: not in the plan
    assert "host gpu032 rail 0: roce.addressing.rails has no subnet for SU 2" in str(exc.value)


def test_interfaces_mtu_and_pinned_addresses():
    plan = A.plan(FLAT, 2)
    host = A.host_plan(plan, "gpu007", 7, interfaces=["ens1f0np0"], mtu=9000, pinned={"1": "10.64.33.7"})
    assert [(r["interface"], r["cidr"], r["mtu"]) for r in host["rails"]] == [
        ("ens1f0np0", "10.64.0.9/19", 9000), (None, "10.64.33.7/19", 9000)]


@pytest.mark.parametrize("pinned,message", [
    ({1: "10.64.0.7"}, "host gpu007 rail 1: pinned address 10.64.0.7 is outside the rail's subnet 10.64.32.0/19"),
    ({0: "10.64.0.0"}, "host gpu007 rail 0: pinned address 10.64.0.0 is the network address of 10.64.0.0/19"),
    ({0: "10.64.31.255"}, "host gpu007 rail 0: pinned address 10.64.31.255 is the broadcast address of 10.64.0.0/19"),
    ({0: "10.64.0.1"}, "host gpu007 rail 0: pinned address 10.64.0.1 is the rail's gateway"),
    ({2: "10.64.64.9"}, "host gpu007: pinned address for rail 2: no such rail (0-1)"),
    ({0: "10.64.0.300"}, "host gpu007 rail 0 pinned address: '10.64.0.300' is not an IPv4 address"),
])
def test_pinned_address_refused(pinned, message):
    with pytest.raises(A.AddressingError) as exc:
        A.host_plan(A.plan(FLAT, 2), "gpu007", 7, pinned=pinned)
    assert message in str(exc.value)


@pytest.mark.parametrize("index,message", [
    (None, "host h: host variable host_index is not set (the stable index roce.addressing.key names)"),
    ("", "host h: host variable host_index is not set"),
    (-1, "host h: host variable host_index is -1, not an integer >= 0"),
    ("seven", "host h: host variable host_index is 'seven', not an integer >= 0"),
    (True, "host h: host variable host_index is True, not an integer >= 0"),
    (1.5, "host h: host variable host_index is 1.5, not an integer >= 0"),
])
def test_bad_index(index, message):
    with pytest.raises(A.AddressingError) as exc:
        A.host_plan(A.plan(FLAT, 8), "h", index)
    assert message in str(exc.value)


@pytest.mark.parametrize("spec,rails,message", [
    ({}, 8, "roce.addressing: set supernet (with rail_prefix) or rails (a subnet per rail)"),
    ({"supernet": "10.64.0.0/16"}, 8, "roce.addressing.rail_prefix: required with supernet"),
    ({"supernet": "10.64.0.0", "rail_prefix": 19}, 8, "roce.addressing.supernet: '10.64.0.0' is not an IPv4 subnet in CIDR form"),
    ({"supernet": "10.64.0.300/16", "rail_prefix": 19}, 8, "roce.addressing.supernet: '10.64.0.300/16' is not an IPv4 subnet"),
    ({"supernet": "10.64.1.0/16", "rail_prefix": 19}, 8,
     "roce.addressing.supernet: 10.64.1.0/16 has host bits set (the subnet is 10.64.0.0/16)"),
    ({"supernet": "fd00::/48", "rail_prefix": 64}, 8, "roce.addressing.supernet: fd00::/48 is IPv6; rail addressing plans IPv4"),
    ({"supernet": "10.64.0.0/16", "rail_prefix": 12}, 8, "roce.addressing.rail_prefix: /12 is wider than the supernet 10.64.0.0/16"),
    ({"supernet": "10.64.0.0/16", "rail_prefix": 18}, 8, "roce.addressing.supernet: 10.64.0.0/16 holds 4 subnets of /18, 8 rails need one each"),
    ({"supernet": "10.64.0.0/16", "rail_prefix": 18, "per_su": True, "su_size": 4}, 8,
     "roce.addressing.supernet: 10.64.0.0/16 cannot give 8 rails a /19 block each holding /18 subnets"),
    ({"supernet": "10.64.0.0/16", "rail_prefix": 27, "per_su": True, "su_size": 32}, 8,   # 32 - 2 - 1 = 29
     "roce.addressing rail 0 subnet 10.64.0.0/27: a /27 holds 29 hosts from host_offset 2, su_size needs 32"),
    ({"supernet": "10.64.0.0/16", "rail_prefix": 24, "per_su": True}, 8, "roce.addressing.su_size: required with per_su"),
    ({"supernet": "10.64.0.0/16", "rail_prefix": 24, "per_su": True, "su_size": 8, "gateway": "none"}, 8,
     "roce.addressing.gateway: none, but per_su rails are routed"),
    ({"supernet": "10.64.0.0/16", "rail_prefix": 19, "host_offset": 1}, 8,
     "roce.addressing.host_offset: 1 would give the first host a gateway's address"),
    ({"supernet": "10.64.0.0/16", "rail_prefix": 32, "gateway": "none"}, 1, "a /32 holds 0 hosts"),
    ({"supernet": "10.64.0.0/16", "rail_prefix": 19}, 0, "the number of rails must be a positive integer"),
])
def test_bad_carving(spec, rails, message):
    with pytest.raises(A.AddressingError) as exc:
        A.plan(spec, rails)
    assert message in str(exc.value)


def entries(*items):
    return [dict(zip(("rail", "subnet", "su", "gateway"), item + (None,) * (4 - len(item)))) for item in items]


@pytest.mark.parametrize("spec,message", [
    ({"rails": entries((0, "10.1.0.0/24"), (1, "10.1.0.128/25"))},
     "roce.addressing.rails[1] (rail 1 subnet 10.1.0.128/25) overlaps roce.addressing.rails[0] (rail 0 subnet 10.1.0.0/24)"),
    ({"rails": entries((0, "10.0.0.0/8"), (1, "10.200.0.0/24"))},
     "rails[1] (rail 1 subnet 10.200.0.0/24) overlaps roce.addressing.rails[0] (rail 0 subnet 10.0.0.0/8)"),
    ({"rails": entries((0, "10.1.0.0/24"), (0, "10.2.0.0/24"))}, "roce.addressing.rails[1] (rail 0 subnet 10.2.0.0/24): rail 0 given twice"),
    ({"rails": entries((0, "10.1.0.0/24"))}, "roce.addressing.rails: rail 1 has no subnet (every rail needs one)"),
    ({"rails": entries((0, "10.1.0.0/24"), (2, "10.2.0.0/24"))}, "roce.addressing.rails[1].rail: 2, but the node has 2 rails (0-1)"),
    ({"rails": entries((0, "10.1.0.0/24", None, "10.1.1.1"), (1, "10.2.0.0/24"))},
     "roce.addressing.rails[0].gateway: 10.1.1.1 is not a host address of 10.1.0.0/24"),
    ({"rails": entries((0, "10.1.0.0/24", None, "10.1.0.255"), (1, "10.2.0.0/24"))}, "10.1.0.255 is not a host address"),
    ({"rails": entries((0, "10.1.0.0/24"), (1, "10.2.0.0/24")), "supernet": "10.1.0.0/16"},
     "roce.addressing.rails[1] (rail 1 subnet 10.2.0.0/24) is outside roce.addressing.supernet 10.1.0.0/16"),
    ({"rails": entries((0, "10.1.0.0/24"), (1, "10.2.0.0/24")), "rail_prefix": 24},
     "roce.addressing.rail_prefix: not used with explicit rails"),
    ({"rails": entries((0, "10.1.0.0/24", 0), (1, "10.2.0.0/24")), "su_size": 8},
     "roce.addressing.rails[1] (rail 1 subnet 10.2.0.0/24): su missing"),
    ({"rails": entries((0, "10.1.0.0/24", 0), (1, "10.2.0.0/24", 0), (0, "10.1.1.0/24", 1)), "su_size": 8},
     "roce.addressing.rails: rail 1 has no subnet for SU 1 (every rail needs one per SU)"),
    ({"rails": entries((0, "10.1.0.0/24", 0), (1, "10.2.0.0/24", 0)), "su_size": 8, "per_su": False},
     "roce.addressing.per_su: false, but rails name SUs"),
    ({"rails": entries((0, "10.1.0.0/24", 0), (1, "10.2.0.0/24", 0)), "su_size": 8, "gateway": "none"},
     "roce.addressing.rails[0] (rail 0 subnet 10.1.0.0/24): no gateway, but rails with SUs are routed"),
    ({"rails": entries((0, "10.1.0.0/28", 0), (1, "10.2.0.0/24", 0)), "su_size": 16},
     "roce.addressing.rails[0] (rail 0 subnet 10.1.0.0/28): a /28 holds 13 hosts from host_offset 2, su_size needs 16"),
])
def test_bad_explicit_rails(spec, message):
    with pytest.raises(A.AddressingError) as exc:
        A.plan(spec, 2)
    assert message in str(exc.value)


def test_fleet_summary_and_every_problem_named():
    plan = A.plan(FLAT, 8)
    hosts = [{"host": "gpu%03d" % i, "index": i} for i in range(100)]
    assert A.validate_fleet(plan, hosts) == {"hosts": 100, "rails": 8, "addresses": 800, "subnets": 8,
                                             "fullest": {"subnet": "10.64.0.0/19", "used": 100, "capacity": 8189}}
    bad = hosts + [{"host": "dup", "index": 5}, {"host": "noindex", "index": None},
                   {"host": "pin", "index": 200, "pinned": {0: "10.64.0.3"}},        # gpu001's address (2 + 1)
                   {"host": "far", "index": 9000}]
    with pytest.raises(A.AddressingError) as exc:
        A.validate_fleet(plan, bad)
    text = str(exc.value)
    assert text.startswith("roce.addressing: 4 problem(s): ")
    assert "hosts gpu005 and dup have the same host_index 5" in text
    assert "host noindex: host variable host_index is not set" in text
    assert "host gpu001 rail 0 and host pin rail 0 have the same address 10.64.0.3" in text
    assert "host far (host_index 9000) rail 0: subnet 10.64.0.0/19 is exhausted" in text


def test_fleet_lists_the_first_ten_then_counts():
    plan = A.plan(FLAT, 1)
    with pytest.raises(A.AddressingError) as exc:
        A.validate_fleet(plan, [{"host": "h%d" % i, "index": None} for i in range(13)])
    assert str(exc.value).startswith("roce.addressing: 13 problem(s): host h0:")
    assert str(exc.value).endswith(" (and 3 more)")


def test_without_netaddr_carved_plans_work_explicit_routed_ones_say_why(monkeypatch):
    """The gate's roce.address check plans on the node (validate_node), where netaddr is seldom
    installed (the RoCE lab twin has none): parsing and carving are stdlib; only merging the routes of
    explicit routed rails needs netaddr."""
    with_netaddr = A.host_plan(A.plan(FLAT, 8), "gpu007", 7)
    monkeypatch.setattr(A, "netaddr", None)
    assert A.host_plan(A.plan(FLAT, 8), "gpu007", 7) == with_netaddr
    explicit = {"rails": [{"rail": 0, "su": 0, "subnet": "10.64.0.0/26"}, {"rail": 0, "su": 1, "subnet": "10.64.0.64/26"}],
                "su_size": 32}
    with pytest.raises(A.AddressingError) as exc:
        A.plan(explicit, 1)
    assert "explicit routed rails (rails naming SUs) need the Python package netaddr" in str(exc.value)


def test_explicit_routed_subnets_that_do_not_merge_never_route_the_own_subnet():
    """Rail 0's SU subnets 10.100.0.0/25, 10.100.0.128/25, 10.100.1.0/25 merge into 10.100.0.0/24 and
    10.100.1.0/25 (left alone). A route to the interface's own subnet via the gateway would replace
    the kernel's connected route (`ip route replace`): routes go to the OTHER subnets only."""
    plan = A.plan({"su_size": 32, "rails": [{"rail": 0, "su": 0, "subnet": "10.100.0.0/25"},
                                            {"rail": 0, "su": 1, "subnet": "10.100.0.128/25"},
                                            {"rail": 0, "su": 2, "subnet": "10.100.1.0/25"}]}, 1)
    # index 70: SU 70 // 32 = 2, place 6: 10.100.1.0 + 2 + 6
    rail = A.host_plan(plan, "gpu070", 70)["rails"][0]
    assert (rail["cidr"], rail["gateway"]) == ("10.100.1.8/25", "10.100.1.1")
    assert rail["routes"] == [{"to": "10.100.0.0/24", "via": "10.100.1.1"}]
    # SU 0 is inside the merged /24 (the connected /25 is longer and wins): the /24 stays, and SU 2's /25
    rail = A.host_plan(plan, "gpu000", 0)["rails"][0]
    assert rail["routes"] == [{"to": "10.100.0.0/24", "via": "10.100.0.1"},
                              {"to": "10.100.1.0/25", "via": "10.100.0.1"}]


def test_a_carved_rail_of_one_su_has_no_route_to_itself():
    # one rail, a /24 supernet with /24 SU subnets: the rail's block is its one subnet
    plan = A.plan({"supernet": "10.7.0.0/24", "rail_prefix": 24, "per_su": True, "su_size": 8}, 1)
    rail = A.host_plan(plan, "h", 0)["rails"][0]
    assert (rail["subnet"], rail["routes"]) == ("10.7.0.0/24", [])


@pytest.mark.parametrize("text, char", [("10.0.0.\u0661/24", "\u0661"), ("10.0.0.0/\u0662\u0664", "\u0662"),
                                        ("10.0.0.0/\u00b24", "\u00b2"), ("10.0.0.0/+24", "+")])
def test_a_subnet_with_a_character_that_is_no_ascii_digit_is_named(text, char):
    with pytest.raises(A.AddressingError) as exc:
        A.parse_subnet("roce.addressing.supernet", text)
    assert str(exc.value) == ("roce.addressing.supernet: %r is not an IPv4 subnet in CIDR form (10.64.0.0/20): "
                              "%r is not an ASCII digit" % (text, char))


def test_an_address_with_a_non_ascii_digit_is_named():
    for text in ("10.0.0.\u0661", "10.0.0.\u00b2"):
        with pytest.raises(A.AddressingError, match="is not an IPv4 address: .* is not an ASCII digit"):
            A.parse_address("pinned", text)


def test_pinned_addresses_that_are_not_a_mapping_name_the_host():
    plan = A.plan({"supernet": "10.64.0.0/16", "rail_prefix": 24}, 2)
    with pytest.raises(A.AddressingError) as exc:
        A.host_plan(plan, "gpu007", 7, pinned=["10.64.0.9", "10.64.1.9"])
    assert str(exc.value).startswith("host gpu007: host variable roce_rail_addresses must be a mapping of rail number")
    with pytest.raises(A.AddressingError, match="host gpu007: pinned address for rail '\u0661': no such rail"):
        A.host_plan(plan, "gpu007", 7, pinned={"\u0661": "10.64.1.9"})
