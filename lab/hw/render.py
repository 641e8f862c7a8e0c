#!/usr/bin/env python3
"""Render a node's sysfs/procfs view from a hardware model + state (one model, two uses).

The captured fixture trees (tests/fixtures/trees/*.ttar) and the lab's twins are both rendered by
this file, so they cannot drift apart. It writes the layout of shared/DOMAIN.md section 3, with real
file names, formats and symlink structure:

    sys/bus/pci/devices/0000:18:00.0 -> ../../../devices/pci0000:15/0000:15:01.0/.../0000:18:00.0
    sys/class/infiniband/mlx5_0 -> ../../devices/pci0000:15/.../0000:19:00.0/infiniband/mlx5_0
    sys/devices/system/node/node0/cpulist: "0-12,104-116"

What a boot decides is derived the way the kernel derives it: hugepage pools from the command line
(a second ``hugepages=`` without a ``hugepagesz=`` between is ignored, as the kernel warns), THP
and NUMA balancing from the command line when it sets them, IOMMU groups only when VT-d is on in
the BIOS and the command line enables it, ``vmx`` and /dev/kvm only with VT-x.

Standalone on purpose (stdlib + PyYAML): it runs inside a twin with Debian's python3.
Usage: render.py --model MODEL.yml --state STATE.yml --dest DIR
"""
import argparse
import os
import re
import shlex
import struct
import sys
import uuid

ACS_BITS = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans")
# What "ACS enabled" in a BIOS sets on every switch downstream port (lspci: SrcValid+ ReqRedir+ ...).
BIOS_ACS = ("SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd")
DOMAINS = {"off": 1, "snc2": 2, "snc4": 4, "nps1": 1, "nps2": 2, "nps4": 4}
KINDS = ("root_port", "switch_port", "gpu", "nic", "nvswitch", "nvme")
PAGE_SIZES = {"2M": 2048, "2048K": 2048, "1G": 1048576, "1048576K": 1048576}


class ModelError(ValueError):
    pass


def render(model, state, dest):
    """Write the view of ``model`` in ``state`` under ``dest`` (must be empty or absent)."""
    state = state or {}
    os.makedirs(dest, exist_ok=True)
    w = _Writer(dest)
    bios = dict({"snc": "snc4" if "snc4" in model.get("numa_modes", []) else model.get("numa_modes", ["off"])[-1],
                 "hyperthreading": True, "vtx": True, "vtd": True, "acs": False}, **(state.get("bios") or {}))
    kernel = state.get("kernel") or {}
    cmdline = kernel.get("cmdline", "BOOT_IMAGE=/boot/vmlinuz root=/dev/sda1 ro quiet")
    params = _cmdline_params(cmdline)
    topo = _topology(model, bios)
    hugepages = _hugepages_from_cmdline(params)

    _cpus(w, model, bios, topo, state, params)
    _numa(w, topo, hugepages, state.get("hugepages_in_use") or {})
    devices = _pci(w, model, bios, topo, state)
    _infiniband(w, model, devices, state)
    if model.get("netdev_attrs"):
        _netdevs(w, devices, state)
    _nvme(w, devices, state)
    _kernel(w, model, bios, kernel, params, cmdline, hugepages, state, devices)
    _nvidia(w, devices, state)
    return devices


class _Writer:
    def __init__(self, dest):
        self.dest = dest

    def file(self, rel, content, mode=0o444):
        path = os.path.join(self.dest, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        data = content if isinstance(content, bytes) else (content + "\n").encode("utf-8")
        if os.path.lexists(path):
            os.chmod(path, 0o644)
        with open(path, "wb") as handle:
            handle.write(data)
        os.chmod(path, mode)

    def link(self, rel, target_rel):
        """Symlink ``rel`` -> ``target_rel`` (both relative to the root), written relative."""
        path = os.path.join(self.dest, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        target = os.path.relpath(os.path.join(self.dest, target_rel), os.path.dirname(path))
        if os.path.lexists(path):
            os.unlink(path)
        os.symlink(target, path)

    def mkdir(self, rel):
        os.makedirs(os.path.join(self.dest, rel), exist_ok=True)


def cpulist(cpus):
    out, cpus, i = [], sorted(set(cpus)), 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append(str(cpus[i]) if i == j else "%d-%d" % (cpus[i], cpus[j]))
        i = j + 1
    return ",".join(out)


def _cmdline_params(cmdline):
    try:
        words = shlex.split(cmdline)
    except ValueError:
        words = cmdline.split()
    return [(w.partition("=")[0], w.partition("=")[2] if "=" in w else None) for w in words]


def _page_kb(text):
    text = (text or "").upper()
    if text in PAGE_SIZES:
        return PAGE_SIZES[text]
    match = re.match(r"^(\d+)([KMG])$", text)
    if not match:
        return None
    return int(match.group(1)) * {"K": 1, "M": 1024, "G": 1048576}[match.group(2)]


def _hugepages_from_cmdline(params):
    """Pools per size (kB) as the kernel sets them at boot."""
    pools, size, default = {}, None, 2048
    for key, value in params:
        if key == "default_hugepagesz":
            default = _page_kb(value) or default
    fresh = True  # a hugepagesz= since the last hugepages=
    for key, value in params:
        if key == "hugepagesz":
            size, fresh = _page_kb(value), True
        elif key == "hugepages":
            target = size or default
            if not fresh or target in pools:
                continue  # "HugeTLB: hugepages= specified twice without interleaving hugepagesz=, ignoring"
            try:
                pools[target] = int(value)
            except (TypeError, ValueError):
                continue
            fresh = False
    return pools


def _topology(model, bios):
    """CPUs, cores and NUMA domains for the BIOS settings."""
    cpu = model["cpu"]
    sockets, per = int(cpu["sockets"]), int(cpu["cores_per_socket"])
    mode = bios.get("snc") or "off"
    if mode not in DOMAINS or mode not in model.get("numa_modes", ["off"]):
        raise ModelError("NUMA mode %r not offered by model %s (modes: %s)" % (mode, model.get("name"), model.get("numa_modes")))
    domains = DOMAINS[mode]
    ht = bool(bios.get("hyperthreading", True)) and cpu.get("threads_per_core", 2) > 1
    total_cores = sockets * per
    cores = []  # (socket, core index in socket, [cpus])
    for s in range(sockets):
        for c in range(per):
            first = s * per + c
            if not ht:
                threads = [first]
            elif cpu.get("numbering", "cores-first") == "cores-first":
                threads = [first, first + total_cores]
            else:  # pairs: 2k, 2k+1
                threads = [2 * first, 2 * first + 1]
            cores.append((s, c, threads))
    nodes = []
    for s in range(sockets):
        for d in range(domains):
            lo, hi = d * per // domains, (d + 1) * per // domains
            cpus = sorted(t for (cs, c, threads) in cores if cs == s and lo <= c < hi for t in threads)
            nodes.append({"id": s * domains + d, "socket": s, "cpus": cpus,
                          "memory_kb": int(model["memory_kb_per_socket"]) // domains})
    return {"cores": cores, "nodes": nodes, "domains": domains, "ht": ht, "sockets": sockets, "per": per,
            "cpus": sorted(t for (_, _, threads) in cores for t in threads)}


def _node_of(topo, socket, quadrant):
    return socket * topo["domains"] + (quadrant * topo["domains"]) // 4


def _cpus(w, model, bios, topo, state, params):
    base = "sys/devices/system/cpu"
    allcpus = topo["cpus"]
    for name in ("online", "possible", "present"):
        w.file("%s/%s" % (base, name), cpulist(allcpus))
    governor = state.get("governor") or {}
    default_gov = governor.get("default", "performance")
    for key, value in params:
        if key == "cpufreq.default_governor" and value:
            default_gov = value
    overrides = dict((int(k), v) for k, v in (governor.get("cpus") or {}).items())
    for (s, c, threads) in topo["cores"]:
        for t in threads:
            cdir = "%s/cpu%d" % (base, t)
            w.file(cdir + "/topology/physical_package_id", str(s))
            w.file(cdir + "/topology/die_id", "0")
            w.file(cdir + "/topology/core_id", str(c))
            w.file(cdir + "/topology/thread_siblings_list", cpulist(threads))
            w.file(cdir + "/topology/core_siblings_list",
                   cpulist([x for (cs, _, th) in topo["cores"] if cs == s for x in th]))
            w.file(cdir + "/cpufreq/scaling_governor", overrides.get(t, default_gov), mode=0o644)
            w.file(cdir + "/cpufreq/scaling_available_governors", "performance powersave")
    w.file(base + "/smt/active", "1" if topo["ht"] else "0")
    w.file(base + "/smt/control", "on" if topo["ht"] else "notsupported", mode=0o644)
    flags = list(model["cpu"].get("flags") or [])
    if not bios.get("vtx", True):
        flags = [f for f in flags if f not in ("vmx", "svm")]  # kernels >= 5.8 drop the flag
    blocks = []
    for (s, c, threads) in topo["cores"]:
        for t in threads:
            blocks.append("\n".join([
                "processor\t: %d" % t,
                "vendor_id\t: %s" % ("GenuineIntel" if model["cpu"].get("vendor") == "intel" else "AuthenticAMD"),
                "model name\t: %s" % model["cpu"]["model"],
                "physical id\t: %d" % s,
                "siblings\t: %d" % (topo["per"] * len(threads)),
                "core id\t\t: %d" % c,
                "cpu cores\t: %d" % topo["per"],
                "flags\t\t: %s" % " ".join(flags),
                "",
            ]))
    w.file("proc/cpuinfo", "\n".join(sorted(blocks, key=lambda b: int(b.split("\t: ")[1].split("\n")[0]))))


def _numa(w, topo, hugepages, in_use):
    """Node folders; ``in_use`` ({node: {size_kB: pages}}, state ``hugepages_in_use``) lowers
    free_hugepages below nr_hugepages, as pages a running guest or process holds."""
    base = "sys/devices/system/node"
    ids = [n["id"] for n in topo["nodes"]]
    w.file(base + "/online", cpulist(ids))
    w.file(base + "/possible", cpulist(ids))
    w.file(base + "/has_memory", cpulist(ids))
    count = len(topo["nodes"])
    for node in topo["nodes"]:
        ndir = "%s/node%d" % (base, node["id"])
        w.file(ndir + "/cpulist", cpulist(node["cpus"]))
        dist = []
        for other in topo["nodes"]:
            dist.append(10 if other["id"] == node["id"] else (12 if other["socket"] == node["socket"] else 21))
        w.file(ndir + "/distance", " ".join(str(d) for d in dist))
        huge_total = 0
        for size in (2048, 1048576):
            total = hugepages.get(size, 0)
            share = total // count + (1 if node["id"] < total % count else 0)
            huge_total += share * size
            w.file("%s/hugepages/hugepages-%dkB/nr_hugepages" % (ndir, size), str(share), mode=0o644)
            pools = in_use.get(node["id"]) or in_use.get(str(node["id"])) or {}
            used = int(pools.get(size, pools.get(str(size), 0)))
            w.file("%s/hugepages/hugepages-%dkB/free_hugepages" % (ndir, size), str(max(0, share - used)))
        mem = node["memory_kb"]
        used = 2 * 1024 * 1024 + huge_total
        lines = [("MemTotal", mem), ("MemFree", mem - used), ("MemUsed", used), ("Active", 1048576),
                 ("Inactive", 524288), ("HugePages_Total", hugepages.get(2048, 0) // count),
                 ("HugePages_Free", hugepages.get(2048, 0) // count), ("HugePages_Surp", 0)]
        w.file(ndir + "/meminfo", "\n".join(
            "Node %d %-16s%10d%s" % (node["id"], k + ":", v, "" if k.startswith("HugePages") else " kB") for k, v in lines))


def _walk(tree, parents):
    """Yield (kind, spec, parents) for every node of a PCI tree, depth first."""
    for item in tree or []:
        kinds = [k for k in KINDS if k in item]
        if len(kinds) != 1:
            raise ModelError("PCI tree item needs exactly one of %s: %r" % (", ".join(KINDS), item))
        kind = kinds[0]
        yield kind, item, parents
        if kind in ("root_port", "switch_port"):
            for sub in _walk(item.get("children"), parents + [item[kind]]):
                yield sub
        elif item.get("children"):
            raise ModelError("%s %s cannot have children" % (kind, item[kind]))


def _pci(w, model, bios, topo, state):
    defaults = model.get("device_defaults") or {}
    acs_state = state.get("acs") or {}
    devices = []
    for complex_ in model.get("pci") or []:
        host = "pci" + complex_["host"]
        if complex_.get("sysfs_prefix"):  # guests: the host bridge hangs off ACPI/VMBus nodes
            host = complex_["sysfs_prefix"].strip("/") + "/" + host
        node = _node_of(topo, int(complex_.get("socket", 0)), int(complex_.get("quadrant", 0)))
        if complex_.get("numa_node") is not None:
            node = int(complex_["numa_node"])
        for kind, item, parents in _walk(complex_.get("tree"), []):
            spec = dict(defaults.get(kind) or {}, **item)
            bdf = item[kind]
            devdir = "/".join(["sys/devices", host] + parents + [bdf])
            w.file(devdir + "/vendor", spec.get("vendor", "0x0000"))
            w.file(devdir + "/device", spec.get("device", "0x0000"))
            w.file(devdir + "/class", spec.get("class", "0x000000"))
            w.file(devdir + "/numa_node", str(node))
            speed, width = (spec.get("link") or ["Unknown", 0])[:2]
            cur_speed, cur_width = spec.get("current_link", [speed, width])[:2]
            w.file(devdir + "/current_link_speed", cur_speed)
            w.file(devdir + "/current_link_width", str(cur_width))
            w.file(devdir + "/max_link_speed", speed)
            w.file(devdir + "/max_link_width", str(width))
            if kind in ("root_port", "switch_port"):
                bits = list(acs_state.get(bdf) or [])
                if bios.get("acs") and kind == "switch_port" and bdf not in acs_state:
                    bits = list(BIOS_ACS)
                w.file(devdir + "/config", acs_config(bits), mode=0o644)
            else:
                w.file(devdir + "/config", bytes(bytearray(4096)), mode=0o644)
            if spec.get("driver"):
                w.mkdir("sys/bus/pci/drivers/" + spec["driver"])
                w.link(devdir + "/driver", "sys/bus/pci/drivers/" + spec["driver"])
            w.link("sys/bus/pci/devices/" + bdf, devdir)
            devices.append(dict(spec, kind=kind, bdf=bdf, devdir=devdir, numa_node=node))
    return devices


def acs_config(bits, cap=0x5F, length=4096):
    """4 KiB config space with the ACS extended capability (id 0x000D) at 0x100, control at 0x106."""
    data = bytearray(length)
    struct.pack_into("<I", data, 0, 0)
    struct.pack_into("<I", data, 0x100, 0x000D | (1 << 16))
    ctl = 0
    for name in bits:
        if name not in ACS_BITS:
            raise ModelError("unknown ACS bit %r (known: %s)" % (name, ", ".join(ACS_BITS)))
        ctl |= 1 << ACS_BITS.index(name)
    struct.pack_into("<HH", data, 0x104, cap, ctl)
    return bytes(data)


def _guid(seed, index):
    raw = uuid.uuid5(uuid.NAMESPACE_DNS, "%s/%d" % (seed, index)).hex[:16]
    return ":".join(raw[i:i + 4] for i in range(0, 16, 4))


def _netdev_name(spec):
    if spec.get("netdev"):
        return spec["netdev"]
    # systemd's predictable names: ibp25s0 (IB), enp97s0f1np1 (Ethernet, function 1, port 1)
    bus, rest = spec["bdf"].split(":")[1], spec["bdf"].split(":")[2]
    slot, fn = rest.split(".")
    if spec.get("link_layer", "InfiniBand") == "InfiniBand":
        return "ibp%ds%d" % (int(bus, 16), int(slot, 16))
    return "enp%ds%df%snp%s" % (int(bus, 16), int(slot, 16), fn, fn)


def _infiniband(w, model, devices, state):
    ports_state = state.get("ib_ports") or {}
    cabling = state.get("cabling") or {}
    host = state.get("hostname") or model.get("name", "node")
    lid = int(state.get("first_lid", 1))
    for index, dev in enumerate(d for d in devices if d["kind"] == "nic"):
        name = dev["name"]
        ibdir = dev["devdir"] + "/infiniband/" + name
        guid = _guid(host, index)
        w.file(ibdir + "/node_guid", guid)
        w.file(ibdir + "/sys_image_guid", guid)
        w.file(ibdir + "/fw_ver", (state.get("nic_firmware") or {}).get(name, dev.get("fw_ver", "")))
        w.file(ibdir + "/board_id", dev.get("board_id", ""))
        w.file(ibdir + "/hca_type", dev.get("hca_type", ""))
        w.file(ibdir + "/node_type", "1: CA")
        w.file(ibdir + "/node_desc", "%s %s" % (host, name), mode=0o644)
        w.link(ibdir + "/device", dev["devdir"])
        w.link("sys/class/infiniband/" + name, ibdir)
        w.mkdir("%s/net/%s" % (dev["devdir"], _netdev_name(dev)))
        ports = dict((str(k), v) for k, v in (ports_state.get(name) or {}).items())
        for port in range(1, int(dev.get("ports", 1)) + 1):
            override = ports.get(str(port)) or {}
            pdir = "%s/ports/%d" % (ibdir, port)
            st = override.get("state", "ACTIVE")
            codes = {"DOWN": 1, "INIT": 2, "ARMED": 3, "ACTIVE": 4}
            w.file(pdir + "/state", "%d: %s" % (codes.get(st, 1), st))
            phys = override.get("phys_state", "LinkUp" if st != "DOWN" else "Disabled")
            pcodes = {"Sleep": 1, "Polling": 2, "Disabled": 3, "LinkUp": 5}
            w.file(pdir + "/phys_state", "%d: %s" % (pcodes.get(phys, 3), phys))
            w.file(pdir + "/rate", override.get("rate", dev.get("rate", "400 Gb/sec (4X NDR)")))
            layer = dev.get("link_layer", "InfiniBand")
            w.file(pdir + "/link_layer", layer)
            w.file(pdir + "/lid", "0x%x" % (lid if layer == "InfiniBand" else 0))
            lid += 1
            # PortCounters as the kernel exposes them (IBA names); a healthy link counts no errors.
            counters = dict((c, 0) for c in IB_ERROR_COUNTERS)
            counters.update(override.get("counters") or {})
            for counter, value in sorted(counters.items()):
                w.file("%s/counters/%s" % (pdir, counter), str(value))
            dev.setdefault("port_state", {})[port] = st
        cable = dict(dev.get("cable") or {}, **(cabling.get(name) or {}))
        if cable:
            dev["cable"] = cable


def _mac(guid):
    """The port MAC of an Ethernet-mode ConnectX: NVIDIA/Mellanox's OUI b8:ce:f6, then the low three
    bytes of the node GUID (stable per twin and NIC)."""
    raw = guid.replace(":", "")
    return "b8:ce:f6:" + ":".join(raw[i:i + 2] for i in (10, 12, 14))


def _gid(words):
    """Eight 16-bit words -> the kernel's gids/<i> text (eight groups of four hex digits)."""
    return ":".join("%04x" % w for w in words)


def _link_local_gid(mac):
    octets = [int(x, 16) for x in mac.split(":")]
    eui = [octets[0] ^ 0x02, octets[1], octets[2], 0xff, 0xfe, octets[3], octets[4], octets[5]]
    return _gid([0xfe80, 0, 0, 0] + [eui[i] << 8 | eui[i + 1] for i in range(0, 8, 2)])


def _ipv4_gid(address):
    a, b, c, d = [int(x) for x in address.split("/")[0].split(".")]
    return _gid([0, 0, 0, 0, 0, 0xffff, a << 8 | b, c << 8 | d])


GID_TABLE_SIZE = 16   # real ConnectX ports expose 255 entries; the unused ones read as zeros


def _netdev_state(dev, state):
    """A RoCE port's netdev as the state sets it: {name, ipv4 [a.b.c.d/len], mtu, speed (Mb/s), operstate}."""
    name = _netdev_name(dev)
    given = dict((state.get("netdevs") or {}).get(name) or {})
    up = (dev.get("port_state") or {}).get(1, "ACTIVE") == "ACTIVE"
    rate = re.match(r"^\s*(\d+)", str(dev.get("rate", "0"))).group(1)
    return {"name": name, "ipv4": list(given.get("ipv4") or []), "mtu": int(given.get("mtu", dev.get("mtu", 1500))),
            "speed": int(given.get("speed", int(rate) * 1000 if up else -1)),
            "operstate": given.get("operstate", "up" if up else "down")}


def _netdevs(w, devices, state):
    """Ethernet ports (model ``netdev_attrs``): the GID table of port 1, the netdev's attributes and
    the kernel's IPv4 view of it (proc/net/route and proc/net/fib_trie, read by the facts).
    Returns the ports written ({name, ibdir, ndir, mac, ipv4, mtu, speed, operstate}): a twin's
    boot and its lab/twin/rails.py mirror rewrite them from the real interfaces with netdev_view."""
    ports = []
    for dev in (d for d in devices if d["kind"] == "nic" and d.get("link_layer", "InfiniBand") == "Ethernet"):
        nd = _netdev_state(dev, state)
        ibdir = dev["devdir"] + "/infiniband/" + dev["name"]
        guid = open(os.path.join(w.dest, ibdir, "node_guid")).read().strip()
        ports.append(dict(nd, ibdir=ibdir, ndir="%s/net/%s" % (dev["devdir"], nd["name"]), mac=_mac(guid)))
    netdev_view(w, ports)
    return ports


def netdev_view(w, ports):
    """Write each port's GID table, netdev attributes and class link, and the route/fib_trie files."""
    routes, locals_ = [], []
    for nd in ports:
        entries = [(_link_local_gid(nd["mac"]), "IB/RoCE v1"), (_link_local_gid(nd["mac"]), "RoCE v2")]
        for cidr in nd["ipv4"]:
            entries += [(_ipv4_gid(cidr), "IB/RoCE v1"), (_ipv4_gid(cidr), "RoCE v2")]
            routes.append((nd["name"], cidr))
            locals_.append(cidr)
        pdir = nd["ibdir"] + "/ports/1"
        for index in range(GID_TABLE_SIZE):
            gid, kind = entries[index] if index < len(entries) else (_gid([0] * 8), None)
            w.file("%s/gids/%d" % (pdir, index), gid)
            for attr in ("types", "ndevs"):   # an unused entry's type and ndev cannot be read (EINVAL): absent
                path = os.path.join(w.dest, "%s/gid_attrs/%s/%d" % (pdir, attr, index))
                if kind:
                    w.file("%s/gid_attrs/%s/%d" % (pdir, attr, index), kind if attr == "types" else nd["name"])
                elif os.path.lexists(path):
                    os.unlink(path)
        w.file(nd["ndir"] + "/mtu", str(nd["mtu"]), mode=0o644)
        w.file(nd["ndir"] + "/speed", str(nd["speed"]))
        w.file(nd["ndir"] + "/operstate", nd["operstate"])
        w.file(nd["ndir"] + "/address", nd["mac"])
        w.link("sys/class/net/" + nd["name"], nd["ndir"])
    w.file("proc/net/route", proc_net_route(routes))
    w.file("proc/net/fib_trie", proc_net_fib_trie(locals_))


def _ip_int(text):
    a, b, c, d = [int(x) for x in text.split(".")]
    return a << 24 | b << 16 | c << 8 | d


def _ip_text(value):
    return ".".join(str(value >> s & 255) for s in (24, 16, 8, 0))


def _network(cidr):
    addr, plen = cidr.split("/")
    mask = (0xffffffff << (32 - int(plen))) & 0xffffffff
    return _ip_int(addr) & mask, mask, int(plen)


def _le_hex(value):
    """/proc/net/route prints addresses as the host's (little-endian) 32-bit word in hex."""
    return "%08X" % struct.unpack("<I", struct.pack(">I", value))[0]


def proc_net_route(routes):
    """/proc/net/route with one connected route (proto kernel, scope link) per interface address."""
    lines = ["Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\t\t"]
    for name, cidr in routes:
        net, mask, _plen = _network(cidr)
        lines.append("%s\t%s\t00000000\t0001\t0\t0\t0\t%s\t0\t0\t0\t\t" % (name, _le_hex(net), _le_hex(mask)))
    return "\n".join(lines)


def proc_net_fib_trie(cidrs):
    """/proc/net/fib_trie (Main and Local tables, the layout of the kernel's fib_trie_seq_show):
    per address its connected network (link UNICAST), the address itself (host LOCAL) and the
    network's broadcast (link BROADCAST)."""
    body = []
    for cidr in sorted(cidrs, key=lambda c: _network(c)[0]):
        net, mask, plen = _network(cidr)
        body += ["  +-- %s/%d 2 0 2" % (_ip_text(net), plen),
                 "     |-- %s" % _ip_text(net), "        /%d link UNICAST" % plen,
                 "     |-- %s" % cidr.split("/")[0], "        /32 host LOCAL",
                 "     |-- %s" % _ip_text(net | (~mask & 0xffffffff)), "        /32 link BROADCAST"]
    return "\n".join(["Main:"] + body + ["Local:"] + body)


# The error counters of ports/<p>/counters (same names as the gate reads; kept here because the
# renderer runs standalone inside twins).
IB_ERROR_COUNTERS = ("symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors",
                     "port_rcv_remote_physical_errors", "port_rcv_switch_relay_errors", "port_xmit_discards",
                     "port_xmit_constraint_errors", "port_rcv_constraint_errors", "local_link_integrity_errors",
                     "excessive_buffer_overrun_errors", "VL15_dropped")


def _nvme(w, devices, state):
    firmware = state.get("nvme_firmware") or {}
    for dev in (d for d in devices if d["kind"] == "nvme"):
        ndir = "%s/nvme/%s" % (dev["devdir"], dev["name"])
        w.file(ndir + "/model", "%-40s" % dev.get("model", ""))
        w.file(ndir + "/serial", "%-20s" % dev.get("serial", ""))
        w.file(ndir + "/firmware_rev", "%-8s" % firmware.get(dev["name"], dev.get("firmware", "")))
        w.link("sys/class/nvme/" + dev["name"], ndir)


def _kernel(w, model, bios, kernel, params, cmdline, hugepages, state, devices):
    w.file("proc/cmdline", cmdline)
    w.file("proc/sys/kernel/osrelease", kernel.get("release", "6.1.0-26-amd64"))
    w.file("proc/sys/kernel/random/boot_id", state.get("boot_id") or str(uuid.uuid4()))
    keys = dict(params)
    thp = dict({"enabled": "madvise", "defrag": "madvise"}, **(state.get("thp") or {}))
    if keys.get("transparent_hugepage") in ("never", "always", "madvise"):
        thp["enabled"] = keys["transparent_hugepage"]
    w.file("sys/kernel/mm/transparent_hugepage/enabled",
           " ".join("[%s]" % c if c == thp["enabled"] else c for c in ("always", "madvise", "never")), mode=0o644)
    w.file("sys/kernel/mm/transparent_hugepage/defrag",
           " ".join("[%s]" % c if c == thp["defrag"] else c for c in ("always", "defer", "defer+madvise", "madvise", "never")),
           mode=0o644)
    balancing = int(state.get("numa_balancing", 1))
    if keys.get("numa_balancing") in ("disable", "enable"):
        balancing = 0 if keys["numa_balancing"] == "disable" else 1
    w.file("proc/sys/kernel/numa_balancing", str(balancing), mode=0o644)
    for size in (2048, 1048576):
        w.file("sys/kernel/mm/hugepages/hugepages-%dkB/nr_hugepages" % size, str(hugepages.get(size, 0)), mode=0o644)
    total = int(model["memory_kb_per_socket"]) * int(model["cpu"]["sockets"])
    w.file("proc/meminfo", "\n".join([
        "MemTotal:       %d kB" % total,
        "MemFree:        %d kB" % (total - 8388608 - sum(s * n for s, n in hugepages.items())),
        "HugePages_Total:   %d" % hugepages.get(2048, 0),
        "HugePages_Free:    %d" % hugepages.get(2048, 0),
        "Hugepagesize:       2048 kB",
    ]))
    # IOMMU: VT-d in the BIOS AND the kernel asked for it (Intel needs intel_iommu=on; AMD is on by default).
    vendor_iommu = model.get("iommu", "dmar")
    wanted = keys.get("intel_iommu") == "on" if vendor_iommu == "dmar" else keys.get("amd_iommu") != "off"
    if bios.get("vtd", True) and wanted:
        for i in range(int(model["cpu"]["sockets"]) * 4):
            w.mkdir("sys/devices/virtual/iommu/%s%d" % (vendor_iommu, i))
            w.link("sys/class/iommu/%s%d" % (vendor_iommu, i), "sys/devices/virtual/iommu/%s%d" % (vendor_iommu, i))
        for group, dev in enumerate(devices):
            w.link("sys/kernel/iommu_groups/%d/devices/%s" % (group, dev["bdf"]), dev["devdir"])
    else:
        w.mkdir("sys/class/iommu")
        w.mkdir("sys/kernel/iommu_groups")
    if bios.get("vtx", True):
        w.file("dev/kvm", "", mode=0o666)
    mounts = state.get("mounts") or [
        {"device": "/dev/nvme0n1p2", "mountpoint": "/", "fstype": "ext4", "options": "rw,relatime"},
        {"device": "/dev/md0", "mountpoint": "/raid", "fstype": "ext4", "options": "rw,relatime"},
    ]
    w.file("proc/self/mounts", "\n".join(
        "%s %s %s %s 0 0" % (m["device"], m["mountpoint"].replace(" ", "\\040"), m["fstype"], m["options"]) for m in mounts))
    if state.get("os_release"):
        w.file("etc/os-release", "\n".join('%s="%s"' % (k, v) for k, v in state["os_release"].items()), mode=0o644)


def _nvidia(w, devices, state):
    version = (state.get("nvidia") or {}).get("driver_version")
    if not version:
        return
    w.file("sys/module/nvidia/version", version)
    if (state.get("nvidia") or {}).get("peermem", True):
        # GPUDirect RDMA: nvidia_peermem, loaded with the driver unless the state says otherwise
        # (state nvidia.peermem: false renders a node without it; a twin's boot loads it only from
        # modules-load.d, and its modprobe stand-in loads it live: lab/image/files/modprobe).
        w.file("sys/module/nvidia_peermem/initstate", "live")
    w.file("proc/driver/nvidia/version",
           "NVRM version: NVIDIA UNIX x86_64 Kernel Module  %s  Fri May 31 09:35:42 UTC 2024\n"
           "GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)" % version)
    for dev in devices:
        if dev["kind"] == "gpu":
            w.file("proc/driver/nvidia/gpus/%s/information" % dev["bdf"], "\n".join([
                "Model: \t\t %s" % dev.get("model", "NVIDIA GPU"),
                "IRQ:   \t\t 0",
                "GPU UUID: \t GPU-%s" % uuid.uuid5(uuid.NAMESPACE_DNS, dev["bdf"]),
                "Video BIOS: \t 96.00.99.00.01",
                "Bus Type: \t PCIe",
                "DMA Size: \t 52 bits",
                "DMA Mask: \t 0xfffffffffffff",
                "Bus Location: \t %s" % dev["bdf"],
                "Device Minor: \t %d" % sum(1 for d in devices if d["kind"] == "gpu" and d["bdf"] < dev["bdf"]),
                "GPU Excluded:\t No",
            ]))
        elif dev["kind"] == "nvswitch":
            w.file("proc/driver/nvidia-nvswitch/devices/%s" % dev["bdf"], "")


def main(argv=None):
    import yaml  # only the CLI needs it
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--state")
    parser.add_argument("--dest", required=True)
    args = parser.parse_args(argv)
    with open(args.model) as handle:
        model = yaml.safe_load(handle)
    state = {}
    if args.state:
        with open(args.state) as handle:
            state = yaml.safe_load(handle) or {}
    try:
        render(model, state, args.dest)
    except (ModelError, KeyError, TypeError, ValueError) as exc:
        sys.stderr.write("render: %s: %s\n" % (args.model, exc))
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
