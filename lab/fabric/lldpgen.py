#!/usr/bin/env python3
"""Synthetic RoCE fleets for the fabric inventory: per host the JSON of ``lldpcli -f json show
neighbors`` (the shape lldpd 1.0 writes, as in its own integration test) and the node facts the
fabric reads (NICs with rail, role, netdevs, the RoCE v2 GID table; netdev speeds).

Rail k of every host of SU s is cabled to leaf ``leaf % (k, s + 1)`` port ``swp<place + 1>``; netdevs
are ``ens<k>np0`` on rail NICs ``mlx5_<k>``. ``roce_fleet`` returns (lldp, nodes); the helpers below it
plant the faults the model must find (a rail on the wrong leaf, a missing link, a slow port).
Standalone (stdlib only): tests and benchmarks/fabric_lldp_bench.py import it.
"""


def neighbour(switch, port, mac):
    """One lldpd neighbour entry: a switch sending its SysName and its port as an ifname."""
    return {"via": "LLDP", "rid": "1", "age": "0 day, 01:02:03",
            "chassis": {switch: {"id": {"type": "mac", "value": mac}, "descr": "Cumulus Linux version 5.9.1 running on Nvidia SN5600",
                                 "mgmt-ip": "192.168.200.%d" % (int(mac.split(":")[-1], 16) % 250 + 1),
                                 "capability": [{"type": "Bridge", "enabled": True}, {"type": "Router", "enabled": True}]}},
            "port": {"id": {"type": "ifname", "value": port}, "descr": port, "ttl": "120"}}


def _switch_mac(su, rail):
    return "1c:34:da:%02x:%02x:00" % (su & 255, rail & 255)


def host_facts(rails, speed_mbps=400000, gid_index=3, storage=True):
    """The part of ``ansible_facts.gpufleet`` the fabric reads, for a RoCE node."""
    nics, netdevs = [], {}
    for k in range(rails):
        nd = "ens%dnp0" % k
        gids = [{"index": 0, "gid": "fe80:0000:0000:0000:bace:f6ff:fe00:%04x" % k, "type": "IB/RoCE v1", "ndev": nd, "ipv4": None},
                {"index": 1, "gid": "fe80:0000:0000:0000:bace:f6ff:fe00:%04x" % k, "type": "RoCE v2", "ndev": nd, "ipv4": None},
                {"index": gid_index - 1, "gid": "...", "type": "IB/RoCE v1", "ndev": nd, "ipv4": "10.64.%d.2" % (16 * k)},
                {"index": gid_index, "gid": "...", "type": "RoCE v2", "ndev": nd, "ipv4": "10.64.%d.2" % (16 * k)}]
        nics.append({"name": "mlx5_%d" % k, "node_guid": None, "netdevs": [nd], "rail": k, "role": "rail",
                     "link_layer": "Ethernet", "ports": [{"port": 1, "link_layer": "Ethernet", "gids": gids}]})
        netdevs[nd] = {"nic": "mlx5_%d" % k, "mtu": 9000, "speed_mbps": speed_mbps, "operstate": "up", "ipv4": ["10.64.%d.2/20" % (16 * k)]}
    if storage:
        nics.append({"name": "mlx5_%d" % rails, "node_guid": None, "netdevs": ["enp90s0f0np0"], "rail": None, "role": "non-rail",
                     "link_layer": "Ethernet", "ports": [{"port": 1, "link_layer": "Ethernet", "gids": []}]})
        netdevs["enp90s0f0np0"] = {"nic": "mlx5_%d" % rails, "mtu": 1500, "speed_mbps": 200000, "operstate": "up", "ipv4": []}
    return {"nics": nics, "netdevs": netdevs}


def roce_fleet(sus=2, nodes_per_su=4, rails=8, host="gpu%05d", leaf="leaf-r%d-su%d", storage=True):
    """(lldp {host: lldpcli JSON}, nodes {host: {"facts", "report"}}) of a clean rail-optimized fleet."""
    lldp, nodes = {}, {}
    n = 0
    for su in range(sus):
        for place in range(nodes_per_su):
            n += 1
            name = host % n
            interfaces = {}
            for k in range(rails):
                interfaces["ens%dnp0" % k] = neighbour(leaf % (k, su + 1), "swp%d" % (place + 1), _switch_mac(su, k))
            if storage:
                interfaces["enp90s0f0np0"] = neighbour("storage-leaf-su%d" % (su + 1), "swp%d" % (place + 1), _switch_mac(su, 200))
            lldp[name] = {"lldp": {"interface": interfaces}}
            nodes[name] = {"facts": host_facts(rails, storage=storage), "report": {"status": "pass"}}
    return lldp, nodes


def swap_rails(lldp, name, a, b):
    """Host ``name``'s rail a and rail b cables swapped at the leaves."""
    ifs = lldp[name]["lldp"]["interface"]
    ifs["ens%dnp0" % a], ifs["ens%dnp0" % b] = ifs["ens%dnp0" % b], ifs["ens%dnp0" % a]


def drop_link(lldp, name, rail):
    """Host ``name``'s rail ``rail`` has no neighbour (cable out, or the leaf port down)."""
    del lldp[name]["lldp"]["interface"]["ens%dnp0" % rail]


def slow_port(nodes, name, rail, speed_mbps=200000):
    nodes[name]["facts"]["netdevs"]["ens%dnp0" % rail]["speed_mbps"] = speed_mbps
