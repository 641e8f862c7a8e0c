# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rail interfaces of one host's plan as the OS layer writes them, and the run-time commands
that make them true now (pure: text in, text and argv out; the roce_rails module does the I/O).

Input: the rails of a host plan (``_roce.addressing.host_plan``: ``{interface, cidr, mtu, routes:
[{to, via}]}``; ``cidr`` None when the profile plans no addresses: MTU only).

- netplan (Ubuntu): ``/etc/netplan/60-gpufleet-roce.yaml``, one ``ethernets`` entry per rail,
  static, no DHCP, routes to the rail's block via its gateway (never a default route);
- ifupdown (Debian): ``/etc/network/interfaces.d/gpufleet-roce``, ``inet static`` (``inet manual``
  without an address) with the routes as ``up``/``down`` commands (ifupdown's ``gateway`` would be a
  default route);
- run time: ``ip`` commands for what differs from ``ip -j addr`` / ``ip -j -4 route`` (MTU, link up,
  the planned address, foreign IPv4 addresses removed, routes): no ``netplan apply`` or ``ifup``,
  which would touch other interfaces.

Needs no netaddr: the node runs it with the addresses the controller planned.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible_collections.gpufleet.provision.plugins.module_utils._node.parsers import ipv4_int

try:
    import yaml
except ImportError:   # pragma: no cover - a node without PyYAML (netplan needs it)
    yaml = None

NETPLAN_FILE = "etc/netplan/60-gpufleet-roce.yaml"
IFUPDOWN_FILE = "etc/network/interfaces.d/gpufleet-roce"
IFUPDOWN_MAIN = "etc/network/interfaces"
HEADER = "# Managed by gpufleet.provision (roce role): the RoCE rail interfaces of the node profile's plan.\n"
STYLES = ("netplan", "ifupdown")


class NetconfError(ValueError):
    """A rail that cannot be written or read; the message names the interface and the cause."""


# Linux dev_valid_name: 1 to IFNAMSIZ - 1 (15) bytes, no '/', ':' or blank; narrower here, so a name
# is one plain word in netplan YAML, ifupdown, ip's argv and a sysfs path.
_IFNAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}\Z")
_QUAD = re.compile(r"^[0-9]{1,3}(?:\.[0-9]{1,3}){3}\Z")
_DIGITS = re.compile(r"^[0-9]{1,9}\Z")
MTU_RANGE = (68, 9978)   # IPv4's minimum; mlx5's largest


def check_interface(name, where="interface"):
    """Raise NetconfError naming ``where`` and ``name`` unless it is a network interface name."""
    if not isinstance(name, str) or not _IFNAME.match(name) or name in (".", ".."):
        raise NetconfError("%s %r: not a network interface name (1 to 15 letters, digits, '_', '.', '-'; "
                           "Linux IFNAMSIZ)" % (where, name))
    return name


def _ipv4(text, label, what, prefix):
    """``text`` as a dotted quad (``prefix``: with /1 to /32), else NetconfError naming it."""
    address, sep, length = text.partition("/") if isinstance(text, str) else ("", "", "")
    ok = bool(_QUAD.match(address)) and ipv4_int(address) is not None and bool(sep) == prefix
    if ok and prefix:
        ok = bool(_DIGITS.match(length)) and len(length) <= 2 and 1 <= int(length) <= 32
    if not ok:
        raise NetconfError("%s: %s %r: not an IPv4 %s" % (label, what, text, "address/prefix (10.64.0.2/20)" if prefix else
                                                          "address (10.64.0.1)"))
    return text


def _mtu(value, label):
    if isinstance(value, str) and _DIGITS.match(value):
        value = int(value)
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and MTU_RANGE[0] <= value <= MTU_RANGE[1]):
        return value
    raise NetconfError("%s: mtu %r: not an MTU (a whole number from %d to %d)" % (label, value, MTU_RANGE[0], MTU_RANGE[1]))


def check_rails(rails):
    """The rails of a host plan, checked before anything is read, written or run: interface names,
    addresses, MTUs and routes that will be written into netplan YAML, ifupdown text and ``ip``'s
    argv. Returns them with ``mtu`` as an integer; NetconfError names the rail, interface and value."""
    out = []
    for index, rail in enumerate(rails or []):
        label = "rail %s" % (rail.get("rail") if isinstance(rail, dict) and rail.get("rail") is not None else index)
        if not isinstance(rail, dict):
            raise NetconfError("%s: %r is not a mapping" % (label, rail))
        name = rail.get("interface")
        if name:
            label += " (interface %s)" % name if _IFNAME.match(str(name)) else ""
            check_interface(name, "%s: interface" % label)
        rail = dict(rail, mtu=_mtu(rail.get("mtu"), label))
        if rail.get("cidr") is not None:
            _ipv4(rail["cidr"], label, "cidr", True)
        routes = rail.get("routes") or []
        if not isinstance(routes, list):
            raise NetconfError("%s: routes %r: not a list of {to, via}" % (label, routes))
        for route in routes:
            if not isinstance(route, dict) or set(route) != {"to", "via"}:
                raise NetconfError("%s: route %r: not a mapping of exactly to and via" % (label, route))
            _ipv4(route["to"], label, "route to", True)
            _ipv4(route["via"], label, "route via", False)
        out.append(rail)
    _checked(out)
    return out


def netplan_data(rails):
    """What ``netplan(rails)`` must read back as (the YAML's data): a written file is checked against it."""
    ethernets = {}
    for rail in _checked(rails):
        entry = {"dhcp4": False, "dhcp6": False, "accept-ra": False}
        if rail.get("cidr"):
            entry["addresses"] = [rail["cidr"]]
        if rail.get("mtu"):
            entry["mtu"] = rail["mtu"]
        if rail.get("routes"):
            entry["routes"] = [{"to": r["to"], "via": r["via"]} for r in rail["routes"]]
        ethernets[rail["interface"]] = entry
    return {"network": {"version": 2, "ethernets": ethernets}}


def netplan_validator(rails):
    """A ``validate(text)`` for fs.atomic_write: ValueError unless the text parses as YAML and gives
    exactly ``netplan_data(rails)`` (no key or value the YAML took for something else)."""
    wanted = netplan_data(rails)

    def validate(text):
        if yaml is None:   # netplan itself needs PyYAML; without it, the checked rails are the guard
            return
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ValueError("not YAML: %s" % exc)
        if data != wanted:
            raise ValueError("the YAML does not read back as the planned rails (%r, planned %r)" % (data, wanted))
    return validate


def ifupdown_validator(rails):
    """A ``validate(text)`` for fs.atomic_write: ValueError unless every line of the text is the header,
    a stanza line (``auto``, ``iface``) of a planned interface, or an indented option of it."""
    names = set(r["interface"] for r in rails)

    def validate(text):
        stanzas = set()
        for number, line in enumerate(text.splitlines(), 1):
            words = line.split()
            if not words or line.startswith("#") or (line.startswith("    ") and stanzas):
                continue
            if words[0] in ("auto", "iface") and len(words) in (2, 4) and words[1] in names:
                stanzas.add(words[1])
                continue
            raise ValueError("line %d %r is not part of a planned interface's stanza" % (number, line))
        if stanzas != names:
            raise ValueError("stanzas for %s, planned %s" % (sorted(stanzas), sorted(names)))
    return validate


def _checked(rails):
    names = []
    for index, rail in enumerate(rails):
        name = rail.get("interface")
        if not name:
            raise NetconfError("rail %s: no interface name (roce.interfaces, or a rail NIC without a netdev in the "
                               "node's facts)" % rail.get("rail", index))
        if name in names:
            raise NetconfError("interface %s: planned for two rails" % name)
        names.append(name)
    return sorted(rails, key=lambda r: r["interface"])


def netplan(rails):
    """netplan YAML text for the rails (deterministic: sorted by interface)."""
    lines = [HEADER.rstrip("\n"), "network:", "  version: 2", "  ethernets:"]
    for rail in _checked(rails):
        lines.append("    %s:" % rail["interface"])
        lines += ["      dhcp4: false", "      dhcp6: false", "      accept-ra: false"]
        if rail.get("cidr"):
            lines.append("      addresses: [%s]" % rail["cidr"])
        if rail.get("mtu"):
            lines.append("      mtu: %d" % rail["mtu"])
        if rail.get("routes"):
            lines.append("      routes:")
            for route in rail["routes"]:
                lines += ["        - to: %s" % route["to"], "          via: %s" % route["via"]]
    return "\n".join(lines) + "\n"


def ifupdown(rails):
    """/etc/network/interfaces.d text for the rails."""
    out = [HEADER]
    for rail in _checked(rails):
        name = rail["interface"]
        block = ["auto %s" % name]
        if rail.get("cidr"):
            block.append("iface %s inet static" % name)
            block.append("    address %s" % rail["cidr"])
            if rail.get("mtu"):
                block.append("    mtu %d" % rail["mtu"])
        else:
            block.append("iface %s inet manual" % name)
            block.append("    up ip link set dev $IFACE %sup" % ("mtu %d " % rail["mtu"] if rail.get("mtu") else ""))
        for route in rail.get("routes") or []:
            block.append("    up ip route replace %s via %s dev $IFACE" % (route["to"], route["via"]))
            block.append("    down ip route del %s via %s dev $IFACE || true" % (route["to"], route["via"]))
        out.append("\n".join(block) + "\n")
    return "\n".join(out)


def render(style, rails):
    """(relative path, text) of the OS layer's file for ``style``."""
    if style == "netplan":
        return NETPLAN_FILE, netplan(rails)
    if style == "ifupdown":
        return IFUPDOWN_FILE, ifupdown(rails)
    raise NetconfError("network configuration style %r: not one of %s" % (style, ", ".join(STYLES)))


def ifupdown_sources_dir(interfaces_text):
    """Whether /etc/network/interfaces reads interfaces.d (Debian's default ``source`` line)."""
    for line in (interfaces_text or "").splitlines():
        words = line.split()
        if words[:1] == ["source"] and len(words) > 1 and words[1].startswith("/etc/network/interfaces.d/"):
            return True
        if words[:1] == ["source-directory"] and len(words) > 1 and words[1].rstrip("/") == "/etc/network/interfaces.d":
            return True
    return False


def parse_ip_addr(name, text):
    """``ip -j addr show dev <name>`` -> {mtu, up, addresses: [IPv4 global cidr]}."""
    try:
        data = json.loads(text or "[]")
    except ValueError:
        raise NetconfError("interface %s: ip -j addr printed no JSON: %r" % (name, (text or "")[:200]))
    link = next((item for item in data if isinstance(item, dict) and item.get("ifname") == name), None) \
        if isinstance(data, list) else None
    if link is None:
        raise NetconfError("interface %s: no such network interface on the node" % name)
    infos = link.get("addr_info") or []
    if not isinstance(infos, list) or not all(isinstance(a, dict) for a in infos) or \
            not isinstance(link.get("flags") or [], list):
        raise NetconfError("interface %s: ip -j addr printed an unexpected shape: %r" % (name, (text or "")[:200]))
    addresses = ["%s/%s" % (a.get("local"), a.get("prefixlen")) for a in infos
                 if a.get("family") == "inet" and a.get("scope", "global") == "global" and a.get("local")
                 and a.get("prefixlen") is not None]
    return {"mtu": link.get("mtu"), "up": "UP" in (link.get("flags") or []), "addresses": addresses}


def parse_ip_routes(name, text):
    """``ip -j -4 route show dev <name>`` -> {destination cidr: gateway} of routes via a gateway."""
    try:
        data = json.loads(text or "[]")
    except ValueError:
        raise NetconfError("interface %s: ip -j route printed no JSON: %r" % (name, (text or "")[:200]))
    if not isinstance(data, list) or not all(isinstance(route, dict) for route in data):
        raise NetconfError("interface %s: ip -j route printed an unexpected shape: %r" % (name, (text or "")[:200]))
    out = {}
    for route in data:
        dst = route.get("dst")
        if isinstance(dst, str) and dst and dst != "default" and route.get("gateway"):
            out[dst if "/" in dst else dst + "/32"] = route["gateway"]
    return out


def runtime_plan(rail, current, ip="ip"):
    """[{name, current, wanted, argv}] for one rail: what differs between ``current`` (parse_ip_addr
    plus ``routes`` from parse_ip_routes) and the plan, in the order to run them."""
    name = rail["interface"]
    out = []

    def step(what, now, wanted, *args):
        out.append({"name": "%s %s" % (name, what), "current": now, "wanted": wanted, "argv": [ip] + list(args)})

    if rail.get("mtu") and current["mtu"] != rail["mtu"]:
        step("mtu", current["mtu"], rail["mtu"], "link", "set", "dev", name, "mtu", str(rail["mtu"]))
    if not current["up"]:
        step("link", "down", "up", "link", "set", "dev", name, "up")
    if rail.get("cidr"):
        for other in current["addresses"]:
            if other != rail["cidr"]:
                step("address %s" % other, other, None, "addr", "del", other, "dev", name)
        if rail["cidr"] not in current["addresses"]:
            step("address", None, rail["cidr"], "addr", "replace", rail["cidr"], "dev", name)
    for route in rail.get("routes") or []:
        now = current.get("routes", {}).get(route["to"])
        if now != route["via"]:
            step("route %s" % route["to"], now and "via %s" % now, "via %s" % route["via"],
                 "route", "replace", route["to"], "via", route["via"], "dev", name)
    return out
