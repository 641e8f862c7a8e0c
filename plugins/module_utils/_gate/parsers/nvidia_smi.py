# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``nvidia-smi -q`` (the human-readable query): pure parsers, text in, data out."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re


def parse_fabric_state(text):
    """``nvidia-smi -q`` -> {gpu bus id: {"State": ..., "Status": ...}} from each GPU's Fabric block::

        GPU 00000000:18:00.0
            Fabric
                State                             : Completed
                Status                            : Success
    """
    out = {}
    gpu = None
    in_fabric = None
    for line in text.splitlines():
        match = re.match(r"^GPU\s+([0-9A-Fa-f]+:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$", line)
        if match:
            gpu = match.group(1).lower()
            in_fabric = None
            continue
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if stripped == "Fabric" and gpu is not None:
            in_fabric = indent
            out[gpu] = {}
            continue
        if in_fabric is not None:
            if not stripped:
                continue
            if indent <= in_fabric:
                in_fabric = None
                continue
            key, sep, value = stripped.partition(":")
            if sep:
                out[gpu][key.strip()] = value.strip()
    return out


def parse_gpu_link(text):
    """``nvidia-smi -q`` -> {gpu bus id: {"gen_max", "gen_current", "width_max", "width_current"}}.

    ``Max`` under PCIe Generation is what the link can train to (the lower of device and host),
    which sysfs's max_link_speed (the device alone) does not say::

        GPU 00000000:18:00.0
            PCI
                GPU Link Info
                    PCIe Generation
                        Max                       : 5
                        Current                   : 1
                        Device Max                : 5
                        Host Max                  : 5
                    Link Width
                        Max                       : 16x
                        Current                   : 16x
    """
    out = {}
    gpu, block = None, None
    for line in text.splitlines():
        match = re.match(r"^GPU\s+([0-9A-Fa-f]+:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$", line)
        if match:
            gpu, block = match.group(1).lower(), None
            continue
        stripped = line.strip()
        if stripped in ("PCIe Generation", "Link Width"):
            block = stripped
            continue
        key, sep, value = stripped.partition(":")
        key, value = key.strip(), value.strip()
        if gpu is None or block is None or not sep:
            if not sep:
                block = None
            continue
        if key in ("Max", "Current"):
            number = re.match(r"^(\d+)x?$", value)
            if number:
                name = ("gen_" if block == "PCIe Generation" else "width_") + key.lower()
                out.setdefault(gpu, {})[name] = int(number.group(1))
    return out
