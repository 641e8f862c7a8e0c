# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Desired state of the RoCE v2 rails (see _desired/registry.py; profile section ``roce``).

Areas (``profile | gpufleet.provision.desired('<area>')``), the ``roce`` role and the gate's
Ethernet rail checks call the same ones:

- ``roce_enabled``: {enabled, reason}: whether the profile asks for RoCE rails (a ``roce`` section);
  the role skips with ``reason`` when not;
- ``roce_interfaces``: {count, names}: how many RoCE interfaces and, when the profile names them
  (``roce.interfaces``, hybrid nodes), which netdevs; names None: the rail NICs of the node's facts;
- ``roce_mtu``: the MTU of every RoCE interface, None when not managed;
- ``roce_qos``: {trust, dscp, pfc_priority, pfc, ecn, tos} (``pfc``: the 8 per-priority flags as
  ``mlnx_qos --pfc`` takes them, ``0,0,0,1,0,0,0,0``), None when not managed;
- ``roce_gid``: {type, family}: the GID NCCL must use (default RoCE v2, IPv4), None without roce;
- ``roce_addressing``: the validated addressing spec {key, rails, per_su, su_size, host_offset,
  routed}, None when the profile plans no addresses;
- ``roce_host`` (context ``host``, ``index``, optional ``pinned``, ``interfaces``, ``facts``): one
  host's plan (``_roce.addressing.host_plan``: {index, su, rails: [{rail, interface, address, prefix,
  cidr, subnet, gateway, routes, mtu}]}); interfaces: given, else ``roce.interfaces``, else the rail
  NICs' netdevs in the node's facts (``rail_netdevs``);
- ``roce_fleet`` (context ``hosts``: [{host, index, pinned}]): the whole-fleet check (no index or
  address twice), None without addressing.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.provision.plugins.module_utils._desired.profile import section
from ansible_collections.gpufleet.provision.plugins.module_utils._desired.registry import DesiredError, area
from ansible_collections.gpufleet.provision.plugins.module_utils._roce import addressing as _addressing

# NVIDIA's lossless RoCE defaults: DSCP 26 on priority 3, ECN on (ECT(0) in the TOS byte).
QOS_DEFAULTS = {"trust": "dscp", "dscp": 26, "pfc_priority": 3, "ecn": True}
GID_DEFAULTS = {"type": "RoCE v2", "family": "ipv4"}
ECT0 = 2


@area("roce_enabled")
def roce_enabled(profile, **_context):
    if section(profile, "roce") is not None:
        return {"enabled": True, "reason": "profile section roce"}
    if section(profile, "ib", "link_layer") == "Ethernet":
        return {"enabled": False, "reason": "ib.link_layer is Ethernet but the profile has no roce section "
                                            "(nothing to configure: addressing, MTU, QoS)"}
    return {"enabled": False, "reason": "no roce section in the profile (InfiniBand rails)"}


@area("roce_interfaces")
def roce_interfaces(profile, **_context):
    """{count, names}: roce.interfaces when given, else nic.rails rail NICs (which must be Ethernet)."""
    names = section(profile, "roce", "interfaces")
    if names:
        if len(set(names)) != len(names):
            raise DesiredError("roce.interfaces: %s listed twice" % sorted(n for n in set(names) if names.count(n) > 1)[0])
        return {"count": len(names), "names": list(names)}
    if section(profile, "ib", "link_layer") == "InfiniBand":
        raise DesiredError("roce: the rail NICs are InfiniBand (ib.link_layer); name the Ethernet netdevs in "
                           "roce.interfaces (hybrid nodes) or set ib.link_layer: Ethernet")
    rails = section(profile, "nic", "rails")
    if not rails:
        raise DesiredError("roce: how many RoCE interfaces? set nic.rails (the rail NICs) or roce.interfaces")
    return {"count": rails, "names": None}


@area("roce_mtu")
def roce_mtu(profile, **_context):
    return section(profile, "roce", "mtu")


@area("roce_qos")
def roce_qos(profile, **_context):
    given = section(profile, "roce", "qos")
    if given is None:
        return None
    qos = dict(QOS_DEFAULTS)
    qos.update((k, v) for k, v in given.items() if v is not None)
    wanted_tos = qos["dscp"] << 2 | (ECT0 if qos["ecn"] else 0)
    tos = given.get("tos")
    if tos is None:
        tos = wanted_tos
    elif tos >> 2 != qos["dscp"]:
        raise DesiredError("roce.qos.tos: %d carries DSCP %d, roce.qos.dscp is %d (tos = dscp << 2 | ECN bits: %d)"
                           % (tos, tos >> 2, qos["dscp"], wanted_tos))
    qos["tos"] = tos
    qos["pfc"] = ",".join("1" if prio == qos["pfc_priority"] else "0" for prio in range(8))
    return qos


@area("roce_gid")
def roce_gid(profile, **_context):
    if section(profile, "roce") is None:
        return None
    gid = dict(GID_DEFAULTS)
    gid.update((k, v) for k, v in (section(profile, "roce", "gid") or {}).items() if v is not None)
    return gid


def _plan(profile):
    spec = section(profile, "roce", "addressing")
    if spec is None:
        return None
    try:
        return _addressing.plan(spec, roce_interfaces(profile)["count"])
    except _addressing.AddressingError as exc:
        raise DesiredError(str(exc))


@area("roce_addressing")
def roce_addressing(profile, **_context):
    plan = _plan(profile)
    if plan is None:
        return None
    return {"key": plan.key, "rails": plan.rails, "per_su": plan.per_su, "su_size": plan.su_size,
            "host_offset": plan.host_offset, "routed": plan.per_su}


def rail_netdevs(facts):
    """The netdev of each rail NIC of a node's facts (``ansible_facts.gpufleet``), in rail order."""
    nics = [n for n in (facts or {}).get("nics") or [] if n.get("role") == "rail" and n.get("rail") is not None]
    return [(n.get("netdevs") or [None])[0] for n in sorted(nics, key=lambda n: n["rail"])]


def _interfaces(profile, interfaces, facts):
    if interfaces:
        return list(interfaces)
    return roce_interfaces(profile)["names"] or rail_netdevs(facts)


@area("roce_host")
def roce_host(profile, host=None, index=None, pinned=None, interfaces=None, facts=None, **_context):
    """One host's plan; without roce.addressing the rails carry only their interface and MTU
    (address, cidr, subnet, gateway None, routes [])."""
    names = _interfaces(profile, interfaces, facts)
    plan = _plan(profile)
    if plan is None:
        count = roce_interfaces(profile)["count"]
        return {"index": None, "su": None, "rails": [
            {"rail": rail, "interface": names[rail] if rail < len(names) else None, "address": None, "prefix": None,
             "cidr": None, "subnet": None, "gateway": None, "routes": [], "mtu": roce_mtu(profile)}
            for rail in range(count)]}
    try:
        return _addressing.host_plan(plan, host, index, pinned=pinned, interfaces=names, mtu=roce_mtu(profile))
    except _addressing.AddressingError as exc:
        raise DesiredError(str(exc))


@area("roce_fleet")
def roce_fleet(profile, hosts=None, **_context):
    """Whole-fleet check of ``hosts`` ([{host, index, pinned}]): the summary of
    ``_roce.addressing.validate_fleet``; DesiredError listing the problems."""
    plan = _plan(profile)
    if plan is None:
        return None
    try:
        return _addressing.validate_fleet(plan, hosts or [])
    except _addressing.AddressingError as exc:
        raise DesiredError(str(exc))
