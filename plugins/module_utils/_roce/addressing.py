# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""RoCE rail addressing: a pure planner (integers compute; netaddr merges explicit routed rails' routes).

Every node's rail NIC gets an IPv4 address from its rail's subnet, computed from the host's stable
index alone (AWX job slicing: no play sees every host), so the plan of one host never depends on
which other hosts a run sees. ``validate_fleet`` is the whole-fleet view, run once on the controller:
two hosts with one index, two hosts with one address.

Subnets (docs/profile.md "roce"):

- carved, flat (``per_su: false``): the supernet is cut into ``/rail_prefix`` subnets, rail r gets the
  r-th; one L2 subnet per rail, no gateway needed, no routes.
- carved, routed (``per_su: true``): the supernet is cut into one block per rail (rails rounded up to a
  power of two), each block into ``/rail_prefix`` subnets, SU s of rail r gets the s-th of block r; the
  host's SU is ``index // su_size``, its place in the SU ``index % su_size``. Each rail interface gets
  one route, to its rail's block, via its subnet's gateway: rail traffic stays on its rail.
- explicit (``rails: [{rail, subnet, su, gateway}]``): the site's own plan; routed when the entries
  name SUs (the routes per rail: its subnets merged, ``netaddr.cidr_merge``).

A route never goes to the interface's own subnet (the kernel's connected route; ``ip route replace``
would send the subnet's own traffic to the gateway): a merged block equal to it is left out.

The host at place p gets ``subnet + host_offset + p``; ``host_offset`` defaults to 2 when the subnet's
first address is the gateway, else 1; a gateway above host_offset (``.254``) ends the host range.
Every refusal (overlap, exhausted subnet, an address outside its rail, a host_offset on a gateway) is
an ``AddressingError`` naming the host, rail, subnet and cause.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections import namedtuple

from ansible_collections.gpufleet.provision.plugins.module_utils._node.parsers import ipv4_int as _ipv4_int

try:
    import netaddr
except ImportError:  # pragma: no cover - netaddr is a runtime dependency of the collection (requirements.txt);
    netaddr = None     # the gate's roce.address check runs on nodes without it: only cidr_merge needs it

DEFAULT_KEY = "host_index"
WHERE = "roce.addressing"
ERRORS_SHOWN = 10


class AddressingError(ValueError):
    """The addressing plan cannot be made; the message names the host, rail or subnet and the cause."""


# first: the subnet's first address as an integer; gateway: an integer or None.
Subnet = namedtuple("Subnet", "rail su first prefix gateway where")


def dotted(value):
    """167772161 -> '10.0.0.1' (faster than netaddr for the 65,536 addresses of a large fleet)."""
    return "%d.%d.%d.%d" % (value >> 24, (value >> 16) & 255, (value >> 8) & 255, value & 255)


def _size(prefix):
    return 1 << (32 - prefix)


def _cidr(first, prefix):
    return "%s/%d" % (dotted(first), prefix)


def _need_netaddr():
    if netaddr is None:
        raise AddressingError("explicit routed rails (rails naming SUs) need the Python package netaddr to merge their "
                              "routes (requirements.txt)")


# A dotted quad holds ASCII digits only: str.isdigit() and int() also take other scripts' digits
# ('10.0.0.\u0661' would read as 10.0.0.1, '\u00b2' passes isdigit and int() then raises).
_QUAD_CHARS = frozenset("0123456789.")
_CIDR_CHARS = _QUAD_CHARS | frozenset("/")


def _check_chars(where, text, allowed, form):
    """A clear error for text holding any other character than ``allowed`` (naming the value and the character)."""
    bad = [c for c in text if c not in allowed]
    if bad:
        raise AddressingError("%s: %r is not %s: %r is not an ASCII digit" % (where, text, form, bad[0]))


def parse_subnet(where, text):
    """'10.64.0.0/20' -> (first, prefix); IPv4, CIDR form, no host bits."""
    form = "an IPv4 subnet in CIDR form (10.64.0.0/20)"
    if isinstance(text, str) and ":" in text:
        raise AddressingError("%s: %s is IPv6; rail addressing plans IPv4 (RoCE v2 IPv4 GIDs)" % (where, text))
    if not isinstance(text, str):
        raise AddressingError("%s: %r is not %s" % (where, text, form))
    _check_chars(where, text.strip(), _CIDR_CHARS, form)
    address, _slash, prefix = text.strip().partition("/")
    value = _ipv4_int(address)
    if value is None or not prefix.isdigit() or int(prefix) > 32:
        raise AddressingError("%s: %r is not %s" % (where, text, form))
    first = value & ~(_size(int(prefix)) - 1)
    if first != value:
        raise AddressingError("%s: %s has host bits set (the subnet is %s)" % (where, text, _cidr(first, int(prefix))))
    return first, int(prefix)


def parse_address(where, text):
    if isinstance(text, str):
        _check_chars(where, text.strip(), _QUAD_CHARS, "an IPv4 address")
    value = _ipv4_int(text) if isinstance(text, str) else None
    if value is None:
        raise AddressingError("%s: %r is not an IPv4 address" % (where, text))
    return value


class Plan(object):
    """The validated addressing spec of a profile: ``subnet(rail, su)`` and ``routes(rail)``."""

    def __init__(self, rails, key, per_su, su_size, host_offset):
        self.rails, self.key, self.per_su, self.su_size, self.host_offset = rails, key, per_su, su_size, host_offset
        self.explicit = {}          # (rail, su) -> Subnet, explicit plans
        self.carve = ()             # (supernet first, rail block prefix, rail_prefix, gateway offset), carved plans
        self.route_cidrs = {}       # rail -> [(first, prefix)] when routed

    def subnet(self, rail, su, host):
        if not self.carve:
            found = self.explicit.get((rail, su))
            if found is None:
                raise AddressingError("host %s rail %d: %s.rails has no subnet for SU %s (index // su_size %d)"
                                      % (host, rail, WHERE, su, self.su_size))
            return found
        first, block, prefix, gw_offset = self.carve
        su_count = 1 << (prefix - block)
        if su is not None and su >= su_count:
            raise AddressingError(
                "host %s: SU %d does not fit: %s.supernet gives each rail a /%d, %d SU subnets of /%d (SUs 0-%d); "
                "widen the supernet or lengthen rail_prefix" % (host, su, WHERE, block, su_count, prefix, su_count - 1))
        start = first + rail * _size(block) + (su or 0) * _size(prefix)
        return Subnet(rail, su, start, prefix, start + gw_offset if gw_offset else None,
                      "%s rail %d subnet %s" % (WHERE, rail, _cidr(start, prefix)))

    def rail_subnets(self, rail):
        """Every subnet rail ``rail`` may use: its one subnet, or one per SU on routed rails (an explicit
        plan: the entries given for the rail, in SU order)."""
        if not self.carve:
            return [s for (r, _su), s in sorted(self.explicit.items(), key=lambda i: (i[0][0], i[0][1] or 0)) if r == rail]
        sus = range(1 << (self.carve[2] - self.carve[1])) if self.per_su else [None]
        return [self.subnet(rail, su, "-") for su in sus]

    def routes(self, rail, subnet):
        if not self.per_su or subnet.gateway is None:
            return []
        # Never a route to the interface's own subnet: the kernel made that one (connected, scope
        # link) and `ip route replace` would turn it into a route via the gateway. When the rail's
        # subnets merge into blocks, the block holding the own subnet is kept (the connected route is
        # longer and wins); a subnet that merged with none is the own one here, and is left out.
        via = dotted(subnet.gateway)
        own = (subnet.first, subnet.prefix)
        return [{"to": _cidr(first, prefix), "via": via} for first, prefix in self.route_cidrs[rail]
                if (first, prefix) != own]

    def capacity(self, subnet):
        """How many hosts fit in a subnet: from host_offset up to the broadcast address, or up to the
        gateway when the gateway lies above host_offset (a gateway at the subnet's end: .254)."""
        end = _size(subnet.prefix) - 1
        if subnet.gateway is not None and subnet.gateway - subnet.first >= self.host_offset:
            end = subnet.gateway - subnet.first
        return end - self.host_offset


def plan(addressing, rails):
    """The Plan of a normalised ``roce.addressing`` for ``rails`` rail interfaces, or AddressingError."""
    if not isinstance(rails, int) or isinstance(rails, bool) or rails < 1:
        raise AddressingError("%s: the number of rails must be a positive integer (nic.rails or roce.interfaces), got %r"
                              % (WHERE, rails))
    addressing = dict(addressing or {})
    entries = addressing.get("rails") or []
    if not entries and not addressing.get("supernet"):
        raise AddressingError("%s: set supernet (with rail_prefix) or rails (a subnet per rail)" % WHERE)
    per_su = bool(addressing.get("per_su")) or any(e.get("su") is not None for e in entries)
    if addressing.get("per_su") is False and per_su:
        raise AddressingError("%s.per_su: false, but rails name SUs (per_su: true, or drop su)" % WHERE)
    su_size = addressing.get("su_size")
    if per_su and not su_size:
        raise AddressingError("%s.su_size: required with per_su (hosts per SU: index // su_size is the SU)" % WHERE)
    key = addressing.get("key") or DEFAULT_KEY
    gateway_first = (addressing.get("gateway") or "first") == "first"
    result = Plan(rails, key, per_su, su_size if per_su else None, addressing.get("host_offset"))
    if entries:
        _explicit(result, addressing, entries, gateway_first)
    else:
        _carved(result, addressing, gateway_first)
    return result


def _default_offset(result, gateway_offsets):
    """host_offset: as given, else 2 when a gateway is the subnet's first host address, else 1; never
    a gateway's own offset."""
    if result.host_offset is None:
        result.host_offset = 2 if 1 in gateway_offsets else 1
    elif result.host_offset in gateway_offsets:
        raise AddressingError("%s.host_offset: %d would give the first host a gateway's address (a gateway is at "
                              "offset %d)" % (WHERE, result.host_offset, result.host_offset))


def _carved(result, addressing, gateway_first):
    if addressing.get("rail_prefix") is None:
        raise AddressingError("%s.rail_prefix: required with supernet (the prefix length of each rail subnet)" % WHERE)
    first, top = parse_subnet(WHERE + ".supernet", addressing["supernet"])
    prefix = addressing["rail_prefix"]
    # a rail's block: its SU subnets when routed; its one subnet when flat
    block = top + (result.rails - 1).bit_length() if result.per_su else prefix
    if prefix < top:
        raise AddressingError("%s.rail_prefix: /%d is wider than the supernet %s" % (WHERE, prefix, _cidr(first, top)))
    if result.per_su and block > prefix:
        raise AddressingError("%s.supernet: %s cannot give %d rails a /%d block each holding /%d subnets"
                              % (WHERE, _cidr(first, top), result.rails, block, prefix))
    if not result.per_su and result.rails > 1 << (prefix - top):
        raise AddressingError("%s.supernet: %s holds %d subnets of /%d, %d rails need one each"
                              % (WHERE, _cidr(first, top), 1 << (prefix - top), prefix, result.rails))
    if result.per_su and not gateway_first:
        raise AddressingError("%s.gateway: none, but per_su rails are routed (gateway: first)" % WHERE)
    _default_offset(result, {1} if gateway_first else set())
    result.carve = (first, block, prefix, 1 if gateway_first else 0)
    result.route_cidrs = dict((rail, [(first + rail * _size(block), block)]) for rail in range(result.rails))
    _check_fits(result, [result.subnet(0, 0 if result.per_su else None, "-")])


def _explicit_entry(result, index, entry, gateway_first):
    where = "%s.rails[%d]" % (WHERE, index)
    first, prefix = parse_subnet(where + ".subnet", entry["subnet"])
    if entry["rail"] >= result.rails:
        raise AddressingError("%s.rail: %d, but the node has %d rails (0-%d)"
                              % (where, entry["rail"], result.rails, result.rails - 1))
    gateway = first + 1 if gateway_first else None
    if entry.get("gateway") is not None:
        gateway = parse_address(where + ".gateway", entry["gateway"])
        if not first < gateway < first + _size(prefix) - 1:
            raise AddressingError("%s.gateway: %s is not a host address of %s" % (where, entry["gateway"], entry["subnet"]))
    label = "%s (rail %d subnet %s)" % (where, entry["rail"], entry["subnet"])
    return Subnet(entry["rail"], entry.get("su"), first, prefix, gateway, label)


def _explicit(result, addressing, entries, gateway_first):
    if addressing.get("rail_prefix") is not None:
        raise AddressingError("%s.rail_prefix: not used with explicit rails (each entry gives its subnet)" % WHERE)
    subnets = [_explicit_entry(result, i, e, gateway_first) for i, e in enumerate(entries)]
    if result.per_su and any(s.su is None for s in subnets):
        missing = [s.where for s in subnets if s.su is None][0]
        raise AddressingError("%s: su missing (entries name SUs, so each must)" % missing)
    for subnet in subnets:
        if (subnet.rail, subnet.su) in result.explicit:
            raise AddressingError("%s: rail %d%s given twice (also %s)" % (
                subnet.where, subnet.rail, "" if subnet.su is None else " SU %d" % subnet.su,
                result.explicit[(subnet.rail, subnet.su)].where))
        result.explicit[(subnet.rail, subnet.su)] = subnet
    _check_overlaps(subnets)
    if addressing.get("supernet"):
        _check_inside(subnets, addressing["supernet"])
    _check_complete(result, subnets)
    if result.per_su and any(s.gateway is None for s in subnets):
        raise AddressingError("%s: no gateway, but rails with SUs are routed (a gateway per entry, or gateway: first)"
                              % [s.where for s in subnets if s.gateway is None][0])
    _default_offset(result, set(s.gateway - s.first for s in subnets if s.gateway is not None))
    if result.per_su:
        for rail in range(result.rails):
            _need_netaddr()
            merged = netaddr.cidr_merge([_cidr(s.first, s.prefix) for s in subnets if s.rail == rail])
            result.route_cidrs[rail] = [(net.first, net.prefixlen) for net in merged]
    _check_fits(result, subnets)


def _check_overlaps(subnets):
    """Any two subnets sharing an address, named (sorted by first address: one pass)."""
    widest = None
    for subnet in sorted(subnets, key=lambda s: (s.first, s.prefix)):
        if widest is not None and subnet.first < widest.first + _size(widest.prefix):
            raise AddressingError("%s overlaps %s" % (subnet.where, widest.where))
        if widest is None or subnet.first + _size(subnet.prefix) > widest.first + _size(widest.prefix):
            widest = subnet


def _check_inside(subnets, supernet):
    first, prefix = parse_subnet(WHERE + ".supernet", supernet)
    for subnet in subnets:
        if not (first <= subnet.first and subnet.first + _size(subnet.prefix) <= first + _size(prefix)):
            raise AddressingError("%s is outside %s.supernet %s" % (subnet.where, WHERE, supernet))


def _check_complete(result, subnets):
    sus = sorted(set(s.su for s in subnets), key=lambda su: -1 if su is None else su)
    for rail in range(result.rails):
        for su in sus:
            if (rail, su) not in result.explicit:
                raise AddressingError("%s.rails: rail %d has no subnet%s (every rail needs one%s)" % (
                    WHERE, rail, "" if su is None else " for SU %d" % su, "" if su is None else " per SU"))


def _check_fits(result, subnets):
    """Each subnet holds at least one host, and a whole SU when rails are routed."""
    need = result.su_size if result.per_su else 1
    for subnet in subnets:
        if result.capacity(subnet) < need:
            raise AddressingError("%s: a /%d holds %d hosts from host_offset %d, %s needs %d" % (
                subnet.where, subnet.prefix, max(result.capacity(subnet), 0), result.host_offset,
                "su_size" if result.per_su else "a rail", need))


def host_index(host, value, key=DEFAULT_KEY):
    """The host's stable index from its host variable: an integer >= 0 (a digit string from INI is fine)."""
    if isinstance(value, str) and value.strip().isdigit() and value.strip().isascii():
        value = int(value.strip())
    if value is None or value == "":
        raise AddressingError("host %s: host variable %s is not set (the stable index %s.key names)" % (host, key, WHERE))
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise AddressingError("host %s: host variable %s is %r, not an integer >= 0" % (host, key, value))
    return value


def _pinned(plan_, host, pinned):
    """{rail: address} a host pins (host variable roce_rail_addresses), as {int rail: int address}."""
    if pinned is not None and not isinstance(pinned, dict):
        raise AddressingError("host %s: host variable roce_rail_addresses must be a mapping of rail number to "
                              "address ({0: 10.64.0.9}), got %s %r" % (host, type(pinned).__name__, pinned))
    out = {}
    for rail, address in (pinned or {}).items():
        text = str(rail)
        number = int(text) if text.isdigit() and text.isascii() and not isinstance(rail, bool) else None
        if number is None or number >= plan_.rails:
            raise AddressingError("host %s: pinned address for rail %r: no such rail (0-%d)" % (host, rail, plan_.rails - 1))
        out[number] = parse_address("host %s rail %d pinned address" % (host, number), address)
    return out


def host_addresses(plan_, host, index, pinned=None):
    """[(Subnet, address int)] per rail, in rail order: the integer core of host_plan."""
    index = host_index(host, index, plan_.key)
    su = index // plan_.su_size if plan_.per_su else None
    place = index % plan_.su_size if plan_.per_su else index
    pins = _pinned(plan_, host, pinned)
    out = []
    for rail in range(plan_.rails):
        subnet = plan_.subnet(rail, su, host)
        if rail in pins:
            out.append((subnet, _check_pin(subnet, host, pins[rail])))
            continue
        if place >= plan_.capacity(subnet):
            raise AddressingError(
                "host %s (%s %d) rail %d: subnet %s is exhausted: it holds %d hosts from host_offset %d, this host is "
                "place %d" % (host, plan_.key, index, rail, _cidr(subnet.first, subnet.prefix), plan_.capacity(subnet),
                              plan_.host_offset, place))
        out.append((subnet, subnet.first + plan_.host_offset + place))
    return index, su, out


def _check_pin(subnet, host, address):
    last = subnet.first + _size(subnet.prefix) - 1
    where = "host %s rail %d: pinned address %s" % (host, subnet.rail, dotted(address))
    if not subnet.first <= address <= last:
        raise AddressingError("%s is outside the rail's subnet %s" % (where, _cidr(subnet.first, subnet.prefix)))
    if address in (subnet.first, last):
        raise AddressingError("%s is the %s address of %s" % (where, "network" if address == subnet.first else "broadcast",
                                                              _cidr(subnet.first, subnet.prefix)))
    if address == subnet.gateway:
        raise AddressingError("%s is the rail's gateway" % where)
    return address


def host_plan(plan_, host, index, pinned=None, interfaces=None, mtu=None):
    """One host's rail addressing (host vars, netconf's input, fabric.json's per-node ``roce`` section):

    ``{index, su, rails: [{rail, interface, address, prefix, cidr, subnet, gateway, routes: [{to, via}], mtu}]}``
    (``interface``: the netdev of that rail when known, else None; ``gateway`` None on flat rails
    without one; ``routes`` empty unless rails are routed).
    """
    index, su, addresses = host_addresses(plan_, host, index, pinned)
    interfaces = list(interfaces or [])
    rails = []
    for subnet, address in addresses:
        rails.append({
            "rail": subnet.rail,
            "interface": interfaces[subnet.rail] if subnet.rail < len(interfaces) else None,
            "address": dotted(address), "prefix": subnet.prefix, "cidr": _cidr(address, subnet.prefix),
            "subnet": _cidr(subnet.first, subnet.prefix),
            "gateway": dotted(subnet.gateway) if subnet.gateway is not None else None,
            "routes": plan_.routes(subnet.rail, subnet), "mtu": mtu,
        })
    return {"index": index, "su": su, "rails": rails}


def validate_fleet(plan_, hosts):
    """Whole-fleet check of ``hosts`` ([{host, index, pinned}]): every host plannable, no index and no
    address twice. Returns a summary {hosts, rails, addresses, subnets, fullest: {subnet, used,
    capacity}}; raises AddressingError listing the problems (the first ERRORS_SHOWN, then a count)."""
    problems, by_index, by_address, used = [], {}, {}, {}
    for item in hosts:
        host = item.get("host")
        try:
            index, _su, addresses = host_addresses(plan_, host, item.get("index"), item.get("pinned"))
        except AddressingError as exc:
            problems.append(str(exc))
            continue
        if index in by_index:
            problems.append("hosts %s and %s have the same %s %d" % (by_index[index], host, plan_.key, index))
            continue
        by_index[index] = host
        for subnet, address in addresses:
            other = by_address.setdefault(address, (host, subnet.rail))
            if other[0] != host:
                problems.append("host %s rail %d and host %s rail %d have the same address %s"
                                % (other[0], other[1], host, subnet.rail, dotted(address)))
            key = (subnet.first, subnet.prefix, plan_.capacity(subnet))
            used[key] = used.get(key, 0) + 1
    if problems:
        more = len(problems) - ERRORS_SHOWN
        tail = " (and %d more)" % more if more > 0 else ""
        raise AddressingError("%s: %d problem(s): %s%s" % (WHERE, len(problems), "; ".join(problems[:ERRORS_SHOWN]), tail))
    return _summary(plan_, len(by_index), used)


def _summary(plan_, hosts, used):
    """used: {(first, prefix, capacity): hosts}."""
    fullest = None
    for (first, prefix, capacity), count in sorted(used.items()):
        if fullest is None or count * fullest["capacity"] > fullest["used"] * capacity:
            fullest = {"subnet": _cidr(first, prefix), "used": count, "capacity": capacity}
    return {"hosts": hosts, "rails": plan_.rails, "addresses": sum(used.values()), "subnets": len(used),
            "fullest": fullest}
