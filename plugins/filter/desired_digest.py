# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The desired state's digest for the converged stamp (docs/roles.md section 6; docs in desired_digest.yml).
One filter per file, named as the file: Ansible resolves it without loading every filter file."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import hashlib
import json
import os

from ansible.errors import AnsibleFilterError

# The collection's folders whose files decide what a run does (three folders above this file).
COLLECTION = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CODE = ("roles", "plugins", "playbooks")
_CACHE = {}


def collection_digest(top=COLLECTION):
    """``sha256:<hex>`` over the path, size and mtime of every file of the collection's roles,
    plugins and playbooks (no content read; compiled files left out). Once per process."""
    if top in _CACHE:
        return _CACHE[top]
    digest = hashlib.sha256()
    for folder in CODE:
        for base, dirs, files in os.walk(os.path.join(top, folder)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(f for f in files if not f.endswith((".pyc", ".pyo"))):
                path = os.path.join(base, name)
                try:
                    st = os.stat(path)
                    line = "%s %d %d\n" % (os.path.relpath(path, top), st.st_size, st.st_mtime_ns)
                except OSError:   # a broken link: its target's appearing later is a change
                    line = "%s absent\n" % os.path.relpath(path, top)
                digest.update(line.encode("utf-8", "surrogateescape"))
    _CACHE[top] = "sha256:" + digest.hexdigest()
    return _CACHE[top]


def _plain(value):
    """JSON for what YAML and Jinja give beside JSON's types: dates as ISO text, sets sorted. Anything
    else (an object whose text is its address) would make a digest that moves on every run."""
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    raise TypeError("%s is not JSON data" % type(value).__name__)


def desired_digest(profile, role_vars=None):
    """profile | desired_digest(role_vars) -> ``sha256:<hex>`` of the profile, the role variables
    set for the node (inventory, extra vars) and the collection's files."""
    if not isinstance(profile, dict):
        raise AnsibleFilterError("desired_digest: expected the profile mapping (lookup gpufleet.provision.profile), got %r"
                                 % type(profile).__name__)
    if role_vars is not None and not isinstance(role_vars, dict):
        raise AnsibleFilterError("desired_digest: role_vars must be a mapping of variable names to values, got %r"
                                 % type(role_vars).__name__)
    try:
        body = json.dumps({"profile": profile, "vars": role_vars or {}}, sort_keys=True, default=_plain)
    except (TypeError, ValueError, RecursionError) as exc:
        raise AnsibleFilterError("desired_digest: the profile or role variables cannot be serialised: %s" % exc)
    digest = hashlib.sha256(body.encode("utf-8"))
    digest.update(collection_digest().encode("ascii"))
    return "sha256:" + digest.hexdigest()


class FilterModule(object):
    def filters(self):
        return {"desired_digest": desired_digest}
