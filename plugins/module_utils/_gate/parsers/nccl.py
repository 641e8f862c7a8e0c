# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NCCL_DEBUG=INFO output: pure parser."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re


def _transport(name):
    """The SHARP/HPC-X plugin names itself ``IBext`` (``IBext_v8``...): it is InfiniBand."""
    return "IB" if re.match(r"^IB(ext(_v\d+)?)?$", name) else name


def parse_nccl_debug(text):
    """NCCL_DEBUG=INFO lines -> {"transports": set, "hcas": [..], "links": {hca: "IB"|"RoCE"},
    "gdr": {hca: bool}, "env": {NCCL_IB_GID_INDEX: "3", ...}, "version": "2.21.5" or None}::

        node001:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_3:1/IB ; OOB eth0:10.0.0.1<0>
        node001:1:1 [0] NCCL INFO NET/IBext_v8 : Using [0]mlx5_0:1/IB ...          (SHARP/HPC-X plugin)
        node001:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>
        node001:1:1 [0] NCCL INFO Using network IB
        node001:1:1 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'
        node001:1:1 [0] NCCL INFO NET/IB : GPU Direct RDMA (nvidia-peermem) enabled for HCA 0 'mlx5_0'
        node001:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB ens3np0:10.0.0.1<0>
        node001:1:9 [0] NCCL INFO NCCL_IB_GID_INDEX set by environment to 3.
        NCCL version 2.21.5+cuda12.4

    ``gdr`` is what NCCL said about GPUDirect RDMA per HCA (False wins: one disabled HCA is enough
    to halve that rail); a bare ``GPU Direct RDMA Disabled`` without an HCA name is keyed "*".
    """
    transports = set()
    hcas, links, env = [], {}, {}
    gdr = {}
    version = None
    for line in text.splitlines():
        match = re.search(r"\bNCCL INFO (NCCL_[A-Z0-9_]+) set by environment to (\S+?)\.?\s*$", line)
        if match:
            env[match.group(1)] = match.group(2)
            continue
        match = re.search(r"\bNCCL version (\d+\.\d+\.\d+)", line)
        if match:
            version = version or match.group(1)
            continue
        match = re.search(r"NCCL INFO NET/(\w+)\s*:\s*GPU Direct RDMA\b.*?\b(enabled|disabled)\b(?:.*?'([\w.-]+)')?", line, re.I)
        if match:
            hca = match.group(3) or "*"
            on = match.group(2).lower() == "enabled"
            gdr[hca] = gdr.get(hca, True) and on
            continue
        match = re.search(r"NCCL INFO NET/(\w+)\s*:\s*Using\s+(.*)$", line)
        if match:
            transport = _transport(match.group(1))
            transports.add(transport)
            if transport == "IB":
                for hca, link in re.findall(r"\[\d+\]([\w.-]+):\d+/(IB|RoCE)", match.group(2)):
                    if hca not in hcas:
                        hcas.append(hca)
                    links[hca] = link
            continue
        match = re.search(r"NCCL INFO Using network (\w+)", line)
        if match:
            transports.add(_transport(match.group(1)))
    return {"transports": transports, "hcas": hcas, "links": links, "gdr": gdr, "env": env, "version": version}
