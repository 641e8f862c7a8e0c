# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVMe health (``nvme smart-log -o json /dev/nvme<N>``, nvme-cli): pure parser."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.provision.plugins.module_utils._gate.parsers.jsondoc import json_after_text


def _number(doc, key):
    value = doc.get(key)
    if isinstance(value, dict):        # newer nvme-cli: {"value": 0, ...} for bit fields
        value = value.get("value")
    if isinstance(value, str) and value.lower().startswith("0x"):
        value = int(value, 16)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("%s: %r is not a number" % (key, value))
    return value


def parse_smart_log(text):
    """nvme-cli smart-log JSON -> {"critical_warning", "avail_spare", "spare_thresh", "percent_used",
    "media_errors"} (ints; percentages as the drive reports them)::

        {"critical_warning" : 0, "temperature" : 302, "avail_spare" : 100, "spare_thresh" : 10,
         "percent_used" : 0, ..., "media_errors" : 0, "num_err_log_entries" : 0, ...}
    """
    doc = json_after_text(text)
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    return dict((k, _number(doc, k)) for k in ("critical_warning", "avail_spare", "spare_thresh", "percent_used", "media_errors"))
