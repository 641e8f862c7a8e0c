# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the gate reads on the node besides the fact tree: installed packages, unit states and the
read-only command outputs, collected lazily, only when a check asks for them.

The checks stay pure: they read ``Inputs.packages``, ``Inputs.services`` and ``Inputs.outputs``
(framework.py). On the node these are the objects below, which run the command behind a value the
first time a check reads it, once, with a timeout; a check that is not evaluated (the role's
``checks`` subset, a profile that does not ask) costs nothing. A command that fails, is absent or
times out leaves the output unset with its cause in ``errors``: the checks that need it report
"no data" with that cause.

``run`` is injected (the module gives ``AnsibleModule.run_command`` under coreutils ``timeout``):
``run(argv) -> (rc, stdout, stderr)``. Nothing here imports Ansible.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.gpufleet.provision.plugins.module_utils._node import facts as _facts
from ansible_collections.gpufleet.provision.plugins.module_utils._desired import profile as _profile
from ansible_collections.gpufleet.provision.plugins.module_utils._node.fs import Root, WriteError, atomic_write
from ansible_collections.gpufleet.provision.plugins.module_utils._gate.probe_runs import SCRIPT_NAME

# Read-only commands whose output the checks read, by output name (the validate role's
# validate_commands defaults to this table). A name with ``{dev}`` stands for one output per device
# (``mlxconfig_0000:17:00.0``): the device goes into the command where ``{dev}`` is.
COMMANDS = {
    "nvidia_smi_q": ["nvidia-smi", "-q"],
    "ofed_info": ["ofed_info", "-s"],
    "modinfo_mlx5_core": ["modinfo", "-F", "vermagic", "mlx5_core"],
    "apt_mark_showhold": ["apt-mark", "showhold"],
    "dnf_versionlock": ["dnf", "versionlock", "list"],
    "kernel_log": ["journalctl", "-k", "-b", "0", "--no-pager", "-q", "-o", "short-monotonic"],
    "nvidia_smi_nvlink": ["nvidia-smi", "nvlink", "-s"],
    "mlxconfig_{dev}": ["mlxconfig", "-e", "-d", "{dev}", "q", "ATS_ENABLED"],
    "mlnx_qos_{dev}": ["mlnx_qos", "-i", "{dev}"],
    "nvme_smart_{dev}": ["nvme", "smart-log", "-o", "json", "/dev/{dev}"],
}
# What a device in an output name may be: a PCI address or a kernel device name, nothing a shell
# or a path could read otherwise.
_DEVICE = r"(?P<dev>[0-9A-Za-z][0-9A-Za-z:._-]*)"

# coreutils timeout: 124 when the command ran out of time, 125-127 when it could not be run.
TIMED_OUT = 124
NOT_RUN = (125, 126, 127)


def describe_failure(argv, rc, stdout, stderr, timeout, label=None):
    """The cause a check's reason carries for a command that gave no usable output (``label``
    names it instead of its argv)."""
    cmd = label or " ".join(argv)
    if rc == TIMED_OUT:
        return "%s: timed out after %s s" % (cmd, timeout)
    detail = (stderr or "").strip().splitlines() or (stdout or "").strip().splitlines()
    first = detail[0][:200] if detail else "no message"
    if rc in NOT_RUN:
        return "%s: command absent or not executable (%s)" % (cmd, first)
    return "%s: rc=%s, %s" % (cmd, rc, first)


class _Lazy:
    """A read-only mapping over ``get``: the checks use ``x[name]``, ``x.get(name)`` and ``name in x``."""

    def get(self, name, default=None):
        raise NotImplementedError

    def __getitem__(self, name):
        value = self.get(name)
        if value is None:
            raise KeyError(name)
        return value

    def __contains__(self, name):
        return self.get(name) is not None


class Outputs(_Lazy):
    """Command outputs by name, run on first read. ``given`` (recorded outputs) win; ``errors``
    (name -> cause) is filled for outputs that could not be collected, and may hold given causes."""

    def __init__(self, run, commands=None, given=None, errors=None, timeout=60, builtin=None, probes=None):
        """``builtin``: output name -> (argv, provider) for outputs read without running their
        command while the table names exactly that command (apt-mark showhold from the dpkg status
        already read); ``provider() -> (text, cause)``. ``probes``: output name -> (argv, timeout,
        label), the active probes (probe_runs.plan), each run under its own timeout."""
        self._run = run
        self._commands = dict(COMMANDS if commands is None else commands)
        self._given = dict(given or {})
        self.errors = errors if errors is not None else {}
        self._timeout = timeout
        self._done = {}
        self.ran = {}   # what was run: name -> "ok" or the cause (the module's ``collected``)
        self._builtin = builtin or {}
        self._probes = dict(probes or {})

    def argv(self, name):
        """The command behind an output name, or None for a name the table does not have."""
        if name in self._commands:
            return list(self._commands[name]) or None
        for key, argv in self._commands.items():
            if "{dev}" in key:
                match = re.match("^%s$" % re.escape(key).replace(re.escape("{dev}"), _DEVICE), name)
                if match and argv:
                    return [a.replace("{dev}", match.group("dev")) for a in argv]
        return None

    def get(self, name, default=None):
        if name in self._given:
            return self._given[name]
        if name not in self._done:
            self._done[name] = self._collect(name)
        value = self._done[name]
        return default if value is None else value

    def _collect(self, name):
        if name in self.errors:       # a cause given by the caller: not run again
            return None
        if name in self._probes:
            argv, timeout, label = self._probes[name]
            return self._ran(name, self._run(argv, timeout=timeout), argv, timeout, label)
        argv = self.argv(name)
        if argv is None:
            return None
        builtin = self._builtin.get(name)
        if builtin and builtin[0] == argv:
            text = builtin[1]()[0]   # without the text (rpm), the command runs
            if text is not None:
                self.ran[name] = "ok (read from the package database)"
                return text
        return self._ran(name, self._run(argv), argv, self._timeout)

    def _ran(self, name, answer, argv, timeout, label=None):
        rc, stdout, stderr = answer
        if rc == 0:
            self.ran[name] = "ok"
            return stdout
        self.errors[name] = describe_failure(argv, rc, stdout, stderr, timeout, label)
        self.ran[name] = self.errors[name]
        return None


def parse_dpkg_query(text):
    """``dpkg-query -W -f '${Package}\\t${Version}\\t${Architecture}\\t${db:Status-Abbrev}\\n'`` ->
    installed packages in ``package_facts`` form ({name: [{name, version, arch, source}]}).
    Rows whose status is not installed (``rc``, ``un``: config files left, unknown) are left out."""
    out = {}
    for line in text.splitlines():
        fields = line.split("\t")
        if len(fields) < 4:
            continue
        name, version, arch, status = fields[:4]
        if len(status) < 2 or status[1] not in "iWt":   # installed (t, W: triggers pending)
            continue
        out.setdefault(name, []).append({"name": name, "version": version, "arch": arch, "source": "apt"})
    return out


def parse_dpkg_holds(text):
    """The same dpkg-query output -> what ``apt-mark showhold`` prints: the packages whose selection
    is hold (first status letter ``h``), one per line, sorted. apt-mark reads the same dpkg status,
    at the cost of loading apt's whole cache (most of a second of CPU per node)."""
    names = sorted(set(f[0] for f in (line.split("\t") for line in text.splitlines())
                       if len(f) >= 4 and f[3][:1] == "h"))
    return "".join(n + "\n" for n in names)


def parse_rpm_query(text):
    """``rpm -qa --qf '%{NAME}\\t%{EPOCHNUM}\\t%{VERSION}\\t%{RELEASE}\\t%{ARCH}\\n'`` -> ``package_facts`` form."""
    out = {}
    for line in text.splitlines():
        fields = line.split("\t")
        if len(fields) < 5:
            continue
        name, epoch, version, release, arch = fields[:5]
        entry = {"name": name, "version": version, "release": release, "arch": arch, "source": "rpm",
                 "epoch": int(epoch) if epoch.isdecimal() and epoch != "0" else None}
        out.setdefault(name, []).append(entry)
    return out


DPKG_QUERY = ["dpkg-query", "-W", "-f", "${Package}\\t${Version}\\t${Architecture}\\t${db:Status-Abbrev}\\n"]
RPM_QUERY = ["rpm", "-qa", "--qf", "%{NAME}\\t%{EPOCHNUM}\\t%{VERSION}\\t%{RELEASE}\\t%{ARCH}\\n"]


class PackageDB:
    """The node's package database, read once (dpkg-query, else rpm) when a check first asks:
    ``packages()`` -> (packages, cause) for Inputs, ``holds()`` -> (apt-mark showhold text, cause).
    ``have(cmd)`` tells whether a command exists on the node."""

    def __init__(self, run, have):
        self._run, self._have = run, have
        self._read = None

    def _load(self):
        if self._read is None:
            self._read = self._query()
        return self._read

    def _query(self):
        for name, argv, parse in (("dpkg-query", DPKG_QUERY, parse_dpkg_query), ("rpm", RPM_QUERY, parse_rpm_query)):
            if not self._have(name):
                continue
            rc, stdout, stderr = self._run(argv)   # both tools expand \t and \n in their formats
            if rc != 0:
                return None, None, describe_failure(argv[:2], rc, stdout, stderr, None)
            return parse(stdout), (parse_dpkg_holds(stdout) if name == "dpkg-query" else None), None
        return None, None, "no package database found (neither dpkg-query nor rpm on the node)"

    def packages(self):
        packages, _holds, cause = self._load()
        return packages, cause

    def holds(self):
        _packages, holds, cause = self._load()
        return holds, cause or (None if holds is not None else "no dpkg database (rpm: dnf versionlock)")


def parse_systemctl_show(text):
    """``systemctl show -p Id,LoadState,ActiveState,SubState,UnitFileState <unit>...`` (records
    separated by blank lines) -> {unit: {name, state, status, source}} in ``service_facts`` form
    (state "running" or "stopped", status the unit file state, or "failed"). Units systemd does not
    know (LoadState=not-found) are left out."""
    out = {}
    for block in re.split(r"\n\s*\n", text.strip()):
        props = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
        name = props.get("Id")
        if not name or props.get("LoadState") == "not-found":
            continue
        state = "running" if props.get("SubState") == "running" else "stopped"
        status = "failed" if props.get("ActiveState") == "failed" else (props.get("UnitFileState") or "unknown")
        out[name] = {"name": name, "state": state, "status": status, "source": "systemd"}
    return out


class Services(_Lazy):
    """Unit states by name (``nvidia-fabricmanager`` or ``nvidia-fabricmanager.service``), read with
    one ``systemctl show`` per unit on first use. ``cause`` is set when systemd cannot be asked."""

    def __init__(self, run, systemd, cause=None):
        self._run = run
        self._systemd = systemd
        self.cause = cause
        self._known = {}

    def get(self, name, default=None):
        unit = name if "." in name else name + ".service"
        if unit not in self._known:
            self._known[unit] = self._show(unit)
        value = self._known[unit]
        return default if value is None else value

    def _show(self, unit):
        rc, stdout, stderr = self._run(["systemctl", "show", "-p", "Id,LoadState,ActiveState,SubState,UnitFileState",
                                        "--", unit])
        if rc != 0:
            self.cause = describe_failure(["systemctl", "show", unit], rc, stdout, stderr, None)
            return None
        return parse_systemctl_show(stdout).get(unit)


class PciDevices(_Lazy):
    """PCI devices by address (``0000:83:00.0``), each read through ``root`` the first time a check
    asks (the guest checks: the devices a guest plan names, a stand-in of any vendor too):
    _facts.locate_pci's record, None when no device has that address. ``problems``: what could not
    be read, recorded as the facts record theirs."""

    def __init__(self, root):
        self._fs = Root(root)
        self.problems = self._fs.problems
        self._known = {}

    def get(self, name, default=None):
        if name not in self._known:
            self._known[name] = _facts.locate_pci(self._fs, name)
        value = self._known[name]
        return default if value is None else value


def write_probe_script(text, folder):
    """The probe script the action sent, as a file in ``folder`` (the module's temporary folder,
    removed with it when the module exits) -> its path; None when none was sent. A folder that
    cannot take it is a ProfileError naming the path, never a traceback."""
    if not text or not folder:
        return None
    path = os.path.join(folder, SCRIPT_NAME)
    try:
        atomic_write(path, text)
    except WriteError as exc:
        raise _profile.ProfileError("probe script: %s" % exc)
    return path
