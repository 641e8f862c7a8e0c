# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""validate_node's options, shared by the module (on the node) and its action plugin (on the
controller). Nothing is imported here: the action plugin runs in a forked worker per node and task,
and importing the module file for its spec cost that worker 90 ms (every check and parser)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

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
