"""Stateful stand-ins for `ip` and `mlnx_qos`, keeping the NIC's state in $ROCE_FAKE_STATE (JSON),
so a second run sees what the first one set. Output shapes as iproute2 6.1 and mlnx_qos print them
(test_netconf.py, test_qos.py). ``install(folder)`` writes the two commands (small sh wrappers that
run this file with the tool's name first)."""
import json
import os
import sys


def load():
    with open(os.environ["ROCE_FAKE_STATE"]) as handle:
        return json.load(handle)


def save(state):
    path = os.environ["ROCE_FAKE_STATE"]
    with open(path, "w") as handle:
        json.dump(state, handle)
    with open(path + ".log", "a") as handle:
        handle.write(" ".join(sys.argv) + "\n")


def ip(args):
    state = load()
    dev = args[args.index("dev") + 1]
    link = state["links"].get(dev)
    if link is None:
        sys.stderr.write('Device "%s" does not exist.\n' % dev)
        return 1
    if args[:3] == ["-j", "addr", "show"]:
        info = [{"family": "inet", "local": c.split("/")[0], "prefixlen": int(c.split("/")[1]), "scope": "global"}
                for c in link["addrs"]]
        print(json.dumps([{"ifname": dev, "flags": ["BROADCAST", "MULTICAST"] + (["UP"] if link["up"] else []),
                           "mtu": link["mtu"], "addr_info": info}]))
        return 0
    if args[:4] == ["-j", "-4", "route", "show"]:
        print(json.dumps([{"dst": k, "gateway": v} for k, v in sorted(link["routes"].items())]))
        return 0
    if args[:2] == ["link", "set"]:
        if "mtu" in args:
            link["mtu"] = int(args[args.index("mtu") + 1])
        if args[-1] == "up":
            link["up"] = True
    elif args[:2] == ["addr", "del"]:
        link["addrs"].remove(args[2])
    elif args[:2] == ["addr", "replace"]:
        link["addrs"].append(args[2])
    elif args[:2] == ["route", "replace"]:
        link["routes"][args[2]] = args[4]
    else:
        sys.stderr.write("fake ip: unknown %s\n" % args)
        return 2
    save(state)
    return 0


def mlnx_qos(args):
    state = load()
    dev = args[1]
    nic = state["qos"][dev]
    if len(args) == 2:
        print("DCBX mode: OS controlled")
        print("Priority trust state: %s" % nic["trust"])
        if nic["trust"] == "dscp":
            print("dscp2prio mapping:")
            for prio in range(8):
                print("        prio:%d dscp:%s" % (prio, "".join("%02d," % d for d in range(63, -1, -1)
                                                                 if nic["dscp2prio"].get(str(d), d // 8) == prio)))
        print("PFC configuration:")
        print("        priority    0   1   2   3   4   5   6   7")
        print("        enabled     " + "   ".join(str(f) for f in nic["pfc"]))
        return 0
    if args[2] == "--trust":
        nic["trust"] = args[3]
    elif args[2] == "--pfc":
        nic["pfc"] = [int(f) for f in args[3].split(",")]
    elif args[2] == "--dscp2prio":
        _set, dscp, prio = args[3].split(",")
        nic["dscp2prio"][dscp] = int(prio)
    save(state)
    return 0


def install(folder):
    """Write ``ip`` and ``mlnx_qos`` into ``folder``; returns {name: path}."""
    out = {}
    for name in ("ip", "mlnx_qos"):
        path = os.path.join(str(folder), name)
        with open(path, "w") as handle:
            handle.write("#!/bin/sh\nexec '%s' '%s' %s \"$@\"\n" % (sys.executable, os.path.abspath(__file__), name))
        os.chmod(path, 0o755)
        out[name] = path
    return out


if __name__ == "__main__":
    sys.argv = sys.argv[1:]          # the tool's name first, as the wrapper passes it
    sys.exit(ip(sys.argv[1:]) if sys.argv[0] == "ip" else mlnx_qos(sys.argv[1:]))
