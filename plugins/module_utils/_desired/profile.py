# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node profile (golden manifest): schema, validation and normalisation.

A profile is plain data (a YAML mapping in group_vars or inventories/profiles/*.yml) that says what
a node of one class must be. It is validated like an argument_spec, but strictly: an unknown key is
an error naming the key (``profile key kernel.cmdlne: unknown (known: cmdline, release)``), because a
typo would otherwise silently turn a check off. Versions must be strings: YAML reads ``22.10`` as the
float 22.1, so a number where a version belongs is an error, not a conversion.

docs/profile.md documents every key; keep it in step with SCHEMA below.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import re

from ansible_collections.gpufleet.provision.plugins.module_utils._bmc.bios_values import POWER_PROFILES, SNC_VALUES
from ansible_collections.gpufleet.provision.plugins.module_utils._devices.firmware import valid_version
from ansible_collections.gpufleet.provision.plugins.module_utils._node.parsers import IB_ERROR_COUNTERS
from ansible_collections.gpufleet.provision.plugins.module_utils._node.pcie import AFFINITY_ORDER, BDF


class ProfileError(ValueError):
    """The profile is not valid; the message names the key and the cause."""


def _opt(type_, **kw):
    """A key's spec: ``type_`` and options (choices, elements, options, values, required; ``lo`` and
    ``hi``: the range of a number, or of each number of a list)."""
    kw["type"] = type_
    return kw


# Bounds of what a node can have: past them a value is a typo (an extra zero) or garbage, never a
# node class. Counts of GPUs, NICs, NVLinks and drives per node; NUMA nodes; CPUs; bandwidth in Gb/s
# (1.6 Tb/s links and 900 GB/s NVLink are far below); sizes in GB (1 EB).
MAX_DEVICES = 256
MAX_NODES = 1024
MAX_CPUS = 1 << 16
MAX_GBPS = 100000.0
MAX_GB = 1e9
MAX_HUGEPAGES = 1 << 32


# Each entry: type (str|int|float|bool|list|dict|sizes), optional choices, elements (list: a type
# name, "dict" with options, or the spec of an inner list),
# options (dict with known keys), values (dict of free keys: the value type).
SCHEMA = {
    "name": _opt("str"),
    "description": _opt("str"),
    "host_mode": _opt("str", choices=["bare_metal", "virtualization"]),
    "require": _opt("list", elements="str"),
    "os": _opt("dict", options={
        "id": _opt("str"),
        "version_id": _opt("str"),
    }),
    # Desired state of the bios role: portable settings (translated per BMC vendor by _bmc.bios) and raw
    # attributes (checked against the BMC's attribute registry).
    "bios": _opt("dict", options={
        "settings": _opt("dict", options={
            "snc": _opt("str", choices=list(SNC_VALUES)),
            "hyperthreading": _opt("bool"),
            "vtx": _opt("bool"),
            "vtd": _opt("bool"),
            "sriov": _opt("bool"),
            "acs": _opt("bool"),
            "power_profile": _opt("str", choices=list(POWER_PROFILES)),
        }),
        "attributes": _opt("dict", values="scalar"),
    }),
    "kernel": _opt("dict", options={
        "release": _opt("str"),
        # Desired state of the kernel role: package names (unset: derived per OS family from the
        # release) and the exact package version (unset: the repository's candidate).
        "packages": _opt("list", elements="str"),
        "version": _opt("str"),
        "cmdline": _opt("dict", options={
            "required": _opt("list", elements="str"),
            "forbidden": _opt("list", elements="str"),
            "allow_repeated": _opt("list", elements="str"),
        }),
        "grub_sources": _opt("bool"),
    }),
    "memory": _opt("dict", options={
        "hugepages": _opt("sizes"),
        "hugepages_per_node": _opt("sizes"),
        "thp": _opt("str", choices=["always", "madvise", "never"]),
        "numa_balancing": _opt("bool"),
    }),
    "cpu": _opt("dict", options={
        "smt": _opt("bool"),
        "governor": _opt("str"),
        "vtx": _opt("bool"),
    }),
    "iommu": _opt("dict", options={
        "enabled": _opt("bool"),
    }),
    "numa": _opt("dict", options={
        "nodes": _opt("int", lo=1, hi=MAX_NODES),
        "cpus_per_node": _opt("int", lo=1, hi=MAX_CPUS),
    }),
    "gpu": _opt("dict", options={
        "count": _opt("int", lo=0, hi=MAX_DEVICES),
        "model": _opt("str"),
        "device_id": _opt("str"),
        "min_link_speed_gts": _opt("float", lo=0, hi=256),
        "min_link_width": _opt("int", lo=1, hi=32),
        "check_current_speed": _opt("bool"),
    }),
    "nvidia": _opt("dict", options={
        "driver_version": _opt("str"),
        "fabricmanager": _opt("bool"),
        "flavor": _opt("str", choices=["server", "open", "server-open"]),
        "imex": _opt("bool"),
        "nvlsm": _opt("bool"),
        "peermem": _opt("bool"),
        "persistenced": _opt("bool"),
    }),
    "nic": _opt("dict", options={
        "rails": _opt("int", lo=0, hi=MAX_DEVICES),
        "affinity": _opt("list", elements="str", choices=list(AFFINITY_ORDER)),
        "ats": _opt("bool"),
    }),
    "ib": _opt("dict", options={
        "state": _opt("str"),
        "phys_state": _opt("str"),
        "min_rate_gbps": _opt("float", lo=0, hi=MAX_GBPS),
        "link_layer": _opt("str", choices=["InfiniBand", "Ethernet"]),
        "scope": _opt("str", choices=["rail", "all"]),
    }),
    "ofed": _opt("dict", options={
        "version": _opt("str"),
        "kernel_match": _opt("bool"),
        "distribution": _opt("str", choices=["mlnx_ofed", "doca_ofed"]),
    }),
    "firmware": _opt("dict", options={
        "nic": _opt("dict", values="version"),
        "nvme": _opt("dict", values="version"),
        "allow_downgrade": _opt("bool"),
    }),
    "storage": _opt("dict", options={
        "mounts": _opt("list", elements="dict", options={
            "path": _opt("str", required=True),
            "fstype": _opt("str"),
            "min_size_gb": _opt("float", lo=0, hi=MAX_GB),
            "min_free_gb": _opt("float", lo=0, hi=MAX_GB),
            "device": _opt("str"),
            "options": _opt("str"),
        }),
    }),
    "pcie": _opt("dict", options={
        "acs_kernel_param": _opt("bool"),
    }),
    "packages": _opt("dict", options={
        "held": _opt("list", elements="str"),
    }),
    # Health thresholds of the gate (docs/profile.md "health"): data, not code.
    "health": _opt("dict", options={
        "xid_critical": _opt("list", elements="int", lo=0, hi=65535),
        "ecc": _opt("bool"),
        "persistence_mode": _opt("bool"),
        "peermem": _opt("bool"),
        "throttle_reasons": _opt("list", elements="str"),
        "nvlink": _opt("dict", options={
            "links": _opt("int", lo=0, hi=MAX_DEVICES),
            "min_gbps": _opt("float", lo=0, hi=MAX_GBPS),
        }),
        # Maximum allowed value per InfiniBand error counter (ports/<p>/counters/<name>).
        "ib_counters": _opt("dict", options=dict((name, _opt("int", lo=0, hi=(1 << 64) - 1)) for name in IB_ERROR_COUNTERS)),
        "nvme": _opt("dict", options={
            "count": _opt("int", lo=0, hi=MAX_DEVICES),
            "min_spare_percent": _opt("int", lo=0, hi=100),
            "max_media_errors": _opt("int", lo=0, hi=(1 << 64) - 1),
            # NVMe "percentage used" is an estimate that may pass 100, up to 255
            "max_percent_used": _opt("int", lo=0, hi=255),
        }),
    }),
    # What a guest must see from inside: the ``guest`` section of its guest plan (docs/guest-plan.md),
    # as the plan gives it; the guest.* checks compare the guest's own sysfs with it.
    "guest": _opt("dict", options={
        "numa": _opt("list", elements="dict", options={
            "id": _opt("int", required=True, lo=0, hi=MAX_NODES),
            "cpus": _opt("list", elements="int", required=True, lo=0, hi=MAX_CPUS),
            "memory_mib": _opt("int", lo=0, hi=1 << 40),
            "host_node": _opt("int", lo=0, hi=MAX_NODES),
            "distances": _opt("list", elements="int", lo=0, hi=255),
        }),
        "siblings": _opt("list", elements=_opt("list", elements="int", lo=0, hi=MAX_CPUS)),
        "devices": _opt("list", elements="dict", options={
            "kind": _opt("str", choices=["gpu", "nic"]),
            "guest_pci": _opt("str", required=True),
            "numa_node": _opt("int", lo=0, hi=MAX_NODES),
            "pair": _opt("int", lo=0, hi=MAX_DEVICES),
            "partner": _opt("str"),
            "cloud_hypervisor_pci": _opt("str"),
        }),
    }),
    # RoCE v2 (docs/profile.md "roce"): the Ethernet rails' addressing plan (_roce.addressing), MTU,
    # RDMA QoS and GID. Applies to the rail NICs when ib.link_layer is Ethernet, or to the netdevs
    # listed in roce.interfaces (hybrid nodes: InfiniBand rails, Ethernet storage NICs).
    "roce": _opt("dict", options={
        "interfaces": _opt("list", elements="str"),
        "addressing": _opt("dict", options={
            "supernet": _opt("str"),
            "rail_prefix": _opt("int"),
            "per_su": _opt("bool"),
            "su_size": _opt("int"),
            "rails": _opt("list", elements="dict", options={
                "rail": _opt("int", required=True),
                "subnet": _opt("str", required=True),
                "su": _opt("int"),
                "gateway": _opt("str"),
            }),
            "key": _opt("str"),
            "gateway": _opt("str", choices=["first", "none"]),
            "host_offset": _opt("int"),
        }),
        "mtu": _opt("int"),
        "qos": _opt("dict", options={
            "trust": _opt("str", choices=["dscp", "pcp"]),
            "dscp": _opt("int"),
            "pfc_priority": _opt("int"),
            "ecn": _opt("bool"),
            "tos": _opt("int"),
        }),
        "gid": _opt("dict", options={
            "type": _opt("str", choices=["RoCE v2", "IB/RoCE v1"]),
            "family": _opt("str", choices=["ipv4", "ipv6"]),
        }),
    }),
    "probes": _opt("dict", options={
        "nccl": _opt("dict", options={
            "enabled": _opt("bool"),
            "transport": _opt("str", choices=["IB", "Socket"]),
            "min_hcas": _opt("int", lo=0, hi=MAX_DEVICES),
            "gdr": _opt("bool"),
            "min_busbw_gbps": _opt("float", lo=0, hi=MAX_GBPS),
        }),
        "h2d": _opt("dict", options={
            "enabled": _opt("bool"),
            "min_gbps": _opt("float", lo=0, hi=MAX_GBPS),
            "max_spread_gbps": _opt("float", lo=0, hi=MAX_GBPS),
        }),
        "p2p": _opt("dict", options={
            "enabled": _opt("bool"),
            "min_gbps": _opt("float", lo=0, hi=MAX_GBPS),
        }),
        "gdr": _opt("dict", options={
            "enabled": _opt("bool"),
            "min_gbps": _opt("float", lo=0, hi=MAX_GBPS),
        }),
        "dcgm": _opt("dict", options={
            "enabled": _opt("bool"),
        }),
    }),
}

# Ranges of the roce integers: (minimum, maximum, why). MTU: 1280 (the IPv6 minimum, so a GID of
# either family works) to 9216 (the largest jumbo frame Ethernet switches carry).
ROCE_RANGES = {
    ("roce", "mtu"): (1280, 9216, "an Ethernet MTU"),
    ("roce", "qos", "dscp"): (0, 63, "a 6-bit DSCP value"),
    ("roce", "qos", "pfc_priority"): (0, 7, "an 802.1p priority"),
    ("roce", "qos", "tos"): (0, 255, "an 8-bit IPv4 TOS byte"),
    ("roce", "addressing", "rail_prefix"): (1, 32, "an IPv4 prefix length"),
    ("roce", "addressing", "su_size"): (1, 1 << 24, "hosts per SU"),
    ("roce", "addressing", "host_offset"): (1, 1 << 24, "the first host address's offset in its subnet"),
}

_SIZE = re.compile(r"^(\d+)\s*([kKmMgG]?)[bB]?$")
_MULT = {"": 1, "k": 1, "m": 1024, "g": 1024 * 1024}


def size_kb(value):
    """Hugepage size as the kernel names it -> kB string: ``1G`` -> "1048576", ``2M`` -> "2048".

    A bare number is kB already (sysfs: ``hugepages-1048576kB``).
    """
    match = _SIZE.match(str(value).strip())
    if not match:
        raise ValueError("not a hugepage size (use 2M, 1G or kB): %r" % (value,))
    return str(int(match.group(1)) * _MULT[match.group(2).lower()])


def _type_name(value):
    return type(value).__name__


def _check_scalar(where, spec_type, value):
    if spec_type == "str":
        if not isinstance(value, str):
            hint = " (quote it: YAML reads 22.10 as 22.1)" if isinstance(value, float) else ""
            raise ProfileError("profile key %s: must be a string, got %s %r%s" % (where, _type_name(value), value, hint))
    elif spec_type == "bool":
        if not isinstance(value, bool):
            raise ProfileError("profile key %s: must be true or false, got %s %r" % (where, _type_name(value), value))
    elif spec_type == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise ProfileError("profile key %s: must be an integer, got %s %r" % (where, _type_name(value), value))
    elif spec_type == "scalar":
        if isinstance(value, (dict, list)) or value is None:
            raise ProfileError("profile key %s: must be a string, number or boolean, got %s" % (where, _type_name(value)))
    elif spec_type == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ProfileError("profile key %s: must be a number, got %s %r" % (where, _type_name(value), value))
        if not math.isfinite(value):
            raise ProfileError("profile key %s: must be a finite number, got %r" % (where, value))
        return float(value)
    elif spec_type == "version":
        if not isinstance(value, str) or not valid_version(value):
            raise ProfileError("profile key %s: must be a firmware version as a quoted string (\"28.39.1002\", "
                               "\"MPK7525Q\"), got %s %r" % (where, _type_name(value), value))
    return value


def _check_range(where, spec, value):
    """``value`` within the spec's lo..hi, else ProfileError naming the key and the value."""
    low, high = spec.get("lo"), spec.get("hi")
    if (low is not None and value < low) or (high is not None and value > high):
        raise ProfileError("profile key %s: %r is out of range (%s to %s)" % (where, value, low, high))
    return value


def _check(where, spec, value):
    if value is None:
        if spec.get("required"):
            raise ProfileError("profile key %s: required" % where)
        return None
    kind = spec["type"]
    if kind == "dict":
        if not isinstance(value, dict):
            raise ProfileError("profile key %s: must be a mapping, got %s %r" % (where, _type_name(value), value))
        if "options" in spec:
            return _check_options(where, spec["options"], value)
        out = {}
        for key, item in value.items():
            out[str(key)] = _check_scalar("%s.%s" % (where, key), spec["values"], item)
        return out
    if kind == "sizes":
        if not isinstance(value, dict):
            raise ProfileError("profile key %s: must be a mapping of hugepage size to count, got %r" % (where, value))
        out = {}
        for key, count in value.items():
            try:
                kb = size_kb(key)
            except ValueError as exc:
                raise ProfileError("profile key %s.%s: %s" % (where, key, exc))
            if kb in out:
                raise ProfileError("profile key %s.%s: size given twice (%s kB)" % (where, key, kb))
            _check_scalar("%s.%s" % (where, key), "int", count)
            out[kb] = _check_range("%s.%s" % (where, key), {"lo": 0, "hi": MAX_HUGEPAGES}, count)
        return out
    if kind == "list":
        if not isinstance(value, list):
            raise ProfileError("profile key %s: must be a list, got %s %r" % (where, _type_name(value), value))
        out = []
        for index, item in enumerate(value):
            item_where = "%s[%d]" % (where, index)
            if isinstance(spec["elements"], dict):   # a list of lists: the inner list's spec
                out.append(_check(item_where, spec["elements"], item))
            elif spec["elements"] == "dict":
                out.append(_check(item_where, {"type": "dict", "options": spec["options"]}, item))
            else:
                item = _check_range(item_where, spec, _check_scalar(item_where, spec["elements"], item))
                if spec.get("choices") and item not in spec["choices"]:
                    raise ProfileError("profile key %s: %r is not one of %s" % (item_where, item, ", ".join(spec["choices"])))
                out.append(item)
        return out
    value = _check_scalar(where, kind, value)
    if kind in ("int", "float"):
        _check_range(where, spec, value)
    if spec.get("choices") and value not in spec["choices"]:
        raise ProfileError("profile key %s: %r is not one of %s" % (where, value, ", ".join(spec["choices"])))
    return value


def _check_options(where, options, value):
    out = {}
    for key in value:
        if key not in options:
            name = "%s.%s" % (where, key) if where else str(key)
            raise ProfileError("profile key %s: unknown (known: %s)" % (name, ", ".join(sorted(options))))
    for key, spec in options.items():
        name = "%s.%s" % (where, key) if where else key
        out[key] = _check(name, spec, value.get(key))
    return out


def validate(profile, check_ids=()):
    """Return the normalised profile (every known key present, None where unset) or raise ProfileError.

    ``check_ids``: the known check ids, so ``require: [kernel.cmdlin]`` is an error too.
    """
    if not isinstance(profile, dict):
        raise ProfileError("profile: must be a mapping, got %s" % _type_name(profile))
    out = _check_options("", SCHEMA, profile)
    if check_ids:
        for index, check_id in enumerate(out["require"] or []):
            if check_id not in check_ids:
                raise ProfileError("profile key require[%d]: unknown check id %r (known: %s)"
                                   % (index, check_id, ", ".join(sorted(check_ids))))
    _check_ranges(out, ROCE_RANGES)
    for index, param in enumerate(((out["kernel"] or {}).get("cmdline") or {}).get("required") or []):
        if not param.strip() or " " in param.strip():
            raise ProfileError("profile key kernel.cmdline.required[%d]: one parameter per item, got %r" % (index, param))
    _check_guest(out["guest"] or {})
    return out


def _check_guest(guest):
    """The guest plan's section: PCI addresses as sysfs names them (lower case, with the domain),
    each partner one of the devices, node ids given once."""
    devices = guest.get("devices") or []
    for index, device in enumerate(devices):
        for key in ("guest_pci", "partner", "cloud_hypervisor_pci"):
            value = device.get(key)
            if value is not None and not BDF.match(value):
                raise ProfileError("profile key guest.devices[%d].%s: %r is not a PCI address as sysfs names it "
                                   "(0000:83:00.0, lower case)" % (index, key, value))
    known = [d["guest_pci"] for d in devices]
    for index, device in enumerate(devices):
        if device.get("partner") is not None and device["partner"] not in known:
            raise ProfileError("profile key guest.devices[%d].partner: %s is none of the guest.devices" % (index, device["partner"]))
    ids = [n["id"] for n in guest.get("numa") or []]
    if len(set(ids)) != len(ids):
        raise ProfileError("profile key guest.numa: a node id given twice (%s)" % ", ".join(str(i) for i in ids))


def _check_ranges(out, ranges):
    for keys, (low, high, what) in sorted(ranges.items()):
        value = section(out, *keys)
        if value is not None and not low <= value <= high:
            raise ProfileError("profile key %s: %d is not %s (%d to %d)" % (".".join(keys), value, what, low, high))
    for index, rail in enumerate(section(out, "roce", "addressing", "rails") or []):
        for key in ("rail", "su"):
            if rail[key] is not None and rail[key] < 0:
                raise ProfileError("profile key roce.addressing.rails[%d].%s: %d is negative" % (index, key, rail[key]))


def section(profile, *keys):
    """profile["a"]["b"] or None when any level is unset."""
    node = profile
    for key in keys:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node
