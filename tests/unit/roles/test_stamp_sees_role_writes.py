"""The converged stamp sees every file the washing machine's roles write (docs/roles.md section 6).

A converged re-run skips the roles when nothing the stamp watches moved: a file a role writes that
the stamp does not watch could be edited by hand and never put back. This test reads every task of
the roles playbooks/tasks/wash.yml runs, finds what each writes on the node (the path options of the
file modules and of the collection's writing modules, followed through the role's vars and set_facts
to the role variables and literal paths they come from, and the fixed paths of the modules that
write their own files), and fails naming the task when a path is not under the stamp's MANAGED list,
or comes from a role variable that provision.yml does not give the stamp (converged_paths).
"""
import os
import re

import pytest
import yaml

from ansible_collections.gpufleet.provision.plugins.module_utils._os import grub as _grub
from ansible_collections.gpufleet.provision.plugins.module_utils._os import stamp as _stamp
from ansible_collections.gpufleet.provision.plugins.module_utils._os import tuning as _tuning
from ansible_collections.gpufleet.provision.plugins.module_utils._os.driver_state import PEERMEM_AT_BOOT
from ansible_collections.gpufleet.provision.plugins.module_utils._roce import netconf as _netconf
from ansible_collections.gpufleet.provision.plugins.module_utils._roce import qos as _qos

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROLES = os.path.join(REPO, "roles")
# Roles of the wash that write no file on the node themselves (why).
NOT_WRITING = {"reboot": "reboots; runs the operator's drain and boot-id commands",
               "validate": "the gate: its reports go to the controller, and the stamp is the stamp"}

# Options whose value is a path the module writes on the node.
PATH_OPTIONS = {
    "copy": ["dest"], "template": ["dest"], "file": ["path"], "lineinfile": ["path"], "blockinfile": ["path"],
    "replace": ["path"], "get_url": ["dest"], "unarchive": ["dest"],
    "gpufleet.provision.pcie_acs": ["boot"], "gpufleet.provision.storage_mount": ["fstab"],
    "gpufleet.provision.driver_state": ["peermem_at_boot"], "gpufleet.provision.grub_default": ["grub_cfg"],
    "gpufleet.provision.kernel_cmdline": ["grub_cfg"],
}
# A path option's value when the task does not give it (the module's default); without one, an
# absent option writes nothing (driver_state without peermem_at_boot, pcie_acs without boot).
OPTION_DEFAULTS = {("gpufleet.provision.storage_mount", "fstab"): "/etc/fstab",
                   ("gpufleet.provision.kernel_cmdline", "grub_cfg"): "boot/grub/grub.cfg",
                   ("gpufleet.provision.grub_default", "grub_cfg"): "boot/grub/grub.cfg"}
# What a module writes at paths of its own (its constants, or the tool's files).
FIXED = {
    "gpufleet.provision.tuning": [_tuning.SYSCTL_FILE, _tuning.SCRIPT, _tuning.UNIT],
    "gpufleet.provision.roce_rails": [_qos.SCRIPT, _qos.UNIT, _netconf.NETPLAN_FILE, _netconf.IFUPDOWN_FILE],
    "gpufleet.provision.package_pins": ["etc/apt/preferences.d", "var/lib/dpkg/status",
                                        "etc/dnf/plugins/versionlock.list", "var/lib/rpm"],
    "gpufleet.provision.kernel_cmdline": ["etc/default/grub", _grub.DROPINS, "etc/kernel/cmdline", "boot/loader/entries"],
    "gpufleet.provision.grub_default": ["etc/default/grub", "boot/grub/grubenv"],
    "gpufleet.provision.driver_state": [PEERMEM_AT_BOOT],
    "package": ["var/lib/dpkg/status", "var/lib/rpm"],
    "systemd_service": ["etc/systemd/system"],
}
# Commands by their program: what it writes.
COMMANDS = {"grubby": ["boot/loader/entries", "boot/grub2/grubenv", "etc/kernel/cmdline"], "journalctl": [], "which": []}
# Modules that write no file on the node (device firmware and BMC settings are not files).
NO_FILES = {"assert", "debug", "fail", "set_fact", "include_tasks", "import_tasks", "include_role", "stat",
            "meta", "wait_for_connection", "reboot",
            "gpufleet.provision.node_facts", "gpufleet.provision.validate_node", "gpufleet.provision.firmware_flash",
            "gpufleet.provision.nic_config", "gpufleet.provision.redfish_power", "gpufleet.provision.redfish_bios"}
TASK_KEYS = {"name", "when", "register", "loop", "loop_control", "vars", "block", "rescue", "always", "tags",
             "delegate_to", "run_once", "become", "check_mode", "changed_when", "failed_when", "ignore_errors",
             "no_log", "notify", "until", "retries", "delay", "environment", "args", "listen", "diff"}
LITERAL = re.compile(r"(?:^|(?<=['\"\s\[(,]))/?(?:etc|usr|var|boot|lib|opt|srv|run|home|root)/[^'\"\s{}()\],]*")
NAME = re.compile(r"\b[A-Za-z_]\w*\b")


def _module(task):
    """The task's module, short for ansible.builtin ones (copy, file, ...), or None."""
    names = [k for k in task if k not in TASK_KEYS]
    if len(names) != 1:
        return None
    name = names[0]
    return name[len("ansible.builtin."):] if name.startswith("ansible.builtin.") else name


def _tasks(node, inherited=None):
    """Every task of a task file with the vars of its blocks: [(task, vars)]."""
    out = []
    if isinstance(node, list):
        for item in node:
            out.extend(_tasks(item, inherited))
    elif isinstance(node, dict):
        scope = dict(inherited or {}, **(node.get("vars") or {}))
        if any(k in node for k in ("block", "rescue", "always")):
            for key in ("block", "rescue", "always"):
                out.extend(_tasks(node.get(key), scope))
        else:
            out.append((node, scope))
    return out


def _load(path):
    with open(path) as handle:
        return yaml.safe_load(handle)


class Role:
    """A role's defaults, its internal definitions (vars/main.yml, set_facts, task and block vars)
    and its tasks."""

    def __init__(self, folder):
        self.name = os.path.basename(folder)
        self.defaults = _load(os.path.join(folder, "defaults", "main.yml")) if os.path.exists(
            os.path.join(folder, "defaults", "main.yml")) else {}
        self.defaults = self.defaults or {}
        self.defs = {}   # name -> [(value, task or None)]
        vars_file = os.path.join(folder, "vars", "main.yml")
        for key, value in ((_load(vars_file) or {}) if os.path.exists(vars_file) else {}).items():
            self.defs.setdefault(key, []).append((value, None))
        self.tasks = []
        for path in sorted(os.listdir(os.path.join(folder, "tasks"))):
            for task, scope in _tasks(_load(os.path.join(folder, "tasks", path))):
                self.tasks.append((path, task))
                for key, value in scope.items():
                    self.defs.setdefault(key, []).append((value, task))
                facts = task.get("ansible.builtin.set_fact") or task.get("set_fact")
                for key, value in (facts if isinstance(facts, dict) else {}).items():
                    self.defs.setdefault(key, []).append((value, task))

    def path_var(self, name):
        """True when ``name`` is one of the role's variables whose default is a path."""
        value = self.defaults.get(name)
        return isinstance(value, str) and "/" in value and "{{" not in value and not re.search(r"\s", value)

    def anchors(self, value, task, seen):
        """Where a written path comes from: {("var", name)} for the role variables, {("literal", path)}."""
        out = set()
        if isinstance(value, dict):
            # a record that names its path (pcie_acs boot files): only the path, not the content
            parts = [value["path"]] if "path" in value else list(value.values())
            for part in parts:
                out |= self.anchors(part, task, seen)
            return out
        if isinstance(value, list):
            for part in value:
                out |= self.anchors(part, task, seen)
            return out
        if not isinstance(value, str):
            return out
        out |= {("literal", m.group(0)) for m in LITERAL.finditer(value)}
        for expr in re.findall(r"\{\{(.*?)\}\}", value, re.S):
            for name in set(NAME.findall(re.sub(r"'[^']*'|\"[^\"]*\"", "", expr))):
                out |= self._follow(name, task, seen)
        return out

    def _follow(self, name, task, seen):
        if name == "item" and task is not None and "loop" in task and ("item", id(task)) not in seen:
            return self.anchors(task["loop"], task, seen | {("item", id(task))})
        if self.path_var(name):
            return {("var", name)}
        out = set()
        for value, where in self.defs.get(name, []) if name not in seen else []:
            out |= self.anchors(value, where, seen | {name})
        return out


def writes(role):
    """[(file, task name, module, anchors or fixed paths)] of every task of the role that writes, and
    [problem] for the tasks the test cannot classify."""
    found, unknown = [], []
    for path, task in role.tasks:
        if (task.get("delegate_to") or "") in ("localhost", "127.0.0.1"):
            continue  # the controller's own files (the firmware download cache)
        module = _module(task)
        args = task.get("ansible.builtin." + module if module and "." not in module else module) if module else None
        if module in ("command", "shell"):
            argv = (args or {}).get("argv") if isinstance(args, dict) else None
            program = argv[0] if argv else None
            if program not in COMMANDS:
                unknown.append("roles/%s/tasks/%s (%s): command %r: say in COMMANDS what it writes"
                               % (role.name, path, task.get("name"), program or args))
                continue
            if COMMANDS[program]:
                found.append((path, task.get("name"), module, {("literal", p) for p in COMMANDS[program]}))
            continue
        if module in FIXED:
            found.append((path, task.get("name"), module, {("literal", p) for p in FIXED[module]}))
        if module in PATH_OPTIONS:
            for option in PATH_OPTIONS[module]:
                given = args.get(option, OPTION_DEFAULTS.get((module, option))) if isinstance(args, dict) else None
                if given is not None:
                    found.append((path, task.get("name"), module, role.anchors(given, task, frozenset())))
        elif module not in FIXED and module not in NO_FILES:
            unknown.append("roles/%s/tasks/%s (%s): module %s: say whether it writes files on the node"
                           % (role.name, path, task.get("name"), module))
    return found, unknown


def sees(managed, path):
    """True when the stamp watching ``managed`` sees ``path`` (it, or a folder above it)."""
    rel = os.path.normpath(path.strip("/"))
    return any(rel == m or rel.startswith(m.rstrip("/") + "/") for m in managed)


def check(folder, managed, path_vars):
    """The stamp's blind spots for one role: [text naming the task and the path]."""
    role = Role(folder)
    found, problems = writes(role)
    for path, task, module, anchors in found:
        where = "roles/%s/tasks/%s (%s, %s)" % (role.name, path, task, module)
        if not anchors:
            problems.append("%s: writes a path this test cannot trace" % where)
        for kind, value in sorted(anchors):
            if kind == "literal" and not sees(managed, value):
                problems.append("%s: writes %s, which the stamp does not watch (stamp.MANAGED)" % (where, value))
            elif kind == "var" and value not in path_vars:
                problems.append("%s: writes under %s, a role variable provision.yml does not give the stamp"
                                " (__provision_path_var_names)" % (where, value))
            elif kind == "var" and not sees(managed, role.defaults[value]):
                problems.append("%s: writes under %s, whose default %s the stamp does not watch"
                                % (where, value, role.defaults[value]))
    return problems


def _wash_roles():
    with open(os.path.join(REPO, "playbooks", "tasks", "wash.yml")) as handle:
        names = re.findall(r"name: gpufleet\.provision\.(\w+)", handle.read())
    return sorted(set(names) - set(NOT_WRITING))


def _provision_path_vars():
    plays = _load(os.path.join(REPO, "playbooks", "provision.yml"))
    return plays[0]["vars"]["__provision_path_var_names"]


def test_the_wash_is_scanned():
    assert {"kernel", "kernel_cmdline", "tuning", "nvidia_driver", "ofed", "pcie", "roce", "storage",
            "firmware"} <= set(_wash_roles())


@pytest.mark.parametrize("role", _wash_roles())
def test_the_stamp_sees_every_file_the_role_writes(role):
    assert check(os.path.join(ROLES, role), _stamp.MANAGED, _provision_path_vars()) == []


def test_the_files_role_variables_move_are_given_to_the_stamp():
    """Every path variable named in provision.yml is one a role writes under (no stale names), and
    the play computes the list the validate role passes as converged_paths."""
    used = set()
    for role in _wash_roles():
        for _path, _task, _module, anchors in writes(Role(os.path.join(ROLES, role)))[0]:
            used |= {value for kind, value in anchors if kind == "var"}
    assert sorted(used) == sorted(_provision_path_vars()) == sorted(
        ["kernel_grub_cfg", "pcie_lib_dir", "pcie_config_file", "storage_fstab", "firmware_node_dir"])
    play_vars = _load(os.path.join(REPO, "playbooks", "provision.yml"))[0]["vars"]
    assert "__provision_path_var_names" in play_vars["validate_converged_paths"]
    with open(os.path.join(ROLES, "validate", "tasks", "main.yml")) as handle:
        assert 'converged_paths: "{{ validate_converged_paths }}"' in handle.read()


def test_the_scan_finds_what_a_role_writes_outside_the_stamp(tmp_path):
    folder = tmp_path / "site"
    (folder / "tasks").mkdir(parents=True)
    (folder / "defaults").mkdir()
    (folder / "defaults" / "main.yml").write_text("site_dir: /opt/site\nsite_mode: '0644'\n")
    (folder / "vars").mkdir()
    (folder / "vars" / "main.yml").write_text("__site_files:\n  - path: \"{{ site_dir }}/a.conf\"\n    content: x\n")
    (folder / "tasks" / "main.yml").write_text(
        "- name: Seen\n  ansible.builtin.copy:\n    content: x\n    dest: /etc/sysctl.d/99-site.conf\n    mode: '0644'\n"
        "- name: Blind\n  ansible.builtin.template:\n    src: a.j2\n    dest: /usr/local/bin/site-tool\n    mode: '0755'\n"
        "- name: Moved\n  block:\n    - name: Through a fact\n      ansible.builtin.set_fact:\n"
        "        __site_target: \"{{ site_dir ~ '/b.conf' }}\"\n"
        "    - name: Written there\n      ansible.builtin.file:\n        path: \"{{ item }}\"\n        state: touch\n"
        "        mode: '0644'\n      loop: [\"{{ __site_target }}\"]\n"
        "- name: Unknown\n  community.general.ini_file:\n    path: /etc/x.ini\n"
        "- name: On the controller\n  ansible.builtin.copy:\n    content: x\n    dest: /tmp/cache\n    mode: '0644'\n"
        "  delegate_to: localhost\n")
    problems = check(str(folder), _stamp.MANAGED, [])
    assert problems == [
        "roles/site/tasks/main.yml (Unknown): module community.general.ini_file: say whether it writes files on the node",
        "roles/site/tasks/main.yml (Blind, template): writes /usr/local/bin/site-tool, which the stamp does not watch"
        " (stamp.MANAGED)",
        "roles/site/tasks/main.yml (Written there, file): writes under site_dir, a role variable provision.yml does not"
        " give the stamp (__provision_path_var_names)",
    ]
    # given to the stamp, the variable's default must be watched too
    assert check(str(folder), _stamp.MANAGED + ("opt/site",), ["site_dir"]) == problems[:2]


def test_managed_paths_adds_the_moved_paths_once_and_refuses_what_is_not_a_path():
    assert _stamp.managed_paths() == _stamp.MANAGED
    assert _stamp.managed_paths(["/opt/gpufleet-pcie", "opt/gpufleet-pcie/", "/etc/fstab", "boot/grub/grub.cfg"]) \
        == _stamp.MANAGED + ("opt/gpufleet-pcie",)
    for bad in ["", "/", "  ", ".", "/opt/../etc", "../x", 5, None]:
        with pytest.raises(ValueError, match="converged_paths: .* is not a path under the OS root"):
            _stamp.managed_paths([bad])
    with pytest.raises(ValueError, match="must be a list of paths"):
        _stamp.managed_paths("/opt/x")


def test_a_file_under_a_moved_path_changes_the_stamp(tmp_path):
    """pcie_lib_dir moved to /opt/pcie: an edit there is a change for the stamp given it, and only then."""
    lib = tmp_path / "opt" / "pcie"
    lib.mkdir(parents=True)
    (lib / "gpufleet-pcie-acs").write_text("one\n")
    moved = _stamp.managed_paths(["/opt/pcie"])
    before = _stamp.state("sha256:d", str(tmp_path), str(tmp_path), None, moved)
    plain = _stamp.state("sha256:d", str(tmp_path), str(tmp_path), None)
    (lib / "gpufleet-pcie-acs").write_text("edited by hand\n")
    assert _stamp.differences(before, _stamp.state("sha256:d", str(tmp_path), str(tmp_path), None, moved)) == [
        "files provisioning manages changed since the last green run", "boot id or kernel release unreadable"]
    assert plain["files"] == _stamp.state("sha256:d", str(tmp_path), str(tmp_path), None)["files"]
