# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""RDMA QoS of a RoCE interface: what the NIC reports, what differs from the profile, and the boot
script that makes it true at every boot (pure; the roce_rails module runs the commands).

The traffic class of the profile (``_desired.network.roce_qos``: trust, dscp, pfc_priority, pfc,
ecn, tos) becomes, per interface:

- ``mlnx_qos -i <if> --trust dscp`` and ``--pfc 0,0,0,1,0,0,0,0`` (PFC on the RDMA priority only),
  ``--dscp2prio set,<dscp>,<prio>`` when the DSCP does not map to that priority; read back from
  ``mlnx_qos -i <if>`` (``parse_mlnx_qos``; the gate's PFC/trust check reads the same);
- ECN (DCQCN) on the RDMA priority: ``/sys/class/net/<if>/ecn/roce_np/enable/<prio>`` and
  ``roce_rp/enable/<prio>`` (MLNX_OFED's mlx5; absent on an upstream driver: a warning, not a fault);
- RDMA-CM's RoCE TOS and GID type: configfs ``/sys/kernel/config/rdma_cm/<dev>/ports/<port>/
  default_roce_tos`` and ``default_roce_mode`` (what ``cma_roce_tos`` / ``cma_roce_mode`` write);
  the ``<dev>`` folder exists only once made (mkdir), and nothing of it survives a reboot.

None of it survives a reboot or a driver restart: the boot unit ``gpufleet-roce-qos.service`` runs the
script of ``boot_files`` at every boot, before the network comes up. No reboot is ever needed.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

SCRIPT = "usr/local/sbin/gpufleet-roce-qos"
UNIT = "etc/systemd/system/gpufleet-roce-qos.service"
ECN_FILES = ("sys/class/net/%s/ecn/roce_np/enable/%d", "sys/class/net/%s/ecn/roce_rp/enable/%d")
RDMA_CM = "sys/kernel/config/rdma_cm"
CM_PORT = RDMA_CM + "/%s/ports/%s/%s"
GID_MODES = {"RoCE v2": "RoCE v2", "IB/RoCE v1": "IB/RoCE v1"}
# Before the network: the rails come up lossless; after configfs and the NIC driver (openibd on MLNX_OFED).
UNIT_TEXT = """# Managed by gpufleet.provision (roce role)
[Unit]
Description=gpufleet: RDMA QoS (trust, PFC, ECN, RoCE TOS) on the RoCE interfaces
Wants=sys-kernel-config.mount network-pre.target
After=sys-kernel-config.mount systemd-udev-settle.service openibd.service
Before=network-pre.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/%(script)s

[Install]
WantedBy=multi-user.target
"""


class QosError(ValueError):
    """QoS that cannot be read or made; the message names the interface and the cause."""


# The keys of the desired area roce_qos, each (check, what it must be): every one is written into
# mlnx_qos's argv, sysfs and configfs, and the boot script.
_PFC = re.compile(r"^[01](?:,[01]){7}\Z")


def _whole(low, high):
    def check(value):
        if isinstance(value, str) and re.match(r"^[0-9]{1,9}\Z", value):
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high:
            return value
        raise ValueError
    return check, "a whole number from %d to %d" % (low, high)


def _one_of(*choices):
    def check(value):
        if value in choices and isinstance(value, type(choices[0])):
            return value
        raise ValueError
    return check, " or ".join(repr(c) for c in choices)


def _flags_text(value):
    if isinstance(value, str) and _PFC.match(value):
        return value
    raise ValueError


QOS_KEYS = {"trust": _one_of("dscp", "pcp"), "dscp": _whole(0, 63), "pfc_priority": _whole(0, 7),
            "pfc": (_flags_text, "8 flags 0/1 apart by commas (0,0,0,1,0,0,0,0)"), "ecn": _one_of(True, False),
            "tos": _whole(0, 255)}


def check_qos(qos):
    """The QoS of the desired area ``roce_qos`` checked before anything is read or written: every key
    there, of its type and range, no other. Returns it with whole numbers as int (None stays None);
    QosError names the key and the value."""
    if qos is None:
        return None
    if not isinstance(qos, dict):
        raise QosError("qos %r: not a mapping (the desired area roce_qos)" % (qos,))
    unknown = sorted(str(k) for k in qos if k not in QOS_KEYS)
    if unknown:
        raise QosError("qos: unknown key %s (known: %s)" % (", ".join(unknown), ", ".join(sorted(QOS_KEYS))))
    out = {}
    for key, (check, what) in sorted(QOS_KEYS.items()):
        if key not in qos:
            raise QosError("qos: key %s missing (the desired area roce_qos gives %s)" % (key, ", ".join(sorted(QOS_KEYS))))
        try:
            out[key] = check(qos[key])
        except ValueError:
            raise QosError("qos.%s %r: not %s" % (key, qos[key], what))
    return out


def parse_mlnx_qos(text):
    """``mlnx_qos -i <if>`` -> {dcbx, trust, pfc: [8 x 0/1] or None, dscp2prio: {dscp: prio}}.

    Missing parts are None/{} (older mlnx_qos prints no trust line on a NIC without DSCP trust).
    """
    out = {"dcbx": None, "trust": None, "pfc": None, "dscp2prio": {}}
    lines = (text or "").splitlines()
    for index, line in enumerate(lines):
        stripped = line.strip()
        match = re.match(r"^DCBX mode:\s*(.+?)\s*$", stripped)
        if match:
            out["dcbx"] = match.group(1)
        match = re.match(r"^Priority trust (?:state|mode):\s*(\S+)", stripped)
        if match:
            out["trust"] = match.group(1).lower()
        match = re.match(r"^prio:\s*(\d)\s+dscp:\s*([\d,\s]+)$", stripped)
        if match:
            for dscp in re.findall(r"\d+", match.group(2)):
                out["dscp2prio"][int(dscp)] = int(match.group(1))
        if stripped.startswith("enabled") and index > 0 and lines[index - 1].strip().startswith("priority"):
            flags = stripped.split()[1:]
            if len(flags) == 8 and all(f in ("0", "1") for f in flags):
                out["pfc"] = [int(f) for f in flags]
    return out


def mlnx_qos_plan(name, current, qos, program="mlnx_qos"):
    """[{name, current, wanted, argv}] of the mlnx_qos settings of one interface that differ."""
    out = []
    wanted_pfc = [int(f) for f in qos["pfc"].split(",")]
    if current["trust"] != qos["trust"]:
        out.append({"name": "%s trust" % name, "current": current["trust"], "wanted": qos["trust"],
                    "argv": [program, "-i", name, "--trust", qos["trust"]]})
    if current["pfc"] != wanted_pfc:
        out.append({"name": "%s pfc" % name, "current": _flags(current["pfc"]), "wanted": qos["pfc"],
                    "argv": [program, "-i", name, "--pfc", qos["pfc"]]})
    if qos["trust"] == "dscp" and current["dscp2prio"].get(qos["dscp"]) != qos["pfc_priority"]:
        out.append({"name": "%s dscp %d priority" % (name, qos["dscp"]), "current": current["dscp2prio"].get(qos["dscp"]),
                    "wanted": qos["pfc_priority"],
                    "argv": [program, "-i", name, "--dscp2prio", "set,%d,%d" % (qos["dscp"], qos["pfc_priority"])]})
    return out


def _flags(pfc):
    return None if pfc is None else ",".join(str(f) for f in pfc)


def sysfs_wanted(name, rdma, qos, gid_type):
    """{relative path: value} of the files of one interface: ECN on the RDMA priority, and the
    RDMA-CM TOS and GID type of ``rdma`` = (device, port) (None: no RDMA device found)."""
    out = {}
    for pattern in ECN_FILES:
        out[pattern % (name, qos["pfc_priority"])] = "1" if qos["ecn"] else "0"
    if rdma is not None:
        out[CM_PORT % (rdma[0], rdma[1], "default_roce_tos")] = str(qos["tos"])
        if gid_type:
            out[CM_PORT % (rdma[0], rdma[1], "default_roce_mode")] = GID_MODES[gid_type]
    return out


def _sh_quote(text):
    return "'" + str(text).replace("'", "'\\''") + "'"


def boot_files(interfaces, qos, gid_type, hardware_root="/", program="mlnx_qos"):
    """{relative path: text} of the boot script and unit (None: remove them: nothing to set)."""
    if not interfaces or qos is None:
        return {SCRIPT: None, UNIT: None}
    script = [
        "#!/bin/sh",
        "# Managed by gpufleet.provision (roce role): the RDMA QoS of the node profile on the RoCE interfaces",
        "# at every boot (mlnx_qos, ECN and RDMA-CM configfs keep nothing across a reboot).",
        "set -u",
        "root=%s" % _sh_quote(hardware_root.rstrip("/")),
        "status=0",
        "modprobe rdma_cm 2>/dev/null || true",
        "put() { [ -e \"$1\" ] || return 0; [ \"$(cat \"$1\")\" = \"$2\" ] || echo \"$2\" > \"$1\" || status=1; }",
        "qos() {",
        "  if=$1",
        "  %s -i \"$if\" --trust %s >/dev/null || status=1" % (program, qos["trust"]),
        "  %s -i \"$if\" --pfc %s >/dev/null || status=1" % (program, qos["pfc"]),
    ]
    if qos["trust"] == "dscp":
        script.append("  %s -i \"$if\" --dscp2prio set,%d,%d >/dev/null || status=1" % (program, qos["dscp"], qos["pfc_priority"]))
    script += [
        "  for f in roce_np roce_rp; do put \"$root/sys/class/net/$if/ecn/$f/enable/%d\" %d; done"
        % (qos["pfc_priority"], 1 if qos["ecn"] else 0),
        "  for dev in $(ls \"$root/sys/class/net/$if/device/infiniband\" 2>/dev/null); do",
        "    d=\"$root/%s/$dev\"" % RDMA_CM,
        "    [ -d \"$d\" ] || mkdir \"$d\" || { status=1; continue; }",
        "    for p in $(ls \"$d/ports\"); do",
        "      put \"$d/ports/$p/default_roce_tos\" %d" % qos["tos"],
    ]
    if gid_type:
        script.append("      put \"$d/ports/$p/default_roce_mode\" %s" % _sh_quote(GID_MODES[gid_type]))
    script += ["    done", "  done", "}"]
    script += ["qos %s" % _sh_quote(name) for name in sorted(interfaces)]
    script += ["exit $status", ""]
    return {SCRIPT: "\n".join(script), UNIT: UNIT_TEXT % {"script": SCRIPT}}
