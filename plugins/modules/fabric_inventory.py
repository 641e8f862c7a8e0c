#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to gpufleet.provision
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: fabric_inventory
short_description: Build the rail-aware fabric inventory and the files schedulers load
version_added: 0.1.0
description:
  - Parses C(ibnetdiscover) captures of one or more InfiniBand fabric segments and LLDP neighbours of
    RoCE NICs, infers tiers (leaf, spine, core), rails and scalable units (SUs) from the data (or takes
    them from a cabling plan), and groups hosts into placement blocks (same leaf on every rail).
  - Names every anomaly it finds (miscabled rails, missing rails or leaves, unnamed adapters, default
    host names, non-compute adapters, degraded or missing links, duplicate names) in C(fabric.json).
  - Writes into O(dest) C(fabric.json) (schema 1, see docs/fabric.schema.json), Slurm C(topology.conf)
    for C(topology/tree) and C(topology-block.conf) for C(topology/block), one Kubernetes label patch per
    node under C(labels/), NCCL settings per node under C(nccl/) and a one-screen C(summary.txt).
  - Reads only the files it is given; runs wherever the captures are (usually the controller).
options:
  ibnetdiscover:
    description:
      - Paths of C(ibnetdiscover) output files, one per fabric segment.
    type: list
    elements: path
    default: []
  lldp:
    description:
      - LLDP neighbours per host for RoCE fabrics, host name -> the JSON of C(lldpctl -f json)
        (an object, or its text).
    type: dict
    default: {}
  lldp_dir:
    description:
      - Folder of LLDP captures, one C(<inventory_hostname>.json) per host holding C(lldpctl -f json) output
        (what the fabric role's C(collect) entry point writes). Read into O(lldp); an entry of O(lldp) wins.
    type: path
  cabling_plan:
    description:
      - "Declared cabling plan, a mapping or the path of a YAML file: C(sus) maps each SU name to C(leaves)
        (rail number to leaf switch name) and optional C(nodes) (host to leaf port, or a list of hosts)."
      - When given, SU names and the leaf of each rail come from it, and every deviation is an anomaly.
    type: raw
  nodes:
    description:
      - "Node facts and gate reports by host: host name to an object with C(report) (the gate report, C(status) is
        C(pass) or C(fail)) and C(facts) (the host's C(ansible_facts.gpufleet))."
      - C(pass) makes a node C(green), C(fail) C(quarantined), anything else or no entry C(unknown).
      - Facts map adapters to hosts by GUID (even when the node description was never set), give the
        RDMA device names for NCCL, the rail of each NIC (the GPU it pairs with), and exclude storage NICs.
    type: dict
    default: {}
  reports_dir:
    description:
      - Folder of gate reports, one C(<inventory_hostname>.json) per host as the validate role writes them
        (an object with C(report) and C(facts)). Read into O(nodes); an entry given in O(nodes) wins.
      - A file that is not such JSON fails the module, naming the file.
    type: path
  dest:
    description:
      - Folder to write the files into. Created when missing. Stale files under C(labels/) and C(nccl/)
        (hosts no longer in the inventory) are removed.
    type: path
    required: true
  topology_statuses:
    description:
      - Node statuses that go into the Slurm topology files.
    type: list
    elements: str
    choices: [green, quarantined, unknown]
    default: [green]
  block_sizes:
    description:
      - C(BlockSizes) for C(topology-block.conf); omitted when empty (Slurm then uses the base block size).
    type: list
    elements: int
    default: []
  suspicious_hostnames:
    description:
      - Host names that mean "never configured" (the first word of a node description).
    type: list
    elements: str
    default: [localhost, localhost.localdomain, ubuntu, debian, centos, rocky, almalinux, rhel, redhat,
              fedora, sles, linux, none, (none), default, hostname, dgx]
  non_compute_patterns:
    description:
      - Regular expressions; a host name that matches one is a management server (UFM...), not a compute node.
      - SHARP aggregation nodes are always non-compute.
    type: list
    elements: str
    default: ['(?i)ufm']
author:
  - gpufleet maintainers (@gpufleet)
attributes:
  check_mode:
    support: full
    description: Computes every file and reports which would change, without writing.
  diff_mode:
    support: full
    description: Shows before and after of every file that changes (files above 64 KiB as a size only).
  idempotent:
    support: full
    description: The output is deterministic (no time stamps); a second run with the same input changes nothing.
notes:
  - The Slurm tree is rail-aware; see docs/fabric.md for why block switches replace physical leaves.
"""

EXAMPLES = r"""
- name: Fabric inventory from a capture, with the gate reports
  gpufleet.provision.fabric_inventory:
    ibnetdiscover: [/srv/fabric/segment1.out]
    nodes: "{{ fabric_nodes }}"
    dest: /srv/fabric/out

- name: Preview the topology with every node, including nodes without a gate report
  gpufleet.provision.fabric_inventory:
    ibnetdiscover: [/srv/fabric/segment1.out, /srv/fabric/segment2.out]
    cabling_plan: /srv/fabric/plan.yml
    topology_statuses: [green, unknown]
    dest: /srv/fabric/preview
  check_mode: true
"""

RETURN = r"""
changed_files:
  description: Files (relative to O(dest)) that were written or would be written, and removed stale files.
  returned: always
  type: list
  elements: str
  sample: [fabric.json, topology.conf]
summary:
  description: Counts per status, switch tier, rails, SUs, blocks and anomaly kind.
  returned: always
  type: dict
  sample: {nodes: 121, rails: 4, sus: 8, blocks: 10, anomalies: {miscabled_rail: 4}}
summary_text:
  description: The one-screen summary also written to C(summary.txt).
  returned: always
  type: str
anomalies:
  description: Every anomaly, each with kind, host, hca, switch, port, severity and message.
  returned: always
  type: list
  elements: dict
  sample: [{kind: miscabled_rail, host: node01, hca: mlx5_5, switch: leaf-r2-su8, port: 1, severity: error,
            message: "node01 mlx5_5 (rail 3) is on leaf-r2-su8, the leaf of rail 2, instead of rail 3"}]
notes:
  description: Hosts without an NCCL file and why (RDMA device names unknown without node facts).
  returned: always
  type: list
  elements: str
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.gpufleet.provision.plugins.module_utils import _fabric, _fabric_outputs
from ansible_collections.gpufleet.provision.plugins.module_utils._ibnetdiscover import parse_file

try:
    import yaml
    HAS_YAML = True
except ImportError:  # pragma: no cover - pyyaml is a runtime requirement
    HAS_YAML = False

DIFF_LIMIT = 64 * 1024


def load_inputs(params):
    """Read every input; raises FabricError naming the file and the cause."""
    captures = []
    for path in params["ibnetdiscover"]:
        try:
            captures.append(parse_file(path))
        except (IOError, OSError) as exc:
            raise _fabric.FabricError("ibnetdiscover file %s: cannot read it: %s" % (path, to_native(exc)))
    lldp = {}
    merged = load_lldp_dir(params["lldp_dir"]) if params.get("lldp_dir") else {}
    merged.update(params["lldp"] or {})
    for host, value in merged.items():
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError as exc:
                raise _fabric.FabricError("lldp data of %s: not JSON: %s" % (host, to_native(exc)))
        lldp[host] = value
    plan = params.get("cabling_plan")
    if isinstance(plan, str):
        if not HAS_YAML:
            raise _fabric.FabricError("cabling_plan %s: reading YAML needs pyyaml" % plan)
        try:
            with open(plan) as handle:
                plan = yaml.safe_load(handle)
        except (IOError, OSError) as exc:
            raise _fabric.FabricError("cabling_plan %s: cannot read it: %s" % (params["cabling_plan"], to_native(exc)))
        except yaml.YAMLError as exc:
            raise _fabric.FabricError("cabling_plan %s: not valid YAML: %s" % (params["cabling_plan"], to_native(exc)))
    if plan is not None and not isinstance(plan, dict):
        raise _fabric.FabricError("cabling_plan: expected a mapping or the path of a YAML file, got %s" % type(plan).__name__)
    if not captures and not lldp:
        raise _fabric.FabricError("no fabric data: give at least one ibnetdiscover file or LLDP neighbours")
    return captures, lldp, plan


def load_lldp_dir(folder):
    """<folder>/<host>.json (lldpctl -f json) -> {host: object}."""
    if not os.path.isdir(folder):
        raise _fabric.FabricError("lldp_dir %s: not a folder" % folder)
    out = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".json"):
            path = os.path.join(folder, name)
            try:
                with open(path) as handle:
                    out[name[:-len(".json")]] = json.load(handle)
            except (IOError, OSError) as exc:
                raise _fabric.FabricError("lldp file %s: cannot read it: %s" % (path, to_native(exc)))
            except ValueError as exc:
                raise _fabric.FabricError("lldp file %s: not JSON (expected `lldpctl -f json` output): %s" % (path, to_native(exc)))
    return out


def load_reports(folder):
    """<folder>/<host>.json -> {host: {"report": ..., "facts": ...}}."""
    if not os.path.isdir(folder):
        raise _fabric.FabricError("reports_dir %s: not a folder" % folder)
    nodes = {}
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".json"):
            continue
        path = os.path.join(folder, name)
        try:
            with open(path) as handle:
                data = json.load(handle)
        except (IOError, OSError) as exc:
            raise _fabric.FabricError("gate report %s: cannot read it: %s" % (path, to_native(exc)))
        except ValueError as exc:
            raise _fabric.FabricError("gate report %s: not JSON: %s" % (path, to_native(exc)))
        if not isinstance(data, dict) or not isinstance(data.get("report"), dict):
            raise _fabric.FabricError("gate report %s: expected an object with a `report` object (and `facts`)" % path)
        nodes[name[:-len(".json")]] = data
    return nodes


def build(params):
    captures, lldp, plan = load_inputs(params)
    nodes = load_reports(params["reports_dir"]) if params["reports_dir"] else {}
    nodes.update(params["nodes"] or {})
    doc = _fabric.analyze(captures, nodes=nodes, lldp=lldp, plan=plan,
                          suspicious_hostnames=params["suspicious_hostnames"],
                          non_compute_patterns=params["non_compute_patterns"])
    files, notes = _fabric_outputs.render(doc, params["topology_statuses"], params["block_sizes"])
    return doc, files, notes


def _diff(dest, changes, stale):
    out = []
    for rel, before, after in changes:
        big = len(after) > DIFF_LIMIT or (before is not None and len(before) > DIFF_LIMIT)
        out.append({
            "before_header": os.path.join(dest, rel), "after_header": os.path.join(dest, rel),
            "before": ("(%d bytes)\n" % len(before) if big else before) if before is not None else "",
            "after": "(%d bytes)\n" % len(after) if big else after,
        })
    for rel in stale:
        out.append({"before_header": os.path.join(dest, rel), "after_header": "(removed)", "before": "(stale file)\n", "after": ""})
    return out


def main():
    module = AnsibleModule(
        argument_spec=dict(
            ibnetdiscover=dict(type="list", elements="path", default=[]),
            lldp=dict(type="dict", default={}),
            lldp_dir=dict(type="path"),
            cabling_plan=dict(type="raw"),
            nodes=dict(type="dict", default={}),
            reports_dir=dict(type="path"),
            dest=dict(type="path", required=True),
            topology_statuses=dict(type="list", elements="str", choices=["green", "quarantined", "unknown"], default=["green"]),
            block_sizes=dict(type="list", elements="int", default=[]),
            suspicious_hostnames=dict(type="list", elements="str", default=list(_fabric.DEFAULT_SUSPICIOUS_HOSTNAMES)),
            non_compute_patterns=dict(type="list", elements="str", default=list(_fabric.DEFAULT_NON_COMPUTE_PATTERNS)),
        ),
        supports_check_mode=True,
    )
    dest = module.params["dest"]
    try:
        if os.path.exists(dest) and not os.path.isdir(dest):
            raise _fabric.FabricError("dest %s exists and is not a folder" % dest)
        doc, files, notes = build(module.params)
        changes, stale = _fabric_outputs.plan_files(dest, files)
        if changes or stale:
            if not module.check_mode:
                _fabric_outputs.apply_files(dest, changes, stale)
    except _fabric.FabricError as exc:
        module.fail_json(msg=to_native(exc))
    except (IOError, OSError) as exc:
        module.fail_json(msg="dest %s: cannot write the fabric files: %s" % (dest, to_native(exc)))
    result = dict(
        changed=bool(changes or stale),
        changed_files=[c[0] for c in changes] + stale,
        summary=doc["summary"],
        summary_text=_fabric_outputs.summary_text(doc),
        anomalies=doc["anomalies"],
        notes=notes,
    )
    if module._diff:
        result["diff"] = _diff(dest, changes, stale)
    for warning in doc["warnings"][:50]:
        module.warn(warning)
    if len(doc["warnings"]) > 50:
        module.warn("%d more warnings in %s" % (len(doc["warnings"]) - 50, os.path.join(dest, "fabric.json")))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
