# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NCCL_DEBUG=INFO output: pure parser."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re


def parse_nccl_debug(text):
    """NCCL_DEBUG=INFO lines -> {"transports": set, "hcas": [..]}::

        node001:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_3:1/IB ; OOB eth0:10.0.0.1<0>
        node001:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>
        node001:1:1 [0] NCCL INFO Using network IB
    """
    transports = set()
    hcas = []
    for line in text.splitlines():
        match = re.search(r"NCCL INFO NET/(\w+)\s*:\s*Using\s+(.*)$", line)
        if match:
            transports.add(match.group(1))
            if match.group(1) == "IB":
                for hca in re.findall(r"\[\d+\]([\w.-]+):\d+/IB", match.group(2)):
                    if hca not in hcas:
                        hcas.append(hca)
            continue
        match = re.search(r"NCCL INFO Using network (\w+)", line)
        if match:
            transports.add(match.group(1))
    return {"transports": transports, "hcas": hcas}
