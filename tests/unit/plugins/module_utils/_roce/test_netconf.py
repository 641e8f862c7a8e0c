"""_roce.netconf: netplan and ifupdown text of a host's plan, ip output parsing, run-time commands."""
import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._roce import netconf as N

ROUTED = [  # two rails of a routed plan (test_addressing: SU 1, place 0), interfaces out of order
    {"rail": 1, "interface": "ens2f0np0", "cidr": "10.64.128.66/26", "mtu": 9000,
     "routes": [{"to": "10.64.128.0/17", "via": "10.64.128.65"}]},
    {"rail": 0, "interface": "ens1f0np0", "cidr": "10.64.0.66/26", "mtu": 9000,
     "routes": [{"to": "10.64.0.0/17", "via": "10.64.0.65"}]},
]


def test_netplan_text():
    assert N.netplan(ROUTED) == (
        "# Managed by gpufleet.provision (roce role): the RoCE rail interfaces of the node profile's plan.\n"
        "network:\n"
        "  version: 2\n"
        "  ethernets:\n"
        "    ens1f0np0:\n"
        "      dhcp4: false\n"
        "      dhcp6: false\n"
        "      accept-ra: false\n"
        "      addresses: [10.64.0.66/26]\n"
        "      mtu: 9000\n"
        "      routes:\n"
        "        - to: 10.64.0.0/17\n"
        "          via: 10.64.0.65\n"
        "    ens2f0np0:\n"
        "      dhcp4: false\n"
        "      dhcp6: false\n"
        "      accept-ra: false\n"
        "      addresses: [10.64.128.66/26]\n"
        "      mtu: 9000\n"
        "      routes:\n"
        "        - to: 10.64.128.0/17\n"
        "          via: 10.64.128.65\n")


def test_netplan_is_yaml_netplan_reads():
    import yaml  # ansible-core's own dependency
    data = yaml.safe_load(N.netplan(ROUTED))
    assert data["network"]["ethernets"]["ens2f0np0"]["addresses"] == ["10.64.128.66/26"]
    assert data["network"]["ethernets"]["ens1f0np0"]["routes"] == [{"to": "10.64.0.0/17", "via": "10.64.0.65"}]


def test_ifupdown_text_routes_without_a_default_gateway():
    assert N.ifupdown(ROUTED) == (
        "# Managed by gpufleet.provision (roce role): the RoCE rail interfaces of the node profile's plan.\n"
        "\n"
        "auto ens1f0np0\n"
        "iface ens1f0np0 inet static\n"
        "    address 10.64.0.66/26\n"
        "    mtu 9000\n"
        "    up ip route replace 10.64.0.0/17 via 10.64.0.65 dev $IFACE\n"
        "    down ip route del 10.64.0.0/17 via 10.64.0.65 dev $IFACE || true\n"
        "\n"
        "auto ens2f0np0\n"
        "iface ens2f0np0 inet static\n"
        "    address 10.64.128.66/26\n"
        "    mtu 9000\n"
        "    up ip route replace 10.64.128.0/17 via 10.64.128.65 dev $IFACE\n"
        "    down ip route del 10.64.128.0/17 via 10.64.128.65 dev $IFACE || true\n")
    assert "gateway" not in N.ifupdown(ROUTED)


def test_mtu_only_rails():
    rails = [{"rail": 0, "interface": "ens1f0np0", "cidr": None, "mtu": 9000, "routes": []}]
    assert "iface ens1f0np0 inet manual\n    up ip link set dev $IFACE mtu 9000 up\n" in N.ifupdown(rails)
    assert "addresses" not in N.netplan(rails) and "      mtu: 9000\n" in N.netplan(rails)


@pytest.mark.parametrize("rails,message", [
    ([{"rail": 3, "interface": None}], "rail 3: no interface name"),
    ([{"rail": 0, "interface": "a"}, {"rail": 1, "interface": "a"}], "interface a: planned for two rails"),
])
def test_bad_rails(rails, message):
    with pytest.raises(N.NetconfError) as exc:
        N.netplan(rails)
    assert message in str(exc.value)
    with pytest.raises(N.NetconfError):
        N.render("ifupdown", rails)


def test_render_style():
    assert N.render("netplan", ROUTED)[0] == "etc/netplan/60-gpufleet-roce.yaml"
    assert N.render("ifupdown", ROUTED)[0] == "etc/network/interfaces.d/gpufleet-roce"
    with pytest.raises(N.NetconfError) as exc:
        N.render("networkmanager", ROUTED)
    assert "network configuration style 'networkmanager': not one of netplan, ifupdown" in str(exc.value)


@pytest.mark.parametrize("text,reads", [
    ("auto lo\niface lo inet loopback\nsource /etc/network/interfaces.d/*\n", True),    # Debian's default
    ("source-directory /etc/network/interfaces.d\n", True),
    ("# source /etc/network/interfaces.d/*\nauto lo\n", False),
    (None, False),
])
def test_ifupdown_sources_dir(text, reads):
    assert N.ifupdown_sources_dir(text) is reads


# `ip -j addr show dev ens1f0np0` (iproute2 6.1, Debian bookworm) on a rail with a stray address
IP_ADDR = ('[{"ifindex":4,"ifname":"ens1f0np0","flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],"mtu":1500,'
           '"qdisc":"mq","operstate":"UP","group":"default","txqlen":1000,"link_type":"ether",'
           '"address":"94:6d:ae:12:34:56","broadcast":"ff:ff:ff:ff:ff:ff","addr_info":['
           '{"family":"inet","local":"192.168.7.20","prefixlen":24,"broadcast":"192.168.7.255","scope":"global",'
           '"dynamic":true,"label":"ens1f0np0","valid_life_time":3500,"preferred_life_time":3500},'
           '{"family":"inet6","local":"fe80::966d:aeff:fe12:3456","prefixlen":64,"scope":"link",'
           '"valid_life_time":4294967295,"preferred_life_time":4294967295}]}]')
IP_ROUTE = ('[{"dst":"192.168.7.0/24","protocol":"kernel","scope":"link","prefsrc":"192.168.7.20","flags":[]},'
            '{"dst":"default","gateway":"192.168.7.1","protocol":"dhcp","flags":[]},'
            '{"dst":"10.64.0.0/17","gateway":"10.64.0.99","flags":[]}]')


def test_parse_ip():
    assert N.parse_ip_addr("ens1f0np0", IP_ADDR) == {"mtu": 1500, "up": True, "addresses": ["192.168.7.20/24"]}
    assert N.parse_ip_routes("ens1f0np0", IP_ROUTE) == {"10.64.0.0/17": "10.64.0.99"}
    with pytest.raises(N.NetconfError) as exc:
        N.parse_ip_addr("ens9", IP_ADDR)
    assert "interface ens9: no such network interface on the node" in str(exc.value)
    with pytest.raises(N.NetconfError) as exc:
        N.parse_ip_addr("ens9", "Device \"ens9\" does not exist.")
    assert "interface ens9: ip -j addr printed no JSON" in str(exc.value)


def test_runtime_plan_in_order():
    current = N.parse_ip_addr("ens1f0np0", IP_ADDR)
    current["up"] = False
    current["routes"] = N.parse_ip_routes("ens1f0np0", IP_ROUTE)
    steps = N.runtime_plan(ROUTED[1], current)
    assert [(s["name"], s["current"], s["wanted"], " ".join(s["argv"])) for s in steps] == [
        ("ens1f0np0 mtu", 1500, 9000, "ip link set dev ens1f0np0 mtu 9000"),
        ("ens1f0np0 link", "down", "up", "ip link set dev ens1f0np0 up"),
        ("ens1f0np0 address 192.168.7.20/24", "192.168.7.20/24", None, "ip addr del 192.168.7.20/24 dev ens1f0np0"),
        ("ens1f0np0 address", None, "10.64.0.66/26", "ip addr replace 10.64.0.66/26 dev ens1f0np0"),
        ("ens1f0np0 route 10.64.0.0/17", "via 10.64.0.99", "via 10.64.0.65",
         "ip route replace 10.64.0.0/17 via 10.64.0.65 dev ens1f0np0"),
    ]
    done = {"mtu": 9000, "up": True, "addresses": ["10.64.0.66/26"], "routes": {"10.64.0.0/17": "10.64.0.65"}}
    assert N.runtime_plan(ROUTED[1], done) == []


# ---------------------------------------------------------------- checked before anything (issue 32)

def test_check_rails_keeps_a_good_plan_and_makes_mtu_a_number():
    assert N.check_rails(ROUTED) == ROUTED
    assert N.check_rails([{"interface": "ens1f0np0", "mtu": "9000", "cidr": None}])[0]["mtu"] == 9000


@pytest.mark.parametrize("change, message", [
    ({"cidr": "999.1.1.1/99"}, "rail 0 (interface ens1f0np0): cidr '999.1.1.1/99': not an IPv4 address/prefix (10.64.0.2/20)"),
    ({"cidr": "10.0.0.1/20\n"}, "rail 0 (interface ens1f0np0): cidr '10.0.0.1/20\\n': not an IPv4 address/prefix"),
    ({"cidr": "1.2.3.\u00b2/8"}, "rail 0 (interface ens1f0np0): cidr '1.2.3.\u00b2/8': not an IPv4"),
    ({"mtu": -1}, "rail 0 (interface ens1f0np0): mtu -1: not an MTU (a whole number from 68 to 9978)"),
    ({"mtu": "\u00b2"}, "rail 0 (interface ens1f0np0): mtu '\u00b2': not an MTU"),
    ({"mtu": 100000}, "rail 0 (interface ens1f0np0): mtu 100000: not an MTU"),
    ({"interface": "ens1\n  x: 1"}, "rail 0: interface 'ens1\\n  x: 1': not a network interface name"),
    ({"interface": "a" * 16}, "rail 0: interface '%s': not a network interface name (1 to 15 letters" % ("a" * 16)),
    ({"interface": "eth0\n"}, "rail 0: interface 'eth0\\n': not a network interface name"),
    ({"routes": [{"to": "10.0.0.0/8", "via": "10.0.0.1/8"}]}, "rail 0 (interface ens1f0np0): route via '10.0.0.1/8': not an IPv4 address"),
    ({"routes": [{"to": "10.0.0.0/8", "via": "1.1.1.1", "metric": 5}]}, "rail 0 (interface ens1f0np0): route {"),
])
def test_check_rails_names_rail_interface_and_value(change, message):
    rail = dict(ROUTED[1], **change)
    with pytest.raises(N.NetconfError) as err:
        N.check_rails([rail])
    assert str(err.value).startswith(message)


def test_netplan_validator_reads_back_what_was_planned():
    N.netplan_validator(ROUTED)(N.netplan(ROUTED))
    with pytest.raises(ValueError):
        N.netplan_validator(ROUTED)(N.netplan(ROUTED[:1]))
    with pytest.raises(ValueError):
        N.netplan_validator(ROUTED)("network: [")
    numeric = [dict(ROUTED[0], interface="1234")]   # YAML reads the key as a number
    with pytest.raises(ValueError) as err:
        N.netplan_validator(numeric)(N.netplan(numeric))
    assert "does not read back as the planned rails" in str(err.value)


def test_ifupdown_validator():
    N.ifupdown_validator(ROUTED)(N.ifupdown(ROUTED))
    with pytest.raises(ValueError) as err:
        N.ifupdown_validator(ROUTED)(N.ifupdown(ROUTED) + "iface evil inet dhcp\n")
    assert str(err.value).startswith("line ")
    with pytest.raises(ValueError):
        N.ifupdown_validator(ROUTED)(N.ifupdown(ROUTED[:1]))


@pytest.mark.parametrize("text", ['{"ifname": "eth0"}', '[{"ifname": "eth0", "addr_info": {"x": 1}}]',
                                  '[{"ifname": "eth0", "addr_info": ["x"]}]', '[{"ifname": "eth0", "flags": "UP"}]', "7"])
def test_parse_ip_addr_garbage_is_an_error_naming_the_interface(text):
    with pytest.raises(N.NetconfError) as err:
        N.parse_ip_addr("eth0", text)
    assert str(err.value).startswith("interface eth0: ")


def test_parse_ip_addr_missing_fields_are_no_traceback():
    assert N.parse_ip_addr("eth0", '[{"ifname": "eth0", "addr_info": [{"family": "inet"}]}]')["addresses"] == []


@pytest.mark.parametrize("text", ['{"dst": "x"}', '["x"]', "3"])
def test_parse_ip_routes_garbage_is_an_error_naming_the_interface(text):
    with pytest.raises(N.NetconfError) as err:
        N.parse_ip_routes("eth0", text)
    assert str(err.value).startswith("interface eth0: ip -j route printed an unexpected shape")


def test_parse_ip_routes_skips_odd_destinations():
    assert N.parse_ip_routes("eth0", '[{"dst": 5, "gateway": "1.1.1.1"}, {"dst": "10.0.0.0/8", "gateway": "10.0.0.1"}]') == \
        {"10.0.0.0/8": "10.0.0.1"}
