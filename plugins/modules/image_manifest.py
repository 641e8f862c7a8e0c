#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: image_manifest
short_description: Write or compare the manifest of a golden image (/etc/gpufleet/image.json)
version_added: 0.1.0
description:
  - O(state=present) (the end of C(playbooks/image.yml)) writes C(etc/gpufleet/image.json) under O(root) with
    the profile the image was built from and the hash of its desired state (kernel, command line,
    tuning, driver and fabric manager, OFED, held packages, as the roles derive them), every
    installed package's version, the held ones, the kernel and command line the default GRUB entry
    boots, and a content hash. Rewritten only when the content changed.
  - O(state=compare) changes nothing and says whether the node booted from an image that still is
    what its profile asks, with every pinned package installed at the image's version and held;
    then C(provision.yml) does no package work (RV(match)). A manifest that is not one (not JSON, a JSON
    list or number, keys of the wrong type, a FIFO or a folder in its place) is a reason, never an error.
  - With O(state=present) a manifest that is not one is replaced; a folder or a FIFO in its place fails
    naming it. The manifest is written whole through a temporary file beside it.
author:
  - gpufleet maintainers (@gpufleet)
options:
  profile:
    description: The node profile (the C(gpufleet.provision.profile) lookup's result).
    type: dict
    required: true
  state:
    description: C(present) writes the manifest, C(compare) reads and compares it.
    type: str
    choices: [present, compare]
    default: compare
  root:
    description: Root of the image's (or the node's) OS files.
    type: path
    default: /
  grub_cfg:
    description: The generated GRUB configuration, relative to O(root).
    type: str
    default: boot/grub/grub.cfg
  rewashed:
    description:
      - With O(state=present) on a node that booted from an older image and was re-washed to its
        profile by C(provision.yml), record that in the manifest (C(rewashed), the old content hash).
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: O(state=present) reports whether it would write; O(state=compare) never changes anything.
  diff_mode:
    support: none
    description: The result's RV(manifest) shows what was written.
  idempotent:
    support: full
    description: The same content (the build time aside) gives C(changed=false).
notes:
  - Reads the package database with C(dpkg-query) (else C(rpm)); holds from the dpkg selections.
"""

EXAMPLES = r"""
- name: Record what the image holds
  gpufleet.provision.image_manifest:
    profile: "{{ lookup('gpufleet.provision.profile', gpufleet_profile) }}"
    state: present

- name: Is this node booted from an image of its profile
  gpufleet.provision.image_manifest:
    profile: "{{ lookup('gpufleet.provision.profile', gpufleet_profile) }}"
  register: image
"""

RETURN = r"""
manifest:
  description: The manifest written (O(state=present)) or read (without its package list), null when there is none.
  returned: always
  type: dict
match:
  description: The node booted from an image of its profile's current desired state and every pinned package is as the image left it.
  returned: always
  type: bool
reasons:
  description: Why not (empty when RV(match) is true).
  returned: always
  type: list
  elements: str
path:
  description: The manifest's path.
  returned: always
  type: str
"""

import json
import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.provision.plugins.module_utils._desired import profile as _profile
from ansible_collections.gpufleet.provision.plugins.module_utils._desired import registry as _desired
from ansible_collections.gpufleet.provision.plugins.module_utils._gate import collect as _collect
from ansible_collections.gpufleet.provision.plugins.module_utils._node import fs as _fs
from ansible_collections.gpufleet.provision.plugins.module_utils._os import image as _image


def _read(root):
    """(manifest, problem) at ``root``: (None, None) when absent; problem names what is there instead
    of a manifest (not a regular file, not JSON, not a manifest). Read without blocking (fs.Root)."""
    data = root.read_bytes(_image.MANIFEST, optional=True)
    if data is None:
        return None, (root.problems[0]["detail"] if root.problems else None)
    try:
        manifest = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        return None, "not JSON (%s)" % str(exc)[:100]
    problems = _image.shape_problems(manifest)
    return (None, "not an image manifest (%s)" % "; ".join(problems)) if problems else (manifest, None)


def _database(module):
    def run(argv):
        return module.run_command(argv, environ_update={"LC_ALL": "C", "LANG": "C"})
    database = _collect.PackageDB(run, lambda name: module.get_bin_path(name) is not None)
    packages, cause = database.packages()
    holds, _cause = database.holds()
    if packages is None:
        raise _image.ImageError("package database: %s" % cause)
    return packages, (holds or "").split() if holds is not None else None


def _write(path, manifest):
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        _fs.atomic_write(path, json.dumps(manifest, indent=1, sort_keys=True) + "\n", mode=0o644)
    except (IOError, OSError) as exc:
        raise _image.ImageError("%s: cannot write (%s)" % (path, exc.strerror or exc))
    except _fs.WriteError as exc:
        raise _image.ImageError(str(exc))


def _grub_cfg(root, rel):
    """The text of the GRUB configuration ("" when absent); ImageError naming it when it cannot be read."""
    if ".." in rel.split("/"):
        raise _image.ImageError("grub_cfg %s: .. is not allowed (a path under root)" % rel)
    cfg = root.read(rel, optional=True)
    if cfg is None and root.problems:
        raise _image.ImageError("%s: %s" % (root.join(rel), root.problems[0]["detail"]))
    return cfg or ""


def compare(module, desired, path, old, problem):
    if problem:
        return {"changed": False, "match": False, "reasons": ["%s: %s" % (path, problem)], "manifest": None, "path": path}
    # a node washed live has no manifest: nothing to compare, and its package database is not read
    try:
        packages, holds = _database(module) if old else (None, None)
    except _image.ImageError as exc:
        return {"changed": False, "match": False, "reasons": [str(exc)], "manifest": None, "path": path}
    reasons = _image.differences(old, desired, packages, holds)
    shown = dict((k, v) for k, v in old.items() if k != "packages") if old else None
    return {"changed": False, "match": not reasons, "reasons": reasons, "manifest": shown, "path": path}


def run(module):
    p = module.params
    try:
        desired = _desired.derive("image", _profile.validate(p["profile"]))
    except (_profile.ProfileError, _desired.DesiredError) as exc:
        raise _image.ImageError("profile: %s" % exc)
    if not desired["profile"]:
        raise _image.ImageError("profile: it has no name, and the manifest names the profile an image was built from")
    root = _fs.Root(p["root"])
    path = root.join(_image.MANIFEST)
    old, problem = _read(root)
    if p["state"] == "compare":
        return compare(module, desired, path, old, problem)
    if problem and not os.path.isfile(path):
        # a folder or a FIFO where the manifest goes is not overwritten; bad content is (the build writes it)
        raise _image.ImageError("%s: %s" % (path, problem))
    cfg = _grub_cfg(_fs.Root(p["root"]), p["grub_cfg"])
    packages, holds = _database(module)
    new = _image.build(desired, packages, holds, cfg, built=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       cfg_name=p["grub_cfg"].lstrip("/"))
    if p["rewashed"] and old:
        new["rewashed"] = old.get("content_hash")
        new["content_hash"] = _image.content_hash(new)
    changed = not _image.same_content(old, new)
    if changed and not module.check_mode:
        _write(path, new)
    shown = dict((k, v) for k, v in new.items() if k != "packages")
    return {"changed": changed, "match": True, "reasons": [], "manifest": shown, "path": path}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            profile=dict(type="dict", required=True),
            state=dict(type="str", choices=["present", "compare"], default="compare"),
            root=dict(type="path", default="/"),
            grub_cfg=dict(type="str", default="boot/grub/grub.cfg"),
            rewashed=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    try:
        result = run(module)
    except (_image.ImageError, OSError) as exc:
        module.fail_json(msg="image_manifest: %s" % exc)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
