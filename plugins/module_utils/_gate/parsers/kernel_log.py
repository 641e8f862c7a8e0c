# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kernel log (``journalctl -k -b 0`` or ``dmesg``): pure parsers."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# NVIDIA's XID catalog (docs.nvidia.com/deploy/xid-errors), for the XIDs Azure HPC health checks
# treat as fatal; others are named by number only.
XID_MEANING = {
    48: "double-bit ECC error (DBE)",
    56: "display engine error",
    57: "error programming video memory interface",
    58: "unstable video memory interface detected",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recording event",
    64: "ECC page retirement or row remapper recording failure",
    65: "video processor exception",
    68: "NVDEC0 exception (video processor)",
    69: "graphics engine class error",
    73: "NVENC2 error",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    80: "corrupted data sent to GPU",
    81: "VGA subsystem error",
    92: "high single-bit ECC error rate",
    119: "GSP RPC timeout",
    120: "GSP error",
}

_XID = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f:.]+)\):\s*(\d+),\s*(.*)$")


def parse_xids(text):
    """Kernel log -> [{"pci", "xid", "detail"}] in log order, one per XID line::

        [  912.345678] NVRM: Xid (PCI:0000:18:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
        Nov 30 10:00:01 gpu001 kernel: NVRM: Xid (PCI:0000:3b:00): 48, pid=1234, name=python, DBE (0x1) ...

    The driver prints the GPU as ``domain:bus:device`` (no function): ``pci`` is that text lower case.
    """
    out = []
    for line in text.splitlines():
        match = _XID.search(line)
        if match:
            out.append({"pci": match.group(1).lower(), "xid": int(match.group(2)), "detail": match.group(3).strip()})
    return out
