# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Mellanox/OFED command outputs (mlxconfig, ofed_info, modinfo): pure parsers, ValueError on garbage."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re


def parse_mlxconfig(text, name):
    """``mlxconfig -d <pci> q ATS_ENABLED`` -> the configured value as bool::

        Configurations:                              Next Boot
                ATS_ENABLED                         True(1)
    """
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == name and len(fields) > 1:
            match = re.search(r"\((\d+)\)$", fields[-1])
            if match:
                return match.group(1) != "0"
            if fields[-1].lower() in ("true", "false"):
                return fields[-1].lower() == "true"
            raise ValueError("%s value %r" % (name, fields[-1]))
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
