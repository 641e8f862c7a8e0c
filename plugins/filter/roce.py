# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""RoCE rail addressing filters (docs in the sidecar *.yml files): one host's plan from its own
index (AWX job slicing: no play needs every host), and the whole-fleet check."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.provision.plugins.module_utils._desired import registry as _desired

PINNED_VAR = "roce_rail_addresses"


def _profile(profile, name):
    if not isinstance(profile, dict):
        raise AnsibleFilterError("%s: expected the profile mapping (lookup gpufleet.provision.profile), got %r"
                                 % (name, type(profile).__name__))
    return profile


def rail_addresses(profile, host, index, interfaces=None, pinned=None, facts=None):
    """profile | rail_addresses(inventory_hostname, host_index) -> {index, su, rails: [...]}."""
    try:
        return _desired.derive("roce_host", _profile(profile, "rail_addresses"), host=host, index=index,
                               pinned=pinned or None, interfaces=interfaces or None, facts=facts)
    except _desired.DesiredError as exc:
        raise AnsibleFilterError("rail_addresses(%s): %s" % (host, exc))


def rail_fleet_check(profile, hostvars, hosts):
    """profile | rail_fleet_check(hostvars, ansible_play_hosts_all) -> summary; fails listing every
    host without an index, index given twice, address given twice or pinned outside its rail."""
    profile = _profile(profile, "rail_fleet_check")
    try:
        spec = _desired.derive("roce_addressing", profile)
    except _desired.DesiredError as exc:
        raise AnsibleFilterError("rail_fleet_check: %s" % exc)
    if spec is None:
        return None
    items = []
    for host in hosts or []:
        variables = hostvars[host] if host in hostvars else {}
        items.append({"host": host, "index": variables.get(spec["key"]), "pinned": variables.get(PINNED_VAR)})
    try:
        return _desired.derive("roce_fleet", profile, hosts=items)
    except _desired.DesiredError as exc:
        raise AnsibleFilterError("rail_fleet_check: %s" % exc)


def rail_plans(profile, hostvars, hosts):
    """profile | rail_plans(hostvars, groups['gpu']) -> {host: plan} of every host with an index (the
    fabric inventory's planned addresses, fabric.json ``nodes.<host>.roce.addresses``); {} without a
    roce.addressing section. A host without an index has no plan (the roce role's preflight says so)."""
    profile = _profile(profile, "rail_plans")
    try:
        spec = _desired.derive("roce_addressing", profile)
    except _desired.DesiredError as exc:
        raise AnsibleFilterError("rail_plans: %s" % exc)
    out = {}
    for host in (hosts or []) if spec is not None else []:
        variables = hostvars[host] if host in hostvars else {}
        index = variables.get(spec["key"])
        if index is None or index == "":
            continue
        out[host] = rail_addresses(profile, host, index, pinned=variables.get(PINNED_VAR))
    return out


class FilterModule(object):
    def filters(self):
        return {"rail_addresses": rail_addresses, "rail_fleet_check": rail_fleet_check, "rail_plans": rail_plans}
