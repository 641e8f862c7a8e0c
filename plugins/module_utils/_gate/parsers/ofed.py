# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Mellanox/OFED command outputs (mlxconfig, ofed_info, modinfo): pure parsers, ValueError on garbage."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re


def _mlx_bool(name, value):
    match = re.search(r"\((\d+)\)$", value)
    if match:
        return match.group(1) != "0"
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ValueError("%s value %r" % (name, value))


def parse_mlxconfig(text, name):
    """``mlxconfig -e -d <pci> q ATS_ENABLED`` -> {"current": bool | None, "next_boot": bool}.

    With ``-e`` the columns are Default, Current and Next Boot, and a row whose value differs from
    the default is marked ``*``; without ``-e`` only Next Boot is printed, which says nothing about
    what runs now (current None)::

        Configurations:                              Default         Current         Next Boot
        *       ATS_ENABLED                         False(0)        True(1)         True(1)
    """
    columns = None
    for line in text.splitlines():
        if line.strip().startswith("Configurations:"):
            header = line.split(":", 1)[1]
            columns = re.findall(r"Next Boot|Default|Current|RW", header)
            continue
        fields = line.split()
        if fields and fields[0] == "*":
            fields = fields[1:]
        if not fields or fields[0] != name or len(fields) < 2:
            continue
        values = fields[1:]
        names = [c for c in (columns or ["Next Boot"]) if c != "RW"]
        if len(values) < len(names):
            raise ValueError("%s: %d values for the columns %s" % (name, len(values), ", ".join(names)))
        by_column = dict(zip(names, values[-len(names):] if names else []))
        if "Next Boot" not in by_column:
            raise ValueError("%s: no Next Boot column" % name)
        return {"current": _mlx_bool(name, by_column["Current"]) if "Current" in by_column else None,
                "next_boot": _mlx_bool(name, by_column["Next Boot"])}
    raise ValueError("no %s line" % name)


def parse_ofed_info(text):
    """``ofed_info -s``: ``MLNX_OFED_LINUX-23.10-1.1.9.0:`` (DOCA: ``OFED-internal-24.10-1.1.4:``) -> "23.10-1.1.9.0"."""
    match = re.search(r"(\d+\.\d+-[0-9.]+[0-9])", text.strip().splitlines()[0] if text.strip() else "")
    if not match:
        raise ValueError("no OFED version in %r" % text.strip()[:60])
    return match.group(1)


def parse_vermagic(text):
    """``modinfo -F vermagic mlx5_core`` -> release: ``6.8.0-45-generic SMP preempt mod_unload`` ->
    "6.8.0-45-generic"; a full ``modinfo`` output is read from its ``vermagic:`` line."""
    for line in text.splitlines():
        if line.startswith("vermagic:"):
            return line.split(":", 1)[1].split()[0]
    words = text.split()
    if not words or ":" in words[0]:
        raise ValueError("no vermagic in %r" % text.strip()[:60])
    return words[0]
