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
  - Writes into O(dest) C(fabric.json) (schema 1, compact, see docs/fabric.schema.json), Slurm C(topology.conf)
    for C(topology/tree) and C(topology-block.conf) for C(topology/block), the Kubernetes labels of every node
    as one C(labels.json) (a v1 List of Nodes), the NCCL settings of every node as one C(nccl.json), and a
    one-screen C(summary.txt); per-node files under C(labels/) and C(nccl/) with O(per_node_files).
  - A host with a miscabled or missing rail or a degraded link of its own is C(quarantined) by the fabric
    (with the anomaly ids, in C(fabric.json), its labels and the Slurm files) unless O(accept) accepts them.
  - Adapters whose node description is a default host name (O(suspicious_hostnames)) or was never set are
    never hosts; they are anomalies keyed by GUID, and such names never appear in Slurm or Kubernetes files.
  - Reads only the files it is given; runs wherever the captures are (usually the controller).
options:
  ibnetdiscover:
    description:
      - Paths of C(ibnetdiscover) output files, one per fabric segment.
      - A file that holds no fabric fails the module, naming the file and why (empty, not text, no switch or HCA
        records, a truncated record), before anything is written.
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
      - A value of the wrong type (a list where the facts have a mapping, a rail that is no integer) fails the
        module, naming the host and the key.
    type: dict
    default: {}
  reports_dir:
    description:
      - Folder of gate reports, one C(<inventory_hostname>.json) per host as the validate role writes them
        (an object with C(report) and C(facts)). Read into O(nodes); an entry given in O(nodes) wins.
      - A file that is not such JSON fails the module, naming the file. Of each report only the fields the fabric
        uses are kept (the gate's status, a few facts per NIC, NUMA, pairs, siblings); one in the layout the validate
        role writes is read by those members only, any other JSON whole (see docs/fabric.md).
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
  accept:
    description:
      - Anomaly ids (as in C(fabric.json) C(anomalies[].id), for example C(miscabled_rail:gpu001/mlx5_3)) or
        shell-style patterns of ids (C(missing_rail:*/rail2)) the operator accepts; they quarantine no host.
    type: list
    elements: str
    default: []
  nccl_ib_tc:
    description:
      - The RDMA traffic class of RoCE rails (the TOS byte, the profile's C(roce.qos.tos); 106 is DSCP 26 with ECN),
        written as C(NCCL_IB_TC) for hosts with RoCE rails (LLDP). Their C(NCCL_IB_GID_INDEX) comes from node facts
        (the index of the RoCE v2 IPv4 GID, when the same on every rail).
    type: int
  rail_plans:
    description:
      - The RoCE rail addressing plan per host (the P(gpufleet.provision.rail_plans#filter) filter); each RoCE host's
        planned addresses (address/prefix, gateway, routes where routed) go into fabric.json as C(roce.addresses).
      - A host without a plan has C(roce.addresses) null.
    type: dict
    default: {}
  allow_shrink:
    description:
      - Write a new inventory that has lost more than half of the hosts of the C(fabric.json) already in O(dest)
        (hosts in the fabric, with an adapter in a capture or LLDP; a host known only from its gate report is lost).
      - Without it such an inventory (a capture of a segment that was down, the wrong file) fails the module and
        every file in O(dest) stays as it was; see docs/fabric.md.
    type: bool
    default: false
  per_node_files:
    description:
      - Also write one label patch per node under C(labels/) and one NCCL file per node under C(nccl/).
      - When false, such files left by an earlier run are removed (the one-file-per-fabric files replace them).
    type: bool
    default: false
  samples:
    description:
      - How many anomalies of each kind the module result carries in RV(anomaly_samples); C(fabric.json) has them all.
    type: int
    default: 3
  block_sizes:
    description:
      - C(BlockSizes) for C(topology-block.conf); omitted when empty (Slurm then uses the base block size).
      - Positive numbers of nodes, the first the planning base block size and each other one that size times a
        power of two up to 2^15, as Slurm's C(topology/block) requires; anything else fails the module.
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
  description: Files (relative to O(dest)) that were written or would be written, and removed stale files (the first 100).
  returned: always
  type: list
  elements: str
  sample: [fabric.json, topology.conf]
changed_count:
  description: How many files were (or would be) written or removed.
  returned: always
  type: int
summary:
  description: Counts per status, switch tier, rails, SUs, blocks and anomaly kind.
  returned: always
  type: dict
  sample: {nodes: 121, rails: 4, sus: 8, blocks: 10, anomalies: {miscabled_rail: 4}}
summary_text:
  description: The one-screen summary also written to C(summary.txt).
  returned: always
  type: str
anomaly_samples:
  description: The first O(samples) anomalies of each kind (all of them are in C(fabric.json)), each with id, kind,
    host, hca, switch, port, severity and message. Counts per kind are in RV(summary).
  returned: always
  type: list
  elements: dict
  sample: [{id: "miscabled_rail:node01/mlx5_5", kind: miscabled_rail, host: node01, hca: mlx5_5, switch: leaf-r2-su8,
            port: 1, severity: error, message: "node01 mlx5_5 (rail 3) is on leaf-r2-su8, the leaf of rail 2, instead of rail 3"}]
quarantined:
  description: Hosts the fabric quarantines, with the ids of the anomalies that do it (the first 50 hosts).
  returned: always
  type: dict
  sample: {node01: ["miscabled_rail:node01/mlx5_5"]}
notes:
  description: Hosts without NCCL settings and why (RDMA device names unknown without node facts); the first 20.
  returned: always
  type: list
  elements: str
notes_total:
  description: How many hosts have no NCCL settings.
  returned: always
  type: int
"""

import gc
import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.gpufleet.provision.plugins.module_utils._fabric import reports as _fabric_reports
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric import outputs as _fabric_outputs
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric import model as _fabric
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric.common import check_nodes, check_rail_plans
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric.ibnetdiscover import capture_problem, parse_file, sniff
from ansible_collections.gpufleet.provision.plugins.module_utils._node.fs import Root, WriteError

DIFF_LIMIT = 64 * 1024


def load_inputs(params):
    """Read every input; raises FabricError naming the file and the cause."""
    for path in params["ibnetdiscover"]:
        if not os.path.isfile(path) or not os.access(path, os.R_OK):
            raise _fabric.FabricError("ibnetdiscover file %s: cannot read it: %s" % (
                path, "not a readable file" if os.path.exists(path) else "no such file"))
    captures = read_captures(params["ibnetdiscover"])
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
        try:
            import yaml     # here, not at the top: ~25 ms of every run, for a plan given as a file
        except ImportError:  # pragma: no cover - pyyaml is a runtime requirement
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
    if not params["ibnetdiscover"] and not lldp:
        raise _fabric.FabricError("no fabric data: give at least one ibnetdiscover file or LLDP neighbours")
    return captures, lldp, plan


def read_captures(paths):
    """Parse the captures one at a time, as the model asks for them (a generator: the model drops
    each capture once read, so the peak memory is one capture plus the model, not all captures)."""
    for path in paths:
        try:
            why = sniff(path)
            capture = parse_file(path) if why is None else None
            why = why or capture_problem(path, capture)
        except (IOError, OSError) as exc:
            raise _fabric.FabricError("ibnetdiscover file %s: cannot read it: %s" % (path, to_native(exc)))
        if why:
            raise _fabric.FabricError("ibnetdiscover file %s: holds no fabric: %s; nothing written" % (path, why))
        yield capture


def load_lldp_dir(folder):
    """<folder>/<host>.json (lldpctl -f json) -> {host: object}."""
    if not os.path.isdir(folder):
        raise _fabric.FabricError("lldp_dir %s: not a folder" % folder)
    out = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".json"):
            path = os.path.join(folder, name)
            try:
                with open(path) as handle:    # each host's table cut to its neighbours as it is read
                    out[name[:-len(".json")]] = _fabric.lldp_neighbours(json.loads(handle.read()), name[:-len(".json")])
            except (IOError, OSError) as exc:
                raise _fabric.FabricError("lldp file %s: cannot read it: %s" % (path, to_native(exc)))
            except ValueError as exc:
                raise _fabric.FabricError("lldp file %s: not JSON (expected `lldpctl -f json` output): %s" % (path, to_native(exc)))
    return out


def load_reports(folder):
    """<folder>/<host>.json -> {host: the part of {"report", "facts"} the fabric reads}.

    Each report is read, checked and cut to its fabric view (``reports.read_view``: a few fields per
    NIC) before the next: whole, 16k reports of ~125 KB are 3.6 GB in memory. Reads never block (a
    FIFO or a device named <host>.json is an error naming it); the cyclic collector is paused
    meanwhile (the views hold no cycles, and its rescans of them grew with the fleet)."""
    if not os.path.isdir(folder):
        raise _fabric.FabricError("reports_dir %s: not a folder" % folder)
    root = Root(folder)
    nodes, shared = {}, {}
    enabled = gc.isenabled()
    gc.disable()
    try:
        for name in sorted(os.listdir(folder)):
            if name.endswith(".json"):
                nodes[name[:-len(".json")]] = _read_report(root, name, shared)
    finally:
        if enabled:
            gc.enable()
    return nodes


def _read_report(root, name, shared):
    path = root.join(name)
    raw = root.read_bytes(name)
    if raw is None:
        raise _fabric.FabricError("gate report %s: cannot read it: %s" % (path, root.problems[-1]["detail"]))
    try:
        return _fabric_reports.read_view(raw, shared)
    except ValueError as exc:   # UnicodeDecodeError too
        raise _fabric.FabricError("gate report %s: not JSON: %s" % (path, to_native(exc)))
    except _fabric_reports.NotAReport as exc:
        raise _fabric.FabricError("gate report %s: %s" % (path, to_native(exc)))


def build(params):
    captures, lldp, plan = load_inputs(params)
    nodes = load_reports(params["reports_dir"]) if params["reports_dir"] else {}
    nodes.update(params["nodes"] or {})
    doc = _fabric.analyze(captures, nodes=nodes, lldp=lldp, plan=plan,
                          suspicious_hostnames=params["suspicious_hostnames"],
                          non_compute_patterns=params["non_compute_patterns"], accept=params["accept"],
                          roce_tc=params["nccl_ib_tc"], rail_plans=params["rail_plans"])
    # The document lives until the process ends and holds no garbage: set its 10^6 objects aside
    # so that the collector does not walk them again while the outputs are written.
    if hasattr(gc, "freeze"):
        gc.freeze()
    files, notes = _fabric_outputs.render(doc, params["topology_statuses"], params["block_sizes"],
                                          per_node_files=params["per_node_files"])
    return doc, files, notes


def check_params(params):
    """The options the argument spec cannot check (FabricError naming the option)."""
    dest = params["dest"]
    if os.path.exists(dest) and not os.path.isdir(dest):
        raise _fabric.FabricError("dest %s exists and is not a folder" % dest)
    if params["samples"] < 0:
        raise _fabric.FabricError("samples: must be 0 or more, got %d" % params["samples"])
    _fabric_outputs.check_block_sizes(params["block_sizes"])
    check_nodes(params["nodes"])
    check_rail_plans(params["rail_plans"])


def samples(doc, per_kind):
    out = []
    seen = {}
    for a in doc["anomalies"]:
        seen[a["kind"]] = seen.get(a["kind"], 0) + 1
        if seen[a["kind"]] <= per_kind:
            out.append(a)
    return out


def quarantined(doc, limit=50):
    out = {}
    for host, node in doc["nodes"].items():
        if node.get("quarantine"):
            out[host] = node["quarantine"]
            if len(out) >= limit:
                break
    return out


def _diff(dest, changes, stale):
    out = []
    for rel, before, after in changes:
        if isinstance(after, tuple):    # fabric.json, compared by digest: sizes only
            out.append({"before_header": os.path.join(dest, rel), "after_header": os.path.join(dest, rel),
                        "before": "(%d bytes)\n" % before[0] if before else "", "after": "(%d bytes)\n" % after[0]})
            continue
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
            accept=dict(type="list", elements="str", default=[]),
            nccl_ib_tc=dict(type="int"),
            rail_plans=dict(type="dict", default={}),
            per_node_files=dict(type="bool", default=False),
            allow_shrink=dict(type="bool", default=False),
            samples=dict(type="int", default=3),
            suspicious_hostnames=dict(type="list", elements="str", default=list(_fabric.DEFAULT_SUSPICIOUS_HOSTNAMES)),
            non_compute_patterns=dict(type="list", elements="str", default=list(_fabric.DEFAULT_NON_COMPUTE_PATTERNS)),
        ),
        supports_check_mode=True,
    )
    dest = module.params["dest"]
    try:
        check_params(module.params)
        # the hosts of the inventory in place, read before the new one is built (never both in memory)
        previous, warning = (None, None) if module.params["allow_shrink"] else _fabric_outputs.previous_hosts(dest)
        if warning:
            module.warn(warning)
        doc, files, notes = build(module.params)
        _fabric_outputs.check_shrink(dest, previous, doc, module.params["allow_shrink"])
        if not module.check_mode and not os.path.isdir(dest):
            os.makedirs(dest)
        changes, stale = _fabric_outputs.plan_files(dest, files, keep=not module.check_mode)
        if not module.check_mode and (changes or stale):
            _fabric_outputs.apply_files(dest, changes, stale, files)
    except _fabric.FabricError as exc:
        module.fail_json(msg=to_native(exc))
    except (WriteError, IOError, OSError) as exc:
        module.fail_json(msg="dest %s: cannot write the fabric files: %s" % (dest, to_native(exc)))
    changed_files = [c[0] for c in changes] + stale
    result = dict(
        changed=bool(changes or stale),
        changed_files=changed_files[:100],
        changed_count=len(changed_files),
        summary=doc["summary"],
        summary_text=_fabric_outputs.summary_text(doc),
        anomaly_samples=samples(doc, module.params["samples"]),
        quarantined=quarantined(doc),
        notes=notes[:20],
        notes_total=len(notes),
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
