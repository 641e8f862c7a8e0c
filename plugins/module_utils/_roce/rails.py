# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Make a node's RoCE interfaces what its plan says: the files (netplan or ifupdown, the QoS boot
unit) and the run-time state (addresses, MTU, routes, trust, PFC, ECN, RDMA-CM TOS and GID type).

``converge`` reads everything first, plans what differs (``netconf``, ``qos``), and in check mode
stops there: the prediction is the plan. Commands go through ``runner(argv) -> (rc, out, err)`` and
files through ``write(path, text, mode)`` (the module passes AnsibleModule's), so tests run it on a
temporary tree with a fake ``ip`` and ``mlnx_qos``. Nothing here needs a reboot.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gpufleet.provision.plugins.module_utils._node.fs import Root
from ansible_collections.gpufleet.provision.plugins.module_utils._roce import netconf as _netconf
from ansible_collections.gpufleet.provision.plugins.module_utils._roce import qos as _qos

OTHER = {"netplan": _netconf.IFUPDOWN_FILE, "ifupdown": _netconf.NETPLAN_FILE}
MODES = {_netconf.NETPLAN_FILE: 0o600, _qos.SCRIPT: 0o755}


class RailsError(ValueError):
    """The rails cannot be configured; the message names the interface, file or command and the cause."""


def detect_style(os_root, style):
    """netplan where /etc/netplan exists (Ubuntu), ifupdown where /etc/network/interfaces does (Debian)."""
    if style in _netconf.STYLES:
        return style
    if os_root.isdir("etc/netplan"):
        return "netplan"
    if os_root.exists(_netconf.IFUPDOWN_MAIN):
        return "ifupdown"
    raise RailsError("no netplan (%s) and no ifupdown (%s) on the node: set roce_network_style"
                     % (os_root.join("etc/netplan"), os_root.join(_netconf.IFUPDOWN_MAIN)))


def wanted_files(os_root, p):
    """{rel: text or None} of every file the role owns (None: must not exist)."""
    files = {}
    if p["rails"]:
        style = detect_style(os_root, p["style"])
        if style == "ifupdown" and not _netconf.ifupdown_sources_dir(os_root.read(_netconf.IFUPDOWN_MAIN, optional=True)):
            raise RailsError("%s does not read /etc/network/interfaces.d (add 'source /etc/network/interfaces.d/*'): "
                             "the rail configuration would not survive a reboot" % os_root.join(_netconf.IFUPDOWN_MAIN))
        rel, text = _netconf.render(style, p["rails"])
        files[rel], files[OTHER[style]] = text, None
    else:
        files[_netconf.NETPLAN_FILE] = files[_netconf.IFUPDOWN_FILE] = None
    names = [r["interface"] for r in p["rails"]] or list(p["interfaces"])
    files.update(_qos.boot_files(names, p["qos"], p["gid_type"], p["hardware_root"], p["mlnx_qos"]))
    return files


def file_edits(os_root, wanted):
    """{rel: (current, wanted)} of the files that differ."""
    edits = {}
    for rel, text in sorted(wanted.items()):
        current = os_root.read_bytes(rel, optional=True)
        current = None if current is None else current.decode("utf-8", "replace")
        if current != text:
            edits[rel] = (current, text)
    return edits


def _run(runner, argv, what):
    rc, out, err = runner(argv)
    if rc != 0:
        raise RailsError("%s: %s exited %d: %s" % (what, " ".join(argv), rc, (err or out or "").strip()[:300]))
    return out


def link_items(rail, runner, ip):
    name = rail["interface"]
    current = _netconf.parse_ip_addr(name, _run(runner, [ip, "-j", "addr", "show", "dev", name], "interface " + name))
    routes = _run(runner, [ip, "-j", "-4", "route", "show", "dev", name], "interface " + name)
    current["routes"] = _netconf.parse_ip_routes(name, routes)
    return _netconf.runtime_plan(rail, current, ip=ip)


def rdma_port(hw, name):
    """(RDMA device, port) of a netdev, None when it has none (not an RDMA NIC, driver not loaded)."""
    for dev in hw.listdir("sys/class/net/%s/device/infiniband" % name):
        ports = hw.listdir("sys/class/infiniband/%s/ports" % dev)
        for port in ports:
            if hw.read("sys/class/infiniband/%s/ports/%s/gid_attrs/ndevs/0" % (dev, port), optional=True) == name:
                return dev, port
        if ports:
            return dev, ports[0]
    return None


def qos_items(hw, name, p, runner, warnings):
    qos = p["qos"]
    current = _qos.parse_mlnx_qos(_run(runner, [p["mlnx_qos"], "-i", name], "interface " + name))
    items = _qos.mlnx_qos_plan(name, current, qos, program=p["mlnx_qos"])
    rdma = rdma_port(hw, name)
    if rdma is None:
        warnings.append("%s: no RDMA device under %s: RDMA-CM TOS and GID type not set"
                        % (name, hw.join("sys/class/net", name, "device/infiniband")))
    elif not hw.isdir("%s/%s" % (_qos.RDMA_CM, rdma[0])):
        if not hw.isdir(_qos.RDMA_CM):
            items.append({"name": "rdma_cm module", "current": None, "wanted": "loaded", "argv": ["modprobe", "rdma_cm"]})
        items.append({"name": "%s rdma_cm folder" % rdma[0], "current": None, "wanted": "present",
                      "mkdir": "%s/%s" % (_qos.RDMA_CM, rdma[0])})
    for rel, value in sorted(_qos.sysfs_wanted(name, rdma, qos, p["gid_type"]).items()):
        now = hw.read(rel, optional=True)
        if now is None and "/ecn/" in rel:
            warnings.append("%s: %s absent (upstream mlx5 driver?): ECN left to the firmware default" % (name, hw.join(rel)))
        elif now != value:
            items.append({"name": "%s %s" % (name, rel.rsplit("/", 1)[-1] if "/ecn/" not in rel else rel.split("/ecn/")[1]),
                          "current": now, "wanted": value, "path": rel, "write": value})
    return items


def runtime_items(hw, p, runner, warnings):
    items = []
    for rail in p["rails"]:
        items += link_items(rail, runner, p["ip"])
    names = [r["interface"] for r in p["rails"]] or list(p["interfaces"])
    if p["qos"] is not None:
        for name in sorted(names):
            items += qos_items(hw, name, p, runner, warnings)
    return items


def summary(items):
    return ["%s: %s -> %s" % (i["name"], "unset" if i["current"] is None else i["current"],
                              "removed" if i["wanted"] is None else i["wanted"]) for i in items]


def apply_item(hw, item, runner):
    if "argv" in item:
        _run(runner, item["argv"], item["name"])
    elif "mkdir" in item:
        os.mkdir(hw.join(item["mkdir"]))
    else:
        with open(hw.join(item["path"]), "w") as handle:
            handle.write(item["write"] + "\n")


def converge(p, runner, write, check=False):
    """The whole role's act step for one node. ``p``: rails, interfaces, style, qos, gid_type, root,
    hardware_root, ip, mlnx_qos, runtime. Returns {changed, files, runtime_changes, unit, warnings,
    diff}; raises RailsError (netconf/qos errors are RailsErrors too, by message)."""
    os_root, hw, warnings = Root(p["root"]), Root(p["hardware_root"]), []
    try:
        edits = file_edits(os_root, wanted_files(os_root, p))
        items = runtime_items(hw, p, runner, warnings) if p["runtime"] else []
    except (_netconf.NetconfError, _qos.QosError) as exc:
        raise RailsError(str(exc))
    result = {"changed": bool(edits or items), "files": sorted(edits), "runtime_changes": summary(items),
              "unit": os.path.basename(_qos.UNIT) if p["qos"] is not None and (p["rails"] or p["interfaces"]) else None,
              "warnings": warnings,
              "diff": [{"before_header": rel, "after_header": rel, "before": old or "", "after": new or ""}
                       for rel, (old, new) in sorted(edits.items())]}
    if items:
        result["diff"].append({"before_header": "run time", "after_header": "run time", "before": "",
                               "after": "\n".join(result["runtime_changes"]) + "\n"})
    if check:
        return result
    for rel, (_old, new) in sorted(edits.items()):
        if new is None:
            os.remove(os_root.join(rel))
        else:
            write(os_root.join(rel), new, MODES.get(rel, 0o644))
    for item in items:
        apply_item(hw, item, runner)
    return result
