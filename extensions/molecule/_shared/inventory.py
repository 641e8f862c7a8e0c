#!/usr/bin/env python3
"""The molecule scenarios' inventory, as an Ansible inventory script: the lab tests' private lab
(ports shifted by GPUFLEET_LABTEST_SHIFT, containers prefixed with GPUFLEET_LABTEST_PREFIX, the
lab's group variables), computed when Ansible asks for it. Every molecule.yml links it in as
``hosts``, so `molecule list` and `molecule test -s <scenario>` work from a plain clone: nothing has
to be generated first. ``lab.py up`` (the create step) writes the same inventory for lab.sh.

    ./inventory.py --list | --host NAME
"""
import json
import os
import sys

# molecule links this file into its ephemeral inventory folder: find the checkout from the real path
sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import lab  # noqa: E402  (extensions/molecule/_shared/lab.py)


def to_script(inv):
    """A YAML inventory (``all`` with nested ``children``) in the script form Ansible reads."""
    out = {"_meta": {"hostvars": {}}}

    def walk(name, group):
        group = group or {}
        entry = out.setdefault(name, {"hosts": [], "vars": {}, "children": []})
        for host, hostvars in (group.get("hosts") or {}).items():
            entry["hosts"].append(host)
            out["_meta"]["hostvars"].setdefault(host, {}).update(hostvars or {})
        entry["vars"].update(group.get("vars") or {})
        for child, sub in (group.get("children") or {}).items():
            entry["children"].append(child)
            walk(child, sub)
    walk("all", inv["all"])
    return out


def main(argv):
    if argv[1:] == ["--list"]:
        print(json.dumps(to_script(lab.inventory())))
        return 0
    if len(argv) == 3 and argv[1] == "--host":
        print(json.dumps(to_script(lab.inventory())["_meta"]["hostvars"].get(argv[2], {})))
        return 0
    sys.stderr.write("usage: inventory.py --list | --host NAME\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
