#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: package_pins
short_description: Resolve pinned packages against the node's repositories, install them exactly and hold them
version_added: 0.2.0
description:
  - The one way the collection's roles pin packages (kernel, NVIDIA driver, fabric manager, OFED), on
    apt (Debian, Ubuntu) and dnf (RHEL family).
  - Each pin names a package and an exact version or an upstream version. An upstream version
    (C(550.90.07)) matches any revision the repository has (Ubuntu's C(-0ubuntu0.22.04.1), CUDA's
    C(-1), RPM releases); an installed version that matches is kept, else the newest matching one is
    taken.
  - A name that no package has but that packages provide is resolved to its providing package, from
    the repository's own metadata (apt-cache showpkg's Reverse Provides, dnf repoquery --whatprovides).
    From R580, CUDA's C(nvidia-fabricmanager-580) is provided by the unversioned
    C(nvidia-fabricmanager 580.65.06-1).
  - O(state=resolved) changes nothing; it fails, naming each package and the versions the repository
    offers, when a pin cannot be resolved. Roles call it in preflight, before anything changes.
  - O(state=present) installs the resolved versions in one transaction, removes installed packages
    matching a pin's O(pins[].replaces) patterns (a different branch is replaced, not stacked), holds
    every pinned package (apt-mark hold plus an apt preferences file at priority 1001 with exactly this
    pin set; dnf versionlock), unholding first what it changes or removes. Afterwards it reads the
    installed versions back and fails if any differs from its pin.
author:
  - gpufleet maintainers (@gpufleet)
options:
  pins:
    description: The packages of this pin set.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: Package name (or a virtual name some package provides).
        type: str
        required: true
      version:
        description: Exact version, or upstream version matched against the repository's revisions. Unset
          means the installed version when there is one, else the repository's newest.
        type: str
      replaces:
        description:
          - Shell patterns (fnmatch) of installed packages this pin replaces (other branches, the
            unversioned and versioned fabric manager names). Pinned names are never removed.
        type: list
        elements: str
        default: []
  state:
    description: V(resolved) only resolves; V(present) installs, replaces and holds.
    type: str
    choices: [resolved, present]
    default: present
  manager:
    description: The package manager; V(auto) takes apt when C(apt-get) is on the node, else dnf.
    type: str
    choices: [auto, apt, dnf]
    default: auto
  set_name:
    description:
      - Name of the pin set, one per calling role (for example C(gpufleet-nvidia_driver)). On apt the
        preferences file C(<preferences_dir>/<set_name>.pref) holds exactly this set's pins.
      - Letters, digits, C(_), C(-) and C(.) (not first), at most 100 - the names apt reads in
        C(preferences.d). Package names and versions are one word each (no blank or newline).
    type: str
    default: gpufleet
  preferences_dir:
    description: Folder of apt preferences files.
    type: path
    default: /etc/apt/preferences.d
  update_cache:
    description: Refresh the package lists first (apt-get update, dnf makecache); never in check mode.
    type: bool
    default: false
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying the target.
    support: full
    details: Computes the plan from the node's state; for apt it adds apt's own simulation of the
      transaction (RV(simulation)), dependency-driven changes included.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: full
    details: Each pinned or replaced package with its version and hold, and the preferences file, before and after.
  idempotent:
    description: When run twice in a row with the same arguments, the second run reports no change.
    support: full
notes:
  - Never reboots. A driver or kernel module installed this way is loaded at the next boot; the
    calling role computes the reboot request from loaded versus installed state.
"""

EXAMPLES = r"""
- name: Resolve the driver and its fabric manager before changing anything
  gpufleet.provision.package_pins:
    state: resolved
    pins:
      - {name: nvidia-driver-550-server, version: "550.90.07"}
      - {name: nvidia-fabricmanager-550, version: "550.90.07"}

- name: Install exactly, replace the 535 branch, hold
  gpufleet.provision.package_pins:
    set_name: gpufleet-nvidia_driver
    pins:
      - name: nvidia-driver-550-server
        version: "550.90.07"
        replaces: ["nvidia-driver-[0-9]*"]
      - name: nvidia-fabricmanager-550
        version: "550.90.07"
        replaces: ["nvidia-fabricmanager", "nvidia-fabricmanager-[0-9]*"]
"""

RETURN = r"""
resolved:
  description: One entry per pin, in order.
  returned: always
  type: list
  elements: dict
  sample:
    - {requested: nvidia-fabricmanager-580, name: nvidia-fabricmanager, version: 580.65.06-1,
       via: provides, installed: null, replaces: []}
offered:
  description: Per pin name, the versions the repositories offer (providers as C(name version)).
  returned: always
  type: dict
plan:
  description: What O(state=present) does (or would do in check mode).
  returned: when state is present
  type: dict
  contains:
    install: {description: "[name, version, installed version or null]", type: list, returned: always}
    remove: {description: Replaced packages removed., type: list, returned: always}
    unhold: {description: Holds released before the change., type: list, returned: always}
    hold: {description: Packages held., type: list, returned: always}
    preferences: {description: Whether the apt preferences file changes., type: bool, returned: always}
changes:
  description: The plan as readable lines.
  returned: when state is present
  type: list
  elements: str
simulation:
  description: apt's own simulation of the transaction (C(install) [name, version, old], C(remove) [name, version]).
  returned: in check mode on apt, when something would be installed or removed
  type: dict
manager:
  description: The package manager used.
  returned: always
  type: str
"""

import shutil

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.provision.plugins.module_utils._os.packages import PinError
from ansible_collections.gpufleet.provision.plugins.module_utils._os.package_managers import Apt, Dnf, converge


def main():
    module = AnsibleModule(
        argument_spec=dict(
            pins=dict(type="list", elements="dict", required=True, options=dict(
                name=dict(type="str", required=True),
                version=dict(type="str"),
                replaces=dict(type="list", elements="str", default=[]),
            )),
            state=dict(type="str", choices=["resolved", "present"], default="present"),
            manager=dict(type="str", choices=["auto", "apt", "dnf"], default="auto"),
            set_name=dict(type="str", default="gpufleet"),
            preferences_dir=dict(type="path", default="/etc/apt/preferences.d"),
            update_cache=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    params = module.params

    def run(argv, env=None):
        return module.run_command(argv, environ_update=env or {})

    manager = params["manager"]
    if manager == "auto":
        manager = "apt" if shutil.which("apt-get") else "dnf" if shutil.which("dnf") else None
        if manager is None:
            module.fail_json(msg="package_pins: neither apt-get nor dnf on the node (set manager)")
    backend = Apt(run, params["preferences_dir"]) if manager == "apt" else Dnf(run)
    try:
        result = converge(backend, params["pins"], params["state"], params["set_name"], module.check_mode,
                          update_cache=params["update_cache"])
    except PinError as exc:
        module.fail_json(msg="package_pins: %s" % exc, **exc.result)
    if not module._diff:
        result.pop("diff", None)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
