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
  - Each host gets the variable C(fabric), its record (status, su, block, rails with leaf and port).
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

from ansible.errors import AnsibleParserError
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.inventory import BaseInventoryPlugin, Constructable

SUPPORTED_SCHEMA = 1


class InventoryModule(BaseInventoryPlugin, Constructable):
    NAME = "gpufleet.provision.fabric"

    def verify_file(self, path):
        return super(InventoryModule, self).verify_file(path) and path.endswith(("fabric.yml", "fabric.yaml"))

    def _read(self, path):
        """The only I/O: fabric.json -> dict (tests give _populate a dict directly)."""
        try:
            with open(path) as handle:
                return json.load(handle)
        except (IOError, OSError) as exc:
            raise AnsibleParserError("fabric inventory %s: cannot read it: %s" % (path, to_native(exc)))
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
        if not isinstance(doc, dict) or doc.get("schema") != SUPPORTED_SCHEMA or not isinstance(doc.get("nodes"), dict):
            raise AnsibleParserError("fabric inventory %s: expected fabric.json schema %d with a `nodes` object, got schema %r"
                                     % (source, SUPPORTED_SCHEMA, doc.get("schema") if isinstance(doc, dict) else None))
        statuses = set(self.get_option("statuses") or [])
        strict = self.get_option("strict")
        for host in sorted(doc["nodes"]):
            node = doc["nodes"][host]
            if not isinstance(node, dict):
                raise AnsibleParserError("fabric inventory %s: node %s is not an object" % (source, host))
            if statuses and node.get("status") not in statuses:
                continue
            self.inventory.add_host(host)
            self.inventory.set_variable(host, "fabric", node)
            groups = ["status_%s" % node.get("status")]
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
