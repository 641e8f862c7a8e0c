# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PCIe ACS on the GPU-NIC paths: which bridges, their capability and control, what to write.

No Ansible import (only the standard library and ``_node``: facts, fs, parsers, pcie): the pcie
role's boot unit runs this on the node without Ansible. The bridges are found from the node's own PCIe paths (node facts: each GPU's
and NIC's chain of bridges from sysfs) exactly as the gate's ``pcie.acs`` check walks them, never
from a list of addresses.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import struct

from ansible_collections.gpufleet.provision.plugins.module_utils._node import pcie as _pcie

BITS = _pcie.ACS_BITS            # bit 0 first, as lspci prints them
MASK = (1 << len(BITS)) - 1      # 0x7f: the control bits the PCIe base spec defines (7.7.8.3)

# What each host mode needs on the GPU-NIC path (shared/DOMAIN.md "two host modes"):
# bare metal: everything off, peer traffic stays in the switch;
# virtualization: isolation (source validation, request/completion redirect, upstream forwarding)
# with direct translated P2P, so ATS-translated peer traffic is not redirected; translation
# blocking would refuse exactly that traffic, egress control is not needed.
HOST_MODES = {
    "bare_metal": dict((bit, False) for bit in BITS),
    "virtualization": {"SrcValid": True, "TransBlk": False, "ReqRedir": True, "CmpltRedir": True,
                       "UpstreamFwd": True, "EgressCtrl": False, "DirectTrans": True},
}


class AcsError(ValueError):
    """The ACS plan cannot be made; the message names the devices."""


def ctl_value(ctl):
    """{bit: bool} -> the 16-bit control register value."""
    value = 0
    for index, bit in enumerate(BITS):
        if ctl.get(bit):
            value |= 1 << index
    return value


def ctl_bits(value):
    """Register value -> {bit: bool}."""
    return dict((bit, bool(value >> index & 1)) for index, bit in enumerate(BITS))


def format_ctl(ctl):
    """{bit: bool} -> ``SrcValid- TransBlk- ...`` (lspci's ACSCtl notation)."""
    return " ".join("%s%s" % (bit, "+" if ctl.get(bit) else "-") for bit in BITS)


def read_acs(config):
    """ACS capability and control of a function from its config space bytes.

    Returns {"present": False} or {"present": True, "offset": int, "cap": {bit: bool}, "ctl": {bit: bool}}.
    ValueError when the extended space is not there (256 bytes: not root, or not PCIe). The walk is
    _pcie.parse_acs's (which gives the control only); the capability register (+4) says which bits
    the bridge implements: a bit it lacks cannot be set and is not asked for.
    """
    parsed = _pcie.parse_acs(config)   # validates the size and finds whether ACS is there
    if not parsed["present"]:
        return {"present": False}
    offset, seen = 0x100, set()
    while offset and offset not in seen and offset + 8 <= len(config):
        seen.add(offset)
        header = struct.unpack_from("<I", config, offset)[0]
        if header & 0xFFFF == _pcie.ACS_CAP_ID:
            cap, ctl = struct.unpack_from("<HH", config, offset + 4)
            return {"present": True, "offset": offset, "cap": ctl_bits(cap), "ctl": ctl_bits(ctl)}
        offset = (header >> 20) & 0xFFC
    raise ValueError("ACS capability found by _pcie.parse_acs but not by the walk")  # pragma: no cover


def expected(want, cap):
    """The control a bridge must show: the host mode's bits, limited to the bits it implements."""
    return dict((bit, bool(want.get(bit)) and bool(cap.get(bit, True))) for bit in BITS)


def path_bridges(facts):
    """[(bridge bdf, [(gpu, nic), ...])] on every GPU-NIC pair's path, in path order (the gate's walk).

    Raises AcsError when the node has GPUs and NICs but no pair, or pairs but no bridge between
    them: "nothing to do" would hide a node whose topology was not read.
    """
    gpus = dict((g.get("pci"), g) for g in facts.get("gpus") or [])
    nics = dict((n.get("name"), n) for n in facts.get("nics") or [] if not n.get("virtual_function"))
    if not gpus or not nics:
        return []
    pairs = [p for p in facts.get("pairs") or [] if p.get("gpu") in gpus and p.get("nic") in nics]
    if not pairs:
        raise AcsError("no GPU-NIC pair on a node with GPUs (%s) and NICs (%s): the PCIe paths were not read"
                       % (", ".join(sorted(gpus)), ", ".join(sorted(nics))))
    out, index = [], {}
    for pair in pairs:
        for bdf in _pcie.path_between(gpus[pair["gpu"]], nics[pair["nic"]]):
            if bdf not in index:
                index[bdf] = len(out)
                out.append((bdf, []))
            out[index[bdf]][1].append((pair["gpu"], pair["nic"]))
    if not out:
        raise AcsError("no bridge between any GPU and its rail NIC (%s): the ACS list is empty, the PCIe "
                       "paths in sysfs are not what node_facts expects"
                       % ", ".join("%s-%s" % (p["gpu"], p["nic"]) for p in pairs))
    return out


def plan(facts, configs, want):
    """The ACS plan of a node.

    facts: node facts (gpus, nics, pairs with pcie_path); configs: {bdf: config bytes or None};
    want: {bit: bool} of the host mode. Returns a list, one item per bridge on a GPU-NIC path:
    {bdf, pairs, present, current, expected, value, change} (value/current as 4 hex digits, change:
    whether a write is needed). Raises AcsError naming the bridge when its config cannot be read.
    """
    out = []
    for bdf, pairs in path_bridges(facts):
        config = configs.get(bdf)
        if config is None:
            raise AcsError("%s (on the path of %s): config space not readable" % (bdf, _pairs_text(pairs)))
        try:
            acs = read_acs(config)
        except ValueError as exc:
            raise AcsError("%s (on the path of %s): %s" % (bdf, _pairs_text(pairs), exc))
        item = {"bdf": bdf, "pairs": [list(p) for p in pairs], "present": acs["present"]}
        if not acs["present"]:
            item.update(current=None, expected=None, value=None, change=False)
        else:
            exp = expected(want, acs["cap"])
            item.update(current=format_ctl(acs["ctl"]), expected=format_ctl(exp),
                        value="%04x" % ctl_value(exp), change=ctl_value(exp) != ctl_value(acs["ctl"]))
        out.append(item)
    return out


def setpci_args(bdf, value):
    """The setpci arguments that write the ACS control of one bridge (only the 7 defined bits)."""
    return ["-s", bdf, "ECAP_ACS+0x6.w=%s:%04x" % (value, MASK)]


def _pairs_text(pairs):
    return ", ".join("GPU %s - %s" % (gpu, nic) for gpu, nic in pairs)


_LSPCI_DEVICE = re.compile(r"^([0-9a-f]{4}:)?([0-9a-f]{2}:[0-9a-f]{2}\.[0-7])\s")
_LSPCI_ACS = re.compile(r"^\s+ACS(Cap|Ctl):\s+(.*)$")


def parse_lspci_acs(text):
    """``lspci -vvv`` (or ``-D -vvv``) -> {bdf: {"cap": {bit: bool}, "ctl": {bit: bool}}} for functions with ACS.

    Sample::

        17:00.0 PCI bridge: PLX Technology, Inc. PEX 89144 PCIe Gen5 Switch (rev b0) (prog-if 00 [Normal decode])
                Capabilities: [178 v1] Access Control Services
                        ACSCap: SrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans+
                        ACSCtl: SrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-

    Addresses without a domain get ``0000:``.
    """
    out, current = {}, None
    for line in text.splitlines():
        match = _LSPCI_DEVICE.match(line)
        if match:
            current = (match.group(1) or "0000:") + match.group(2)
            continue
        match = _LSPCI_ACS.match(line)
        if match and current:
            bits = {}
            for word in match.group(2).split():
                name, sign = word[:-1], word[-1:]
                if name not in BITS or sign not in "+-":
                    raise ValueError("%s ACS%s: unexpected %r" % (current, match.group(1), word))
                bits[name] = sign == "+"
            if set(bits) != set(BITS):
                raise ValueError("%s ACS%s: bits missing (%s)" % (current, match.group(1), ", ".join(sorted(set(BITS) - set(bits)))))
            out.setdefault(current, {})[match.group(1).lower()] = bits
    return out


def parse_setpci_word(text):
    """``setpci -s <bdf> ECAP_ACS+0x6.w`` -> int: ``005d`` -> 0x5d (``-v`` form: ``...: 005d``)."""
    words = (text or "").split()
    if not words or not re.match(r"^[0-9a-fA-F]{1,4}$", words[-1]):
        raise ValueError("setpci printed %r, expected a 16-bit hex value" % (text or "").strip()[:60])
    return int(words[-1], 16)


def read_configs(fs, facts):
    """{bdf: config bytes or None} of every bridge on a GPU-NIC path, read through the Root ``fs``."""
    out = {}
    for bdf, _pairs in path_bridges(facts):
        out[bdf] = fs.read_bytes("sys/bus/pci/devices/%s/config" % bdf)
    return out


def converge(root, want, runner, check=False, setpci="setpci"):
    """Make the ACS control of every GPU-NIC bridge under ``root`` what ``want`` says.

    runner(argv) -> (rc, stdout, stderr) runs setpci. Reads the node with the node facts collector
    (_facts.collect, the gate's own reader), plans, writes only the bridges that differ (not in
    check mode), then reads the config space again and fails naming any bridge that still differs.
    Returns the plan (each item with ``written``). Used by the pcie_acs module and by the boot script.
    """
    from ansible_collections.gpufleet.provision.plugins.module_utils._node import facts as _facts  # no Ansible import
    from ansible_collections.gpufleet.provision.plugins.module_utils._node.fs import Root

    facts, _warnings = _facts.collect(root)
    fs = Root(root)
    if not facts.get("gpus") or not facts.get("nics"):
        return []   # no GPU-NIC path on this node (a CPU node): nothing to hold ACS for
    items = plan(facts, read_configs(fs, facts), want)
    for item in items:
        item["written"] = False
        if not item["change"] or check:
            continue
        argv = [setpci] + setpci_args(item["bdf"], item["value"])
        rc, out, err = runner(argv)
        if rc != 0:
            raise AcsError("%s: %s failed (exit %d): %s" % (item["bdf"], " ".join(argv), rc, (err or out).strip()))
        item["written"] = True
    if not check and any(i["written"] for i in items):
        after = plan(facts, read_configs(Root(root), facts), want)
        still = [i for i in after if i["change"]]
        if still:
            raise AcsError("ACS still differs after setpci: %s" % "; ".join(
                "%s shows %s, expected %s" % (i["bdf"], i["current"], i["expected"]) for i in still))
    return items
