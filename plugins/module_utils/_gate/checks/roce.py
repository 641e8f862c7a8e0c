# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Checks of the Ethernet (RoCE v2) rails: link, MTU, rail address, GID, QoS.

Each reads the RoCE interfaces the profile asks for (``_desired/network.py`` ``roce_interfaces``:
``roce.interfaces`` by name on hybrid nodes, else the rail NICs of the facts) and the same desired
state the ``roce`` role applies (``roce_mtu``, ``roce_qos``, ``roce_gid``, ``roce.addressing``). A
profile without a ``roce`` section: every check here is ``skip`` (not asked)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.provision.plugins.module_utils._desired import profile as _profile
from ansible_collections.gpufleet.provision.plugins.module_utils._gate.framework import CheckError, NotAsked, Skip, outcome, registrar
from ansible_collections.gpufleet.provision.plugins.module_utils._roce import addressing as _addressing
from ansible_collections.gpufleet.provision.plugins.module_utils._roce import qos as _roce_qos

CHECKS = []
check = registrar(CHECKS)


def parse_qos(text):
    """``mlnx_qos -i <if>`` through the roce role's own parser (one reading of the tool); a text with
    neither a trust state nor a PFC table is no mlnx_qos output: ValueError (the check's error)."""
    qos = _roce_qos.parse_mlnx_qos(text)
    if qos["trust"] is None and qos["pfc"] is None:
        raise ValueError("no 'Priority trust state' line and no 'PFC configuration' table")
    return qos


def rail_ports(ctx):
    """The RoCE interfaces of the node: [(rail index, nic facts, port facts, netdev name)], in rail
    order. NotAsked without a roce section; Skip "no data" when the facts do not show them."""
    enabled = ctx.desired("roce_enabled", "roce")
    if not enabled.get("enabled"):
        raise NotAsked("not in profile (roce): %s" % enabled.get("reason"))
    nics = ctx.need(ctx.facts.get("nics"), ["sys/class/infiniband*"])
    wanted = ctx.desired("roce_interfaces", "roce.interfaces")
    if wanted.get("names"):
        by_netdev = dict((nd, n) for n in nics for nd in n.get("netdevs") or [])
        missing = [nd for nd in wanted["names"] if nd not in by_netdev]
        if missing:
            raise ctx.no_data(["sys/class/infiniband/*/device/net"], "no RDMA NIC has netdev %s (roce.interfaces)" % ", ".join(missing))
        chosen = [(i, by_netdev[nd], nd) for i, nd in enumerate(wanted["names"])]
    else:
        rails = sorted((n for n in nics if n.get("role") == "rail"), key=lambda n: n.get("rail"))
        if not rails:
            raise Skip("no data: no rail NIC found")
        chosen = [(n.get("rail"), n, (n.get("netdevs") or [None])[0]) for n in rails]
    out = []
    for rail, nic, netdev in chosen:
        if not nic.get("ports") or netdev is None:
            raise ctx.no_data(["sys/class/infiniband/%s/*" % nic.get("name")], "%s: no port or no netdev" % nic.get("name"))
        out.append((rail, nic, nic["ports"][0], netdev))
    return out


def _ports_and(ctx, area, keys):
    """The RoCE interfaces and the desired state of ``area`` (NotAsked when the profile leaves it unset)."""
    return rail_ports(ctx), ctx.desired(area, keys)


def _netdev(ctx, name):
    info = (ctx.facts.get("netdevs") or {}).get(name)
    if info is None:
        raise ctx.no_data(["sys/class/net/%s*" % name], "sys/class/net/%s" % name)
    return info


@check("roce.link", "a RoCE rail down or trained below its speed (a 400G port at 200G, a bad transceiver): "
       "collectives use fewer rails or wait on the slow one, no error",
       "check the transceiver/cable and the leaf port (ethtool <if>, the switch's interface counters); "
       "ip link set <if> up; link layer: mlxconfig LINK_TYPE_P1=ETH")
def _link(ctx):
    ports = rail_ports(ctx)
    min_gbps = _profile.section(ctx.profile, "ib", "min_rate_gbps")
    failures, observed = [], {}
    for _rail, nic, port, netdev in ports:
        info = _netdev(ctx, netdev)
        speed = info.get("speed_mbps")
        observed[netdev] = "%s %s %s Mb/s (%s/%s)" % (port.get("link_layer"), info.get("operstate"), speed, nic.get("name"), port.get("port"))
        if port.get("link_layer") != "Ethernet":
            failures.append("%s (%s) link layer %s, not Ethernet" % (netdev, nic.get("name"), port.get("link_layer")))
        if info.get("operstate") != "up" or port.get("state") != "ACTIVE":
            failures.append("%s %s (RDMA port %s)" % (netdev, info.get("operstate"), port.get("state")))
        elif min_gbps is not None and (speed is None or speed < min_gbps * 1000):
            failures.append("%s at %s Mb/s < %s Gb/s" % (netdev, speed, min_gbps))
    return outcome(failures, [], observed, {"operstate": "up", "min_rate_gbps": min_gbps})


@check("roce.mtu", "a RoCE rail at MTU 1500 (or another MTU than the fabric's): RDMA messages cut into 1 KiB "
       "packets, or dropped at the switch when larger than its MTU",
       "the roce role (netplan/ifupdown with the profile's roce.mtu); at once: ip link set <if> mtu <mtu>")
def _mtu(ctx):
    ports, want = _ports_and(ctx, "roce_mtu", "roce.mtu")
    failures, observed = [], {}
    for _rail, _nic, _port, netdev in ports:
        mtu = ctx.need(_netdev(ctx, netdev).get("mtu"), ["sys/class/net/%s/mtu" % netdev])
        observed[netdev] = mtu
        if mtu != want:
            failures.append("%s MTU %s" % (netdev, mtu))
    return outcome(failures, [], observed, want)


def _rail_subnets(ctx, count):
    """rail -> [Subnet] the profile's addressing plan allows (every SU's subnet on routed rails)."""
    spec = _profile.section(ctx.profile, "roce", "addressing")
    if spec is None:
        raise NotAsked("not in profile (roce.addressing)")
    try:
        plan = _addressing.plan(spec, count)
        return dict((r, plan.rail_subnets(r)) for r in range(count))
    except _addressing.AddressingError as exc:
        raise CheckError("profile: %s" % exc)


def _place(address, subnets):
    """The subnet of ``address`` ("a.b.c.d/len") among ``subnets`` and why it is wrong, or (None, why)."""
    value, plen = _addressing_value(address)
    for subnet in subnets:
        size = 1 << (32 - subnet.prefix)
        if subnet.first <= value < subnet.first + size:
            if plen != subnet.prefix:
                return subnet, "prefix /%d, the rail's subnet is /%d" % (plen, subnet.prefix)
            if value in (subnet.first, subnet.first + size - 1, subnet.gateway):
                return subnet, "the subnet's network, broadcast or gateway address"
            return subnet, None
    return None, "outside its rail's subnet%s" % ("s" if len(subnets) > 1 else "")


def _addressing_value(cidr):
    address, _slash, plen = cidr.partition("/")
    a, b, c, d = [int(x) for x in address.split(".")]
    return a << 24 | b << 16 | c << 8 | d, int(plen or 32)


@check("roce.address", "a rail address outside its rail's subnet (a typo, a swapped cable re-addressed by hand, an "
       "address of another rail): RoCE traffic of that rail is routed elsewhere or not at all",
       "the roce role writes each rail's planned address (gpufleet.provision.rail_addresses); remove a hand-made address")
def _address(ctx):
    ports = rail_ports(ctx)
    subnets = _rail_subnets(ctx, len(ports))
    failures, observed, sus = [], {}, set()
    for rail, _nic, _port, netdev in ports:
        addresses = ctx.need(_netdev(ctx, netdev).get("ipv4"), ["proc/net/route", "proc/net/fib_trie"])
        observed[netdev] = addresses
        placed = [(cidr,) + _place(cidr, subnets.get(rail) or []) for cidr in addresses]
        wrong = ["%s %s" % (cidr, why) for cidr, _s, why in placed if why]
        good = [s for _c, s, why in placed if not why]
        if not addresses:
            failures.append("%s (rail %s) has no IPv4 address" % (netdev, rail))
        failures.extend("%s (rail %s): %s" % (netdev, rail, w) for w in wrong)
        sus.update(s.su for s in good)
    if len(sus) > 1:
        failures.append("rails in different SUs: %s" % ", ".join(str(s) for s in sorted(sus)))
    expected = dict((r, ["%s/%d" % (_addressing.dotted(s.first), s.prefix) for s in subnets[r]][:4]) for r in sorted(subnets))
    return outcome(failures, [], observed, expected)


def wanted_gid(ctx, port, netdev, gid):
    """The entries of a port's GID table that NCCL must use: the profile's type and family, on the
    rail netdev (IPv4: IPv4-mapped; IPv6: not link-local)."""
    table = ctx.need(port.get("gids"), ["*/ports/%s/gids*" % port.get("port")], "GID table of %s" % netdev)
    out = []
    for entry in table:
        if entry.get("type") != gid["type"] or entry.get("ndev") != netdev:
            continue
        if gid["family"] == "ipv4" and entry.get("ipv4"):
            out.append(entry)
        elif gid["family"] == "ipv6" and not entry.get("ipv4") and not str(entry.get("gid")).startswith("fe80:"):
            out.append(entry)
    return out


@check("roce.gid", "no RoCE v2 GID for the rail's address (no address, RoCE v1 only, a link-local GID): NCCL "
       "picks a GID that the fabric does not route, QPs time out (IBV_WC_RETRY_EXC_ERR) or run RoCE v1",
       "give the rail its address (roce.address); cma_roce_mode -d <dev> -p 1 -m 2; "
       "show_gids lists the table; NCCL_IB_GID_INDEX from the fabric inventory")
def _gid(ctx):
    ports = rail_ports(ctx)
    gid = ctx.desired("roce_gid", "roce.gid")
    failures, observed, indexes = [], {}, set()
    for _rail, nic, port, netdev in ports:
        found = wanted_gid(ctx, port, netdev, gid)
        observed[netdev] = ["%d %s %s" % (e["index"], e["type"], e.get("ipv4") or e["gid"]) for e in found]
        if not found:
            failures.append("%s (%s port %s): no %s %s GID" % (netdev, nic.get("name"), port.get("port"), gid["type"], gid["family"]))
        elif len(found) > 1:
            failures.append("%s: %d %s GIDs (one address per rail)" % (netdev, len(found), gid["type"]))
        else:
            indexes.add(found[0]["index"])
    if len(indexes) > 1:
        # NCCL_IB_GID_INDEX is one value for every HCA of a process (NVIDIA/nccl#890)
        failures.append("the wanted GID sits at different indexes on the rails: %s" % ", ".join(str(i) for i in sorted(indexes)))
    return outcome(failures, [], observed, dict(gid, index=sorted(indexes)[0] if len(indexes) == 1 else None))


@check("roce.qos", "PFC off on the RDMA priority, or the NIC trusting PCP instead of DSCP: RoCE traffic is lossy, "
       "every drop stalls a collective (go-back-N), throughput collapses under load with no error",
       "the roce role (mlnx_qos --trust dscp --pfc 0,0,0,1,0,0,0,0 and the persistent unit); check the leaf's PFC too")
def _qos(ctx):
    ports, want = _ports_and(ctx, "roce_qos", "roce.qos")
    failures, unknown, observed = [], [], {}
    for _rail, _nic, _port, netdev in ports:
        name = "mlnx_qos_%s" % netdev
        if ctx.outputs.get(name) is None:
            unknown.append(ctx.not_collected(name))
            continue
        qos = ctx.parsed(name, "mlnx_qos -i %s" % netdev, parse_qos)
        pfc_on = None if qos["pfc"] is None else [p for p, on in enumerate(qos["pfc"]) if on]
        observed[netdev] = {"trust": qos["trust"], "pfc": pfc_on, "dscp_prio": qos["dscp2prio"].get(want["dscp"])}
        if qos["trust"] != want["trust"]:
            failures.append("%s trusts %s" % (netdev, qos["trust"]))
        if pfc_on != [want["pfc_priority"]]:
            failures.append("%s PFC on priorities %s" % (netdev, pfc_on))
        if want["trust"] == "dscp" and qos["dscp2prio"] and qos["dscp2prio"].get(want["dscp"]) != want["pfc_priority"]:
            failures.append("%s maps DSCP %d to priority %s" % (netdev, want["dscp"], qos["dscp2prio"].get(want["dscp"])))
    return outcome(failures, unknown, observed, {"trust": want["trust"], "pfc": [want["pfc_priority"]],
                                                 "dscp": want["dscp"]})
