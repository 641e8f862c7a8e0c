# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``mlnx_qos -i <netdev>`` (MLNX_OFED / DOCA-OFED): the NIC's QoS as the driver reports it. Pure parser."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re


def parse_mlnx_qos(text):
    """``mlnx_qos -i eth2`` -> {"trust": "dscp"|"pcp"|None, "pfc": [8 bools] or None,
    "dscp2prio": {dscp: prio}}::

        DCBX mode: OS controlled
        Priority trust state: dscp
        dscp2prio mapping:
                prio:3 dscp:31,30,29,28,27,26,25,24,
        Cable len: 7
        PFC configuration:
                priority    0   1   2   3   4   5   6   7
                enabled     0   0   0   1   0   0   0   0
        tc: 0 ratelimit: unlimited, tsa: vendor

    A text with neither a trust state nor a PFC table is not mlnx_qos output: ValueError.
    """
    trust, pfc, dscp2prio = None, None, {}
    priorities = None
    for line in text.splitlines():
        stripped = line.strip()
        match = re.match(r"^Priority trust (?:state|mode):\s*(\w+)", stripped)
        if match:
            trust = match.group(1).lower()
            continue
        match = re.match(r"^prio:\s*(\d)\s+dscp:\s*([\d,\s]*)$", stripped)
        if match:
            for value in re.findall(r"\d+", match.group(2)):
                dscp2prio[int(value)] = int(match.group(1))
            continue
        words = stripped.split()
        if words[:1] == ["priority"] and len(words) == 9 and all(w.isdigit() for w in words[1:]):
            priorities = [int(w) for w in words[1:]]
        elif words[:1] == ["enabled"] and priorities is not None:
            if len(words) != 9 or not all(w in ("0", "1") for w in words[1:]):
                raise ValueError("PFC 'enabled' row is not eight 0/1 flags: %r" % stripped)
            flags = dict(zip(priorities, words[1:]))
            pfc = [flags.get(p) == "1" for p in range(8)]
    if trust is None and pfc is None:
        raise ValueError("no 'Priority trust state' line and no 'PFC configuration' table")
    return {"trust": trust, "pfc": pfc, "dscp2prio": dscp2prio}
