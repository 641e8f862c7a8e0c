# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""validate_node's options, shared by the module (on the node) and its action plugin (on the
controller), and the one check of their values beyond the spec. Nothing of ours is imported here: the action plugin runs in a forked worker per node and task,
and importing the module file for its spec cost that worker 90 ms (every check and parser)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# Options the action plugin handles on the controller (never sent to the node).
CONTROLLER_OPTIONS = ("report_dir", "report_url", "report_url_username", "report_url_password",
                      "report_url_headers", "report_url_validate_certs", "fail_on_red", "return_report",
                      "ready_group", "quarantine_group", "converged_group")

ARGUMENT_SPEC = dict(
    root=dict(type="path", default="/"),
    profile=dict(type="dict", required=True),
    checks=dict(type="list", elements="str", default=[]),
    require=dict(type="list", elements="str", default=[]),
    commands=dict(type="dict"),
    command_timeout=dict(type="int", default=60),
    packages=dict(type="dict"),
    services=dict(type="dict"),
    probes=dict(type="dict", default={}),
    probe_script=dict(type="str"),
    probe_python=dict(type="str", default="python3"),
    probe_dcgm_level=dict(type="int", default=1, choices=[1, 2, 3, 4]),
    probe_timeout=dict(type="int", default=1800),
    outputs=dict(type="dict", default={}),
    output_errors=dict(type="dict", default={}),
    node=dict(type="str"),
    converged_stamp=dict(type="path"),
    converged_paths=dict(type="list", elements="str", default=[]),
    desired_digest=dict(type="str"),
    write_stamp=dict(type="bool", default=False),
    report_dir=dict(type="path"),
    report_url=dict(type="str"),
    report_url_username=dict(type="str"),
    report_url_password=dict(type="str", no_log=True),
    report_url_headers=dict(type="dict", default={}, no_log=True),
    report_url_validate_certs=dict(type="bool", default=True),
    fail_on_red=dict(type="bool", default=False),
    return_report=dict(type="bool", default=False),
    ready_group=dict(type="str"),
    quarantine_group=dict(type="str"),
    converged_group=dict(type="str"),
)


class OptionError(ValueError):
    """An option's value has the right Ansible type but not the shape the gate reads; the message
    names the option (and the key inside it) and the value."""


# A node's name becomes report file names (<report_dir>/<node>.json): one path component.
_NODE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*\Z")   # \Z: "$" lets a trailing newline through


def node_name_problem(name):
    """Why ``name`` cannot name a node's reports, or None."""
    if not isinstance(name, str) or not _NODE_NAME.match(name) or name in (".", ".."):
        return "%r is not a host name (letters, digits, . _ - : @ +; no /)" % (name,)
    return None


def _argv(where, value):
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        raise OptionError("%s: must be an argv list of strings, got %r" % (where, value))


def _mapping_of(where, value, kind, shape):
    """Each value of the mapping ``value`` is a ``kind`` (list or dict); ``shape`` says what is expected."""
    for key, item in (value or {}).items():
        if not isinstance(item, kind):
            raise OptionError("%s.%s: must be %s, got %r" % (where, key, shape, item))


def check(params):
    """Raise OptionError for an option the argument spec lets through but the gate cannot read:
    command lines that are not argv lists, timeouts below one second, recorded package and service
    facts not in the form of package_facts and service_facts, a node name that is not one."""
    for name in ("commands", "probes"):
        for key, argv in sorted((params.get(name) or {}).items()):
            _argv("%s.%s" % (name, key), argv)
    for name in ("command_timeout", "probe_timeout"):
        if params.get(name) is not None and not 1 <= params[name] <= 7 * 24 * 3600:
            raise OptionError("%s: %r seconds is out of range (1 to %d)" % (name, params[name], 7 * 24 * 3600))
    _mapping_of("packages", params.get("packages"), list, "a list of installed versions (package_facts form)")
    for key, entries in sorted((params.get("packages") or {}).items()):
        if not all(isinstance(e, dict) for e in entries):
            raise OptionError("packages.%s: each entry must be a mapping with version, got %r" % (key, entries))
    _mapping_of("services", params.get("services"), dict, "a mapping with state (service_facts form)")
    if params.get("node") is not None and node_name_problem(params["node"]):
        raise OptionError("node: %s" % node_name_problem(params["node"]))
