# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node facts collector: a root path in, ``ansible_facts.gpufleet`` out (docs/facts.md).

Reads only, through a Root, so a live host, a captured tree and a lab twin are read by the same
code. Never raises on content: what cannot be read is None plus one recorded problem.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufleet.provision.plugins.module_utils._node.fs import Root
from ansible_collections.gpufleet.provision.plugins.module_utils._node import parsers as P
from ansible_collections.gpufleet.provision.plugins.module_utils._node import pcie as _pcie

SCHEMA = 1
CPU = "sys/devices/system/cpu"
NODE = "sys/devices/system/node"
PCI = "sys/bus/pci/devices"
IB = "sys/class/infiniband"
NVIDIA_VENDOR = "0x10de"

# Device ids seen in the fleet; the driver's own "Model:" line wins when the driver is loaded.
GPU_MODELS = {
    "0x2330": "H100 SXM5 80GB",
    "0x2331": "H100 PCIe 80GB",
    "0x2324": "H800 SXM5",
    "0x2335": "H200 SXM 141GB",
    "0x2339": "H20",
    "0x20b0": "A100 SXM4 40GB",
    "0x20b2": "A100 SXM4 80GB",
    "0x20b5": "A100 PCIe 80GB",
    "0x2901": "B200",
}


def collect(root="/"):
    """Return (facts, warnings) for the host state under ``root``."""
    fs = Root(root)
    facts = {"schema": SCHEMA, "root": fs.path}
    facts["cpu"], cpus = _cpu(fs)
    facts["numa"] = _numa(fs)
    devices = _pci_devices(fs)
    # None: the PCI device folder could not be read (a count of 0 GPUs would be a confident lie).
    facts["gpus"] = None if devices is None else [d for d in devices if d["kind"] == "gpu"]
    facts["nvswitches"] = None if devices is None else [d for d in devices if d["kind"] == "nvswitch"]
    for dev in devices or []:
        del dev["kind"]
    for sw in facts["nvswitches"] or []:
        for key in ("model", "driver", "link", "class", "vendor_id"):
            sw.pop(key, None)
    gpus = facts["gpus"] or []
    # None: sys/class/infiniband could not be listed ("no rail NIC" would be a confident lie).
    facts["nics"] = _nics(fs)
    nics = facts["nics"] or []
    facts["netdevs"] = _netdevs(fs, nics)
    gpu_info = _add_gpu_models(fs, gpus)
    # A NIC without a PCI location (no device link) cannot be placed: it is no GPU's rail.
    placed = [n for n in nics if not n["virtual_function"] and n["pci"] is not None]
    pairs, nic_rail = _pcie.pair_gpus(gpus, placed)
    for nic in nics:
        nic["rail"] = nic_rail.get(nic["name"])
        nic["role"] = "vf" if nic["virtual_function"] else ("rail" if nic["rail"] is not None else "non-rail")
    facts["pairs"] = pairs
    facts["pcie"] = {"bridges": _bridges(fs, gpus + nics)}
    facts["kernel"] = _kernel(fs, cpus)
    facts["nvidia"] = _nvidia(fs, gpus, facts["nvswitches"] or [], gpu_info)
    facts["nvme"] = _nvme(fs)
    facts["os"] = fs.parse("etc/os-release", P.parse_os_release)
    facts["mounts"] = _mounts(fs)
    # A golden image's manifest (playbooks/image.yml); absent on a node washed live: None, no problem.
    facts["image"] = fs.parse("etc/gpufleet/image.json", P.parse_image_manifest, optional=True)
    facts["problems"] = fs.problems
    warnings = fs.warnings()
    facts["warnings"] = warnings
    return facts, warnings


def _cpu_index(name):
    match = re.match(r"^cpu(\d+)$", name)
    return int(match.group(1)) if match else None


def _cpu(fs):
    """Returns (cpu facts, the CPUs to read per-CPU files of): cpu/online, else the cpu<N> folders
    (an unreadable or empty online file must not hide the CPUs that are there)."""
    online = fs.parse(CPU + "/online", P.parse_cpu_online)
    info = fs.parse("proc/cpuinfo", P.parse_cpuinfo) or {}
    cpus = online
    if cpus is None:
        names = _folder(fs, CPU)
        # None: neither the online list nor the folder could be read (per-CPU facts are unknown then)
        cpus = None if names is None else sorted(i for i in (_cpu_index(n) for n in names) if i is not None)
    # One sibling set per physical core. A CPU already seen in a sibling list is not read again:
    # on a 208-CPU box that halves the reads (this runs in every facts and gate call).
    packages, cores, siblings, seen = set(), set(), set(), set()
    for cpu in cpus or []:
        if cpu in seen:
            continue
        topo = "%s/cpu%d/topology/" % (CPU, cpu)
        sib = fs.parse(topo + "thread_siblings_list", P.parse_cpulist)
        pkg = fs.parse(topo + "physical_package_id", P.parse_int)
        if sib:
            siblings.add(tuple(sib))
            seen.update(sib)
        if pkg is not None:
            packages.add(pkg)
            cores.add((pkg, tuple(sib or [cpu])))
    smt_active = fs.parse(CPU + "/smt/active", P.parse_int, optional=True)
    flags = info.get("flags")
    facts = {
        "model": info.get("model"),
        "sockets": len(packages) or None,
        "cores": len(cores) or None,
        "threads_per_core": max((len(s) for s in siblings), default=None),
        "online": online,
        "online_count": None if online is None else len(online),
        "smt_active": None if smt_active is None else smt_active == 1,
        "smt_control": fs.read(CPU + "/smt/control", optional=True),
        "siblings": sorted(list(s) for s in siblings),
        "flags": None if flags is None else {"vmx": "vmx" in flags, "svm": "svm" in flags},
    }
    return facts, cpus


def _node_ids(fs):
    online = fs.parse(NODE + "/online", P.parse_cpulist, optional=True)
    if online is not None:
        return online
    ids = []
    for name in fs.listdir(NODE):
        match = re.match(r"^node(\d+)$", name)
        if match:
            ids.append(int(match.group(1)))
    return sorted(ids)


def _hugepages(fs, folder, count="nr_hugepages"):
    """{size_kb: pages} of each hugepages-<size>kB pool in ``folder`` (``count``: nr_ or free_hugepages);
    None when the folder is there but cannot be listed (no pool is not what was read)."""
    names = _folder(fs, folder)
    if names is None:
        return None
    pools = {}
    for name in names:
        match = re.match(r"^hugepages-(\d+)kB$", name)
        if match:
            pools[match.group(1)] = fs.parse("%s/%s/%s" % (folder, name, count), P.parse_int)
    return pools


def _numa(fs):
    ids = _node_ids(fs)
    nodes, distances = [], {}
    for nid in ids:
        base = "%s/node%d" % (NODE, nid)
        meminfo = fs.parse(base + "/meminfo", P.parse_node_meminfo)
        nodes.append({
            "id": nid,
            "cpus": fs.parse(base + "/cpulist", P.parse_cpulist),
            "memory_kb": None if meminfo is None else meminfo["MemTotal"],
            "hugepages": _hugepages(fs, base + "/hugepages"),
            # What a guest can still be given on this node (the guest planner sizes memory zones from it).
            "free_hugepages": _hugepages(fs, base + "/hugepages", "free_hugepages"),
        })
        distances[str(nid)] = fs.parse(base + "/distance", P.parse_distance)
    return {"online": ids, "nodes": nodes, "distances": distances}


def _device_location(fs, link):
    """Resolve a sysfs device link -> {pci, host_bridge, pcie_path} or None."""
    resolved = fs.resolve(link)
    if resolved is None:
        fs.problem(link, "invalid", "broken symlink")
        return None
    try:
        host, bridges, bdf = _pcie.split_device_path(resolved)
    except ValueError as exc:
        fs.problem(link, "invalid", str(exc))
        return None
    return {"pci": bdf, "host_bridge": host, "pcie_path": bridges, "sysfs": resolved}


def locate_pci(fs, bdf):
    """Where the PCI device ``bdf`` sits, whatever its vendor or class (the guest gate finds a
    passed-through device, or the stand-in a test boots in its place, by its planned address):
    {pci, vendor_id, class, numa_node (-1: the device has none), host_bridge, pcie_path}; None when
    no device has that address. What cannot be read is None plus a problem, as everywhere here."""
    base = "%s/%s" % (PCI, bdf)
    if not fs.exists(base):
        return None
    loc = _device_location(fs, base) or _NO_LOCATION
    return {
        "pci": bdf,
        "vendor_id": fs.parse(base + "/vendor", P.parse_hex_id),
        "class": fs.parse(base + "/class", P.parse_hex_id),
        "numa_node": fs.parse(base + "/numa_node", P.parse_int),
        "host_bridge": loc["host_bridge"],
        "pcie_path": loc["pcie_path"],
    }


def _numa_node(fs, base):
    value = fs.parse(base + "/numa_node", P.parse_int)
    return None if value is None or value < 0 else value


def _link(fs, base):
    return {
        "speed": fs.read(base + "/current_link_speed", optional=True),
        "width": fs.parse(base + "/current_link_width", P.parse_link_width, optional=True),
        "max_speed": fs.read(base + "/max_link_speed", optional=True),
        "max_width": fs.parse(base + "/max_link_width", P.parse_link_width, optional=True),
    }


def _pci_devices(fs):
    """NVIDIA GPUs and NVSwitches from sys/bus/pci/devices (the vendor file is read first); None
    when the folder is absent or cannot be listed (a symlink loop: a recorded problem)."""
    entries = fs.entries(PCI)
    if entries is None:
        return None
    found = []
    for bdf in entries:
        base = "%s/%s" % (PCI, bdf)
        vendor = fs.parse(base + "/vendor", P.parse_hex_id)
        if vendor != NVIDIA_VENDOR:
            continue
        klass = fs.parse(base + "/class", P.parse_hex_id)
        if klass is None:
            continue
        if klass.startswith("0x0302") or klass.startswith("0x0300"):
            kind = "gpu"
        elif klass.startswith("0x0680"):
            kind = "nvswitch"
        else:
            continue  # audio functions and the like
        loc = _device_location(fs, base)
        if loc is None:
            continue
        driver = fs.readlink(base + "/driver")
        found.append({
            "kind": kind,
            "pci": loc["pci"],
            "vendor_id": vendor,
            "device_id": fs.parse(base + "/device", P.parse_hex_id),
            "class": klass,
            "model": None,
            "numa_node": _numa_node(fs, base),
            "link": _link(fs, base),
            "driver": driver.rstrip("/").split("/")[-1] if driver else None,
            "pcie_path": loc["pcie_path"],
            "host_bridge": loc["host_bridge"],
        })
    return sorted(found, key=lambda d: d["pci"])


def _add_gpu_models(fs, gpus):
    """Model of each GPU: the driver's own "Model:" line, else the device-id table. Returns the
    driver's information per GPU (read once, reported again under nvidia.gpus)."""
    infos = {}
    for gpu in gpus:
        info = fs.parse("proc/driver/nvidia/gpus/%s/information" % gpu["pci"], P.parse_colon_fields, optional=True)
        infos[gpu["pci"]] = info
        gpu["model"] = (info or {}).get("Model") or GPU_MODELS.get(gpu["device_id"])
    return infos


_NO_LOCATION = {"pci": None, "host_bridge": None, "pcie_path": None}


def _folder(fs, rel):
    """Entries of a folder that may be absent: [] when it is absent, None when it is there but
    cannot be listed (a symlink loop, permissions: the problem is recorded, naming the path)."""
    entries = fs.entries(rel)
    if entries is None:
        return None if fs.exists(rel) else []
    return entries


def _nics(fs):
    """The RDMA NICs of sys/class/infiniband; [] when the class is absent, None when it cannot be listed."""
    names = _folder(fs, IB)
    if names is None:
        return None
    nics = []
    for name in names:
        base = "%s/%s" % (IB, name)
        # No device link (a software RDMA device, a capture of the class folder alone): the NIC is
        # there, only its PCI location is unknown. A broken link is a recorded problem, same outcome.
        loc = _device_location(fs, base + "/device") if fs.exists(base + "/device") else None
        loc = loc or _NO_LOCATION
        pci_base = "%s/%s" % (PCI, loc["pci"]) if loc["pci"] else None
        port_names = _folder(fs, base + "/ports")
        ports = []
        for port in port_names or []:
            if not port.isdecimal():
                continue
            pbase = "%s/ports/%s" % (base, port)
            state = fs.parse(pbase + "/state", P.parse_ib_state)
            phys = fs.parse(pbase + "/phys_state", P.parse_ib_state)
            ports.append({
                "port": int(port),
                "state": state[1] if state else None,
                "state_code": state[0] if state else None,
                "phys_state": phys[1] if phys else None,
                "phys_state_code": phys[0] if phys else None,
                "rate": fs.read(pbase + "/rate"),
                "rate_gbps": fs.parse(pbase + "/rate", P.parse_ib_rate),
                "link_layer": fs.read(pbase + "/link_layer"),
                "lid": fs.parse(pbase + "/lid", P.parse_int, optional=True),
                "counters": _port_counters(fs, pbase + "/counters"),
            })
            if ports[-1]["link_layer"] == "Ethernet":
                ports[-1]["gids"] = _gid_table(fs, pbase)
        ports.sort(key=lambda p: p["port"])
        nics.append({
            "name": name,
            "pci": loc["pci"],
            "vendor_id": fs.parse(pci_base + "/vendor", P.parse_hex_id, optional=True) if pci_base else None,
            "device_id": fs.parse(pci_base + "/device", P.parse_hex_id, optional=True) if pci_base else None,
            "numa_node": _numa_node(fs, pci_base) if pci_base and fs.exists(pci_base + "/numa_node") else None,
            "link_layer": ports[0]["link_layer"] if ports else None,
            "fw_ver": fs.read(base + "/fw_ver"),
            "board_id": fs.read(base + "/board_id", optional=True),
            "hca_type": fs.read(base + "/hca_type", optional=True),
            "node_guid": fs.read(base + "/node_guid"),
            "sys_image_guid": fs.read(base + "/sys_image_guid", optional=True),
            "node_desc": fs.read(base + "/node_desc", optional=True),
            "netdevs": fs.listdir(base + "/device/net"),
            "link": _link(fs, pci_base) if pci_base else None,
            "pcie_path": loc["pcie_path"],
            "host_bridge": loc["host_bridge"],
            "virtual_function": bool(pci_base) and fs.exists(pci_base + "/physfn"),
            # None: the ports folder could not be listed ("no port" would be a verdict on nothing)
            "ports": None if port_names is None else ports,
        })
    return sorted(nics, key=lambda n: P.natural_key(n["name"]))


def _gid_table(fs, pbase):
    """A RoCE port's GID table: [{index, gid, type, ndev, ipv4}] of the entries in use (a GID of
    zeros is unused: its type and ndev cannot be read, the kernel answers EINVAL); None when the
    gids folder is absent."""
    names = fs.entries(pbase + "/gids")
    if names is None:
        return None
    table = []
    for index in sorted(int(n) for n in names if n.isdecimal()):
        parsed = fs.parse("%s/gids/%d" % (pbase, index), P.parse_gid)
        if parsed is None or parsed[0] == P.ZERO_GID:
            continue
        table.append({
            "index": index,
            "gid": parsed[0],
            "type": fs.read("%s/gid_attrs/types/%d" % (pbase, index)),
            "ndev": fs.read("%s/gid_attrs/ndevs/%d" % (pbase, index), optional=True),
            "ipv4": parsed[1],
        })
    return table


NET = "sys/class/net"


def _netdevs(fs, nics):
    """The netdevs of the RDMA NICs that sys/class/net shows: {name: {nic, mtu, speed_mbps,
    operstate, address, ipv4}}. ``ipv4`` (``a.b.c.d/len``) comes from the kernel's own tables,
    proc/net/fib_trie (the host's addresses) placed by proc/net/route (the connected route of each
    interface): readable under any root, no command; None when those files cannot be read."""
    present = [(nd, nic["name"]) for nic in nics for nd in nic.get("netdevs") or [] if fs.exists("%s/%s" % (NET, nd))]
    if not present:
        return {}
    by_iface = _ipv4_addresses(fs)
    out = {}
    for name, nic in present:
        base = "%s/%s/" % (NET, name)
        speed = fs.read(base + "speed", optional=True)   # EINVAL while the link is down
        out[name] = {
            "nic": nic,
            "mtu": fs.parse(base + "mtu", P.parse_int),
            "speed_mbps": int(speed) if speed and re.match(r"^\d+$", speed) and int(speed) > 0 else None,
            "operstate": fs.read(base + "operstate"),
            "address": fs.read(base + "address", optional=True),
            "ipv4": None if by_iface is None else by_iface.get(name, []),
        }
    return out


def _ipv4_addresses(fs):
    routes = fs.parse("proc/net/route", P.parse_proc_net_route)
    local = fs.parse("proc/net/fib_trie", P.parse_fib_trie_local)
    if routes is None or local is None:
        return None
    return P.ipv4_by_interface(routes, local)


def _port_counters(fs, folder):
    """The error counters present in ``folder`` -> {name: int}; None when the folder is absent."""
    names = fs.entries(folder)
    if names is None:
        return None
    return dict((n, fs.parse("%s/%s" % (folder, n), P.parse_int)) for n in P.IB_ERROR_COUNTERS if n in names)


def _bridges(fs, devices):
    bridges = {}
    for dev in devices:
        for bdf in dev.get("pcie_path") or []:
            if bdf in bridges:
                continue
            rel = "%s/%s/config" % (PCI, bdf)
            data = fs.read_bytes(rel)
            acs = None
            if data is not None:
                try:
                    acs = _pcie.parse_acs(data)
                except ValueError as exc:
                    fs.problem(rel, "unreadable", str(exc))
            bridges[bdf] = {"acs": acs}
    return bridges


def _kernel(fs, online):
    thp_enabled = fs.parse("sys/kernel/mm/transparent_hugepage/enabled", P.parse_bracketed)
    thp_defrag = fs.parse("sys/kernel/mm/transparent_hugepage/defrag", P.parse_bracketed)
    raw = fs.read("proc/cmdline")
    if raw is not None and "\x00" in raw:
        # /proc/cmdline is one line of text; NUL bytes are a binary file (a /proc/<pid>/cmdline copied
        # in its place, a corrupt capture): no parameter read from it would be true
        fs.problem("proc/cmdline", "invalid", "binary content (NUL bytes) where text was expected")
        raw = None
    counts, not_perf, without = {}, [], []
    for cpu in online or []:
        gov = fs.read("%s/cpu%d/cpufreq/scaling_governor" % (CPU, cpu), optional=True)
        if gov is None:
            without.append(cpu)
            continue
        counts[gov] = counts.get(gov, 0) + 1
        if gov != "performance":
            not_perf.append(cpu)
    units = _folder(fs, "sys/class/iommu")
    groups = _folder(fs, "sys/kernel/iommu_groups")
    return {
        "release": fs.read("proc/sys/kernel/osrelease"),
        "boot_id": fs.read("proc/sys/kernel/random/boot_id", optional=True),
        "cmdline": {"raw": raw, "params": None if raw is None else P.parse_cmdline(raw)},
        "thp": {"enabled": thp_enabled, "defrag": thp_defrag},
        "numa_balancing": fs.parse("proc/sys/kernel/numa_balancing", P.parse_int),
        "hugepages": _hugepages(fs, "sys/kernel/mm/hugepages"),
        "governor": None if online is None else {"counts": counts, "not_performance": not_perf, "without_cpufreq": without},
        # None: a folder that could not be listed is no evidence of an IOMMU on or off
        "iommu": None if units is None or groups is None else {
            "active": bool(units) and bool(groups), "units": units, "groups": len(groups)},
        "kvm": fs.exists("dev/kvm"),
    }


def _nvidia(fs, gpus, nvswitches, gpu_info):
    loaded = fs.isdir("sys/module/nvidia")
    if not loaded and fs.exists("sys/module/nvidia"):
        # there, but not a folder we can enter (a symlink loop): loaded or not is unknown
        fs.entries("sys/module/nvidia")
        loaded = None
    module_version = fs.parse("sys/module/nvidia/version", P.parse_version, optional=not loaded)
    proc_version = fs.parse("proc/driver/nvidia/version", P.parse_nvidia_proc_version, optional=not loaded)
    per_gpu = []
    for gpu in gpus:
        per_gpu.append({"pci": gpu["pci"], "model": gpu["model"], "information": gpu_info.get(gpu["pci"])})
    proc_switches = fs.listdir("proc/driver/nvidia-nvswitch/devices")
    # GPUDirect RDMA needs nvidia_peermem (driver >= 470; MLNX_OFED's older nv_peer_mem works too).
    peermem = [m for m in ("nvidia_peermem", "nv_peer_mem") if fs.isdir("sys/module/" + m)]
    count = len(proc_switches) if proc_switches else len(nvswitches)
    return {
        "loaded": loaded,
        "driver_version": module_version,
        "proc_version": proc_version,
        "gpus": per_gpu,
        "nvswitch_count": count,
        "nvswitch_present": count > 0,
        "peermem_loaded": bool(peermem),
        "peermem_module": peermem[0] if peermem else None,
    }


def _nvme(fs):
    """NVMe controllers; [] when the class is absent, None when it cannot be listed."""
    names = _folder(fs, "sys/class/nvme")
    if names is None:
        return None
    out = []
    for name in names:
        base = "sys/class/nvme/" + name
        out.append({
            "name": name,
            "model": fs.read(base + "/model"),
            "serial": fs.read(base + "/serial"),
            "firmware": fs.read(base + "/firmware_rev"),
        })
    return out


def _mounts(fs):
    text = fs.read("proc/self/mounts")
    if text is None:
        return None
    mounts = P.parse_mounts(text)
    # Sizes only mean something on the live root: under a captured tree or a twin's hardware view
    # the mount points are not the file systems the mount table names.
    live = fs.path.rstrip("/") == ""
    for mount in mounts:
        sizes = fs.statvfs(mount["mountpoint"]) if live else None
        mount["size_bytes"] = sizes["size_bytes"] if sizes else None
        mount["free_bytes"] = sizes["free_bytes"] if sizes else None
    return mounts
