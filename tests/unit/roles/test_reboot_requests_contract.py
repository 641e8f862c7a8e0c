"""The reboot-request contract (docs/roles.md section 3): a role REPLACES its own records in
gpufleet_reboot_requests, through the one filter reboot_requests_merge, under its own name. Scans
every role's task files: a role that appends, filters by hand, asks under another role's name or
sets the shared fact anywhere but a set_fact fails here, naming the file and the expression."""
import glob
import os
import re

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
NAME = "gpufleet_reboot_requests"
# the whole expression, nothing before or after the filter call
ONE_WAY = re.compile(r"^\{\{ gpufleet_reboot_requests \| default\(\[\]\) \| gpufleet\.provision\.reboot_requests_merge\("
                     r"'(?P<role>[a-z_]+)', (?P<reasons>[A-Za-z_][\w.]*)\) \}\}$")
# the reboot role empties the list after the reboot: the one other value allowed
EMPTIED = {"reboot": []}


def _tasks(node):
    """Every task mapping of a task file, blocks included."""
    if isinstance(node, list):
        for item in node:
            yield from _tasks(item)
    elif isinstance(node, dict):
        yield node
        for key in ("block", "rescue", "always"):
            yield from _tasks(node.get(key))


def _settings(path):
    """[(task name, value)] of every set_fact of the shared name in a task file."""
    with open(path) as handle:
        doc = yaml.safe_load(handle)
    out = []
    for task in _tasks(doc):
        for module in ("ansible.builtin.set_fact", "set_fact"):
            args = task.get(module)
            if isinstance(args, dict) and NAME in args:
                out.append((task.get("name"), args[NAME]))
    return out


def _task_files():
    return sorted(glob.glob(os.path.join(REPO, "roles", "*", "tasks", "*.yml")))


def check(path, role):
    """The contract's breaches in one task file of ``role``: [text]."""
    with open(path) as handle:
        text = handle.read()
    settings = _settings(path)
    bad = []
    # every place the name is given a value is one of the set_facts read above (no vars:, no register:)
    keyed = len(re.findall(r"^\s*(?:-\s+)?%s\s*:" % NAME, text, re.M)) + len(re.findall(r"register:\s*%s\b" % NAME, text))
    if keyed != len(settings):
        bad.append("%s: %s is set %d times, %d of them by set_fact" % (path, NAME, keyed, len(settings)))
    for task, value in settings:
        if role in EMPTIED and value == EMPTIED[role]:
            continue
        match = ONE_WAY.match(value.strip()) if isinstance(value, str) else None
        if not match:
            bad.append("%s (%s): %s must be set by reboot_requests_merge: %r" % (path, task, NAME, value))
        elif match.group("role") != role:
            bad.append("%s (%s): asks under the name %r, not its own %r" % (path, task, match.group("role"), role))
    return bad


def test_every_role_replaces_its_own_records_through_the_one_filter():
    bad, asking = [], set()
    for path in _task_files():
        role = path.split(os.sep)[-3]
        bad.extend(check(path, role))
        if any(isinstance(v, str) and ONE_WAY.match(v.strip()) for _t, v in _settings(path)):
            asking.add(role)
    assert bad == []
    # the roles that can ask (docs/roles.md section 3); one dropping out of the scan is a failure too
    assert asking == {"bios", "kernel", "kernel_cmdline", "tuning", "nvidia_driver", "ofed", "pcie", "firmware"}


def test_the_scan_catches_an_append_a_hand_filter_another_name_and_vars(tmp_path):
    cases = {
        "append": "          {{ gpufleet_reboot_requests | default([])\n"
                  "             + (__x.reboot_reasons | gpufleet.provision.reboot_requests('pcie')) }}",
        "hand": "          {{ (gpufleet_reboot_requests | default([]) | rejectattr('role', 'eq', 'pcie') | list)\n"
                "             + (__x.reboot_reasons | gpufleet.provision.reboot_requests('pcie')) }}",
        "other": "          {{ gpufleet_reboot_requests | default([]) | gpufleet.provision.reboot_requests_merge('kernel', r) }}",
        "merge then append": "          {{ gpufleet_reboot_requests | default([]) | gpufleet.provision.reboot_requests_merge('pcie', r)"
                             " + [] }}",
    }
    for what, value in cases.items():
        path = tmp_path / "main.yml"
        path.write_text("- name: Ask\n  block:\n    - name: Ask for the reboot\n      ansible.builtin.set_fact:\n"
                        "        gpufleet_reboot_requests: >-\n%s\n" % value)
        assert len(check(str(path), "pcie")) == 1, what
    path = tmp_path / "main.yml"
    path.write_text("- name: Summary\n  ansible.builtin.debug:\n    msg: hi\n  vars:\n    gpufleet_reboot_requests: []\n")
    assert check(str(path), "pcie") == ["%s: %s is set 1 times, 0 of them by set_fact" % (path, NAME)]
    path.write_text("- name: Ask\n  ansible.builtin.set_fact:\n    gpufleet_reboot_requests: >-\n"
                    "      {{ gpufleet_reboot_requests | default([]) | gpufleet.provision.reboot_requests_merge('pcie', __r) }}\n")
    assert check(str(path), "pcie") == []
