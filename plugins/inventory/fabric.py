# -*- coding: utf-8 -*-
# Copyright: contributors to gpufleet.provision
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: fabric
short_description: Hosts and groups from the fabric inventory (fabric.json)
version_added: 0.1.0
description:
  - Reads the C(fabric.json) written by M(gpufleet.provision.fabric_inventory) and adds every node with
    groups by placement block, leaf, rail, scalable unit (SU), fabric segment and status, so a play can
    target "every node on leaf X" (C(leaf_X)) or "all quarantined nodes" (C(status_quarantined)).
  - Each host gets the variable C(fabric), its record (status, su, block, rails with leaf and port, the ids
    of its anomalies and of those that quarantine it).
  - Hosts with anomalies are in C(anomaly_<kind>) groups; hosts the fabric quarantines in C(quarantined_by_fabric).
  - Adapters without a trustworthy host name (node description never set, or a default host name such as
    C(localhost) or C(ubuntu)) are never hosts, so a C(delegate_to localhost) of a combined inventory stays local;
    each is an empty group C(adapter_<guid>) under C(unmapped_adapters), with the variable C(fabric_adapter)
    (id, kind, guid, description, switch, port, su, rail). A node named like a default host name is skipped too.
  - The configuration file name must end with C(fabric.yml) or C(fabric.yaml).
extends_documentation_fragment:
  - constructed
options:
  plugin:
    description: The name of this plugin.
    required: true
    choices: [gpufleet.provision.fabric]
    type: str
  path:
    description: Path of fabric.json; a relative path is relative to the configuration file (C(~) is expanded).
    required: true
    type: str
  statuses:
    description: Only add nodes with one of these statuses (all when empty).
    type: list
    elements: str
    default: []
  group_prefix:
    description: Prefix of the built-in group names (C(<prefix>block_...)).
    type: str
    default: ""
"""

EXAMPLES = r"""
# inventory/site.fabric.yml
plugin: gpufleet.provision.fabric
path: /srv/fabric/out/fabric.json
keyed_groups:
  - key: fabric.su
    prefix: pod
compose:
  ansible_host: inventory_hostname ~ '.mgmt.example'
# ansible -i inventory/site.fabric.yml 'leaf_A09_P1_IBLEAF_01_01:&status_green' -m ping
"""

import json
import os
import re

from ansible.errors import AnsibleParserError
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.inventory import BaseInventoryPlugin, Constructable

from ansible_collections.gpufleet.provision.plugins.module_utils._fabric.common import DEFAULT_SUSPICIOUS_HOSTNAMES, FabricError
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric.verdicts import check_document

SUPPORTED_SCHEMA = 1
# Used when fabric.json has no policy (older files); the model's own list wins when present.
DEFAULT_NAMES = DEFAULT_SUSPICIOUS_HOSTNAMES
NAMELESS_KINDS = ("unnamed_hca", "suspicious_hostname")


class InventoryModule(BaseInventoryPlugin, Constructable):
    NAME = "gpufleet.provision.fabric"

    def verify_file(self, path):
        return super(InventoryModule, self).verify_file(path) and path.endswith(("fabric.yml", "fabric.yaml"))

    def _read(self, path):
        """The only I/O: fabric.json -> dict (tests give _populate a dict directly). Only a regular
        file is opened (a FIFO would block the inventory forever)."""
        if os.path.exists(path) and not os.path.isfile(path):
            raise AnsibleParserError("fabric inventory %s: cannot read it: not a regular file" % path)
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except (IOError, OSError) as exc:
            raise AnsibleParserError("fabric inventory %s: cannot read it: %s" % (path, to_native(exc)))
        if not data.strip():
            raise AnsibleParserError("fabric inventory %s: empty (%d bytes): not a fabric.json written by "
                                     "gpufleet.provision.fabric_inventory" % (path, len(data)))
        try:
            return json.loads(data.decode("utf-8"))
        except ValueError as exc:
            raise AnsibleParserError("fabric inventory %s: not JSON: %s" % (path, to_native(exc)))

    def parse(self, inventory, loader, path, cache=True):
        super(InventoryModule, self).parse(inventory, loader, path, cache)
        self._read_config_data(path)
        source = os.path.expanduser(self.get_option("path"))
        if not os.path.isabs(source):
            source = os.path.join(os.path.dirname(path), source)
        self._populate(self._read(source), source)

    def _group(self, name):
        return self.inventory.add_group(self._sanitize_group_name(self.get_option("group_prefix") + name))

    def _populate(self, doc, source="fabric.json"):
        try:
            check_document(doc)
        except FabricError as exc:
            raise AnsibleParserError("fabric inventory %s: expected fabric.json schema %d with a `nodes` object: %s"
                                     % (source, SUPPORTED_SCHEMA, exc))
        statuses = set(self.get_option("statuses") or [])
        strict = self.get_option("strict")
        policy = doc.get("policy") if isinstance(doc.get("policy"), dict) else {}
        default_names = set(n.lower() for n in (policy.get("suspicious_hostnames") or DEFAULT_NAMES))
        anomalies = [a for a in doc.get("anomalies") or [] if isinstance(a, dict)]
        kinds_of = {}
        for a in anomalies:
            if a.get("host"):
                kinds_of.setdefault(a["host"], set()).add(a.get("kind"))
        for host in sorted(doc["nodes"]):
            node = doc["nodes"][host]
            if not host or any(c.isspace() for c in host):
                raise AnsibleParserError("fabric inventory %s: node %r is not a host name (empty or with blanks)" % (source, host))
            if host.lower() in default_names or host.split(".")[0].lower() in default_names:
                self.display.warning("fabric inventory %s: node %r has a default host name; not added as a host" % (source, host))
                continue
            if statuses and node.get("status") not in statuses:
                continue
            self.inventory.add_host(host)
            self.inventory.set_variable(host, "fabric", node)
            groups = ["status_%s" % node.get("status")]
            if "fabric" in (node.get("quarantined_by") or []):
                groups.append("quarantined_by_fabric")
            groups.extend("anomaly_%s" % k for k in sorted(kinds_of.get(host, ())))
            if node.get("su"):
                groups.append("su_%s" % node["su"])
            if node.get("block"):
                groups.append("block_%s" % node["block"])
            for seg in node.get("segments") or []:
                groups.append("segment_%s" % seg)
            for rail in node.get("rails") or []:
                if rail.get("rail") is not None:
                    groups.append("rail_%s" % rail["rail"])
                if rail.get("leaf"):
                    groups.append("leaf_%s" % rail["leaf"])
            for name in groups:
                self.inventory.add_child(self._group(name), host)
            hostvars = {"fabric": node}
            self._set_composite_vars(self.get_option("compose"), hostvars, host, strict=strict)
            self._add_host_to_composed_groups(self.get_option("groups"), hostvars, host, strict=strict)
            self._add_host_to_keyed_groups(self.get_option("keyed_groups"), hostvars, host, strict=strict)
        self._unmapped_adapters(anomalies)

    def _unmapped_adapters(self, anomalies):
        """Adapters that name no host: one empty group per GUID, never a host."""
        parent = None
        for a in anomalies:
            if a.get("kind") not in NAMELESS_KINDS or a.get("host") or not a.get("guid"):
                continue
            if parent is None:
                parent = self._group("unmapped_adapters")
            guid = re.sub(r"[^0-9a-f]", "", str(a["guid"]).lower())
            group = self._group("adapter_%s" % guid)
            self.inventory.add_child(parent, group)
            self.inventory.set_variable(group, "fabric_adapter", dict(
                (k, a.get(k)) for k in ("id", "kind", "guid", "desc", "switch", "port", "su", "rail", "segment")))
