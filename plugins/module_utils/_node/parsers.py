# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure parsers for sysfs/procfs text. Text in, plain data out; ValueError on garbage.

Each parser shows a sample of what it reads. None of them touches the file system: the collector
(_facts.py) reads through a Root and turns a ValueError into a recorded problem.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re
import shlex

# InfiniBand PortCounters (IBA 16.1.3.5) that count errors, as the kernel names them in
# ports/<p>/counters/. A flapping link passes a state check and shows here (link_downed).
IB_ERROR_COUNTERS = ("symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors",
                     "port_rcv_remote_physical_errors", "port_rcv_switch_relay_errors", "port_xmit_discards",
                     "port_xmit_constraint_errors", "port_rcv_constraint_errors", "local_link_integrity_errors",
                     "excessive_buffer_overrun_errors", "VL15_dropped")

_RANGE = re.compile(r"^([0-9]+)(?:-([0-9]+))?$")
_DIGITS = re.compile(r"([0-9]+)")
_NATURAL_CACHE = {}


def natural_key(text):
    """Sort key in which 'mlx5_10' follows 'mlx5_9' and 'gpu10' follows 'gpu9'.

    Cached: the fabric model sorts the same host and adapter names many times.
    """
    key = _NATURAL_CACHE.get(text)
    if key is None:
        key = tuple(int(p) if p.isdecimal() else p for p in _DIGITS.split(text or ""))
        _NATURAL_CACHE[text] = key
    return key


_TRAILING_NUM_RE = re.compile(r"^(.*?)([0-9]+)$")


def hostlist(names):
    """['gpu001', 'gpu002', 'gpu004', 'x'] -> 'gpu[001-002,004],x' (Slurm hostlist expression).

    Here, not with the fabric outputs: the filters format host lists too, and a filter file is loaded
    in every forked worker that resolves a collection filter by a name that is not a file."""
    groups = {}
    singles = []
    for name in names:
        m = _TRAILING_NUM_RE.match(name)
        if not m or "[" in name or "," in name:
            singles.append(name)
            continue
        groups.setdefault((m.group(1), len(m.group(2))), []).append(int(m.group(2)))
    parts = []
    for (prefix, width), nums in groups.items():
        nums = sorted(set(nums))
        if len(nums) == 1:
            parts.append((prefix, nums[0], "%s%0*d" % (prefix, width, nums[0])))
            continue
        ranges = []
        start = prev = nums[0]
        for n in nums[1:] + [None]:
            if n is not None and n == prev + 1:
                prev = n
                continue
            ranges.append("%0*d" % (width, start) if start == prev else "%0*d-%0*d" % (width, start, width, prev))
            if n is not None:
                start = prev = n
        parts.append((prefix, nums[0], "%s[%s]" % (prefix, ",".join(ranges))))
    parts.extend((s, -1, s) for s in singles)
    parts.sort(key=lambda p: (natural_key(p[0]), p[1]))
    return ",".join(p[2] for p in parts)


# The kernel's largest NR_CPUS (CONFIG_NR_CPUS_RANGE_END on x86_64 with MAXSMP): a list naming
# more CPUs, or a CPU number at or above it, is not one the kernel wrote.
MAX_CPUS = 8192


def parse_cpulist(text):
    """``0-12,104-116`` -> [0, 1, ..., 12, 104, ..., 116]. Empty text -> [] (a memory-only node).

    More than MAX_CPUS CPUs in total, or a CPU number >= MAX_CPUS, is invalid input: counted before
    anything is built, so a small file of huge ranges costs nothing.
    """
    text = text.strip()
    if not text:
        return []
    ranges, total = [], 0
    for part in text.split(","):
        match = _RANGE.match(part.strip())
        if not match:
            raise ValueError("not a CPU list item: %r" % part)
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) else first
        if last < first or last >= MAX_CPUS:
            raise ValueError("bad CPU range: %r (CPU numbers run from 0 to %d)" % (part, MAX_CPUS - 1))
        total += last - first + 1
        if total > MAX_CPUS:
            raise ValueError("more than %d CPUs in the list" % MAX_CPUS)
        ranges.append((first, last))
    cpus = set()
    for first, last in ranges:
        cpus.update(range(first, last + 1))
    return sorted(cpus)


def parse_cpu_online(text):
    """``sys/devices/system/cpu/online``: a CPU list that is never empty (CPU 0 always runs)."""
    cpus = parse_cpulist(text)
    if not cpus:
        raise ValueError("no online CPU")
    return cpus


def format_cpulist(cpus):
    """[0, 1, 2, 5] -> ``0-2,5`` (the kernel's own format)."""
    out = []
    cpus = sorted(set(cpus))
    i = 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append(str(cpus[i]) if i == j else "%d-%d" % (cpus[i], cpus[j]))
        i = j + 1
    return ",".join(out)


def parse_int(text):
    """``1\\n`` -> 1; ``-1`` -> -1."""
    return int(text.strip(), 0) if text.strip().lower().startswith("0x") else int(text.strip())


def parse_node_meminfo(text):
    """``Node 0 MemTotal:       121634816 kB`` lines -> {"MemTotal": 121634816, ...} (kB or counts)."""
    out = {}
    for line in text.splitlines():
        match = re.match(r"^Node\s+[0-9]+\s+(\S+):\s+([0-9]+)(?:\s+kB)?\s*$", line)
        if match:
            out[match.group(1)] = int(match.group(2))
    if "MemTotal" not in out:
        raise ValueError("no 'Node N MemTotal:' line")
    return out


def parse_meminfo(text):
    """``MemTotal:       1056534920 kB`` lines -> {"MemTotal": 1056534920, ...}."""
    out = {}
    for line in text.splitlines():
        match = re.match(r"^(\S+):\s+([0-9]+)(?:\s+kB)?\s*$", line)
        if match:
            out[match.group(1)] = int(match.group(2))
    if not out:
        raise ValueError("no 'Key: value' line")
    return out


def parse_distance(text):
    """``10 12 12 12 21 21 21 21`` -> [10, 12, ...]."""
    values = [int(v) for v in text.split()]
    if not values:
        raise ValueError("empty distance row")
    return values


def parse_cpuinfo(text):
    """The first processor block of /proc/cpuinfo -> {"model": ..., "flags": set(...)}.

    ``model name : Intel(R) Xeon(R) Platinum 8480+`` and ``flags : fpu vme ... vmx ...``.
    """
    model, flags = None, None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = key.strip()
        if key == "model name" and model is None:
            model = value.strip()
        elif key == "flags" and flags is None:
            flags = set(value.split())
        if model is not None and flags is not None:
            break
    if model is None and flags is None:
        raise ValueError("no 'model name' or 'flags' line")
    return {"model": model, "flags": flags}


def parse_ib_state(text):
    """``4: ACTIVE`` -> (4, "ACTIVE"); ``5: LinkUp`` -> (5, "LinkUp")."""
    match = re.match(r"^([0-9]+):\s*(\S+)$", text.strip())
    if not match:
        raise ValueError("expected 'N: NAME'")
    return int(match.group(1)), match.group(2)


def parse_ib_rate(text):
    """``400 Gb/sec (4X NDR)`` -> 400.0; ``2.5 Gb/sec (1X SDR)`` -> 2.5."""
    match = re.match(r"^([0-9]+(?:\.[0-9]+)?)\s+Gb/sec\b", text.strip())
    if not match:
        raise ValueError("expected '<N> Gb/sec ...'")
    return float(match.group(1))


def parse_bracketed(text):
    """``always madvise [never]`` -> "never" (the selected choice of a sysfs enum)."""
    match = re.search(r"\[([^\]]+)\]", text)
    if not match:
        raise ValueError("no [selected] choice")
    return match.group(1)


def parse_cmdline(text):
    """Kernel command line -> ordered list of {key, value}, duplicates kept.

    ``BOOT_IMAGE=/vmlinuz root=UUID=ab quiet hugepagesz=1G hugepages=16`` ->
    [{key: BOOT_IMAGE, value: /vmlinuz}, {key: root, value: UUID=ab}, {key: quiet, value: None}, ...].
    Quotes are honoured as the kernel does (``acpi_osi="Windows 2020"``). Words after ``--`` are
    init's arguments, not kernel parameters, and are not returned.
    """
    try:
        words = shlex.split(text)
    except ValueError:
        words = text.split()
    if "--" in words:
        words = words[:words.index("--")]
    params = []
    for word in words:
        key, sep, value = word.partition("=")
        params.append({"key": key, "value": value if sep else None})
    return params


def parse_os_release(text):
    """``ID=ubuntu`` / ``VERSION_ID="22.04"`` lines -> {"ID": "ubuntu", "VERSION_ID": "22.04"}."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, dummy, value = line.partition("=")
        try:
            parts = shlex.split(value)
            value = parts[0] if parts else ""
        except ValueError:
            value = value.strip("\"'")
        out[key.strip()] = value
    if not out:
        raise ValueError("no KEY=value line")
    return out


def parse_image_manifest(text):
    """``/etc/gpufleet/image.json`` (a golden image's manifest, docs/facts.md ``image``) -> the
    manifest without its full package list (``pins`` and the hashes stand for it; the facts stay
    small). Not a JSON object with ``schema`` and ``profile``: ValueError."""
    data = json.loads(text)
    if not isinstance(data, dict) or not isinstance(data.get("schema"), int) or not data.get("profile"):
        raise ValueError("not an image manifest (a JSON object with schema and profile)")
    data.pop("packages", None)
    return data


def _unescape_mount(field):
    # /proc/self/mounts escapes space, tab, newline and backslash as octal: "\040".
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def parse_mounts(text):
    """/proc/self/mounts -> [{device, mountpoint, fstype, options}].

    ``/dev/nvme0n1p1 /raid ext4 rw,relatime 0 0``; lines with fewer than 4 fields are skipped.
    """
    out = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        out.append({
            "device": _unescape_mount(fields[0]),
            "mountpoint": _unescape_mount(fields[1]),
            "fstype": fields[2],
            "options": fields[3].split(","),
        })
    return out


def parse_nvidia_proc_version(text):
    """``NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.90.07  Fri May 31 09:35:42 UTC 2024`` -> "550.90.07".

    Also the open kernel module: ``NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.90.07  Release Build ...``.
    """
    match = re.search(r"NVRM version:.*?Kernel Module(?: for \S+)?\s+([0-9]+\.[0-9]+(?:\.[0-9]+)?)\b", text)
    if not match:
        raise ValueError("no 'NVRM version: ... Kernel Module <version>'")
    return match.group(1)


def parse_version(text):
    """``550.90.07`` -> "550.90.07" (a dotted version on one line)."""
    text = text.strip()
    if not re.match(r"^[0-9]+(?:\.[0-9]+)+$", text):
        raise ValueError("not a dotted version")
    return text


def parse_colon_fields(text):
    """``Model: \\t\\t NVIDIA H100 80GB HBM3`` lines -> {"Model": "NVIDIA H100 80GB HBM3", ...}."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip():
            out[key.strip()] = value.strip()
    if not out:
        raise ValueError("no 'Key: value' line")
    return out


def parse_hex_id(text):
    """``0x10de`` -> "0x10de" (normalised lower case)."""
    text = text.strip().lower()
    if not re.match(r"^0x[0-9a-f]+$", text):
        raise ValueError("not a hex id")
    return text


def parse_link_width(text):
    """``16`` -> 16; ``x16`` -> 16 (some kernels)."""
    return int(text.strip().lstrip("x"))


def parse_gid(text):
    """sys/class/infiniband/<dev>/ports/<p>/gids/<i> -> (the GID as the kernel prints it, its IPv4
    address when it is IPv4-mapped ``::ffff:a.b.c.d``, else None). A GID of zeros is an unused entry:
    (gid, None) with ``gid`` all zeros (callers drop it)."""
    words = text.strip().split(":")
    if len(words) != 8 or not all(re.match(r"^[0-9a-fA-F]{4}$", w) for w in words):
        raise ValueError("not a GID (eight groups of four hex digits)")
    values = [int(w, 16) for w in words]
    ipv4 = None
    if values[:5] == [0] * 5 and values[5] == 0xFFFF:
        ipv4 = "%d.%d.%d.%d" % (values[6] >> 8, values[6] & 255, values[7] >> 8, values[7] & 255)
    return text.strip().lower(), ipv4


ZERO_GID = ":".join(["0000"] * 8)


def _le_word(text):
    """/proc/net/route's address fields: the 32-bit word in host (little-endian) order, in hex."""
    value = int(text, 16)
    return ((value & 0xFF) << 24) | ((value >> 8 & 0xFF) << 16) | ((value >> 16 & 0xFF) << 8) | (value >> 24)


def parse_proc_net_route(text):
    """/proc/net/route -> the connected routes [(iface, network int, prefix length)]: the lines with
    no gateway (a route via a gateway names no address of the interface)."""
    lines = text.splitlines()
    if not lines or not lines[0].split() or lines[0].split()[0] != "Iface":
        raise ValueError("no 'Iface Destination Gateway ...' header")
    out = []
    for line in lines[1:]:
        fields = line.split()
        if len(fields) < 8:
            continue
        if int(fields[2], 16) != 0:
            continue
        mask = _le_word(fields[7])
        out.append((fields[0], _le_word(fields[1]), bin(mask).count("1")))
    return out


def parse_fib_trie_local(text):
    """/proc/net/fib_trie -> the set of the host's own IPv4 addresses (the leaves ``|-- a.b.c.d``
    with a ``/32 host LOCAL`` entry)."""
    found, leaf = set(), None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("|--"):
            leaf = stripped[3:].strip()
        elif leaf and re.match(r"^/32 host LOCAL\b", stripped):
            found.add(leaf)
    return found


def ipv4_int(text):
    """'10.64.0.5' -> its integer, None when it is no dotted quad (stdlib only: the gate reads it on
    nodes, where netaddr is seldom installed; the RoCE planner parses its subnets with it too)."""
    parts = str(text).strip().split(".")
    # ASCII digits only: '١' is decimal to Python and no address to the kernel
    if len(parts) != 4 or not all(p.isascii() and p.isdecimal() and len(p) <= 3 and int(p) <= 255 for p in parts):
        return None
    return int(parts[0]) << 24 | int(parts[1]) << 16 | int(parts[2]) << 8 | int(parts[3])


def ipv4_by_interface(routes, local):
    """The host's addresses (fib_trie) placed on interfaces by their connected routes (route):
    {iface: ["a.b.c.d/len", ...]}. The longest matching route wins; an address no connected route
    covers (a /32 address, a noprefixroute one) is under the key None."""
    out = {}
    for address in sorted(local, key=ipv4_int):
        value, best = ipv4_int(address), None
        for iface, network, plen in routes:
            mask = (0xFFFFFFFF << (32 - plen)) & 0xFFFFFFFF if plen else 0
            if value & mask == network and (best is None or plen > best[1]):
                best = (iface, plen)
        if best is None:
            out.setdefault(None, []).append(address + "/32")
        elif best[1] > 0:
            out.setdefault(best[0], []).append("%s/%d" % (address, best[1]))
    return out
