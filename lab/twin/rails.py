#!/usr/bin/python3
"""A RoCE twin's rails as real Linux interfaces (lab only; models with ``netdev_attrs``).

At boot (``setup``, called by boot.py after the render; the twin needs CAP_NET_ADMIN): each Ethernet
rail NIC's netdev (``ens21np0``...) becomes one end of a veth pair; the other end (``pe-ens21np0``)
is the leaf's port, cabled as the model and the state's ``cabling`` say. The state's ``netdevs``
(``{ens21np0: {ipv4: [...], mtu: 9000}}``) are applied with the real ``ip``, so a dirty twin is
dirty on real interfaces and the roce role's ``ip`` commands change real ones. The rails are
recorded in /run/twin-rails.json for the two services below.

``mirror`` (twin-rails-mirror.service): the gate and the facts read the rendered view under the
hardware root, not the netns. This follows ``ip -o monitor link address`` and, at every change,
rewrites the rails' part of the view from the real interfaces with the renderer's own
``netdev_view``: sys/class/net/<if>/{mtu,operstate,speed}, the GID table of the RDMA port (one
IPv4-mapped pair per address, as the kernel's GID cache fills it) and proc/net/{route,fib_trie}.
A service rather than a re-render: an address change needs no reboot on a real node either. Speed
stays the model's (a veth has no PHY), -1 while the link is not up.

``leaves`` (twin-leaves.service): one Debian lldpd per leaf switch, bound to that leaf's port ends
with its own control socket, sending the leaf's system name and its port (``swp<port>``) every
second: the node's own lldpd (restricted to the rails) learns real LLDP neighbours.
Standalone: Debian's python3 + PyYAML, the renderer from the bind-mounted lab folder.
"""
import importlib.util
import json
import os
import select
import subprocess
import sys
import time

LAB = os.environ.get("TWIN_LAB_DIR", "/opt/gpufleet-lab/lab")
RAILS = os.environ.get("TWIN_RAILS", "/run/twin-rails.json")
ROOT = "/run/twin"
LEAVES = "/run/twin-leaves"
LLDPD_CONF = "/etc/lldpd.d/twin-rails.conf"
# The RDMA-CM configfs of a node whose rdma_cm module is loaded (OFED's openibd loads it): a device's
# folder exists once made (cma_roce_mode, the roce role's mkdir) and then holds its ports. tmpfs
# cannot fill a folder at mkdir, so the twin's boot makes each device's folder as configfs would.
RDMA_CM = "sys/kernel/config/rdma_cm"


def _renderer():
    spec = importlib.util.spec_from_file_location("twin_render", os.path.join(LAB, "hw", "render.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def ip(*args):
    proc = subprocess.run(["ip"] + list(args), capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        raise OSError("ip %s: exit %d: %s" % (" ".join(args), proc.returncode, proc.stderr.strip()))
    return proc.stdout


def plan(render, devices, dest):
    """[{netdev, peer, leaf, port, ibdir, ndir, mac, speed}] of the rendered Ethernet rail NICs."""
    rails = []
    for dev in devices:
        if dev["kind"] != "nic" or dev.get("link_layer", "InfiniBand") != "Ethernet" or not dev.get("cable"):
            continue
        name = render._netdev_name(dev)
        ndir = "%s/net/%s" % (dev["devdir"], name)
        with open(os.path.join(dest, ndir, "speed")) as handle:
            speed = int(handle.read())
        with open(os.path.join(dest, ndir, "address")) as handle:
            mac = handle.read().strip()
        rails.append({"netdev": name, "peer": "pe-" + name, "device": dev["name"], "leaf": dev["cable"]["leaf"],
                      "port": "swp%s" % dev["cable"]["port"], "ibdir": dev["devdir"] + "/infiniband/" + dev["name"],
                      "ndir": ndir, "mac": mac, "speed": speed})
    return rails


def create(rails, netdevs):
    """The veth pairs, up, with the state's MTU and addresses (a container restart is a new netns)."""
    for rail in rails:
        given = netdevs.get(rail["netdev"]) or {}
        if not os.path.exists("/sys/class/net/" + rail["netdev"]):
            ip("link", "add", rail["netdev"], "address", rail["mac"], "type", "veth", "peer", "name", rail["peer"])
        ip("link", "set", rail["netdev"], "mtu", str(given.get("mtu", 1500)))
        ip("link", "set", rail["peer"], "mtu", "9216")           # a leaf port takes jumbo frames
        for cidr in given.get("ipv4") or []:
            ip("addr", "replace", cidr, "dev", rail["netdev"])
        ip("link", "set", rail["peer"], "up")
        if given.get("operstate", "up") == "up":
            ip("link", "set", rail["netdev"], "up")


def real_links():
    """{ifname: {mtu, operstate, ipv4: [a.b.c.d/len]}} of the netns, from ``ip -j addr``."""
    out = {}
    for link in json.loads(ip("-j", "addr", "show") or "[]"):
        out[link["ifname"]] = {"mtu": link.get("mtu"), "operstate": str(link.get("operstate", "unknown")).lower(),
                               "ipv4": ["%s/%d" % (a["local"], a["prefixlen"]) for a in link.get("addr_info") or []
                                        if a.get("family") == "inet"]}
    return out


def sync(render, rails, dest):
    """The rails' part of the view under ``dest`` from the real interfaces."""
    links = real_links()
    ports = []
    for rail in rails:
        real = links.get(rail["netdev"]) or {"mtu": 1500, "operstate": "notpresent", "ipv4": []}
        up = real["operstate"] == "up"
        ports.append({"name": rail["netdev"], "ibdir": rail["ibdir"], "ndir": rail["ndir"], "mac": rail["mac"],
                      "ipv4": real["ipv4"], "mtu": real["mtu"], "speed": rail["speed"] if up else -1,
                      "operstate": real["operstate"]})
    render.netdev_view(render._Writer(dest), ports)


def setup(devices, state, dest):
    """At boot, before the view goes live: interfaces, the view from them, configfs, lldpd's config."""
    render = _renderer()
    rails = plan(render, devices, dest)
    if not rails:
        return []
    create(rails, state.get("netdevs") or {})
    sync(render, rails, dest)
    for rdma in sorted(set(r["device"] for r in rails)):
        folder = os.path.join(dest, RDMA_CM, rdma, "ports", "1")
        os.makedirs(folder, exist_ok=True)
        for name, value in (("default_roce_mode", "IB/RoCE v1"), ("default_roce_tos", "0")):
            with open(os.path.join(folder, name), "w") as handle:
                handle.write(value + "\n")
    os.makedirs(os.path.dirname(LLDPD_CONF), exist_ok=True)
    with open(LLDPD_CONF, "w") as handle:
        # the node's lldpd on its rails only (not on the leaves' port ends, not on slirp's tap0)
        handle.write("configure system interface pattern %s\n" % ",".join(r["netdev"] for r in rails))
    with open(RAILS, "w") as handle:
        json.dump(rails, handle, indent=1, sort_keys=True)
    return rails


def _load():
    with open(RAILS) as handle:
        return json.load(handle)


def mirror():
    render, rails = _renderer(), _load()
    sync(render, rails, ROOT)
    monitor = subprocess.Popen(["ip", "-o", "monitor", "link", "address"], stdout=subprocess.PIPE, text=True)
    while True:
        if not monitor.stdout.readline():
            return 1
        # a command makes several events (address, then route and GID): one sync once they stop
        while select.select([monitor.stdout], [], [], 0.05)[0]:
            if not monitor.stdout.readline():
                return 1
        sync(render, rails, ROOT)


def leaves():
    """One lldpd per leaf on its port ends; exits (the unit restarts it) when one of them ends."""
    rails = _load()
    os.makedirs(LEAVES, mode=0o755, exist_ok=True)
    procs = []
    for leaf in sorted(set(r["leaf"] for r in rails)):
        ports = [r for r in rails if r["leaf"] == leaf]
        conf = os.path.join(LEAVES, leaf + ".conf")
        lines = ["configure system hostname %s" % leaf, "configure system description 'gpufleet lab leaf %s'" % leaf,
                 "configure lldp tx-interval 1"]
        lines += ["configure ports %s lldp portidsubtype local %s description %s" % (r["peer"], r["port"], r["port"])
                  for r in ports]
        with open(conf, "w") as handle:
            handle.write("".join(line + "\n" for line in lines))
        procs.append(subprocess.Popen(["lldpd", "-d", "-u", os.path.join(LEAVES, leaf + ".sock"), "-O", conf,
                                       "-I", ",".join(r["peer"] for r in ports)], stderr=subprocess.DEVNULL))
    while all(p.poll() is None for p in procs):
        time.sleep(1)
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    return 1


if __name__ == "__main__":
    sys.exit({"mirror": mirror, "leaves": leaves}[sys.argv[1]]())
