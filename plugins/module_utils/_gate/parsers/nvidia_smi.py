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


_GPU_HEADER = re.compile(r"^GPU\s+([0-9A-Fa-f]+:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")


def parse_query(text):
    """``nvidia-smi -q`` -> {"driver_version", "attached": int | None, "gpus": {bus id: tree}}.

    The tree follows the indentation: a line without ``:`` opens a section (a dict), ``Key : value``
    lines are strings; a value's more indented children (``HW Slowdown : Active`` then
    ``HW Power Brake Slowdown : Active``) land in the same section::

        Attached GPUs                             : 8
        GPU 00000000:19:00.0
            Persistence Mode                      : Enabled
            Clocks Event Reasons
                HW Slowdown                       : Active
                    HW Power Brake Slowdown       : Active

    Bus ids are lower case as printed (``00000000:19:00.0``). The caller compares ``attached`` with
    the GPU blocks found: a cut output is no data, never a pass.
    """
    out = {"driver_version": None, "attached": None, "gpus": {}}
    stack = None
    for line in text.splitlines():
        match = _GPU_HEADER.match(line)
        if match:
            tree = {}
            out["gpus"][match.group(1).lower()] = tree
            stack = [(-1, tree)]
            continue
        stripped = line.strip()
        if not stripped:
            continue
        indent = len(line) - len(line.lstrip())
        key, sep, value = stripped.partition(":")
        key, value = key.strip(), value.strip()
        if stack is None:
            if key == "Driver Version":
                out["driver_version"] = value
            elif key == "Attached GPUs" and value.isdecimal():
                out["attached"] = int(value)
            continue
        if indent == 0:
            stack = None        # a top-level line after the GPU blocks
            continue
        while len(stack) > 1 and stack[-1][0] >= indent:
            stack.pop()
        node = stack[-1][1]
        if sep:
            node.setdefault(key, value)
        else:
            # A repeated section name keeps the first one, as repeated keys do.
            child = {}
            node.setdefault(stripped, child)
            stack.append((indent, child))
    return out


def section(tree, *names):
    """tree[a][b]... or None; the first name that exists at each level counts (``Clocks Event
    Reasons`` from driver 535, ``Clocks Throttle Reasons`` before)."""
    node = tree
    for name in names:
        choices = name if isinstance(name, tuple) else (name,)
        found = None
        for choice in choices:
            if isinstance(node, dict) and choice in node:
                found = node[choice]
                break
        if found is None:
            return None
        node = found
    return node


def parse_nvlink_status(text):
    """``nvidia-smi nvlink -s`` -> {gpu index: {"name", "links": {link: GB/s or None (inactive)}}}::

        GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa)
                 Link 0: 26.562 GB/s
                 Link 1: <inactive>
    """
    out, gpu = {}, None
    for line in text.splitlines():
        # "GPU 0: <name> (UUID: GPU-...)": the index is a number, the UUID always printed (the
        # plain listing "GPU 0000:18:00.0: <name>" is not this output).
        match = re.match(r"^GPU\s+(\d+):\s+(.*?)\s+\(UUID:[^)]*\)\s*$", line)
        if match:
            gpu = match.group(1)
            out[gpu] = {"name": match.group(2), "links": {}}
            continue
        match = re.match(r"^\s+Link\s+(\d+):\s*(.*?)\s*$", line)
        if match and gpu is not None:
            speed = re.match(r"^(\d+(?:\.\d+)?)\s*GB/s$", match.group(2))
            if not speed and "inactive" not in match.group(2).lower():
                raise ValueError("GPU %s link %s: %r is neither '<n> GB/s' nor '<inactive>'" % (gpu, match.group(1), match.group(2)))
            out[gpu]["links"][int(match.group(1))] = float(speed.group(1)) if speed else None
    if not out:
        raise ValueError("no 'GPU <n>: <name> (UUID: ...)' line")
    return out
