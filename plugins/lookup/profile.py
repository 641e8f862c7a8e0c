# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: profile
author: gpufleet maintainers (@gpufleet)
version_added: "0.2.0"
short_description: Load and validate a node profile (the golden manifest)
description:
  - Returns the node profile as a normalised mapping (every known key present, unset keys null),
    validated strictly like the gate does it; an unknown key or a wrong type is an error naming the key.
  - A term is a mapping (validated as it is), a path to a YAML file, or the name of a profile shipped
    with the collection (C(hgx-h100) is C(inventories/profiles/hgx-h100.yml)).
  - A relative path is looked up in the inventory folder, the playbook folder and the current folder,
    then under the collection root (never above it). A missing or unreadable file is an error naming every
    place tried; an empty, binary (not UTF-8) or oversized (over 4 MiB) file, a FIFO, or YAML that is
    not a mapping is an error naming the file.
  - Files are read once per run (cached by path and modification time).
options:
  _terms:
    description: The profile (a mapping, a path or a shipped profile name).
    required: true
"""

EXAMPLES = r"""
- name: The kernel the node class runs
  ansible.builtin.debug:
    msg: "{{ lookup('gpufleet.provision.profile', gpufleet_profile).kernel.release }}"
"""

RETURN = r"""
_raw:
  description: The normalised profile, one per term.
  type: list
  elements: dict
"""

import os
import re
import stat

from ansible.errors import AnsibleLookupError
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.lookup import LookupBase

from ansible_collections.gpufleet.provision.plugins.module_utils._desired import profile as _profile

try:
    import yaml
except ImportError:  # pragma: no cover - pyyaml is a runtime dependency of the collection
    yaml = None

COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_CACHE = {}
# A profile is a page of YAML; past this it is something else (and would hold the worker's memory).
_MAX_BYTES = 4 * 1024 * 1024


def _check_ids():
    # the ids alone: importing the gate's checks for them cost every worker's lookup 30 ms
    from ansible_collections.gpufleet.provision.plugins.module_utils._gate.ids import CHECK_IDS
    return CHECK_IDS


# A shipped profile's name: the file name under inventories/profiles without .yml.
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def candidates(term, folders):
    """Where a profile term may live, in order. A relative path is searched in ``folders`` and in
    the collection root, never above the collection root (``../x`` is no shipped profile)."""
    if os.path.isabs(term):
        return [term]
    out = [os.path.join(folder, term) for folder in folders if folder]
    inside = os.path.normpath(os.path.join(COLLECTION_ROOT, term))
    if inside.startswith(COLLECTION_ROOT + os.sep):
        out.append(inside)
    if _NAME.match(term) and not term.endswith((".yml", ".yaml")):
        out.append(os.path.join(COLLECTION_ROOT, "inventories", "profiles", term + ".yml"))
    seen = set()
    return [p for p in out if not (os.path.normpath(p) in seen or seen.add(os.path.normpath(p)))]


def load_file(path):
    """The validated profile in a YAML file (cached by path and mtime)."""
    stamp = os.stat(path).st_mtime_ns
    hit = _CACHE.get(path)
    if hit and hit[0] == stamp:
        return hit[1]
    with open(path, "rb") as handle:
        raw = handle.read(_MAX_BYTES + 1)
    if len(raw) > _MAX_BYTES:
        raise AnsibleLookupError("profile %s: larger than %d bytes, not a profile" % (path, _MAX_BYTES))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AnsibleLookupError("profile %s: cannot read: not UTF-8 text (%s)" % (path, exc))
    # libyaml's loader when pyyaml has it: the lookup runs in every forked worker, once per task
    data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # nosec B506 - a safe loader
    if data is None:
        raise AnsibleLookupError("profile %s: empty (no YAML mapping in it)" % path)
    try:
        profile = _profile.validate(data, _check_ids())
    except _profile.ProfileError as exc:
        raise AnsibleLookupError("profile %s: %s" % (path, exc))
    _CACHE[path] = (stamp, profile)
    return profile


def load(term, folders):
    """The validated profile a term names: a mapping, a path (searched in ``folders``) or a shipped name."""
    if isinstance(term, dict):
        try:
            return _profile.validate(dict(term), _check_ids())
        except _profile.ProfileError as exc:
            raise AnsibleLookupError(to_native(exc))
    if not isinstance(term, str) or not term.strip() or "\x00" in term:
        raise AnsibleLookupError("profile: expected a mapping, a path or a profile name, got %r" % (term,))
    tried = candidates(term.strip(), folders)
    # a regular file only: a FIFO would block the lookup, a folder is no profile
    path = next((p for p in tried if os.path.isfile(p) and stat.S_ISREG(os.stat(p).st_mode)), None)
    if path is None:
        raise AnsibleLookupError("profile %s: not found (tried %s)" % (term, ", ".join(tried)))
    try:
        return load_file(path)
    except (OSError, yaml.YAMLError, RecursionError) as exc:   # RecursionError: pure-Python YAML, nesting too deep
        raise AnsibleLookupError("profile %s: cannot read: %s" % (path, to_native(exc) or exc.__class__.__name__))


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        variables = variables or {}
        playbook_dir = variables.get("playbook_dir")
        # one level above the playbook too: a checkout or an AWX project keeps playbooks/ in its root
        folders = [variables.get("inventory_dir"), playbook_dir, playbook_dir and os.path.dirname(playbook_dir),
                   self._loader.get_basedir(), os.getcwd()]
        return [load(term, folders) for term in terms]
