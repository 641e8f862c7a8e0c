# -*- coding: utf-8 -*-
# Copyright: contributors to gpufleet.provision
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fabric model and analysis: rails, scalable units, spine groups, placement blocks, anomalies, verdicts.

Pure Python over the output of ``ibnetdiscover.parse`` (and LLDP neighbours for RoCE), usable
without Ansible. ``analyze()`` returns the document that ``fabric.json`` serialises (schema 1,
docs/fabric.schema.json); it never raises on bad data: everything odd is an anomaly or a warning.

How rails and SUs are found when no cabling plan is given (DOMAIN.md section 6):
- a leaf is a switch with host adapters on it; a spine a switch above leaves; a core above spines;
- leaves that share most of their hosts form one scalable unit (rail k of every host of an SU
  plugs into the SU's leaf k);
- the rail of a NIC comes from node_facts (the GPU it pairs with) when the host's facts are given,
  else from its HCA name: names are grouped in families (``HCA-1, HCA-2, HCA-5, HCA-6`` and
  ``mlx5_0, mlx5_1, mlx5_4, mlx5_5``) and ranked by number inside each family;
- the rail of a leaf is the rail most of its NICs have; a NIC on a leaf of another rail or another
  SU is miscabled;
- spines serving (mostly) the same leaves form a spine group: one shared group, or one per rail plane;
  a leaf's uplinks are judged against its own group.

The stages (each a function of the submodules, over one ``Model``):

1. ``adapters.read_captures``: switches, switch links, adapter attachments;
2. ``adapters.classify_adapters`` / ``add_lldp``: host NICs, or anomalies for adapters naming no host;
3. ``structure.tiers``; 4. ``structure.nic_rails``; 5. ``structure.scalable_units``, ``leaf_rails``,
   ``apply_plan``, ``index_sus``;
6. ``hosts.host_rails``, ``hosts.su_checks``;
7. ``links.spine_groups``, ``links.link_anomalies``;
8. ``hosts.not_in_fabric``; 9. ``hosts.node_facts``;
10. ``verdicts``: ids, quarantine, blocks, the document.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import gc

from ansible_collections.gpufleet.provision.plugins.module_utils._fabric import adapters, hosts, links, structure, verdicts
# the model's API: callers import these names from here
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric.common import (  # noqa: F401 pylint: disable=unused-import
    ANOMALY_KINDS, DEFAULT_NON_COMPUTE_PATTERNS, DEFAULT_SUSPICIOUS_HOSTNAMES, QUARANTINE_KINDS, SCHEMA_VERSION,
    STATUS_BY_GATE, FabricError, Model, link_gbps, switch_name)
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric.adapters import lldp_neighbours, parse_lldp  # noqa: F401 pylint: disable=unused-import
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric.verdicts import summarize  # noqa: F401 pylint: disable=unused-import


def analyze(captures, nodes=None, lldp=None, plan=None, suspicious_hostnames=DEFAULT_SUSPICIOUS_HOSTNAMES,
            non_compute_patterns=DEFAULT_NON_COMPUTE_PATTERNS, accept=(), roce_tc=None, rail_plans=None):
    """Build the fabric document.

    captures: list of ``ibnetdiscover.parse`` results (one per fabric segment).
    nodes: {inventory_hostname: {"report": {...}, "facts": <ansible_facts.gpufleet>}} or None.
    lldp: {inventory_hostname: <lldpctl -f json object>} or None.
    plan: cabling plan dict (see docs/fabric.md) or None.
    accept: anomaly ids (or shell patterns of ids) the operator accepts: they quarantine no host.
    roce_tc: the RDMA traffic class of RoCE rails (the profile's roce.qos.tos): NCCL_IB_TC of RoCE hosts.
    rail_plans: {host: rail plan (the rail_plans filter)}: each RoCE host's planned addresses (``roce.addresses``).

    The model allocates hundreds of thousands of small dicts and no reference cycles; Python's
    cyclic collector would rescan them all again and again (cost growing faster than the fabric),
    so it is paused while the model is built.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        m = Model(nodes, lldp, plan, suspicious_hostnames, non_compute_patterns, accept, roce_tc, rail_plans)
        return run(m, captures)
    finally:
        if enabled:
            gc.enable()


def run(m, captures):
    adapters.read_captures(m, captures)
    adapters.classify_adapters(m)
    adapters.add_lldp(m)
    structure.tiers(m)
    structure.nic_rails(m)
    structure.scalable_units(m)
    structure.leaf_rails(m)
    structure.apply_plan(m)
    structure.index_sus(m)
    hosts.host_rails(m)
    hosts.su_checks(m)
    group_of_spine = links.spine_groups(m)
    links.link_anomalies(m, group_of_spine)
    hosts.not_in_fabric(m)
    hosts.node_facts(m)
    verdicts.sort_anomalies(m.anomalies)
    verdicts.assign_ids(m.anomalies)
    verdicts.quarantine(m)
    verdicts.blocks(m)
    return verdicts.document(m)
