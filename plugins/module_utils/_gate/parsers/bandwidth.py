# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Bandwidth probe outputs (nvbandwidth, the shipped probe scripts): pure parsers, ValueError on garbage."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re


def parse_h2d(text):
    """Host-to-device bandwidth per GPU -> {gpu: [GB/s per run]}.

    nvbandwidth ``host_to_device_memcpy_ce`` prints a matrix (one row, a column per GPU)::

        memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)
                   0         1
         0     48.91     48.87

    one run per invocation, so several invocations give several runs. Simpler probes print one line
    per GPU and run: ``GPU 0: 48.9 GB/s``.
    """
    runs = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        match = re.match(r"^\s*GPU\s+(\S+?)\s*:\s*(\d+(?:\.\d+)?)\s*GB/s", line)
        if match:
            runs.setdefault(match.group(1), []).append(float(match.group(2)))
        elif "CPU(row) -> GPU(column)" in line and i + 2 < len(lines):
            columns = lines[i + 1].split()
            values = lines[i + 2].split()[1:]
            if len(columns) != len(values):
                raise ValueError("nvbandwidth matrix: %d columns, %d values" % (len(columns), len(values)))
            for col, value in zip(columns, values):
                runs.setdefault(col, []).append(float(value))
            i += 2
        i += 1
    if not runs:
        raise ValueError("no 'GPU <n>: <x> GB/s' line or nvbandwidth CPU(row) -> GPU(column) matrix")
    return runs
