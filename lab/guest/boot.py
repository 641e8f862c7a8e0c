"""Boot a lab guest with QEMU and read back what it sees of itself (never shipped).

``boot(args)`` runs ``qemu-system-x86_64`` with the given arguments (machine, CPUs, NUMA nodes,
memory backends, devices: e.g. ``qemu_args(plan, devices="stand-in", memory="ram")``) plus the
lab's kernel and initramfs (lab/guest/build.py), the serial console on stdout, ``-no-reboot``, and
an accelerator: KVM when ``/dev/kvm`` opens and a probe guest boots under it, else TCG
(``GPUFLEET_GUEST_ACCEL=kvm|tcg`` forces one). The guest's init (init.sh) prints its sysfs
topology as a ttar archive and powers off; ``boot`` returns it as a ``GuestDump``.

    python3 -m lab.guest.boot -- -machine q35 -smp 4,sockets=1,cores=2,threads=2 -m 512M
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from lab.guest import build
from lab.hw import ttar

QEMU = "qemu-system-x86_64"
BEGIN = "GPUFLEET-GUEST-DUMP BEGIN"
END = "GPUFLEET-GUEST-DUMP END"
APPEND = "console=ttyS0 quiet loglevel=0 panic=-1"
PROBE_SECONDS = 5  # a working KVM boots this guest in about 1 s; a stalled one never
BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
FAST_TMP = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None


class GuestBootError(Exception):
    """The guest did not boot or print its dump: the message carries the console's last lines."""


class GuestDump:
    """What one guest printed: the ttar text, the console, the accelerator and the wall time."""

    def __init__(self, text, console, accel, seconds):
        self.ttar = text
        self.console = console
        self.accel = accel
        self.seconds = seconds

    def unpack(self, dest):
        """Write the guest's tree under ``dest`` (for _facts.collect(dest)); returns ``dest``."""
        ttar.unpack(self.ttar, dest)
        return dest

    def topology(self):
        """{nodes: {id: {cpus, memory_kb}}, siblings: [[..]], pci: {bdf: {...}}} read from the tree."""
        dest = tempfile.mkdtemp(prefix="gpufleet-guest-", dir=FAST_TMP)
        try:
            return read_topology(self.unpack(dest))
        finally:
            shutil.rmtree(dest, ignore_errors=True)


def parse_cpulist(text):
    """``0-1,4`` -> [0, 1, 4]."""
    cpus = []
    for part in filter(None, text.strip().split(",")):
        first, _, last = part.partition("-")
        cpus.extend(range(int(first), int(last or first) + 1))
    return cpus


def _read(root, rel):
    path = os.path.join(root, rel)
    if not os.path.exists(path):
        return None
    with open(path) as handle:
        return handle.read().strip()


def read_topology(root):
    """The guest topology in a dumped tree: NUMA nodes, HT sibling lists, PCI devices with the
    bridges above each (root port first) and their host bridge."""
    return {"nodes": _nodes(root), "siblings": _siblings(root), "pci": _pci(root)}


def _nodes(root):
    nodes = {}
    for name in sorted(os.listdir(os.path.join(root, "sys/devices/system/node"))):
        if name.startswith("node") and name[4:].isdigit():
            rel = "sys/devices/system/node/%s/" % name
            mem = [line.split() for line in (_read(root, rel + "meminfo") or "").splitlines()]
            total = [int(f[3]) for f in mem if len(f) > 3 and f[2] == "MemTotal:"]
            nodes[int(name[4:])] = {"cpus": parse_cpulist(_read(root, rel + "cpulist") or ""),
                                    "memory_kb": total[0] if total else None}
    return nodes


def _siblings(root):
    found = set()
    for name in os.listdir(os.path.join(root, "sys/devices/system/cpu")):
        text = _read(root, "sys/devices/system/cpu/%s/topology/thread_siblings_list" % name)
        if name[3:].isdigit() and text is not None:
            found.add(tuple(parse_cpulist(text)))
    return sorted(list(s) for s in found)


def _pci(root):
    pci = {}
    devices = os.path.join(root, "sys/bus/pci/devices")
    for bdf in sorted(os.listdir(devices)):
        rel = os.path.relpath(os.path.realpath(os.path.join(devices, bdf)), os.path.realpath(root))
        parts = rel.split("/")
        host = [p for p in parts if p.startswith("pci")][-1]
        numa = _read(root, rel + "/numa_node")
        pci[bdf] = {"host_bridge": host, "path": [p for p in parts[parts.index(host) + 1:-1] if BDF.match(p)],
                    "numa_node": None if numa is None else int(numa)}
        for key in ("vendor", "device", "class"):
            pci[bdf][key] = _read(root, "%s/%s" % (rel, key))
    return pci


def _option(args, name):
    """The value after the last ``name`` in a QEMU argument list, or None."""
    values = [args[i + 1] for i, arg in enumerate(args[:-1]) if arg == name]
    return values[-1] if values else None


def _run(args, accel, timeout, cache):
    kernel, initrd = build.artifacts(cache)
    cmd = [QEMU] + list(args) + ["-accel", accel, "-kernel", kernel, "-initrd", initrd,
                                 "-append", APPEND, "-nographic", "-nodefaults", "-serial", "stdio", "-no-reboot"]
    started = time.monotonic()
    try:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout, check=False)
        out, err, rc = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        out, err, rc = exc.stdout or b"", exc.stderr or b"", "timeout after %d s" % timeout
    except OSError as exc:
        raise GuestBootError("%s: %s (apt-get install qemu-system-x86: .ci/deps.sh)" % (QEMU, exc))
    console = out.decode("utf-8", "replace")
    return console, err.decode("utf-8", "replace"), rc, time.monotonic() - started


def parse_console(console, accel, seconds, err="", rc=None):
    """The GuestDump in a guest's console text (from boot(), or a serial log file of another
    launcher such as libvirt); GuestBootError with the last lines when it holds no complete dump."""
    console = console.replace("\r", "")
    if BEGIN not in console or END not in console:
        tail = "\n".join((console + err).strip().splitlines()[-15:])
        raise GuestBootError("guest (%s) printed no complete dump (exit %s); last lines:\n%s" % (accel, rc, tail))
    text = console.split(BEGIN, 1)[1].split(END, 1)[0].lstrip("\n")
    return GuestDump(text, console, accel, seconds)


def choose_accel(args=(), cache=None):
    """"kvm" or "tcg": GPUFLEET_GUEST_ACCEL, else the verdict of a probe boot under KVM, kept in the
    cache per host boot (KVM can open and still stall a guest: nested hosts)."""
    forced = os.environ.get("GPUFLEET_GUEST_ACCEL")
    if forced in ("kvm", "tcg"):
        return forced
    try:
        os.close(os.open("/dev/kvm", os.O_RDWR))
    except OSError:
        return "tcg"
    cpu = _option(args, "-cpu") or "max"
    path = os.path.join(build.cache_dir(cache), "accel.json")
    key = "%s %s" % (_read("/", "proc/sys/kernel/random/boot_id") or "unknown", cpu)
    try:
        with open(path) as handle:
            known = json.load(handle)
    except (OSError, ValueError):
        known = {}
    if key not in known:
        probe = ["-machine", "q35", "-cpu", cpu, "-smp", "2", "-m", "256M"]
        console = _run(probe, "kvm", PROBE_SECONDS, cache)[0]
        boot_id = key.split(" ")[0]
        known = {k: v for k, v in known.items() if k.startswith(boot_id + " ")}  # earlier host boots: stale
        known[key] = "kvm" if BEGIN in console and END in console else "tcg"
        part = "%s.%d.part" % (path, os.getpid())
        with open(part, "w") as handle:
            json.dump(known, handle)
        os.replace(part, path)
    return known[key]


def boot(args, timeout=180, accel=None, cache=None):
    """Boot a guest with QEMU ``args`` and return its GuestDump; GuestBootError when it prints none."""
    accel = accel or choose_accel(args, cache)
    console, err, rc, seconds = _run(args, accel, timeout, cache)
    return parse_console(console, accel, seconds, err, rc)


if __name__ == "__main__":
    argv = sys.argv[1:]
    dump = boot(argv[1:] if argv[:1] == ["--"] else argv)
    print(json.dumps({"accel": dump.accel, "seconds": round(dump.seconds, 1), **dump.topology()}, indent=1))
