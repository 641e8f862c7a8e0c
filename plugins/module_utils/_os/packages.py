# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Package pins: resolve, install exactly, hold (docs/roles.md section 5).

Three layers, so the rules are unit-tested on real outputs and the commands stay thin:

1. pure parsers (text in, data out): ``apt-cache madison``/``policy``/``showpkg``, ``apt-mark
   showhold``, ``dpkg-query``, ``apt-get -s``, ``dnf list --showduplicates``, ``dnf versionlock list``,
   ``rpm -qa``;
2. pure rules: ``resolve()`` (a requested exact or upstream version against what the repository
   offers, through providers of a virtual name) and ``plan()`` (installs, removals, holds, unholds,
   the apt preferences file) from current state;
3. backends (``Apt``, ``Dnf``) that read the state with one call per command and apply a plan.

Every error is a ``PinError`` whose message names the package and what the repository offers.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch
import re


class PinError(Exception):
    """A pin cannot be resolved or applied; ``result`` carries what is known (resolved, plan, output)."""

    def __init__(self, msg, **result):
        super(PinError, self).__init__(msg)
        self.result = result


# ---- versions -------------------------------------------------------------------------------

def strip_epoch(version):
    """``3:550.90.07-1.el9`` -> ``550.90.07-1.el9``."""
    head, sep, tail = version.partition(":")
    return tail if sep and head.isdigit() else version


def upstream(version):
    """The upstream part of a Debian or RPM version: no epoch, no revision/release.

    ``550.90.07-0ubuntu0.22.04.1`` -> ``550.90.07``; ``3:550.90.07-1.el9`` -> ``550.90.07``;
    ``580.65.06-1`` -> ``580.65.06``; ``2.5.0`` -> ``2.5.0`` (a native package has no revision).
    """
    return strip_epoch(version).rsplit("-", 1)[0]


def matches(requested, version):
    """True when ``version`` (from a repository) satisfies ``requested``: the same exact version (with
    or without epoch) or the same upstream version with any revision (Ubuntu's ``-0ubuntu0.22.04.1``,
    CUDA's ``-1``), or a shell pattern (``23.10.OFED.23.10.1.1.9.*``) matching the whole version.
    ``None`` requested matches anything."""
    if requested is None:
        return True
    if "*" in requested or "?" in requested:
        return fnmatch.fnmatchcase(version, requested) or fnmatch.fnmatchcase(strip_epoch(version), requested)
    return requested in (version, strip_epoch(version), upstream(version))


def _order(char):
    if char == "~":
        return -1
    if char.isalpha():
        return ord(char)
    return ord(char) + 256 if char else 0


def _compare_part(a, b):
    """dpkg's comparison of an upstream version or revision (``verrevcmp``)."""
    i = j = 0
    while i < len(a) or j < len(b):
        first_diff = 0
        while (i < len(a) and not a[i].isdigit()) or (j < len(b) and not b[j].isdigit()):
            ac = _order(a[i]) if i < len(a) else 0
            bc = _order(b[j]) if j < len(b) else 0
            if ac != bc:
                return ac - bc
            i += 1
            j += 1
        while i < len(a) and a[i] == "0":
            i += 1
        while j < len(b) and b[j] == "0":
            j += 1
        while i < len(a) and a[i].isdigit() and j < len(b) and b[j].isdigit():
            if not first_diff:
                first_diff = ord(a[i]) - ord(b[j])
            i += 1
            j += 1
        if i < len(a) and a[i].isdigit():
            return 1
        if j < len(b) and b[j].isdigit():
            return -1
        if first_diff:
            return first_diff
    return 0


def compare_versions(a, b):
    """Negative, zero or positive as Debian version ``a`` sorts before, equal to or after ``b`` (the
    dpkg algorithm: epoch, upstream, revision; ``~`` before everything). Good enough for RPM EVRs of
    the same package, which is all it orders here."""
    def split(v):
        epoch, sep, rest = v.partition(":")
        if not sep or not epoch.isdigit():
            epoch, rest = "0", v
        up, sep, rev = rest.rpartition("-")
        return int(epoch), (up if sep else rest), (rev if sep else "")
    ea, ua, ra = split(a)
    eb, ub, rb = split(b)
    if ea != eb:
        return ea - eb
    return _compare_part(ua, ub) or _compare_part(ra, rb)


def _newest_first(versions):
    out = []
    for version in versions:
        pos = 0
        while pos < len(out) and compare_versions(out[pos], version) > 0:
            pos += 1
        if version not in out:
            out.insert(pos, version)
    return out


# ---- parsers: apt ------------------------------------------------------------------------------

def parse_madison(text):
    """``apt-cache madison NAME...`` -> {name: [version, ...]} in the order apt lists them (newest first).

    Sample (one line per version and source; a virtual name gives no line at all)::

        nvidia-driver-550-server | 550.90.07-0ubuntu0.22.04.1 | http://archive.ubuntu.com/ubuntu jammy-updates/restricted amd64 Packages
               apt |      2.6.2 | http://deb.debian.org/debian-security bookworm-security/main amd64 Packages
    """
    out = {}
    for line in text.splitlines():
        fields = [f.strip() for f in line.split("|")]
        if len(fields) < 3 or not fields[0] or not fields[1]:
            continue
        # source packages are listed as "Sources"; only binary packages are installable
        if fields[2].endswith(" Sources"):
            continue
        versions = out.setdefault(fields[0], [])
        if fields[1] not in versions:
            versions.append(fields[1])
    return out


def parse_policy(text):
    """``apt-cache policy NAME...`` -> {name: {installed, candidate, versions: [{version, priority,
    sources, installed}]}}. ``(none)`` becomes ``None``; a name apt does not know at all gives no entry.

    Sample::

        apt:
          Installed: 2.6.1
          Candidate: 2.6.2
          Version table:
             2.6.2 500
                500 http://deb.debian.org/debian-security bookworm-security/main amd64 Packages
         *** 2.6.1 500
                500 http://deb.debian.org/debian bookworm/main amd64 Packages
                100 /var/lib/dpkg/status
    """
    out, current, version = {}, None, None
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line.startswith(" ") and line.rstrip().endswith(":"):
            current = {"installed": None, "candidate": None, "versions": []}
            out[line.strip()[:-1]] = current
            version = None
            continue
        if current is None:
            continue
        stripped = line.strip()
        key, sep, value = stripped.partition(":")
        if sep and key in ("Installed", "Candidate"):
            value = value.strip()
            current[key.lower()] = None if value == "(none)" else value
            continue
        if stripped == "Version table:" or stripped.startswith("Package pin:"):
            continue
        match = re.match(r"^(\*\*\*\s+)?(\S+)\s+(-?\d+)$", stripped)
        if match:
            version = {"version": match.group(2), "priority": int(match.group(3)), "sources": [],
                       "installed": bool(match.group(1))}
            current["versions"].append(version)
            continue
        match = re.match(r"^(-?\d+)\s+(.+)$", stripped)
        if match and version is not None:
            version["sources"].append(match.group(2).strip())
    return out


def parse_reverse_provides(text):
    """``apt-cache showpkg NAME`` -> [(package, version)] of its ``Reverse Provides:`` section: the
    real packages that provide NAME (R580: ``nvidia-fabricmanager-580`` is provided by
    ``nvidia-fabricmanager 580.65.06-1``).

    Sample::

        Package: mail-transport-agent
        Versions:

        Reverse Depends:
          mutt,mail-transport-agent
        Dependencies:
        Provides:
        Reverse Provides:
        exim4-daemon-light 4.96-15+deb12u11 (= )
        postfix 3.7.11-0+deb12u1 (= )
    """
    out, inside = [], False
    for line in text.splitlines():
        if line.startswith("Reverse Provides:"):
            inside = True
            continue
        if not inside:
            continue
        if re.match(r"^[A-Z][\w -]*:", line):
            break
        fields = line.split()
        if len(fields) >= 2 and (fields[0], fields[1]) not in out:
            out.append((fields[0], fields[1]))
    return out


def parse_showhold(text):
    """``apt-mark showhold`` -> set of package names (one a line, ``:amd64`` arch suffixes removed)."""
    return set(line.strip().split(":")[0] for line in text.splitlines() if line.strip())


DPKG_QUERY_FORMAT = "${Package}\\t${Version}\\t${db:Status-Abbrev}\\n"


def parse_dpkg_query(text):
    """``dpkg-query -W -f='${Package}\\t${Version}\\t${db:Status-Abbrev}\\n'`` -> {name: version} of the
    installed packages (status ``ii``, ``hi`` or half-configured ``iF``/``iU``; ``rc`` removed ones are not
    installed). Sample: ``nvidia-driver-550-server\\t550.90.07-0ubuntu0.22.04.1\\thi ``."""
    out = {}
    for line in text.splitlines():
        fields = line.split("\t")
        if len(fields) < 3 or not fields[0]:
            continue
        status = fields[2].strip()
        if len(status) >= 2 and status[1] in "iUF" and fields[1]:
            out[fields[0].split(":")[0]] = fields[1]
    return out


def parse_apt_simulation(text):
    """``apt-get -s install ...`` -> {"install": [(name, version, old or None)], "remove": [(name, version)]}.

    Sample::

        Remv nvidia-fabricmanager-535 [535.183.01-0ubuntu0.22.04.1]
        Inst nvidia-driver-550-server (550.90.07-0ubuntu0.22.04.1 Ubuntu:22.04/jammy-updates [amd64])
        Inst nvidia-fabricmanager-550 [550.54.15-0ubuntu0.22.04.1] (550.90.07-0ubuntu0.22.04.1 Ubuntu:22.04/jammy-updates [amd64])
        Conf nvidia-driver-550-server (550.90.07-0ubuntu0.22.04.1 Ubuntu:22.04/jammy-updates [amd64])
    """
    install, remove = [], []
    for line in text.splitlines():
        match = re.match(r"^Inst (\S+) (?:\[(\S+)\] )?\((\S+)", line)
        if match:
            install.append((match.group(1), match.group(3), match.group(2)))
            continue
        match = re.match(r"^(?:Remv|Purg) (\S+)(?: \[(\S+)\])?", line)
        if match:
            remove.append((match.group(1), match.group(2)))
    return {"install": install, "remove": remove}


# ---- parsers: dnf / rpm -------------------------------------------------------------------------

def parse_dnf_list(text):
    """``dnf list --showduplicates NAME...`` -> {"installed": {name: [evr]}, "available": {name: [evr]}}.

    The arch suffix is dropped (``nvidia-driver.x86_64`` -> ``nvidia-driver``); a long name that dnf
    wraps onto its own line is joined with the next line. Sample::

        Installed Packages
        nvidia-fabric-manager.x86_64          3:550.90.07-1         @cuda-rhel9-x86_64
        Available Packages
        nvidia-fabric-manager.x86_64          495.29.05-1           cuda-rhel8-x86_64
    """
    out = {"installed": {}, "available": {}}
    section, pending = None, None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped in ("Installed Packages", "Installed packages"):
            section, pending = "installed", None
            continue
        if stripped in ("Available Packages", "Available packages"):
            section, pending = "available", None
            continue
        if section is None or not stripped:
            continue
        fields = stripped.split()
        if pending is not None:
            fields = [pending] + fields
            pending = None
        if len(fields) == 1 and "." in fields[0]:
            pending = fields[0]
            continue
        if len(fields) < 3 or "." not in fields[0]:
            continue
        name = fields[0].rsplit(".", 1)[0]
        versions = out[section].setdefault(name, [])
        if fields[1] not in versions:
            versions.append(fields[1])
    return out


def parse_versionlock(text):
    """``dnf versionlock list`` -> {name: evr pattern}: ``nvidia-driver-3:550.90.07-1.el9.*`` ->
    ``{"nvidia-driver": "3:550.90.07-1.el9.*"}`` (name-[epoch:]version-release[.arch]). Other lines
    (``Last metadata expiration check: ...``) are skipped."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        parts = line.rsplit("-", 2)
        if len(parts) == 3 and parts[0] and " " not in line and re.match(r"^(\d+:)?[0-9][\w.+~]*$", parts[1]):
            out[parts[0]] = parts[1] + "-" + parts[2]
    return out


RPM_QUERY_FORMAT = "%{NAME}\\t%{EPOCHNUM}:%{VERSION}-%{RELEASE}\\n"


def parse_rpm_query(text):
    """``rpm -qa --qf '%{NAME}\\t%{EPOCHNUM}:%{VERSION}-%{RELEASE}\\n'`` -> {name: evr} (``0:`` epochs dropped)."""
    out = {}
    for line in text.splitlines():
        fields = line.split("\t")
        if len(fields) == 2 and fields[0]:
            evr = fields[1].strip()
            out[fields[0]] = evr[2:] if evr.startswith("0:") else evr
    return out


# ---- rules ----------------------------------------------------------------------------------

# What reaches apt's and dnf's argv and the apt preferences file (``Package: <name>``, ``Pin: version
# <version>``): one word each, so nothing can add a line to the file or an option to a command.
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9+._:-]{0,127}\Z")
_VERSION = re.compile(r"^[A-Za-z0-9.+~:_^*?\[\]-]{1,128}\Z")
_PATTERN = re.compile(r"^[A-Za-z0-9+._:*?\[\]!-]{1,128}\Z")
# apt reads a preferences.d file only when its name is letters, digits, '_', '-' and '.' (apt_preferences(5)).
_SET_NAME = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}\Z")


def check_set_name(set_name):
    """Raise PinError unless ``set_name`` can name the preferences file ``<set_name>.pref``."""
    if not isinstance(set_name, str) or not _SET_NAME.match(set_name):
        raise PinError("set_name %r: not a pin set name (1 to 100 letters, digits, '_', '-', '.', not starting with '.'; "
                       "it names the apt preferences file <set_name>.pref)" % (set_name,))
    return set_name


def _word(value, pattern, where, what):
    if not isinstance(value, str) or not pattern.match(value):
        raise PinError("%s %r: not %s" % (where, value, what))
    return value


def normalize_pins(pins):
    """Check the pins' shape and words; returns [{name, version, replaces}] (names unique). PinError
    names the pin and the value: a name or version with a blank, a newline or a character no package
    name or version has would add a line to the apt preferences file or an argument to a command."""
    out, seen = [], set()
    if not isinstance(pins, list):
        raise PinError("pins %r: not a list of {name, version, replaces}" % (pins,))
    for index, pin in enumerate(pins):
        if not isinstance(pin, dict) or not pin.get("name"):
            raise PinError("pins[%d]: a mapping with a name is required, got %r" % (index, pin))
        name = _word(pin["name"], _NAME, "pins[%d].name" % index,
                     "a package name (letters, digits, '+', '.', '_', ':', '-')")
        if name in seen:
            raise PinError("pins[%d]: %s listed twice" % (index, name))
        seen.add(name)
        version = pin.get("version")
        if version not in (None, ""):
            version = _word(str(version) if isinstance(version, (int, float)) and not isinstance(version, bool) else version,
                            _VERSION, "pins[%d] (%s).version" % (index, name),
                            "a package version (letters, digits, '.', '+', '~', ':', '_', '^', '-', patterns *?[])")
        replaces = pin.get("replaces") or []
        if not isinstance(replaces, list):
            raise PinError("pins[%d] (%s).replaces %r: not a list of patterns" % (index, name, replaces))
        for pattern in replaces:
            _word(pattern, _PATTERN, "pins[%d] (%s).replaces" % (index, name), "a package name pattern")
        out.append({"name": name, "version": None if version in (None, "") else version, "replaces": list(replaces)})
    return out


def resolve(pins, offered, providers, installed):
    """Resolve every pin against the repositories; raise one PinError naming each pin that fails.

    ``offered``: {name: [versions the repositories have]}; ``providers``: {name: [(package, version)]}
    for names the repositories only know as virtual; ``installed``: {name: version}. A pin resolves to
    the installed version when that satisfies it (no churn between revisions), else to the newest
    matching repository version; a name no package has is looked up among its providers (only a
    single providing package is accepted). Returns [{requested, name, version, via, installed}].
    """
    resolved, errors = [], []
    for pin in pins:
        name, want = pin["name"], pin["version"]
        candidates = [(name, v) for v in offered.get(name) or []]
        via = "name"
        if not candidates and providers.get(name):
            candidates = list(providers[name])
            via = "provides"
        if not candidates:
            errors.append("%s: not in the repositories (no package has or provides this name)" % name)
            continue
        fitting = [(n, v) for n, v in candidates if matches(want, v)]
        packages = sorted(set(n for n, _v in fitting))
        if len(packages) > 1:
            errors.append("%s %s: provided by several packages (%s): pin one of them by name"
                          % (name, want, ", ".join(packages)))
            continue
        current = installed.get(packages[0]) if packages else None
        if current is not None and matches(want, current):
            pick = current
        else:
            pick = _newest_first([v for _n, v in fitting])[0] if fitting else None
        if pick is None:
            offer = ", ".join("%s %s" % (n, v) if n != name else v for n, v in candidates)
            errors.append("%s: version %s not in the repositories (offered: %s)" % (name, want, offer))
            continue
        resolved.append({"requested": name, "name": packages[0], "version": pick, "via": via,
                         "installed": installed.get(packages[0]), "replaces": pin["replaces"]})
    if errors:
        raise PinError("; ".join(errors), resolved=resolved)
    return resolved


PREFERENCES_HEADER = ("# Written by gpufleet.provision.package_pins (set %s): the pinned versions of this\n"
                      "# set. Change the node profile and run the role, not this file.\n")


def preferences_text(set_name, resolved):
    """The apt preferences file of a pin set: each package at its exact version, priority 1001 (wins over
    any repository, allows the downgrade back to the pin)."""
    blocks = ["Package: %s\nPin: version %s\nPin-Priority: 1001\n" % (r["name"], r["version"])
              for r in sorted(resolved, key=lambda r: r["name"])]
    return PREFERENCES_HEADER % set_name + "".join("\n" + b for b in blocks)


def plan(resolved, installed, held, preferences_current=None, preferences_wanted=None):
    """What ``state=present`` changes, from current state only (so check mode predicts it exactly).

    - install: pins whose installed version differs (or is absent), as (name, version, old);
    - remove: installed packages matching a pin's ``replaces`` patterns that are not pinned names
      (a different branch held on the node is replaced, not stacked);
    - unhold: held packages that change version or are removed (a hold blocks both);
    - hold: pinned packages not held yet (and those unheld to be changed);
    - preferences: (before, after) when the file's content changes (apt only).
    """
    pinned = set(r["name"] for r in resolved)
    install = [(r["name"], r["version"], installed.get(r["name"])) for r in resolved
               if installed.get(r["name"]) != r["version"]]
    remove = []
    for r in resolved:
        for name in sorted(installed):
            if name not in pinned and name not in remove and any(fnmatch.fnmatchcase(name, p) for p in r["replaces"]):
                remove.append(name)
    changing = set(item[0] for item in install) | set(remove)
    unhold = sorted(n for n in changing if n in held)
    hold = sorted(n for n in pinned if n not in held or n in unhold)
    out = {"install": install, "remove": remove, "unhold": unhold, "hold": hold, "preferences": None}
    if preferences_wanted is not None and preferences_current != preferences_wanted:
        out["preferences"] = (preferences_current, preferences_wanted)
    return out


def plan_changes(p):
    return bool(p["install"] or p["remove"] or p["unhold"] or p["hold"] or p["preferences"])


def describe(p):
    """Human lines of a plan (the summary and the diff)."""
    lines = ["install %s=%s%s" % (n, v, " (now %s)" % old if old else "") for n, v, old in p["install"]]
    lines += ["remove %s (replaced)" % n for n in p["remove"]]
    lines += ["unhold %s" % n for n in p["unhold"] if n in p["remove"]]
    lines += ["hold %s" % n for n in p["hold"]]
    if p["preferences"]:
        lines.append("write the apt preferences of the pin set")
    return lines


def state_text(names, installed, held):
    """One line per package (the --diff before/after): ``name version [held]``."""
    return "".join("%s %s%s\n" % (n, installed.get(n) or "(not installed)", " held" if n in held else "")
                   for n in sorted(names))
