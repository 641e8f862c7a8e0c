# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The firmware role's decision from facts already collected (docs in firmware_due.yml)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.gpufleet.provision.plugins.module_utils._devices import firmware as _fw


# The facts each device's decision reads (node_facts gives strings or null).
_FIELDS = {"nics": ("name", "hca_type", "board_id", "fw_ver"), "nvme": ("name", "model", "firmware")}


def _minimums(name, value):
    """{prefix: version (text)}; a version YAML read as a number (28.39) is taken as its text."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise AnsibleFilterError("firmware_due: %s must be a mapping of prefix to minimum version, got %r" % (name, value))
    out = {}
    for key, version in value.items():
        if not isinstance(key, str) or not key or isinstance(version, bool) or not isinstance(version, (str, int, float)):
            raise AnsibleFilterError("firmware_due: %s: %r: %r is not a prefix and a minimum version" % (name, key, version))
        out[key] = str(version)
    return out


def _devices(facts, key):
    devices = facts.get(key)
    if devices is None:
        return
    if not isinstance(devices, (list, tuple)):
        raise AnsibleFilterError("firmware_due: facts %s must be a list of devices, got %r" % (key, devices))
    for index, dev in enumerate(devices):
        if not isinstance(dev, dict):
            raise AnsibleFilterError("firmware_due: facts %s[%d] must be a mapping, got %r" % (key, index, dev))
        for field in _FIELDS[key]:
            if dev.get(field) is not None and not isinstance(dev[field], str):
                raise AnsibleFilterError("firmware_due: facts %s[%d].%s must be a string, got %r" % (key, index, field, dev[field]))


def firmware_due(facts, nic_minimums, nvme_minimums, allow_downgrade=False, images=None):
    """ansible_facts.gpufleet | firmware_due(nic, nvme, allow_downgrade, images) -> {nic, nvme, reasons, at_minimum}.

    Every input is checked first: a fact, minimum or image of the wrong type fails naming it."""
    if not isinstance(facts, dict):
        raise AnsibleFilterError("firmware_due: expected the node facts (ansible_facts.gpufleet), got %r" % type(facts).__name__)
    for key in _FIELDS:
        _devices(facts, key)
    nic, nvme = _minimums("nic_minimums", nic_minimums), _minimums("nvme_minimums", nvme_minimums)
    try:
        downgrade = boolean(False if allow_downgrade is None else allow_downgrade, strict=True)
    except TypeError:
        raise AnsibleFilterError("firmware_due: allow_downgrade must be true or false, got %r" % (allow_downgrade,))
    images = [] if images is None else images
    if not isinstance(images, (list, tuple)) or not all(isinstance(i, dict) and isinstance(i.get("type") or "", str) for i in images):
        raise AnsibleFilterError("firmware_due: images must be a list of mappings with a type (firmware_images), got %r" % (images,))
    return _fw.due_from_facts(facts, nic, nvme, downgrade, images)


class FilterModule(object):
    def filters(self):
        return {"firmware_due": firmware_due}
