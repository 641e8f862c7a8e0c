# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""RoCE rail addressing filters (docs in the sidecar *.yml files): one host's plan from its own
index (AWX job slicing: no play needs every host), and the whole-fleet check."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.provision.plugins.module_utils._desired import profile as _profile_schema
from ansible_collections.gpufleet.provision.plugins.module_utils._desired import registry as _desired

PINNED_VAR = "roce_rail_addresses"


def _profile(profile, name):
    """The profile, validated again (idempotent, about a millisecond): a mapping built by hand instead
    of by the profile lookup is an error naming the key, never a TypeError inside the planner."""
    if not isinstance(profile, dict):
        raise AnsibleFilterError("%s: expected the profile mapping (lookup gpufleet.provision.profile), got %r"
                                 % (name, type(profile).__name__))
    try:
        return _profile_schema.validate(profile)
    except _profile_schema.ProfileError as exc:
        raise AnsibleFilterError("%s: %s" % (name, exc))


def _host_vars(hostvars, host, name):
    """The variables of ``host`` (a mapping; {} when the host has none), or an error naming the host."""
    if not isinstance(hostvars, Mapping):
        raise AnsibleFilterError("%s: expected hostvars (a mapping of host to its variables), got %s"
                                 % (name, type(hostvars).__name__))
    variables = hostvars[host] if host in hostvars else {}
    if not hasattr(variables, "get") or not hasattr(variables, "keys"):
        raise AnsibleFilterError("%s: the variables of host %s are %s, not a mapping" % (name, host, type(variables).__name__))
    return variables


def _hosts(hosts, name):
    if hosts is None:
        return []
    if isinstance(hosts, (str, bytes, dict)) or not isinstance(hosts, (list, tuple)):
        raise AnsibleFilterError("%s: hosts must be a list of host names (ansible_play_hosts_all), got %s %r"
                                 % (name, type(hosts).__name__, hosts))
    for host in hosts:
        if not isinstance(host, str):
            raise AnsibleFilterError("%s: hosts must be host names, got %s %r" % (name, type(host).__name__, host))
    return hosts


def _check_kinds(host, interfaces, pinned, facts):
    """The optional arguments of rail_addresses are a list, a mapping, a mapping (or empty)."""
    for what, value, kinds, form in (("interfaces", interfaces, (list, tuple), "a list of netdev names"),
                                     ("pinned", pinned, (dict,), "a mapping of rail number to address"),
                                     ("facts", facts, (dict,), "the host's ansible_facts.gpufleet mapping")):
        if value not in (None, "") and not isinstance(value, kinds):
            raise AnsibleFilterError("rail_addresses(%s): %s must be %s, got %s %r"
                                     % (host, what, form, type(value).__name__, value))
    for name in interfaces or ():
        if not isinstance(name, str) or not name.strip():
            raise AnsibleFilterError("rail_addresses(%s): interfaces must be netdev names, got %r" % (host, name))


def rail_addresses(profile, host, index, interfaces=None, pinned=None, facts=None):
    """profile | rail_addresses(inventory_hostname, host_index) -> {index, su, rails: [...]}."""
    return _host_plan(_profile(profile, "rail_addresses"), host, index, interfaces, pinned, facts)


def _host_plan(profile, host, index, interfaces=None, pinned=None, facts=None):
    """rail_addresses of a validated profile."""
    _check_kinds(host, interfaces, pinned, facts)
    try:
        return _desired.derive("roce_host", profile, host=host, index=index,
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
    for host in _hosts(hosts, "rail_fleet_check"):
        variables = _host_vars(hostvars, host, "rail_fleet_check")
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
    for host in _hosts(hosts, "rail_plans") if spec is not None else []:
        variables = _host_vars(hostvars, host, "rail_plans")
        index = variables.get(spec["key"])
        if index is None or index == "":
            continue
        out[host] = _host_plan(profile, host, index, pinned=variables.get(PINNED_VAR))
    return out


class FilterModule(object):
    def filters(self):
        return {"rail_addresses": rail_addresses, "rail_fleet_check": rail_fleet_check, "rail_plans": rail_plans}
