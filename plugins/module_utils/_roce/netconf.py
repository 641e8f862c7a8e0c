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

NETPLAN_FILE = "etc/netplan/60-gpufleet-roce.yaml"
IFUPDOWN_FILE = "etc/network/interfaces.d/gpufleet-roce"
IFUPDOWN_MAIN = "etc/network/interfaces"
HEADER = "# Managed by gpufleet.provision (roce role): the RoCE rail interfaces of the node profile's plan.\n"
STYLES = ("netplan", "ifupdown")


class NetconfError(ValueError):
    """A rail that cannot be written or read; the message names the interface and the cause."""


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
    link = next((item for item in data if isinstance(item, dict) and item.get("ifname") == name), None)
    if link is None:
        raise NetconfError("interface %s: no such network interface on the node" % name)
    addresses = ["%s/%s" % (a["local"], a["prefixlen"]) for a in link.get("addr_info") or []
                 if a.get("family") == "inet" and a.get("scope", "global") == "global"]
    return {"mtu": link.get("mtu"), "up": "UP" in (link.get("flags") or []), "addresses": addresses}


def parse_ip_routes(name, text):
    """``ip -j -4 route show dev <name>`` -> {destination cidr: gateway} of routes via a gateway."""
    try:
        data = json.loads(text or "[]")
    except ValueError:
        raise NetconfError("interface %s: ip -j route printed no JSON: %r" % (name, (text or "")[:200]))
    out = {}
    for route in data:
        dst = route.get("dst")
        if dst and dst != "default" and route.get("gateway"):
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
