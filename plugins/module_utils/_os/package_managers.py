# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""apt and dnf backends of package_pins: read the state with one call per command, apply a plan.

``run(argv, env=None) -> (rc, stdout, stderr)`` is the only way out (``AnsibleModule.run_command`` in
the module), so the backends hold no rules: those are the pure functions of ``packages``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gpufleet.provision.plugins.module_utils._node.fs import Root, WriteError, atomic_write, unwritable
from ansible_collections.gpufleet.provision.plugins.module_utils._os import packages as P
from ansible_collections.gpufleet.provision.plugins.module_utils._os.packages import PinError

APT_ENV = {"DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C", "LANG": "C"}
APT_INSTALL = ["apt-get", "install", "-y", "-q", "--allow-downgrades",
               "-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold"]


class _Backend(object):
    name = None

    def __init__(self, run):
        self._run = run

    def _call(self, argv, what, ok=(0,), env=None):
        rc, out, err = self._run(argv, env=env)
        if rc not in ok:
            raise PinError("%s failed (%s, exit %d): %s" % (what, " ".join(argv), rc, (err or out).strip()[-1500:]),
                           rc=rc, stdout=out, stderr=err)
        return out


class Apt(_Backend):
    """Debian/Ubuntu: madison/showpkg for what the repositories offer, dpkg-query and apt-mark for the
    node, apt preferences + apt-mark hold for the pins."""
    name = "apt"

    def __init__(self, run, preferences_dir="/etc/apt/preferences.d"):
        super(Apt, self).__init__(run)
        self.preferences_dir = preferences_dir

    def update(self):
        self._call(["apt-get", "update", "-q"], "apt-get update", env=APT_ENV)

    def offered(self, names):
        offered = P.parse_madison(self._call(["apt-cache", "madison"] + list(names), "apt-cache madison", env=APT_ENV))
        providers = {}
        for name in names:
            if not offered.get(name):
                text = self._call(["apt-cache", "showpkg", name], "apt-cache showpkg", env=APT_ENV)
                found = P.parse_reverse_provides(text)
                if found:
                    providers[name] = found
        return offered, providers

    def installed(self):
        return P.parse_dpkg_query(self._call(["dpkg-query", "-W", "-f=" + P.DPKG_QUERY_FORMAT], "dpkg-query",
                                             ok=(0, 1), env=APT_ENV))

    def held(self):
        return P.parse_showhold(self._call(["apt-mark", "showhold"], "apt-mark showhold", env=APT_ENV))

    def preferences_path(self, set_name):
        return os.path.join(self.preferences_dir, "%s.pref" % set_name)

    def check(self, set_name):
        """Before anything is read or run: the preferences folder is a folder (or absent)."""
        folder = self.preferences_dir
        if not isinstance(folder, str) or not folder or "\x00" in folder:
            raise PinError("preferences_dir %r: not a folder path" % (folder,))
        problem = unwritable(os.path.join(folder, "x"))
        if problem:
            raise PinError("preferences_dir %s: %s" % (folder, problem))
        P.check_set_name(set_name)

    def preferences(self, set_name, resolved):
        """(current content or None, wanted content). PinError naming the file when it is there but
        not a readable regular text file (a folder, a FIFO, binary): it is never overwritten then."""
        root = Root(self.preferences_dir)
        name = "%s.pref" % set_name
        data = root.read_bytes(name, optional=True)
        if root.problems:
            raise PinError("%s: %s" % (self.preferences_path(set_name), root.problems[0]["detail"]))
        try:
            current = None if data is None else data.decode("utf-8")
        except UnicodeDecodeError:
            raise PinError("%s: not UTF-8 text (not an apt preferences file): not overwritten" % self.preferences_path(set_name))
        if current is not None and "\x00" in current:
            raise PinError("%s: binary content (a NUL byte): not overwritten" % self.preferences_path(set_name))
        return current, P.preferences_text(set_name, resolved)

    @staticmethod
    def _transaction(plan):
        return ["%s=%s" % (n, v) for n, v, _old in plan["install"]] + ["%s-" % n for n in plan["remove"]]

    def simulate(self, plan):
        """apt's own prediction of the transaction (dependency-driven changes included)."""
        args = self._transaction(plan)
        if not args:
            return {"install": [], "remove": []}
        argv = ["apt-get", "-s", "-q", "--allow-downgrades", "--allow-change-held-packages", "install"] + args
        rc, out, err = self._run(argv, env=APT_ENV)
        if rc != 0:
            raise PinError("apt-get would fail on %s: %s" % (" ".join(args), (err or out).strip()[-1500:]),
                           rc=rc, stdout=out, stderr=err)
        return P.parse_apt_simulation(out)

    def apply(self, plan, set_name, resolved):
        # the preferences file first: when it cannot be written, nothing else has changed
        if plan["preferences"]:
            path = self.preferences_path(set_name)
            try:
                os.makedirs(self.preferences_dir, exist_ok=True)
                atomic_write(path, plan["preferences"][1], mode=0o644)
            except (OSError, WriteError) as exc:
                raise PinError(str(exc) if isinstance(exc, WriteError) else
                               "%s: cannot make the folder (%s)" % (self.preferences_dir, exc.strerror or exc))
        if plan["unhold"]:
            self._call(["apt-mark", "unhold"] + plan["unhold"], "apt-mark unhold", env=APT_ENV)
        out = ""
        args = self._transaction(plan)
        if args:
            out = self._call(APT_INSTALL + args, "apt-get install", env=APT_ENV)
        if plan["hold"]:
            self._call(["apt-mark", "hold"] + plan["hold"], "apt-mark hold", env=APT_ENV)
        return out


class Dnf(_Backend):
    """RHEL family: dnf list --showduplicates / repoquery --whatprovides, rpm -qa, dnf versionlock."""
    name = "dnf"

    def update(self):
        self._call(["dnf", "makecache", "-q"], "dnf makecache")

    def offered(self, names):
        rc, out, _err = self._run(["dnf", "list", "--showduplicates", "-q"] + list(names))
        listed = P.parse_dnf_list(out if rc in (0, 1) else "")
        offered = {}
        for section in ("available", "installed"):
            for name, versions in listed[section].items():
                offered.setdefault(name, [])
                offered[name] += [v for v in versions if v not in offered[name]]
        providers = {}
        for name in names:
            if not offered.get(name):
                text = self._call(["dnf", "repoquery", "-q", "--whatprovides", name,
                                   "--qf", "%{name} %{epoch}:%{version}-%{release}"], "dnf repoquery")
                found = [(f[0], f[1][2:] if f[1].startswith("0:") else f[1])
                         for f in (line.split() for line in text.splitlines()) if len(f) == 2]
                if found:
                    providers[name] = found
        return offered, providers

    def installed(self):
        return P.parse_rpm_query(self._call(["rpm", "-qa", "--qf", P.RPM_QUERY_FORMAT], "rpm -qa"))

    def held(self):
        return set(P.parse_versionlock(self._call(["dnf", "versionlock", "list", "-q"], "dnf versionlock list")))

    def check(self, set_name):
        P.check_set_name(set_name)

    def preferences(self, set_name, resolved):
        return None, None

    def simulate(self, plan):
        return None

    def apply(self, plan, set_name, resolved):
        if plan["unhold"]:
            self._call(["dnf", "versionlock", "delete"] + plan["unhold"], "dnf versionlock delete")
        if plan["remove"]:
            self._call(["dnf", "-y", "remove"] + plan["remove"], "dnf remove")
        out = ""
        if plan["install"]:
            out = self._call(["dnf", "-y", "install", "--allowerasing"] + ["%s-%s" % (n, v) for n, v, _old in plan["install"]],
                             "dnf install")
        if plan["hold"]:
            versions = dict((r["name"], r["version"]) for r in resolved)
            self._call(["dnf", "versionlock", "add"] + ["%s-%s" % (n, versions[n]) for n in plan["hold"]],
                       "dnf versionlock add")
        return out


def converge(backend, pins, state, set_name, check_mode, update_cache=False):
    """Resolve (and for ``state=present`` apply) ``pins``. Returns the module result (no ``failed``)."""
    pins = P.normalize_pins(pins)
    backend.check(set_name)
    if update_cache and not check_mode:
        backend.update()
    names = [p["name"] for p in pins]
    offered, providers = backend.offered(names) if names else ({}, {})
    installed = backend.installed()
    resolved = P.resolve(pins, offered, providers, installed)
    result = {"changed": False, "manager": backend.name, "resolved": resolved,
              "offered": dict((n, offered.get(n) or ["%s %s" % pv for pv in providers.get(n, [])]) for n in names)}
    if state == "resolved":
        result["msg"] = "resolved: " + (", ".join("%s=%s" % (r["name"], r["version"]) for r in resolved) or "nothing pinned")
        return result
    held = backend.held()
    current_prefs, wanted_prefs = backend.preferences(set_name, resolved)
    todo = P.plan(resolved, installed, held, current_prefs, wanted_prefs)
    names_shown = sorted(set(r["name"] for r in resolved) | set(todo["remove"]))
    after_installed = dict(installed)
    after_installed.update((n, v) for n, v, _old in todo["install"])
    for name in todo["remove"]:
        after_installed.pop(name, None)
    after_held = (held - set(todo["unhold"]) - set(todo["remove"])) | set(todo["hold"])
    result.update(changed=P.plan_changes(todo), plan=dict(todo, preferences=bool(todo["preferences"])),
                  changes=P.describe(todo))
    result["diff"] = {"before_header": "packages (set %s)" % set_name, "after_header": "packages (set %s)" % set_name,
                      "before": P.state_text(names_shown, installed, held),
                      "after": P.state_text(names_shown, after_installed, after_held)}
    if todo["preferences"]:
        result["diff"]["before"] += "\n" + (todo["preferences"][0] or "(no preferences file)\n")
        result["diff"]["after"] += "\n" + todo["preferences"][1]
    if check_mode:
        if todo["install"] or todo["remove"]:
            result["simulation"] = backend.simulate(todo)
    elif result["changed"]:
        backend.apply(todo, set_name, resolved)
        # what the node has now, read back: a pin apt did not honour fails here, not at the gate
        now = backend.installed()
        wrong = ["%s is %s, pinned %s" % (r["name"], now.get(r["name"]) or "not installed", r["version"])
                 for r in resolved if now.get(r["name"]) != r["version"]]
        wrong += ["%s still installed (replaced)" % n for n in todo["remove"] if n in now]
        if wrong:
            raise PinError("after the transaction: " + "; ".join(wrong), **result)
    result["msg"] = ("; ".join(result["changes"]) if result["changed"] else "all pinned and held")
    return result
